"""The delay-scheduling engine over consolidation levels, and its simplest baselines.

A waiting job may only take a placement no looser than its *allowed level*
(L0 node, L1 rack, L2 cluster; see `rackwise.policies.parts.locality`). It
starts at the tightest level its size can reach; each level has a timer, and
when it runs out the job may relax one level. Jobs that cannot start are
skipped, so later jobs may go ahead (no head-of-line blocking). Every timer
is returned as ``wake_at``, so the engine calls back when it runs out.

`DelayScheduler` is that engine. Its subclasses set the timers and switch
the extras: ``consolidate-strict`` and ``philly-relax`` here, one class and
no extras; ``dally`` (`rackwise.policies.delay`) adds sensitivity classes,
preemption and auto-tuned timers. The ``spread`` baseline of
network_sensitive_delay.md §5 needs no class: it is
``make_policy("fifo", placement="first-fit")``.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from rackwise.cluster.allocation import TentativeAllocation
from rackwise.engine.view import ClusterView
from rackwise.policies.base import BasePolicy, Decisions, Start
from rackwise.policies.delay_tuner import TimerTuner, TimerUpdate
from rackwise.policies.parts.locality import (
    L0,
    L2,
    best_placement,
    domain_free,
    domain_gpu_ids,
    placement_level,
    target_level,
)
from rackwise.workload.job import Job
from rackwise.workload.state import JobState


@dataclass(slots=True)
class WaitState:
    """Delay state of one pending job."""

    target: int  # tightest level its size can reach
    allowed: int  # loosest level it may take now
    since: float  # when `allowed` was last set
    cls: str
    reserved: int | None = None  # node (target L0) or rack (target L1) held for it


@dataclass(kw_only=True)
class DelayScheduler(BasePolicy):
    """Delay scheduling over consolidation levels; subclasses choose timers and extras.

    Args:
        ordering: ``"fifo"`` (submit time) or ``"las"`` (least attained service first).
        reserve_after_s: Once a job has waited this long at its target level,
            hold the node (or rack) with the most free GPUs for it; ``None``
            never reserves. Whether to reserve is left open by the design.
    """

    name: ClassVar[str] = "delay-base"
    ordering: Literal["fifo", "las"] = "fifo"
    reserve_after_s: float | None = None

    # ------------------------------------------------------ what subclasses set
    def timer_table(self) -> dict[str, tuple[float, float]]:
        """Seconds a job of each class waits at L0 and at L1 before relaxing."""
        raise NotImplementedError

    def classify(self, view: ClusterView, job: Job) -> str:
        """The job's class, a key of `timer_table`."""
        return next(iter(self.timer_table()))

    def preemption_on(self) -> bool:
        return False

    def try_preempt(self, view: ClusterView, free: TentativeAllocation, state: JobState,
                    wait: WaitState, now: float, victims: list[str]) -> tuple[int, ...] | None:
        """Free a slot at ``wait.allowed`` for a job whose timer ran out; its GPUs or None."""
        return None

    # -------------------------------------------------------------------- run
    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.timers_ = {c: list(t) for c, t in self.timer_table().items()}
        self.waits_: dict[str, WaitState] = {}
        self.class_of_: dict[str, str] = {}
        self.fifo_key_: dict[str, tuple[float, str]] = {}
        self.deadlines_: list[tuple[float, str]] = []  # a heap; entries go stale, see below
        self.tuner_: TimerTuner | None = None
        self.timer_log_: list[TimerUpdate] = []

    def class_of(self, view: ClusterView, job: Job) -> str:
        cls = self.class_of_.get(job.job_id)
        if cls is None:
            cls = self.class_of_[job.job_id] = self.classify(view, job)
        return cls

    def on_completion(self, job: Job, now: float) -> None:
        self.fifo_key_.pop(job.job_id, None)
        cls = self.class_of_.pop(job.job_id, None)
        if self.tuner_ is not None and cls is not None:
            self.tuner_.note_finish(cls, job.duration_s)

    def on_arrival(self, job: Job, now: float) -> None:
        self.fifo_key_[job.job_id] = (job.submit_time, job.job_id)

    def _ordered(self, view: ClusterView, now: float) -> list[str]:
        pending, keys = view.pending, self.fifo_key_
        for job_id in pending.keys() - keys.keys():  # jobs the hooks never saw
            keys[job_id] = (pending[job_id].job.submit_time, job_id)
        if self.ordering == "las":
            return sorted(pending, key=lambda j: (pending[j].attained_service_gpu_s(now), keys[j]))
        return sorted(pending, key=keys.__getitem__)

    def _new_wait(self, view: ClusterView, state: JobState) -> None:
        # a new arrival, or a preempted job back in the queue: start over at its target
        target = target_level(view.topology, state.job.n_gpus)
        wait = self.waits_[state.job_id] = WaitState(
            target, target, state.queued_since, self.class_of(view, state.job))
        self._push_deadline(state.job_id, wait)

    def _deadline(self, wait: WaitState) -> float:
        return math.inf if wait.allowed >= L2 else wait.since + self.timers_[wait.cls][wait.allowed]

    def _push_deadline(self, job_id: str, wait: WaitState) -> None:
        deadline = self._deadline(wait)
        if deadline < math.inf:
            heapq.heappush(self.deadlines_, (deadline, job_id))

    def _earliest_deadline(self) -> float:
        """The next timer of any waiting job; drops entries of jobs that started or moved on."""
        heap, waits = self.deadlines_, self.waits_
        while heap:
            deadline, job_id = heap[0]
            wait = waits.get(job_id)
            if wait is not None and self._deadline(wait) == deadline:
                return deadline
            heapq.heappop(heap)
        return math.inf

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        tuner = self.tuner_
        if tuner is not None:
            tuner.observe(view, now)
            if tuner.due(now):
                tuner.tune(now, self.timers_, len(view.pending))
                self.deadlines_ = []
                for job_id in sorted(self.waits_):
                    self._push_deadline(job_id, self.waits_[job_id])
        if not view.pending:
            return Decisions()
        for job_id in sorted(view.pending.keys() - self.waits_.keys()):
            self._new_wait(view, view.pending[job_id])
        free = view.tentative()
        # no_fit[l]: smallest size known not to fit at level l (or tighter) in this pass
        no_fit = [math.inf, math.inf, math.inf]

        def place(n_gpus: int, level: int) -> tuple[int, ...] | None:
            if n_gpus > free.n_free or n_gpus >= no_fit[level]:
                return None
            gpus = best_placement(free, n_gpus, level)
            if gpus is None:
                for lv in range(level + 1):
                    no_fit[lv] = min(no_fit[lv], n_gpus)
            return gpus

        pending, waits, timer_table = view.pending, self.waits_, self.timers_
        starts: list[Start] = []
        victims: list[str] = []
        earliest: float | None = None
        for job_id in self._ordered(view, now):
            wait = waits[job_id]
            timers = timer_table[wait.cls]
            if free.n_free == 0:  # only a job whose timer runs out now can do anything
                if earliest is None:
                    earliest = self._earliest_deadline()
                if earliest > now:
                    break
                if wait.allowed >= L2 or now < wait.since + timers[wait.allowed]:
                    continue
            earliest = None  # this job may relax or start, which moves the earliest timer
            state = pending[job_id]
            n_gpus = state.job.n_gpus
            gpus = place(n_gpus, wait.allowed)
            via_preemption = False
            while gpus is None and wait.allowed < L2 and now >= wait.since + timers[wait.allowed]:
                if self.preemption_on():
                    n_victims = len(victims)
                    gpus = self.try_preempt(view, free, state, wait, now, victims)
                    if len(victims) > n_victims:
                        no_fit[:] = [math.inf, math.inf, math.inf]  # GPUs were given back
                    if gpus is not None:
                        via_preemption = True
                        break
                if tuner is not None:
                    tuner.note_relax(wait.cls, wait.allowed, n_gpus, now)
                wait.allowed += 1
                wait.since = now
                wait.reserved = None
                self._push_deadline(job_id, wait)
                gpus = place(n_gpus, wait.allowed)
            if gpus is not None:
                free.take(gpus)
                starts.append(Start(job_id, gpus))
                del waits[job_id]
                if tuner is not None:
                    won = (wait.allowed if not via_preemption and wait.allowed < L2
                           and placement_level(view.topology, gpus) == wait.allowed else None)
                    tuner.note_start(wait.cls, won, now - wait.since)
                continue
            if (self.reserve_after_s is not None and wait.allowed == wait.target < L2
                    and now - state.queued_since >= self.reserve_after_s):
                self._hold(free, wait, n_gpus)
        wake_at = self._earliest_deadline()
        if tuner is not None:
            busy = view.topology.n_gpus - view.n_free
            busy += sum(len(s.gpu_ids) for s in starts)
            busy -= sum(len(view.running[v].gpu_ids) for v in victims)
            tuner.after_pass(busy)
            epoch_at = tuner.next_epoch_at()
            if epoch_at is not None and len(starts) < len(pending):
                wake_at = min(wake_at, epoch_at)
        return Decisions(start=tuple(starts), preempt=tuple(victims),
                         wake_at=wake_at if wake_at < math.inf else None)

    def _hold(self, free: TentativeAllocation, wait: WaitState, n_gpus: int) -> None:
        """Keep the job's reserved node or rack away from the jobs behind it in this pass."""
        topology = free.topology
        if wait.reserved is None:
            n_domains = topology.n_nodes if wait.target == L0 else topology.n_racks
            fits = [d for d in range(n_domains)
                    if len(domain_gpu_ids(topology, wait.target, d)) >= n_gpus]
            wait.reserved = min(fits, key=lambda d: (-domain_free(free, wait.target, d), d))
        held = [g for g in domain_gpu_ids(topology, wait.target, wait.reserved) if free.is_free(g)]
        free.take(held)


@dataclass(kw_only=True)
class ConsolidateStrict(DelayScheduler):
    """Wait as long as it takes for the tightest level a job's size can reach.

    A job that fits a node only ever runs on one node; one that fits a rack
    only in one rack. Jobs that cannot start are skipped, so smaller jobs
    behind them go ahead (no head-of-line blocking).

    Args:
        ordering: ``"fifo"`` or ``"las"`` (least attained service first).
        reserve_after_s: See `DelayScheduler`; ``None`` (the default) never reserves.
    """

    name: ClassVar[str] = "consolidate-strict"

    def timer_table(self) -> dict[str, tuple[float, float]]:
        return {"all": (math.inf, math.inf)}


@dataclass(kw_only=True)
class PhillyRelax(DelayScheduler):
    """One fixed locality timeout for every job, blind to sensitivity.

    A job waits ``timeout_s`` for its target level, then ``timeout_s`` more
    at each looser level, as a cluster scheduler that trades locality for
    queueing the same way for every job would.

    Args:
        timeout_s: Seconds of waiting per level before relaxing.
        ordering: ``"fifo"`` or ``"las"``.
        reserve_after_s: See `DelayScheduler`.
    """

    name: ClassVar[str] = "philly-relax"
    timeout_s: float = 300.0

    def timer_table(self) -> dict[str, tuple[float, float]]:
        return {"all": (self.timeout_s, self.timeout_s)}
