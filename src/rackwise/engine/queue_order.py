"""`QueueOrder`: the pending jobs in the order they entered the queue, read from the front cheaply.

A dict keeps a deleted entry's slot until it resizes, and iterating it steps
over every such slot. A queue read from the front while its first jobs start
(first in, first out) leaves all its holes there: with tens of thousands of
jobs waiting, each read stepped over thousands of them. Here the entries of
jobs that left are dropped from the front as a read reaches them, and a
queue with no such entry behind its front is read by the deque's own iterator.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping

from mypy_extensions import mypyc_attr

from rackwise.workload.state import JobState


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class QueueOrder:
    """Pending jobs in entry order (arrival, or return after a preemption); the engine keeps it."""

    def __init__(self) -> None:
        self._states: deque[JobState] = deque()  # every entry, those of jobs that left included
        self._first = 0  # the number of the deque's first entry (entries are numbered as they come)
        self._entry: dict[str, int] = {}  # job id -> the number of its entry now

    def __len__(self) -> int:
        return len(self._entry)

    def enter(self, state: JobState) -> None:
        """``state`` joins the back of the queue (a job that left and returns: a new entry)."""
        self._entry[state.job_id] = self._first + len(self._states)
        self._states.append(state)

    def leave(self, job_id: str) -> None:
        """The job leaves the queue; its entry is dropped later."""
        del self._entry[job_id]
        if len(self._states) > 2 * len(self._entry) + 64:  # mostly entries of jobs that left
            self._compact()

    def read(self, pending: Mapping[str, JobState]) -> Iterator[JobState]:
        """The waiting jobs, first in first, read within one decision; ``pending``'s values
        if it holds another number of jobs (the engine changed it without this order)."""
        states, entry = self._states, self._entry
        if len(entry) != len(pending):
            return iter(pending.values())
        while states and entry.get(states[0].job_id) != self._first:
            states.popleft()
            self._first += 1
        if len(states) == len(entry):
            return iter(states)
        return self._live()

    def _live(self) -> Iterator[JobState]:
        entry, number = self._entry, self._first
        for state in self._states:
            if entry.get(state.job_id) == number:
                yield state
            number += 1

    def _compact(self) -> None:
        kept = deque(self._live())
        self._states, self._first = kept, 0
        self._entry = {state.job_id: i for i, state in enumerate(kept)}
