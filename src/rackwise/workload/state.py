"""`JobState`: what has happened to a job so far (owned by an engine).

Progress is kept lazily: ``iters_done`` is exact at ``last_update`` and
grows at ``rate_iters_per_s`` from then on, except while a restarted job
restores its checkpoint (until ``busy_until``), when it holds its GPUs but
makes no progress. A job still being launched (the simulator's start
latency) holds its GPUs with ``last_update`` and ``run_start`` in the
future: nothing accrues to it before then. Policies read these objects
through the view and must not change them.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Final

from mypy_extensions import mypyc_attr

from rackwise.workload.job import Job


class Status(str, Enum):  # noqa: UP042 (StrEnum would change how a status prints)
    WAITING = "waiting"  # submitted later than now (only in snapshots)
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"


# The members as module constants, for hot paths here and elsewhere: `Status.RUNNING`
# written in a function looks the member up on its class at each use (some 80 ns, in both builds).
PENDING: Final = Status.PENDING
RUNNING: Final = Status.RUNNING
FINISHED: Final = Status.FINISHED

# Every attribute of a `JobState`: its slots, and what a copy carries (`engine.snapshot`).
STATE_FIELDS = (
    "attained_gpu_s",
    "busy_until",
    "comm_extra_s",
    "comm_extra_s_per_iter",
    "comm_s",
    "comm_s_per_iter",
    "copies",
    "finish_time",
    "first_start",
    "gpu_ids",
    "gpu_share",
    "iters_done",
    "job",
    "job_id",
    "last_update",
    "n_gpus",
    "n_nodes",
    "n_preemptions",
    "n_racks",
    "overhead_s",
    "partner",
    "queued_since",
    "rate_iters_per_s",
    "run_start",
    "run_time_s",
    "status",
    "total_iters",
    "version",
)
# The fields of `job` a state keeps beside it (`JobState.swap_job`): a file carries them in the job alone.
JOB_FIELDS = ("gpu_share", "job_id", "n_gpus", "total_iters")


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class JobState:
    """Run-time state of one job."""

    __slots__ = STATE_FIELDS

    def __init__(self, job: Job) -> None:
        self.job = job
        # The job's own figures in slots, read on every hot path: compiled, a slot is read
        # directly, where a field of the (interpreted) `Job` is a look-up by name.
        self.job_id = job.job_id
        self.n_gpus = job.n_gpus
        self.gpu_share = job.gpu_share
        self.total_iters = job.total_iters
        self.status = PENDING
        self.gpu_ids: tuple[int, ...] = ()
        self.iters_done = 0.0
        self.rate_iters_per_s = 0.0
        self.last_update = job.submit_time
        self.busy_until = job.submit_time
        self.run_start = job.submit_time
        self.first_start: float | None = None
        self.finish_time: float | None = None
        self.n_preemptions = 0
        self.attained_gpu_s = 0.0  # GPU-seconds held, including restore time
        self.queued_since = job.submit_time  # when it last entered the queue
        self.run_time_s = 0.0  # wall time held GPUs, over all runs
        self.overhead_s = 0.0  # wall time spent restoring checkpoints
        self.version = 0  # bumped whenever the predicted finish changes
        self.n_nodes = 0
        self.n_racks = 0
        self.copies = 1  # forked copies training at once, each on n_gpus GPUs
        self.partner: str | None = None  # the running job sharing its GPUs (space sharing)
        # Communication accounting, fed by performance models that track it:
        # totals so far, and the per-iteration figures at the current rate.
        self.comm_s = 0.0
        self.comm_extra_s = 0.0  # of which beyond a fully consolidated placement
        self.comm_s_per_iter = 0.0
        self.comm_extra_s_per_iter = 0.0

    def copy(self) -> JobState:
        """A field-by-field copy (the job record, immutable, is shared)."""
        twin = JobState(self.job)
        # Every field of `STATE_FIELDS` but ``job``, spelt out: the compiled build copies each directly.
        twin.attained_gpu_s, twin.busy_until = self.attained_gpu_s, self.busy_until
        twin.comm_extra_s, twin.comm_extra_s_per_iter = self.comm_extra_s, self.comm_extra_s_per_iter
        twin.comm_s, twin.comm_s_per_iter = self.comm_s, self.comm_s_per_iter
        twin.copies, twin.finish_time, twin.first_start = self.copies, self.finish_time, self.first_start
        twin.gpu_ids, twin.iters_done, twin.job_id = self.gpu_ids, self.iters_done, self.job_id
        twin.n_gpus, twin.gpu_share, twin.total_iters = self.n_gpus, self.gpu_share, self.total_iters
        twin.last_update, twin.n_nodes, twin.n_preemptions = self.last_update, self.n_nodes, self.n_preemptions
        twin.n_racks, twin.overhead_s, twin.partner = self.n_racks, self.overhead_s, self.partner
        twin.queued_since, twin.rate_iters_per_s = self.queued_since, self.rate_iters_per_s
        twin.run_start, twin.run_time_s = self.run_start, self.run_time_s
        twin.status, twin.version = self.status, self.version
        return twin

    def swap_job(self, job: Job) -> None:
        """Put another record of the same job in ``job`` (a forecast's rescaled copy)."""
        if job.job_id != self.job_id:
            raise ValueError(f"job {job.job_id!r} is not {self.job_id!r}")
        self.job = job
        self.n_gpus, self.gpu_share, self.total_iters = job.n_gpus, job.gpu_share, job.total_iters

    # ------------------------------------------------------------- lazy reads
    def iters_at(self, now: float) -> float:
        """Iterations done by ``now``."""
        if self.status is not RUNNING:
            return self.iters_done
        productive = now - max(self.last_update, self.busy_until)
        if productive <= 0.0:
            return self.iters_done
        return min(self.total_iters, self.iters_done + productive * self.rate_iters_per_s)

    def remaining_iters(self, now: float) -> float:
        return self.total_iters - self.iters_at(now)

    def attained_service_gpu_s(self, now: float) -> float:
        """GPU-seconds held so far (Tiresias' attained service)."""
        if self.status is RUNNING and now > self.last_update:  # not before it is launched
            return self.attained_gpu_s + self.n_gpus * self.gpu_share * self.copies * (
                now - self.last_update)
        return self.attained_gpu_s

    def executed_time_s(self, now: float) -> float:
        """Wall-clock seconds run so far, over all runs."""
        if self.status is RUNNING and now > self.last_update:
            return self.run_time_s + (now - self.last_update)
        return self.run_time_s

    def finish_eta(self) -> float:
        """When a running job finishes at its current rate (inf if it makes no progress)."""
        if self.rate_iters_per_s <= 0.0:
            return float("inf")
        start = max(self.last_update, self.busy_until)
        return start + (self.total_iters - self.iters_done) / self.rate_iters_per_s

    # --------------------------------------------------------- engine updates
    def advance(self, now: float) -> None:
        """Bring progress counters up to ``now`` (engines only)."""
        last = self.last_update
        if self.status is RUNNING and now > last:
            # NOTE: `iters_at` inlined, same arithmetic: the engine calls this for
            # every re-rated job, and the extra call was a visible share of a run.
            before = self.iters_done
            busy = self.busy_until
            productive = now - (last if last >= busy else busy)
            if productive > 0.0:
                total = self.total_iters
                grown = before + productive * self.rate_iters_per_s
                self.iters_done = total if total <= grown else grown
                if self.comm_s_per_iter:
                    done = self.iters_done - before
                    self.comm_s += done * self.comm_s_per_iter
                    self.comm_extra_s += done * self.comm_extra_s_per_iter
            elapsed = now - last
            self.attained_gpu_s += self.n_gpus * self.gpu_share * self.copies * elapsed
            self.run_time_s += elapsed
        if now > last:
            self.last_update = now

    def __repr__(self) -> str:
        return (f"JobState({self.job_id!r}, {self.status.value}, gpus={len(self.gpu_ids)}, "
                f"iters={self.iters_done:.6g}/{self.total_iters:.6g})")


def state_of(states: Mapping[str, JobState], job_id: str) -> JobState | None:
    """``states.get(job_id)``, through the mapping's own slots.

    Compiled, ``get`` on a `Mapping` is a method looked up by name at every
    call, and a view's read-only proxy looks it up again on the dict it
    wraps; ``in`` and ``[]`` go straight to the dict.
    """
    return states[job_id] if job_id in states else None  # noqa: SIM401 (the point)
