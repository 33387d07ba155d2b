"""When a waiting job's delay timers next run out, without reading every waiting job at each decision.

A policy with delay timers (``combined``) asks, at each decision, for the
earliest instant after ``now`` at which some waiting job it did not start
may relax a level or take a slower GPU type, so it is woken then. Each
job's instants are fixed from the moment it enters the queue, so
`DelayWakes` keeps them all in one heap, entered once per stay in the
queue: for the jobs that arrived (`arrived`) and for those the engine
names as stopped since the last decision (`ClusterView.running_changes_since`);
where it names none, every waiting job is checked. Instants past, and
those of jobs no longer waiting, leave the heap as they reach its top.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Set

from mypy_extensions import mypyc_attr

from rackwise.engine.view import ClusterView
from rackwise.workload.state import JobState, state_of

Instants = Callable[[ClusterView, JobState], Iterable[float]]
_NONE = (-1, 0.0)  # no stay


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class DelayWakes:
    """The next instant any waiting job's timers run out, decision after decision.

    Args:
        instants: A waiting job's instants (any order), from the view of the
            first decision that sees it in the queue.
    """

    def __init__(self, instants: Instants) -> None:
        self._instants = instants
        self._heap: list[tuple[float, int, str]] = []  # (instant, stay, job id)
        # Each waiting job's stay in the queue with instants in the heap: its number, and when it began.
        self._stay: dict[str, tuple[int, float]] = {}
        self._stays = 0
        self._arrived: list[str] = []
        self._mark: tuple[int, int] | None = None

    def arrived(self, job_id: str) -> None:
        """A job entered the queue on arrival."""
        self._arrived.append(job_id)

    def forget(self, job_id: str) -> None:
        """A job completed."""
        self._stay.pop(job_id, None)

    def next_wake(self, view: ClusterView, now: float, started: Set[str]) -> float:
        """The earliest instant after ``now`` of a job waiting in ``view`` and not in ``started`` (inf: none)."""
        pending = view.pending
        named = view.running_changes_since(self._mark)
        self._mark = view.change_mark
        entered: Iterable[str] = pending.keys() if named is None else [*self._arrived, *named]
        self._arrived.clear()
        for job_id in entered:
            state = state_of(pending, job_id)
            if state is None or job_id in started:
                continue
            if named is None and (known := self._stay.get(job_id)) is not None and known[1] == state.queued_since:
                continue  # the same stay, timed already
            self._time(view, state, now)
        heap, held = self._heap, []
        wake = math.inf
        while heap:
            at, stay, job_id = heap[0]
            current = self._stay.get(job_id, _NONE)[0] == stay
            if at <= now or job_id not in pending or not current:
                heapq.heappop(heap)
                if current and job_id not in pending:
                    del self._stay[job_id]  # its stay is over
            elif job_id in started:
                held.append(heapq.heappop(heap))
            else:
                wake = at
                break
        for entry in held:
            heapq.heappush(heap, entry)
        return wake

    def _time(self, view: ClusterView, state: JobState, now: float) -> None:
        self._stays += 1
        self._stay[state.job_id] = (self._stays, state.queued_since)
        for at in self._instants(view, state):
            if at > now:
                heapq.heappush(self._heap, (at, self._stays, state.job_id))
