"""`rackwise.sorted_ints`: its loops answer as `bisect` does; plain Python takes `bisect`'s own."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rackwise import sorted_ints

Loops = tuple[Callable[[list[int], int], int], Callable[[list[int], int], None]]


def _loops() -> Loops:
    """The module's own loops: compiled, its names; as plain Python, its source run as if compiled."""
    if not sorted_ints.__file__.endswith(".py"):
        return sorted_ints.index_of, sorted_ints.insert
    namespace: dict[str, object] = {"__file__": "sorted_ints.so", "__name__": "sorted_ints_loops"}
    exec(Path(sorted_ints.__file__).read_text(), namespace)
    return namespace["index_of"], namespace["insert"]  # type: ignore[return-value]


INDEX_OF, INSERT = _loops()


@given(values=st.lists(st.integers(-50, 50)), x=st.integers(-60, 60))
def test_the_loops_answer_as_bisect_does(values: list[int], x: int) -> None:
    values.sort()
    assert INDEX_OF(values, x) == bisect.bisect_left(values, x)
    into, expected = list(values), list(values)
    INSERT(into, x)
    bisect.insort(expected, x)
    assert into == expected


def test_plain_python_takes_bisects_functions() -> None:
    if sorted_ints.__file__.endswith(".py"):
        assert (sorted_ints.index_of, sorted_ints.insert) == (bisect.bisect_left, bisect.insort)
    else:  # compiled: the loops themselves
        assert sorted_ints.index_of is not bisect.bisect_left
