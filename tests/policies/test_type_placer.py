"""`TypePlacer`: a round's placements on each GPU type, against a plain scan of every node."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.policies.hetero_support import cluster

from rackwise.cluster.allocation import Allocation, TentativeAllocation
from rackwise.policies.parts.heterogeneity import TypePlacer, nodes_by_type

TOPOLOGY = cluster(("v100", 5, 4), ("k80", 4, 8))  # nodes 0-4: 4 V100 each; 5-8: 8 K80 each


def scan(free: TentativeAllocation, nodes: tuple[int, ...], n_gpus: int) -> tuple[int, ...] | None:
    """The rule read plainly: the tightest node that fits, else the fullest nodes first."""
    counts = [(free.free_in_node(n), n) for n in nodes]
    if sum(c for c, _ in counts) < n_gpus:
        return None
    fitting = [(c, n) for c, n in counts if c >= n_gpus]
    if fitting:
        return tuple(free.free_gpu_ids(min(fitting)[1])[:n_gpus])
    chosen: list[int] = []
    for count, node in sorted(counts, key=lambda cn: (-cn[0], cn[1])):
        if count:
            chosen += free.free_gpu_ids(node)[:n_gpus - len(chosen)]
    return tuple(chosen[:n_gpus])


def test_a_job_gets_the_tightest_node_that_fits_else_the_fullest_nodes() -> None:
    base = Allocation(TOPOLOGY)
    base.allocate("busy", (0, 1, 2, 20, 21, 22, 23, 24))  # node 0 keeps GPU 3, node 5 keeps 25-27
    placer = TypePlacer(TentativeAllocation(base), nodes_by_type(TOPOLOGY))
    assert placer.place("v100", 1) == (3,)  # node 0's last GPU, not a whole node
    assert placer.place("k80", 3) == (25, 26, 27)
    placer.take((3,))
    assert placer.place("v100", 18) is None  # 16 V100s left
    assert placer.place("v100", 6) == (4, 5, 6, 7, 8, 9)  # nodes 1 and 2: no node holds 6


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(["v100", "k80"]), st.integers(1, 12)),
                max_size=25),
       st.sets(st.integers(0, TOPOLOGY.n_gpus - 1), max_size=30))
def test_every_placement_equals_the_plain_scan(steps: list[tuple[bool, str, int]], busy: set[int]) -> None:
    """Each step places a job, or only takes GPUs (a type may be taken from before it is placed on)."""
    base = Allocation(TOPOLOGY)
    if busy:
        base.allocate("busy", tuple(sorted(busy)))
    nodes = nodes_by_type(TOPOLOGY)
    placer = TypePlacer(TentativeAllocation(base), nodes)
    for places, gpu_type, n_gpus in steps:
        expected = scan(placer.free, nodes[gpu_type], n_gpus)
        if places:
            assert placer.place(gpu_type, n_gpus) == expected
        if expected is not None:
            placer.take(expected)
