"""Search and insertion in ascending lists of ints, the cheaper way for the build that runs.

Free GPU ids per node, nodes per load: the simulator keeps many short sorted
lists of ints and searches them at every start and stop. Compiled (mypyc,
``setup.py``), the loops below compare unboxed ints with no call; a call
into the `bisect` module costs several times as much. As plain Python,
`bisect`'s C functions are the faster, so a module not compiled takes them
under the same names.
"""

from __future__ import annotations

from bisect import bisect_left, insort


def index_of(values: list[int], x: int) -> int:
    """Where ``x`` is, or would go, in ascending ``values``: `bisect.bisect_left`."""
    low, high = 0, len(values)
    while low < high:
        middle = (low + high) // 2
        if values[middle] < x:
            low = middle + 1
        else:
            high = middle
    return low


def insert(values: list[int], x: int) -> None:
    """Put ``x`` into ascending ``values``, after any equal to it: `bisect.insort`."""
    low, high = 0, len(values)
    while low < high:
        middle = (low + high) // 2
        if x < values[middle]:
            high = middle
        else:
            low = middle + 1
    values.insert(low, x)


if __file__.endswith(".py"):  # plain Python: callers that import these names get bisect's
    globals().update(index_of=bisect_left, insert=insort)
