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

Between two samples the rank is the lower envelope of straight lines in a
(one per quantum), so each stretch's envelope is worked out once and a
running job's rank, asked at every event, is one look-up and one line.
`gittins_line` hands that line over (`RankLine`): a caller that keeps it
reads the rank off it, without the look-up, until the job's service
leaves it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from mypy_extensions import mypyc_attr

_FEW = 256  # samples sorted without numpy (a cold-start population's, say)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class SizeDistribution:
    """Weighted samples of a job's size (in the predictor's unit), smallest first.

    Args:
        values: Sample sizes (positive; any order).
        weights: One non-negative weight per sample (equal if omitted).
        beyond_factor: Past the largest sample, the remaining size is taken
            to be this multiple of the attained service.
        assume_sorted: The values come smallest first, each with a positive
            weight (not checked): taken as they are, without a sort.
    """

    __slots__ = ("_arrays", "_envelopes", "_tail_sums", "_value_list", "_weight_list", "beyond_factor", "largest")

    def __init__(self, values: Sequence[float] | np.ndarray,
                 weights: Sequence[float] | np.ndarray | None = None, *,
                 beyond_factor: float = 0.5, assume_sorted: bool = False) -> None:
        # The samples are kept as lists of floats: a class's distribution has a few hundred
        # at most, and a loop over them (compiled) costs less than numpy's calls would.
        if assume_sorted:  # a class's Kaplan-Meier estimate, one per arrival or finish: no numpy
            value_list = values.tolist() if isinstance(values, np.ndarray) else list(values)
            weight_list = ([1.0] * len(value_list) if weights is None else
                           weights.tolist() if isinstance(weights, np.ndarray) else list(weights))
            self._arrays: tuple[np.ndarray, np.ndarray] | None = None  # `_as_arrays`
        elif weights is None and not isinstance(values, np.ndarray) and len(values) <= _FEW:  # equal weights
            value_list = sorted([float(value) for value in values])
            weight_list = [1.0] * len(value_list)
            self._arrays = None
        else:
            x = np.asarray(values, dtype=np.float64)
            w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
            if x.shape != w.shape or x.ndim != 1:
                raise ValueError("a size distribution needs one weight per sample, and a sample")
            keep = w > 0
            order = np.argsort(x[keep], kind="stable")
            self._arrays = (x[keep][order], w[keep][order])
            value_list, weight_list = self._arrays[0].tolist(), self._arrays[1].tolist()
        if len(value_list) != len(weight_list) or not value_list:
            raise ValueError("a size distribution needs one weight per sample, and a sample")
        self._value_list: list[float] = value_list
        self._weight_list: list[float] = weight_list
        # Weight and weighted size of the samples from each one on, and the first over
        # that sample's own weight, once `rank_bound` asks.
        self._tail_sums: tuple[list[float], list[float], list[float]] | None = None
        # Tail start -> the rank's envelope over the stretch before that sample
        # (a running job stays in one stretch for many events).
        self._envelopes: dict[int, _Envelope] = {}
        self.beyond_factor = beyond_factor
        # From here on both ranks are ``beyond_factor * a``: a job that outlived every sample.
        self.largest = value_list[-1]

    @classmethod
    def point(cls, value: float, *, beyond_factor: float = 0.5) -> SizeDistribution:
        """A size known (or taken) to be exactly ``value``."""
        return cls([float(value)], beyond_factor=beyond_factor, assume_sorted=True)

    def _as_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = (np.array(self._value_list, dtype=np.float64),
                            np.array(self._weight_list, dtype=np.float64))
        return self._arrays

    @property
    def values(self) -> np.ndarray:
        """The samples, smallest first (weight-0 samples dropped)."""
        return self._as_arrays()[0]

    @property
    def weights(self) -> np.ndarray:
        """Each sample's weight, in the order of `values`."""
        return self._as_arrays()[1]

    def median(self) -> float:
        """The smallest sample with at least half the weight at or below it."""
        weights = self._weight_list
        total = 0.0
        for weight in weights:  # in order, as a cumulative sum adds them
            total += weight
        half = 0.5 * total
        so_far = 0.0
        for i, weight in enumerate(weights):
            so_far += weight
            if so_far >= half:
                return self._value_list[i]
        return self._value_list[-1]

    def _tail(self, attained: float) -> tuple[np.ndarray, np.ndarray] | None:
        values, weights = self._as_arrays()
        k = int(np.searchsorted(values, attained, side="right"))
        if k == len(values):
            return None
        return values[k:] - attained, weights[k:]

    def expected_remaining(self, attained: float = 0.0) -> float:
        """E[X - a | X > a]; ``beyond_factor * a`` past the largest sample."""
        tail = self._tail(attained)
        if tail is None:
            return self.beyond_factor * attained
        rest, w = tail
        return float(np.dot(w, rest) / w.sum())

    def rank_bound(self, attained: float) -> float:
        """An upper bound on `gittins_rank` at ``attained``, in O(log n).

        The lesser of two of the ratios the rank is the infimum of: the
        quantum that runs the job to its end (the expected remaining size)
        and the one that runs it to the next sample (its distance times the
        tail's weight over that sample's). Each is worked out from running
        sums over the tail and raised by 1e-9 of its largest term: far above
        the roundings of either way of working it out. Past the largest
        sample it is the rank itself.
        """
        return self.rank_bound_stretch(attained)[0]

    def rank_bound_stretch(self, attained: float) -> tuple[float, float]:
        """`rank_bound` at ``attained``, and the next sample: from ``attained`` up to it, not at it,
        the bound only falls.

        Up to the next sample both ratios are a constant less ``attained``
        times a positive constant, and rounding keeps their order: the bound
        at any service from ``attained`` up to that sample is at most the
        one returned, bit for bit. Past the largest sample the bound grows
        with the service, so it holds at ``attained`` alone (the two are equal).
        """
        values = self._value_list
        k = _bisect_right(values, attained)
        if k == len(values):
            return self.beyond_factor * attained, attained
        sums = self._tail_sums
        if sums is None:
            sums = self._tail_sums = _tail_sums(values, self._weight_list)
        mean_tail = sums[1][k] / sums[0][k]
        to_end = mean_tail - attained + 1e-9 * mean_tail  # a difference: raised by the larger term
        next_sample = values[k]
        to_next = (next_sample - attained) * sums[2][k] * (1.0 + 1e-9)
        return (to_end if to_end < to_next else to_next), next_sample

    def gittins_rank(self, attained: float = 0.0) -> float:
        """The Gittins rank at attained service ``a`` (lower is served first).

        The quantum Δ is searched over the remaining sizes of the samples
        past ``a``; the infimum is reached at one of them.
        """
        return self.gittins_line(attained)[0]

    def gittins_line(self, attained: float) -> tuple[float, RankLine | None]:
        """`gittins_rank` at ``attained``, and the line it lies on there (None: on no line).

        A running job's rank is asked at every event as its service grows;
        while that stays on the line (`RankLine.holds`), the line gives the
        rank with one multiplication and one addition, bit for bit.
        """
        values = self._value_list
        k = _bisect_right(values, attained)  # the first sample past `attained`
        if k == len(values):
            return self.beyond_factor * attained, None
        envelope = self._envelopes.get(k)
        if envelope is None:
            envelope = self._envelopes[k] = _Envelope(values, self._weight_list, k)
        return envelope.rank(attained)


def _tail_sums(values: list[float], weights: list[float]) -> tuple[list[float], list[float], list[float]]:
    """From each sample on: the weight, the weighted size, and the weight over the sample's own.

    Summed from the largest sample down, one term after another.
    """
    n = len(values)
    tail_weight, tail_size, share = [0.0] * n, [0.0] * n, [0.0] * n
    weight_sum = size_sum = 0.0
    for i in range(n - 1, -1, -1):
        weight = weights[i]
        weight_sum += weight
        size_sum += weight * values[i]
        tail_weight[i], tail_size[i], share[i] = weight_sum, size_sum, weight_sum / weight
    return tail_weight, tail_size, share


def _bisect_right(values: list[float], x: float) -> int:
    """`bisect.bisect_right` on floats; compiled, it compares unboxed numbers, with no call per search."""
    low, high = 0, len(values)
    while low < high:
        middle = (low + high) // 2
        if x < values[middle]:
            high = middle
        else:
            low = middle + 1
    return low


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(init=False, slots=True)
class RankLine:
    """One line of a stretch's envelope: the rank is ``intercept + slope * (end - a)``.

    It holds for attained service ``a`` with ``start < a < end`` (inside the
    stretch, not at its start) and ``low <= end - a < high`` (between the
    line's breaks).
    """

    start: float
    end: float
    low: float
    high: float
    intercept: float
    slope: float

    def __init__(self, start: float, end: float, low: float, high: float, intercept: float,
                 slope: float) -> None:
        # Made at every rank a running job leaves its line for: an __init__ of its own compiles.
        self.start = start
        self.end = end
        self.low = low
        self.high = high
        self.intercept = intercept
        self.slope = slope

    def holds(self, attained: float) -> bool:
        """Whether the rank at ``attained`` is this line's."""
        if not self.start < attained < self.end:
            return False
        return self.low <= self.end - attained < self.high

    def rank(self, attained: float) -> float:
        """The line's value at ``attained`` (the rank there, where the line `holds`)."""
        return self.intercept + self.slope * (self.end - attained)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _Envelope:
    """The Gittins rank for attained service a between samples ``k - 1`` and ``k``.

    With the tail's samples x_j and weights w_j (j >= k), cumulative weight
    D_j and total W, quantum Δ = x_j - a gives the ratio
    (sum_{i<=j} w_i (x_i - a) + (W - D_j)(x_j - a)) / D_j, which is
    c_j + (x_k - a) * W / D_j: a line in the distance to the next sample,
    with c_j, the ratio at x_k, at least 0. The rank is their lower envelope
    (the convex-hull trick), kept as its lines and the points where one gives
    way to the next; every term is positive, so it is within a few roundings
    of the definition. At the stretch's start (0 for a job not yet run) it is
    worked out by the definition itself, bit for bit.
    """

    __slots__ = ("_at_start", "_breaks", "_intercepts", "_k", "_slopes", "_total", "_values", "_weights", "end",
                 "start")

    def __init__(self, values: list[float], weights: list[float], k: int) -> None:
        self.start = values[k - 1] if k else 0.0
        self.end = values[k]
        self._values, self._weights, self._k = values, weights, k  # the samples; the tail starts at k
        total = 0.0
        for j in range(k, len(weights)):  # W, in order, as a cumulative sum adds it up
            total += weights[j]
        self._total = total
        self._at_start: float | None = None  # each worked out when first asked: a job not yet
        self._breaks: list[float] | None = None  # run asks only the first, a running one the rest
        self._intercepts: list[float] = []
        self._slopes: list[float] = []

    def _least_ratio(self, attained: float) -> float:
        """The least of the rank's candidates at ``attained``: the rank, by its definition."""
        values, weights = self._values, self._weights
        total = self._total
        done = served = 0.0
        least = math.inf
        for j in range(self._k, len(values)):
            weight, rest = weights[j], values[j] - attained
            done += weight
            served += weight * rest
            ratio = (served + (total - done) * rest) / done
            if ratio < least:
                least = ratio
        return least

    def _build_envelope(self) -> list[float]:
        """The lines of the lower envelope, steepest first, and where each gives way to the next.

        Line j is the ratio of quantum x_j - a at a = x_k, and its slope
        W / D_j. ``breaks[i]`` is where lines ``i`` and ``i + 1`` cross, kept
        as the hull grows, so each crossing is worked out once.
        """
        values, weights, end = self._values, self._weights, self.end
        total = self._total
        hull_c: list[float] = []
        hull_s: list[float] = []
        breaks: list[float] = []
        done = served = 0.0
        for j in range(self._k, len(values)):
            weight, rest = weights[j], values[j] - end
            done += weight
            served += weight * rest
            c = (served + (total - done) * rest) / done
            slope = total / done
            if hull_s and slope >= hull_s[-1]:  # as steep (equal cumulative weight): keep the lower
                if c >= hull_c[-1]:
                    continue
                hull_c.pop()
                hull_s.pop()
                if breaks:
                    breaks.pop()
            # The last line gives way where the new one crosses the one below it first.
            # (Crossings are (c2 - c1) / (s1 - s2), spelt out: this loop runs per sample.)
            while breaks and (c - hull_c[-2]) / (hull_s[-2] - slope) <= breaks[-1]:
                hull_c.pop()
                hull_s.pop()
                breaks.pop()
            if hull_c:
                breaks.append((c - hull_c[-1]) / (hull_s[-1] - slope))
            hull_c.append(c)
            hull_s.append(slope)
        self._intercepts, self._slopes, self._breaks = hull_c, hull_s, breaks
        return breaks

    def rank(self, attained: float) -> tuple[float, RankLine | None]:
        """The rank at ``attained`` (within this stretch), and the line it lies on (None at the start)."""
        if attained == self.start:
            if self._at_start is None:
                self._at_start = self._least_ratio(self.start)
            return self._at_start, None
        breaks = self._breaks
        if breaks is None:
            breaks = self._build_envelope()
        i = _bisect_right(breaks, self.end - attained)
        line = RankLine(self.start, self.end, breaks[i - 1] if i else -math.inf,
                        breaks[i] if i < len(breaks) else math.inf, self._intercepts[i], self._slopes[i])
        return line.rank(attained), line
