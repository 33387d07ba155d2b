"""A job's predicted size as a distribution, and what it says once the job has run a while.

A point prediction tells nothing when a job outlives it; a distribution
does. `SizeDistribution` holds weighted samples of a job's size (finished
jobs like it) and answers, given the service a job has already attained:

- `expected_remaining`: E[X - a | X > a], the mean work still to do;
- `gittins_rank`: the Gittins rank, inf over Δ of E[min(X - a, Δ) | X > a] /
  P(X - a <= Δ | X > a) (Gittins 1989; Scully, Harchol-Balter and Scheller-Wolf,
  "SOAP", 2018). Serving the job of least rank minimises mean response time
  on one machine when sizes are drawn from known distributions, as SRPT does
  when they are known exactly; for a point mass the rank is the remaining
  size itself, so exact predictions still give SRPT.

Attained service is a lower bound on the size (the job is censored there),
so every figure is conditioned on X > a. A job that has outlived every
sample gets ``beyond_factor * a``: it is expected to run that much longer.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate, repeat
from operator import add, mul, sub, truediv

import numpy as np

# Tails up to this many samples are ranked with Python floats: numpy's cost per call
# outweighs its speed per sample below it (most running jobs' tails are a few samples).
_SHORT_TAIL = 48


class SizeDistribution:
    """Weighted samples of a job's size (in the predictor's unit), smallest first.

    Args:
        values: Sample sizes (positive; any order).
        weights: One non-negative weight per sample (equal if omitted).
        beyond_factor: Past the largest sample, the remaining size is taken
            to be this multiple of the attained service.
    """

    __slots__ = ("_long_tails", "_rank_at_start", "_short_tails", "_value_list", "_values",
                 "_weight_list", "_weights", "beyond_factor")

    def __init__(self, values: Sequence[float] | np.ndarray,
                 weights: Sequence[float] | np.ndarray | None = None, *,
                 beyond_factor: float = 0.5) -> None:
        x = np.asarray(values, dtype=np.float64)
        w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
        if x.shape != w.shape or x.ndim != 1 or not len(x):
            raise ValueError("a size distribution needs one weight per sample, and a sample")
        keep = w > 0
        order = np.argsort(x[keep], kind="stable")
        self._values = x[keep][order]
        self._weights = w[keep][order]
        self._value_list: list[float] | None = None  # the same as Python floats, once a rank asks
        self._weight_list: list[float] = []
        # Tail start -> the weight finished within each quantum, and the weight left after it
        # (a running job's tail starts at the same sample for many events).
        self._short_tails: dict[int, tuple[list[float], list[float]]] = {}
        self._long_tails: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.beyond_factor = beyond_factor
        self._rank_at_start: float | None = None  # one distribution may serve many waiting jobs

    @classmethod
    def point(cls, value: float, *, beyond_factor: float = 0.5) -> SizeDistribution:
        """A size known (or taken) to be exactly ``value``."""
        return cls([value], beyond_factor=beyond_factor)

    @property
    def values(self) -> np.ndarray:
        """The samples, smallest first (weight-0 samples dropped)."""
        return self._values

    @property
    def weights(self) -> np.ndarray:
        """Each sample's weight, in the order of `values`."""
        return self._weights

    def median(self) -> float:
        """The smallest sample with at least half the weight at or below it."""
        cumulative = np.cumsum(self._weights)
        return float(self._values[int(np.searchsorted(cumulative, 0.5 * cumulative[-1]))])

    def _tail(self, attained: float) -> tuple[np.ndarray, np.ndarray] | None:
        k = int(np.searchsorted(self._values, attained, side="right"))
        if k == len(self._values):
            return None
        return self._values[k:] - attained, self._weights[k:]

    def expected_remaining(self, attained: float = 0.0) -> float:
        """E[X - a | X > a]; ``beyond_factor * a`` past the largest sample."""
        tail = self._tail(attained)
        if tail is None:
            return self.beyond_factor * attained
        rest, w = tail
        return float(np.dot(w, rest) / w.sum())

    def gittins_rank(self, attained: float = 0.0) -> float:
        """The Gittins rank at attained service ``a`` (lower is served first).

        The quantum Δ is searched over the remaining sizes of the samples
        past ``a``; the infimum is reached at one of them.
        """
        if attained == 0.0 and self._rank_at_start is not None:
            return self._rank_at_start
        values = self._value_list
        if values is None:
            values = self._value_list = self._values.tolist()
            self._weight_list = self._weights.tolist()
        k = bisect_right(values, attained)  # `_tail`'s searchsorted, on the list
        n = len(values)
        if k == n:
            return self.beyond_factor * attained
        if n - k <= _SHORT_TAIL:
            short = self._short_tails.get(k)
            if short is None:
                short = self._short_tails[k] = _short_tail_weights(self._weight_list[k:])
            rank = _short_tail_rank(values, self._weight_list, k, attained, *short)
        else:
            long = self._long_tails.get(k)
            if long is None:
                long = self._long_tails[k] = _tail_weights(self._weights[k:])
            rank = _tail_rank(self._values[k:] - attained, self._weights[k:], *long)
        if attained == 0.0:
            self._rank_at_start = rank
        return rank


def _tail_weights(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The weight of the tail's samples finished within each quantum, and the weight left after it."""
    done_w = np.cumsum(w)
    return done_w, done_w[-1] - done_w


def _short_tail_weights(w: list[float]) -> tuple[list[float], list[float]]:
    """`_tail_weights` with Python floats, the same bits."""
    done = list(accumulate(w))  # `accumulate` adds as numpy's cumsum does: first element as is
    return done, [done[-1] - d for d in done]


def _tail_rank(rest: np.ndarray, w: np.ndarray, done_w: np.ndarray, after: np.ndarray) -> float:
    """The least ratio of expected service to finishing weight over the quanta ``rest``."""
    # Expected service within quantum rest[j]: finished samples' own, the others' whole quantum.
    served = np.cumsum(w * rest) + after * rest
    return float(np.min(served / done_w))


def _short_tail_rank(values: list[float], weights: list[float], k: int, attained: float,
                     done_w: list[float], after: list[float]) -> float:
    """`_tail_rank` of the samples from ``k`` on, with the same operations in the same order.

    numpy's cumulative sums add one element after another, and every other
    step is one IEEE operation per element, so Python floats give the same bits.
    """
    rest = list(map(sub, values[k:], repeat(attained)))
    served = accumulate(map(mul, weights[k:], rest))
    # (served + after * rest) / done_w, element by element, iterated in C.
    ratios: Iterator[float] = map(truediv, map(add, served, map(mul, after, rest)), done_w)
    return min(ratios)
