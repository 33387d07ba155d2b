"""Means over seeds with 95% confidence intervals (Student's t)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean over ``n`` runs and the half-width of its confidence interval.

    ``half_width`` is None with a single run: one seed gives no spread to
    estimate, which is not the same as a spread of zero.
    """

    mean: float
    half_width: float | None
    n: int

    @property
    def low(self) -> float:
        return self.mean - (self.half_width or 0.0)

    @property
    def high(self) -> float:
        return self.mean + (self.half_width or 0.0)


def t_interval(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """Mean and two-sided t-interval half-width: t(1-a/2, n-1) * s / sqrt(n).

    Raises:
        ValueError: on an empty sequence or a confidence outside (0, 1).
    """
    if not values:
        raise ValueError("no values to estimate from")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}")
    n = len(values)
    mean = math.fsum(values) / n
    if n == 1:
        return Estimate(mean, None, 1)
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    quantile = float(stats.t.ppf(0.5 + confidence / 2.0, n - 1))
    return Estimate(mean, quantile * math.sqrt(variance / n), n)
