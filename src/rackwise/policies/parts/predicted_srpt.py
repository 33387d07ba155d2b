"""A-SRPT's ordering: preemptive SRPT on predicted work, on one virtual machine.

Everything A-SRPT decides except where a job goes: each arrival is
predicted and sized on a virtual machine of the cluster's GPU count
(`parts.virtual_machine`), overruns grow their prediction, and the
machine's order picks the jobs to start, backfill and preempt. A policy
holds one `PredictedSrpt` and hands it a `Placer`; ``asrpt`` gives it the
graph partitioner (`asrpt_placement`), ``combined`` its delay placement.

The parameters are `AsrptParameters` (`parts.asrpt_parameters`), a
dataclass of fields only that each such policy lists among its bases.
Users set them flat on either policy (``-p epsilon=0.05``), so they must
be fields of the policy itself, and a base of fields declares them once;
it carries no methods, so no behaviour passes between policy modules
through it.
"""

from __future__ import annotations

import math
import zlib
from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from itertools import chain
from operator import itemgetter
from statistics import median
from typing import Any, Protocol, cast

import numpy as np
from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import Allocation, TentativeAllocation
from rackwise.engine.contract import Capabilities, Decisions, Start
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.perf.graph_placement import (
    GraphPlacement,
    PlacementRecord,
    place_graph,
    placement_cost,
)
from rackwise.perf.job_graph import GraphKind, JobGraph, build_job_graph, graph_kind
from rackwise.policies.parts.asrpt_parameters import AsrptParameters
from rackwise.policies.parts.class_sizes import ClassSizes
from rackwise.policies.parts.ordering import QueueCursor, RankedQueue
from rackwise.policies.parts.overrun_watch import OverrunWatch, iters_done_at
from rackwise.policies.parts.placement import get_placement
from rackwise.policies.parts.predictor import (
    IterationPredictor,
    JobFeatures,
    PredictionRecord,
    require_sklearn,
)
from rackwise.policies.parts.size_distribution import RankLine, SizeDistribution
from rackwise.policies.parts.virtual_machine import VirtualMachine
from rackwise.workload.job import Job
from rackwise.workload.state import RUNNING, JobState, state_of

# A priority, smallest first, and the job's id: the virtual machine's key
# (`VirtualMachine.order`, whose third field is unique) or a size
# distribution's rank, submit time and the number of jobs known when it was
# predicted. The id, unique, settles any tie left.
Key = tuple[float, float, int, str]

# The hot loops below hold ``(Key, JobState)`` entries in lists of ``Any``: the compiled
# build keeps a value of a fixed-length tuple type unboxed, so it would take each entry
# apart on reading it and build a new tuple on storing it, at every decision.
_STATE = itemgetter(1)


ORACLES = ("oracle", "class-oracle")  # predictors told true sizes


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _ClassRead:
    """A class's size distribution as read by the current ranking, and its waiting jobs.

    Shared by the class's jobs: a ranking reads the class's distribution
    once, whichever of its jobs asks first. The class's waiting jobs hold
    keys in the waiting queue worked out from ``keyed_with`` (None: each
    job's own distribution); when the class's distribution is another, they
    are keyed again.
    """

    __slots__ = ("dist", "job_class", "keyed_with", "read_in", "waiting")

    def __init__(self, job_class: Hashable) -> None:
        self.job_class = job_class  # `job_class`'s tuple, kept as built: a dict key at every ranking
        self.dist: SizeDistribution | None = None
        self.read_in = -1  # the ranking that read it
        self.waiting: dict[str, None] = {}  # its jobs in the waiting queue
        self.keyed_with: SizeDistribution | None = None  # what their keys came from, while any wait


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _JobRank:
    """What a job's rank reads besides its state, and the rank last worked out from it.

    One object per predicted job, not a table per fact: a rank is asked for
    every job at every event, and the compiled build reads these fields
    directly. The facts are fixed once the job is predicted (``own``, its
    own distribution, changes with a new forest); the rest is a cache that
    is used only while the distribution it came from is the job's.
    """

    __slots__ = ("bound_dist", "bound_end", "bound_key", "bound_start", "line_end", "line_high",
                 "line_intercept", "line_low", "line_slope", "line_start", "of_class", "on_line", "own",
                 "rank_attained", "rank_dist", "rank_value", "seq", "submit_time", "unit", "vm_s_per_iter")

    def __init__(self, unit: float, vm_s_per_iter: float, submit_time: float, seq: int,
                 of_class: _ClassRead) -> None:
        self.unit = unit  # prediction-target units per iteration
        self.vm_s_per_iter = vm_s_per_iter  # g * tau* / G
        self.submit_time = submit_time
        self.seq = seq  # how many jobs were known when it was predicted
        self.of_class = of_class
        self.own: SizeDistribution | None = None  # set when ranks read distributions
        # The rank at ``rank_attained`` from ``rank_dist``, and the line it lies on
        # there (`RankLine`'s fields; ``on_line`` false: on none).
        self.rank_dist: SizeDistribution | None = None
        self.rank_attained = 0.0
        self.rank_value = 0.0
        self.on_line = False
        self.line_start = self.line_end = self.line_low = self.line_high = 0.0
        self.line_intercept = self.line_slope = 0.0
        # A bound on the key from ``bound_dist``, worked out at ``bound_start``: it holds for
        # any service from there up to ``bound_end`` (`SizeDistribution.rank_bound_stretch`).
        self.bound_dist: SizeDistribution | None = None
        self.bound_start = self.bound_end = self.bound_key = 0.0

    def keep_line(self, line: RankLine | None) -> None:
        """Remember the line the last rank lies on (None: on none)."""
        self.on_line = line is not None
        if line is not None:
            self.line_start, self.line_end, self.line_low = line.start, line.end, line.low
            self.line_high, self.line_intercept, self.line_slope = line.high, line.intercept, line.slope


def predictor_capabilities(params: AsrptParameters, base: Capabilities) -> Capabilities:
    """``base`` with what the predictor needs: true sizes (an oracle) or the ``ml`` extra (the forest)."""
    return replace(base, needs_oracle=base.needs_oracle or params.predictor in ORACLES,
                   needs_extra="ml" if params.predictor == "forest" else base.needs_extra)


def check_asrpt_parameters(params: AsrptParameters) -> None:
    """Fail when a policy is built, not mid-run: a bad value, or a predictor missing its extra."""
    if not params.oracle_error >= 0:
        raise InputError(f"must be >= 0, got {params.oracle_error}", field="oracle_error")
    if params.oracle_error and params.predictor != "oracle":
        raise InputError(f"applies to predictor 'oracle' only, not {params.predictor!r}",
                         field="oracle_error")
    if not params.survival_window >= 1:
        raise InputError(f"must be >= 1, got {params.survival_window}", field="survival_window")
    if not 0.0 <= params.survival_refresh <= 1.0:
        raise InputError(f"must be in [0, 1], got {params.survival_refresh}", field="survival_refresh")
    if params.predictor == "forest" and params.train_window < max(1, params.min_train_rows):
        raise InputError(f"must be at least min_train_rows ({params.min_train_rows}), "
                         f"got {params.train_window}", field="train_window")
    if params.predictor == "forest":
        require_sklearn()


def job_class(job: Job) -> tuple[str | None, int]:
    """What every trace tells of a job before it runs: its virtual cluster and GPU count."""
    return job.group, job.n_gpus


class Placer(Protocol):
    """Where a job would go on ``free`` now, with its communication cost; None if nowhere.

    ``ideal`` is true when sizing a job on the virtual machine: ``free`` is
    then the empty cluster, and the job's best placement is asked for.
    """

    def __call__(self, view: ClusterView, free: Allocation | TentativeAllocation, job: Job,
                 graph: JobGraph, now: float, *, ideal: bool) -> GraphPlacement | None: ...


def asrpt_placement(free: Allocation | TentativeAllocation, job: Job, graph: JobGraph,
                    params: AsrptParameters, rng: np.random.Generator) -> GraphPlacement | None:
    """A-SRPT's placement: the graph partitioner, or the ablation ``params.placement`` names."""
    if params.placement == "graph":
        return place_graph(free, graph, kl_passes=params.kl_passes)
    gpus = get_placement(params.placement)(free, job.n_gpus, rng)
    return None if gpus is None else placement_cost(graph, gpus, free.topology)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class PredictedSrpt:
    """One run of A-SRPT's ordering: predictions, the virtual machine and their logs.

    The policy passes its arrivals, completions and ``schedule`` calls on,
    and answers placement questions through ``place``.
    """

    def __init__(self, params: AsrptParameters, place: Placer, view: ClusterView,
                 rng: np.random.Generator) -> None:
        self._params = params
        self._place = place
        self._history: Sequence[Job] = ()  # learnt at the next decision, which has the view
        self._vm = VirtualMachine(0.0)
        self._predictor = IterationPredictor(
            use_forest=params.predictor == "forest", min_train_rows=params.min_train_rows,
            refit_every=params.refit_every, refit_growth=params.refit_growth,
            max_train_rows=params.train_window,
            default_iters=params.default_prediction,
            forest_params={"n_estimators": params.n_estimators},
            random_state=int(rng.integers(2**31 - 1)))
        # Drawn only when asked for, so that exact runs keep the generator's stream.
        self._error_seed = int(rng.integers(2**31 - 1)) if params.oracle_error else 0
        self._capacity_gpus = view.topology.n_gpus
        self._empty = Allocation(view.topology)  # never changed: "ideal" placements
        self._arrived: list[Job] = []
        self._waiting: dict[str, Job] = {}  # arrived, never started
        self._features: dict[str, JobFeatures] = {}
        self._estimate_iters: dict[str, float] = {}  # current prediction, overruns included
        self._predicted: dict[str, tuple[float, str]] = {}  # prediction the job was scheduled on
        self._ranks: dict[str, _JobRank] = {}  # once predicted
        self._classes: dict[tuple[str | None, int], _ClassRead] = {}
        self._n_rankings = 0  # `_ranked` calls so far: when each class's distribution was read
        self._graphs: dict[GraphKind, JobGraph] = {}
        self._arrived_sizes: dict[tuple[str | None, int], list[float]] = {}  # class-oracle: true sizes
        self._survival = (ClassSizes(params.survival_window, params.overrun_factor, params.survival_refresh)
                          if params.predictor == "survival" else None)
        self._now_view: tuple[float, ClusterView] | None = None  # during a decision, for "survival"
        self._overruns = OverrunWatch()
        self._change_mark: tuple[int, int] | None = None  # the last decision's view, for its change log
        # The waiting jobs by key (gate "arrival"), kept between decisions and mended from the
        # change log; built again when it cannot be mended.
        self._queue = RankedQueue()
        self._queue_stale = True
        # Rank "vm" with preemption: the running jobs' keys in the machine's order, smallest
        # first, mended like the queue (the machine re-keys only the jobs it serves or re-sizes).
        self._running_keys: list[Key] = []
        self._running_key_of: dict[str, Key] = {}
        self._prediction_log: list[PredictionRecord] = []
        self._placement_log: list[PlacementRecord] = []

    # ------------------------------------------------------------- read-only
    @property
    def prediction_log(self) -> Sequence[PredictionRecord]:
        """Per finished job, the prediction it was scheduled on and its true iterations."""
        return self._prediction_log

    @property
    def placement_log(self) -> Sequence[PlacementRecord]:
        """Per start: servers used, bytes cut and the communication time estimated."""
        return self._placement_log

    @property
    def n_fits(self) -> int:
        """How many times the forest has been fitted."""
        return self._predictor.n_fits

    def estimate_iters(self, job_id: str) -> float:
        """The job's current predicted iterations, overruns included."""
        return self._estimate_iters[job_id]

    def in_vm_order(self, job_ids: Iterable[str]) -> list[str]:
        """The jobs in the virtual machine's order (least predicted work left first)."""
        return [job_id for _, job_id in self._vm.ranked((job_id, job_id) for job_id in job_ids)]

    def virtual_remaining_s(self, job_id: str) -> float:
        """The job's remaining time on the virtual machine."""
        return self._vm.remaining_s(job_id)

    # ------------------------------------------------------------------ hooks
    def on_arrival(self, job: Job) -> None:
        # Predicted once tau* is known, in `schedule` at this same instant.
        if self._params.predictor not in ORACLES:
            # Without a forest no row is read: its medians are left out.
            self._features[job.job_id] = self._predictor.features(job, with_row=self._predictor.use_forest)
        self._arrived.append(job)
        self._waiting[job.job_id] = job
        if self._survival is not None:
            self._survival.arrive(job.job_id, job_class(job))

    def on_completion(self, job: Job, now: float) -> None:
        job_id = job.job_id
        self._vm.advance(now)
        self._vm.remove(job_id)
        if job_id in self._queue:  # it finished waiting (a live cluster's cancel)
            self._unqueue(job_id)
        rank = self._ranks.pop(job_id, None)
        for table in (self._estimate_iters, self._waiting):
            table.pop(job_id, None)
        entry = self._predicted.pop(job_id, None)
        if entry is None or rank is None:
            # Announced (a driver adopting a running cluster) but finished before it was scheduled.
            self._arrived = [pending for pending in self._arrived if pending.job_id != job_id]
            self._features.pop(job_id, None)
            return
        predicted, source = entry
        self._prediction_log.append(PredictionRecord(job_id, predicted, job.total_iters, source))
        unit = rank.unit
        if self._survival is not None:
            self._survival.finish(job_id, job_class(job), job.total_iters * unit)
        features = self._features.pop(job_id, None)
        refit = features is not None and self._predictor.observe(features, job.total_iters * unit)
        if refit and self._params.repredict_waiting:
            self._repredict()

    def on_history(self, jobs: Sequence[Job]) -> None:
        """Jobs that finished before the run, to learn from before the first arrival is predicted."""
        if self._params.use_history and self._params.predictor not in ORACLES:
            self._history = jobs

    def _learn_history(self, view: ClusterView) -> None:
        """Learn the log as its completions would have taught, and fit the forest once.

        The target is the one a completion gives: iterations times the
        seconds per iteration on the job's ideal placement.
        """
        learnt = []
        for job in self._history:
            ideal = self._place(view, self._empty, job, self._graph(job), 0.0, ideal=True)
            if ideal is None:
                continue
            unit = self._target_unit(view.perf.rate(job, ideal.gpu_ids, {}))
            features = self._predictor.features(job, with_row=self._predictor.use_forest)
            learnt.append((features, job.total_iters * unit))
            if self._survival is not None:
                self._survival.arrive(job.job_id, job_class(job))
                self._survival.finish(job.job_id, job_class(job), job.total_iters * unit)
        self._predictor.observe_history(learnt)
        self._history = ()

    def _repredict(self) -> None:
        """New forest: new predictions for jobs that have not started yet."""
        ranks = self._ranks
        ids = [job_id for job_id in self._waiting if job_id in ranks]
        guesses = self._predictor.predict([self._features[job_id] for job_id in ids])
        for job_id, (value, source) in zip(ids, guesses):
            iters = value / ranks[job_id].unit
            self._predicted[job_id] = (iters, source)
            self._set_estimate(job_id, iters)
        if self._params.rank != "vm" and ids:
            dists = self._predictor.distributions([self._features[job_id] for job_id in ids],
                                                  beyond_factor=self._params.overrun_factor)
            for job_id, dist in zip(ids, dists):
                ranks[job_id].own = dist
            self._queue_stale = True

    def _set_estimate(self, job_id: str, iters: float) -> None:
        delta = iters - self._estimate_iters[job_id]
        self._estimate_iters[job_id] = iters
        if delta:
            self._overruns.estimate_changed(job_id)
            self._vm.grow(job_id, delta * self._ranks[job_id].vm_s_per_iter)

    # --------------------------------------------------------------- schedule
    def schedule(self, view: ClusterView, now: float) -> Decisions:
        """Start, backfill and preempt in the virtual machine's order."""
        self._now_view = (now, view)
        try:
            return self._schedule(view, now)
        finally:
            self._now_view = None  # a view is no state to keep (nor to pickle)

    def _schedule(self, view: ClusterView, now: float) -> Decisions:
        params, vm = self._params, self._vm
        if self._history:
            self._learn_history(view)
        vm.advance(now)
        arrived = [job.job_id for job in self._arrived]
        for job in self._arrived:
            self._enter_vm(view, job, now)
        self._arrived.clear()
        restated = view.running_changes_since(self._change_mark)
        self._change_mark = view.change_mark
        self._check_overruns(view, now, restated)
        gated = params.gate != "arrival"
        if not gated:
            moved = vm.keys_changed() if params.rank == "vm" else []
            self._mend_queue(view, arrived, restated, moved)
            if params.preempt and params.rank == "vm":
                self._mend_running_keys(view.running, restated, moved)

        if not view.pending:
            return Decisions()
        free = view.tentative()
        eligible: Iterable[tuple[Key, JobState]]
        starts: list[Start] = []
        preempted: list[str] = []
        if gated and params.rank == "vm":  # only the jobs the machine has finished, with no preemption
            eligible = self._overdue_in_vm_order(view.pending)
        elif gated:
            eligible = self._ranked([state for state in view.pending.values() if vm.is_overdue(state.job_id)],
                                    now)[0]
        else:
            eligible = _fitting_in_key_order(self._queue, view.pending, free, params.strict_order)
            if params.preempt and params.rank == "vm":
                desired, waiting = self._desired_in_vm_order(view)
                starts, preempted = self._preempt_to_vm_order(view, desired, waiting,
                                                              partial(self._running_last_first, view.running),
                                                              free, now)
            elif params.preempt:
                best = self._queue.best_key()
                ranked_running, under = self._ranked(
                    view.running.values(), now, below=cast(float, best[0]) if best is not None else None)
                desired, waiting = _greedy_prefix(under, ranked_running, self._queue.cursor(), view.pending,
                                                  self._capacity_gpus)
                starts, preempted = self._preempt_to_vm_order(view, desired, waiting,
                                                              partial(reversed, ranked_running), free, now)
        started = {start.job_id for start in starts}
        state: JobState
        for state in map(_STATE, eligible):  # backfill, in key order
            if state.job_id in started:
                continue
            started_now = self._try_start(view, state, free, starts, now)
            if not started_now and (params.strict_order or free.n_free == 0):
                break
        return Decisions(start=tuple(starts), preempt=tuple(preempted),
                         wake_at=self._wake_at(view, now, len(starts) - len(preempted)))

    def _overdue_in_vm_order(self, pending: Mapping[str, JobState]) -> Iterator[tuple[Key, JobState]]:
        """Waiting jobs the virtual machine has finished, in the order it finished them.

        A walk of the machine's kept order, which they head; the machine must
        not change while it runs.
        """
        for key in self._vm.order():
            if key[0] > 0.0:
                break  # the first job in service ends the overdue ones
            state = state_of(pending, key[3])
            if state is not None:
                yield key, state

    def _desired_in_vm_order(self, view: ClusterView) -> tuple[list[tuple[Key, JobState]],
                                                                list[tuple[Key, JobState]]]:
        """`_greedy_prefix` of the running and pending jobs, walking the machine's kept order.

        Also the pending jobs among them, the only ones the preemption pass acts on.
        """
        desired: list[tuple[Key, JobState]] = []
        waiting: list[tuple[Key, JobState]] = []
        running, pending, room = view.running, view.pending, self._capacity_gpus
        for key in self._vm.order():
            state = state_of(running, key[3])
            if state is None:
                state = state_of(pending, key[3])
                if state is None:
                    continue
                if state.job.n_gpus <= room:
                    waiting.append((key, state))
            n_gpus = state.job.n_gpus
            if n_gpus <= room:
                desired.append((key, state))
                room -= n_gpus
                if room == 0:
                    break
        return desired, waiting

    def _running_last_first(self, running: Mapping[str, JobState]) -> Iterator[tuple[Key, JobState]]:
        """The running jobs, the virtual machine's last first (its kept keys, read backwards)."""
        for key in reversed(self._running_keys):
            yield key, running[key[3]]

    def _mend_running_keys(self, running: Mapping[str, JobState], restated: list[str] | None,
                           moved: list[str]) -> None:
        """Bring the running jobs' kept keys to this decision: the jobs that started or stopped
        since the last one, and those the machine gave a new key; built again where the view
        keeps no change log or the mended keys would not be every running job's."""
        keys, key_of, vm = self._running_keys, self._running_key_of, self._vm
        if restated is not None:
            for job_id in chain(restated, moved):
                old = key_of.pop(job_id, None)
                if old is not None:
                    del keys[bisect_left(keys, old)]
                if job_id in running:
                    key = key_of[job_id] = vm.order_key(job_id)
                    insort(keys, key)
        if restated is None or len(key_of) != len(running):
            self._running_key_of = key_of = {job_id: vm.order_key(job_id) for job_id in running}
            self._running_keys = sorted(key_of.values())

    def _graph(self, job: Job) -> JobGraph:
        kind = graph_kind(job)  # one graph per kind of job, not per job
        graph = self._graphs.get(kind)
        if graph is None:
            graph = self._graphs[kind] = build_job_graph(job)
        return graph

    def _mend_queue(self, view: ClusterView, arrived: list[str], restated: list[str] | None,
                    moved: list[str]) -> None:
        """Bring the waiting queue to this decision: the jobs that arrived, started or stopped
        since the last one, and new keys for those whose key changed (rank "vm": ``moved``, the
        jobs the virtual machine re-keyed; else the jobs of each class whose distribution changed).

        Built again from every waiting job where the view keeps no change log
        (a live cluster's snapshot), the keys went stale (new predictions), or
        the mended queue would not hold every waiting job.
        """
        queue, pending, ranks = self._queue, view.pending, self._ranks
        by_vm = self._params.rank == "vm"
        back: dict[str, JobState] = {}
        if restated is not None and not self._queue_stale:
            for job_id in chain(arrived, restated, moved):
                if job_id in queue:
                    self._unqueue(job_id)
                state = state_of(pending, job_id)
                if state is not None:
                    back[job_id] = state
        if restated is None or self._queue_stale or len(queue) + len(back) != len(pending):
            queue = self._queue = RankedQueue()
            for of_class in self._classes.values():
                of_class.waiting.clear()
            back = dict(pending)
            self._queue_stale = False
        if by_vm:
            vm = self._vm
            queue.add_many([(job_id, state.job.n_gpus, vm.order_key(job_id)) for job_id, state in back.items()])
            return
        self._n_rankings = ranking = self._n_rankings + 1
        for of_class in self._classes.values():
            if of_class.waiting:
                dist = self._class_distribution(of_class, ranking)
                if dist is not of_class.keyed_with:
                    of_class.keyed_with = dist
                    queue.rekey([self._waiting_key(pending[job_id], dist) for job_id in of_class.waiting])
        added = []
        for job_id, state in back.items():
            of_class = ranks[job_id].of_class
            if not of_class.waiting:
                of_class.keyed_with = self._class_distribution(of_class, ranking)
            of_class.waiting[job_id] = None
            added.append((job_id, state.job.n_gpus, self._waiting_key(state, of_class.keyed_with)))
        queue.add_many(added)

    def _unqueue(self, job_id: str) -> None:
        """The job leaves the waiting queue."""
        self._queue.discard(job_id)
        known = self._ranks.get(job_id)
        if known is not None:
            known.of_class.waiting.pop(job_id, None)

    def _class_distribution(self, of_class: _ClassRead, ranking: int) -> SizeDistribution | None:
        """The class's size distribution, read once per ranking (None: its jobs rank by their own)."""
        if self._survival is None:
            return None
        if of_class.read_in != ranking:
            of_class.dist = self._survival.distribution(of_class.job_class, self._attained)
            of_class.read_in = ranking
        return of_class.dist

    def _waiting_key(self, state: JobState, class_dist: SizeDistribution | None) -> Key:
        """A waiting job's key, from its class's distribution (or its own) and the service it attained."""
        known = self._ranks[state.job_id]
        dist = class_dist if class_dist is not None else known.own
        assert dist is not None  # every predicted job has a distribution when ranks read them
        return (self._key_at(known, dist, state.iters_done * known.unit), known.submit_time, known.seq,
                state.job_id)

    def _key_at(self, known: _JobRank, dist: SizeDistribution, attained: float) -> float:
        """A job's rank on ``dist`` at ``attained`` service, in virtual-machine seconds (kept in ``known``).

        `_ranked` spells the same out for each running job, with its bar: a call per running job
        at every decision costs the plain-Python build more than the copy does.
        """
        if attained >= dist.largest:  # past every sample, whichever the rank
            value = dist.beyond_factor * attained
        elif known.rank_dist is dist and known.rank_attained == attained:
            value = known.rank_value
        elif known.rank_dist is dist and known.on_line and known.line_start < attained < known.line_end \
                and known.line_low <= known.line_end - attained < known.line_high:
            value = known.line_intercept + known.line_slope * (known.line_end - attained)
        else:
            line: RankLine | None = None
            if self._params.rank == "gittins":
                value, line = dist.gittins_line(attained)
            else:
                value = dist.expected_remaining(attained)
            known.rank_dist, known.rank_attained, known.rank_value = dist, attained, value
            known.keep_line(line)
        return value / known.unit * known.vm_s_per_iter

    def _enter_vm(self, view: ClusterView, job: Job, now: float) -> None:
        """Predict an arrived job and put it on the virtual machine, sized g * N * tau* / G."""
        ideal = self._place(view, self._empty, job, self._graph(job), now, ideal=True)
        assert ideal is not None  # the engine refuses jobs larger than the cluster
        rate = view.perf.rate(job, ideal.gpu_ids, {})
        per_iter = job.n_gpus / (rate * self._capacity_gpus) if rate > 0 else 0.0
        unit = self._target_unit(rate)
        cls = job_class(job)
        of_class = self._classes.get(cls)
        if of_class is None:
            of_class = self._classes[cls] = _ClassRead(cls)
        rank = self._ranks[job.job_id] = _JobRank(unit, per_iter, job.submit_time, len(self._ranks), of_class)
        if self._params.predictor == "oracle":
            iters, source = job.total_iters * self._oracle_error_factor(job.job_id), "oracle"
        elif self._params.predictor == "class-oracle":
            sizes = self._arrived_sizes.setdefault(job_class(job), [])
            insort(sizes, job.total_iters * unit)  # in the target's unit, as the forest learns
            iters, source = median(sizes) / unit, "class-oracle"
        else:
            survival = self._survival_distribution(job)
            value, source = ((survival.median(), "survival") if survival is not None
                             else self._predictor.predict([self._features[job.job_id]])[0])
            iters = value / unit
        self._predicted[job.job_id] = (iters, source)
        if self._params.rank != "vm":
            beyond = self._params.overrun_factor
            if self._params.predictor == "oracle":
                dist = SizeDistribution.point(iters * unit, beyond_factor=beyond)
            elif self._params.predictor == "class-oracle":
                dist = SizeDistribution(list(self._arrived_sizes[job_class(job)]), beyond_factor=beyond)
            else:  # for "survival", the answer should its class lose its own distribution
                dist = self._predictor.distributions([self._features[job.job_id]], beyond_factor=beyond)[0]
            rank.own = dist
        self._estimate_iters[job.job_id] = iters
        self._vm.add(job.job_id, iters * per_iter, job.submit_time)

    def _oracle_error_factor(self, job_id: str) -> float:
        """The oracle's error for this job: the same whatever order the jobs arrive in."""
        if not self._params.oracle_error:
            return 1.0
        z = np.random.default_rng([self._error_seed, zlib.crc32(job_id.encode())]).standard_normal()
        return math.exp(self._params.oracle_error * float(z))

    def _ranked(self, states: Iterable[JobState], now: float,
                below: float | None = None) -> tuple[list[tuple[Key, JobState]], list[JobState]]:
        """Jobs by the rank of their size distribution given the service they attained.

        ``below`` (the best waiting job's key, when ranking running jobs): a
        running job whose key is under it, or that `SizeDistribution.rank_bound`
        shows to be, is only named, in the second list, in no order. Every
        such job is among the jobs to keep (they all fit, as they run
        together) and none is a victim, so no decision reads its key; working
        it out is most of the cost when a class's distribution changes. The
        first list is the rest, in key order.
        """
        out: list[Any] = []  # see `_STATE`
        under: list[JobState] = []  # running jobs keyed under ``bar``
        gittins = self._params.rank == "gittins"
        bar = below if gittins else None
        # Asked for every running and waiting job at every event: the look-ups are bound once.
        survival = self._survival
        class_sizes = survival.distribution if survival is not None else None
        attained_of, ranks = self._attained, self._ranks
        self._n_rankings = ranking = self._n_rankings + 1  # no class changes in a call
        for state in states:  # states, not items: no tuple per job
            job_id = state.job_id
            known = ranks[job_id]
            unit, per_iter = known.unit, known.vm_s_per_iter
            # `_survival_distribution`, inlined
            if class_sizes is None:
                dist = known.own
            else:
                of_class = known.of_class
                if of_class.read_in != ranking:
                    of_class.dist = class_sizes(of_class.job_class, attained_of)
                    of_class.read_in = ranking
                dist = of_class.dist if of_class.dist is not None else known.own
            assert dist is not None  # every predicted job has a distribution when ranks read them
            done = state.iters_done
            if state.status is not RUNNING:  # waiting (a gated ranking): no bar to pass it under
                out.append(((self._key_at(known, dist, done * unit), known.submit_time, known.seq, job_id), state))
                continue
            # `iters_at`, inlined (max and min spelt out: cheaper)
            last, busy = state.last_update, state.busy_until
            productive = now - (busy if busy > last else last)
            if productive > 0.0:
                done += productive * state.rate_iters_per_s
                total = state.job.total_iters
                if not done < total:
                    done = total
            attained = done * unit
            value, found = 0.0, True
            if attained >= dist.largest:  # past every sample, whichever the rank
                value = dist.beyond_factor * attained
            elif known.rank_dist is dist and known.rank_attained == attained:
                value = known.rank_value  # a waiting job, or no progress since
            elif known.rank_dist is dist and known.on_line and known.line_start < attained < known.line_end \
                    and known.line_low <= known.line_end - attained < known.line_high:
                # `RankLine.holds`, inlined: a running job's rank, asked at every event
                value = known.line_intercept + known.line_slope * (known.line_end - attained)
            else:
                found = False
            if not found:
                if bar is not None:
                    # Rounding is monotone: a bound key under ``bar`` means the rank's key is too.
                    # The bound kept from an earlier call still holds while the service stays in
                    # its stretch; only when it does not prove the job under is one worked out.
                    if known.bound_dist is dist and known.bound_start <= attained < known.bound_end \
                            and known.bound_key < bar:
                        under.append(state)
                        continue
                    bound, bound_end = dist.rank_bound_stretch(attained)
                    bound = bound / unit * per_iter
                    known.bound_dist, known.bound_start, known.bound_end, known.bound_key = \
                        dist, attained, bound_end, bound
                    if bound < bar:
                        under.append(state)
                        continue
                if gittins:
                    value, line = dist.gittins_line(attained)
                else:
                    value, line = dist.expected_remaining(attained), None
                known.rank_dist, known.rank_attained, known.rank_value = dist, attained, value
                known.keep_line(line)
            key = value / unit * per_iter
            if bar is not None and key < bar:
                under.append(state)
                continue
            out.append(((key, known.submit_time, known.seq, job_id), state))
        out.sort(key=itemgetter(0))
        return out, under

    def _survival_distribution(self, job: Job) -> SizeDistribution | None:
        """The survival predictor's distribution for the job's class (None: another rule answers)."""
        if self._survival is None:
            return None
        return self._survival.distribution(job_class(job), self._attained)

    def _attained(self, job_id: str) -> float:
        """A job's service so far in the target's unit: a lower bound on its size."""
        if self._now_view is None:
            return 0.0
        now, view = self._now_view
        state = state_of(view.running, job_id) or state_of(view.pending, job_id)
        rank = self._ranks.get(job_id)
        return 0.0 if state is None else state.iters_at(now) * (0.0 if rank is None else rank.unit)

    def _target_unit(self, ideal_rate: float) -> float:
        """Prediction-target units per iteration: tau* (seconds on the ideal placement) or 1."""
        if self._params.predict_target == "duration" and 0 < ideal_rate < math.inf:
            return 1.0 / ideal_rate
        return 1.0

    def _check_overruns(self, view: ClusterView, now: float, restated: list[str] | None) -> None:
        """A job that ran past its prediction gets a larger one (the "adaptive" part).

        ``restated``: the running jobs that changed since the last decision (None: unknown).
        """
        factor = self._params.overrun_factor
        for state in self._overruns.overruns(view.running, self._estimate_iters, now, restated):
            done = iters_done_at(state, now)
            grown = max(math.ceil((1.0 + factor) * done), math.floor(done) + 1)
            self._set_estimate(state.job_id, float(grown))

    def _preempt_to_vm_order(self, view: ClusterView, desired: list[tuple[Key, JobState]],
                             waiting: list[tuple[Key, JobState]],
                             lowest_first: Callable[[], Iterable[tuple[Key, JobState]]],
                             free: TentativeAllocation, now: float) -> tuple[list[Start], list[str]]:
        """Start the jobs the virtual machine ranks first, preempting lower-ranked ones.

        ``desired`` is the greedy prefix, by GPU count, of the running and
        eligible jobs in key order, and ``waiting`` its jobs not running;
        ``lowest_first()`` gives the running jobs that may be victims as
        ``(key, state)``, last in key order first, asked only when a victim is
        needed. A running job outside the prefix is preempted only when a
        desired job cannot be placed otherwise, has run at least
        ``min_run_s``, and ranks clearly lower (``epsilon``).
        """
        epsilon, min_run_s = self._params.epsilon, self._params.min_run_s
        # The victims read so far, and the rest to read: a pass usually reads only the head.
        victims: list[tuple[float, JobState]] = []
        unread: Iterator[tuple[float, JobState]] | None = None
        starts: list[Start] = []
        preempted: list[str] = []
        for key, state in waiting:
            if self._try_start(view, state, free, starts, now):
                continue
            if unread is None:
                entries: list[Any] = desired  # see `_STATE`
                desired_ids = {entry[0][3] for entry in entries}
                unread = _remaining_outside(lowest_first(), desired_ids)
            bar = key[0] / (1.0 - epsilon) if epsilon < 1 else math.inf
            given: list[JobState] = []
            placed = False
            read = 0
            while True:
                if read == len(victims):
                    more = next(unread, None)
                    if more is None:
                        break
                    victims.append(more)
                remaining_s, victim = victims[read]
                if not remaining_s > bar:
                    break  # victims come by falling remaining time: none further clears the bar
                read += 1
                if now - victim.run_start < min_run_s:
                    continue
                free.give(victim.gpu_ids)
                given.append(victim)
                if self._try_start(view, state, free, starts, now):
                    placed = True
                    break
            if not placed:
                for victim in given:  # not enough: undo
                    free.take(victim.gpu_ids)
                continue
            preempted.extend(v.job_id for v in given)
            # Every victim given is among the ``read`` first: only they are filtered.
            victims[:read] = [v for v in victims[:read] if v[1] not in given]
        return starts, preempted

    def _try_start(self, view: ClusterView, state: JobState, free: TentativeAllocation,
                   starts: list[Start], now: float) -> bool:
        """Place and start ``state`` on ``free`` if it fits; False (nothing taken) if it does not."""
        if free.n_free < state.n_gpus:  # no placement finds n GPUs among fewer (no job here is fractional)
            return False
        placed = self._place(view, free, state.job, self._graph(state.job), now, ideal=False)
        if placed is None:
            return False
        free.take(placed.gpu_ids)
        starts.append(Start(state.job_id, placed.gpu_ids))
        self._waiting.pop(state.job_id, None)
        self._placement_log.append(PlacementRecord(
            state.job_id, now, placed.n_servers, placed.cut_bytes,
            placed.comm_time_s(free.topology.links)))
        return True

    def _wake_at(self, view: ClusterView, now: float, started_net: int) -> float | None:
        """Next tick while jobs wait (preempt on), or the next virtual finish (gated)."""
        params = self._params
        if len(view.pending) - started_net <= 0:
            return None
        wake = math.inf
        if params.preempt and params.gate == "arrival" and params.tick_s > 0:
            wake = (math.floor(now / params.tick_s) + 1) * params.tick_s
        if params.gate == "vm_completion":
            wake = min(wake, self._vm.next_finish_time())
        if wake == math.inf:
            return None
        return wake if wake > now else math.nextafter(now, math.inf)


def _remaining_outside(entries: Iterable[tuple[Key, JobState]],
                       kept: set[str]) -> Iterator[tuple[float, JobState]]:
    """``entries`` whose jobs are not in ``kept``, as (remaining time, state), read lazily.

    A generator function, not a generator expression: the compiled build
    makes a generator expression a whole list.
    """
    for key, state in entries:
        if key[3] not in kept:
            yield key[0], state


def _fitting_in_key_order(queue: RankedQueue, pending: Mapping[str, JobState], free: TentativeAllocation,
                          strict: bool) -> Iterator[tuple[Key, JobState]]:
    """The waiting jobs in key order, less those wider than the GPUs ``free`` has left (``strict``: all).

    Read lazily, so GPUs taken between two reads narrow what comes next;
    GPUs are only taken, so a job passed over would not have fitted later.
    """
    cursor = queue.cursor()
    everything = free.topology.n_gpus
    while (found := cursor.head(everything if strict else free.n_free)) is not None:
        cursor.advance()
        key: Any = found[1]  # a `Key`, as `_mend_queue` built it
        yield key, pending[key[3]]


def _greedy_prefix(under: list[JobState], running: list[tuple[Key, JobState]], eligible: QueueCursor,
                   pending: Mapping[str, JobState],
                   capacity: int) -> tuple[list[tuple[Key, JobState]], list[tuple[Key, JobState]]]:
    """The running and waiting jobs, merged in key order, that fit ``capacity`` GPUs greedily,
    and those of them that wait.

    ``running`` is in key order; ``eligible`` walks the waiting queue. ``under``
    are running jobs keyed under every waiting one, in any order: they come
    first in the merge and are all taken, whatever their order (they run
    together, so they fit), so they are left out of the jobs returned. Keys
    are unique (their last field is the job id), so the merge needs no tie
    rule; it stops as soon as the GPUs are all spoken for, and reads no
    waiting job wider than the GPUs still unclaimed.
    """
    desired: list[Any] = []  # entries as they are (see `_STATE`)
    waiting: list[Any] = []
    ranked: list[Any] = running
    room, i, n_running = capacity, 0, len(running)
    first = eligible.head(room)
    # The running jobs ahead of every waiting one (most of them, most of the time) come
    # first in the merge; while they leave GPUs over, each is taken, so take them at once.
    ahead = ranked[:bisect_left(ranked, first[1], key=itemgetter(0))] if first is not None else ranked
    held = 0
    state: JobState
    for state in under:
        held += state.job.n_gpus
    for state in map(_STATE, ahead):
        held += state.job.n_gpus
    if held <= room:
        desired.extend(ahead)
        room -= held
        if room == 0:  # the cluster is theirs: no waiting job is desired
            return desired, waiting
        i = len(ahead)
    else:  # more than the GPUs (running jobs sharing GPUs): the merge, one job at a time
        for state in under:
            n_gpus = state.job.n_gpus
            if n_gpus <= room:
                room -= n_gpus
                if room == 0:
                    return desired, waiting
    found = eligible.head(room)
    while i < n_running or found is not None:
        if found is None or (i < n_running and ranked[i][0] < found[1]):
            item = ranked[i]
            i += 1
            n_gpus = item[1].job.n_gpus
            if n_gpus > room:
                continue
            desired.append(item)
        else:
            n_gpus, key = found
            item = (key, pending[cast(str, key[3])])
            desired.append(item)
            waiting.append(item)
            eligible.advance()
        room -= n_gpus
        if room == 0:
            break
        found = eligible.head(room)
    return desired, waiting
