"""A-SRPT: prediction-assisted online scheduling of mixed-parallel training jobs.

rackwise's implementation of the published design (Luo, Liu, Lee, Shroff,
arXiv 2501.05563); every choice the abstract leaves open is a named
parameter below, explained in docs/policies/asrpt.md. In short:

1. each job is a graph of GPU workers and the bytes they exchange, placed
   so heavy edges stay inside a server (`parts.graph_placement`);
2. a random forest predicts each job's iterations (`parts.predictor`);
3. the cluster is mapped to one virtual machine of capacity G GPUs running
   preemptive SRPT on predicted work (`parts.virtual_machine`), and the
   machine's order decides which jobs run and which are preempted.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import ClassVar, Literal

import numpy as np

from rackwise.cluster.allocation import Allocation, TentativeAllocation
from rackwise.engine.view import ClusterView
from rackwise.perf.graph_placement import (
    GraphPlacement,
    PlacementRecord,
    place_graph,
    placement_cost,
)
from rackwise.perf.job_graph import JobGraph, build_job_graph
from rackwise.policies.base import BasePolicy, Decisions, Start
from rackwise.policies.parts.placement import get_placement
from rackwise.policies.parts.predictor import (
    IterationPredictor,
    JobFeatures,
    PredictionRecord,
    require_sklearn,
)
from rackwise.policies.parts.virtual_machine import VirtualMachine
from rackwise.workload.job import Job
from rackwise.workload.state import JobState, Status

Key = tuple[float, float, int]  # a virtual-machine priority, smallest first


@dataclass(kw_only=True)
class Asrpt(BasePolicy):
    """Virtual single-machine SRPT on predicted work, with graph placement.

    Args:
        predictor: "forest" (random forest, needs the ``ml`` extra),
            "median" (cold-start rules only) or "oracle" (true iterations).
        gate: "arrival" (a job may run once it arrives) or "vm_completion"
            (only once the virtual machine has finished it; never preempts).
        preempt: Preempt running jobs the virtual machine ranks lower.
        strict_order: No backfilling: a job that cannot start blocks later ones.
        placement: "graph" (communication-aware partitioner) or any name in
            ``parts.placement.PLACEMENTS`` (an ablation).
        epsilon: A job displaces a running one only if its remaining virtual
            time is below ``(1 - epsilon)`` of the victim's.
        min_run_s: A job runs at least this long before it can be preempted.
        tick_s: Re-plan at multiples of this while jobs wait (preempt on).
        overrun_factor: A job that reaches its predicted iterations gets
            ``ceil((1 + overrun_factor) * done)`` as its new prediction.
        refit_every: Refit the forest after this many more finished jobs.
        min_train_rows: Finished jobs needed before the forest is used.
        n_estimators: Trees in the forest.
        predict_target: "duration" learns run time on the job's ideal
            placement (iterations x tau*), "iterations" learns iterations.
        default_prediction: Prediction when nothing has finished yet, in
            the target's unit (seconds or iterations).
        repredict_waiting: After a refit, predict again for jobs not yet started.
        kl_passes: Refinement passes of the graph partitioner.
    """

    name: ClassVar[str] = "asrpt"
    preempts: ClassVar[bool] = True
    needs_extra: ClassVar[str | None] = "ml"

    predictor: Literal["forest", "median", "oracle"] = "forest"
    gate: Literal["arrival", "vm_completion"] = "arrival"
    preempt: bool = True
    strict_order: bool = False
    placement: str = "graph"
    epsilon: float = 0.1
    min_run_s: float = 60.0
    tick_s: float = 60.0
    overrun_factor: float = 0.5
    refit_every: int = 50
    min_train_rows: int = 20
    n_estimators: int = 100
    predict_target: Literal["duration", "iterations"] = "duration"
    default_prediction: float = 1_000.0
    repredict_waiting: bool = True
    kl_passes: int = 10

    def __post_init__(self) -> None:
        if self.predictor == "forest":
            require_sklearn()  # fail when the policy is asked for, not mid-run

    # --------------------------------------------------------------- run state
    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.vm_ = VirtualMachine(0.0)
        self.predictor_ = IterationPredictor(
            use_forest=self.predictor == "forest", min_train_rows=self.min_train_rows,
            refit_every=self.refit_every, default_iters=self.default_prediction,
            forest_params={"n_estimators": self.n_estimators},
            random_state=int(rng.integers(2**31 - 1)))
        self.capacity_gpus_ = view.topology.n_gpus
        self.empty_ = Allocation(view.topology)  # never changed: "empty cluster" placements
        self.arrived_: list[Job] = []
        self.waiting_: dict[str, Job] = {}  # arrived, never started
        self.features_: dict[str, JobFeatures] = {}
        self.estimate_iters_: dict[str, float] = {}  # current prediction, overruns included
        self.predicted_: dict[str, tuple[float, str]] = {}  # prediction the job was scheduled on
        self.vm_s_per_iter_: dict[str, float] = {}  # g * tau* / G
        self.unit_: dict[str, float] = {}  # prediction-target units per iteration
        self.graphs_: dict[str, JobGraph] = {}
        self.prediction_log_: list[PredictionRecord] = []
        self.placement_log_: list[PlacementRecord] = []

    def on_arrival(self, job: Job, now: float) -> None:
        # Predicted once tau* is known, in `schedule` at this same instant.
        if self.predictor != "oracle":
            self.features_[job.job_id] = self.predictor_.features(job)
        self.arrived_.append(job)
        self.waiting_[job.job_id] = job

    def on_completion(self, job: Job, now: float) -> None:
        job_id = job.job_id
        self.vm_.advance(now)
        self.vm_.remove(job_id)
        for table in (self.estimate_iters_, self.vm_s_per_iter_, self.graphs_, self.waiting_):
            table.pop(job_id, None)
        entry = self.predicted_.pop(job_id, None)
        if entry is None:
            # Announced (a driver adopting a running cluster) but finished before it was scheduled.
            self.arrived_ = [pending for pending in self.arrived_ if pending.job_id != job_id]
            self.features_.pop(job_id, None)
            return
        predicted, source = entry
        self.prediction_log_.append(PredictionRecord(job_id, predicted, job.total_iters, source))
        unit = self.unit_.pop(job_id)
        features = self.features_.pop(job_id, None)
        refit = features is not None and self.predictor_.observe(features, job.total_iters * unit)
        if refit and self.repredict_waiting:
            self._repredict()

    def _repredict(self) -> None:
        """New forest: new predictions for jobs that have not started yet."""
        ids = [job_id for job_id in self.waiting_ if job_id in self.vm_s_per_iter_]
        guesses = self.predictor_.predict([self.features_[job_id] for job_id in ids])
        for job_id, (value, source) in zip(ids, guesses):
            iters = value / self.unit_[job_id]
            self.predicted_[job_id] = (iters, source)
            self._set_estimate(job_id, iters)

    def _set_estimate(self, job_id: str, iters: float) -> None:
        delta = iters - self.estimate_iters_[job_id]
        self.estimate_iters_[job_id] = iters
        if delta:
            self.vm_.grow(job_id, delta * self.vm_s_per_iter_[job_id])

    # ---------------------------------------------------------------- schedule
    def schedule(self, view: ClusterView, now: float) -> Decisions:
        vm = self.vm_
        vm.advance(now)
        for job in self.arrived_:
            self._enter_vm(view, job)
        self.arrived_.clear()
        self._check_overruns(view.running, now)

        if not view.pending:
            return Decisions()
        pending: Iterable[tuple[str, JobState]] = view.pending.items()
        if self.gate != "arrival":
            pending = [(job_id, s) for job_id, s in pending if vm.is_overdue(job_id)]
        eligible = vm.ranked(pending)
        free = view.tentative()
        if self.preempt and self.gate == "arrival":
            running = vm.ranked(view.running.items())
            starts, preempted = self._preempt_to_vm_order(running, eligible, free, now)
        else:
            starts, preempted = [], []
        started = {start.job_id for start in starts}
        for _, state in eligible:  # backfill, in key order
            if state.job_id in started:
                continue
            started_now = free.n_free >= state.n_gpus and self._try_start(state, free, starts, now)
            if not started_now and (self.strict_order or free.n_free == 0):
                break
        return Decisions(start=tuple(starts), preempt=tuple(preempted),
                         wake_at=self._wake_at(view, now, len(starts) - len(preempted)))

    def _enter_vm(self, view: ClusterView, job: Job) -> None:
        """Predict an arrived job and put it on the virtual machine, sized g * N * tau* / G."""
        ideal = self._placement(self.empty_, job)
        assert ideal is not None  # the engine refuses jobs larger than the cluster
        rate = view.perf.rate(job, ideal.gpu_ids, {})
        per_iter = job.n_gpus / (rate * self.capacity_gpus_) if rate > 0 else 0.0
        tau = 1.0 / rate if 0 < rate < math.inf else 0.0
        unit = self.unit_[job.job_id] = tau if self.predict_target == "duration" and tau > 0 else 1.0
        if self.predictor == "oracle":
            iters, source = job.total_iters, "oracle"
        else:
            value, source = self.predictor_.predict([self.features_[job.job_id]])[0]
            iters = value / unit
        self.predicted_[job.job_id] = (iters, source)
        self.vm_s_per_iter_[job.job_id] = per_iter
        self.estimate_iters_[job.job_id] = iters
        self.vm_.add(job.job_id, iters * per_iter, job.submit_time)

    def _check_overruns(self, running: Mapping[str, JobState], now: float) -> None:
        """A job that ran past its prediction gets a larger one (the "adaptive" part).

        Asked of every running job at every event, so the loop is kept tight.
        """
        estimates = self.estimate_iters_
        for job_id, state in running.items():
            done = state.iters_at(now)
            if done >= estimates[job_id] and done < state.job.total_iters:
                grown = max(math.ceil((1.0 + self.overrun_factor) * done), math.floor(done) + 1)
                self._set_estimate(job_id, float(grown))

    def _preempt_to_vm_order(self, running: list[tuple[Key, JobState]],
                             eligible: Iterable[tuple[Key, JobState]], free: TentativeAllocation,
                             now: float) -> tuple[list[Start], list[str]]:
        """Start the jobs the virtual machine ranks first, preempting lower-ranked ones.

        Both lists hold ``(key, state)`` in key order. The desired set is the
        greedy prefix, by GPU count, of all of them. A running job outside it
        is preempted only when a desired job cannot be placed otherwise, has
        run at least ``min_run_s``, and ranks clearly lower (``epsilon``).
        """
        room = self.capacity_gpus_
        desired: list[tuple[Key, JobState]] = []
        for item in heapq.merge(running, eligible, key=itemgetter(0)):
            if item[1].n_gpus <= room:
                desired.append(item)
                room -= item[1].n_gpus
                if room == 0:
                    break
        desired_ids = {s.job_id for _, s in desired}
        victims = [(k[0], s) for k, s in reversed(running) if s.job_id not in desired_ids]
        starts: list[Start] = []
        preempted: list[str] = []
        for key, state in desired:
            if state.status is Status.RUNNING or self._try_start(state, free, starts, now):
                continue
            bar = key[0] / (1.0 - self.epsilon) if self.epsilon < 1 else math.inf
            given: list[JobState] = []
            for remaining_s, victim in victims:
                if now - victim.run_start < self.min_run_s or not remaining_s > bar:
                    continue
                free.give(victim.gpu_ids)
                given.append(victim)
                if free.n_free >= state.n_gpus and self._try_start(state, free, starts, now):
                    break
            else:
                for victim in given:  # not enough: undo
                    free.take(victim.gpu_ids)
                continue
            preempted.extend(v.job_id for v in given)
            victims = [v for v in victims if v[1] not in given]
        return starts, preempted

    def _try_start(self, state: JobState, free: TentativeAllocation, starts: list[Start],
                   now: float) -> bool:
        placed = self._placement(free, state.job)
        if placed is None:
            return False
        free.take(placed.gpu_ids)
        starts.append(Start(state.job_id, placed.gpu_ids))
        self.waiting_.pop(state.job_id, None)
        self.placement_log_.append(PlacementRecord(
            state.job_id, now, placed.n_servers, placed.cut_bytes,
            placed.comm_time_s(free.topology.links)))
        return True

    def _placement(self, free: Allocation | TentativeAllocation, job: Job) -> GraphPlacement | None:
        graph = self.graphs_.get(job.job_id)
        if graph is None:
            graph = self.graphs_[job.job_id] = build_job_graph(job)
        if self.placement == "graph":
            return place_graph(free, graph, kl_passes=self.kl_passes)
        gpus = get_placement(self.placement)(free, job.n_gpus, self.rng_)
        return None if gpus is None else placement_cost(graph, gpus, free.topology)

    def _wake_at(self, view: ClusterView, now: float, started_net: int) -> float | None:
        """Next tick while jobs wait (preempt on), or the next virtual finish (gated)."""
        if len(view.pending) - started_net <= 0:
            return None
        wake = math.inf
        if self.preempt and self.gate == "arrival" and self.tick_s > 0:
            wake = (math.floor(now / self.tick_s) + 1) * self.tick_s
        if self.gate == "vm_completion":
            wake = min(wake, self.vm_.next_finish_time())
        if wake == math.inf:
            return None
        return wake if wake > now else math.nextafter(now, math.inf)


@dataclass(kw_only=True)
class AsrptOracle(Asrpt):
    """A-SRPT told every job's true iterations (``asrpt`` with ``predictor="oracle"``)."""

    name: ClassVar[str] = "asrpt-oracle"
    needs_oracle: ClassVar[bool] = True
    needs_extra: ClassVar[str | None] = None

    predictor: Literal["forest", "median", "oracle"] = "oracle"
