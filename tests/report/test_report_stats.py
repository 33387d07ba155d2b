"""Confidence intervals and the shrinking of data for plots, against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rackwise.report.series import cdf_levels, mean_quantiles, quantiles, resample_steps, time_edges
from rackwise.report.stats import t_interval


def test_t_interval_matches_a_hand_computation() -> None:
    # Values 10, 12, 14, 16: mean 13, sample variance (9+1+1+9)/3 = 20/3.
    # t(0.975, 3) = 3.182446 (tables); half-width = t * sqrt(20/3) / sqrt(4).
    estimate = t_interval([10.0, 12.0, 14.0, 16.0])
    assert estimate.mean == 13.0
    assert estimate.n == 4
    assert estimate.half_width == pytest.approx(3.182446305 * math.sqrt(20.0 / 3.0) / 2.0, rel=1e-8)
    assert estimate.half_width == pytest.approx(4.108521, abs=1e-6)
    assert (estimate.low, estimate.high) == pytest.approx((8.891479, 17.108521), abs=1e-6)


def test_t_interval_with_two_values_uses_one_degree_of_freedom() -> None:
    # t(0.975, 1) = 12.706205; s = sqrt(2) for 1 and 3; half-width = t * sqrt(2) / sqrt(2).
    assert t_interval([1.0, 3.0]).half_width == pytest.approx(12.706205, abs=1e-6)


def test_one_value_has_no_interval() -> None:
    estimate = t_interval([5.0])
    assert (estimate.mean, estimate.half_width, estimate.n) == (5.0, None, 1)
    assert (estimate.low, estimate.high) == (5.0, 5.0)


def test_identical_values_have_a_zero_interval() -> None:
    assert t_interval([2.0, 2.0, 2.0]).half_width == 0.0


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="no values"):
        t_interval([])
    with pytest.raises(ValueError, match="confidence"):
        t_interval([1.0, 2.0], confidence=1.5)


def test_cdf_levels_cover_both_ends_and_the_tail() -> None:
    levels = cdf_levels(100)
    assert levels[0] == 0.0 and levels[-1] == 1.0
    assert np.all(np.diff(levels) > 0)
    assert np.sum(levels > 0.99) >= 30  # the tail is drawn in detail


def test_quantiles_and_their_mean_over_seeds() -> None:
    levels = np.array([0.0, 0.5, 1.0])
    a = quantiles([1.0, 2.0, 3.0], levels)
    b = quantiles([3.0, 4.0, 5.0], levels)
    assert a.tolist() == [1.0, 2.0, 3.0]
    assert mean_quantiles([a, b]).tolist() == [2.0, 3.0, 4.0]
    assert np.isnan(quantiles([], levels)).all()


def test_resample_steps_is_a_time_weighted_mean() -> None:
    # 4 on [0, 10), 2 on [10, 30), 0 from 30 on; bins of 15 s.
    edges = np.array([0.0, 15.0, 30.0, 45.0])
    means = resample_steps([0.0, 10.0, 30.0], [4.0, 2.0, 0.0], edges)
    assert means == pytest.approx([(4 * 10 + 2 * 5) / 15, 2.0, 0.0])


def test_resample_steps_before_the_first_sample_and_after_the_last() -> None:
    edges = np.array([0.0, 10.0, 20.0, 30.0])
    # Nothing before t=5; the last value (3) holds to the end of the grid.
    assert resample_steps([5.0, 15.0], [1.0, 3.0], edges) == pytest.approx([0.5, 2.0, 3.0])


def test_resample_preserves_the_integral_of_a_long_timeline() -> None:
    rng = np.random.default_rng(0)
    time = np.cumsum(rng.exponential(10.0, 150_000))
    time -= time[0]
    busy = rng.integers(0, 512, time.size).astype(float)
    edges = time_edges(float(time[-1]), 2000)
    means = resample_steps(time, busy, edges)
    assert means.shape == (2000,)
    exact = float(np.sum(busy[:-1] * np.diff(time)))
    assert float(np.sum(means * np.diff(edges))) == pytest.approx(exact, rel=1e-9)
