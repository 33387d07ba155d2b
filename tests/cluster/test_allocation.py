"""Tests for rackwise.cluster.allocation: the live table and the tentative overlay.

A state machine drives an `Allocation` (and, on top of it, a
`TentativeAllocation`) with random allocations, releases, takes and gives,
and checks every answer against a naive model: a dict from GPU to owner.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rackwise.cluster.allocation import Allocation, TentativeAllocation
from rackwise.cluster.topology import Topology, uniform_cluster
from strategies import topologies


def _check_free_queries(free: Allocation | TentativeAllocation, topology: Topology,
                        is_free: dict[int, bool]) -> None:
    """Compare every read-only query of ``free`` with a naive GPU -> free map."""
    assert free.n_free == sum(is_free.values())
    node_free = []
    for node in topology.nodes:
        expected_ids = [g for g in node.gpu_ids if is_free[g]]
        assert free.free_gpu_ids(node.node_id) == expected_ids  # ascending: gpu_ids is a range
        assert free.free_in_node(node.node_id) == len(expected_ids)
        node_free.append(len(expected_ids))
    rack_free = [sum(node_free[n] for n in nodes) for nodes in topology.rack_nodes]
    for rack, count in enumerate(rack_free):
        assert free.free_in_rack(rack) == count
    if isinstance(free, TentativeAllocation):
        assert free.most_free_in_a_rack() == max(rack_free)
    for n_gpus in range(1, topology.max_gpus_per_node + 2):
        fitting = [count for count in node_free if count >= n_gpus]
        node = free.tightest_node(n_gpus)
        if not fitting:
            assert node is None
        else:
            assert node is not None
            assert node_free[node] == min(fitting)
    for count in range(topology.max_gpus_per_node + 2):
        with_count = [node for node, free_gpus in enumerate(node_free) if free_gpus == count]
        assert free.lowest_node_with(count) == (with_count[0] if with_count else None)


class AllocationMachine(RuleBasedStateMachine):
    """Random allocate/release on the live table, take/give on an overlay."""

    @initialize(topology=topologies())
    def setup(self, topology: Topology) -> None:
        self.topology = topology
        self.alloc = Allocation(topology)
        self.owner: dict[int, str | None] = dict.fromkeys(range(topology.n_gpus))
        self.n_jobs = 0
        self.overlay: TentativeAllocation | None = None
        self.overlay_free: dict[int, bool] = {}

    # ---------------------------------------------------------------- live table
    def _drop_overlay(self) -> None:
        # an overlay is valid only while its base stays unchanged
        self.overlay = None
        self.overlay_free = {}

    @precondition(lambda self: any(o is None for o in self.owner.values()))
    @rule(data=st.data())
    def allocate(self, data: st.DataObject) -> None:
        free = sorted(g for g, o in self.owner.items() if o is None)
        gpus = data.draw(st.lists(st.sampled_from(free), min_size=1, unique=True), label="gpus")
        job_id = f"job{self.n_jobs}"
        self.n_jobs += 1
        self.alloc.allocate(job_id, gpus)
        for gpu in gpus:
            self.owner[gpu] = job_id
        self._drop_overlay()

    @precondition(lambda self: any(o is not None for o in self.owner.values()))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        jobs = sorted({o for o in self.owner.values() if o is not None})
        job_id = data.draw(st.sampled_from(jobs), label="job")
        held = sorted(g for g, o in self.owner.items() if o == job_id)
        gpus = data.draw(st.lists(st.sampled_from(held), min_size=1, unique=True), label="gpus")
        self.alloc.release(gpus)
        for gpu in gpus:
            self.owner[gpu] = None
        self._drop_overlay()

    # ------------------------------------------------------------------- overlay
    @rule()
    def new_overlay(self) -> None:
        self.overlay = TentativeAllocation(self.alloc)
        self.overlay_free = {g: o is None for g, o in self.owner.items()}

    @precondition(lambda self: self.overlay is not None and any(self.overlay_free.values()))
    @rule(data=st.data())
    def take(self, data: st.DataObject) -> None:
        assert self.overlay is not None
        free = sorted(g for g, f in self.overlay_free.items() if f)
        gpus = data.draw(st.lists(st.sampled_from(free), min_size=1, unique=True), label="gpus")
        self.overlay.take(gpus)
        for gpu in gpus:
            self.overlay_free[gpu] = False

    @precondition(lambda self: self.overlay is not None and not all(self.overlay_free.values()))
    @rule(data=st.data())
    def give(self, data: st.DataObject) -> None:
        assert self.overlay is not None
        used = sorted(g for g, f in self.overlay_free.items() if not f)
        gpus = data.draw(st.lists(st.sampled_from(used), min_size=1, unique=True), label="gpus")
        self.overlay.give(gpus)
        for gpu in gpus:
            self.overlay_free[gpu] = True

    @precondition(lambda self: self.overlay is not None and not all(self.overlay_free.values()))
    @rule(data=st.data())
    def take_used_is_refused(self, data: st.DataObject) -> None:
        assert self.overlay is not None
        used = sorted(g for g, f in self.overlay_free.items() if not f)
        gpu = data.draw(st.sampled_from(used), label="gpu")
        with pytest.raises(ValueError, match=f"GPU {gpu} is not free"):
            self.overlay.take([gpu])

    @precondition(lambda self: self.overlay is not None and any(self.overlay_free.values()))
    @rule(data=st.data())
    def give_free_is_refused(self, data: st.DataObject) -> None:
        assert self.overlay is not None
        free = sorted(g for g, f in self.overlay_free.items() if f)
        gpu = data.draw(st.sampled_from(free), label="gpu")
        with pytest.raises(ValueError, match=f"GPU {gpu} is already free"):
            self.overlay.give([gpu])

    # ---------------------------------------------------------------- invariants
    @invariant()
    def live_table_matches_model(self) -> None:
        assert self.alloc.owner == [self.owner[g] for g in range(self.topology.n_gpus)]
        _check_free_queries(self.alloc, self.topology, {g: o is None for g, o in self.owner.items()})

    @invariant()
    def free_plus_allocated_is_capacity(self) -> None:
        for node in self.topology.nodes:
            held = sum(self.owner[g] is not None for g in node.gpu_ids)
            assert self.alloc.free_in_node(node.node_id) + held == node.n_gpus
        for rack, nodes in enumerate(self.topology.rack_nodes):
            held = sum(self.owner[g] is not None for n in nodes for g in self.topology.nodes[n].gpu_ids)
            assert self.alloc.free_in_rack(rack) + held == self.topology.rack_capacity[rack]

    @invariant()
    def nodes_bucketed_by_free_count(self) -> None:
        for count in range(self.topology.max_gpus_per_node + 1):
            expected = {n.node_id for n in self.topology.nodes
                        if self.alloc.free_in_node(n.node_id) == count}
            assert set(self.alloc.nodes_with_free(count)) == expected

    @invariant()
    def overlay_matches_model(self) -> None:
        # the live table was checked against the model above, and overlay
        # rules never touch the model's owners: so the base is unchanged
        if self.overlay is not None:
            _check_free_queries(self.overlay, self.topology, self.overlay_free)
            for gpu, free in self.overlay_free.items():
                assert self.overlay.is_free(gpu) == free


TestAllocationMachine = AllocationMachine.TestCase


# ------------------------------------------------------------------------------ examples


def test_tightest_node_prefers_the_fullest_fitting_node() -> None:
    """With 4, 1 and 3 GPUs free, a 2-GPU job's tightest node is the one with 3 free."""
    alloc = Allocation(uniform_cluster(3, gpus_per_node=4))
    alloc.allocate("a", [4, 5, 6])
    alloc.allocate("b", [8])
    assert alloc.tightest_node(2) == 2
    assert alloc.tightest_node(1) == 1
    assert alloc.tightest_node(4) == 0
    assert alloc.tightest_node(5) is None


def test_release_keeps_free_ids_sorted() -> None:
    """GPUs released out of order come back in ascending order."""
    alloc = Allocation(uniform_cluster(1, gpus_per_node=4))
    alloc.allocate("a", [0, 1, 2, 3])
    alloc.release([3, 0, 2])
    assert alloc.free_gpu_ids(0) == [0, 2, 3]
    assert alloc.owner == [None, "a", None, None]


def test_overlay_take_then_give_back_restores_counts() -> None:
    """Taking and giving the same GPUs leaves the overlay's counts where they started."""
    alloc = Allocation(uniform_cluster(2, gpus_per_node=2))
    alloc.allocate("a", [0])
    overlay = TentativeAllocation(alloc)
    overlay.take([1, 2])
    assert (overlay.n_free, overlay.free_in_node(0), overlay.free_in_node(1)) == (1, 0, 1)
    overlay.give([0])
    assert overlay.free_gpu_ids(0) == [0]
    assert alloc.owner == ["a", None, None, None] and alloc.n_free == 3
    overlay.give([1, 2])
    overlay.take([0])
    assert (overlay.n_free, overlay.free_in_node(0), overlay.free_in_rack(0)) == (3, 1, 3)
    assert overlay.free_gpu_ids(0) == [1]


@given(data=st.data())
def test_an_overlay_that_buckets_touched_nodes_answers_as_one_that_scans_them(
        data: st.DataObject) -> None:
    """Past a number of touched nodes an overlay keeps them by free count; same answers."""
    from unittest import mock

    from rackwise.cluster import allocation as module

    topology = uniform_cluster(48, 4, 8)
    base = Allocation(topology)
    held = data.draw(st.lists(st.integers(0, topology.n_gpus - 1), unique=True), label="held")
    if held:
        base.allocate("held", held)
    with mock.patch.object(module, "_BUCKET_TOUCHED_FROM", 0):
        bucketed = TentativeAllocation(base)
    scanning = TentativeAllocation(base)
    is_free = {g: base.owner[g] is None for g in range(topology.n_gpus)}
    for _ in range(data.draw(st.integers(1, 60), label="steps")):
        gpu = data.draw(st.integers(0, topology.n_gpus - 1), label="gpu")
        with mock.patch.object(module, "_BUCKET_TOUCHED_FROM", 0):
            (bucketed.give if not is_free[gpu] else bucketed.take)([gpu])
        with mock.patch.object(module, "_BUCKET_TOUCHED_FROM", 10**9):
            (scanning.give if not is_free[gpu] else scanning.take)([gpu])
        is_free[gpu] = not is_free[gpu]
        assert bucketed.free_counts() == scanning.free_counts()
        for n_gpus in range(1, 6):
            assert bucketed.tightest_node(n_gpus) == scanning.tightest_node(n_gpus)
        counts = scanning.free_counts()
        for count in range(6):
            lowest = counts.index(count) if count in counts else None
            assert bucketed.lowest_node_with(count) == scanning.lowest_node_with(count) == lowest
    for free in (base, bucketed, scanning):
        with_free = [(node, count) for node, count in enumerate(free.free_counts()) if count]
        assert sorted(free.free_nodes()) == with_free


def test_node_order_round_trips() -> None:
    """A copy given the original's node order picks the same tightest node."""
    topology = uniform_cluster(6, 4, 3)
    original, copy = Allocation(topology), Allocation(topology)
    original.allocate("b", [4])  # node 1, then node 0, drop to 3 free GPUs
    original.allocate("a", [0])
    copy.allocate("a", [0])  # the same state, reached in the other order
    copy.allocate("b", [4])
    assert copy.free_counts() == original.free_counts()
    assert copy.tightest_node(3) != original.tightest_node(3)
    copy.set_node_order(original.node_order())
    assert copy.node_order() == original.node_order()
    assert copy.tightest_node(3) == original.tightest_node(3)


@given(held=st.lists(st.integers(0, 23), max_size=24, unique=True), ranks=st.permutations(range(12)),
       moved=st.sets(st.integers(0, 11)), new_ranks=st.lists(st.integers(-20, 40), min_size=12, max_size=12))
def test_rerank_puts_the_moved_nodes_where_a_full_reorder_would(
        held: list[int], ranks: list[int], moved: set[int], new_ranks: list[int]) -> None:
    """Buckets in rank order, some nodes given new ranks or moved: `rerank` of those = a full reorder."""
    topology = uniform_cluster(12, 2, 4)  # 12 nodes of 2 GPUs
    kept, rebuilt = Allocation(topology), Allocation(topology)
    for allocation in (kept, rebuilt):
        allocation.allocate("a", held[: len(held) // 2])
        allocation.set_node_order(sorted(range(12), key=ranks.__getitem__))
    rank = [new_ranks[node] * 100 + node if node in moved else ranks[node] * 100 for node in range(12)]
    for allocation in (kept, rebuilt):  # a moved node may change bucket too
        gpus = [gpu for gpu in held[len(held) // 2:] if topology.gpu_node[gpu] in moved]
        allocation.allocate("b", gpus)
    kept.rerank(moved, rank)
    rebuilt.set_node_order(sorted(range(12), key=rank.__getitem__))
    assert kept.node_order() == rebuilt.node_order()
