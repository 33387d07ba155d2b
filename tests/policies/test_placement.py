"""Tests for rackwise.policies.parts.placement: which free GPUs a job gets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackwise.cluster.allocation import Allocation, FreeGpus, TentativeAllocation
from rackwise.cluster.topology import Topology, uniform_cluster
from rackwise.errors import UnknownNameError
from rackwise.policies.parts.placement import PLACEMENTS, best_fit, consolidated, first_fit, get_placement, random_gpus
from strategies import topologies

RNG = np.random.default_rng(0)


def _occupied(topology: Topology, used: list[int]) -> Allocation:
    alloc = Allocation(topology)
    alloc.allocate("busy", used)
    return alloc


def _nodes_free(topology: Topology, free_per_node: list[int]) -> Allocation:
    """An allocation where node k has free_per_node[k] free GPUs (its lowest ids busy)."""
    used = [g for node, free in zip(topology.nodes, free_per_node, strict=True)
            for g in list(node.gpu_ids)[:node.n_gpus - free]]
    return _occupied(topology, used)


# ------------------------------------------------------------------------- consolidated


def test_consolidated_uses_the_tightest_single_node() -> None:
    """With 4, 1 and 3 GPUs free, 2 GPUs come from the node with 3 free."""
    topology = uniform_cluster(3, gpus_per_node=4)
    alloc = _nodes_free(topology, [4, 1, 3])
    assert consolidated(alloc, 2, RNG) == (9, 10)
    assert consolidated(alloc, 1, RNG) == (7,)
    assert consolidated(alloc, 4, RNG) == (0, 1, 2, 3)


def test_consolidated_fills_the_fewest_nodes_and_tops_up_the_fullest() -> None:
    """5 GPUs from nodes with 1, 1, 4, 3 free: the 4-free node plus a 1-free node."""
    topology = uniform_cluster(4, gpus_per_node=4)
    alloc = _nodes_free(topology, [1, 1, 4, 3])
    assert consolidated(alloc, 5, RNG) == (8, 9, 10, 11, 3)


def test_consolidated_stays_in_one_rack_before_spanning_racks() -> None:
    """Rack 1 holds 6 free GPUs on 3 nodes; rack 0 only 5, so rack 1 is used alone."""
    topology = uniform_cluster(6, gpus_per_node=4, nodes_per_rack=3)
    alloc = _nodes_free(topology, [4, 1, 0, 2, 2, 2])
    gpus = consolidated(alloc, 6, RNG)
    assert gpus == (14, 15, 18, 19, 22, 23)
    assert topology.spread(gpus) == (3, 1)


def test_consolidated_picks_the_rack_needing_fewest_nodes() -> None:
    """Both racks hold 6 free GPUs; rack 1 needs 2 nodes for them, rack 0 needs 3."""
    topology = uniform_cluster(6, gpus_per_node=4, nodes_per_rack=3)
    alloc = _nodes_free(topology, [2, 2, 2, 4, 2, 0])
    gpus = consolidated(alloc, 6, RNG)
    assert gpus == (12, 13, 14, 15, 18, 19)
    assert topology.spread(gpus) == (2, 1)


def test_consolidated_spans_racks_when_no_rack_fits() -> None:
    """Two one-node racks of 4 GPUs: 6 GPUs take all of the first and 2 of the second."""
    topology = uniform_cluster(2, gpus_per_node=4, nodes_per_rack=1)
    alloc = Allocation(topology)
    gpus = consolidated(alloc, 6, RNG)
    assert gpus == (0, 1, 2, 3, 4, 5)
    assert topology.spread(gpus) == (2, 2)


def test_consolidated_refuses_more_than_free() -> None:
    """A request larger than the free GPUs returns None."""
    alloc = _nodes_free(uniform_cluster(2, gpus_per_node=4), [1, 2])
    assert consolidated(alloc, 4, RNG) is None
    assert consolidated(alloc, 3, RNG) == (6, 7, 3)  # the larger node first


# --------------------------------------------------------------- first-fit, best-fit, random


def test_first_fit_takes_the_lowest_free_ids() -> None:
    """The lowest-numbered free GPUs, crossing nodes as needed."""
    alloc = _occupied(uniform_cluster(2, gpus_per_node=4), [0, 2, 5])
    assert first_fit(alloc, 4, RNG) == (1, 3, 4, 6)
    assert first_fit(alloc, 5, RNG) == (1, 3, 4, 6, 7)
    assert first_fit(alloc, 6, RNG) is None


def test_best_fit_prefers_the_tightest_node() -> None:
    """A 2-GPU job goes where 2 are free, not where 3 or 4 are."""
    topology = uniform_cluster(3, gpus_per_node=4)
    alloc = _nodes_free(topology, [4, 2, 3])
    assert best_fit(alloc, 2, RNG) == (6, 7)
    assert best_fit(alloc, 3, RNG) == (9, 10, 11)


def test_best_fit_fills_the_fullest_nodes_first_when_no_node_fits() -> None:
    """5 GPUs from nodes with 4, 2, 3 free: the 2-free node, then the 3-free one."""
    topology = uniform_cluster(3, gpus_per_node=4)
    alloc = _nodes_free(topology, [4, 2, 3])
    assert best_fit(alloc, 5, RNG) == (6, 7, 9, 10, 11)
    assert best_fit(alloc, 10, RNG) is None


def test_random_is_deterministic_for_a_seed() -> None:
    """One seed gives one answer; several seeds give several answers."""
    alloc = _occupied(uniform_cluster(2, gpus_per_node=4), [1, 6])
    first = random_gpus(alloc, 3, np.random.default_rng(7))
    assert first == random_gpus(alloc, 3, np.random.default_rng(7))
    assert first is not None and len(set(first)) == 3
    assert set(first) <= {0, 2, 3, 4, 5, 7}
    answers = {random_gpus(alloc, 3, np.random.default_rng(seed)) for seed in range(20)}
    assert len(answers) > 1
    assert random_gpus(alloc, 7, np.random.default_rng(7)) is None


def test_get_placement_names_and_suggests() -> None:
    """Known names resolve; an unknown one raises with a close match."""
    assert get_placement("best-fit") is best_fit
    with pytest.raises(UnknownNameError, match="Did you mean 'first-fit'"):
        get_placement("first_fit")


def test_placements_work_on_an_overlay() -> None:
    """On a tentative overlay, GPUs taken there are not offered and given ones are."""
    topology = uniform_cluster(2, gpus_per_node=2)
    alloc = _occupied(topology, [0])
    overlay = TentativeAllocation(alloc)
    overlay.take([1, 2])
    overlay.give([0])
    assert first_fit(overlay, 2, RNG) == (0, 3)
    assert consolidated(overlay, 1, RNG) == (0,)
    assert first_fit(overlay, 3, RNG) is None


# ------------------------------------------------------------------------------ properties


@st.composite
def free_states(draw: st.DrawFn) -> tuple[Topology, FreeGpus, int]:
    """A drawn cluster, some GPUs held (on the live table, maybe an overlay too), a request."""
    topology = draw(topologies())
    gpus = list(range(topology.n_gpus))
    used = draw(st.lists(st.sampled_from(gpus), unique=True))
    alloc = _occupied(topology, used)
    free: FreeGpus = alloc
    if draw(st.booleans()):
        overlay = TentativeAllocation(alloc)
        if used:
            overlay.give(draw(st.lists(st.sampled_from(sorted(used)), unique=True)))
        still_free = [g for g in gpus if overlay.is_free(g)]
        if still_free:
            overlay.take(draw(st.lists(st.sampled_from(still_free), unique=True)))
        free = overlay
    n_gpus = draw(st.integers(1, topology.n_gpus + 1))
    return topology, free, n_gpus


def _free_ids(topology: Topology, free: FreeGpus) -> set[int]:
    return {g for n in range(topology.n_nodes) for g in free.free_gpu_ids(n)}


def _min_nodes(counts: list[int], n_gpus: int) -> int | None:
    """Fewest of these per-node free counts that add up to n_gpus."""
    total = 0
    for used, count in enumerate(sorted(counts, reverse=True), start=1):
        total += count
        if total >= n_gpus:
            return used
    return None


@pytest.mark.parametrize("name", sorted(PLACEMENTS))
@given(state=free_states(), seed=st.integers(0, 2**32 - 1))
def test_any_placement_gives_n_distinct_free_gpus(
        name: str, state: tuple[Topology, FreeGpus, int], seed: int) -> None:
    """Every strategy answers None or exactly n distinct GPUs that are free."""
    topology, free, n_gpus = state
    gpus = PLACEMENTS[name](free, n_gpus, np.random.default_rng(seed))
    if gpus is None:
        return
    assert len(gpus) == n_gpus
    assert len(set(gpus)) == n_gpus
    assert set(gpus) <= _free_ids(topology, free)


@given(state=free_states())
def test_consolidated_fails_only_when_too_few_are_free(state: tuple[Topology, FreeGpus, int]) -> None:
    """consolidated returns None exactly when fewer than n GPUs are free."""
    _, free, n_gpus = state
    assert (consolidated(free, n_gpus, RNG) is None) == (free.n_free < n_gpus)


@given(state=free_states())
def test_consolidated_uses_the_fewest_nodes(state: tuple[Topology, FreeGpus, int]) -> None:
    """One node when one fits; else fewest nodes in one rack; else fewest nodes anywhere."""
    topology, free, n_gpus = state
    gpus = consolidated(free, n_gpus, RNG)
    if gpus is None:
        return
    n_nodes, n_racks = topology.spread(gpus)
    counts = [free.free_in_node(n) for n in range(topology.n_nodes)]
    if max(counts) >= n_gpus:
        assert n_nodes == 1
        fitting = [c for c in counts if c >= n_gpus]
        assert counts[topology.gpu_node[gpus[0]]] == min(fitting)
        return
    per_rack = [_min_nodes([counts[n] for n in nodes], n_gpus) for nodes in topology.rack_nodes]
    feasible = [k for k in per_rack if k is not None]
    if feasible:
        assert n_racks == 1
        assert n_nodes == min(feasible)
    else:
        assert n_nodes == _min_nodes(counts, n_gpus)
