"""Hadar's decisions keep a running job where it runs when its plan has the same shape (rule (iv))."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.cluster.allocation import Allocation
from rackwise.engine.view import ClusterView
from rackwise.perf.base import IdealPerf
from rackwise.policies.hadar import Hadar
from rackwise.policies.parts.hadar_planning import Layout, current_layout
from rackwise.workload.state import JobState, Status

from .hetero_support import cluster, job

# Two V100 nodes (0, 1) and two K80 nodes (2, 3), four GPUs each.
TOPOLOGY = cluster(("v100", 2, 4), ("k80", 2, 4))


class _Cluster:
    """Running and waiting jobs on TOPOLOGY, and a Hadar planner reset on them."""

    def __init__(self) -> None:
        self.allocation = Allocation(TOPOLOGY)
        self.pending: dict[str, JobState] = {}
        self.running: dict[str, JobState] = {}
        self.view = ClusterView(TOPOLOGY, self.allocation, self.pending, self.running, IdealPerf())
        self.policy = Hadar()
        self.policy.reset(self.view, np.random.default_rng(0))

    def run(self, job_id: str, gpu_ids: tuple[int, ...], copies: int = 1) -> JobState:
        state = JobState(job(job_id, "resnet50", 100.0, n_gpus=len(gpu_ids) // copies))
        state.status, state.gpu_ids, state.copies = Status.RUNNING, gpu_ids, copies
        self.allocation.allocate(job_id, gpu_ids)
        self.running[job_id] = state
        return state

    def wait(self, job_id: str, n_gpus: int) -> JobState:
        state = self.pending[job_id] = JobState(job(job_id, "resnet50", 100.0, n_gpus=n_gpus))
        return state

    def decide(self, layouts: dict[str, Layout]):  # type: ignore[no-untyped-def]
        active = [*self.pending.values(), *self.running.values()]
        return self.policy.planner._decide(self.view, active, dict(layouts))


def test_a_running_job_planned_on_another_node_of_its_type_keeps_its_gpus() -> None:
    c = _Cluster()
    c.run("a", (4, 5))  # node 1
    decisions = c.decide({"a": (((0, 2),),)})  # planned on node 0: same type, same GPUs
    assert decisions.preempt == () and decisions.start == ()


def test_a_running_job_planned_on_another_type_moves() -> None:
    c = _Cluster()
    c.run("a", (8, 9))  # node 2, a K80 node
    decisions = c.decide({"a": (((0, 2),),)})
    assert decisions.preempt == ("a",)
    assert [(s.job_id, s.gpu_ids) for s in decisions.start] == [("a", (0, 1))]


def test_a_running_job_planned_on_fewer_nodes_moves() -> None:
    c = _Cluster()
    c.run("a", (0, 1, 4, 5))  # two GPUs on each V100 node
    decisions = c.decide({"a": (((1, 4),),)})
    assert decisions.preempt == ("a",)
    assert [(s.job_id, s.gpu_ids) for s in decisions.start] == [("a", (4, 5, 6, 7))]


def test_a_job_whose_planned_node_holds_a_kept_job_starts_on_another_node_of_its_type() -> None:
    c = _Cluster()
    c.run("a", (0, 1, 2))  # node 0, planned on node 1 below: kept on node 0
    c.wait("b", 2)
    decisions = c.decide({"a": (((1, 3),),), "b": (((0, 2),),)})  # b planned where a still runs
    assert decisions.preempt == ()
    assert [(s.job_id, s.gpu_ids) for s in decisions.start] == [("b", (4, 5))]


def test_a_take_no_node_has_room_for_moves_the_kept_jobs_off_one_node() -> None:
    c = _Cluster()
    c.run("a", (0, 1))  # node 0, planned on node 1
    c.run("b", (4, 5))  # node 1, planned on node 0
    c.wait("w", 4)  # a whole V100 node: neither has room while both stay
    decisions = c.decide({"a": (((1, 2),),), "b": (((0, 2),),), "w": (((1, 4),),)})
    # The roomiest V100 node is node 0 (lowest id on a tie): its kept job "a" moves, to node 1.
    assert decisions.preempt == ("a",)
    starts = {s.job_id: s.gpu_ids for s in decisions.start}
    assert starts == {"w": (0, 1, 2, 3), "a": (6, 7)}


def test_a_layout_unchanged_is_neither_preempted_nor_started() -> None:
    c = _Cluster()
    c.run("a", (4, 5))
    decisions = c.decide({"a": (((1, 2),),)})
    assert decisions.preempt == () and decisions.start == ()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_decisions_give_every_job_its_planned_shape_and_no_gpu_twice(data: st.DataObject) -> None:
    """Any feasible plan over any running jobs: each started job gets its planned types and
    GPUs per node, every running job not started again keeps its GPUs (planned in its shape,
    or unplanned and preempted), and no GPU goes to two jobs."""
    c = _Cluster()
    loads = [0] * TOPOLOGY.n_nodes  # the plan's GPUs per node
    layouts: dict[str, Layout] = {}
    free_gpus = list(range(TOPOLOGY.n_gpus))
    for k in range(data.draw(st.integers(0, 6))):
        job_id = f"r{k}"
        n = data.draw(st.integers(1, 3))
        if len(free_gpus) < n:
            break
        gpus = tuple(sorted(data.draw(st.permutations(free_gpus))[:n]))
        free_gpus = [g for g in free_gpus if g not in gpus]
        c.run(job_id, gpus)
    for k in range(data.draw(st.integers(0, 4))):
        c.wait(f"w{k}", data.draw(st.integers(1, 4)))
    for state in [*c.running.values(), *c.pending.values()]:
        if not data.draw(st.booleans()):
            continue
        take: list[tuple[int, int]] = []
        need = state.job.n_gpus
        for node in data.draw(st.permutations(range(TOPOLOGY.n_nodes))):
            k = min(need, TOPOLOGY.nodes[node].n_gpus - loads[node])
            if k > 0:
                take.append((node, k))
                need -= k
            if need == 0:
                break
        if need:
            continue  # the plan has no room for it
        for node, k in take:
            loads[node] += k
        layouts[state.job_id] = (tuple(sorted(take)),)
    decisions = c.decide(layouts)
    planner = c.policy.planner
    started = {s.job_id: s.gpu_ids for s in decisions.start}
    preempted = set(decisions.preempt)
    held: dict[int, str] = {}
    for job_id, state in c.running.items():
        if job_id in preempted:
            continue
        assert job_id not in started
        if job_id in layouts:
            assert planner._shape(layouts[job_id]) == planner._shape(current_layout(TOPOLOGY.gpu_node, state))
        held.update(dict.fromkeys(state.gpu_ids, job_id))
    for job_id in layouts:
        assert job_id in started or (job_id in c.running and job_id not in preempted)
    for job_id, gpus in started.items():
        state = c.running.get(job_id) or c.pending[job_id]
        moved = JobState(state.job)
        moved.gpu_ids, moved.copies = gpus, 1
        assert planner._shape(current_layout(TOPOLOGY.gpu_node, moved)) == planner._shape(layouts[job_id])
        for g in gpus:
            assert g not in held, f"GPU {g} given to {job_id} and {held.get(g)}"
            held[g] = job_id
    assert preempted <= set(c.running)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, TOPOLOGY.n_nodes - 1), st.integers(1, 4)),
                         min_size=1, max_size=3, unique_by=lambda e: e[0]), min_size=1, max_size=3))
def test_a_layouts_shape_is_its_copies_gpu_types_and_counts(copies: list[list[tuple[int, int]]]) -> None:
    """One copy on one node (built, not remembered) and any other layout (remembered) alike."""
    planner = _Cluster().policy.planner
    layout = tuple(tuple(sorted(take)) for take in copies)
    types = planner.node_type
    expected = sorted(sorted((types[node], n) for node, n in take) for take in layout)
    for _ in range(2):  # the second time from memory
        assert [list(copy) for copy in planner._shape(layout)] == expected
