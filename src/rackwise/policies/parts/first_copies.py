"""The view an event-driven policy decides from while jobs run as copies, kept between events.

`parts.idle_copies.primary_view` builds, from the engine's view, one where
every forked job holds only its first copy (and a job restarted for its
copies shows when its run began). `FirstCopiesView` gives the same view
without building it at every event: its allocation and its running states
are changed only for the running jobs that changed since the last event,
and when none did (an arrival that starts nothing) they are reused as they
are. The engine names those jobs (`ClusterView.running_changes_since`);
where it names none, every running state is compared with the one shown,
by the engine's contract that a running job's state changes only with a
new `JobState.version` or a new state object (as `parts.overrun_watch`
relies on).
"""

from __future__ import annotations

from collections.abc import Mapping, Reversible, Set
from dataclasses import dataclass
from typing import cast

from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import Topology
from rackwise.engine.view import ClusterView
from rackwise.workload.state import JobState, state_of


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(init=False, slots=True)
class _Shown:
    """A running job as the view shows it (read-only by convention: see `primal_dual.Option`)."""

    source: JobState  # the engine's state it was made from
    version: int  # ... at this version
    shown: JobState  # the engine's own state, or a copy of it on its first copy
    first: tuple[int, ...]  # the GPUs it holds in the view
    nodes: tuple[int, ...]  # their nodes, in the order the GPUs first reach them

    def __init__(self, source: JobState, shown: JobState, first: tuple[int, ...],
                 nodes: tuple[int, ...]) -> None:
        self.source = source
        self.version = source.version
        self.shown = shown
        self.first = first
        self.nodes = nodes


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class FirstCopiesView:
    """`primary_view`, kept up to date from event to event.

    The view it gives holds the same free GPUs, in the same free-count
    buckets in the same order, and the same running states (in the engine's
    order, field for field) as `primary_view` builds. It is one view object
    for the whole run, which logs its own running jobs' changes as an
    engine does (`ClusterView.running_changes_since`), one decision per call.
    """

    def __init__(self, topology: Topology) -> None:
        self._allocation = Allocation(topology)
        self._jobs: dict[str, _Shown] = {}
        self._running: dict[str, JobState] = {}
        self._forked: set[str] = set()  # running jobs with more than one copy
        # A fresh build allocates the running jobs one after another, and each moves the nodes
        # it reaches to the end of their new buckets, in the order its GPUs first reach them:
        # a node stands where its last move put it. So each bucket holds its nodes in the order
        # of a key: where the node last appears in the running jobs' node sequence (a job's
        # stamp, rising with its place in the engine's order, times the node count, plus the
        # node's place among the job's), or for a node no job holds, its place in an empty
        # allocation's order less the node count (before every held node).
        self._stamps: dict[str, int] = {}
        self._next_stamp = 0
        self._claimed: dict[str, tuple[int, ...]] = {}  # the nodes each job has keys on
        self._claims: list[dict[str, int]] = [{} for _ in range(topology.n_nodes)]
        n_nodes = topology.n_nodes
        self._unheld_key = [0] * n_nodes
        for place, node in enumerate(self._allocation.node_order()):
            self._unheld_key[node] = place - n_nodes
        self._node_key = list(self._unheld_key)
        self._run_start: dict[str, float] = {}
        self._mark: tuple[int, int] | None = None  # the engine view's, when last brought up to date
        self._shown: ClusterView | None = None

    def __reduce__(self) -> tuple[type, tuple[Topology]]:
        # Pickled mid-run as a new one: all it keeps is a cache of the engine's running jobs
        # (rebuilt in full at the next `view`, the same view), and the view it gives holds the
        # engine's queue, which is not its to pickle.
        return FirstCopiesView, (self._allocation.topology,)

    @property
    def forked(self) -> Set[str]:
        """The running jobs with more than one copy, as the last `view` found them."""
        return self._forked

    def view(self, view: ClusterView, run_start: Mapping[str, float]) -> ClusterView:
        """``view`` with every forked job on its first copy (``view`` itself if none is forked).

        ``run_start``: when the runs of jobs restarted for their copies began.
        """
        shown = self._shown
        if shown is None:
            shown = self._shown = ClusterView(view.topology, self._allocation, {}, self._running, view.perf)
            shown.keeps_changes = True
        shown.decided()
        changes = view.running_changes_since(self._mark)
        self._mark = view.change_mark
        if changes is None:  # not logged: every running job is compared with what it shows
            redo = {job_id for job_id, state in view.running.items()
                    if (known := self._jobs.get(job_id)) is None
                    or known.source is not state or known.version != state.version}
            redo.update(self._jobs.keys() - view.running.keys())
        else:
            redo = set(changes)
        restarted: set[str] = set()
        if run_start != self._run_start:
            restarted = {job_id for job_id, _ in run_start.items() ^ self._run_start.items()}
            redo |= restarted
            self._run_start = dict(run_start)
        if redo:
            self._update(view.running, run_start, redo, restarted, shown.running_changed)
        if not run_start and not self._forked:
            return view
        shown.pending = view.pending  # the engine's queue as it is: the view only reads it
        shown.perf = view.perf
        shown.now = view.now
        return shown

    def _update(self, running: Mapping[str, JobState], run_start: Mapping[str, float],
                redo: set[str], restarted: set[str], changed_log: list[str]) -> None:
        """Redo the jobs of ``redo`` whose state changed or that were ``restarted``, and their GPUs.

        Each job redone is named in ``changed_log``.
        """
        jobs, allocation = self._jobs, self._allocation
        gone: list[str] = []
        renewed: list[tuple[str, _Shown]] = []
        for job_id in sorted(redo):  # sorted: the same order in any process
            state = state_of(running, job_id)
            known = jobs.get(job_id)
            if state is None:
                if known is not None:
                    gone.append(job_id)
            elif (known is None or known.source is not state or known.version != state.version
                  or job_id in restarted):
                renewed.append((job_id, self._made(state, run_start.get(job_id))))
        if not gone and not renewed:
            return
        moved: list[int] = []  # nodes to re-rank: their free count or their key changes
        reclaimed: list[str] = []  # jobs whose places in the node sequence change
        dirty: list[int] = []  # nodes whose key may change
        # Release first (a GPU may pass to another job).
        for job_id in gone:
            known = jobs.pop(job_id)
            allocation.release(known.first)
            moved.extend(known.nodes)
            del self._running[job_id]
            self._forked.discard(job_id)
            self._stamps.pop(job_id, None)
            dirty.extend(self._unclaim(job_id))
            changed_log.append(job_id)
        moves = [(job_id, made) for job_id, made in renewed
                 if job_id not in jobs or made.first != jobs[job_id].first]
        for job_id, _ in moves:
            if job_id in jobs:
                allocation.release(jobs[job_id].first)
                moved.extend(jobs[job_id].nodes)
        for job_id, made in moves:
            allocation.allocate(job_id, made.first)
            moved.extend(made.nodes)
        for job_id, made in renewed:
            known = jobs.get(job_id)
            if known is None or known.nodes != made.nodes:
                reclaimed.append(job_id)
            jobs[job_id] = made
            self._running[job_id] = made.shown
            if made.source.copies > 1:
                self._forked.add(job_id)
            else:
                self._forked.discard(job_id)
            changed_log.append(job_id)
        # A job started anew goes last in the engine's order; every such job has changed, so
        # they are the engine's last jobs, all in ``redo``: those are put last, in its order.
        last: list[str] = []
        # (A view's running jobs are a dict behind a read-only proxy, which reverses.)
        for job_id in reversed(cast("Reversible[str]", running.keys())):
            if job_id not in redo:
                break
            last.append(job_id)
        for job_id in reversed(last):
            made = jobs.pop(job_id)
            jobs[job_id] = made
            del self._running[job_id]
            self._running[job_id] = made.shown
            self._stamps[job_id] = self._next_stamp
            self._next_stamp += 1
            reclaimed.append(job_id)
        n_nodes = len(self._claims)
        for job_id in dict.fromkeys(reclaimed):
            dirty.extend(self._unclaim(job_id))
            stamp = self._stamps.get(job_id)
            if stamp is None:
                stamp = self._stamps[job_id] = self._next_stamp
                self._next_stamp += 1
            nodes = self._claimed[job_id] = jobs[job_id].nodes
            for place, node in enumerate(nodes):
                self._claims[node][job_id] = stamp * n_nodes + place
            dirty.extend(nodes)
        for node in dirty:
            key = max(self._claims[node].values(), default=self._unheld_key[node])
            if key != self._node_key[node]:
                self._node_key[node] = key
                moved.append(node)
        if moved:
            allocation.rerank(set(moved), self._node_key)

    def _unclaim(self, job_id: str) -> tuple[int, ...]:
        """Take the job's keys off its nodes; those nodes."""
        nodes = self._claimed.pop(job_id, ())
        for node in nodes:
            del self._claims[node][job_id]
        return nodes

    def _made(self, state: JobState, start: float | None) -> _Shown:
        shown = state
        if state.copies > 1 or start is not None:
            shown = state.copy()
            shown.gpu_ids = state.gpu_ids[:state.job.n_gpus]
            shown.copies = 1
            if start is not None:
                shown.run_start = start
        node_of = self._allocation.topology.gpu_node
        first = shown.gpu_ids
        return _Shown(state, shown, first, tuple(dict.fromkeys([node_of[gpu] for gpu in first])))
