"""``np.median`` and ``np.percentile`` of sorted finite numbers, to the bit, without ``numpy.ma``.

Both numpy functions import ``numpy.ma`` on their first call (a NaN check, and
``np.unique`` inside the percentile), about 20 ms of a `rackwise simulate`
process that needs nothing else from it. These take an array sorted once and
repeat numpy's arithmetic on its elements. Finite numbers without negative
zeros (a run's times): where ``0.0`` and ``-0.0`` both occur, their order in
the sorted array, and so the sign of a zero result, is the sort's to choose.
"""

from __future__ import annotations

import math

import numpy as np


def median(ordered: np.ndarray) -> float:
    """``np.median``: the middle value, or the mean of the two middle values."""
    half = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[half])
    return float((ordered[half - 1] + ordered[half]) / 2)


def percentile(ordered: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` by its default (linear) method, ``ordered`` being the values sorted."""
    last = len(ordered) - 1
    index = last * (q / 100)
    if index >= last:  # numpy's weight here is the index's distance from -1
        below = above = last
        gamma = index + 1
    else:
        below = math.floor(index)
        above = below + 1
        gamma = index - below
    low, high = float(ordered[below]), float(ordered[above])
    step = high - low
    # numpy's lerp: from the nearer end, so that the ends come out exact
    return low + step * gamma if gamma < 0.5 else high - step * (1 - gamma)
