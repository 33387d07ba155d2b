"""`ClusterView`: the read-only picture a policy decides from.

The same class serves the simulator and the real backends, so a policy
cannot tell them apart. The view is a thin window onto the engine's state,
not a copy: it is cheap to build, and valid only during the call it is
passed to. Policies must not keep it or change anything reached through it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import Allocation, TentativeAllocation
from rackwise.cluster.topology import Topology
from rackwise.engine.queue_order import QueueOrder
from rackwise.workload.state import JobState

if TYPE_CHECKING:
    from rackwise.perf.base import PerfModel

_SERIALS = itertools.count()  # one number per view made in this process


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class ClusterView:
    """Read-only state of a cluster and its queue at one instant.

    Attributes:
        topology: The cluster's racks, nodes, GPUs and links.
        pending: Jobs waiting to run, in the order they entered the queue
            (arrival, or return after a preemption).
        running: Jobs holding GPUs, in the order they started.
        perf: The performance model, for "how fast would J run on G" questions.
    """

    def __init__(self, topology: Topology, allocation: Allocation,
                 pending: dict[str, JobState], running: dict[str, JobState],
                 perf: PerfModel, queue_order: QueueOrder | None = None) -> None:
        self.topology = topology
        self._allocation = allocation
        self.pending: Mapping[str, JobState] = MappingProxyType(pending)
        self._queue_order = queue_order
        self.running: Mapping[str, JobState] = MappingProxyType(running)
        self.perf = perf
        self.now = 0.0
        self.n_starts = 0  # jobs the engine has started while keeping this view (the simulator counts)
        # An engine that logs its running jobs' changes (the simulator) sets ``keeps_changes``,
        # adds to ``running_changed`` and calls `decided` after each decision.
        self.keeps_changes = False
        self.running_changed: list[str] = []
        self.n_decisions = 0
        self._serial = next(_SERIALS)

    @property
    def start_mark(self) -> tuple[int, int]:
        """This view's own number and the jobs started since it was made.

        A policy that read a mark and then started k jobs reads the mark
        plus k next time only if the same view is shown and no other job
        started in between; it can then trust what it kept of the running
        jobs. A real-cluster engine shows a new view per snapshot, whose
        mark differs from every earlier one.
        """
        return self._serial, self.n_starts

    @property
    def change_mark(self) -> tuple[int, int]:
        """This view's own number and the decisions asked of it before this one.

        Keep it, and hand it to `running_changes_since` at the next decision.
        """
        return self._serial, self.n_decisions

    def running_changes_since(self, mark: tuple[int, int] | None) -> list[str] | None:
        """The jobs that started, stopped or changed pace since the decision that read ``mark``.

        A job whose running state changed (a new `JobState.version`) is
        named at least once, possibly more; one named may have stopped
        since. None when the view cannot tell: ``mark`` is another view's
        or not the last decision's (a decision in between was not seen),
        or the engine keeps no such log (a live backend shows a new view
        per snapshot). Read it during the decision; the engine reuses the list.
        """
        if mark is None or not self.keeps_changes or mark != (self._serial, self.n_decisions - 1):
            return None
        return self.running_changed

    def queued(self) -> Iterator[JobState]:
        """The waiting jobs in `pending`'s order, first in first: the way to read a queue from its front.

        From an engine that keeps a `QueueOrder` (the simulator) this skips
        the jobs that left at once, where the dict's values would step over
        their slots; else, or if ``pending`` holds another number of jobs
        than the order (changed behind its back), it is the dict's values.
        """
        order = self._queue_order
        return iter(self.pending.values()) if order is None else order.read(self.pending)

    def decided(self) -> None:
        """The engine's side: a decision was made, so the log starts again for the next."""
        self.n_decisions += 1
        self.running_changed.clear()

    # Free-GPU questions, answered in O(1) by the allocation's counters.
    @property
    def n_free(self) -> int:
        return self._allocation.n_free

    def free_in_node(self, node_id: int) -> int:
        return self._allocation.free_in_node(node_id)

    def free_in_rack(self, rack_id: int) -> int:
        return self._allocation.free_in_rack(rack_id)

    def free_gpu_ids(self, node_id: int) -> list[int]:
        return self._allocation.free_gpu_ids(node_id)

    def sliced_gpu_for(self, slices: int) -> int | None:
        """The split GPU a fractional job of ``slices`` thousandths fills best, or None."""
        return self._allocation.sliced_gpu_for(slices)

    def room_on(self, gpu_id: int) -> int | None:
        """Free slices of a GPU split among fractional jobs (None: not split)."""
        return self._allocation.room.get(gpu_id)

    def owner_of(self, gpu_id: int) -> str | None:
        """The job holding a GPU, `SLICED` if fractional jobs split it, or None if it is free."""
        return self._allocation.owner[gpu_id]

    @property
    def owners(self) -> Sequence[str | None]:
        """The job holding each GPU, by GPU id (None: free); read it, never change it."""
        return self._allocation.owner

    def tentative(self) -> TentativeAllocation:
        """A scratch overlay to try out starts and preemptions within one decision."""
        return TentativeAllocation(self._allocation)

    def rate_on(self, state: JobState, gpu_ids: tuple[int, ...]) -> float:
        """Iterations per second the job would make on ``gpu_ids`` (a what-if)."""
        return self.perf.rate(state.job, gpu_ids, self.running)
