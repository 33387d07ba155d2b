"""`NetworkPerf`: iterations per second from GPU type, placement, links and neighbours.

One step of a job takes ``compute / interference + (1 - overlap) * comm``:

* compute comes from the measured table (consolidated throughput, less the
  modelled intra-node all-reduce it already contains) or, for models the
  table lacks, from FLOPs; on a placement mixing GPU types the slowest wins;
* comm is a ring all-reduce at the placement's bottleneck (`perf.comm`),
  cross-rack jobs sharing each rack uplink equally. A mixed-parallel job
  (tensor or pipeline degree above 1) is priced on its worker mapping
  instead: worker ``v`` of its job graph (`perf.job_graph`) runs
  on ``gpu_ids[v]``, `perf.graph_placement.placement_cost` gives
  the traffic of each kind on the busiest links, and `perf.comm.mapped_comm_s`
  its time; the reference is the partitioner's mapping of the empty cluster;
* interference is the speed factor from jobs on the same nodes
  (`perf.interference`); the slowest node sets the pace.

The parts live in their own modules: `perf.pricing` (a step alone),
`perf.placing` (the placement record), `perf.running_index` (who runs where)
and `perf.contention` (what neighbours and uplinks change). The model keeps
an index of running placements by node and by rack uplink,
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
from typing import TYPE_CHECKING, Any

import numpy as np
from mypy_extensions import mypyc_attr

from rackwise.cluster.topology import Topology
from rackwise.errors import InputError
from rackwise.perf.base import NO_COMM
from rackwise.perf.breakdown import INF, IterationBreakdown
from rackwise.perf.catalogue import CATALOGUE, assign_models
from rackwise.perf.checkpoint import restart_overhead_s
from rackwise.perf.comm import (
    LINK_NAMES,
    Level,
    level_bandwidth_gbps,
    uplink_capacity_gbps,
)
from rackwise.perf.config import PerfConfig
from rackwise.perf.contention import Contention, mapped_comm
from rackwise.perf.interference import Interference
from rackwise.perf.placed import Placed, is_mixed
from rackwise.perf.placing import Placing
from rackwise.perf.pricing import StepPricing
from rackwise.perf.running_index import RunningIndex
from rackwise.perf.throughput import ThroughputTable, default_table
from rackwise.perf.views import Weights
from rackwise.workload.job import FIELD_INDEX, Job, build_job, field_values
from rackwise.workload.state import state_of

if TYPE_CHECKING:
    from rackwise.workload.state import JobState

# (field index, value) changes, and the rate iterations follow from (None: unchanged)
_Plan = tuple[tuple[tuple[int, object], ...], float | None]
_MODEL, _GRADIENT_BYTES, _MODEL_BYTES, _SENSITIVITY, _TOTAL_ITERS = (
    FIELD_INDEX[name] for name in ("model", "gradient_bytes", "model_bytes", "comm_sensitivity",
                                  "total_iters"))


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class NetworkPerf:
    """Performance model with network topology, congestion, heterogeneity and interference.

    Args:
        config: Every constant (`PerfConfig`), or a mapping of the fields to
            change from `PerfConfig`'s defaults (an experiment's ``perf_params``).
        table: Measured throughputs (default: the shipped table).
        assign_models: Give jobs without a model one drawn from the run's
            generator (conditioned on GPU count) and recompute their iterations
            from their trace duration. Off: such jobs run at trace speed.
    """

    def __init__(self, config: PerfConfig | Mapping[str, Any] | None = None,
                 table: ThroughputTable | None = None, assign_models: bool = True) -> None:
        if isinstance(config, Mapping):
            config = PerfConfig(**config)
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
        counts = Counter(node.gpu_type for node in topology.nodes for _ in range(node.n_gpus))
        self.reference_gpu_type_ = min(counts, key=lambda t: (-counts[t], t))
        self.pricing_ = StepPricing(cfg, self.table_, topology, self.reference_gpu_type_)
        self.placing_ = Placing(cfg, topology, self.pricing_)
        uplink_gbps = tuple(uplink_capacity_gbps(topology, r) for r in range(topology.n_racks))
        index = RunningIndex(tuple(node.n_gpus for node in topology.nodes), uplink_gbps,
                             level_bandwidth_gbps(topology.links, Level.CLUSTER),
                             Weights(self.interference_, cfg.interference_scale), cfg.interference_scale)
        self.index_ = index
        # the index's own containers, read here on the hot path
        self._placed, self._forked = index.placed, index.forked
        self._comm_now: dict[str, tuple[float, float]] = {}
        self.contention_ = Contention(index, self.placing_.place_state, self._comm_now)

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
            self.pricing_.speedup(gpu_type)  # fail early on an unknown type
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
            values = list(field_values(job))
            for field_index, value in changes:
                values[field_index] = value
            if rate is not None:
                values[_TOTAL_ITERS] = job.duration_s * rate
            out.append(build_job(*values))  # positional: `Job.with_changes` costs more per job
        return out

    def _plan(self, name: str, job: Job, is_assigned: bool) -> _Plan:
        """What `prepare` changes in ``job`` once it runs model ``name``: field
        changes, and the reference rate its iterations follow from (None: kept)."""
        spec = self.pricing_.spec(name, job)
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
            sensitivity = (self.pricing_.sensitivity(spec, job.n_gpus, gradient_bytes) if par is None
                           else self.pricing_.mapped_sensitivity(spec, job, par, gradient_bytes))
            changes.append((_SENSITIVITY, sensitivity))
        rate = None
        if is_assigned or job.total_iters == job.duration_s:
            rate = (self.pricing_.reference_rate(spec, job.n_gpus, gradient_bytes) if par is None
                    else self.pricing_.mapped_reference_rate(spec, job, par, gradient_bytes))
        return tuple(changes), rate

    # ------------------------------------------------------------ the protocol
    def rate(self, job: Job, gpu_ids: tuple[int, ...], running: Mapping[str, JobState]) -> float:
        """Iterations per second of ``job`` on ``gpu_ids`` beside the jobs in ``running``."""
        placed = self.placing_.place(job, tuple(gpu_ids))
        if placed.ideal_rate > 0:
            return placed.ideal_rate
        return 1.0 / self.contention_.step(placed, *self.contention_.what_if_context(job.job_id, running))[0]

    def rates(self, running: Mapping[str, JobState], changed: Collection[str]) -> dict[str, float]:
        """Re-rate the jobs in ``changed`` and those sharing a node or uplink with them.

        Only jobs whose pace (slowest node factor) or uplink share moved are
        re-rated, and only those whose rate moved are reported (plus ``changed``).
        """
        affected = self.index_.affected()  # the placements to re-rate
        touched: list[Placed] = []  # placements added or removed
        placed_jobs = self._placed
        for job_id in changed:
            old = placed_jobs.get(job_id)
            state = state_of(running, job_id)
            if old is not None and (state is None or state.gpu_ids != old.gpu_ids):
                self.index_.remove(old, affected)
                affected.drop(old)  # gone from the index: nothing to re-rate
                touched.append(old)
                self._comm_now.pop(job_id, None)
                old = None
            if state is not None:
                if old is None:
                    old = self.placing_.place_state(state)
                    old.partner = state.partner
                    self.index_.add(old, affected)
                    touched.append(old)
                else:
                    old.rate = -1.0  # named in `changed`: reported even if its pace did not move
                affected.add(old)
        out: dict[str, float] = {}
        if self._forked:
            self.contention_.rate_forked(running, affected, touched, out)
        # The live-index case of `_step`, inlined: this loop runs for every re-rated job. `out`
        # follows the forked jobs' order, then that of `placements`, which comes from the sorted
        # `changed` and the index's lists: the same in every process, as the engine re-rates in it.
        comm_now = self._comm_now
        listing = affected.listing
        for placed in affected.placements:
            job_id = placed.job_id
            if placed.listed != listing or job_id not in running:
                continue
            if placed.ideal_rate > 0:
                out[job_id] = placed.ideal_rate
                continue
            if placed.crosses:
                bandwidth = placed.bandwidth  # the index keeps it current
                if placed.cross_terms is None:
                    comm = placed.static_comm_s + placed.dyn_bits / (bandwidth * 1e9)
                else:
                    comm = mapped_comm(placed, bandwidth)
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

    @property
    def comm_per_iter(self) -> dict[str, tuple[float, float]]:
        """`CommAccounting`'s table: per running job, (communication seconds, of which beyond
        consolidated) per step at its current rate; a job without an entry communicates nothing."""
        return self._comm_now

    def comm_per_iter_s(self, job_id: str) -> tuple[float, float]:
        """(communication seconds, of which beyond consolidated) per step at the current rate."""
        return self._comm_now.get(job_id, NO_COMM)

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
        placed = self.placing_.place(job, gpu_ids)
        nodes_jobs, counts = self.contention_.what_if_context(job.job_id, running)
        step_s, comm_s = self.contention_.step(placed, nodes_jobs, counts)
        factor = self.contention_.interference(placed, nodes_jobs)
        gbps, label = self.contention_.bandwidth(placed, counts)
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
