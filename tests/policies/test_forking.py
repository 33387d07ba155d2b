"""Copies on idle GPUs (`parts.forking.add_copies`): one node per copy, or spread when allowed."""

from __future__ import annotations

from rackwise.policies.parts.fork_parameters import ForkParameters
from rackwise.policies.parts.forking import Forkable, add_copies
from rackwise.policies.parts.primal_dual import PriceBook


def _scattered_book() -> PriceBook:
    """Three 4-GPU nodes of one type: node 0 full, two GPUs free on each of nodes 1 and 2."""
    book = PriceBook([4, 4, 4], 1.0, [1.0] * 3, 1)
    for node, used in ((0, 4), (1, 2), (2, 2)):
        book.take(0, node, used)
    return book


def test_a_copy_fits_one_node_unless_it_may_spread() -> None:
    for spread, copies in ((False, (((0, 4),),)), (True, (((0, 4),), ((1, 2), (2, 2))))):
        layouts = {"A": (((0, 4),),)}
        job = Forkable("A", 4, ((0,),), spread=spread)
        add_copies(_scattered_book(), [job], layouts, ForkParameters(), cap=3, widest={0: 4})
        assert layouts["A"] == copies


def test_copies_go_round_the_jobs_one_per_pass_until_none_fits() -> None:
    book = PriceBook([4, 4, 4], 1.0, [1.0] * 3, 1)
    book.take(0, 0, 2)
    layouts = {"A": (((0, 1),),), "B": (((0, 1),),)}
    jobs = [Forkable("A", 1, ((0,),)), Forkable("B", 1, ((0,),))]
    add_copies(book, jobs, layouts, ForkParameters(), cap=3, widest={0: 4})
    assert [len(layouts[j]) for j in "AB"] == [3, 3]  # up to the cap, each copy on a node of its own


def test_a_spread_copy_may_be_held_to_one_rack() -> None:
    # Nodes 0-1 in rack 0, 2-3 in rack 1; free GPUs: 3, 0, 2, 2.
    def book() -> PriceBook:
        b = PriceBook([4] * 4, 1.0, [1.0] * 4, 1)
        for node, used in ((0, 1), (1, 4), (2, 2), (3, 2)):
            b.take(0, node, used)
        return b

    for node_rack, copy in ((None, ((0, 3), (2, 1))), ((0, 0, 1, 1), ((2, 2), (3, 2)))):
        layouts = {"A": (((1, 4),),)}
        add_copies(book(), [Forkable("A", 4, ((0,),), spread=True)], layouts, ForkParameters(), cap=2,
                   widest={0: 4}, node_rack=node_rack)
        assert layouts["A"][1] == copy
