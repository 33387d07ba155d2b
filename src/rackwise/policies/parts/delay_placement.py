"""Where ``combined`` puts a job: the fastest acceptable GPU type, at the level its delay timers allow.

Two research designs meet here (``combined``'s parts 2 and 3):

- **How close** is dally's: a job's slowdown when spread puts it in a
  sensitivity class (`parts.locality.SigmaEstimator`), and the class's
  timers say how long it waits for a node, then a rack, before it may
  spread across racks.
- **Which GPU type** follows Gavel and Hadar (`parts.heterogeneity`): the
  job takes the fastest type with room at its allowed level; a type much
  slower than its best is refused until the job has waited a while.

Among the placements that pass, the one the performance model rates fastest
right now wins. The policy asks this part at every start it tries and at
every arrival (a job's best case sizes it on A-SRPT's virtual machine), so it
keeps each job's facts (class, GPU types by rate, timers) from one ask to the
next.
"""

from __future__ import annotations

import math

from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import Allocation, TentativeAllocation
from rackwise.cluster.topology import Topology
from rackwise.engine.view import ClusterView
from rackwise.perf.graph_placement import GraphPlacement, placement_cost
from rackwise.perf.job_graph import JobGraph
from rackwise.policies.parts.forking import Tiers
from rackwise.policies.parts.hadar_planning import JobTypes
from rackwise.policies.parts.heterogeneity import TypeMask, TypeThroughputs, nodes_by_type
from rackwise.policies.parts.locality import L2, SigmaEstimator, best_placement, main_gpu_type, target_level
from rackwise.workload.job import Job
from rackwise.workload.state import JobState, state_of

Timers = tuple[float, float]  # seconds at L0 (one node), then at L1 (one rack)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class DelayTypePlacement:
    """One run's placements by sensitivity-class timers and GPU type.

    Args:
        topology: The cluster.
        timers: Each class's (``low``, ``med``, ``high``) timers.
        med_threshold, high_threshold, fallback_l1_frac, min_speed_frac,
            type_wait_s: as the ``combined`` policy's parameters of those names
            (`rackwise.policies.combined.Combined`).
    """

    def __init__(self, topology: Topology, timers: dict[str, Timers], *, med_threshold: float,
                 high_threshold: float, fallback_l1_frac: float, min_speed_frac: float,
                 type_wait_s: float) -> None:
        self._timers = timers
        self._med_threshold = med_threshold
        self._high_threshold = high_threshold
        self._min_speed_frac = min_speed_frac
        self._type_wait_s = type_wait_s
        self._sigmas = SigmaEstimator(main_gpu_type(topology), fallback_l1_frac)
        self.type_rates = TypeThroughputs(topology)
        self._type_nodes = nodes_by_type(topology)
        self._class_of: dict[str, str] = {}
        self._tiers: dict[str, Tiers] = {}
        self._types_by_rate: dict[str, tuple[float, list[tuple[int, float]]]] = {}
        self._deadlines: dict[str, tuple[float, list[float]]] = {}

    def forget(self, job_id: str) -> None:
        """A job completed."""
        self._class_of.pop(job_id, None)
        self.type_rates.forget(job_id)
        self._tiers.pop(job_id, None)
        self._types_by_rate.pop(job_id, None)
        self._deadlines.pop(job_id, None)

    # ------------------------------------------------------------ a job's facts
    def sensitivity_class(self, view: ClusterView, job: Job) -> str:
        """``low``, ``med`` or ``high``, from σ at L2 (kept per job)."""
        cls = self._class_of.get(job.job_id)
        if cls is None:
            sigma = self._sigmas.sigma(view.perf, view.topology, view.running, job)[2]
            cls = ("low" if sigma < self._med_threshold else
                   "med" if sigma < self._high_threshold else "high")
            self._class_of[job.job_id] = cls
        return cls

    def types_by_rate(self, view: ClusterView, state: JobState) -> tuple[float, list[tuple[int, float]]]:
        """The job's best rate, and each GPU type (an index) with its rate, fastest first (kept)."""
        known = self._types_by_rate.get(state.job_id)
        if known is None:
            rates: list[float] = self.type_rates.of(view, state).tolist()
            types = self.type_rates.types
            order = sorted(range(len(types)), key=lambda j: (-rates[j], types[j]))
            known = self._types_by_rate[state.job_id] = (
                max(rates) if rates else 0.0, [(j, rates[j]) for j in order])
        return known

    def tiers(self, view: ClusterView, state: JobState) -> Tiers:
        """The GPU types the job can use, grouped by equal rate, fastest first (kept)."""
        tiers = self._tiers.get(state.job_id)
        if tiers is None:
            tiers = self._tiers[state.job_id] = JobTypes.of(self.type_rates.of(view, state)).tiers
        return tiers

    def deadlines(self, view: ClusterView, state: JobState) -> list[float]:
        """When the job's timers run out at each level from its target up to L2 (kept per stay in the queue)."""
        kept = self._deadlines.get(state.job_id)
        if kept is not None and kept[0] == state.queued_since:
            return kept[1]
        timers = self._timers[self.sensitivity_class(view, state.job)]
        deadline, deadlines = state.queued_since, []
        for level in range(target_level(view.topology, state.job.n_gpus), L2):
            deadline += timers[level]
            deadlines.append(deadline)
        self._deadlines[state.job_id] = (state.queued_since, deadlines)
        return deadlines

    def wake_instants(self, view: ClusterView, state: JobState) -> list[float]:
        """When a waiting job may relax a level, and take a slower GPU type if there are several."""
        instants = self.deadlines(view, state)
        if len(self.type_rates.types) > 1:
            return [*instants, state.queued_since + self._type_wait_s]
        return instants

    def allowed(self, view: ClusterView, state: JobState, now: float) -> tuple[int, float]:
        """(loosest level the job may take now, when it may relax next; inf if never).

        The timers run from when the job last entered the queue: ``t0`` at its
        target level, then ``t1`` at L1, as dally's delay engine would relax it.
        """
        level = target_level(view.topology, state.job.n_gpus)
        for deadline in self.deadlines(view, state):
            if now < deadline:
                return level, deadline
            level += 1
        return L2, math.inf

    # ---------------------------------------------------------------- placement
    def place(self, view: ClusterView, free: Allocation | TentativeAllocation, job: Job,
              graph: JobGraph, now: float, *, ideal: bool) -> GraphPlacement | None:
        """A-SRPT's `Placer`: the job's `gpus`, costed on its graph (None: wait)."""
        gpus = self.gpus(view, free, job, now, ideal=ideal)
        return None if gpus is None else placement_cost(graph, gpus, view.topology)

    def gpus(self, view: ClusterView, free: Allocation | TentativeAllocation, job: Job,
             now: float, *, ideal: bool) -> tuple[int, ...] | None:
        """GPUs on the fastest acceptable type at the job's allowed level, or None (wait).

        ``ideal``: the job is being sized on the virtual machine, so its best case is asked for.
        """
        state = state_of(view.pending, job.job_id) or JobState(job)
        n_gpus = job.n_gpus
        if ideal:
            level, waited_s = L2, math.inf
        else:
            level, _ = self.allowed(view, state, now)
            waited_s = now - state.queued_since
        best_rate, by_rate = self.types_by_rate(view, state)
        types = self.type_rates.types
        candidates: list[tuple[int, ...]] = []
        for j, rate in by_rate:
            if rate <= 0.0 or (rate < self._min_speed_frac * best_rate and waited_s < self._type_wait_s):
                break
            nodes = self._type_nodes[types[j]]
            # A type on every node needs no mask: the same placement, without a pass over all nodes
            every_node = len(nodes) == view.topology.n_nodes == free.topology.n_nodes
            gpus = best_placement(free if every_node else TypeMask(free, nodes), n_gpus, level)
            if gpus is not None:
                candidates.append(gpus)
                if ideal:
                    break
        if not candidates and level == L2 and (best_rate <= 0.0 or waited_s >= self._type_wait_s):
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
