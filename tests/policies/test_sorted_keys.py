"""`SortedKeys`: the buckets' sorted FIFO keys, which leave mostly from the front."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.policies.parts.delay_scheduling import SortedKeys

_KEYS = st.tuples(st.integers(0, 30).map(float), st.sampled_from("abc"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "front", "any", "many"]),
                          st.lists(_KEYS, max_size=12, unique=True), st.integers(0, 100)),
                max_size=40))
def test_the_live_keys_are_those_added_and_not_removed_in_order(steps) -> None:
    """Adds one by one and in bulk, removals from the front (as jobs start oldest first),
    anywhere, and many at once; after each, ``live()`` is the sorted set a plain model holds,
    and removed keys kept before ``head`` never outnumber the live ones."""
    keys, held = SortedKeys(), set()
    for kind, drawn, pick in steps:
        ordered = sorted(held)
        if kind == "add":
            new = [key for key in drawn if key not in held]
            keys.add(new)
            held.update(new)
        elif ordered and kind == "front":
            keys.remove(ordered[0])
            held.discard(ordered[0])
        elif ordered and kind == "any":
            keys.remove(ordered[pick % len(ordered)])
            held.discard(ordered[pick % len(ordered)])
        elif ordered and kind == "many":
            gone = set(ordered[:pick % (len(ordered) + 1)])
            keys.remove_all(gone)
            held -= gone
        assert keys.live() == sorted(held)
        assert keys.head <= len(keys.keys) - keys.head
