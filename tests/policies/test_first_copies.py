"""`FirstCopiesView` kept between events equals `primary_view` built afresh at each.

Its engine either logs its running jobs' changes (as the simulator does) or not
(as a live backend); the view it gives logs its own.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import Node, Topology
from rackwise.engine.view import ClusterView
from rackwise.perf.base import IdealPerf
from rackwise.policies.parts.first_copies import FirstCopiesView
from rackwise.policies.parts.idle_copies import primary_view
from rackwise.workload.job import Job
from rackwise.workload.state import STATE_FIELDS, JobState, Status

# Nodes of unequal sizes, so that untouched nodes share buckets with touched ones.
SIZES = (4, 2, 4, 3, 4, 2)
TOPOLOGY = Topology(tuple(Node(i, i // 3, "v100", n, sum(SIZES[:i])) for i, n in enumerate(SIZES)))

# One event: (kind, job index, GPU count, copies, a number for the rest).
Event = tuple[str, int, int, int, float]
EVENTS = st.lists(st.tuples(st.sampled_from(["start", "stop", "rate", "restart", "run_start", "arrive"]),
                            st.integers(0, 7), st.integers(1, 5), st.integers(1, 3),
                            st.floats(0.0, 1e4, allow_nan=False)),
                  max_size=40)


class _Engine:
    """Just enough of an engine: an allocation, a queue, running jobs in start order, maybe a log."""

    def __init__(self, logs: bool = False) -> None:
        self.allocation = Allocation(TOPOLOGY)
        self.pending: dict[str, JobState] = {}
        self.running: dict[str, JobState] = {}
        self.run_start: dict[str, float] = {}
        self.view = ClusterView(TOPOLOGY, self.allocation, self.pending, self.running, IdealPerf())
        self.view.keeps_changes = logs

    def apply(self, event: Event) -> None:
        kind, index, n_gpus, copies, value = event
        job_id = f"j{index}"
        state = self.running.get(job_id)
        if kind == "arrive" and state is None and job_id not in self.pending:
            self.pending[job_id] = JobState(Job(job_id, value, n_gpus, 100.0))
        elif kind in ("start", "restart"):
            if kind == "restart" and state is not None:
                self._stop(state)
            waiting = self.pending.get(job_id)
            if waiting is not None:
                self._start(waiting, copies, value)
        elif kind == "stop" and state is not None:
            self._stop(state)
            self.run_start.pop(job_id, None)
        elif kind == "rate" and state is not None:
            state.rate_iters_per_s = value
            state.iters_done += 1.0
            state.version += 1
            self.view.running_changed.append(job_id)
        elif kind == "run_start" and state is not None:
            if job_id in self.run_start:
                del self.run_start[job_id]
            else:
                self.run_start[job_id] = value

    def _start(self, state: JobState, copies: int, now: float) -> None:
        n = state.job.n_gpus
        free = [gpu for node in range(TOPOLOGY.n_nodes) for gpu in self.allocation.free_gpu_ids(node)]
        copies = min(copies, len(free) // n)
        if copies == 0:
            return
        # Every other free GPU first, so copies and jobs interleave across nodes.
        gpus = tuple((free[::2] + free[1::2])[:n * copies])
        del self.pending[state.job_id]
        self.allocation.allocate(state.job_id, gpus)
        state.gpu_ids, state.copies, state.status = gpus, copies, Status.RUNNING
        state.run_start = state.last_update = now
        state.version += 1
        self.running[state.job_id] = state
        self.view.running_changed.append(state.job_id)

    def _stop(self, state: JobState) -> None:
        self.allocation.release(state.gpu_ids)
        del self.running[state.job_id]
        state.status, state.copies, state.version = Status.PENDING, 1, state.version + 1
        self.pending[state.job_id] = state
        self.view.running_changed.append(state.job_id)


def _picture(view: ClusterView) -> tuple[object, ...]:
    """Everything a decision can read of a view."""
    allocation = view._allocation
    states = [(job_id, [getattr(state, slot) for slot in STATE_FIELDS])
              for job_id, state in view.running.items()]
    return (allocation.owner, allocation.node_free, allocation.rack_free, allocation.n_free,
            [allocation.free_gpu_ids(node) for node in range(TOPOLOGY.n_nodes)],
            allocation.node_order(),
            [allocation.lowest_node_with(count) for count in range(TOPOLOGY.max_gpus_per_node + 1)],
            [allocation.tightest_node(n) for n in range(1, TOPOLOGY.max_gpus_per_node + 1)],
            states, list(view.pending), view.now)


def _shown_states(view: ClusterView) -> dict[str, tuple[int, int]]:
    return {job_id: (id(state), state.version) for job_id, state in view.running.items()}


@pytest.mark.parametrize("logs", [False, True], ids=["unlogged", "logged"])
@settings(max_examples=300, deadline=None)
@given(steps=st.lists(EVENTS, min_size=1, max_size=8))
def test_the_kept_view_equals_the_rebuilt_one_after_any_events(logs: bool, steps: list[list[Event]]) -> None:
    engine = _Engine(logs)
    kept = FirstCopiesView(TOPOLOGY)
    mark, before = None, {}
    for now, events in enumerate(steps):
        for event in events:
            engine.apply(event)
        engine.view.now = float(now)
        seen = kept.view(engine.view, engine.run_start)
        assert _picture(seen) == _picture(primary_view(engine.view, engine.run_start))
        engine.view.decided()
        if seen is not engine.view:  # its own log names every job it shows differently
            shown = _shown_states(seen)
            named = seen.running_changes_since(mark)
            if named is not None:
                assert {job_id for job_id in shown.keys() | before.keys()
                        if shown.get(job_id) != before.get(job_id)} <= set(named)
            mark, before = seen.change_mark, shown


def test_the_kept_view_logs_the_jobs_it_shows_anew() -> None:
    engine = _Engine(logs=True)
    for event in (("arrive", 0, 2, 1, 0.0), ("start", 0, 2, 3, 0.0), ("arrive", 1, 1, 1, 5.0),
                  ("start", 1, 1, 1, 5.0)):
        engine.apply(event)
    kept = FirstCopiesView(TOPOLOGY)
    first = kept.view(engine.view, engine.run_start)
    mark = first.change_mark
    engine.view.decided()
    engine.apply(("rate", 0, 0, 0, 3.0))
    second = kept.view(engine.view, engine.run_start)
    assert second is first
    assert second.running_changes_since(mark) == ["j0"]
    assert second.running_changes_since(None) is None
    assert second.running["j0"].rate_iters_per_s == 3.0


def test_without_copies_or_restarts_the_engine_view_is_shown() -> None:
    engine = _Engine()
    engine.apply(("arrive", 0, 2, 1, 0.0))
    engine.apply(("start", 0, 2, 1, 0.0))
    assert FirstCopiesView(TOPOLOGY).view(engine.view, {}) is engine.view


def test_nothing_is_redone_when_nothing_ran_differently() -> None:
    engine = _Engine()
    for event in (("arrive", 0, 2, 1, 0.0), ("start", 0, 2, 3, 0.0), ("arrive", 1, 1, 1, 5.0)):
        engine.apply(event)
    kept = FirstCopiesView(TOPOLOGY)
    first = kept.view(engine.view, engine.run_start)
    engine.apply(("arrive", 2, 1, 1, 6.0))  # only the queue changes
    second = kept.view(engine.view, engine.run_start)
    assert second.running["j0"] is first.running["j0"]  # the same copy of the forked job's state
    assert second.running["j0"].gpu_ids == engine.running["j0"].gpu_ids[:2]
    assert list(second.pending) == ["j1", "j2"]


def test_pickled_mid_run_it_gives_the_same_view() -> None:
    engine = _Engine(logs=True)
    for event in (("arrive", 0, 2, 1, 0.0), ("start", 0, 2, 3, 0.0), ("arrive", 1, 1, 1, 5.0),
                  ("start", 1, 1, 1, 5.0), ("run_start", 1, 0, 0, 2.0)):
        engine.apply(event)
    kept = FirstCopiesView(TOPOLOGY)
    kept.view(engine.view, engine.run_start)
    engine.view.decided()
    engine.apply(("rate", 0, 0, 0, 3.0))
    restored = pickle.loads(pickle.dumps(kept))
    assert _picture(restored.view(engine.view, engine.run_start)) == _picture(
        primary_view(engine.view, engine.run_start))
    assert restored.forked == {"j0"}
