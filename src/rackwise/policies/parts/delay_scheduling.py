"""The delay-scheduling engine over consolidation levels.

A waiting job may only take a placement no looser than its *allowed level*
(L0 node, L1 rack, L2 cluster; see `parts.locality`). It starts at the
tightest level its size can reach; each level has a timer, and when it runs
out the job may relax one level. Jobs that cannot start are skipped, so
later jobs may go ahead (no head-of-line blocking). Every timer is returned
as ``wake_at``, so the engine calls back when it runs out. A FIFO pass reads
the waiting jobs from buckets by GPU count and allowed level, so that it
visits the jobs that may fit or whose timers ran out, not the whole queue.

A policy holds one `DelayScheduling` and gives it the timers per class and,
if it has them, a classifier, a way to evict for a job whose timer ran out,
and a timer tuner: ``consolidate-strict`` and ``philly-relax``
(`rackwise.policies.consolidation`) give one class and no extras, ``dally``
(`rackwise.policies.delay`) all of them. The parameters every such policy
takes are `DelayParameters`, a dataclass of fields only listed among each
policy's bases, so that they are declared once and set flat
(``-p ordering=las``) with no behaviour passing between policy modules.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Iterator, Mapping, Reversible, Sequence
from dataclasses import dataclass
from typing import Protocol

from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import TentativeAllocation
from rackwise.engine.contract import Decisions, Start
from rackwise.engine.view import ClusterView
from rackwise.policies.delay_tuner import TimerTuner
from rackwise.policies.parts.delay_parameters import DelayParameters
from rackwise.policies.parts.locality import (
    L0,
    L2,
    best_placement,
    domain_free,
    domain_gpu_ids,
    placement_level,
    target_level,
)
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

# Keys added to, or taken from, a sorted list one at a time up to this many; more at once
# rebuild it (a sort, or a filter), which costs less than that many moves of its tail.
_ONE_BY_ONE = 8


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class WaitState:
    """Delay state of one pending job."""

    target: int  # tightest level its size can reach
    allowed: int  # loosest level it may take now
    since: float  # when `allowed` was last set
    cls: str
    reserved: int | None = None  # node (target L0) or rack (target L1) held for it
    scale: tuple[float, float] = (1.0, 1.0)  # its own factor on its class's timers at L0, L1


class Evict(Protocol):
    """Free a slot at ``wait.allowed`` for a job whose timer ran out: its GPUs, or None.

    Evicted jobs' GPUs are given back to ``free`` and their ids added to
    ``victims``; a victim that restarts at once elsewhere is also added to
    ``restarts`` (its new GPUs already taken from ``free``).
    """

    def __call__(self, view: ClusterView, free: TentativeAllocation, state: JobState,
                 wait: WaitState, now: float, victims: list[str],
                 restarts: list[Start]) -> tuple[int, ...] | None: ...


TimerScale = Callable[[ClusterView, Job, str], tuple[float, float]]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class DelayScheduling:
    """One run of delay scheduling: each waiting job's level, its timers and their deadlines.

    Args:
        params: The policy's `DelayParameters`.
        timers: Seconds a job of each class waits at L0 and at L1 before relaxing.
        classify: A job's class, a key of ``timers``; None puts every job in the first.
        evict: Called when a job's timer ran out and it fits nowhere; None never preempts.
        tuner: Moves the timers as the run goes; None keeps them.
        scale: A job's own factors on its class's timers at L0 and L1, asked once
            each time it enters the queue; None gives every job 1.
        max_timer_s: Upper bound of a scaled timer.
    """

    def __init__(self, params: DelayParameters, timers: Mapping[str, tuple[float, float]], *,
                 classify: Callable[[ClusterView, Job], str] | None = None,
                 evict: Evict | None = None, tuner: TimerTuner | None = None,
                 scale: TimerScale | None = None, max_timer_s: float = math.inf) -> None:
        self._params = params
        self._timers = {c: list(t) for c, t in timers.items()}
        self._scale = scale
        self._max_timer_s = max_timer_s
        self._only_class = next(iter(self._timers))
        self._classify = classify
        self._evict = evict
        self._tuner = tuner
        self._waits: dict[str, WaitState] = {}
        self._class_of: dict[str, str] = {}
        self._fifo_key: dict[str, tuple[float, str]] = {}
        # The FIFO keys of the jobs with a wait, sorted, by (GPU count, allowed level): a pass
        # reaches the jobs that may act without reading those that cannot (`_indexed_order`).
        self._buckets: dict[tuple[int, int], list[tuple[float, str]]] = {}
        # The same keys in one sorted list, kept only where FIFO passes walk the whole queue:
        # elsewhere a start, mostly near its front, would move all the rest of it for nothing.
        self._queue: list[tuple[float, str]] | None = (
            [] if params.ordering == "fifo" and not self._indexed() else None)
        self._bucket_of: dict[str, tuple[int, int]] = {}
        self._relaxed: list[str] = []  # in this pass: their buckets follow at its end
        self._stale = False  # a wait was found whose job left the queue unannounced
        self._deadlines: list[tuple[float, str]] = []  # a heap; entries go stale, see below
        self._target_of: dict[int, int] = {}  # target level per GPU count (one topology a run)

    # ------------------------------------------------------------- read-only
    @property
    def timers(self) -> Mapping[str, Sequence[float]]:
        """Each class's current timers at L0 and L1."""
        return self._timers

    @property
    def waits(self) -> Mapping[str, WaitState]:
        """The delay state of each job waiting since the last pass."""
        return self._waits

    def class_of(self, view: ClusterView, job: Job) -> str:
        """The job's class, worked out once and kept until it completes."""
        cls = self._class_of.get(job.job_id)
        if cls is None:
            cls = self._classify(view, job) if self._classify is not None else self._only_class
            self._class_of[job.job_id] = cls
        return cls

    # ---------------------------------------------------------------- changes
    def set_timers(self, timers: Mapping[str, list[float]]) -> None:
        """Give classes new timers; waiting jobs' deadlines follow."""
        changed = False
        for cls, values in timers.items():
            if values != self._timers[cls]:
                self._timers[cls][:] = values
                changed = True
        if changed:
            self._rebuild_deadlines()

    def on_arrival(self, job: Job) -> None:
        self._fifo_key[job.job_id] = (job.submit_time, job.job_id)

    def waiting_in_order(self, view: ClusterView, now: float) -> list[str]:
        """The jobs still waiting after the last pass, in the pass's order."""
        return [job_id for job_id in self._ordered(view, now) if job_id in self._waits]

    def waiting_below_l2_that_fit(self, view: ClusterView, free: TentativeAllocation,
                                  now: float) -> Iterator[str]:
        """The jobs still waiting after the last pass whose allowed level is below L2 and whose
        GPU count is at most ``free``'s free GPUs, in the pass's order.

        In FIFO order they are read from the buckets as the caller goes, so
        ``free`` is read at each step and the jobs that cannot fit are not
        read at all; a job may leave the queue meanwhile (`started_outside`).
        """
        if self._params.ordering != "fifo":
            for job_id in self.waiting_in_order(view, now):
                if self._waits[job_id].allowed < L2 and view.pending[job_id].job.n_gpus <= free.n_free:
                    yield job_id
            return
        pending, waits = view.pending, self._waits
        below_l2 = [math.inf, math.inf, 0.0]  # no job size fits at L2: its buckets are passed over
        last: tuple[float, str] | None = None
        while (key := self._next_in_buckets(last, free.n_free, below_l2)) is not None:
            last = key
            job_id = key[1]
            if job_id not in pending:  # it left the queue unannounced
                self._stale = True
            elif job_id in waits:
                yield job_id

    def unwaited(self, pending: Mapping[str, JobState]) -> list[str]:
        """The pending jobs without a wait (new arrivals, preempted jobs back), sorted by id.

        They joined the queue last, so they are looked for from its end, up to
        a job with a wait and at least as many as the pending jobs outnumber
        the waits (kept for pending jobs only); all of them when a wait's job
        is known to have left unannounced.
        """
        waits = self._waits
        n_new = len(pending) - len(waits)
        if self._stale or n_new <= 0 or not isinstance(pending, Reversible):
            return sorted(pending.keys() - waits.keys())
        new: list[str] = []
        for job_id in reversed(pending):
            if job_id not in waits:
                new.append(job_id)
            elif len(new) >= n_new:
                break  # past every job queued since the last pass, and as many as are missing
        return sorted(new)

    def started_outside(self, job_id: str) -> None:
        """A waiting job was started by the policy after the pass: drop its wait."""
        wait = self._waits.pop(job_id)
        self._dequeue(job_id)
        if self._tuner is not None:
            self._tuner.note_start(wait.cls, None, 0.0)

    def on_completion(self, job: Job) -> str | None:
        """Forget the job; its class, if it had one (the tuner is told its duration).

        A live cluster reports a waiting job it cancelled, or moved against the
        policy's decision, this way too: its wait goes.
        """
        if self._waits.pop(job.job_id, None) is not None:
            self._dequeue(job.job_id)
        self._fifo_key.pop(job.job_id, None)
        cls = self._class_of.pop(job.job_id, None)
        if self._tuner is not None and cls is not None:
            self._tuner.note_finish(cls, job.duration_s)
        return cls

    # ------------------------------------------------------------------- pass
    def _ordered(self, view: ClusterView, now: float) -> Iterable[str]:
        """The pending jobs with a wait (after `_new_waits`: all of them), in the pass's order.

        In FIFO order it reads the sorted queue as it goes (sorted from the
        buckets first where none is kept), so a pass that stops early costs the
        jobs it looked at; the queue must not change meanwhile.
        """
        pending, keys = view.pending, self._fifo_key
        if self._params.ordering == "las":
            return sorted((job_id for job_id in pending if job_id in self._waits),
                          key=lambda j: (pending[j].attained_service_gpu_s(now), keys[j]))
        return self._in_fifo_order(pending)

    def _in_fifo_order(self, pending: Mapping[str, JobState]) -> Iterator[str]:
        queue = self._queue
        if queue is None:  # a seldom walk: one sort of the buckets' runs, which Timsort merges
            queue = sorted([key for bucket in self._buckets.values() for key in bucket])
        for _, job_id in queue:
            if job_id in pending:
                yield job_id
            else:  # it left the queue unannounced: `_new_waits` looks at every wait next time
                self._stale = True

    def _dequeue(self, job_id: str) -> None:
        key = self._fifo_key[job_id]
        if self._queue is not None:
            del self._queue[bisect_left(self._queue, key)]
        bucket = self._buckets[self._bucket_of.pop(job_id)]
        del bucket[bisect_left(bucket, key)]

    def _bucket(self, where: tuple[int, int]) -> list[tuple[float, str]]:
        bucket = self._buckets.get(where)
        if bucket is None:
            bucket = self._buckets[where] = []
            self._buckets = dict(sorted(self._buckets.items()))  # by GPU count: a walk stops early
        return bucket

    def _relax(self, job_id: str, wait: WaitState, now: float) -> None:
        """Allow the job one level wider from now on; its reservation, if any, goes.

        Its bucket changes once the pass is over (`_refile_relaxed`): the pass
        has read it already, and reads no job twice.
        """
        wait.allowed += 1
        wait.since = now
        wait.reserved = None
        self._relaxed.append(job_id)

    def _refile_relaxed(self) -> None:
        """Move the jobs this pass relaxed, and that still wait, to the bucket of their new level."""
        gone: dict[tuple[int, int], set[tuple[float, str]]] = {}
        added: dict[tuple[int, int], list[tuple[float, str]]] = {}
        for job_id in self._relaxed:
            wait = self._waits.get(job_id)
            if wait is None:
                continue
            n_gpus, level = where = self._bucket_of[job_id]
            if level != wait.allowed:
                key = self._fifo_key[job_id]
                moved_to = self._bucket_of[job_id] = (n_gpus, wait.allowed)
                gone.setdefault(where, set()).add(key)
                added.setdefault(moved_to, []).append(key)
        self._relaxed.clear()
        for where, keys in gone.items():
            bucket = self._buckets[where]
            if len(keys) <= _ONE_BY_ONE:
                for key in keys:
                    del bucket[bisect_left(bucket, key)]
            else:
                bucket[:] = [key for key in bucket if key not in keys]
        for where, moved in added.items():
            _merge(self._bucket(where), moved)

    def _new_waits(self, view: ClusterView) -> int:
        """A wait for every pending job without one (a new arrival, or a preempted job back
        in the queue): it starts over at its target level. Returns how many there were."""
        pending, waits = view.pending, self._waits
        # A wait whose job left the queue unannounced (an engine should report it as a
        # completion) is noticed when a pass reads it, or when waits outnumber pending jobs.
        if self._stale or len(waits) > len(pending):
            self._forget_gone(pending)
        elif len(waits) == len(pending) and (not isinstance(pending, Reversible)
                                             or next(reversed(pending), None) in waits):
            # Waits are kept for pending jobs only, and a job new since the last pass
            # would be the last one: none lacks a wait.
            return 0
        new = self.unwaited(pending)
        if not new:
            return 0
        target_of, class_of = self._target_of, self._class_of
        deadlines, only_class = self._deadlines, self._only_class
        keys, bucket_of = self._fifo_key, self._bucket_of
        filed: dict[tuple[int, int], list[tuple[float, str]]] = {}
        for job_id in new:
            state = pending[job_id]
            job = state.job
            key = keys.get(job_id)
            if key is None:  # a job the hooks never saw
                key = keys[job_id] = (job.submit_time, job_id)
            target = target_of.get(job.n_gpus)
            if target is None:
                target = target_of[job.n_gpus] = target_level(view.topology, job.n_gpus)
            where = bucket_of[job_id] = (job.n_gpus, target)
            filed.setdefault(where, []).append(key)
            cls = class_of.get(job_id)
            if cls is None:
                cls = class_of[job_id] = (self._classify(view, job) if self._classify is not None
                                          else only_class)
            since = state.queued_since
            wait = waits[job_id] = WaitState(target, target, since, cls)
            if self._scale is not None:
                wait.scale = self._scale(view, job, cls)
            if target < L2 and (deadline := since + self._limit(wait)) < math.inf:
                heapq.heappush(deadlines, (deadline, job_id))
        if self._queue is not None:
            _merge(self._queue, [key for added in filed.values() for key in added])
        for where, added in filed.items():
            _merge(self._bucket(where), added)
        return len(new)

    def _forget_gone(self, pending: Mapping[str, JobState]) -> None:
        """Drop the waits of jobs that left the queue unannounced."""
        self._stale = False
        for job_id in [job_id for job_id in self._waits if job_id not in pending]:
            del self._waits[job_id]
            self._dequeue(job_id)

    def _limit(self, wait: WaitState) -> float:
        """Seconds the job may wait at its allowed level (below L2)."""
        timer = self._timers[wait.cls][wait.allowed]
        # Constant indices: the compiled build reads the pair in place instead of boxing it.
        factor = wait.scale[0] if wait.allowed == L0 else wait.scale[1]
        if factor == 1.0:
            return timer
        if factor == 0.0:
            return 0.0
        # scaling never lifts a timer past the bound, nor cuts one already above it to it
        return min(timer * factor, max(timer, self._max_timer_s))

    def _deadline(self, wait: WaitState) -> float:
        return math.inf if wait.allowed >= L2 else wait.since + self._limit(wait)

    def _push_deadline(self, job_id: str, wait: WaitState) -> None:
        deadline = self._deadline(wait)
        if deadline < math.inf:
            heapq.heappush(self._deadlines, (deadline, job_id))

    def _rebuild_deadlines(self) -> None:
        """The timers' heap anew, from the waits below L2 (the others have no timer), read
        from their buckets. Every entry is a distinct (deadline, job) pair, so any heap of
        them pops in one order."""
        heap: list[tuple[float, str]] = []
        waits = self._waits
        for (_, level), bucket in self._buckets.items():
            if level >= L2:
                continue
            for _, job_id in bucket:
                deadline = self._deadline(waits[job_id])
                if deadline < math.inf:
                    heap.append((deadline, job_id))
        heapq.heapify(heap)
        self._deadlines = heap

    def _earliest_deadline(self) -> float:
        """The next timer of any waiting job; drops entries of jobs that started or moved on."""
        heap = self._deadlines
        while heap:
            if self._is_current(*heap[0]):
                return heap[0][0]
            heapq.heappop(heap)
        return math.inf

    def _is_current(self, deadline: float, job_id: str) -> bool:
        """Whether a timers' heap entry is the job's timer now (not one it started or moved on from)."""
        wait = self._waits.get(job_id)
        return wait is not None and wait.allowed < L2 and wait.since + self._limit(wait) == deadline

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        """One pass over the queue: start, relax, preempt (through ``evict``) and reserve."""
        tuner = self._tuner
        if tuner is not None:
            tuner.observe(view, now)
            if tuner.due(now):
                n_changes = len(tuner.log)
                tuner.tune(now, self._timers, len(view.pending))
                if len(tuner.log) > n_changes:  # each moved timer is logged
                    self._rebuild_deadlines()
        if not view.pending:
            return Decisions()
        n_new = self._new_waits(view)
        free = view.tentative()
        # no_fit[l]: smallest size known not to fit at level l (or tighter) in this pass
        no_fit = [math.inf, math.inf, math.inf]

        def place(n_gpus: int, level: int) -> tuple[int, ...] | None:
            if n_gpus > free.n_free or n_gpus >= no_fit[level]:
                return None
            gpus = best_placement(free, n_gpus, level)
            if gpus is None:
                for lv in range(level + 1):
                    no_fit[lv] = min(no_fit[lv], n_gpus)
            return gpus

        pending, waits = view.pending, self._waits
        starts: list[Start] = []
        victims: list[str] = []
        restarts: list[Start] = []
        started: list[str] = []  # leave the queue once the pass has read it
        earliest: float | None = None
        only_timers = self._expired_from_heap()
        # Most waits new (a fresh policy taking over a queue): their timers may have run out
        # in numbers, and a walk of the queue reads them at less cost than the buckets.
        in_order = (self._indexed_order(pending, free, no_fit, now)
                    if self._indexed() and 2 * n_new <= len(waits) else self._ordered(view, now))
        for job_id in in_order:
            wait = waits[job_id]
            if free.n_free == 0:  # only a job whose timer runs out now can do anything
                if only_timers:
                    break  # and nothing gives GPUs back: `_relax_expired` finds those jobs
                if earliest is None:
                    earliest = self._earliest_deadline()
                if earliest > now:
                    break
                if wait.allowed >= L2 or now < wait.since + self._limit(wait):
                    continue
            earliest = None  # this job may relax or start, which moves the earliest timer
            state = pending[job_id]
            n_gpus = state.job.n_gpus
            gpus = place(n_gpus, wait.allowed)
            via_preemption = relaxed = False
            while gpus is None and wait.allowed < L2 and now >= wait.since + self._limit(wait):
                if self._evict is not None:
                    n_victims = len(victims)
                    gpus = self._evict(view, free, state, wait, now, victims, restarts)
                    if len(victims) > n_victims:
                        no_fit[:] = [math.inf, math.inf, math.inf]  # GPUs were given back
                    if gpus is not None:
                        via_preemption = True
                        break
                if tuner is not None:
                    tuner.note_relax(wait.cls, wait.allowed, n_gpus, now)
                self._relax(job_id, wait, now)
                relaxed = True
                gpus = place(n_gpus, wait.allowed)
            if gpus is not None:
                free.take(gpus)
                starts.append(Start(job_id, gpus))
                del waits[job_id]
                started.append(job_id)
                if tuner is not None:
                    won = (wait.allowed if not via_preemption and wait.allowed < L2
                           and placement_level(view.topology, gpus) == wait.allowed else None)
                    tuner.note_start(wait.cls, won, now - wait.since)
                continue
            if relaxed:  # only its last level's timer counts; nothing read the ones between
                self._push_deadline(job_id, wait)
            if (self._params.reserve_after_s is not None and wait.allowed == wait.target < L2
                    and now - state.queued_since >= self._params.reserve_after_s):
                self._hold(free, wait, n_gpus)
        for job_id in started:
            self._dequeue(job_id)
        if self._stale:
            self._forget_gone(pending)
        if only_timers and free.n_free == 0:
            self._relax_expired(pending, now)
        self._refile_relaxed()
        starts.extend(restarts)
        wake_at = self._earliest_deadline()
        if tuner is not None:
            busy = view.topology.n_gpus - view.n_free
            busy += sum(len(s.gpu_ids) for s in starts)
            busy -= sum(len(view.running[v].gpu_ids) for v in victims)
            tuner.after_pass(busy)
            epoch_at = tuner.next_epoch_at()
            if epoch_at is not None and len(starts) < len(pending):
                wake_at = min(wake_at, epoch_at)
        return Decisions(start=tuple(starts), preempt=tuple(victims),
                         wake_at=wake_at if wake_at < math.inf else None)

    def _indexed(self) -> bool:
        """Whether a pass may walk the buckets rather than the queue: the same jobs act in the same
        order. Not under LAS, whose order changes as jobs run, nor with reservations, which act
        on jobs that can neither start nor relax."""
        return self._params.ordering == "fifo" and self._params.reserve_after_s is None

    def _indexed_order(self, pending: Mapping[str, JobState], free: TentativeAllocation,
                       no_fit: list[float], now: float) -> Iterator[str]:
        """The jobs a FIFO pass acts on, in FIFO order, read from the buckets as the pass goes.

        A job acts if its timer has run out (known from the timers' heap when
        the pass begins) or if it may fit: its GPU count is at most the free
        GPUs, and below the smallest count that failed at its level in this
        pass (``no_fit``). Any other job would be passed over, so it is not
        read. ``free`` and ``no_fit`` are read at each step, as the pass
        changes them; a job it relaxes moves to a bucket it has passed.
        """
        expired = self._expired_keys(pending, now)
        last: tuple[float, str] | None = None
        next_expired = 0
        while True:
            best = self._next_in_buckets(last, free.n_free, no_fit)
            while next_expired < len(expired) and last is not None and expired[next_expired] <= last:
                next_expired += 1
            if next_expired < len(expired) and (best is None or expired[next_expired] < best):
                best = expired[next_expired]
            if best is None:
                return
            last = best
            job_id = best[1]
            if job_id in pending:
                yield job_id
            else:  # it left the queue unannounced: `_new_waits` looks at every wait next time
                self._stale = True

    def _next_in_buckets(self, last: tuple[float, str] | None, n_free: int,
                         no_fit: list[float]) -> tuple[float, str] | None:
        """The least FIFO key after ``last`` among the buckets of jobs that may fit: at most
        ``n_free`` GPUs, and fewer than ``no_fit`` at their level."""
        best: tuple[float, str] | None = None
        for (n_gpus, level), bucket in self._buckets.items():
            if n_gpus > n_free:
                break
            if n_gpus >= no_fit[level] or not bucket:
                continue
            i = 0 if last is None else bisect_right(bucket, last)
            if i < len(bucket) and (best is None or bucket[i] < best):
                best = bucket[i]
        return best

    def _expired_keys(self, pending: Mapping[str, JobState], now: float) -> list[tuple[float, str]]:
        """FIFO keys of the waiting jobs whose timer has run out by ``now``, sorted.

        Read from the part of the timers' heap at or before ``now``: a heap
        keeps every entry under its parent, so that part hangs together from the top.
        """
        heap, keys, found = self._deadlines, self._fifo_key, []
        size = len(heap)
        stack = [0] if heap else []
        while stack:
            i = stack.pop()
            deadline, job_id = heap[i]
            if deadline > now:
                continue
            if self._is_current(deadline, job_id) and job_id in pending:
                found.append(keys[job_id])
            child = 2 * i + 1
            if child < size:
                stack.append(child)
                if child + 1 < size:
                    stack.append(child + 1)
        found.sort()
        return found

    def _expired_from_heap(self) -> bool:
        """Whether a pass that runs out of GPUs may read the jobs whose timers ran out from the
        timers' heap rather than walk the rest of the queue: nothing then gives GPUs back (no
        evictions), no tuner counts the relaxations in order, and the order is FIFO."""
        return self._evict is None and self._tuner is None and self._params.ordering == "fifo"

    def _relax_expired(self, pending: Mapping[str, JobState], now: float) -> None:
        """Relax every waiting job whose timer has run out, once no GPU is left in the pass.

        What the pass would do for them: no job can start and, without
        evictions, none gives GPUs back, so each such job relaxes until it
        reaches L2 or a timer that has not run out. Read from the timers'
        heap in FIFO order, not by walking the whole queue.
        """
        heap = self._deadlines
        expired: set[str] = set()
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            if self._is_current(*entry):
                if entry[1] in pending:
                    expired.add(entry[1])
                else:  # it left the queue unannounced: `_new_waits` looks at every wait next time
                    self._stale = True
        for job_id in sorted(expired, key=self._fifo_key.__getitem__):
            wait = self._waits[job_id]
            while wait.allowed < L2 and now >= wait.since + self._limit(wait):
                self._relax(job_id, wait, now)
            self._push_deadline(job_id, wait)

    def _hold(self, free: TentativeAllocation, wait: WaitState, n_gpus: int) -> None:
        """Keep the job's reserved node or rack away from the jobs behind it in this pass."""
        topology = free.topology
        if wait.reserved is None:
            n_domains = topology.n_nodes if wait.target == L0 else topology.n_racks
            fits = [d for d in range(n_domains)
                    if len(domain_gpu_ids(topology, wait.target, d)) >= n_gpus]
            wait.reserved = min(fits, key=lambda d: (-domain_free(free, wait.target, d), d))
        held = [g for g in domain_gpu_ids(topology, wait.target, wait.reserved) if free.is_free(g)]
        free.take(held)


def _merge(keys: list[tuple[float, str]], added: list[tuple[float, str]]) -> None:
    """Add ``added`` to the sorted ``keys``: one at a time, or all at once and sorted again."""
    if len(added) <= _ONE_BY_ONE:
        for key in added:
            insort(keys, key)
    else:  # one sort of the whole: a sorted run and the new keys, which Timsort merges
        keys.extend(added)
        keys.sort()
