"""`QueueOrder` against the dict it mirrors, and `ClusterView.queued` reading it."""

from __future__ import annotations

from itertools import islice
from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.queue_order import QueueOrder
from rackwise.engine.view import ClusterView
from rackwise.perf.base import IdealPerf
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

STATES = {name: JobState(Job(name, 0.0, 1, 10.0)) for name in "abcdefgh"}

# (what, job, how many to read): enter or leave a job (ignored where it is already in or
# out), or read the first few from the front.
_OPS = st.lists(st.tuples(st.sampled_from(("enter", "leave", "read")), st.sampled_from(sorted(STATES)),
                          st.integers(0, 4)), max_size=60)


@given(_OPS)
def test_the_order_reads_as_the_dict_does(ops: list[tuple[str, str, int]]) -> None:
    order, queue = QueueOrder(), {}
    for what, name, k in ops:
        if what == "enter" and name not in queue:
            queue[name] = STATES[name]
            order.enter(STATES[name])
        elif what == "leave" and name in queue:
            del queue[name]
            order.leave(name)
        elif what == "read":
            assert list(islice(order.read(queue), k)) == list(islice(queue.values(), k))
        assert len(order) == len(queue)
        assert list(order.read(queue)) == list(queue.values())


@pytest.mark.parametrize("seed", range(3))
def test_a_long_queue_compacted_as_jobs_leave_and_return(seed: int) -> None:
    """3,000 jobs; jobs leave, from the front mostly, some return, and the front is read after
    each change: past a thousand departures the entries of jobs that left are dropped."""
    random = Random(seed)
    states = [JobState(Job(f"j{i:04d}", 0.0, 1, 10.0)) for i in range(3_000)]
    order, queue = QueueOrder(), {}
    for state in states:
        order.enter(state)
        queue[state.job_id] = state
    for step in range(2_900):
        waiting = list(islice(queue, 8))
        job_id = waiting[0] if random.random() < 0.7 else random.choice(list(queue))
        order.leave(job_id)
        del queue[job_id]
        if random.random() < 0.05:  # it returns, to the back
            order.enter(states[int(job_id[1:])])
            queue[job_id] = states[int(job_id[1:])]
        assert list(islice(order.read(queue), 3)) == list(islice(queue.values(), 3))
        if step % 97 == 0:
            assert list(order.read(queue)) == list(queue.values())
    assert list(order.read(queue)) == list(queue.values()) and len(order) == len(queue)


def test_jobs_leaving_behind_the_front_are_skipped_then_dropped() -> None:
    """Jobs leave from the back after a read of the front: the first jobs stay first, read
    past the entries of those that left until these are dropped."""
    states = [JobState(Job(f"j{i:04d}", 0.0, 1, 10.0)) for i in range(300)]
    order, queue = QueueOrder(), {}
    for state in states:
        order.enter(state)
        queue[state.job_id] = state
    assert next(order.read(queue)) is states[0]
    for state in states[299:9:-3]:
        order.leave(state.job_id)
        del queue[state.job_id]
        assert list(order.read(queue)) == list(queue.values())
    order.enter(states[299])
    queue[states[299].job_id] = states[299]
    assert list(order.read(queue)) == list(queue.values())


def test_the_view_reads_the_dict_when_it_was_changed_behind_the_orders_back() -> None:
    topology = uniform_cluster(1, gpus_per_node=2)
    pending, order = {}, QueueOrder()
    view = ClusterView(topology, Allocation(topology), pending, {}, IdealPerf(), order)
    for name in "abc":
        pending[name] = STATES[name]
        order.enter(STATES[name])
    order.leave("a")
    del pending["a"]
    assert list(view.queued()) == [STATES["b"], STATES["c"]]
    pending["d"] = STATES["d"]  # not entered: the order no longer mirrors the dict
    assert list(view.queued()) == [STATES["b"], STATES["c"], STATES["d"]]
    assert list(ClusterView(topology, Allocation(topology), pending, {}, IdealPerf()).queued()) == list(
        pending.values())
