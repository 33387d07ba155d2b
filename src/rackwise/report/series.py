"""Shrinking per-job and per-step data to what a plot can show.

A full Philly run has about 82,000 jobs and 150,000 timeline samples; the
report draws each distribution from a few hundred quantiles and each
timeline from about 2,000 time bins, so its size does not grow with the run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def cdf_levels(n_points: int = 400) -> FloatArray:
    """Probabilities at which to draw a CDF: even steps, denser in the upper tail."""
    body = np.linspace(0.0, 1.0, n_points + 1)
    tail = 1.0 - np.logspace(-4.0, -2.0, 41)  # p99 to p99.99, where policies differ most
    return np.unique(np.concatenate([body, tail]))


def quantiles(values: Sequence[float] | FloatArray, levels: FloatArray) -> FloatArray:
    """Quantiles of ``values`` at ``levels`` (an empty input gives NaNs)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return np.full(levels.shape, np.nan)
    return np.quantile(data, levels)


def mean_quantiles(per_run: Sequence[FloatArray]) -> FloatArray:
    """One distribution for several seeds: the average of their quantile functions."""
    return np.mean(np.vstack(per_run), axis=0)


def time_edges(end_s: float, n_bins: int = 2000) -> FloatArray:
    """Bin edges from 0 to ``end_s`` (at least one second wide in all)."""
    return np.linspace(0.0, max(float(end_s), 1.0), n_bins + 1)


def resample_steps(time: Sequence[float] | FloatArray, values: Sequence[float] | FloatArray,
                   edges: FloatArray) -> FloatArray:
    """Time-weighted mean per bin of a step function.

    ``values[i]`` holds from ``time[i]`` until ``time[i + 1]``, and the last
    value holds beyond the last sample; before the first sample the value is 0.
    The integral of a step function is piecewise linear, so interpolating it
    at the bin edges is exact.
    """
    t = np.asarray(time, dtype=float)
    v = np.asarray(values, dtype=float)
    if t.size == 0:
        return np.zeros(len(edges) - 1)
    end = max(float(edges[-1]), float(t[-1]))
    knots = np.append(t, end)
    integral = np.concatenate([[0.0], np.cumsum(v * np.diff(knots))])
    at_edges = np.interp(edges, knots, integral, left=0.0, right=float(integral[-1]))
    widths = np.diff(edges)
    return np.diff(at_edges) / widths
