"""`NetworkPerf`: iterations per second from GPU type, placement, links and neighbours.

One step of a job takes ``compute / interference + (1 - overlap) * comm``:

* compute comes from the measured table (consolidated throughput, less the
  modelled intra-node all-reduce it already contains) or, for models the
  table lacks, from FLOPs; on a placement mixing GPU types the slowest wins;
* comm is a ring all-reduce at the placement's bottleneck (`perf.comm`),
  cross-rack jobs sharing each rack uplink equally. A mixed-parallel job
  (tensor or pipeline degree above 1) is priced on its worker mapping
  instead: worker ``v`` of its job graph (`policies.parts.job_graph`) runs
  on ``gpu_ids[v]``, `policies.parts.graph_placement.placement_cost` gives
  the traffic of each kind on the busiest links, and `perf.comm.mapped_comm_s`
  its time; the reference is the partitioner's mapping of the empty cluster;
* interference is the speed factor from jobs on the same nodes
  (`perf.interference`); the slowest node sets the pace.

The model keeps an index of running placements by node and by rack uplink,
so `rates` re-rates only the jobs a start or stop can affect: those whose
slowest node's factor or uplink share moved. Each placement keeps its pace
(slowest node factor) and the communication no share changes, so re-rating
a job is a few float operations.

A job forked into copies (`JobState.copies`, HadarE) is indexed once, on all
its GPUs, since its neighbours feel all of them; each copy is its own ring, so
only copies spanning racks share uplinks. Any start or stop on its nodes or
uplinks re-rates it copy by copy, as `perf.base.forked_rate` does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import fields
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import Topology, uniform_cluster
from rackwise.errors import InputError
from rackwise.perf.breakdown import INF, IterationBreakdown
from rackwise.perf.catalogue import CATALOGUE, ModelSpec, assign_models, resolve_model
from rackwise.perf.checkpoint import restart_overhead_s
from rackwise.perf.comm import (
    LINK_NAMES,
    UPLINK,
    Level,
    latency_s,
    level_bandwidth_gbps,
    level_of,
    mapped_comm_s,
    phase_link_s,
    pipeline_bubble_frac,
    ring_allreduce_s,
    tightest_level,
    uplink_capacity_gbps,
)
from rackwise.perf.config import PerfConfig
from rackwise.perf.graph_placement import place_graph, placement_cost
from rackwise.perf.interference import Interference
from rackwise.perf.job_graph import JobGraph, build_job_graph
from rackwise.perf.placed import NO_COMM, Placed, comm_pair, is_mixed
from rackwise.perf.running_index import RunningIndex
from rackwise.perf.throughput import ThroughputTable, default_table
from rackwise.perf.views import Neighbours, Sharing, Weights
from rackwise.workload.job import Job, Parallelism

if TYPE_CHECKING:
    from rackwise.workload.state import JobState

# (field index, value) changes, and the rate iterations follow from (None: unchanged)
_Plan = tuple[tuple[tuple[int, object], ...], float | None]
_JOB_FIELDS = tuple(item.name for item in fields(Job))
_JOB_VALUES = attrgetter(*_JOB_FIELDS)
_JOB_INDEX = {name: index for index, name in enumerate(_JOB_FIELDS)}
_MODEL, _GRADIENT_BYTES, _MODEL_BYTES, _SENSITIVITY, _TOTAL_ITERS = (
    _JOB_INDEX[name] for name in ("model", "gradient_bytes", "model_bytes", "comm_sensitivity",
                                  "total_iters"))


class NetworkPerf:
    """Performance model with network topology, congestion, heterogeneity and interference.

    Args:
        config: Every constant (`PerfConfig`).
        table: Measured throughputs (default: the shipped table).
        assign_models: Give jobs without a model one drawn from the run's
            generator (conditioned on GPU count) and recompute their iterations
            from their trace duration. Off: such jobs run at trace speed.
    """

    def __init__(self, config: PerfConfig | None = None, table: ThroughputTable | None = None,
                 assign_models: bool = True) -> None:
        self.config = config if config is not None else PerfConfig()
        self.table = table
        self.assign_models = assign_models
        self.topology_: Topology | None = None

    def __repr__(self) -> str:
        return f"NetworkPerf(config={self.config!r}, assign_models={self.assign_models})"

    # -------------------------------------------------------------- setting up
    def bind(self, topology: Topology) -> None:
        """Attach to a cluster and clear the index of running jobs."""
        cfg = self.config
        self.topology_ = topology
        self.table_ = self.table if self.table is not None else default_table()
        self.interference_ = Interference(self.table_, cfg.interference_scale)
        self._links = topology.links
        self._gpu_node = topology.gpu_node
        self._node_rack = tuple(node.rack_id for node in topology.nodes)
        self._node_size = tuple(node.n_gpus for node in topology.nodes)
        self._max_node_gpus = topology.max_gpus_per_node
        self._cluster_gbps = level_bandwidth_gbps(self._links, Level.CLUSTER)
        self._max_rack_gpus = max(topology.rack_capacity)
        self._node_type = tuple(node.gpu_type for node in topology.nodes)
        # (nodes, GPUs per node, racks) of a one-GPU placement on each node, shared
        self._one_node = tuple(((node.node_id,), (1,), (node.rack_id,)) for node in topology.nodes)
        self._uplink_gbps = tuple(uplink_capacity_gbps(topology, r) for r in range(topology.n_racks))
        self._latency = (cfg.latency_node_s, cfg.latency_rack_s, cfg.latency_cluster_s)
        self._speedups = dict(cfg.gpu_speedup_vs_v100)
        self._overlap = 1.0 - cfg.comm_overlap_frac
        self._scale = cfg.interference_scale
        self._weights = Weights(self.interference_, cfg.interference_scale)
        index = RunningIndex(self._node_size, self._uplink_gbps, self._cluster_gbps, self._weights,
                             self._scale)
        # the index's own containers, read here on the hot path
        self._placed, self._node_jobs, self._rack_cross = index.placed, index.node_jobs, index.rack_cross
        self._share, self._forked = index.share, index.forked
        self._index, self._unindex = index.add, index.remove
        self._comm_now: dict[str, tuple[float, float]] = {}
        self._compute_cache: dict[tuple[str, int, str, float], float] = {}
        # a one-GPU job's compute per step by (model, gradient bytes, GPU type): `_place`'s common case
        self._one_gpu_compute: dict[tuple[str | None, float, str], float] = {}
        self._graph_cache: dict[tuple[str | None, float, Parallelism], tuple[JobGraph, float]] = {}
        self._ref_cache: dict[tuple[str, int], float] = {}
        self._sensitivity_cache: dict[tuple[object, ...], float] = {}
        counts = Counter(node.gpu_type for node in topology.nodes for _ in range(node.n_gpus))
        self.reference_gpu_type_ = min(counts, key=lambda t: (-counts[t], t))

    def prepare(self, jobs: Sequence[Job], topology: Topology,
                rng: np.random.Generator) -> list[Job]:
        """Bind to ``topology`` and fill in models, bytes, sensitivity and iterations.

        A job without a model gets one (one draw per job from ``rng``, in input
        order) and ``total_iters = duration_s x`` its throughput consolidated
        on the cluster's most common GPU type; so does a job whose
        ``total_iters`` was left at its default (equal to ``duration_s``).

        Raises:
            InputError: a job names a model the catalogue does not know, or the
                cluster has a GPU type the model cannot price.
        """
        self.bind(topology)
        for gpu_type in topology.gpu_types:
            self._speedup(gpu_type)  # fail early on an unknown type
        draws = rng.random(len(jobs))
        needy = [i for i, job in enumerate(jobs) if job.model is None]
        assigned: dict[int, str] = {}
        if self.assign_models and needy:
            names = assign_models([jobs[i].n_gpus for i in needy], draws[needy],
                                  self.config.large_model_frac)
            assigned = dict(zip(needy, names))
        out: list[Job] = []
        plans: dict[tuple[object, ...], _Plan] = {}
        for index, job in enumerate(jobs):
            name = assigned.get(index, job.model)
            if name is None:
                out.append(job)
                continue
            is_assigned = index in assigned
            # Jobs alike in all a plan depends on share it: a trace has few such kinds.
            key = (name, job.model, job.n_gpus, job.gradient_bytes, not job.model_bytes,
                   is_assigned or not job.comm_sensitivity,
                   is_assigned or job.total_iters == job.duration_s, job.parallelism)
            plan = plans.get(key)
            if plan is None:
                plan = plans[key] = self._plan(name, job, is_assigned)
            changes, rate = plan
            if not changes and rate is None:
                out.append(job)
                continue
            values = list(_JOB_VALUES(job))
            for field_index, value in changes:
                values[field_index] = value
            if rate is not None:
                values[_TOTAL_ITERS] = job.duration_s * rate
            out.append(Job(*values))  # positional: `dataclasses.replace` costs far more per job
        return out

    def _plan(self, name: str, job: Job, is_assigned: bool) -> _Plan:
        """What `prepare` changes in ``job`` once it runs model ``name``: field
        changes, and the reference rate its iterations follow from (None: kept)."""
        spec = self._spec(name, job)
        changes: list[tuple[int, object]] = []
        if spec.name != job.model:
            changes.append((_MODEL, spec.name))
        gradient_bytes = job.gradient_bytes or spec.gradient_bytes
        if not job.gradient_bytes:
            changes.append((_GRADIENT_BYTES, gradient_bytes))
        if not job.model_bytes:
            changes.append((_MODEL_BYTES, spec.checkpoint_bytes))
        par = job.parallelism if is_mixed(job.parallelism, job.n_gpus) else None
        if is_assigned or not job.comm_sensitivity:
            sensitivity = (self._sensitivity(spec, job.n_gpus, gradient_bytes) if par is None
                           else self._mapped_sensitivity(spec, job, par, gradient_bytes))
            changes.append((_SENSITIVITY, sensitivity))
        rate = None
        if is_assigned or job.total_iters == job.duration_s:
            rate = (self._reference_rate(spec, job.n_gpus, gradient_bytes) if par is None
                    else self._mapped_reference_rate(spec, job, par, gradient_bytes))
        return tuple(changes), rate

    # ------------------------------------------------------------ the protocol
    def rate(self, job: Job, gpu_ids: tuple[int, ...], running: Mapping[str, JobState]) -> float:
        """Iterations per second of ``job`` on ``gpu_ids`` beside the jobs in ``running``."""
        placed = self._place(job, tuple(gpu_ids))
        if placed.ideal_rate > 0:
            return placed.ideal_rate
        return 1.0 / self._step(placed, *self._what_if_context(job.job_id, running))[0]

    def rates(self, running: Mapping[str, JobState], changed: Collection[str]) -> dict[str, float]:
        """Re-rate the jobs in ``changed`` and those sharing a node or uplink with them.

        Only jobs whose pace (slowest node factor) or uplink share moved are
        re-rated, and only those whose rate moved are reported (plus ``changed``).
        """
        affected: dict[str, Placed] = {}  # the jobs to re-rate, by id
        touched: list[Placed] = []  # placements added or removed
        placed_jobs = self._placed
        for job_id in changed:
            old = placed_jobs.get(job_id)
            state = running.get(job_id)
            if old is not None and (state is None or state.gpu_ids != old.gpu_ids):
                self._unindex(old, affected)
                touched.append(old)
                self._comm_now.pop(job_id, None)
                old = None
            if state is not None:
                if old is None:
                    old = self._place_state(state)
                    old.partner = state.partner
                    self._index(old, affected)
                    touched.append(old)
                else:
                    old.rate = -1.0  # named in `changed`: reported even if its pace did not move
                affected[job_id] = old
        out: dict[str, float] = {}
        if self._forked:
            self._rate_forked(running, affected, touched, out)
        # The live-index case of `_step`, inlined: this loop runs for every re-rated job.
        comm_now = self._comm_now
        shares = self._share
        for job_id, placed in affected.items():
            if job_id not in running:
                continue
            if placed.ideal_rate > 0:
                out[job_id] = placed.ideal_rate
                continue
            if placed.crosses:
                bandwidth = min(placed.base_gbps, min(map(shares.__getitem__, placed.racks)))
                placed.bandwidth = bandwidth
                if placed.cross_terms is None:
                    comm = placed.static_comm_s + placed.dyn_bits / (bandwidth * 1e9)
                else:
                    comm = self._mapped_comm(placed, bandwidth)
                rate = 1.0 / (placed.compute_s / placed.factor + comm)
                if rate == placed.rate:
                    continue
                extra = comm - placed.ref_comm_s  # `comm_pair`, inlined
                comm_now[job_id] = (comm, extra if extra > 0.0 else 0.0)
            else:
                rate = 1.0 / (placed.compute_s / placed.factor + placed.static_comm_s)
                # A bystander whose pace did not move is left out: the engine has nothing to do.
                if rate == placed.rate:
                    continue
                comm_now[job_id] = placed.comm_pair
            placed.rate = rate
            out[job_id] = rate
        return out

    def restart_overhead_s(self, job: Job) -> float:
        cfg = self.config
        nbytes = job.model_bytes
        if not nbytes and job.model in CATALOGUE:
            nbytes = CATALOGUE[job.model].checkpoint_bytes
        return restart_overhead_s(nbytes, write_gbytes_per_s=cfg.storage_write_gbytes_per_s,
                                  read_gbytes_per_s=cfg.storage_read_gbytes_per_s,
                                  fixed_s=cfg.restart_fixed_s)

    def sharing_factor(self, job: Job, partner: Job, gpu_type: str) -> float:
        """Share of its speed ``job`` keeps beside ``partner`` on the same GPUs (`SharedGpus`).

        The measured pair throughputs where the table has the pair, else the
        fitted model (`Interference`); a job without a model counts as average.
        """
        self._bound()
        return 1.0 - self.interference_.slowdown(job.model or "", partner.model or "", gpu_type)

    def comm_per_iter_s(self, job_id: str) -> tuple[float, float]:
        """(communication seconds, of which beyond consolidated) per step at the current rate."""
        return self._comm_now.get(job_id, (0.0, 0.0))

    # ------------------------------------------------------------ explanations
    def iteration_breakdown(self, job: Job, gpu_ids: tuple[int, ...],
                            running: Mapping[str, JobState]) -> IterationBreakdown:
        """Compute, communication and interference of one step of ``job`` on ``gpu_ids``.

        Raises:
            InputError: bad GPU ids, or a job without a catalogue model.
        """
        topology = self._bound()
        gpu_ids = tuple(gpu_ids)
        if not gpu_ids or len(set(gpu_ids)) != len(gpu_ids) or not all(
                0 <= g < topology.n_gpus for g in gpu_ids):
            raise InputError(f"job {job.job_id}: need distinct GPU ids in 0..{topology.n_gpus - 1}",
                             field="gpu_ids")
        if job.model is None:
            raise InputError(f"job {job.job_id} has no model to explain", field="model")
        placed = self._place(job, gpu_ids)
        nodes_jobs, counts = self._what_if_context(job.job_id, running)
        step_s, comm_s = self._step(placed, nodes_jobs, counts)
        factor = self._interference(placed, nodes_jobs)
        gbps, label = self._bandwidth(placed, counts)
        ref_step = placed.compute_s + placed.ref_comm_s
        return IterationBreakdown(
            compute_s=placed.compute_s, comm_s=comm_s, interference_factor=factor,
            level=int(placed.level), bottleneck=label if comm_s > 0 else LINK_NAMES[None],
            bandwidth_gbps=gbps if comm_s > 0 else INF, iteration_s=step_s,
            consolidated_iteration_s=ref_step, consolidated_comm_s=placed.ref_comm_s)

    # -------------------------------------------------------------- internals
    def _bound(self) -> Topology:
        if self.topology_ is None:
            raise InputError("NetworkPerf is not bound to a cluster: call prepare() or bind() first")
        return self.topology_

    def _spec(self, name: str, job: Job) -> ModelSpec:
        spec = CATALOGUE.get(name)
        if spec is not None:
            return spec
        try:
            return resolve_model(name)
        except InputError as exc:
            raise InputError(f"job {job.job_id}: {exc}", field="model") from None

    def _tightest(self, n_gpus: int) -> Level:
        return tightest_level(n_gpus, self._max_node_gpus, self._max_rack_gpus)

    def _speedup(self, gpu_type: str) -> float:
        if gpu_type not in self._speedups:
            if gpu_type not in self.table_.isolated:
                raise InputError(
                    f"GPU type '{gpu_type}' is unknown to the performance model; add it to "
                    f"PerfConfig.gpu_speedup_vs_v100 or merge a throughput table for it",
                    field="gpu_type")
            self._speedups[gpu_type] = self.table_.speedup_vs_v100(gpu_type)
        return self._speedups[gpu_type]

    def _compute_s(self, spec: ModelSpec, n_gpus: int, gpu_type: str, gradient_bytes: float) -> float:
        key = (spec.name, n_gpus, gpu_type, gradient_bytes)
        found = self._compute_cache.get(key)
        if found is not None:
            return found
        if spec.measured:
            extra = {g: self._speedup(g) for g in (gpu_type,) if g not in self.table_.isolated}
            measured_step = 1.0 / self.table_.consolidated(spec.name, n_gpus, gpu_type, extra)
            # The measured step already holds an all-reduce inside one server.
            inside = self._overlap * ring_allreduce_s(
                n_gpus, gradient_bytes, self._links.intra_node_gbps, self._latency[0])
            found = max(measured_step - inside, self.config.min_compute_frac * measured_step)
        else:
            cfg = self.config
            found = spec.flops_per_gpu_step / (
                cfg.v100_peak_tflops * 1e12 * cfg.mfu_frac * self._speedup(gpu_type))
        self._compute_cache[key] = found
        return found

    def _comm_at(self, level: Level, n_gpus: int, gradient_bytes: float) -> float:
        bandwidth = level_bandwidth_gbps(self._links, level)
        return self._overlap * ring_allreduce_s(n_gpus, gradient_bytes, bandwidth,
                                                self._latency[int(level)])

    def _reference_rate(self, spec: ModelSpec, n_gpus: int, gradient_bytes: float) -> float:
        """Steps/s consolidated on the cluster's main GPU type, alone (trace durations' speed)."""
        key = (spec.name, n_gpus)
        found = self._ref_cache.get(key) if gradient_bytes == spec.gradient_bytes else None
        if found is None:
            level = self._tightest(n_gpus)
            step = (self._compute_s(spec, n_gpus, self.reference_gpu_type_, gradient_bytes)
                    + self._comm_at(level, n_gpus, gradient_bytes))
            found = 1.0 / step
            if gradient_bytes == spec.gradient_bytes:
                self._ref_cache[key] = found
        return found

    def _mapped_reference_rate(self, spec: ModelSpec, job: Job, par: Parallelism,
                               gradient_bytes: float) -> float:
        """Steps/s of a mixed-parallel job on the partitioner's mapping of an empty cluster,
        on the main GPU type (its trace duration's speed)."""
        _, ref_comm = self._mapped_graph(job.with_changes(model=spec.name, gradient_bytes=gradient_bytes), par)
        compute = self._compute_s(spec, job.n_gpus, self.reference_gpu_type_, gradient_bytes)
        bubble = pipeline_bubble_frac(par.pipeline, self.config.pipeline_microbatches)
        return 1.0 / (compute * (1.0 + bubble) + ref_comm)

    def _sensitivity(self, spec: ModelSpec, n_gpus: int, gradient_bytes: float) -> float:
        """``1 - t_step(one node) / t_step(two nodes of a rack)``, at >= 2 GPUs."""
        key = (spec.name, n_gpus, gradient_bytes)
        found = self._sensitivity_cache.get(key)
        if found is None:
            found = self._sensitivity_cache[key] = self._sensitivity_of(spec, n_gpus, gradient_bytes)
        return found

    def _sensitivity_of(self, spec: ModelSpec, n_gpus: int, gradient_bytes: float) -> float:
        n = max(n_gpus, 2)
        compute = self._compute_s(spec, n, self.reference_gpu_type_, gradient_bytes)
        near = compute + self._comm_at(Level.NODE, n, gradient_bytes)
        far = compute + self._comm_at(Level.RACK, n, gradient_bytes)
        return max(0.0, 1.0 - near / far)

    def _mapped_sensitivity(self, spec: ModelSpec, job: Job, par: Parallelism,
                            gradient_bytes: float) -> float:
        """`_sensitivity` of a mixed-parallel job: its step on one server of all its
        GPUs against two servers of a rack sharing them, each the partitioner's mapping."""
        key = (spec.name, par.n_gpus, gradient_bytes, par)
        found = self._sensitivity_cache.get(key)
        if found is None:
            graph = build_job_graph(job.with_changes(model=spec.name, gradient_bytes=gradient_bytes), par)
            n = par.n_gpus
            compute = self._compute_s(spec, n, self.reference_gpu_type_, gradient_bytes) * (
                1.0 + pipeline_bubble_frac(par.pipeline, self.config.pipeline_microbatches))
            one = uniform_cluster(1, n, 1, gpu_type=self.reference_gpu_type_, links=self._links)
            two = uniform_cluster(2, -(-n // 2), 2, gpu_type=self.reference_gpu_type_, links=self._links)
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

    def _place(self, job: Job, gpu_ids: tuple[int, ...]) -> Placed:
        placed = Placed()
        placed.job_id = job.job_id
        placed.gpu_ids = gpu_ids
        placed.rate = -1.0
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
                compute = self._one_gpu_compute[key] = self._compute_s(
                    one_spec, 1, gpu_type, job.gradient_bytes or one_spec.gradient_bytes)
            if compute is not None:
                # One GPU: nothing to communicate (most jobs of real traces take this path).
                placed.level, placed.gpu_type = Level.NODE, gpu_type
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
        compute = max(self._compute_s(spec, n, t, gradient_bytes) for t in types)
        par = job.parallelism
        if is_mixed(par, n):
            # mixed parallel: its traffic depends on which worker runs on which GPU
            placed.compute_s = compute * (1.0 + pipeline_bubble_frac(
                par.pipeline, self.config.pipeline_microbatches))
            return self._place_mapped(placed, job, par, level)
        placed.compute_s = compute
        base = level_bandwidth_gbps(self._links, level)
        placed.base_gbps = base
        overlap = self._overlap
        # data-parallel ring over all the GPUs, through the bottleneck
        steps = 2 * (n - 1)
        dyn_bits = overlap * (steps / n * gradient_bytes * 8.0 if n > 1 else 0.0)
        latency = overlap * steps * self._latency[int(level)]
        placed.dyn_bits = dyn_bits
        ref_level = self._tightest(n)
        ref_base = level_bandwidth_gbps(self._links, ref_level)
        ref_latency = latency_s(ref_level, *self._latency)
        ref = self._overlap * (
            (steps / n * gradient_bytes * 8.0 / (ref_base * 1e9) if n > 1 else 0.0)
            + steps * ref_latency)
        placed.ref_comm_s = ref
        placed.crosses = level is Level.CLUSTER and dyn_bits > 0
        placed.cross_terms = None
        static = latency
        if dyn_bits > 0 and not placed.crosses:
            static += dyn_bits / (base * 1e9)
        placed.static_comm_s = static
        placed.comm_pair = comm_pair(static, ref)
        return placed

    def _place_mapped(self, placed: Placed, job: Job, par: Parallelism, level: Level) -> Placed:
        """Communication of a mixed-parallel job from its job graph on the ordered GPUs.

        Worker ``v`` of the graph (`policies.parts.job_graph`) runs on
        ``gpu_ids[v]``; `placement_cost` gives each kind of traffic's loads on
        its busiest links and `perf.comm.mapped_comm_s` their time. Kinds that
        stay inside a rack go into ``static_comm_s``; those that cross racks
        keep ``(link seconds, cross-rack bits)`` in ``cross_terms``, priced at
        each rating with the job's uplink share.
        """
        graph, ref = self._mapped_graph(job, par)
        links = self._links
        overlap = self._overlap
        latencies = self._latency
        static = dyn_bits = 0.0
        cross: list[tuple[float, float]] = []
        for phase in placement_cost(graph, placed.gpu_ids, self._bound()).phases:
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

    def _place_state(self, state: JobState) -> Placed:
        """A running job's placement, copy by copy if it is forked.

        A forked job's placement covers all its GPUs (what its neighbours
        feel); copy ``c`` runs on ``gpu_ids[c*n:(c+1)*n]``, and the job's
        uplinks are those of the copies whose own ring spans racks.
        """
        placed = self._place(state.job, state.gpu_ids)
        if state.copies == 1:
            return placed
        n, gpu_ids = state.job.n_gpus, state.gpu_ids
        placed.copies = tuple(self._place(state.job, gpu_ids[c * n:(c + 1) * n])
                              for c in range(state.copies))
        crossing = [copy for copy in placed.copies if copy.crosses]
        placed.crosses = bool(crossing)
        placed.racks = tuple(sorted({rack for copy in crossing for rack in copy.racks}))
        return placed

    def _rate_forked(self, running: Mapping[str, JobState], affected: dict[str, Placed],
                     touched: list[Placed], out: dict[str, float]) -> None:
        """Re-rate the forked jobs that share a node or an uplink with ``touched``.

        A forked job's copies run at their own paces, so a change on any of its
        nodes may move its rate, not only one on its slowest. Each copy is rated
        as `rate` rates it (the engine's `forked_rate` asks the same); ``out``
        gets the sum of the copies' rates and the communication per step is
        the copies' mean, weighted by their rates. The forked jobs leave
        ``affected``.
        """
        nodes = {node for placed in touched for node in placed.nodes}
        racks = {rack for placed in touched if placed.crosses for rack in placed.racks}
        for job_id, placed in self._forked.items():
            if job_id in affected or not nodes.isdisjoint(placed.nodes) or (
                    placed.crosses and not racks.isdisjoint(placed.racks)):
                affected.pop(job_id, None)
                if job_id not in running:
                    continue
                neighbours, sharing = self._what_if_context(job_id, running)
                total = comm = extra = 0.0
                for copy in placed.copies or ():
                    if copy.ideal_rate > 0:
                        total += copy.ideal_rate
                        continue
                    step_s, copy_comm = self._step(copy, neighbours, sharing)
                    rate = 1.0 / step_s
                    total += rate
                    comm += rate * copy_comm
                    extra += rate * max(0.0, copy_comm - copy.ref_comm_s)
                out[job_id] = total
                self._comm_now[job_id] = (comm / total, extra / total) if total > 0 else NO_COMM

    def _mapped_graph(self, job: Job, par: Parallelism) -> tuple[JobGraph, float]:
        """The job graph of a mixed-parallel job and its communication per step
        where the partitioner puts it on this cluster, empty (the consolidated reference)."""
        key = (job.model, job.gradient_bytes, par)
        found = self._graph_cache.get(key)
        if found is None:
            graph = build_job_graph(job, par)
            topology = self._bound()
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

    def _mapped_comm(self, placed: Placed, bandwidth: float) -> float:
        """Communication per step of a mapped job whose cross-rack path runs at ``bandwidth`` Gb/s."""
        comm = placed.static_comm_s
        bps = bandwidth * 1e9
        for link_s, bits in placed.cross_terms or ():
            comm += max(bits / bps, link_s)
        return comm

    def _what_if_context(self, job_id: str, running: Mapping[str, JobState]
                         ) -> tuple[Neighbours, Sharing]:
        """Neighbours per node and cross-rack jobs per rack, as if ``job_id`` were added.

        Uses the live index when it covers ``running`` (the engine's case),
        else builds one from ``running`` (O(running)).
        """
        if len(running) <= len(self._placed):
            return Neighbours(self._node_jobs, running, job_id), Sharing(self._rack_cross, running, job_id)
        nodes: list[dict[str, tuple[Placed, int, int]]] = [{} for _ in self._node_jobs]
        racks: list[dict[str, Placed]] = [{} for _ in self._rack_cross]
        for other_id, state in running.items():
            if other_id == job_id:
                continue
            other = self._placed.get(other_id)
            if other is None or other.gpu_ids != state.gpu_ids:
                other = self._place_state(state)
            spread = len(other.nodes) > 1
            for i, node in enumerate(other.nodes):
                nodes[node][other_id] = (other, other.node_gpus[i], i if spread else -1)
            if other.crosses:
                for rack in other.racks:
                    racks[rack][other_id] = other
        return Neighbours(nodes, running, job_id), Sharing(racks, running, job_id)

    def _interference(self, placed: Placed, nodes: Neighbours | None) -> float:
        """Speed factor from neighbours: the slowest node's product of neighbour factors."""
        if self._scale <= 0:
            return 1.0
        if nodes is None:
            return placed.factor
        weights = self._weights
        row = weights.row(placed.model, placed.gpu_type)
        factor = 1.0
        for node in placed.nodes:
            size = self._node_size[node]
            node_factor = 1.0
            for other, other_gpus, _ in nodes[node]:
                node_factor *= 1.0 - row[weights.id_of(other.model)] * other_gpus / size
            factor = min(factor, node_factor)
        return factor

    def _bandwidth(self, placed: Placed, sharing: Sharing | None) -> tuple[float, str]:
        base = placed.base_gbps
        label = LINK_NAMES[placed.level]
        if placed.crosses:
            for rack in placed.racks:
                n_sharing = len(self._rack_cross[rack]) if sharing is None else sharing[rack]
                share = self._uplink_gbps[rack] / max(1, n_sharing)
                if share < base:
                    base, label = share, UPLINK
        return base, label

    def _step(self, placed: Placed, nodes: Neighbours | None,
              sharing: Sharing | None) -> tuple[float, float]:
        """(seconds per step, communication seconds per step)."""
        comm = placed.static_comm_s
        if placed.crosses:
            bandwidth, _ = self._bandwidth(placed, sharing)
            if placed.cross_terms is None:
                comm += placed.dyn_bits / (bandwidth * 1e9)
            else:
                comm = self._mapped_comm(placed, bandwidth)
        if self._scale > 0:
            return placed.compute_s / self._interference(placed, nodes) + comm, comm
        return placed.compute_s + comm, comm
