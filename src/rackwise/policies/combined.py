"""``combined``: A-SRPT's ordering, network-sensitive delay placement and GPU-type choice.

One policy built from three research designs, each reused, not re-written:

1. **Who goes first** is A-SRPT's (`parts.predicted_srpt`, as in
   `rackwise.policies.asrpt`): a virtual single machine runs preemptive SRPT
   on predicted work, and its order decides which jobs start, which are
   backfilled and which are preempted. Every A-SRPT parameter applies, the
   ``predictor`` too (``"oracle"`` gives the ``asrpt-oracle`` variant).
2. **How close** is dally's (`rackwise.policies.delay`): a job's slowdown
   when spread puts it in a sensitivity class (`parts.locality.SigmaEstimator`),
   and the class's timers say how long it waits for a node, then a rack,
   before it may spread across racks.
3. **Which GPU type** follows Gavel and Hadar (`parts.heterogeneity`): each
   job's throughput on every type is asked of the performance model, and
   the job takes the fastest type that has room at its allowed level. A
   type much slower than its best (``min_speed_frac``) is refused until the
   job has waited ``type_wait_s``.

Among the placements that pass, the one the performance model rates fastest
right now wins (so spread and interference count as much as the GPU type).

4. **Idle GPUs** take copies of jobs as HadarE's do (``copies``,
   `parts.forking`, `parts.idle_copies`): after the order and placement
   above, GPUs still idle hold extra copies of the jobs that run, in the
   virtual machine's order, with HadarE's ``copy_efficiency`` and
   averaging cost (a sync every ``sync_s``). A copy never delays a job:
   the order and placement see only each job's first copy, and a copy
   whose GPUs they give to a job is dropped. Copies run only in the
   simulator; on a real cluster pass ``-p copies=false``.

docs/policies/combined.md measures it against each design alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from rackwise.cluster.allocation import Allocation, TentativeAllocation
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.perf.graph_placement import GraphPlacement, placement_cost
from rackwise.perf.job_graph import JobGraph
from rackwise.policies.base import BasePolicy, Capabilities, Decisions
from rackwise.policies.parts.asrpt_parameters import AsrptParameters
from rackwise.policies.parts.delay_wakes import DelayWakes
from rackwise.policies.parts.fork_parameters import ForkParameters, check_fork_parameters
from rackwise.policies.parts.forking import Tiers, fork_overhead_frac
from rackwise.policies.parts.hadar_planning import JobTypes
from rackwise.policies.parts.heterogeneity import (
    TypeMask,
    TypeThroughputs,
    nodes_by_type,
)
from rackwise.policies.parts.idle_copies import IdleCopies
from rackwise.policies.parts.locality import (
    L2,
    SigmaEstimator,
    best_placement,
    main_gpu_type,
    target_level,
)
from rackwise.policies.parts.predicted_srpt import (
    PredictedSrpt,
    asrpt_placement,
    check_asrpt_parameters,
    predictor_capabilities,
)
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

DELAY = "delay"  # the ``placement`` value that turns on parts 2 and 3


@dataclass(kw_only=True)
class Combined(ForkParameters, AsrptParameters, BasePolicy):
    """Predicted-SRPT ordering, sensitivity-class delay timers, fastest-GPU-type placement.

    Every A-SRPT parameter applies (`AsrptParameters`: ``predictor``,
    ``preempt``, ``epsilon``, ``min_run_s``, ``tick_s``, ...);
    ``placement="delay"`` is this policy's placement, and any other value
    falls back to A-SRPT's (an ablation). The forking parameters are
    HadarE's (`parts.fork_parameters.ForkParameters`: ``copy_efficiency``,
    ``max_copies``, ``sync_bandwidth_gbps``, ``restart_s``, ...).

    Args:
        timer_low_s, timer_med_s, timer_high_s: Seconds a job of the class waits
            at L0 (one node) and then at L1 (one rack) before relaxing one level.
        med_threshold, high_threshold: σ at L2 from which a job is ``med`` or ``high``.
        fallback_l1_frac: When the model's rates carry no information, σ(L2)
            is ``job.comm_sensitivity`` and σ(L1) this fraction of it.
        min_speed_frac: A GPU type whose throughput for the job is below this
            share of its best type's is refused ...
        type_wait_s: ... until the job has waited this long; then it may also
            take GPUs of mixed types.
        copies: Fill GPUs left idle with copies of running jobs (HadarE's
            forking); only the simulator runs copies, so a real cluster
            needs ``copies=False``.
        sync_s: Seconds between averagings of a forked job's copies (HadarE's
            round); a running job takes new copies only then.
        spread_copies_after_s: A copy that fits no single node may span the
            emptiest nodes once its job has run this long (None: never). [R]:
            the delay placement spreads jobs that may spread, so idle GPUs
            end up scattered where HadarE's consolidated plans would leave
            whole nodes; a job that has run long is likely to run on (and
            a spread copy is slower, and restarts the job when shed).
        spread_copies_in_rack: Such a copy takes nodes of one rack only (its
            averaging and ring then cross no rack uplink).
    """

    name: ClassVar[str] = "combined"
    preempts: ClassVar[bool] = True

    placement: str = DELAY
    timer_low_s: tuple[float, float] = (0.0, 0.0)
    timer_med_s: tuple[float, float] = (300.0, 300.0)
    timer_high_s: tuple[float, float] = (1_800.0, 1_800.0)
    med_threshold: float = 0.2
    high_threshold: float = 0.5
    fallback_l1_frac: float = 0.5
    min_speed_frac: float = 0.5
    type_wait_s: float = 1_800.0
    copies: bool = True
    sync_s: float = 360.0
    spread_copies_after_s: float | None = 14_400.0
    spread_copies_in_rack: bool = True

    def __post_init__(self) -> None:
        check_asrpt_parameters(self)
        check_fork_parameters(self)
        if not self.sync_s > 0:
            raise InputError(f"must be > 0, got {self.sync_s}", field="sync_s")

    @property
    def capabilities(self) -> Capabilities:
        capabilities = predictor_capabilities(self, super().capabilities)
        if not self.copies:
            return capabilities
        return replace(capabilities, forks=True, fork_overhead=self.fork_overhead_frac,
                       copy_efficiency=self.copy_efficiency)

    def fork_overhead_frac(self, job: Job) -> float:
        """Share of a forked job's wall time spent averaging its copies (once every ``sync_s``)."""
        return fork_overhead_frac(job, self, self.sync_s)

    @property
    def srpt(self) -> PredictedSrpt:
        """The run's ordering state: predictions, virtual machine, prediction and placement logs."""
        return self.srpt_

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.srpt_ = PredictedSrpt(self, self._place, view, rng)
        topology = view.topology
        self.sigmas_ = SigmaEstimator(main_gpu_type(topology), self.fallback_l1_frac)
        self.type_rates_ = TypeThroughputs(topology)
        self.type_nodes_ = nodes_by_type(topology)
        self.class_of_: dict[str, str] = {}
        self.copies_ = IdleCopies(self, view, [self.type_rates_.types.index(n.gpu_type) for n in topology.nodes],
                                  self.sync_s, spread_after_s=self.spread_copies_after_s,
                                  one_rack=self.spread_copies_in_rack)
        self.tiers_: dict[str, Tiers] = {}
        self.types_by_rate_: dict[str, tuple[float, list[tuple[int, float]]]] = {}
        self.deadlines_: dict[str, tuple[float, list[float]]] = {}
        self.wakes_ = DelayWakes(self._wake_instants)

    def on_arrival(self, job: Job, now: float) -> None:
        self.srpt_.on_arrival(job)
        if self.placement == DELAY:
            self.wakes_.arrived(job.job_id)

    def on_completion(self, job: Job, now: float) -> None:
        self.srpt_.on_completion(job, now)
        self.class_of_.pop(job.job_id, None)
        self.type_rates_.forget(job.job_id)
        self.tiers_.pop(job.job_id, None)
        self.types_by_rate_.pop(job.job_id, None)
        self.deadlines_.pop(job.job_id, None)
        self.wakes_.forget(job.job_id)
        self.copies_.forget(job.job_id)

    def on_history(self, jobs: Sequence[Job]) -> None:
        self.srpt_.on_history(jobs)

    # ---------------------------------------------------------------- schedule
    def schedule(self, view: ClusterView, now: float) -> Decisions:
        if not self.copies:
            return self._decide(view, now)
        # Order and placement see first copies only; the copies go where GPUs stay idle.
        decisions = self._decide(self.copies_.primary(view), now)
        return self.copies_.apply(view, decisions, now, self.srpt_.in_vm_order,
                                  lambda state: self._tiers(view, state))

    def _types_by_rate(self, view: ClusterView, state: JobState) -> tuple[float, list[tuple[int, float]]]:
        """The job's best rate, and each GPU type (an index) with its rate, fastest first (cached)."""
        known = self.types_by_rate_.get(state.job_id)
        if known is None:
            rates, types = self.type_rates_.of(view, state).tolist(), self.type_rates_.types
            order = sorted(range(len(types)), key=lambda j: (-rates[j], types[j]))
            known = self.types_by_rate_[state.job_id] = (
                max(rates) if rates else 0.0, [(j, rates[j]) for j in order])
        return known

    def _tiers(self, view: ClusterView, state: JobState) -> Tiers:
        """The GPU types the job can use, grouped by equal rate, fastest first (cached)."""
        tiers = self.tiers_.get(state.job_id)
        if tiers is None:
            tiers = self.tiers_[state.job_id] = JobTypes.of(self.type_rates_.of(view, state)).tiers
        return tiers

    def _decide(self, view: ClusterView, now: float) -> Decisions:
        """A-SRPT's order with this policy's placement, and when to look again."""
        decisions = self.srpt_.schedule(view, now)
        if self.placement != DELAY:
            return decisions
        # Wake when a waiting job may next relax a level or take a slower type
        # (A-SRPT's ticks may be off, or not on the timers' instants).
        started = {start.job_id for start in decisions.start}
        wake = decisions.wake_at if decisions.wake_at is not None else math.inf
        wake = min(wake, self.wakes_.next_wake(view, now, started))
        return replace(decisions, wake_at=wake if wake < math.inf else None)

    def _wake_instants(self, view: ClusterView, state: JobState) -> list[float]:
        """When a waiting job may relax a level, and take a slower GPU type if there are several."""
        instants = self._deadlines(view, state)
        if len(self.type_rates_.types) > 1:
            return [*instants, state.queued_since + self.type_wait_s]
        return instants

    # ------------------------------------------------------------- delay state
    def sensitivity_class(self, view: ClusterView, job: Job) -> str:
        """``low``, ``med`` or ``high``, from σ at L2 (cached per job)."""
        cls = self.class_of_.get(job.job_id)
        if cls is None:
            sigma = self.sigmas_.sigma(view.perf, view.topology, view.running, job)[2]
            cls = ("low" if sigma < self.med_threshold else
                   "med" if sigma < self.high_threshold else "high")
            self.class_of_[job.job_id] = cls
        return cls

    def _allowed(self, view: ClusterView, state: JobState, now: float) -> tuple[int, float]:
        """(loosest level the job may take now, when it may relax next; inf if never).

        The timers run from when the job last entered the queue: ``t0`` at its
        target level, then ``t1`` at L1, as dally's delay engine would relax it.
        """
        level = target_level(view.topology, state.job.n_gpus)
        for deadline in self._deadlines(view, state):
            if now < deadline:
                return level, deadline
            level += 1
        return L2, math.inf

    def _deadlines(self, view: ClusterView, state: JobState) -> list[float]:
        """When the job's timers run out at each level from its target up to L2 (kept per stay in the queue)."""
        kept = self.deadlines_.get(state.job_id)
        if kept is not None and kept[0] == state.queued_since:
            return kept[1]
        cls = self.sensitivity_class(view, state.job)
        timers = {"low": self.timer_low_s, "med": self.timer_med_s, "high": self.timer_high_s}[cls]
        deadline, deadlines = state.queued_since, []
        for level in range(target_level(view.topology, state.job.n_gpus), L2):
            deadline += timers[level]
            deadlines.append(deadline)
        self.deadlines_[state.job_id] = (state.queued_since, deadlines)
        return deadlines

    # ---------------------------------------------------------------- placement
    def _place(self, view: ClusterView, free: Allocation | TentativeAllocation, job: Job,
               graph: JobGraph, now: float, *, ideal: bool) -> GraphPlacement | None:
        """The `Placer` handed to A-SRPT's ordering."""
        if self.placement != DELAY:
            return asrpt_placement(free, job, graph, self, self.rng_)
        gpus = self._delay_gpus(view, free, job, now, ideal=ideal)
        return None if gpus is None else placement_cost(graph, gpus, view.topology)

    def _delay_gpus(self, view: ClusterView, free: Allocation | TentativeAllocation, job: Job,
                    now: float, *, ideal: bool) -> tuple[int, ...] | None:
        """GPUs on the fastest acceptable type at the job's allowed level, or None (wait).

        ``ideal``: the job is being sized on the virtual machine, so its best case is asked for.
        """
        state = view.pending.get(job.job_id) or JobState(job)
        n_gpus = job.n_gpus
        if ideal:
            level, waited_s = L2, math.inf
        else:
            level, _ = self._allowed(view, state, now)
            waited_s = now - state.queued_since
        best_rate, by_rate = self._types_by_rate(view, state)
        types = self.type_rates_.types
        candidates: list[tuple[int, ...]] = []
        for j, rate in by_rate:
            if rate <= 0.0 or (rate < self.min_speed_frac * best_rate and waited_s < self.type_wait_s):
                break
            nodes = self.type_nodes_[types[j]]
            # A type on every node needs no mask: the same placement, without a pass over all nodes
            every_node = len(nodes) == view.topology.n_nodes == free.topology.n_nodes
            where = free if every_node else TypeMask(free, nodes)
            gpus = best_placement(where, n_gpus, level)
            if gpus is not None:
                candidates.append(gpus)
                if ideal:
                    break
        if not candidates and level == L2 and (best_rate <= 0.0 or waited_s >= self.type_wait_s):
            mixed = best_placement(free, n_gpus, L2)  # no single type will do: mix them
            if mixed is not None:
                candidates.append(mixed)
        if len(candidates) <= 1 or ideal:
            return candidates[0] if candidates else None
        # The what-if rate weighs the GPU type against spread and neighbours; ties keep type order.
        best, best_gpus = -math.inf, candidates[0]
        for gpus in candidates:
            rate = view.rate_on(state, gpus)
            if rate > best:
                best, best_gpus = rate, gpus
        return best_gpus
