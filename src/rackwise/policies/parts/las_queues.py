"""Tiresias' queues: 2D-LAS over discretised attained service, as run state.

`LasQueues` holds which queue each job is in, the running and pending jobs
in rank order, and when each running job is demoted and each waiting one
promoted; `decide` turns that into one decision. `rackwise.policies.tiresias`
is the policy (its parameters and hooks); the state lives here so that the
compiled build (setup.py) runs it, as it runs the ranked passes of
`parts.ordering`.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from heapq import heapify, heappop, heappush

from mypy_extensions import mypyc_attr

from rackwise.engine.view import ClusterView
from rackwise.policies.base import Decisions
from rackwise.policies.parts.ordering import JobPlacement, RankedQueue, insertion_point, preempt_ranked
from rackwise.workload.job import Job
from rackwise.workload.state import state_of

Key = tuple[int, int, int, str]  # (queue, pending?, order of entry, job id): lower runs first


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class LasQueues:
    """Multi-level feedback queues over attained service, in GPU-seconds (`Tiresias` documents the rules).

    Args:
        limits: Upper service limit of each queue but the last, strictly increasing.
        promote_knob: PROMOTEKNOB; None turns promotion off.
        running_first: Rank running jobs ahead of pending ones in a queue.
        place: Where a started job goes.
    """

    def __init__(self, limits: tuple[float, ...], promote_knob: float | None, running_first: bool,
                 place: JobPlacement) -> None:
        self.limits = limits
        self.promote_knob = promote_knob
        self.running_first = running_first
        self.place = place
        self.queue_of: dict[str, int] = {}
        self.key_of: dict[str, Key] = {}
        self.next_seq = 0
        self.base_gpu_s: dict[str, float] = {}  # attained service when it last entered Q1
        self.base_run_s: dict[str, float] = {}  # run time when it last entered Q1
        self.first_run: dict[str, float] = {}  # first start since it last entered Q1
        self.pending = RankedQueue()
        self.running: list[Key] = []  # sorted
        self.running_gpus: list[int] = []  # GPU counts, in the order of running
        self.running_total = 0  # their sum
        self.demote_at: dict[str, float] = {}
        self.promote_at: dict[str, float] = {}
        # Heaps of (instant, job id); an entry is live while the table above agrees.
        self.demote_heap: list[tuple[float, str]] = []
        self.promote_heap: list[tuple[float, str]] = []
        self.promote_due: list[str] = []
        self.arrived: list[Job] = []
        self.changed = False

    # ------------------------------------------------------------------ hooks
    def arrive(self, job: Job) -> None:
        """A job was submitted: it enters Q1 at the next decision."""
        self.arrived.append(job)
        self.base_gpu_s[job.job_id] = 0.0
        self.base_run_s[job.job_id] = 0.0

    def finish(self, job_id: str) -> None:
        """A job finished: it leaves every queue and table."""
        key = self.key_of.pop(job_id, None)
        if key is not None:
            self._drop_running(key)
        self.pending.discard(job_id)
        for table in (self.queue_of, self.base_gpu_s, self.base_run_s, self.first_run,
                      self.demote_at, self.promote_at):
            table.pop(job_id, None)
        self.changed = True

    # --------------------------------------------------------------- decision
    def decide(self, view: ClusterView, now: float) -> Decisions:
        """Move jobs between queues up to ``now``, then start and preempt in rank order."""
        entering = [(0, job.submit_time, job.job_id) for job in self.arrived]
        self.arrived = []
        # Demotions due before now are applied at their own instants. In the simulator
        # they are the ones `_next_wake` asked no event for, as they could not change a
        # decision; a live driver's round can come after an instant the policy did ask
        # for, and then the demotion still calls for a pass, as it would have then.
        late = False
        while (at := _earliest_live(self.demote_heap, self.demote_at)) <= now:
            demoted = self._pop_demotions(view, at)
            if at == now:
                entering += demoted
                break
            late = late or self._demotions_matter()
            for queue, _, job_id in sorted(demoted):
                self._enter(view, job_id, queue, at)
        due = self.promote_due
        heap = self.promote_heap
        while heap and heap[0][0] <= now:
            at, job_id = heappop(heap)
            if self.promote_at.get(job_id) == at:
                due.append(job_id)
        for job_id in due:
            if job_id not in self.promote_at:
                continue  # it left since (finished, or announced again by a live driver)
            state = view.pending[job_id]
            del self.promote_at[job_id]
            self.pending.discard(job_id)
            self.base_gpu_s[job_id] = state.attained_gpu_s
            self.base_run_s[job_id] = state.run_time_s
            self.first_run.pop(job_id, None)
            entering.append((0, state.job.submit_time, job_id))
        self.promote_due = []

        changed = self.changed or bool(entering) or late
        self.changed = False
        entering.sort()
        for queue, _, job_id in entering:
            self._enter(view, job_id, queue, now)
        # With no new jobs, no freed GPUs and no queue moves, the last decision still stands.
        if not changed or not view.pending:
            return Decisions(wake_at=self._next_wake())

        decisions = preempt_ranked(view, self.running, self.running_gpus, self.pending,
                                   self.place, self.running_total)
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
        state = state_of(view.running, job_id)
        key = self._key(queue, self.next_seq, job_id, running=state is not None)
        self.next_seq += 1
        self.queue_of[job_id] = queue
        self.key_of[job_id] = key
        if state is None:
            self.pending.add(job_id, view.pending[job_id].job.n_gpus, key)
            return
        self._add_running(key, state.job.n_gpus)
        if queue > 0:
            # A demotion: the job crossed the previous limit exactly now.
            self._arm_demotion(job_id, queue, self.limits[queue - 1], state.job.n_gpus, now)
            return
        # A job found already running (a restarted driver, a forecast): it keeps its service.
        self.first_run.setdefault(job_id, state.first_start if state.first_start is not None else now)
        service = state.attained_service_gpu_s(now) - self.base_gpu_s.get(job_id, 0.0)
        self._arm_demotion(job_id, queue, service, state.job.n_gpus, now)

    def _on_start(self, view: ClusterView, job_id: str, now: float) -> None:
        state = view.pending[job_id]
        self.pending.discard(job_id)
        self.promote_at.pop(job_id, None)
        self.first_run.setdefault(job_id, now)
        queue, _, seq, _ = self.key_of[job_id]
        key = self.key_of[job_id] = self._key(queue, seq, job_id, running=True)
        self._add_running(key, state.job.n_gpus)
        service = state.attained_gpu_s - self.base_gpu_s[job_id]
        self._arm_demotion(job_id, key[0], service, state.job.n_gpus, now)

    def _on_preempt(self, view: ClusterView, job_id: str, now: float) -> None:
        state = view.running[job_id]
        old = self.key_of[job_id]
        self._drop_running(old)
        queue, _, seq, _ = old
        key = self.key_of[job_id] = self._key(queue, seq, job_id, running=False)
        self.demote_at.pop(job_id, None)
        self.pending.add(job_id, state.job.n_gpus, key)
        if self.promote_knob is None or key[0] == 0:
            return
        run_s = state.executed_time_s(now) - self.base_run_s[job_id]
        if run_s <= 0.0:
            return
        # Waiting since the first run = wall time since then minus run time, so the
        # test "waiting >= knob * run" holds from this instant on.
        at = self.first_run[job_id] + (1.0 + self.promote_knob) * run_s
        self.promote_at[job_id] = at
        if at > now:
            _push_live(self.promote_heap, self.promote_at, at, job_id)
        else:
            self.promote_due.append(job_id)

    def _arm_demotion(self, job_id: str, queue: int, service_gpu_s: float, n_gpus: int,
                      now: float) -> None:
        if queue >= len(self.limits):
            return
        at = now + (self.limits[queue] - service_gpu_s) / n_gpus
        # Rounding can put a crossing on or before now; the next representable instant is as exact.
        at = max(at, math.nextafter(now, math.inf))
        self.demote_at[job_id] = at
        _push_live(self.demote_heap, self.demote_at, at, job_id)

    def _pop_demotions(self, view: ClusterView, at: float) -> list[tuple[int, float, str]]:
        """Take the jobs demoted at ``at`` out of their queue: (new queue, submit, id) each."""
        demoted = []
        heap = self.demote_heap
        while heap and heap[0][0] <= at:
            at_, job_id = heappop(heap)
            if self.demote_at.get(job_id) == at_:
                del self.demote_at[job_id]
                self._drop_running(self.key_of[job_id])
                job = view.running[job_id].job
                demoted.append((self.queue_of[job_id] + 1, job.submit_time, job_id))
        return demoted

    def _demotions_matter(self) -> bool:
        """Whether a demotion before the next event may change a decision.

        It may only if a pending job would then rank ahead of the demoted job
        (or a promotion waits for the next event). Running jobs move down one
        queue at a time to the last one; ranked first within a queue, they
        fall behind a pending job only by leaving its queue.
        """
        if self.promote_due:
            return True
        best = self.pending.best_key()
        if best is None:
            return False
        return not self.running_first or int(best[0]) < len(self.limits)  # type: ignore[call-overload]

    def _key(self, queue: int, seq: int, job_id: str, *, running: bool) -> Key:
        return (queue, 0 if running or not self.running_first else 1, seq, job_id)

    def _add_running(self, key: Key, n_gpus: int) -> None:
        index = insertion_point(self.running, key)
        self.running.insert(index, key)
        self.running_gpus.insert(index, n_gpus)
        self.running_total += n_gpus

    def _drop_running(self, key: Key) -> None:
        index = bisect_left(self.running, key)
        if index < len(self.running) and self.running[index] == key:
            del self.running[index]
            self.running_total -= self.running_gpus.pop(index)

    def _next_wake(self) -> float | None:
        demote = _earliest_live(self.demote_heap, self.demote_at) if self._demotions_matter() else math.inf
        promote = _earliest_live(self.promote_heap, self.promote_at)
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
