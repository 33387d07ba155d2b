"""Copies of jobs on the GPUs an event-driven policy leaves idle (HadarE's forking, `parts.forking`).

A round-based planner (``hadare``) lays out every job afresh each round and
forks within that layout. An event-driven policy (``combined``) decides
once per event from what runs; to fork after it:

1. it decides from `primary_view` (`IdleCopies.primary` keeps it between
   events), where every forked job holds only its first copy, so copies
   never stand in the way of its own starts, and a job restarted for its
   copies shows when its run began (so a rule such as "runs a minute
   before it can be preempted" is not reset by copies);
2. `IdleCopies.apply` then sheds the copies whose GPUs those starts took,
   and hands the GPUs still idle to copies, in the policy's order: to jobs
   started now at any event, to running jobs only at a sync (every
   ``sync_s``), since adding a copy restarts the job.

A running job whose copies change is preempted and started again at once
(a restart: its checkpoint is restored), as HadarE's are at a round.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import Allocation, TentativeAllocation
from rackwise.engine.contract import Decisions, Start
from rackwise.engine.view import ClusterView
from rackwise.policies.parts.first_copies import FirstCopiesView
from rackwise.policies.parts.fork_parameters import ForkParameters
from rackwise.policies.parts.forking import Forkable, Tiers, add_copies, widest_of_type
from rackwise.policies.parts.hadar_planning import Layout
from rackwise.policies.parts.primal_dual import PriceBook
from rackwise.workload.state import RUNNING, JobState, state_of

Blocks = list[tuple[int, ...]]  # GPU ids of each copy, the first copy first


def primary_view(view: ClusterView, run_start: Mapping[str, float]) -> ClusterView:
    """The view with every forked job shown on its first copy only (the others' GPUs free).

    ``run_start``: when the runs of jobs restarted for their copies began.
    """
    if not run_start and all(state.copies == 1 for state in view.running.values()):
        return view
    allocation = Allocation(view.topology)
    running: dict[str, JobState] = {}
    for job_id, state in view.running.items():
        if state.copies > 1 or job_id in run_start:
            state = state.copy()
            state.gpu_ids = state.gpu_ids[:state.job.n_gpus]
            state.copies = 1
            state.run_start = run_start.get(job_id, state.run_start)
        allocation.allocate(job_id, state.gpu_ids)
        running[job_id] = state
    seen = ClusterView(view.topology, allocation, dict(view.pending), running, view.perf)
    seen.now = view.now
    return seen


def copy_blocks(state: JobState) -> Blocks:
    """A running job's GPUs, one block per copy."""
    n = state.job.n_gpus
    return [state.gpu_ids[c * n:(c + 1) * n] for c in range(state.copies)]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class IdleCopies:
    """One run's forking after an event-driven policy's decisions.

    Args:
        params: The policy's `ForkParameters`.
        view: The run's first view, for its topology.
        node_type: Each node's GPU type, as an index.
        sync_s: Seconds between syncs of a forked job's copies (its models
            are averaged then); running jobs take new copies only then.
        spread_after_s: A copy that fits no node may span nodes
            (`Forkable.spread`) for a job that has run this long (None: never).
        one_rack: Such a copy takes nodes of one rack only.
    """

    def __init__(self, params: ForkParameters, view: ClusterView, node_type: Sequence[int],
                 sync_s: float, *, spread_after_s: float | None = None, one_rack: bool = True) -> None:
        topology = view.topology
        self._params = params
        self._node_type = list(node_type)
        self._capacity = [node.n_gpus for node in topology.nodes]
        self._widest = widest_of_type(self._capacity, self._node_type)
        self._book = PriceBook.flat(self._capacity, groups=self._node_type)  # reloaded by each `_fork`
        self._cap = params.max_copies if params.max_copies is not None else topology.n_nodes
        self._sync_s = sync_s
        self._spread_after_s = spread_after_s
        self._node_rack = [node.rack_id for node in topology.nodes] if one_rack else None
        self._next_sync = 0.0
        self._run_start: dict[str, float] = {}  # jobs restarted for copies: when their run began
        self._first_copies = FirstCopiesView(topology)

    @property
    def run_start(self) -> Mapping[str, float]:
        """When the runs of jobs restarted for their copies began (for `primary_view`)."""
        return self._run_start

    def primary(self, view: ClusterView) -> ClusterView:
        """`primary_view` of ``view`` with this run's restarts, kept from one event to the next."""
        return self._first_copies.view(view, self._run_start)

    def forget(self, job_id: str) -> None:
        """A job completed."""
        self._run_start.pop(job_id, None)

    def apply(self, view: ClusterView, decisions: Decisions, now: float,
              order: Callable[[list[str]], list[str]], tiers: Callable[[JobState], Tiers]) -> Decisions:
        """``decisions`` (made from `primary_view`) with copies shed and added on the real ``view``.

        ``order`` sorts job ids into the order copies are handed out;
        ``tiers`` gives a job's usable GPU types, fastest first. The decision's
        `primary` view was asked for first (it tells which jobs run as copies).
        """
        running = view.running
        preempted = set(decisions.preempt)
        if not decisions.start and now < self._next_sync:
            # No start to take a copy's GPUs, no job that may take a copy: only the wake changes.
            for job_id in preempted:
                self._run_start.pop(job_id, None)
            n_free = view.n_free + sum(len(running[job_id].gpu_ids) for job_id in preempted)
            if n_free and len(running) > len(preempted):  # idle GPUs: look again at the next sync
                at = decisions.wake_at
                return replace(decisions, wake_at=self._next_sync if at is None else min(at, self._next_sync))
            return decisions
        free = view.tentative()
        for job_id in decisions.preempt:
            free.give(running[job_id].gpu_ids)
        taken = {gpu for start in decisions.start for gpu in start.gpu_ids}
        # A start takes GPUs free in the primary view: idle, a preempted job's, or a copy's
        # (never a first copy's), so only the holders of those copies shed any.
        owners = view.owners
        shedding = {owners[gpu] for gpu in taken}
        blocks: dict[str, Blocks] = {}
        changed: set[str] = set()
        at_sync = now >= self._next_sync
        # Between syncs only the jobs started now take copies, so of the running jobs
        # only those with copies to shed need their blocks.
        forked = self._first_copies.forked
        for job_id, state in (running.items() if at_sync else
                              [(job_id, running[job_id]) for job_id in running if job_id in forked]):
            if job_id in preempted:
                continue
            if state.copies == 1:  # most jobs: nothing to shed
                blocks[job_id] = [state.gpu_ids]
                continue
            own = copy_blocks(state)
            if job_id not in shedding:
                blocks[job_id] = own
                continue
            kept = own[:1] + [block for block in own[1:] if taken.isdisjoint(block)]
            if len(kept) < len(own):
                changed.add(job_id)
                free.give([gpu for block in own[1:] if not taken.isdisjoint(block) for gpu in block])
            blocks[job_id] = kept
        started = {start.job_id: start for start in decisions.start}
        for start in decisions.start:
            free.take(start.gpu_ids)
            blocks[start.job_id] = [start.gpu_ids]
        if at_sync:
            self._next_sync = (math.floor(now / self._sync_s) + 1) * self._sync_s
        candidates = [job_id for job_id in blocks if at_sync or job_id in started]
        if free.n_free and candidates:
            states = {job_id: state_of(running, job_id) or view.pending[job_id] for job_id in candidates}
            grown = self._fork(free, blocks, order(candidates), states, tiers, now)
            changed.update(job_id for job_id in grown if job_id not in started)
        else:
            grown = set()
        for job_id in (*decisions.preempt, *started):
            self._run_start.pop(job_id, None)
        for job_id in changed:
            self._run_start.setdefault(job_id, running[job_id].run_start)
        starts = [start for start in decisions.start if start.job_id not in grown]
        starts += [_start(job_id, blocks[job_id]) for job_id in sorted(grown & started.keys())]
        starts += [_start(job_id, blocks[job_id]) for job_id in sorted(changed)]
        wake = decisions.wake_at
        if free.n_free and (started or len(running) > len(preempted)):  # idle GPUs: look again at the next sync
            wake = self._next_sync if wake is None else min(wake, self._next_sync)
        return replace(decisions, start=tuple(starts),
                       preempt=decisions.preempt + tuple(sorted(changed)), wake_at=wake)

    def _fork(self, free: TentativeAllocation, blocks: dict[str, Blocks], order: list[str],
              states: dict[str, JobState], tiers: Callable[[JobState], Tiers], now: float) -> set[str]:
        """Add copies on ``free``'s idle GPUs (taking them); the jobs that got any."""
        # Every copy takes its job's whole GPU count, and copies only take GPUs:
        # a job wider than the idle GPUs gets none, and leaves the others' as they are.
        n_free = free.n_free
        jobs = [Forkable(job_id, state.job.n_gpus, tiers(state), self._may_spread(state, now))
                for job_id in order if (state := states[job_id]).job.n_gpus <= n_free]
        if not jobs:
            return set()
        order = [job.job_id for job in jobs]
        book = self._book
        book.set_loads(0, [capacity - n_free for capacity, n_free in zip(self._capacity, free.free_counts())])
        gpu_node = free.topology.gpu_node
        layouts: dict[str, Layout] = {job_id: tuple(_take(block, gpu_node) for block in blocks[job_id])
                                      for job_id in order}
        before = {job_id: len(layout) for job_id, layout in layouts.items()}
        add_copies(book, jobs, layouts, self._params, self._cap, self._widest, node_rack=self._node_rack)
        grown: set[str] = set()
        for job_id in order:
            for take in layouts[job_id][before[job_id]:]:
                gpus: list[int] = []
                for node, k in take:
                    ids = free.free_gpu_ids(node)[:k]
                    free.take(ids)
                    gpus.extend(ids)
                blocks[job_id].append(tuple(gpus))
                grown.add(job_id)
        return grown

    def _may_spread(self, state: JobState, now: float) -> bool:
        """Whether the job has run long enough for its copies to span nodes."""
        if self._spread_after_s is None or state.status is not RUNNING:
            return False
        return now - self._run_start.get(state.job_id, state.run_start) >= self._spread_after_s


def _take(block: tuple[int, ...], gpu_node: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    node = gpu_node[block[0]]
    for gpu in block:
        if gpu_node[gpu] != node:
            break
    else:  # most copies: one node
        return ((node, len(block)),)
    counts: dict[int, int] = {}
    for gpu in block:
        counts[gpu_node[gpu]] = counts.get(gpu_node[gpu], 0) + 1
    return tuple(sorted(counts.items()))


def _start(job_id: str, blocks: Blocks) -> Start:
    return Start(job_id, tuple(gpu for block in blocks for gpu in block), copies=len(blocks))
