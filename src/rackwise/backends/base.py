"""The seam between the policy loop and a cluster manager, and the loop itself.

A `Backend` works like an HTTP transport: `observe` reports what the
cluster looks like now, as the same `ClusterView` the simulator hands a
policy, and `apply` carries out a policy's `Decisions` and says what
happened to each one. `serve` is the one driver loop every backend shares
(the in-process simulator, Slurm, later Kubernetes): observe, call the
policy hooks, ``policy.schedule(view, now)``, check, apply, wait.

Times are seconds on the workload clock (``Snapshot.now``). A backend that
replays a trace faster than real time maps wall time onto that clock.
"""

from __future__ import annotations

import dataclasses
import logging
import time as wallclock
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal, Protocol, runtime_checkable

from rackwise.backends import serve_state
from rackwise.engine.checks import ONLY_IN_SIMULATION, check_decisions
from rackwise.engine.contract import Decisions, Policy
from rackwise.engine.hooks import notify
from rackwise.engine.seeding import policy_rng
from rackwise.engine.snapshot import ClusterSnapshot, from_view
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError, RackwiseError
from rackwise.metrics.records import JobRecord
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

log = logging.getLogger("rackwise.serve")

INF = float("inf")
Action = Literal["start", "preempt"]


class BackendError(RackwiseError):
    """A cluster manager refused a command or could not be reached."""


class ServeStuckError(RackwiseError):
    """Jobs are waiting, yet the backend says nothing will ever happen again."""


@dataclass(frozen=True, slots=True)
class FailedJob:
    """A job the cluster manager gave up on, and why (one line)."""

    job: Job
    reason: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a backend saw at one instant.

    Attributes:
        now: The workload clock, seconds.
        view: Pending and running jobs and free GPUs, as a policy sees them.
            GPUs that no policy may use (a node that is down, a job the
            backend does not manage) are held by pseudo-owners whose names
            start with ``"!"``; they appear in no job table.
        finished: Jobs that completed, by id.
        failed: Jobs the cluster manager gave up on (cancelled, failed), by id.
        n_waiting: Jobs known to the backend that are not yet submitted on
            the workload clock (a trace replay).
        next_arrival: When the next of those is submitted (inf if none).
    """

    now: float
    view: ClusterView
    finished: Mapping[str, JobState] = field(default_factory=dict)
    failed: Mapping[str, FailedJob] = field(default_factory=dict)
    n_waiting: int = 0
    next_arrival: float = INF

    @property
    def idle(self) -> bool:
        """No job is pending, running or still to arrive."""
        return not (self.view.pending or self.view.running or self.n_waiting)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one decision.

    Attributes:
        action: ``"start"`` or ``"preempt"``.
        job_id: The job.
        ok: The backend carried it out (a start may still take a moment to run).
        detail: Empty, or a one-line reason it was not carried out.
        nodes: Backend names of the nodes a start was pinned to.
    """

    action: Action
    job_id: str
    ok: bool
    detail: str = ""
    nodes: tuple[str, ...] = ()


class Backend(Protocol):
    """A cluster manager as the driver loop sees it.

    Implementations must not decide anything: placement and order are the
    policy's. They must leave a job that could not be started where it was
    (pending, and for Slurm held), so the next round can try again.
    """

    name: ClassVar[str]

    def observe(self) -> Snapshot:
        """Read the cluster and its jobs now."""
        ...

    def apply(self, decisions: Decisions, snapshot: Snapshot) -> list[Outcome]:
        """Carry out preemptions, then starts; one outcome per decision, in that order.

        A refused command is an outcome with ``ok=False``, never an exception.
        """
        ...

    def wait(self, deadline: float) -> bool:
        """Return at ``deadline`` on the workload clock, or earlier if something changed.

        Returns False when nothing can ever change again (an in-process
        simulator with no events left); real clusters always return True.
        """
        ...

    def records(self) -> list[JobRecord]:
        """One record per job that has finished so far."""
        ...


class SnapshotSource(Protocol):
    """A backend that can describe itself for a forecast (``rackwise forecast``).

    ``snapshot()`` returns the same `rackwise.engine.snapshot.ClusterSnapshot`
    the simulator produces: running jobs with their GPUs and progress, the
    pending queue in order, GPUs nobody may use as ``held_gpus``, jobs known
    to arrive later as ``arrivals``, ``node_names`` and ``taken_wall_s``.
    Building one from an observed view is
    `rackwise.engine.snapshot.from_view`. It must only read: no holds, no
    comment or label writes, since a forecast may run beside a live loop.
    """

    def snapshot(self) -> ClusterSnapshot: ...


def snapshot_of_backend(backend: Backend) -> ClusterSnapshot:
    """``backend.snapshot()``, or one built from ``observe()`` for a backend without it.

    The fallback is right only for backends whose ``observe`` changes
    nothing on the cluster.
    """
    own = getattr(backend, "snapshot", None)
    if callable(own):
        return own()
    observed = backend.observe()
    return from_view(observed.view, observed.now, source=backend.name,
                     node_names=tuple(getattr(backend, "node_names", ())),
                     taken_wall_s=wallclock.time())


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One decision as the loop applied it, for the decision log.

    Attributes:
        now: Workload clock when the policy decided.
        wall_time: Unix time when the backend applied it.
        action: ``"start"`` or ``"preempt"``.
        job_id: The job.
        gpu_ids: GPUs the policy chose (starts only).
        nodes: Backend node names the start was pinned to.
        ok: The backend carried it out.
        detail: Why not, when ``ok`` is False.
    """

    now: float
    wall_time: float
    action: Action
    job_id: str
    gpu_ids: tuple[int, ...]
    nodes: tuple[str, ...]
    ok: bool
    detail: str = ""


class RoundObserver(Protocol):
    """Told about every round of the loop (the Prometheus exporter is one)."""

    def observe_round(self, snapshot: Snapshot, latency_s: float, decisions: Decisions,
                      outcomes: Sequence[Outcome]) -> None: ...


@dataclass
class ServeHealth:
    """How the loop itself is doing: what an operator's alert watches."""

    last_poll_wall: float = 0.0  # Unix time of the last read the cluster answered
    consecutive_errors: int = 0  # reads failed since then
    outages_recovered: int = 0  # spells of failed reads the cluster came back from
    restarts_recovered: int = 0  # starts that went on from a state file
    jobs_adopted: int = 0  # running jobs found on the cluster that this process did not start


@runtime_checkable
class HealthObserver(Protocol):
    """An observer that is also told of the loop's health, after every read of the cluster."""

    def observe_health(self, health: ServeHealth) -> None: ...


@dataclass
class ServeResult:
    """What one run of the loop did."""

    records: list[JobRecord]
    decisions: list[DecisionRecord]
    n_rounds: int
    stopped_idle: bool


def refuse_forking(policy: Policy) -> None:
    """Refuse, before the first round, a policy that forks jobs: a real cluster runs one copy of each.

    A policy whose forking is a switch (a ``copies`` field) is told how to turn it off.
    """
    if not policy.capabilities.forks:
        return
    names: set[str] = {f.name for f in dataclasses.fields(policy)} if dataclasses.is_dataclass(policy) else set()
    hint = "pass -p copies=false" if "copies" in names else "use it with `rackwise simulate`"
    raise InputError(f"{policy.name} forks jobs into copies, and a forked job (copies > 1) "
                     f"{ONLY_IN_SIMULATION}; {hint}", field="--policy")


def serve(backend: Backend, policy: Policy, *, poll_s: float | None = 1.0, seed: int = 0,
          exit_when_idle: bool = True, should_stop: Callable[[], bool] | None = None,
          observers: Sequence[RoundObserver] = (),
          on_decision: Callable[[DecisionRecord], None] | None = None,
          state_file: Path | None = None, max_outage_s: float | None = None) -> ServeResult:
    """Drive ``policy`` against ``backend`` until idle or told to stop.

    Each round: observe; tell the policy of jobs seen finished and of jobs
    seen for the first time, in the simulator's order (`rackwise.engine.hooks`;
    the first round after a restart without a state file sees every pending
    and running job arrive; a job the cluster moved against the policy's last
    decisions finishes and arrives again); ``schedule``; check the decisions whole
    (`rackwise.engine.checks`); apply them; wait until the earliest of the
    next poll, the policy's ``wake_at``, the next arrival and the next round.

    Args:
        backend: Where decisions are carried out.
        policy: Any policy; it is reset with the first view.
        poll_s: Workload seconds between rounds when nothing else is due;
            None waits for the backend's own events only (the simulator).
        seed: Seeds the policy's generator exactly as ``simulate`` does.
        exit_when_idle: Return once no job is pending, running or to arrive.
        should_stop: Polled every round; True ends the loop.
        observers: Told about every round (metrics exporters).
        on_decision: Called with every applied decision (decision logs).
        state_file: Keep the loop's state, the policy's included, in this file
            (`serve_state`), saved after every round; a loop started on a file
            saved for the same policy and parameters goes on with that state
            (its ``policy`` argument is then only the template it matches).
        max_outage_s: Give up when the cluster has not answered for this many
            wall seconds; None (the default) keeps trying: a controller that
            is down (restarting, failing over) is asked again, backing off
            from `RETRY_FIRST_S` to `RETRY_MAX_S` between tries, each logged.

    Raises:
        InputError: the policy forks jobs (`refuse_forking`).
        InvalidDecisionError: when the policy asks for something impossible.
        ServeStuckError: when jobs wait but nothing can happen any more.
        BackendError: the cluster did not answer for ``max_outage_s``.
    """
    refuse_forking(policy)
    health = ServeHealth()
    watchers = [observer for observer in observers if isinstance(observer, HealthObserver)]
    snapshot = _observe(backend, max_outage_s, health, watchers)
    round_s = policy.capabilities.round_s
    restored = serve_state.load(state_file, policy) if state_file is not None else None
    if restored is None:
        policy.reset(snapshot.view, policy_rng(seed))
        state = serve_state.ServeState(
            policy, known_active=set(), known_done=set(snapshot.finished) | set(snapshot.failed),
            timers=set(),  # every wake_at asked for, as the simulator keeps them
            next_round=snapshot.now + round_s if round_s else INF)
    else:
        state = restored
        policy = state.policy
        health.restarts_recovered += 1
        log.info("restored %s's state from %s: %d active job(s) known", policy.name, state_file,
                 len(state.known_active))
    known_active, known_done = state.known_active, state.known_done
    health.jobs_adopted = sum(job_id not in known_active for job_id in snapshot.view.running)
    for watcher in watchers:
        watcher.observe_health(health)
    applied: list[DecisionRecord] = []
    n_rounds = 0
    while True:
        if should_stop is not None and should_stop():
            return ServeResult(backend.records(), applied, n_rounds, stopped_idle=False)
        now = snapshot.now
        view = snapshot.view
        view.now = now
        _call_hooks(policy, snapshot, known_active, known_done, state.believed)
        started = wallclock.perf_counter()
        decisions = policy.schedule(view, now)
        latency_s = wallclock.perf_counter() - started
        check_decisions(view, decisions, policy.name, now)
        outcomes = backend.apply(decisions, snapshot) if decisions.start or decisions.preempt else []
        _log_outcomes(decisions, outcomes, now, applied, on_decision)
        # What the policy now takes to be true, whatever the cluster made of its decisions.
        state.believed = {job_id: job_id in view.running for job_id in (*view.running, *view.pending)}
        state.believed.update((start.job_id, True) for start in decisions.start)
        state.believed.update((job_id, False) for job_id in decisions.preempt)
        for observer in observers:
            observer.observe_round(snapshot, latency_s, decisions, outcomes)
        n_rounds += 1
        if exit_when_idle and snapshot.idle and not decisions.start:
            return ServeResult(backend.records(), applied, n_rounds, stopped_idle=True)
        if round_s:
            while state.next_round <= now:
                state.next_round += round_s
        if decisions.wake_at is not None:
            state.timers.add(decisions.wake_at)
        state.timers = {t for t in state.timers if t > now}
        if state_file is not None:
            serve_state.save(state_file, state)
        deadline = min(now + poll_s if poll_s is not None else INF,
                       min(state.timers, default=INF), snapshot.next_arrival,
                       state.next_round if snapshot.view.running or snapshot.view.pending else INF)
        if not backend.wait(deadline) and not decisions.start and not decisions.preempt:
            if snapshot.idle:
                return ServeResult(backend.records(), applied, n_rounds, stopped_idle=True)
            raise ServeStuckError(
                f"policy '{policy.name}' left {len(view.pending)} job(s) pending at t={now:.0f} s "
                f"with nothing left to happen; it must start jobs that fit or ask for a timer")
        snapshot = _observe(backend, max_outage_s, health, watchers)


RETRY_FIRST_S = 0.5  # wall seconds before asking an unreachable cluster again ...
RETRY_MAX_S = 10.0  # ... doubling up to this


def _observe(backend: Backend, max_outage_s: float | None, health: ServeHealth,
             watchers: Sequence[HealthObserver]) -> Snapshot:
    """``backend.observe()``, asked again with bounded backoff while the cluster does not answer."""
    failures = 0
    first_failure = 0.0
    while True:
        try:
            snapshot = backend.observe()
        except BackendError as exc:
            now = wallclock.monotonic()
            if failures == 0:
                first_failure = now
            failures += 1
            health.consecutive_errors = failures
            for watcher in watchers:
                watcher.observe_health(health)
            down_s = now - first_failure
            if max_outage_s is not None and down_s >= max_outage_s:
                raise BackendError(f"the cluster has not answered for {down_s:.0f} s "
                                   f"({failures} tries); last error: {exc}") from exc
            pause = min(RETRY_FIRST_S * 2 ** (failures - 1), RETRY_MAX_S)
            log.warning("cannot read the cluster (try %d, down %.1f s): %s; asking again in %.1f s",
                        failures, down_s, exc, pause)
            wallclock.sleep(pause)
            continue
        if failures:
            log.warning("the cluster answers again after %d failed tries (%.1f s)", failures,
                        wallclock.monotonic() - first_failure)
            health.outages_recovered += 1
        health.consecutive_errors = 0
        health.last_poll_wall = wallclock.time()
        for watcher in watchers:
            watcher.observe_health(health)
        return snapshot


def _call_hooks(policy: Policy, snapshot: Snapshot, known_active: set[str],
                known_done: set[str], believed: Mapping[str, bool]) -> None:
    done = [s for job_id, s in snapshot.finished.items() if job_id not in known_done]
    done.sort(key=lambda s: (s.finish_time if s.finish_time is not None else INF, s.job_id))
    completed: list[Job] = []
    for state in done:
        known_done.add(state.job_id)
        if state.job_id in known_active:
            known_active.discard(state.job_id)
            completed.append(state.job)
    for job_id in sorted(snapshot.failed):
        if job_id not in known_done:
            known_done.add(job_id)
            failure = snapshot.failed[job_id]
            log.warning("job %s failed on the cluster: %s", job_id, failure.reason)
            if job_id in known_active:  # the policy forgets it as it forgets a finished job
                known_active.discard(job_id)
                completed.append(failure.job)
    arrived: list[Job] = []
    view = snapshot.view
    for table in (view.running, view.pending):
        for job_id, state in table.items():
            if job_id not in known_active:
                known_active.add(job_id)
                arrived.append(state.job)
    # A job the cluster moved without the policy's decision (a start or preemption refused
    # or lost, a node failure's requeue) leaves and arrives again, so that a policy that
    # mirrors the queue in its own state rebuilds its picture of the job from the view.
    diverged = sorted(job_id for table, running in ((view.running, True), (view.pending, False))
                      for job_id in table if believed.get(job_id, running) is not running)
    for job_id in diverged:
        state = view.running.get(job_id) or view.pending[job_id]
        log.warning("job %s is %s on the cluster, not as the policy decided; announcing it again",
                    job_id, "running" if job_id in view.running else "pending")
        completed.append(state.job)
        arrived.append(state.job)
    notify(policy, completed, arrived, snapshot.now)


def _log_outcomes(decisions: Decisions, outcomes: Sequence[Outcome], now: float,
                  applied: list[DecisionRecord],
                  on_decision: Callable[[DecisionRecord], None] | None) -> None:
    gpus_of = {start.job_id: start.gpu_ids for start in decisions.start}
    wall = wallclock.time()
    for outcome in outcomes:
        gpu_ids = gpus_of.get(outcome.job_id, ()) if outcome.action == "start" else ()
        record = DecisionRecord(now, wall, outcome.action, outcome.job_id, gpu_ids,
                                outcome.nodes, outcome.ok, outcome.detail)
        applied.append(record)
        if outcome.ok:
            where = f" on {','.join(outcome.nodes)}" if outcome.nodes else ""
            log.info("t=%.1f %s %s%s", now, outcome.action, outcome.job_id, where)
        else:
            log.error("t=%.1f %s %s refused: %s", now, outcome.action, outcome.job_id,
                      outcome.detail)
        if on_decision is not None:
            on_decision(record)
