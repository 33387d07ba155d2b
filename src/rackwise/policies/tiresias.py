"""Tiresias-L: 2D-LAS over discretised attained service (baselines.md, A.3)."""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from typing import ClassVar

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.policies.base import BasePolicy, Decisions
from rackwise.policies.parts.ordering import (
    JobPlacement,
    RankedQueue,
    by_width,
    insertion_point,
    preempt_ranked,
)
from rackwise.policies.parts.placement import get_placement
from rackwise.workload.job import Job

Key = tuple[int, int, int, str]  # (queue, pending?, order of entry, job id): lower runs first


@dataclass(kw_only=True)
class Tiresias(BasePolicy):
    """Multi-level feedback queues over attained service, in GPU-seconds.

    Queue i (0 = Q1, the highest) holds jobs whose service since they last
    entered Q1 lies in ``[limit[i-1], limit[i])``. A job enters Q1 on arrival
    and moves down one queue the instant its service reaches its queue's
    limit. Queues have strict priority; within one, jobs run in the order
    they entered it (then by submit time, then job id). The best-ranked jobs
    that fit run, with no head-of-line blocking, and lower-ranked running
    jobs are preempted when a better-ranked one cannot be placed otherwise
    (`preempt_to_order`).

    Promotion against starvation follows the reference simulator: only a
    pending job outside Q1 that has run since it last entered Q1 is
    promoted, once its waiting time reaches ``promote_knob`` times its run
    time (wall seconds) since then. Waiting counts from its first start
    after entering Q1, so time queued before that first start does not
    count. A promoted job joins the back of Q1 with service and run time
    reset, i.e. a full Q1 quantum. A job preempted when already eligible is
    promoted at the next event.

    Within a queue, running jobs rank ahead of pending ones (the reference
    simulator moves pending jobs behind running ones at every event), so a
    job is preempted only by one from a higher queue. Without that rule a
    demoted job would be preempted by every earlier entrant of its new queue
    and the cluster would churn; ``running_first=False`` keeps the pure
    entry order for comparison.

    The policy asks to be woken at a demotion only when a pending job would
    then rank ahead of the demoted one; any other demotion changes no
    decision, so it is applied at the next event, at its own instant and in
    the same order (the records are those of waking at every demotion).

    Args:
        queue_limits_gpu_s: Upper service limit of each queue but the last,
            strictly increasing (K = len + 1 queues; ``()`` is FIFO).
        promote_knob: PROMOTEKNOB; ``None`` turns promotion off.
        placement: A placement strategy name (see ``rackwise policies``).
        running_first: Rank running jobs ahead of pending ones in a queue.
    """

    name: ClassVar[str] = "tiresias"
    preempts: ClassVar[bool] = True
    queue_limits_gpu_s: tuple[float, ...] = (3_600.0,)
    promote_knob: float | None = 8.0
    placement: str = "consolidated"
    running_first: bool = True

    def queue_of(self, job_id: str) -> int | None:
        """The priority queue the job is in (0 is the highest), None if it has none."""
        return self.queue_of_.get(job_id)

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        limits = tuple(float(limit) for limit in self.queue_limits_gpu_s)
        if any(not upper > lower for lower, upper in zip((0.0, *limits), limits)):
            raise InputError(f"must be positive and strictly increasing, got {limits}",
                             field="queue_limits_gpu_s")
        if self.promote_knob is not None and not self.promote_knob >= 0.0:
            raise InputError(f"must be >= 0 or None, got {self.promote_knob}", field="promote_knob")
        self.limits_ = limits
        # Where a started job goes; a policy that orders by Tiresias may place by its own rule.
        self.place_: JobPlacement = by_width(get_placement(self.placement), self.rng_)
        self.queue_of_: dict[str, int] = {}
        self.key_of_: dict[str, Key] = {}
        self.next_seq_ = 0
        self.base_gpu_s_: dict[str, float] = {}  # attained service when it last entered Q1
        self.base_run_s_: dict[str, float] = {}  # run time when it last entered Q1
        self.first_run_: dict[str, float] = {}  # first start since it last entered Q1
        self.pending_ = RankedQueue()
        self.running_: list[Key] = []  # sorted
        self.running_gpus_: list[int] = []  # GPU counts, in the order of running_
        self.running_total_ = 0  # their sum
        self.demote_at_: dict[str, float] = {}
        self.promote_at_: dict[str, float] = {}
        # Heaps of (instant, job id); an entry is live while the table above agrees.
        self.demote_heap_: list[tuple[float, str]] = []
        self.promote_heap_: list[tuple[float, str]] = []
        self.promote_due_: list[str] = []
        self.arrived_: list[Job] = []
        self.changed_ = False

    # ------------------------------------------------------------------ hooks
    def on_arrival(self, job: Job, now: float) -> None:
        self.arrived_.append(job)
        self.base_gpu_s_[job.job_id] = 0.0
        self.base_run_s_[job.job_id] = 0.0

    def on_completion(self, job: Job, now: float) -> None:
        job_id = job.job_id
        key = self.key_of_.pop(job_id, None)
        if key is not None:
            self._drop_running(key)
        self.pending_.discard(job_id)
        for table in (self.queue_of_, self.base_gpu_s_, self.base_run_s_, self.first_run_,
                      self.demote_at_, self.promote_at_):
            table.pop(job_id, None)
        self.changed_ = True

    # --------------------------------------------------------------- schedule
    def schedule(self, view: ClusterView, now: float) -> Decisions:
        entering = [(0, job.submit_time, job.job_id) for job in self.arrived_]
        self.arrived_ = []
        # Demotions due before now are applied at their own instants. In the simulator
        # they are the ones `_next_wake` asked no event for, as they could not change a
        # decision; a live driver's round can come after an instant the policy did ask
        # for, and then the demotion still calls for a pass, as it would have then.
        late = False
        while (at := _earliest_live(self.demote_heap_, self.demote_at_)) <= now:
            demoted = self._pop_demotions(view, at)
            if at == now:
                entering += demoted
                break
            late = late or self._demotions_matter()
            for queue, _, job_id in sorted(demoted):
                self._enter(view, job_id, queue, at)
        due = self.promote_due_
        heap = self.promote_heap_
        while heap and heap[0][0] <= now:
            at, job_id = heappop(heap)
            if self.promote_at_.get(job_id) == at:
                due.append(job_id)
        for job_id in due:
            if job_id not in self.promote_at_:
                continue  # it left since (finished, or announced again by a live driver)
            state = view.pending[job_id]
            del self.promote_at_[job_id]
            self.pending_.discard(job_id)
            self.base_gpu_s_[job_id] = state.attained_gpu_s
            self.base_run_s_[job_id] = state.run_time_s
            self.first_run_.pop(job_id, None)
            entering.append((0, state.job.submit_time, job_id))
        self.promote_due_ = []

        changed = self.changed_ or bool(entering) or late
        self.changed_ = False
        entering.sort()
        for queue, _, job_id in entering:
            self._enter(view, job_id, queue, now)
        # With no new jobs, no freed GPUs and no queue moves, the last decision still stands.
        if not changed or not view.pending:
            return Decisions(wake_at=self._next_wake())

        decisions = preempt_ranked(view, self.running_, self.running_gpus_, self.pending_,
                                   self.place_, self.running_total_)
        if not decisions.start:
            return Decisions(wake_at=self._next_wake())
        for job_id in decisions.preempt:
            self._on_preempt(view, job_id, now)
        for start in decisions.start:
            self._on_start(view, start.job_id, now)
        return Decisions(start=decisions.start, preempt=decisions.preempt,
                         wake_at=self._next_wake())

    # ------------------------------------------------------------- run state
    def _enter(self, view: ClusterView, job_id: str, queue: int, now: float) -> None:
        state = view.running.get(job_id)
        key = self._key(queue, self.next_seq_, job_id, running=state is not None)
        self.next_seq_ += 1
        self.queue_of_[job_id] = queue
        self.key_of_[job_id] = key
        if state is None:
            self.pending_.add(job_id, view.pending[job_id].job.n_gpus, key)
            return
        self._add_running(key, state.job.n_gpus)
        if queue > 0:
            # A demotion: the job crossed the previous limit exactly now.
            self._arm_demotion(job_id, queue, self.limits_[queue - 1], state.job.n_gpus, now)
            return
        # A job found already running (a restarted driver, a forecast): it keeps its service.
        self.first_run_.setdefault(job_id, state.first_start if state.first_start is not None else now)
        service = state.attained_service_gpu_s(now) - self.base_gpu_s_.get(job_id, 0.0)
        self._arm_demotion(job_id, queue, service, state.job.n_gpus, now)

    def _on_start(self, view: ClusterView, job_id: str, now: float) -> None:
        state = view.pending[job_id]
        self.pending_.discard(job_id)
        self.promote_at_.pop(job_id, None)
        self.first_run_.setdefault(job_id, now)
        queue, _, seq, _ = self.key_of_[job_id]
        key = self.key_of_[job_id] = self._key(queue, seq, job_id, running=True)
        self._add_running(key, state.job.n_gpus)
        service = state.attained_gpu_s - self.base_gpu_s_[job_id]
        self._arm_demotion(job_id, key[0], service, state.job.n_gpus, now)

    def _on_preempt(self, view: ClusterView, job_id: str, now: float) -> None:
        state = view.running[job_id]
        self._drop_running(self.key_of_[job_id])
        queue, _, seq, _ = self.key_of_[job_id]
        key = self.key_of_[job_id] = self._key(queue, seq, job_id, running=False)
        self.demote_at_.pop(job_id, None)
        self.pending_.add(job_id, state.job.n_gpus, key)
        if self.promote_knob is None or key[0] == 0:
            return
        run_s = state.executed_time_s(now) - self.base_run_s_[job_id]
        if run_s <= 0.0:
            return
        # Waiting since the first run = wall time since then minus run time, so the
        # test "waiting >= knob * run" holds from this instant on.
        at = self.first_run_[job_id] + (1.0 + self.promote_knob) * run_s
        self.promote_at_[job_id] = at
        if at > now:
            _push_live(self.promote_heap_, self.promote_at_, at, job_id)
        else:
            self.promote_due_.append(job_id)

    def _arm_demotion(self, job_id: str, queue: int, service_gpu_s: float, n_gpus: int,
                      now: float) -> None:
        if queue >= len(self.limits_):
            return
        at = now + (self.limits_[queue] - service_gpu_s) / n_gpus
        # Rounding can put a crossing on or before now; the next representable instant is as exact.
        at = max(at, math.nextafter(now, math.inf))
        self.demote_at_[job_id] = at
        _push_live(self.demote_heap_, self.demote_at_, at, job_id)

    def _pop_demotions(self, view: ClusterView, at: float) -> list[tuple[int, float, str]]:
        """Take the jobs demoted at ``at`` out of their queue: (new queue, submit, id) each."""
        demoted = []
        heap = self.demote_heap_
        while heap and heap[0][0] <= at:
            at_, job_id = heappop(heap)
            if self.demote_at_.get(job_id) == at_:
                del self.demote_at_[job_id]
                self._drop_running(self.key_of_[job_id])
                job = view.running[job_id].job
                demoted.append((self.queue_of_[job_id] + 1, job.submit_time, job_id))
        return demoted

    def _demotions_matter(self) -> bool:
        """Whether a demotion before the next event may change a decision.

        It may only if a pending job would then rank ahead of the demoted job
        (or a promotion waits for the next event). Running jobs move down one
        queue at a time to the last one; ranked first within a queue, they
        fall behind a pending job only by leaving its queue.
        """
        if self.promote_due_:
            return True
        best = self.pending_.best_key()
        if best is None:
            return False
        return not self.running_first or int(best[0]) < len(self.limits_)  # type: ignore[call-overload]

    def _key(self, queue: int, seq: int, job_id: str, *, running: bool) -> Key:
        return (queue, 0 if running or not self.running_first else 1, seq, job_id)

    def _add_running(self, key: Key, n_gpus: int) -> None:
        index = insertion_point(self.running_, key)
        self.running_.insert(index, key)
        self.running_gpus_.insert(index, n_gpus)
        self.running_total_ += n_gpus

    def _drop_running(self, key: Key) -> None:
        index = bisect_left(self.running_, key)
        if index < len(self.running_) and self.running_[index] == key:
            del self.running_[index]
            self.running_total_ -= self.running_gpus_.pop(index)

    def _next_wake(self) -> float | None:
        demote = _earliest_live(self.demote_heap_, self.demote_at_) if self._demotions_matter() else math.inf
        promote = _earliest_live(self.promote_heap_, self.promote_at_)
        best = min(demote, promote)
        return None if best == math.inf else best


def _push_live(heap: list[tuple[float, str]], table: dict[str, float], at: float, job_id: str) -> None:
    """Push (at, job id), whose live entry ``table`` already holds.

    Stale entries (a preempted job's demotion, a restarted job's promotion)
    stay until their instant; once they outnumber the live ones they are
    dropped, so the heap stays about as small as the table.
    """
    heappush(heap, (at, job_id))
    if len(heap) > 2 * len(table) + 1024:
        heap[:] = [entry for entry in heap if table.get(entry[1]) == entry[0]]
        heapify(heap)


def _earliest_live(heap: list[tuple[float, str]], table: dict[str, float]) -> float:
    """The earliest live instant of a heap (inf if none), popping stale entries on top."""
    while heap:
        at, job_id = heap[0]
        if table.get(job_id) == at:
            return at
        heappop(heap)
    return math.inf
