"""``combined``: A-SRPT's ordering, network-sensitive delay placement and GPU-type choice.

One policy built from three research designs, each reused, not re-written:

1. **Who goes first** is A-SRPT's (`parts.predicted_srpt`, as in
   `rackwise.policies.asrpt`): a virtual single machine runs preemptive SRPT
   on predicted work, and its order decides which jobs start, which are
   backfilled and which are preempted. Every A-SRPT parameter applies, the
   ``predictor`` too (``"oracle"`` gives the ``asrpt-oracle`` variant).
2. **How close** is dally's (`rackwise.policies.delay`; parts 2 and 3 live in
   `parts.delay_placement`): a job's slowdown
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
from functools import partial
from typing import ClassVar

import numpy as np

from rackwise.cluster.allocation import Allocation, TentativeAllocation
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.perf.graph_placement import GraphPlacement
from rackwise.perf.job_graph import JobGraph
from rackwise.policies.base import BasePolicy, Capabilities, Decisions
from rackwise.policies.parts.asrpt_parameters import AsrptParameters
from rackwise.policies.parts.delay_placement import DelayTypePlacement
from rackwise.policies.parts.delay_wakes import DelayWakes
from rackwise.policies.parts.fork_parameters import ForkParameters, check_fork_parameters
from rackwise.policies.parts.forking import fork_overhead_frac
from rackwise.policies.parts.idle_copies import IdleCopies
from rackwise.policies.parts.predicted_srpt import (
    PredictedSrpt,
    asrpt_placement,
    check_asrpt_parameters,
    predictor_capabilities,
)
from rackwise.workload.job import Job

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
        topology = view.topology
        self.placement_ = DelayTypePlacement(
            topology, {"low": self.timer_low_s, "med": self.timer_med_s, "high": self.timer_high_s},
            med_threshold=self.med_threshold, high_threshold=self.high_threshold,
            fallback_l1_frac=self.fallback_l1_frac, min_speed_frac=self.min_speed_frac,
            type_wait_s=self.type_wait_s)
        self.srpt_ = PredictedSrpt(self, self.placement_.place if self.placement == DELAY else self._place,
                                   view, rng)
        types = self.placement_.type_rates.types
        self.copies_ = IdleCopies(self, view, [types.index(n.gpu_type) for n in topology.nodes],
                                  self.sync_s, spread_after_s=self.spread_copies_after_s,
                                  one_rack=self.spread_copies_in_rack)
        self.wakes_ = DelayWakes(self.placement_.wake_instants)

    def on_arrival(self, job: Job, now: float) -> None:
        self.srpt_.on_arrival(job)
        if self.placement == DELAY:
            self.wakes_.arrived(job.job_id)

    def on_completion(self, job: Job, now: float) -> None:
        self.srpt_.on_completion(job, now)
        self.placement_.forget(job.job_id)
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
                                  partial(self.placement_.tiers, view))

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

    def sensitivity_class(self, view: ClusterView, job: Job) -> str:
        """``low``, ``med`` or ``high``, from σ at L2 (kept per job)."""
        return self.placement_.sensitivity_class(view, job)

    # ---------------------------------------------------------------- placement
    def _place(self, view: ClusterView, free: Allocation | TentativeAllocation, job: Job,
               graph: JobGraph, now: float, *, ideal: bool) -> GraphPlacement | None:
        """A-SRPT's own placement, the `Placer` of any ``placement`` but ``"delay"`` (an ablation)."""
        return asrpt_placement(free, job, graph, self, self.rng_)
