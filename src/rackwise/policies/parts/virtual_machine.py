"""A virtual single machine running preemptive SRPT (shortest remaining processing time).

A-SRPT maps the cluster to one machine whose capacity is the cluster's GPU
count: a job of ``g`` GPUs and ``W`` predicted seconds of work occupies it
for ``g W / G`` seconds. That machine always serves the job with the least
remaining time, which minimises total completion time on one machine
(Schrage 1968); its order then guides the real cluster. Emulating any
feasible cluster schedule on the machine shows its total completion time is
a lower bound for every cluster schedule when predictions are exact.

Time on the machine is real time: ``advance(now)`` serves jobs exactly,
piecewise, between the instants it is told about.

The machine also keeps every job's key in order between changes (`order`):
serving changes only the head's key, and never its place among the others,
so a change costs one binary search where ranking the whole queue at every
event cost a sort. A caller that keeps some jobs in this order itself asks
which jobs' keys changed since it last asked (`keys_changed`).
"""

from __future__ import annotations

import heapq
import itertools
from bisect import bisect_left, insort
from collections.abc import Iterable
from operator import itemgetter
from typing import Any, TypeVar

from mypy_extensions import mypyc_attr

INF = float("inf")
T = TypeVar("T")

# A queue entry: [remaining_s, release_time, seq, job_id, alive]. Only the head
# is ever served, and lowering the head's key keeps the heap valid, so the head
# is updated in place; other changes retire the entry and push a new one.
_Entry = list[Any]
# A job's key with its id: ``(*key(job_id), job_id)``. Keys are unique (``seq``),
# so ordering these is ordering the keys; the id is never compared.
OrderKey = tuple[float, float, int, str]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class VirtualMachine:
    """Preemptive SRPT on one machine, in real time.

    Keys order jobs for the real cluster, smallest first: ``(remaining_s,
    release_time, seq)`` for a job still in service, and ``(0, vm_finish_time,
    seq)`` for an *overdue* job, one the machine has finished but the
    cluster has not, so overdue jobs come first, in the order they finished
    here. ``seq`` is the insertion order and breaks every remaining tie.
    """

    def __init__(self, start_time: float = 0.0) -> None:
        self.now = start_time
        self._heap: list[_Entry] = []
        self._entries: dict[str, _Entry] = {}
        self._overdue: dict[str, tuple[float, int]] = {}  # job -> (vm finish time, seq)
        self._release: dict[str, float] = {}
        self._seq = itertools.count()
        self._order: list[OrderKey] = []  # every job's current key, smallest first ...
        self._added: list[OrderKey] = []  # ... once these, added since, are put in place
        self.finish_times: dict[str, float] = {}  # every job the machine finished
        self._changed: dict[str, None] | None = None  # jobs given a new key, once asked for

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._entries or job_id in self._overdue

    def __len__(self) -> int:
        return len(self._entries) + len(self._overdue)

    # ------------------------------------------------------------------ changes
    def add(self, job_id: str, size_s: float, release_time: float | None = None) -> None:
        """A job arrives now with ``size_s`` seconds of work on the machine."""
        if job_id in self:
            raise ValueError(f"job {job_id} is already on the virtual machine")
        self._release[job_id] = self.now if release_time is None else release_time
        self._push(job_id, size_s, next(self._seq))

    def advance(self, now: float) -> None:
        """Serve jobs, shortest remaining first, until ``now``."""
        clock = self.now
        heap = self._heap
        while clock < now:
            head = self._head()
            if head is None:
                break
            self._unorder((head[0], head[1], head[2], head[3]))
            if clock + head[0] <= now:
                clock += head[0]
                heapq.heappop(heap)
                self._finish(head, clock)
            else:
                head[0] -= now - clock
                self._keyed((head[0], head[1], head[2], head[3]))
                clock = now
        self.now = max(self.now, now)

    def grow(self, job_id: str, delta_s: float) -> None:
        """Change a job's remaining work by ``delta_s`` seconds (a new prediction).

        An overdue job given more work goes back into service; a job whose
        remaining work drops to zero or below finishes now.
        """
        if job_id in self._overdue:
            if delta_s <= 0.0:
                return
            finish, seq = self._overdue.pop(job_id)
            del self.finish_times[job_id]
            self._unorder((0.0, finish, seq, job_id))
            self._push(job_id, delta_s, seq)
            return
        entry = self._entries[job_id]
        entry[4] = False
        self._unorder((entry[0], entry[1], entry[2], job_id))
        self._push(job_id, entry[0] + delta_s, entry[2])

    def keys_changed(self) -> list[str]:
        """The jobs given a new key since the last call (the first call: none, and the log starts).

        Every job whose key changed is named once; one named may have left the machine since.
        """
        changed = self._changed
        self._changed = {}
        return [] if changed is None else list(changed)

    def remove(self, job_id: str) -> None:
        """The real job finished: drop it, whatever work it has left here."""
        entry = self._entries.pop(job_id, None)
        if entry is not None:
            entry[4] = False
            self._unorder((entry[0], entry[1], entry[2], job_id))
        overdue = self._overdue.pop(job_id, None)
        if overdue is not None:
            self._unorder((0.0, overdue[0], overdue[1], job_id))
        self._release.pop(job_id, None)

    # ------------------------------------------------------------------ queries
    def remaining_s(self, job_id: str) -> float:
        """Seconds of work the machine has left for a job (0 when overdue)."""
        entry = self._entries.get(job_id)
        return entry[0] if entry is not None else 0.0

    def is_overdue(self, job_id: str) -> bool:
        """The machine has finished the job (the cluster has not)."""
        return job_id in self._overdue

    def key(self, job_id: str) -> tuple[float, float, int]:
        """Priority of a job, smallest first (see the class docstring)."""
        entry = self._entries.get(job_id)
        if entry is not None:
            return (entry[0], entry[1], entry[2])
        finish, seq = self._overdue[job_id]
        return (0.0, finish, seq)

    def ranked(self, items: Iterable[tuple[str, T]]) -> list[tuple[tuple[float, float, int], T]]:
        """``(key(job_id), value)`` for each ``(job_id, value)``, smallest key first.

        What sorting by `key` gives, for a whole queue at once: asked at every
        event for every waiting job, so the lookups are inlined.
        """
        entries, overdue = self._entries, self._overdue
        out = []
        for job_id, value in items:
            entry = entries.get(job_id)
            if entry is not None:
                out.append(((entry[0], entry[1], entry[2]), value))
            else:
                finish, seq = overdue[job_id]
                out.append(((0.0, finish, seq), value))
        out.sort(key=itemgetter(0))
        return out

    def order(self) -> list[OrderKey]:
        """Every job's ``(*key(job_id), job_id)``, smallest key first.

        The machine's own list, kept up to date by every change: read it,
        never change it, and do not change the machine while walking it.
        """
        self._place_added()
        return self._order

    def order_key(self, job_id: str) -> OrderKey:
        """``(*key(job_id), job_id)``: the job's entry in `order`."""
        return (*self.key(job_id), job_id)

    def next_finish_time(self) -> float:
        """When the machine next finishes a job if nothing changes (inf if idle)."""
        head = self._head()
        return INF if head is None else self.now + head[0]

    # ---------------------------------------------------------------- helpers
    def _push(self, job_id: str, remaining_s: float, seq: int) -> None:
        release = self._release[job_id]
        entry = [remaining_s, release, seq, job_id, True]
        if remaining_s <= 0.0:
            self._finish(entry, self.now)
            return
        self._entries[job_id] = entry
        heapq.heappush(self._heap, entry)
        self._keyed((remaining_s, release, seq, job_id))

    def _keyed(self, key: OrderKey) -> None:
        """A job's new key, to be put in `order`."""
        self._added.append(key)
        if self._changed is not None:
            self._changed[key[3]] = None

    def _unorder(self, key: OrderKey) -> None:
        """Take a key out of `order` (it is there: every change keeps the two in step)."""
        self._place_added()
        order = self._order
        del order[bisect_left(order, key)]

    def _place_added(self) -> None:
        """Put the keys added since into `order`: one by one if few, else by one sort (many arrivals)."""
        added = self._added
        if not added:
            return
        if len(added) <= 8:
            for key in added:
                insort(self._order, key)
        else:
            self._order.extend(added)
            self._order.sort()
        added.clear()

    def _head(self) -> _Entry | None:
        heap = self._heap
        while heap and not heap[0][4]:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _finish(self, entry: _Entry, when: float) -> None:
        job_id = entry[3]
        entry[4] = False
        self._entries.pop(job_id, None)
        self._overdue[job_id] = (when, entry[2])
        self.finish_times[job_id] = when
        self._keyed((0.0, when, entry[2], job_id))


def srpt_finish_times(jobs: Iterable[tuple[str, float, float]]) -> dict[str, float]:
    """Finish time of each ``(job_id, release_time, size_s)`` under SRPT on one machine.

    Jobs are taken in release order (stable), and none is removed early, so
    the sum of flow times is the machine's lower bound for exact predictions.
    """
    ordered = sorted(jobs, key=lambda job: job[1])
    machine = VirtualMachine(ordered[0][1] if ordered else 0.0)
    for job_id, release, size in ordered:
        machine.advance(release)
        machine.add(job_id, size, release)
    machine.advance(INF)
    return dict(machine.finish_times)
