"""`QueueOrder`: the pending jobs in the order they entered the queue, read from the front cheaply.

A dict keeps a deleted entry's slot until it resizes, and iterating it steps
over every such slot. A queue read from the front while its first jobs start
(first in, first out) leaves all its holes there: with tens of thousands of
jobs waiting, each read stepped over thousands of them. This list drops the
jobs that left as a read passes them, so each is stepped over once.
"""

from __future__ import annotations

from collections.abc import Iterator

from mypy_extensions import mypyc_attr

from rackwise.workload.state import JobState


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class QueueOrder:
    """Pending jobs in entry order (arrival, or return after a preemption); the engine keeps it."""

    def __init__(self) -> None:
        self._states: list[JobState] = []  # every entry, those of jobs that left included
        self._slot: dict[str, int] = {}  # job id -> the index of its entry now
        self._head = 0  # no entry of a waiting job lies before it

    def __len__(self) -> int:
        return len(self._slot)

    def enter(self, state: JobState) -> None:
        """``state`` joins the back of the queue (a job that left and returns: a new entry)."""
        self._slot[state.job_id] = len(self._states)
        self._states.append(state)

    def leave(self, job_id: str) -> None:
        """The job leaves the queue; its entry is dropped later."""
        del self._slot[job_id]
        if len(self._states) > 2 * len(self._slot) + 1024:  # mostly entries of jobs that left
            self._compact()

    def __iter__(self) -> Iterator[JobState]:
        """The waiting jobs, first in first; read it within one decision (entering or
        leaving while a read is under way is not seen by it)."""
        states, slot = self._states, self._slot
        end = len(states)
        i = self._head
        while i < end and slot.get(states[i].job_id) != i:
            i += 1
        self._head = i
        while i < end:
            state = states[i]
            if slot.get(state.job_id) == i:
                yield state
            i += 1

    def _compact(self) -> None:
        states, slot = self._states, self._slot
        kept = [states[i] for i in range(self._head, len(states)) if slot.get(states[i].job_id) == i]
        self._states = kept
        self._slot = {state.job_id: i for i, state in enumerate(kept)}
        self._head = 0
