"""The primal-dual pieces' shortcuts answer as the general paths do (papers/hadar.md §3)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.policies.parts.primal_dual import (
    Option,
    PriceBook,
    UtilityCurve,
    best_plan,
    best_single_plan,
    sigmoid_utility,
)


@settings(max_examples=300, deadline=None)
@given(cost=st.floats(0.01, 50.0), progress=st.floats(0.1, 20.0), work=st.floats(0.1, 200.0),
       n_slots=st.integers(1, 5), knee=st.floats(0.0, 30.0), scale=st.floats(0.1, 100.0),
       max_wait=st.integers(0, 3))
def test_a_plan_over_equal_slots_is_the_general_plan(cost: float, progress: float, work: float,
                                                     n_slots: int, knee: float, scale: float,
                                                     max_wait: int) -> None:
    """Every slot offering one option takes a shortcut; a dominated second option forces the general path."""
    option = Option(cost, progress, ((0, 2),))
    dominated = Option(2.0 * cost, 0.5 * progress, ((1, 2),))  # cheaper and faster is always `option`

    def utility(t: int) -> float:
        return sigmoid_utility(t + 1, scale, 1.0, knee)

    shortcut = best_plan([[option]] * n_slots, work, utility, max_wait)
    general = best_plan([[option, dominated]] * n_slots, work, utility, max_wait)
    assert shortcut == general


@settings(max_examples=300, deadline=None)
@given(offers=st.lists(st.one_of(st.none(), st.tuples(st.floats(0.01, 50.0), st.floats(0.1, 20.0))),
                       min_size=1, max_size=6),
       work=st.floats(0.1, 200.0), knee=st.floats(0.0, 30.0), scale=st.floats(0.1, 100.0),
       max_wait=st.integers(0, 3))
def test_a_plan_of_one_option_a_slot_is_the_general_plan(offers: list[tuple[float, float] | None],
                                                         work: float, knee: float, scale: float,
                                                         max_wait: int) -> None:
    """`best_single_plan` on slots that differ (or offer nothing) answers as `best_plan` on the
    same slots with a dominated second option each, which takes the general path."""
    slots = [None if offer is None else Option(offer[0], offer[1], ((t, 2),)) for t, offer in enumerate(offers)]

    def utility(t: int) -> float:
        return sigmoid_utility(t + 1, scale, 1.0, knee)

    general = best_plan([[] if o is None else [o, Option(2.0 * o.cost, 0.5 * o.progress, ((9, 2),))]
                         for o in slots], work, utility, max_wait)
    assert best_single_plan(slots, work, utility, max_wait) == general


@settings(max_examples=300, deadline=None)
@given(gamma1=st.floats(1e-6, 1e6), gamma2=st.floats(1e-3, 1e3), gamma3=st.floats(0.0, 1e6),
       slots=st.lists(st.integers(-1000, 2_000_000), min_size=1, max_size=40))
def test_a_utility_curve_is_the_sigmoid_bit_for_bit(gamma1: float, gamma2: float, gamma3: float,
                                                    slots: list[int]) -> None:
    """Asked in any order, near its knee and far from it, the curve gives `sigmoid_utility`'s doubles."""
    curve = UtilityCurve(gamma1, gamma2, gamma3)
    near = [int(gamma3) + d for d in range(-45, 46, 3)]
    for s in slots + near + slots:
        assert curve.at(s) == sigmoid_utility(s, gamma1, gamma2, gamma3)
    assert len(curve.values) <= curve.last - curve.first + 1  # only the window is kept


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_loads_set_at_once_answer_as_loads_taken_one_by_one(data: st.DataObject) -> None:
    caps = data.draw(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=12))
    groups = data.draw(st.lists(st.integers(0, 2), min_size=len(caps), max_size=len(caps)))
    loads = [data.draw(st.integers(0, cap)) for cap in caps]
    taken = PriceBook(caps, 1.0, [4.0] * len(caps), 1, groups=groups)
    for node, load in enumerate(loads):
        if load:
            taken.take(0, node, load)
    at_once = PriceBook(caps, 1.0, [4.0] * len(caps), 1, groups=groups)
    at_once.set_loads(0, loads)
    assert (at_once.load == taken.load).all()
    for group_set in [(0,), (1,), (2,), (0, 1), (0, 1, 2)]:
        assert at_once.free_in(0, group_set) == taken.free_in(0, group_set)
        assert list(at_once.most_free_first(0, group_set)) == list(taken.most_free_first(0, group_set))
        assert at_once.with_free(0, group_set) == taken.with_free(0, group_set)
        for n in (1, 2, 3, 8):
            assert at_once.cheapest_node(0, group_set, n) == taken.cheapest_node(0, group_set, n)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_reloaded_book_answers_as_a_new_one(data: st.DataObject) -> None:
    """`set_loads` replaces all a slot held: what was taken and asked before leaves no trace."""
    caps = data.draw(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=12))
    groups = data.draw(st.lists(st.integers(0, 2), min_size=len(caps), max_size=len(caps)))
    reused = PriceBook.flat(caps, groups=groups)
    for before in ([data.draw(st.integers(0, cap)) for cap in caps], None):
        if before is not None:
            reused.set_loads(0, before)
        for node in data.draw(st.lists(st.integers(0, len(caps) - 1), max_size=6)):
            if reused.free(0, node):
                reused.take(0, node, 1)
        reused.memo["asked"] = reused.free_in(0, (0, 1, 2))  # a caller's answer, kept until a change
        loads = [data.draw(st.integers(0, cap)) for cap in caps]
        reused.set_loads(0, loads)
        assert not reused.memo
        new = PriceBook.flat(caps, groups=groups)
        for node, load in enumerate(loads):
            if load:
                new.take(0, node, load)
        assert (reused.load == new.load).all()
        for group_set in [(0,), (1,), (2,), (0, 1), (0, 1, 2)]:
            assert reused.free_in(0, group_set) == new.free_in(0, group_set)
            assert list(reused.most_free_first(0, group_set)) == list(new.most_free_first(0, group_set))
            for n in (1, 2, 3, 8):
                assert reused.cheapest_node(0, group_set, n) == new.cheapest_node(0, group_set, n)


def test_set_loads_refuses_more_than_a_node_holds() -> None:
    book = PriceBook([4, 4], 1.0, [4.0, 4.0], 1)
    with pytest.raises(ValueError, match="node 0 has 4 GPUs, not 5"):
        book.set_loads(0, [5, 0])


@given(st.lists(st.floats(0.5, 64.0), min_size=2, max_size=8))
def test_books_with_a_top_per_node_or_per_group_price_alike(tops: list[float]) -> None:
    """Nodes of one group with different curve tops form classes of their own."""
    caps = [4] * len(tops)
    per_node = PriceBook(caps, 0.5, tops, 1, groups=[0] * len(tops))
    for node, top in enumerate(tops):
        alone = PriceBook([4], 0.5, [top], 1)
        assert math.isclose(per_node.cost(0, node, 3), alone.cost(0, 0, 3), rel_tol=0, abs_tol=0)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_emptiest_node_is_the_first_most_free_first_yields(data: st.DataObject) -> None:
    caps = data.draw(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=12))
    groups = data.draw(st.lists(st.integers(0, 2), min_size=len(caps), max_size=len(caps)))
    book = PriceBook(caps, 1.0, [4.0] * len(caps), 1, groups=groups)
    book.set_loads(0, [data.draw(st.integers(0, cap)) for cap in caps])
    excluded = set(data.draw(st.lists(st.integers(0, len(caps) - 1), max_size=4)))
    for group_set in [(0,), (1,), (0, 2), (0, 1, 2)]:
        for n in (1, 2, 4, 8):
            expected = next((node for node, free in book.most_free_first(0, group_set)
                             if free >= n and node not in excluded), None)
            assert book.emptiest_node(0, group_set, n, excluded) == expected
