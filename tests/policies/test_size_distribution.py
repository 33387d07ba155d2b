"""Size distributions: remaining work and Gittins rank given attained service."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.policies.parts.size_distribution import (
    SizeDistribution,
    _short_tail_rank,
    _short_tail_weights,
    _tail_rank,
    _tail_weights,
)


def test_point_mass_rank_is_the_remaining_size() -> None:
    exact = SizeDistribution.point(100.0)
    assert exact.gittins_rank(0.0) == exact.expected_remaining(0.0) == 100.0
    assert exact.gittins_rank(30.0) == exact.expected_remaining(30.0) == 70.0


def test_two_sizes_rank_favours_the_chance_of_finishing_soon() -> None:
    sizes = SizeDistribution([10.0, 1.0])
    # Quantum 1: half the jobs finish after 1 s of expected service -> 1 / 0.5.
    assert sizes.gittins_rank(0.0) == pytest.approx(2.0)
    assert sizes.expected_remaining(0.0) == pytest.approx(5.5)
    assert sizes.gittins_rank(0.5) == pytest.approx(1.0)
    # Past the short size, only the long one is left: censoring at 1 s.
    assert sizes.gittins_rank(1.0) == pytest.approx(9.0)
    assert sizes.expected_remaining(4.0) == pytest.approx(6.0)


def test_weights_shift_the_rank() -> None:
    likely_long = SizeDistribution([1.0, 10.0], [1.0, 9.0])
    assert likely_long.gittins_rank(0.0) == pytest.approx(min(1.0 / 0.1, (0.1 + 9.0) / 1.0))
    assert likely_long.expected_remaining(0.0) == pytest.approx(9.1)


def test_past_every_sample_the_job_runs_a_multiple_longer() -> None:
    sizes = SizeDistribution([1.0, 2.0], beyond_factor=0.5)
    assert sizes.gittins_rank(8.0) == sizes.expected_remaining(8.0) == 4.0


def test_bad_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="one weight per sample"):
        SizeDistribution([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="one weight per sample"):
        SizeDistribution([])


SIZES = st.lists(st.floats(1e-3, 1e7, allow_nan=False), min_size=1, max_size=120)


@settings(max_examples=300, deadline=None)
@given(SIZES, st.data())
def test_short_tails_rank_bit_for_bit_as_numpy(sizes: list[float], data: st.DataObject) -> None:
    weights = data.draw(st.lists(st.floats(1e-6, 1e3, allow_nan=False), min_size=len(sizes),
                                 max_size=len(sizes)))
    dist = SizeDistribution(sizes, weights)
    values, w = dist.values, dist.weights
    for attained in (0.0, data.draw(st.floats(0.0, 1e7, allow_nan=False)), *values[:-1].tolist()):
        k = int(np.searchsorted(values, attained, side="right"))
        if k == len(values):  # past every sample
            assert SizeDistribution(sizes, weights).gittins_rank(attained) == 0.5 * attained
            continue
        numpy_rank = _tail_rank(values[k:] - attained, w[k:], *_tail_weights(w[k:]))
        python_rank = _short_tail_rank(values.tolist(), w.tolist(), k, attained,
                                       *_short_tail_weights(w[k:].tolist()))
        assert python_rank == numpy_rank  # the same bits, not just close
        assert SizeDistribution(sizes, weights).gittins_rank(attained) == numpy_rank
        assert dist.gittins_rank(attained) == _reference_rank(values, w, attained)  # kept tails too


def _reference_rank(values: np.ndarray, w: np.ndarray, attained: float) -> float:
    """The Gittins rank as numpy works it out in one go (what the kept tails must reproduce)."""
    k = int(np.searchsorted(values, attained, side="right"))
    rest, tail_w = values[k:] - attained, w[k:]
    done_w = np.cumsum(tail_w)
    return float(np.min((np.cumsum(tail_w * rest) + (done_w[-1] - done_w) * rest) / done_w))
