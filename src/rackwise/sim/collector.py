"""The cyclic garbage collector, tuned for the length of a simulation.

A run makes millions of small objects (events, tuples, records), few of
them cyclic garbage, while the modules, the workload and the policy's
tables outlive it. CPython's defaults would look at young objects every
700 allocations and, in its full collections, walk every long-lived
object again and again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 50_000
_depth = 0  # how many `long_lived_objects` are open: only the outermost restores


@contextmanager
def long_lived_objects() -> Iterator[None]:
    """Keep what exists now out of the collector's sight, and look at young objects less often.

    Re-entrant: entering freezes what exists now (`gc.freeze`), and only
    leaving the outermost block unfreezes it and restores the thresholds,
    so a command that holds the objects of a whole run frozen keeps them
    so when the run inside it ends.
    """
    global _depth
    gc.freeze()
    if _depth == 0:
        thresholds = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, *thresholds[1:])
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.set_threshold(*thresholds)
            gc.unfreeze()
