"""The view an event-driven policy decides from while jobs run as copies, kept between events.

`parts.idle_copies.primary_view` builds, from the engine's view, one where
every forked job holds only its first copy (and a job restarted for its
copies shows when its run began). `FirstCopiesView` gives the same view
without building it at every event: its allocation and its running states
are changed only where the engine's running jobs changed since the last
event, and when none did (an arrival that starts nothing) they are reused
as they are.

It relies on the engine's contract that a running job's state changes only
with a new `JobState.version` or a new state object (as
`parts.overrun_watch` does), so comparing the running states and their
versions with the last event's, in C, tells whether anything changed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter

from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import Topology
from rackwise.engine.view import ClusterView
from rackwise.workload.state import JobState

_VERSION = attrgetter("version")
_NODES = attrgetter("nodes")


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(init=False, slots=True)
class _Shown:
    """A running job as the view shows it (read-only by convention: see `primal_dual.Option`)."""

    shown: JobState  # the engine's own state, or a copy of it on its first copy
    first: tuple[int, ...]  # the GPUs it holds in the view
    nodes: tuple[int, ...]  # their nodes, in the order the GPUs first reach them

    def __init__(self, shown: JobState, first: tuple[int, ...], nodes: tuple[int, ...]) -> None:
        self.shown = shown
        self.first = first
        self.nodes = nodes


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class FirstCopiesView:
    """`primary_view`, kept up to date from event to event.

    The view it gives holds the same free GPUs, in the same free-count
    buckets in the same order, and the same running states (in the engine's
    order, field for field) as `primary_view` builds.
    """

    def __init__(self, topology: Topology) -> None:
        self._allocation = Allocation(topology)
        self._initial_order = self._allocation.node_order()
        self._jobs: dict[str, _Shown] = {}
        self._running: dict[str, JobState] = {}
        self._node_seq: list[int] = []
        # The engine's running states, their versions and the restarts, as last read.
        self._seen: set[tuple[str, JobState, int]] = set()
        self._states: list[JobState] = []
        self._versions: list[int] = []
        self._run_start: dict[str, float] = {}

    def view(self, view: ClusterView, run_start: Mapping[str, float]) -> ClusterView:
        """``view`` with every forked job on its first copy (``view`` itself if none is forked).

        ``run_start``: when the runs of jobs restarted for their copies began.
        """
        states = [*view.running.values()]
        if not run_start and all(state.copies == 1 for state in states):
            return view
        versions = [*map(_VERSION, states)]
        # Compared by identity, in C: the same states at the same versions changed nothing.
        if states != self._states or versions != self._versions or run_start != self._run_start:
            self._update(view.running, run_start, states, versions)
            self._states, self._versions, self._run_start = states, versions, dict(run_start)
        seen = ClusterView(view.topology, self._allocation, {}, self._running, view.perf)
        seen.pending = view.pending  # the engine's queue as it is: the view only reads it
        seen.now = view.now
        return seen

    def _update(self, running: Mapping[str, JobState], run_start: Mapping[str, float],
                states: list[JobState], versions: list[int]) -> None:
        """Redo the running jobs whose state or restart changed, and the GPUs they hold."""
        before = self._jobs
        seen = set(zip(running, states, versions))
        # Found by set differences, in C: new or changed states, and restarts begun or ended.
        redo = {job_id for job_id, _, _ in seen - self._seen}
        redo.update(job_id for job_id, _ in run_start.items() ^ self._run_start.items())
        redo &= running.keys()
        jobs = {job_id: self._shown(state, run_start.get(job_id)) if job_id in redo else before[job_id]
                for job_id, state in running.items()}
        allocation = self._allocation
        moved = False
        # Release first (a GPU may pass to another job); sorted, so the order is the same in any process.
        for job_id in sorted(before.keys() - running.keys()):
            allocation.release(before[job_id].first)
            moved = True
        changed = [job_id for job_id in sorted(redo)
                   if job_id not in before or jobs[job_id].first != before[job_id].first]
        for job_id in changed:
            if job_id in before:
                allocation.release(before[job_id].first)
        for job_id in changed:
            allocation.allocate(job_id, jobs[job_id].first)
            moved = True
        self._jobs, self._seen = jobs, seen
        self._running = {job_id: known.shown for job_id, known in jobs.items()}
        node_seq = [*chain.from_iterable(map(_NODES, jobs.values()))]
        if moved or node_seq != self._node_seq:
            self._reorder(node_seq)

    def _reorder(self, node_seq: list[int]) -> None:
        """Put the nodes in each free-count bucket in the order a fresh build would.

        A fresh build allocates the running jobs one after another; each job
        moves the nodes it reaches to the end of their new buckets, in the
        order its GPUs first reach them. So a node stands where its last
        move put it: untouched nodes first as an empty allocation holds them,
        then each touched node by its last place in ``node_seq``.
        """
        self._node_seq = node_seq
        touched = [*dict.fromkeys(reversed(node_seq))][::-1]
        held = set(touched)
        untouched = [node for node in self._initial_order if node not in held]
        self._allocation.set_node_order(untouched + touched)

    def _shown(self, state: JobState, start: float | None) -> _Shown:
        shown = state
        if state.copies > 1 or start is not None:
            shown = copy.copy(state)
            shown.gpu_ids = state.gpu_ids[:state.job.n_gpus]
            shown.copies = 1
            if start is not None:
                shown.run_start = start
        node_of = self._allocation.topology.gpu_node
        first = shown.gpu_ids
        return _Shown(shown, first, tuple(dict.fromkeys([node_of[gpu] for gpu in first])))
