"""Turning an order of jobs into starts and preemptions.

Ordering policies (FIFO, SJF, SRTF, Tiresias, ...) differ only in the order
they rank jobs in and whether they preempt; the functions here do the
rest for all of them, with any placement strategy. `RankedQueue` and the
`*_ranked` functions give the same decisions at a cost that does not grow
with the length of the queue.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from itertools import chain

import numpy as np
from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import FreeGpus, TentativeAllocation, slices_of
from rackwise.engine.view import ClusterView
from rackwise.frozen import unfrozen_builder
from rackwise.policies.base import Decisions, Start
from rackwise.policies.parts.placement import Placement, fractional_gpu
from rackwise.workload.state import RUNNING, JobState

# `Start(...)`, made for every job a policy starts.
_build_start = unfrozen_builder(Start)

# Where a preempting order puts a job: GPU ids on ``free``, or None. It is told
# the job, not only its width, so that a placement may weigh what the job is.
JobPlacement = Callable[[TentativeAllocation, JobState], "tuple[int, ...] | None"]


def by_width(place: Placement, rng: np.random.Generator) -> JobPlacement:
    """A placement strategy as a `JobPlacement`: it sees the job's GPU count only."""
    return partial(_place_by_width, place, rng)  # a partial, not a lambda: policies pickle


def _place_by_width(place: Placement, rng: np.random.Generator, free: FreeGpus,
                    state: JobState) -> tuple[int, ...] | None:
    return place(free, state.job.n_gpus, rng)


def start_in_order(view: ClusterView, ordered: Iterable[JobState], place: Placement,
                   rng: np.random.Generator, *, backfill: bool) -> list[Start]:
    """Start pending jobs in the given order while they can be placed.

    With ``backfill=False`` the first job that cannot be placed blocks all
    behind it (strict order); with ``backfill=True`` later jobs that fit may
    start (without a reservation for the blocked one). A fractional job goes
    where `fractional_gpu` puts it, whatever ``place`` is.
    """
    free = view.tentative()
    n_free = free.n_free  # kept in step with `free`: a backfill pass reads it for every queued job
    starts: list[Start] = []
    for state in ordered:
        job = state.job
        if job.n_gpus > n_free and job.gpu_share >= 1.0:  # a whole job with no room
            if backfill and (n_free or free.sliced_gpu_for(1) is not None):
                continue  # a narrower job, or a fractional one on a split GPU, may still fit
            break
        if job.gpu_share < 1.0:
            gpu = fractional_gpu(free, job.gpu_share)
            if gpu is not None:
                free.take_slices(gpu, slices_of(job.gpu_share))
                n_free = free.n_free
                starts.append(Start(state.job_id, (gpu,)))
                continue
            if backfill:
                continue
            break
        gpus = place(free, job.n_gpus, rng)
        if gpus is None:
            if backfill:
                continue
            break
        free.take(gpus)
        n_free = free.n_free
        starts.append(_build_start(state.job_id, gpus))
    return starts


def preempt_to_order(view: ClusterView, ordered: Sequence[JobState], place: JobPlacement) -> Decisions:
    """Run the highest-ranked jobs that fit, preempting lower-ranked running ones.

    ``ordered`` ranks all active jobs (pending and running), best first. The
    target set is the greedy prefix by GPU count, without head-of-line
    blocking (a smaller later job may run). Running jobs outside the target
    keep their GPUs unless a target job cannot be placed without them; then
    the lowest-ranked of them are preempted first, one at a time.
    """
    capacity = view.topology.n_gpus
    target: list[JobState] = []
    for state in ordered:
        if state.job.n_gpus <= capacity:
            target.append(state)
            capacity -= state.job.n_gpus
            if capacity == 0:
                break
    in_target = {state.job_id for state in target}
    victims = [s for s in reversed(ordered) if s.status is RUNNING and s.job_id not in in_target]
    free = view.tentative()
    starts: list[Start] = []
    preempted: list[str] = []
    for state in target:
        if state.status is RUNNING:
            continue
        gpus = place(free, state)
        while gpus is None and victims:
            victim = victims.pop(0)
            free.give(victim.gpu_ids)
            preempted.append(victim.job_id)
            gpus = place(free, state)
        if gpus is None:
            continue
        free.take(gpus)
        starts.append(Start(state.job_id, gpus))
    return Decisions(start=tuple(starts), preempt=tuple(preempted))


def insertion_point(keys: Sequence[tuple[object, ...]], key: tuple[object, ...]) -> int:
    """Where ``key`` goes in the sorted, unique ``keys``.

    Keys that end in an increasing sequence number mostly rank last: those
    are placed at the end without a search.
    """
    return len(keys) if not keys or keys[-1] < key else bisect_left(keys, key)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class RankedQueue:
    """Pending jobs sorted by a rank key, kept in one sorted list per GPU count.

    Ordering policies with many pending jobs use it to reach the best-ranked
    job that fits in ``c`` free GPUs without visiting the jobs that do not,
    so a decision costs about the number of jobs started, not the queue
    length. Keys are tuples, lower is better, and must end with the job id
    (which keeps them unique and the order deterministic).
    """

    def __init__(self) -> None:
        self.buckets: dict[int, list[tuple[object, ...]]] = {}  # by GPU count, ascending
        self._where: dict[str, tuple[int, tuple[object, ...]]] = {}
        self._best: tuple[object, ...] | None = None  # cached best key; None when unknown or empty

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._where

    def add(self, job_id: str, n_gpus: int, key: tuple[object, ...]) -> None:
        """Queue a job (``key[-1]`` must be ``job_id``); re-adding moves it to the new key."""
        self.discard(job_id)
        bucket = self.buckets.get(n_gpus)
        if bucket is None:
            bucket = self.buckets[n_gpus] = []
            # Kept sorted by GPU count, so a cursor need not sort them.
            self.buckets = dict(sorted(self.buckets.items()))
        bucket.insert(insertion_point(bucket, key), key)
        self._where[job_id] = (n_gpus, key)
        if self._best is not None and key < self._best:
            self._best = key

    def add_many(self, items: Sequence[tuple[str, int, tuple[object, ...]]]) -> None:
        """Queue jobs not queued yet, each as ``(job_id, n_gpus, key)``: many at once by one sort per list."""
        if len(items) <= 8:  # a few insorts cost less than sorting each list they touch
            for job_id, n_gpus, key in items:
                self.add(job_id, n_gpus, key)
            return
        touched: dict[int, list[tuple[object, ...]]] = {}
        for job_id, n_gpus, key in items:
            touched.setdefault(n_gpus, []).append(key)
            self._where[job_id] = (n_gpus, key)
        for n_gpus, keys in touched.items():
            bucket = self.buckets.setdefault(n_gpus, [])
            bucket.extend(keys)
            bucket.sort()
        self.buckets = dict(sorted(self.buckets.items()))  # kept by GPU count (see `add`)
        self._best = None

    def discard(self, job_id: str) -> None:
        """Drop a job if it is queued."""
        found = self._where.pop(job_id, None)
        if found is None:
            return
        n_gpus, key = found
        bucket = self.buckets[n_gpus]
        del bucket[bisect_left(bucket, key)]
        if not bucket:
            del self.buckets[n_gpus]
        if key == self._best:
            self._best = None

    def key_of(self, job_id: str) -> tuple[object, ...]:
        return self._where[job_id][1]

    def rekey(self, keys: Iterable[tuple[object, ...]]) -> None:
        """New keys for queued jobs (each key ending with its job id), at the cost of one sort per list.

        Many keys changing at once (a class of jobs re-ranked) cost one pass
        over each GPU count's list they are in, not a search and a move each.
        """
        moved: dict[int, list[tuple[object, ...]]] = {}
        where = self._where
        for key in keys:
            job_id = str(key[-1])
            n_gpus = where[job_id][0]
            where[job_id] = (n_gpus, key)
            moved.setdefault(n_gpus, []).append(key)
        for n_gpus, new_keys in moved.items():
            ids = {key[-1] for key in new_keys}
            kept = [key for key in self.buckets[n_gpus] if key[-1] not in ids]
            kept.extend(new_keys)
            kept.sort()
            self.buckets[n_gpus] = kept
        self._best = None

    def cursor(self) -> QueueCursor:
        """A walk of the queue in rank order; the queue must not change while it is read."""
        return QueueCursor(self)

    def best_key(self) -> tuple[object, ...] | None:
        """The key of the best-ranked job, or None when empty."""
        if self._best is None:
            self._best = min([bucket[0] for bucket in self.buckets.values()], default=None)
        return self._best

    def fewest_gpus(self) -> int | None:
        """The smallest GPU count asked for, or None when empty."""
        return next(iter(self.buckets), None)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class QueueCursor:
    """Walks a `RankedQueue` in rank order, among the jobs of at most ``limit`` GPUs."""

    def __init__(self, queue: RankedQueue) -> None:
        self._buckets = list(queue.buckets.items())
        self._pos = [0] * len(self._buckets)
        self._best = -1

    def head(self, limit: int) -> tuple[int, tuple[object, ...]] | None:
        """(n_gpus, key) of the best-ranked remaining job of at most ``limit`` GPUs."""
        best = self._best
        # The cached pick stays best while its bucket still fits: limits only shrink.
        if best >= 0 and self._buckets[best][0] <= limit:
            n_gpus, bucket = self._buckets[best]
            return n_gpus, bucket[self._pos[best]]
        best, best_key = -1, None
        for index, (n_gpus, bucket) in enumerate(self._buckets):
            if n_gpus > limit:
                break
            pos = self._pos[index]
            if pos < len(bucket) and (best_key is None or bucket[pos] < best_key):
                best, best_key = index, bucket[pos]
        self._best = best
        if best < 0:
            return None
        return self._buckets[best][0], best_key  # type: ignore[return-value]

    def advance(self) -> None:
        """Step past the job the last ``head`` returned."""
        self._pos[self._best] += 1
        self._best = -1


def start_ranked(view: ClusterView, queue: RankedQueue, place: Placement,
                 rng: np.random.Generator, *, backfill: bool) -> list[Start]:
    """`start_in_order` over a `RankedQueue`: same starts, without visiting jobs that cannot fit."""
    free = view.tentative()
    starts: list[Start] = []
    cursor = queue.cursor()
    everything = view.topology.n_gpus
    while free.n_free > 0:
        # Strict order looks at every job so that a head job too large to fit blocks the rest.
        found = cursor.head(free.n_free if backfill else everything)
        if found is None:
            break
        n_gpus, key = found
        if n_gpus > free.n_free:
            break
        gpus = place(free, n_gpus, rng)
        if gpus is None:
            if not backfill:
                break
            cursor.advance()
            continue
        free.take(gpus)
        starts.append(Start(str(key[-1]), gpus))
        cursor.advance()
    return starts


def _pass_running(running_gpus: Sequence[int], index: int, end: int, capacity: int,
                  misfits: list[int], left: int) -> tuple[int, int]:
    """Pass running jobs ``index..end-1`` in rank order.

    ``left`` is the GPU count of running jobs ``index`` onwards. Each job
    that fits in the capacity left keeps its GPUs; each one that does not is
    appended to ``misfits`` (by position). Returns the capacity and ``left``
    after them.
    """
    # Sum the shorter side: the passed jobs, or those after them.
    if end - index <= len(running_gpus) - end:
        run = sum(running_gpus[index:end])
    else:
        run = left - sum(running_gpus[end:])
    left -= run
    if run <= capacity:
        return capacity - run, left
    # Jobs keep their GPUs from the front until the running total passes the capacity.
    # Find that first misfit from the back: the excess is usually a job or two.
    first_misfit, tail = end, 0
    while tail < run - capacity:
        first_misfit -= 1
        tail += running_gpus[first_misfit]
    misfits.append(first_misfit)
    capacity -= run - tail
    for position in range(first_misfit + 1, end):
        if running_gpus[position] <= capacity:
            capacity -= running_gpus[position]
        else:
            misfits.append(position)
    return capacity, left


def preempt_ranked(view: ClusterView, running_keys: Sequence[tuple[object, ...]],
                   running_gpus: Sequence[int], queue: RankedQueue, place: JobPlacement,
                   running_total: int | None = None) -> Decisions:
    """`preempt_to_order` for ranks given as keys, at a cost that does not grow with the queue.

    ``running_keys`` ranks every running job (sorted, best first, each key
    ending with the job id) and ``running_gpus`` gives their GPU counts in
    the same order (``running_total`` is their sum, if the caller keeps
    it); ``queue`` holds every pending job. The decisions are
    those `preempt_to_order` returns for the merged order of all of them,
    but a call visits only the pending jobs it starts and the running jobs
    that do not fit.
    """
    n_running = len(running_keys)
    fewest = queue.fewest_gpus()
    if fewest is None or (fewest > view.n_free and (
            n_running == 0 or queue.best_key() > running_keys[-1])):  # type: ignore[operator]
        # Every pending job ranks behind every running one, so it may only use free
        # GPUs, and none fits in them: a common case on a full cluster, decided here.
        return Decisions()
    capacity = view.topology.n_gpus
    cursor = queue.cursor()
    targets: list[JobState] = []
    misfits: list[int] = []  # running jobs ranked inside the target that do not fit in it
    index = 0  # running jobs before it have been passed
    left = sum(running_gpus) if running_total is None else running_total  # GPUs of those not passed
    while capacity > 0:
        # Every pending job ranked before `found` is too large for the capacity left,
        # and capacity only shrinks, so the running jobs up to `found` come next.
        found = cursor.head(capacity)
        end = n_running if found is None else bisect_left(running_keys, found[1], index)
        if index < end:
            capacity, left = _pass_running(running_gpus, index, end, capacity, misfits, left)
            index = end
        if found is None or capacity == 0:
            break
        n_gpus, key = found
        if n_gpus <= capacity:
            targets.append(view.pending[str(key[-1])])
            capacity -= n_gpus
            cursor.advance()
    if not targets:
        return Decisions()

    running = view.running
    # The victims' positions, lowest-ranked first: everything after the target, then the misfits
    # inside it. Not a nested generator: compiled, one asked again once spent raises instead of ending.
    spare = chain(range(n_running - 1, index - 1, -1), reversed(misfits))
    free = view.tentative()
    starts: list[Start] = []
    preempted: list[str] = []
    for state in targets:
        n_gpus = state.job.n_gpus
        # No placement finds n GPUs among fewer free ones, so skip those attempts.
        gpus = place(free, state) if n_gpus <= free.n_free else None
        while gpus is None:
            position = next(spare, -1)
            if position < 0:
                break
            victim = running[str(running_keys[position][-1])]
            free.give(victim.gpu_ids)
            preempted.append(victim.job_id)
            if n_gpus <= free.n_free:
                gpus = place(free, state)
        if gpus is None:
            continue
        free.take(gpus)
        starts.append(Start(state.job_id, gpus))
    return Decisions(start=tuple(starts), preempt=tuple(preempted))
