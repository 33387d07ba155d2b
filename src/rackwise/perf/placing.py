"""Where a job's GPUs are, priced alone: the placement record of `rackwise.perf.placed`.

`Placing.place` turns a job and its GPUs into a `Placed`: which nodes, racks
and level it spans, its compute per step on the slowest GPU type there, and
its communication split into the part no neighbour changes and the part that
runs at its share of the rack uplinks. A mixed-parallel job is priced on its
worker mapping (`rackwise.perf.graph_placement.placement_cost`); a forked
job (`JobState.copies`) gets one placement per copy.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import mypyc_attr

from rackwise.cluster.topology import Topology
from rackwise.perf.base import NO_COMM
from rackwise.perf.breakdown import INF
from rackwise.perf.catalogue import CATALOGUE, ModelSpec
from rackwise.perf.comm import (
    Level,
    latency_s,
    level_bandwidth_gbps,
    level_of,
    phase_link_s,
    pipeline_bubble_frac,
)
from rackwise.perf.config import PerfConfig
from rackwise.perf.graph_placement import placement_cost
from rackwise.perf.placed import Placed, comm_pair, is_mixed
from rackwise.perf.pricing import StepPricing
from rackwise.workload.job import Job, Parallelism
from rackwise.workload.state import JobState

# A data-parallel placement's (compute_s, base_gbps, dyn_bits, ref_comm_s, crosses, static_comm_s,
# comm_pair): all that its model, size, level and GPU types decide.
_DataParallelPrices = tuple[float, float, float, float, bool, float, tuple[float, float]]

# Read once: a member written as `Level.NODE` in a function is looked up on its class at each use.
_NODE: Final = Level.NODE
_CLUSTER: Final = Level.CLUSTER


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Placing:
    """Builds the placement record of a job on given GPUs of ``topology``.

    Args:
        config: Every constant of the model.
        topology: The cluster.
        pricing: The alone-step prices of this cluster (`StepPricing`).
    """

    def __init__(self, config: PerfConfig, topology: Topology, pricing: StepPricing) -> None:
        self.config = config
        self.topology = topology
        self.pricing = pricing
        self._links = topology.links
        self._gpu_node = topology.gpu_node
        self._node_rack = topology.node_rack
        self._node_type = tuple(node.gpu_type for node in topology.nodes)
        # (nodes, GPUs per node, racks) of a one-GPU placement on each node, shared
        self._one_node = tuple(((node.node_id,), (1,), (node.rack_id,)) for node in topology.nodes)
        self._latency = config.latency_by_level_s
        self._overlap = config.exposed_comm_frac
        # a one-GPU job's compute per step by (model, gradient bytes, GPU type): `place`'s common case
        self._one_gpu_compute: dict[tuple[str | None, float, str], float] = {}
        # a data-parallel placement's prices by (model, gradient bytes, GPUs, level, GPU types)
        self._data_parallel: dict[tuple[str, float, int, Level, object], _DataParallelPrices] = {}

    def place(self, job: Job, gpu_ids: tuple[int, ...]) -> Placed:
        placed = Placed()
        placed.job_id = job.job_id
        placed.gpu_ids = gpu_ids
        placed.rate = -1.0
        placed.listed = 0
        placed.partner = None
        placed.crosses = False
        placed.bandwidth = INF
        placed.copies = None
        gpu_node = self._gpu_node
        if len(gpu_ids) == 1:
            node = gpu_node[gpu_ids[0]]
            placed.nodes, placed.node_gpus, placed.racks = self._one_node[node]
            gpu_type = self._node_type[node]
            key = (job.model, job.gradient_bytes, gpu_type)
            compute = self._one_gpu_compute.get(key)
            if compute is None and job.model in CATALOGUE:
                one_spec = CATALOGUE[job.model]
                compute = self._one_gpu_compute[key] = self.pricing.compute_s(
                    one_spec, 1, gpu_type, job.gradient_bytes or one_spec.gradient_bytes)
            if compute is not None:
                # One GPU: nothing to communicate (most jobs of real traces take this path).
                placed.level, placed.gpu_type = _NODE, gpu_type
                placed.model, placed.ideal_rate = job.model or "", 0.0
                placed.compute_s = compute
                placed.dyn_bits = placed.ref_comm_s = placed.static_comm_s = 0.0
                placed.comm_pair = NO_COMM
                placed.base_gbps = self._links.intra_node_gbps
                return placed
        else:
            per_node: dict[int, int] = {}
            for gpu in gpu_ids:
                node = gpu_node[gpu]
                per_node[node] = per_node.get(node, 0) + 1
            placed.nodes = tuple(sorted(per_node))
            placed.node_gpus = tuple(per_node[n] for n in placed.nodes)
            placed.racks = tuple(sorted({self._node_rack[n] for n in placed.nodes}))
        spec = CATALOGUE.get(job.model) if job.model is not None else None
        level = level_of(len(placed.nodes), len(placed.racks))
        placed.level = level
        types = {self._node_type[n] for n in placed.nodes}
        placed.gpu_type = min(types) if len(types) > 1 else next(iter(types))
        if spec is None:
            placed.model = job.model or ""
            placed.ideal_rate = job.total_iters / job.duration_s if job.duration_s > 0 else INF
            placed.compute_s = placed.dyn_bits = placed.static_comm_s = 0.0
            placed.comm_pair = NO_COMM
            placed.base_gbps, placed.ref_comm_s = INF, 0.0
            return placed
        placed.model = spec.name
        placed.ideal_rate = 0.0
        n = len(gpu_ids)
        gradient_bytes = job.gradient_bytes or spec.gradient_bytes
        par = job.parallelism
        if is_mixed(par, n):
            # mixed parallel: its traffic depends on which worker runs on which GPU
            compute = max(self.pricing.compute_s(spec, n, t, gradient_bytes) for t in types)
            placed.compute_s = compute * (1.0 + pipeline_bubble_frac(
                par.pipeline, self.config.pipeline_microbatches))
            return self.place_mapped(placed, job, par, level)
        priced = (spec.name, gradient_bytes, n, level, placed.gpu_type if len(types) == 1 else tuple(sorted(types)))
        prices = self._data_parallel.get(priced)
        if prices is None:
            prices = self._data_parallel[priced] = self._price_data_parallel(spec, n, level, types, gradient_bytes)
        (placed.compute_s, placed.base_gbps, placed.dyn_bits, placed.ref_comm_s, placed.crosses,
         placed.static_comm_s, placed.comm_pair) = prices
        placed.cross_terms = None
        return placed

    def _price_data_parallel(self, spec: ModelSpec, n: int, level: Level, types: set[str],
                             gradient_bytes: float) -> _DataParallelPrices:
        """What a data-parallel placement's step costs, from its model, size, level and GPU types."""
        compute = max(self.pricing.compute_s(spec, n, t, gradient_bytes) for t in types)
        base = level_bandwidth_gbps(self._links, level)
        overlap = self._overlap
        # data-parallel ring over all the GPUs, through the bottleneck
        steps = 2 * (n - 1)
        dyn_bits = overlap * (steps / n * gradient_bytes * 8.0 if n > 1 else 0.0)
        latency = overlap * steps * self._latency[int(level)]
        ref_level = self.pricing.tightest(n)
        ref_base = level_bandwidth_gbps(self._links, ref_level)
        ref_latency = latency_s(ref_level, *self._latency)
        ref = self._overlap * (
            (steps / n * gradient_bytes * 8.0 / (ref_base * 1e9) if n > 1 else 0.0)
            + steps * ref_latency)
        crosses = level is _CLUSTER and dyn_bits > 0
        static = latency
        if dyn_bits > 0 and not crosses:
            static += dyn_bits / (base * 1e9)
        return compute, base, dyn_bits, ref, crosses, static, comm_pair(static, ref)

    def place_mapped(self, placed: Placed, job: Job, par: Parallelism, level: Level) -> Placed:
        """Communication of a mixed-parallel job from its job graph on the ordered GPUs.

        Worker ``v`` of the graph (`perf.job_graph`) runs on
        ``gpu_ids[v]``; `placement_cost` gives each kind of traffic's loads on
        its busiest links and `perf.comm.mapped_comm_s` their time. Kinds that
        stay inside a rack go into ``static_comm_s``; those that cross racks
        keep ``(link seconds, cross-rack bits)`` in ``cross_terms``, priced at
        each rating with the job's uplink share.
        """
        graph, ref = self.pricing.mapped_graph(job, par)
        links = self._links
        overlap = self._overlap
        latencies = self._latency
        static = dyn_bits = 0.0
        cross: list[tuple[float, float]] = []
        for phase in placement_cost(graph, placed.gpu_ids, self.topology).phases:
            link_s = overlap * phase_link_s(phase.gpu_bytes, phase.nic_bytes, links)
            static += overlap * phase.hops * latencies[phase.level]
            if phase.rack_bytes > 0:
                bits = overlap * phase.rack_bytes * 8.0
                cross.append((link_s, bits))
                dyn_bits += bits
            else:
                static += link_s
        placed.base_gbps = level_bandwidth_gbps(links, level)
        placed.dyn_bits = dyn_bits
        placed.ref_comm_s = ref
        placed.crosses = bool(cross)
        placed.cross_terms = tuple(cross) if cross else None
        placed.static_comm_s = static
        placed.comm_pair = comm_pair(static, ref)
        return placed

    def place_state(self, state: JobState) -> Placed:
        """A running job's placement, copy by copy if it is forked.

        A forked job's placement covers all its GPUs (what its neighbours
        feel); copy ``c`` runs on ``gpu_ids[c*n:(c+1)*n]``, and the job's
        uplinks are those of the copies whose own ring spans racks.
        """
        placed = self.place(state.job, state.gpu_ids)
        if state.copies == 1:
            return placed
        n, gpu_ids = state.job.n_gpus, state.gpu_ids
        placed.copies = tuple(self.place(state.job, gpu_ids[c * n:(c + 1) * n])
                              for c in range(state.copies))
        crossing = [copy for copy in placed.copies if copy.crosses]
        placed.crosses = bool(crossing)
        placed.racks = tuple(sorted({rack for copy in crossing for rack in copy.racks}))
        return placed
