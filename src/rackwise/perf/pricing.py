"""What one job's step costs alone on a placement level: compute, all-reduce, references.

`StepPricing` prices a job with nobody else on the cluster: compute per step
on a GPU type (from the measured table, or from FLOPs), a ring all-reduce at
a placement level, the consolidated reference speed that trace durations are
read at, and communication sensitivity (how much slower two nodes of a rack
are than one). Every result is cached per (model, GPUs, type, bytes).
`rackwise.perf.model.NetworkPerf` adds what neighbours and shared uplinks
change, from its index of running jobs.
"""

from __future__ import annotations

from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import Topology, uniform_cluster
from rackwise.errors import InputError
from rackwise.perf.catalogue import CATALOGUE, ModelSpec, resolve_model
from rackwise.perf.comm import (
    Level,
    level_bandwidth_gbps,
    mapped_comm_s,
    pipeline_bubble_frac,
    ring_allreduce_s,
    tightest_level,
    uplink_capacity_gbps,
)
from rackwise.perf.config import PerfConfig
from rackwise.perf.graph_placement import place_graph
from rackwise.perf.job_graph import JobGraph, build_job_graph
from rackwise.perf.throughput import ThroughputTable
from rackwise.workload.job import Job, Parallelism


class StepPricing:
    """A job's step alone on ``topology``, under ``config`` and the measured ``table``.

    Args:
        config: Every constant of the model.
        table: Measured throughputs.
        topology: The cluster (its links, sizes and main GPU type).
        reference_gpu_type: The type trace durations are read at (the cluster's most common).
    """

    def __init__(self, config: PerfConfig, table: ThroughputTable, topology: Topology,
                 reference_gpu_type: str) -> None:
        self.config = config
        self.table = table
        self.topology = topology
        self.reference_gpu_type = reference_gpu_type
        self._links = topology.links
        self._gpu_node = topology.gpu_node
        self._node_rack = topology.node_rack
        self._max_node_gpus = topology.max_gpus_per_node
        self._max_rack_gpus = max(topology.rack_capacity)
        self._cluster_gbps = level_bandwidth_gbps(self._links, Level.CLUSTER)
        self._uplink_gbps = tuple(uplink_capacity_gbps(topology, r) for r in range(topology.n_racks))
        self._latency = config.latency_by_level_s
        self._overlap = config.exposed_comm_frac
        # A cluster file's own declarations take precedence over the catalogue's defaults.
        self._speedups = {**config.gpu_speedup_vs_v100, **dict(topology.gpu_speedups)}
        self._compute_cache: dict[tuple[str, int, str, float], float] = {}
        self._graph_cache: dict[tuple[str | None, float, Parallelism], tuple[JobGraph, float]] = {}
        self._ref_cache: dict[tuple[str, int], float] = {}
        self._sensitivity_cache: dict[tuple[object, ...], float] = {}

    def spec(self, name: str, job: Job) -> ModelSpec:
        spec = CATALOGUE.get(name)
        if spec is not None:
            return spec
        try:
            return resolve_model(name)
        except InputError as exc:
            raise InputError(f"job {job.job_id}: {exc}", field="model") from None

    def tightest(self, n_gpus: int) -> Level:
        return tightest_level(n_gpus, self._max_node_gpus, self._max_rack_gpus)

    def speedup(self, gpu_type: str) -> float:
        if gpu_type not in self._speedups:
            if gpu_type not in self.table.isolated:
                raise InputError(
                    f"GPU type '{gpu_type}' is unknown to the performance model; declare its "
                    f"speed in the cluster file (gpu_speedup_vs_v100: {{{gpu_type}: SPEED-UP}})",
                    field="gpu_type")
            self._speedups[gpu_type] = self.table.speedup_vs_v100(gpu_type)
        return self._speedups[gpu_type]

    def compute_s(self, spec: ModelSpec, n_gpus: int, gpu_type: str, gradient_bytes: float) -> float:
        key = (spec.name, n_gpus, gpu_type, gradient_bytes)
        found = self._compute_cache.get(key)
        if found is not None:
            return found
        if spec.measured:
            extra = {g: self.speedup(g) for g in (gpu_type,) if g not in self.table.isolated}
            measured_step = 1.0 / self.table.consolidated(spec.name, n_gpus, gpu_type, extra)
            # The measured step already holds an all-reduce inside one server.
            inside = self._overlap * ring_allreduce_s(
                n_gpus, gradient_bytes, self._links.intra_node_gbps, self._latency[0])
            found = max(measured_step - inside, self.config.min_compute_frac * measured_step)
        else:
            cfg = self.config
            found = spec.flops_per_gpu_step / (
                cfg.v100_peak_tflops * 1e12 * cfg.mfu_frac * self.speedup(gpu_type))
        self._compute_cache[key] = found
        return found

    def comm_at(self, level: Level, n_gpus: int, gradient_bytes: float) -> float:
        bandwidth = level_bandwidth_gbps(self._links, level)
        return self._overlap * ring_allreduce_s(n_gpus, gradient_bytes, bandwidth,
                                                self._latency[int(level)])

    def reference_rate(self, spec: ModelSpec, n_gpus: int, gradient_bytes: float) -> float:
        """Steps/s consolidated on the cluster's main GPU type, alone (trace durations' speed)."""
        key = (spec.name, n_gpus)
        found = self._ref_cache.get(key) if gradient_bytes == spec.gradient_bytes else None
        if found is None:
            level = self.tightest(n_gpus)
            step = (self.compute_s(spec, n_gpus, self.reference_gpu_type, gradient_bytes)
                    + self.comm_at(level, n_gpus, gradient_bytes))
            found = 1.0 / step
            if gradient_bytes == spec.gradient_bytes:
                self._ref_cache[key] = found
        return found

    def mapped_reference_rate(self, spec: ModelSpec, job: Job, par: Parallelism,
                               gradient_bytes: float) -> float:
        """Steps/s of a mixed-parallel job on the partitioner's mapping of an empty cluster,
        on the main GPU type (its trace duration's speed)."""
        _, ref_comm = self.mapped_graph(job.with_changes(model=spec.name, gradient_bytes=gradient_bytes), par)
        compute = self.compute_s(spec, job.n_gpus, self.reference_gpu_type, gradient_bytes)
        bubble = pipeline_bubble_frac(par.pipeline, self.config.pipeline_microbatches)
        return 1.0 / (compute * (1.0 + bubble) + ref_comm)

    def sensitivity(self, spec: ModelSpec, n_gpus: int, gradient_bytes: float) -> float:
        """``1 - t_step(one node) / t_step(two nodes of a rack)``, at >= 2 GPUs."""
        key = (spec.name, n_gpus, gradient_bytes)
        found = self._sensitivity_cache.get(key)
        if found is None:
            found = self._sensitivity_cache[key] = self._sensitivity_of(spec, n_gpus, gradient_bytes)
        return found

    def _sensitivity_of(self, spec: ModelSpec, n_gpus: int, gradient_bytes: float) -> float:
        n = max(n_gpus, 2)
        compute = self.compute_s(spec, n, self.reference_gpu_type, gradient_bytes)
        near = compute + self.comm_at(Level.NODE, n, gradient_bytes)
        far = compute + self.comm_at(Level.RACK, n, gradient_bytes)
        return max(0.0, 1.0 - near / far)

    def mapped_sensitivity(self, spec: ModelSpec, job: Job, par: Parallelism,
                            gradient_bytes: float) -> float:
        """`_sensitivity` of a mixed-parallel job: its step on one server of all its
        GPUs against two servers of a rack sharing them, each the partitioner's mapping."""
        key = (spec.name, par.n_gpus, gradient_bytes, par)
        found = self._sensitivity_cache.get(key)
        if found is None:
            graph = build_job_graph(job.with_changes(model=spec.name, gradient_bytes=gradient_bytes), par)
            n = par.n_gpus
            compute = self.compute_s(spec, n, self.reference_gpu_type, gradient_bytes) * (
                1.0 + pipeline_bubble_frac(par.pipeline, self.config.pipeline_microbatches))
            one = uniform_cluster(1, n, 1, gpu_type=self.reference_gpu_type, links=self._links)
            two = uniform_cluster(2, -(-n // 2), 2, gpu_type=self.reference_gpu_type, links=self._links)
            near = compute + self._comm_on_empty(graph, one)
            far = compute + self._comm_on_empty(graph, two)
            found = self._sensitivity_cache[key] = max(0.0, 1.0 - near / far)
        return found

    def _comm_on_empty(self, graph: JobGraph, topology: Topology) -> float:
        """Communication per step of ``graph`` where the partitioner maps it on an empty ``topology``."""
        best = place_graph(Allocation(topology), graph)
        assert best is not None  # the topologies above hold every worker
        return self._overlap * mapped_comm_s(
            ((p.hops, p.level, p.gpu_bytes, p.nic_bytes, p.rack_bytes) for p in best.phases),
            self._links, self._latency)

    def mapped_graph(self, job: Job, par: Parallelism) -> tuple[JobGraph, float]:
        """The job graph of a mixed-parallel job and its communication per step
        where the partitioner puts it on this cluster, empty (the consolidated reference)."""
        key = (job.model, job.gradient_bytes, par)
        found = self._graph_cache.get(key)
        if found is None:
            graph = build_job_graph(job, par)
            topology = self.topology
            best = place_graph(Allocation(topology), graph)
            if best is None:  # larger than the cluster: no reference to compare with
                ref = 0.0
            else:
                racks = {self._node_rack[self._gpu_node[g]] for g in best.gpu_ids}
                cross_gbps = min([self._cluster_gbps, *(self._uplink_gbps[r] for r in racks)])
                ref = self._overlap * mapped_comm_s(
                    ((p.hops, p.level, p.gpu_bytes, p.nic_bytes, p.rack_bytes) for p in best.phases),
                    self._links, self._latency, cross_gbps)
            found = self._graph_cache[key] = (graph, ref)
        return found
