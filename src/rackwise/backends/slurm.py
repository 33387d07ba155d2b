"""The Slurm backend: rackwise decides order and placement, Slurm runs the jobs.

Jobs rackwise manages carry a ``rackwise;...`` comment (see `slurm_jobs`)
and wait in Slurm held. A start pins the job to the nodes its GPUs are on
(``scontrol update JobId=N NumNodes=K-K ReqNodeList=...``) and releases it;
a preemption requeues it held (``scontrol requeuehold``). State is read
from ``squeue --json`` and ``sinfo --json`` every round, so a restarted
driver picks up where the last one stopped.

GPU pinning is per node and by count: Slurm picks which GPU indices of a
node a job gets, and how a multi-node job's GPUs split across its nodes.
Once a job runs, the view shows the indices Slurm gave it (``gres_detail``).
A split other than the policy's can leave a node short for the next job
decided onto it: that job waits for the node (it never spills onto another),
and is handed back to the policy if it waits past ``start_timeout_s``.

The workload clock: ``now = (wall - t0) * time_scale``, with ``t0`` and the
scale read from the jobs' comments when the backend is not given them.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from rackwise.backends.base import INF, FailedJob, Outcome, Snapshot
from rackwise.backends.slurm_cli import (
    SlurmCli,
    SlurmCommandError,
    gpu_count,
    gpu_indices,
    job_gpu_count,
)
from rackwise.backends.slurm_jobs import decode_tags, encode_tags, float_tag
from rackwise.backends.slurm_topology import discover, match_spec
from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import Topology
from rackwise.engine.view import ClusterView
from rackwise.metrics.records import JobRecord
from rackwise.perf.base import IdealPerf, PerfModel
from rackwise.policies.base import Decisions
from rackwise.workload.job import Job
from rackwise.workload.state import JobState, Status

if TYPE_CHECKING:
    from rackwise.engine.snapshot import ClusterSnapshot

log = logging.getLogger("rackwise.serve.slurm")

RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STOPPED",
                            "RESIZING", "SIGNALING", "STAGE_OUT"})
FAILED_STATES = frozenset({"FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                           "BOOT_FAIL", "DEADLINE", "PREEMPTED", "REVOKED"})
RELAUNCH_GAP_S = 2.0  # real seconds between a requeue and the next launch of the job
NODE_SETTLE_S = 5.0  # real seconds a node that was down stays out once it answers again
USABLE_NODE_STATES = frozenset({"idle", "mixed", "allocated", "completing"})
UNUSABLE_NODE_FLAGS = frozenset({"DRAIN", "DRAINING", "DRAINED", "NOT_RESPONDING", "FAIL",
                                 "MAINTENANCE", "POWER_DOWN", "POWERED_DOWN", "POWERING_DOWN",
                                 "REBOOT_REQUESTED", "REBOOT_ISSUED", "RESERVED", "INVALID",
                                 "INVALID_REG"})


@dataclass
class _Managed:
    """One rackwise job as Slurm reported it this round."""

    slurm_id: int
    tags: dict[str, str]
    job: Job
    kind: str  # waiting | pending | starting | running | finished | failed
    restart_cnt: int
    held: bool
    raw: Mapping[str, Any]
    state: JobState | None = None
    nodes: list[str] = field(default_factory=list)


class SlurmBackend:
    """Runs rackwise decisions on a Slurm cluster.

    Args:
        cli: How to reach Slurm (default: the clients on PATH).
        partition: Only this partition's nodes and jobs (default: all).
        topology: A rackwise cluster matching the partition's GPU nodes in
            natural name order; default: read from Slurm (racks from
            ``topology.conf``).
        node_names: Slurm name of each topology node (with ``topology``).
        time_scale: Workload seconds per real second; default: the jobs' own.
        t0: Unix time of workload second 0; default: the jobs' own.
        poll_s: Real seconds between reads of Slurm's state.
        start_timeout_s: Real seconds a released job may take to run before
            it is held again and handed back to the policy.
        perf: Rate model for the view's progress estimates (default: trace speeds).
        clock, sleep: Wall clock and sleep (tests replace them).
    """

    name: ClassVar[str] = "slurm"

    def __init__(self, *, cli: SlurmCli | None = None, partition: str | None = None,
                 topology: Topology | None = None, node_names: tuple[str, ...] | None = None,
                 time_scale: float | None = None, t0: float | None = None,
                 poll_s: float = 1.0, start_timeout_s: float = 30.0,
                 perf: PerfModel | None = None, default_gpu_type: str = "v100",
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.cli = cli or SlurmCli()
        self.partition = partition
        if topology is None:
            topology, node_names = discover(self.cli, partition, default_gpu_type)
        elif node_names is None:
            node_names = match_spec(topology, self.cli, partition)
        self.topology = topology
        self.node_names: tuple[str, ...] = tuple(node_names)
        self._node_id = {name: index for index, name in enumerate(self.node_names)}
        self.time_scale = time_scale
        self.t0 = t0
        self.poll_s = poll_s
        self.start_timeout_s = start_timeout_s
        self.perf: PerfModel = perf if perf is not None else IdealPerf(checkpoint_restore_s=0.0)
        self._clock = clock
        self._sleep = sleep
        self._created = clock()
        # Memory that only sharpens estimates; all of it can be lost on a restart.
        self._last_wall: float | None = None
        self._last_kind: dict[int, tuple[str, int]] = {}
        self._run_start: dict[tuple[int, int], float] = {}
        self._released: dict[int, float] = {}
        self._intended: dict[int, tuple[int, ...]] = {}
        self._unaccounted: dict[str, int] = {}  # node -> GPUs Slurm counted used, no job held
        self._back_since: dict[str, float | None] = {}  # node seen down -> wall seen up again
        self._warned_unaccounted: set[str] = set()
        self._records: dict[str, JobRecord] = {}
        self._current: dict[str, _Managed] = {}

    # ---------------------------------------------------------------- clock
    def wall_to_now(self, wall: float) -> float:
        assert self.t0 is not None and self.time_scale is not None
        return (wall - self.t0) * self.time_scale

    def now_to_wall(self, now: float) -> float:
        assert self.t0 is not None and self.time_scale is not None
        return self.t0 + now / self.time_scale

    def _resolve_clock(self, raw_jobs: list[dict[str, Any]]) -> None:
        if self.t0 is not None and self.time_scale is not None:
            return
        # Jobs still active first: finished ones may be left from an earlier window.
        tagged = sorted(((str(j.get("job_state", "")).upper() in FAILED_STATES | {"COMPLETED"},
                          int(j.get("job_id", 0))), t) for j in raw_jobs
                        if (t := decode_tags(j.get("comment"))) is not None)
        if tagged:
            tagged = [item for item in tagged if item[0][0] == tagged[0][0][0]]
        t0s = [float_tag(t, "t0", INF) for _, t in tagged]
        scales = [float_tag(t, "scale", 0.0) for _, t in tagged]
        if self.t0 is None:
            finite = [t for t in t0s if t < INF]
            self.t0 = min(finite) if finite else self._created
        if self.time_scale is None:
            found = [s for s in scales if s > 0]
            self.time_scale = found[0] if found else 1.0

    # -------------------------------------------------------------- observe
    def observe(self) -> Snapshot:
        raw_jobs, raw_nodes, wall, now, managed = self._read()
        self._reconcile(managed, wall, now)
        snapshot = self._build(managed, raw_jobs, raw_nodes, wall, now)
        self._last_wall = wall
        self._last_kind = {m.slurm_id: (m.kind, m.restart_cnt) for m in managed.values()}
        self._current = managed
        return snapshot

    def _read(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float, float,
                             dict[str, _Managed]]:
        """Slurm's jobs and nodes, the wall and trace clocks, and our jobs among them, classified."""
        raw_jobs = self.cli.jobs()
        raw_nodes = self.cli.nodes()
        wall = self._clock()
        self._resolve_clock(raw_jobs)
        now = self.wall_to_now(wall)
        return raw_jobs, raw_nodes, wall, now, self.classify(raw_jobs, now)

    def snapshot(self) -> ClusterSnapshot:
        """The cluster for a forecast (`backends.base.SnapshotSource`), read without changing it.

        Unlike `observe`, nothing is held or re-tagged. Each job's predicted
        duration is its own ``duration_s`` (the trace's, or its time limit),
        and jobs whose trace submit time is still to come are ``arrivals``.
        """
        from rackwise.engine.snapshot import from_view

        raw_jobs, raw_nodes, wall, now, managed = self._read()
        observed = self._build(managed, raw_jobs, raw_nodes, wall, now)
        waiting = [m.job for m in managed.values() if m.kind == "waiting"]
        return from_view(observed.view, now, source=self.name, arrivals=waiting,
                         node_names=self.node_names, taken_wall_s=wall)

    def classify(self, raw_jobs: list[dict[str, Any]], now: float) -> dict[str, _Managed]:
        """The jobs this backend manages among ``raw_jobs`` (tagged by rackwise), one per trace job."""
        chosen: dict[str, _Managed] = {}
        for raw in sorted(raw_jobs, key=lambda j: int(j.get("job_id", 0))):
            tags = decode_tags(raw.get("comment"))
            if tags is None or "job" not in tags:
                continue
            if self.partition is not None and raw.get("partition") != self.partition:
                continue
            managed = self._managed(raw, tags, now)
            if managed.kind in ("finished", "failed") and self._from_earlier_window(raw, tags):
                continue  # left over from an earlier window
            previous = chosen.get(managed.job.job_id)
            if previous is not None and previous.kind not in ("finished", "failed"):
                if managed.kind not in ("finished", "failed"):
                    log.warning("Slurm jobs %d and %d both carry rackwise job %s; using %d",
                                previous.slurm_id, managed.slurm_id, managed.job.job_id,
                                previous.slurm_id)
                continue
            chosen[managed.job.job_id] = managed
        return chosen

    def _from_earlier_window(self, raw: Mapping[str, Any], tags: dict[str, str]) -> bool:
        """Whether an ended job belongs to a window before this one.

        A job submitted by `submit_held` carries its window's ``t0``: that
        decides exactly. Otherwise its end time does, though Slurm keeps it
        in whole seconds, so a job that ended within a second of ``t0`` counts
        as this window's.
        """
        if self.t0 is None:
            return False
        if "t0" in tags:
            return float_tag(tags, "t0", self.t0) < self.t0 - 1e-3
        end = raw.get("end_time")
        return isinstance(end, (int, float)) and 0 < end < self.t0 - 1

    def _managed(self, raw: Mapping[str, Any], tags: dict[str, str], now: float) -> _Managed:
        assert self.t0 is not None and self.time_scale is not None
        slurm_id = int(raw["job_id"])
        n_gpus = int(float_tag(tags, "gpus", 0)) or job_gpu_count(raw)
        if "submit_s" in tags:
            job_t0 = float_tag(tags, "t0", self.t0)
            submit_s = (job_t0 - self.t0) * self.time_scale + float_tag(tags, "submit_s", 0.0)
        else:
            submit_s = self.wall_to_now(float(raw.get("submit_time") or self._created))
        limit_min = raw.get("time_limit")
        default_duration = float(limit_min) * 60 if isinstance(limit_min, int) and limit_min > 0 else 3600.0
        job = Job(job_id=tags["job"], submit_time=submit_s, n_gpus=max(1, n_gpus),
                  duration_s=float_tag(tags, "duration_s", default_duration))
        state = str(raw.get("job_state") or "").upper()
        restart_cnt = int(raw.get("restart_cnt") or 0)
        held = int(raw.get("priority") or 0) == 0 or str(raw.get("state_reason", "")).startswith("JobHeld")
        if state == "COMPLETED":
            kind = "finished"
        elif state in FAILED_STATES:
            kind = "failed"
        elif state in RUNNING_STATES:
            kind = "running"
        elif held:
            kind = "waiting" if submit_s > now and restart_cnt == 0 and "first_s" not in tags else "pending"
        elif "rc" in tags and restart_cnt == int(float_tag(tags, "rc", -1)) and raw.get("required_nodes"):
            kind = "starting"
        else:
            kind = "requeued"  # Slurm put it back in the queue itself (a node failed)
        return _Managed(slurm_id, tags, job, kind, restart_cnt, held, raw)

    def _reconcile(self, managed: dict[str, _Managed], wall: float, now: float) -> None:
        """Take back jobs Slurm requeued, and starts that did not happen in time."""
        for m in managed.values():
            if m.kind == "requeued":
                lost_s = self._lost_run_s(m, now)
                log.warning("job %s (Slurm %d) was requeued by Slurm (%s), losing %.0f s of its "
                            "last run; holding it for the policy", m.job.job_id, m.slurm_id,
                            m.raw.get("state_reason"), lost_s)
                self._hold(m, now, lost_s=float_tag(m.tags, "lost_s", 0.0) + lost_s)
            elif m.kind == "starting":
                released = self._released.setdefault(m.slurm_id, wall)
                if wall - released > self.start_timeout_s:
                    log.warning("job %s (Slurm %d) did not run within %g s of its release (%s); "
                                "holding it again", m.job.job_id, m.slurm_id, self.start_timeout_s,
                                m.raw.get("state_reason"))
                    self._hold(m, now)
            elif m.kind == "running" and self._tagged_run_start(m, m.restart_cnt) is None:
                # Kept in the comment, so that a restarted driver knows this run's start
                # (and the job's attained service) as exactly as this one does.
                start = self._estimate_run_start(m, wall)
                first = {} if "first_s" in m.tags else {"first_s": start}
                self._set_tags(m, started_s=start, **first)

    def _lost_run_s(self, m: _Managed, now: float) -> float:
        """The run a failure ended: its progress since the last checkpoint (the last
        preemption, which records ``run_s``) is lost. It ran until the failure was seen."""
        run = int(float_tag(m.tags, "rc", m.restart_cnt - 1))
        start = self._run_start.get((m.slurm_id, run), self._tagged_run_start(m, run))
        if start is None:  # it started and failed while no driver watched
            log.warning("job %s: the run a failure ended was never seen; its lost time is "
                        "not counted", m.job.job_id)
            return 0.0
        return max(0.0, now - start)

    def _hold(self, m: _Managed, now: float, **tags: float) -> None:
        try:
            self.cli.run(["scontrol", "hold", str(m.slurm_id)])
            self._set_tags(m, queued_s=now, **tags)
        except SlurmCommandError as exc:
            log.error("cannot hold job %s: %s", m.job.job_id, exc)
            return
        m.kind, m.held = "pending", True
        self._released.pop(m.slurm_id, None)

    def _set_tags(self, m: _Managed, **changes: float) -> None:
        tags = dict(m.tags)
        tags.update({key: f"{value:.6f}".rstrip("0").rstrip(".") for key, value in changes.items()})
        tags.pop("job", None)
        comment = encode_tags({"job": m.job.job_id, **tags})
        try:
            self.cli.run(["scontrol", "update", f"JobId={m.slurm_id}", f"Comment={comment}"])
        except SlurmCommandError as exc:
            log.error("cannot record progress of job %s: %s", m.job.job_id, exc)
            return
        m.tags = {"job": m.job.job_id, **tags}

    # ---------------------------------------------------------------- build
    def _build(self, managed: dict[str, _Managed], raw_jobs: list[dict[str, Any]],
               raw_nodes: list[dict[str, Any]], wall: float, now: float) -> Snapshot:
        topology = self.topology
        allocation = Allocation(topology)
        running_list = sorted((m for m in managed.values() if m.kind == "running"),
                              key=lambda m: m.slurm_id)
        starting_list = sorted((m for m in managed.values() if m.kind == "starting"),
                               key=lambda m: m.slurm_id)
        placed: dict[int, tuple[int, ...]] = {}
        for m in running_list:
            placed[m.slurm_id] = self._take_running(allocation, m)
        self._take_foreign(allocation, raw_jobs, managed)
        self._take_unusable(allocation, raw_nodes, wall)
        self._take_unaccounted(allocation, raw_nodes)  # Slurm's count leaves out starting jobs
        for m in starting_list:
            placed[m.slurm_id] = self._take_starting(allocation, m)

        running: list[JobState] = []
        pending: list[tuple[float, float, int, JobState]] = []
        finished: dict[str, JobState] = {}
        failed: dict[str, FailedJob] = {}
        n_waiting, next_arrival = 0, INF
        for m in managed.values():
            if m.kind in ("running", "starting"):
                state = self._running_state(m, placed[m.slurm_id], wall, now)
                running.append(state)
            elif m.kind == "pending":
                state = self._pending_state(m)
                pending.append((state.queued_since, m.job.submit_time, m.slurm_id, state))
            elif m.kind == "waiting":
                n_waiting += 1
                next_arrival = min(next_arrival, m.job.submit_time)
            elif m.kind == "finished":
                finished[m.job.job_id] = self._finished_state(m, wall)
            else:
                failed[m.job.job_id] = FailedJob(m.job, f"Slurm job {m.slurm_id} ended "
                                                 f"{m.raw.get('job_state')} ({m.raw.get('state_reason')})")
        running.sort(key=lambda s: (s.run_start, s.job_id))
        pending.sort(key=lambda item: item[:3])
        view = ClusterView(topology, allocation, {s.job_id: s for *_, s in pending},
                           {s.job_id: s for s in running}, self.perf)
        view.now = now
        return Snapshot(now=now, view=view, finished=finished, failed=failed,
                        n_waiting=n_waiting, next_arrival=next_arrival)

    def _take_running(self, allocation: Allocation, m: _Managed) -> tuple[int, ...]:
        raw = m.raw
        resources = raw.get("job_resources") or {}
        hosts = [str(n.get("nodename")) for n in resources.get("allocated_nodes") or []]
        if not hosts:
            hosts = self.cli.hostnames(str(raw.get("nodes") or "")) if raw.get("nodes") else []
        details = list(raw.get("gres_detail") or [])
        m.nodes = hosts
        chosen: list[int] = []
        counts: dict[int, int] = {}
        for index, host in enumerate(hosts):
            node_id = self._node_id.get(host)
            if node_id is None:
                continue
            node = self.topology.nodes[node_id]
            indices = gpu_indices(details[index]) if index < len(details) else None
            if indices is None:
                counts[node_id] = m.job.n_gpus // max(1, len(hosts))
                continue
            for gpu_index in indices:
                gpu = node.first_gpu + gpu_index
                if gpu_index < node.n_gpus and allocation.owner[gpu] is None and gpu not in chosen:
                    chosen.append(gpu)
                else:
                    counts[node_id] = counts.get(node_id, 0) + 1
        for node_id, count in counts.items():
            free = [g for g in allocation.free_gpu_ids(node_id) if g not in chosen]
            chosen.extend(free[:count])
        allocation.allocate(m.job.job_id, chosen)
        return tuple(sorted(chosen))

    def _take_starting(self, allocation: Allocation, m: _Managed) -> tuple[int, ...]:
        hosts = self.cli.hostnames(str(m.raw.get("required_nodes") or ""))
        m.nodes = hosts
        node_ids = [self._node_id[h] for h in hosts if h in self._node_id]
        intended = self._intended.get(m.slurm_id, ())
        owner = allocation.owner
        if (len(intended) == m.job.n_gpus and all(owner[g] is None for g in intended)
                and {self.topology.gpu_node[g] for g in intended} == set(node_ids)):
            chosen = list(intended)
        else:
            chosen = []
            for left, node_id in zip(range(len(node_ids), 0, -1), node_ids):
                share = -(-(m.job.n_gpus - len(chosen)) // left)
                chosen.extend(allocation.free_gpu_ids(node_id)[:share])
        allocation.allocate(m.job.job_id, chosen)
        return tuple(sorted(chosen))

    def _take_foreign(self, allocation: Allocation, raw_jobs: list[dict[str, Any]],
                      managed: Mapping[str, _Managed]) -> None:
        ours = {m.slurm_id for m in managed.values()}
        for raw in raw_jobs:
            slurm_id = int(raw.get("job_id", 0))
            if slurm_id in ours or str(raw.get("job_state", "")).upper() not in RUNNING_STATES:
                continue
            hosts = [str(n.get("nodename")) for n in
                     (raw.get("job_resources") or {}).get("allocated_nodes") or []]
            for host, detail in zip(hosts, raw.get("gres_detail") or []):
                node_id = self._node_id.get(host)
                if node_id is None:
                    continue
                node = self.topology.nodes[node_id]
                gpus = [node.first_gpu + i for i in gpu_indices(detail) or [] if i < node.n_gpus]
                allocation.allocate(f"!job:{slurm_id}",
                                    [g for g in gpus if allocation.owner[g] is None])

    def _take_unusable(self, allocation: Allocation, raw_nodes: list[dict[str, Any]], wall: float) -> None:
        """Hold the GPUs of nodes that are down, and of nodes back up for less than `NODE_SETTLE_S`.

        When a node that failed answers again, slurmctld ends the runs it lost
        there, by job id: a job requeued by the failure and launched on the node
        at once is cancelled with them (Slurm 22.05: "CANCELLED ... DUE TO NODE
        FAILURE" a fraction of a second after the launch). So the node waits a
        few seconds before it takes jobs again.
        """
        seen = set()
        for node in raw_nodes:
            name = str(node.get("name"))
            node_id = self._node_id.get(name)
            if node_id is None:
                continue
            seen.add(name)
            state = str(node.get("state") or "").lower()
            flags = {str(f).upper() for f in node.get("state_flags") or []}
            if not self._usable(name, state in USABLE_NODE_STATES and not flags & UNUSABLE_NODE_FLAGS, wall):
                allocation.allocate(f"!down:{name}", allocation.free_gpu_ids(node_id))
        for name in self.node_names:
            if name not in seen:
                self._usable(name, False, wall)
                allocation.allocate(f"!down:{name}", allocation.free_gpu_ids(self._node_id[name]))

    def _usable(self, name: str, up: bool, wall: float) -> bool:
        """Whether a node takes jobs: it is ``up``, and has been for `NODE_SETTLE_S` if it was seen down."""
        if not up:
            self._back_since[name] = None
            return False
        if name not in self._back_since:
            return True
        back = self._back_since[name]
        if back is None:
            back = self._back_since[name] = wall
            log.warning("node %s answers again; it takes jobs in %g s, once Slurm has ended the runs "
                        "it lost", name, NODE_SETTLE_S)
        if wall - back < NODE_SETTLE_S:
            return False
        del self._back_since[name]
        return True

    def _take_unaccounted(self, allocation: Allocation, raw_nodes: list[dict[str, Any]]) -> None:
        """Hold GPUs that Slurm counts as used on a node though no job it lists holds them.

        Slurm's GPU accounting can keep a requeued multi-node job's GPUs after it
        left (22.05 logs "gres/gpu: job N dealloc of node X bad node_offset"); no
        job can use them until slurmctld restarts, so a policy must not count on
        them. A surplus seen once may be a job that started between the two reads
        of a poll, so it is held from the second poll in a row on.
        """
        surplus: dict[str, int] = {}
        for node in raw_nodes:
            name = str(node.get("name"))
            node_id = self._node_id.get(name)
            if node_id is None:
                continue
            used = gpu_count(str(node.get("gres_used") or ""))
            held = self.topology.nodes[node_id].n_gpus - allocation.free_in_node(node_id)
            if used > held:
                surplus[name] = used - held
                if name in self._unaccounted:
                    n = min(surplus[name], self._unaccounted[name])
                    allocation.allocate(f"!unaccounted:{name}", allocation.free_gpu_ids(node_id)[:n])
                    if name not in self._warned_unaccounted:
                        self._warned_unaccounted.add(name)
                        log.warning("Slurm counts %d GPU(s) of %s as used that no job holds; "
                                    "they are left out until Slurm frees them (a slurmctld "
                                    "restart does)", n, name)
        self._unaccounted = surplus

    # --------------------------------------------------------------- states
    def _estimate(self, slurm_s: Any, was_before: bool, wall: float) -> float:
        """Wall time of a transition Slurm stamped in whole seconds, sharpened by our polls."""
        if not isinstance(slurm_s, (int, float)) or slurm_s <= 0:
            return wall
        low, high = float(slurm_s), min(float(slurm_s) + 1.0, wall)
        if was_before and self._last_wall is not None:
            low = max(low, self._last_wall)
        if low > high:
            return high
        return (low + high) / 2

    @staticmethod
    def _tagged_run_start(m: _Managed, restart_cnt: int) -> float | None:
        """The start of the run released at ``restart_cnt``, if a driver recorded it."""
        if "started_s" not in m.tags or float_tag(m.tags, "rc", -1) != restart_cnt:
            return None
        return float_tag(m.tags, "started_s", 0.0)

    def _estimate_run_start(self, m: _Managed, wall: float) -> float:
        key = (m.slurm_id, m.restart_cnt)
        if key not in self._run_start and (tagged := self._tagged_run_start(m, m.restart_cnt)) is not None:
            self._run_start[key] = tagged
        if key not in self._run_start:
            previous = self._last_kind.get(m.slurm_id)
            was_before = previous is not None and (previous[0] != "running" or previous[1] != m.restart_cnt)
            self._run_start[key] = self.wall_to_now(
                self._estimate(m.raw.get("start_time"), was_before, wall))
        return self._run_start[key]

    def _base_state(self, m: _Managed) -> JobState:
        state = JobState(m.job)
        prior_s = float_tag(m.tags, "run_s", 0.0)
        rate = m.job.total_iters / m.job.duration_s if m.job.duration_s > 0 else 1.0
        state.iters_done = min(m.job.total_iters, prior_s * rate)
        state.run_time_s = prior_s
        state.attained_gpu_s = prior_s * m.job.n_gpus
        state.n_preemptions = m.restart_cnt
        state.queued_since = float_tag(m.tags, "queued_s", m.job.submit_time)
        if "first_s" in m.tags:
            state.first_start = float_tag(m.tags, "first_s", 0.0)
        return state

    def _running_state(self, m: _Managed, gpu_ids: tuple[int, ...], wall: float,
                       now: float) -> JobState:
        state = self._base_state(m)
        if m.kind == "running":
            start = self._estimate_run_start(m, wall)
        else:  # released, not yet running: it holds its GPUs from now on
            start = now
        state.status = Status.RUNNING
        state.gpu_ids = gpu_ids
        state.run_start = state.last_update = state.busy_until = start
        if state.first_start is None:
            state.first_start = start
        state.rate_iters_per_s = self.perf.rate(m.job, gpu_ids, {}) if gpu_ids else 0.0
        state.n_nodes, state.n_racks = self.topology.spread(gpu_ids) if gpu_ids else (0, 0)
        m.state = state
        return state

    def _pending_state(self, m: _Managed) -> JobState:
        state = self._base_state(m)
        state.last_update = max(state.queued_since, m.job.submit_time)
        m.state = state
        return state

    def _finished_state(self, m: _Managed, wall: float) -> JobState:
        record = self._records.get(m.job.job_id)
        if record is None:
            previous = self._last_kind.get(m.slurm_id)
            run_start = self._estimate_run_start(m, wall)
            finish = self.wall_to_now(self._estimate(
                m.raw.get("end_time"), previous is not None and previous[0] != "finished", wall))
            finish = max(finish, run_start)
            prior_s = float_tag(m.tags, "run_s", 0.0)
            lost_s = float_tag(m.tags, "lost_s", 0.0)
            run_time = prior_s + lost_s + finish - run_start
            first = float_tag(m.tags, "first_s", run_start)
            hosts = self.cli.hostnames(str(m.raw.get("nodes") or "")) if m.raw.get("nodes") else []
            racks = {self.topology.nodes[self._node_id[h]].rack_id for h in hosts if h in self._node_id}
            jct = finish - m.job.submit_time
            record = JobRecord(
                job_id=m.job.job_id, group=None, model=None, n_gpus=m.job.n_gpus,
                submit_time=m.job.submit_time, first_start=first, finish_time=finish, jct_s=jct,
                queueing_delay_s=jct - run_time, run_time_s=run_time, overhead_s=0.0,
                gpu_s=run_time * m.job.n_gpus, n_preemptions=m.restart_cnt, n_nodes=len(hosts),
                n_racks=len(racks), duration_s=m.job.duration_s, total_iters=m.job.total_iters,
                lost_s=lost_s)
            self._records[m.job.job_id] = record
        state = JobState(m.job)
        state.status = Status.FINISHED
        state.first_start = record.first_start
        state.finish_time = record.finish_time
        state.iters_done = m.job.total_iters
        state.run_time_s = record.run_time_s
        state.n_preemptions = record.n_preemptions
        return state

    # ---------------------------------------------------------------- apply
    def apply(self, decisions: Decisions, snapshot: Snapshot) -> list[Outcome]:
        outcomes: list[Outcome] = []
        requeued: set[str] = set()
        for job_id in decisions.preempt:
            outcome = self._preempt(job_id, snapshot.now)
            if outcome.ok:
                requeued.add(job_id)
            outcomes.append(outcome)
        for start in decisions.start:
            outcomes.append(self._start(start.job_id, start.gpu_ids, snapshot.now,
                                        job_id_requeued=start.job_id in requeued))
        return outcomes

    def _preempt(self, job_id: str, now: float) -> Outcome:
        m = self._current.get(job_id)
        if m is None:
            return Outcome("preempt", job_id, False, "not a job this backend manages")
        if m.kind == "running" and (why := self._ending(m, now)):
            return Outcome("preempt", job_id, False, why)
        try:
            if m.kind == "starting":
                self.cli.run(["scontrol", "hold", str(m.slurm_id)])
                self._set_tags(m, queued_s=now)
            else:
                # The requeue's time is tagged before it too: a driver killed between the two
                # still leaves a restarted one the time it must wait (`_start`).
                self._set_tags(m, requeued_wall=self._clock())
                self.cli.run(["scontrol", "requeuehold", str(m.slurm_id)])
                elapsed = max(0.0, now - m.state.run_start) if m.state is not None else 0.0
                self._set_tags(m, run_s=float_tag(m.tags, "run_s", 0.0) + elapsed, queued_s=now,
                               requeued_wall=self._clock())
                m.restart_cnt += 1
        except SlurmCommandError as exc:
            return Outcome("preempt", job_id, False, str(exc))
        self._released.pop(m.slurm_id, None)
        return Outcome("preempt", job_id, True, nodes=tuple(m.nodes))

    def _ending(self, m: _Managed, now: float) -> str:
        """Why a running job must not be requeued now (empty if it may be).

        Slurm requeues a job whose end it has not taken in yet (completing, or
        ended while slurmctld was down, which it learns only minutes later) and
        runs its script once more. A job that is completing, or that has run its
        whole known duration (a replay's ``duration_s`` tag) but for one poll, the
        uncertainty of its start, is left to end.
        """
        if str(m.raw.get("job_state") or "").upper() == "COMPLETING":
            return "it is completing"
        if "duration_s" in m.tags and m.state is not None:
            done = float_tag(m.tags, "run_s", 0.0) + max(0.0, now - m.state.run_start)
            if done + self.poll_s * (self.time_scale or 1.0) >= m.job.duration_s:
                return "it has run its whole duration; Slurm has not reported its end yet"
        return ""

    def _start(self, job_id: str, gpu_ids: tuple[int, ...], now: float, *,
               job_id_requeued: bool) -> Outcome:
        m = self._current.get(job_id)
        node_ids = sorted({self.topology.gpu_node[g] for g in gpu_ids})
        hosts = tuple(self.node_names[n] for n in node_ids)
        if m is None:
            return Outcome("start", job_id, False, "not a job this backend manages", hosts)
        tags = dict(m.tags)
        tags["rc"] = str(m.restart_cnt)
        tags.pop("started_s", None)  # the last run's
        if job_id_requeued:
            tags["queued_s"] = f"{now:.6f}"
        tags.pop("job", None)
        comment = encode_tags({"job": job_id, **tags})
        # A job launched again within the second its last run was requeued is refused by the
        # nodes ("Job credential revoked") and Slurm fails it: it may begin a moment later.
        # The requeue's time is in the job's tags, so a restarted driver waits as long.
        begin = "now"
        if "requeued_wall" in m.tags:
            wait_s = math.ceil(float_tag(m.tags, "requeued_wall", 0.0) + RELAUNCH_GAP_S - self._clock())
            begin = f"now+{wait_s}" if wait_s > 0 else begin
        try:
            # min and max: with a minimum alone Slurm may add nodes when the chosen ones are short
            self.cli.run(["scontrol", "update", f"JobId={m.slurm_id}", f"NumNodes={len(hosts)}-{len(hosts)}",
                          f"ReqNodeList={','.join(hosts)}", f"StartTime={begin}", f"Comment={comment}"])
            m.tags = {"job": job_id, **tags}
            self.cli.run(["scontrol", "release", str(m.slurm_id)])
        except SlurmCommandError as exc:
            return Outcome("start", job_id, False, str(exc), hosts)
        self._released[m.slurm_id] = self._clock()
        self._intended[m.slurm_id] = tuple(gpu_ids)
        return Outcome("start", job_id, True, nodes=hosts)

    # ----------------------------------------------------------------- wait
    def wait(self, deadline: float) -> bool:
        target = self._clock() + self.poll_s
        if deadline < INF and self.t0 is not None:
            target = min(target, self.now_to_wall(deadline))
        self._sleep(max(0.0, target - self._clock()))
        return True

    def records(self) -> list[JobRecord]:
        return sorted(self._records.values(), key=lambda r: (r.finish_time, r.job_id))

