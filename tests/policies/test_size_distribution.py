"""Size distributions: remaining work and Gittins rank given attained service."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.policies.parts.size_distribution import SizeDistribution


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


@st.composite
def distributions(draw: st.DrawFn) -> SizeDistribution:
    """Up to 120 weighted samples, spread over ten orders of magnitude."""
    sizes = draw(st.lists(st.floats(1e-3, 1e7, allow_nan=False), min_size=1, max_size=120))
    weights = draw(st.lists(st.floats(1e-6, 1e3, allow_nan=False), min_size=len(sizes), max_size=len(sizes)))
    return SizeDistribution(sizes, weights)


@settings(max_examples=300, deadline=None)
@given(distributions(), st.data())
def test_rank_is_the_definition_at_samples_and_within_roundings_between(dist: SizeDistribution,
                                                                         data: st.DataObject) -> None:
    values, w = dist.values, dist.weights
    between = [data.draw(st.floats(0.0, 1e7, allow_nan=False)) for _ in range(5)]
    just_before = [float(np.nextafter(value, 0.0)) for value in values]  # the envelope's far end
    # Asked in a shuffled order: a stretch's envelope must not depend on which rank was asked first.
    attained_values = data.draw(st.permutations([0.0, *values[:-1].tolist(), *between, *just_before]))
    for attained in attained_values:
        rank = dist.gittins_rank(attained)
        if attained >= values[-1]:  # past every sample
            assert rank == 0.5 * attained
        elif attained == 0.0 or attained in values:  # a stretch's start: the definition, bit for bit
            assert rank == _reference_rank(values, w, attained)
        else:
            assert rank == pytest.approx(_reference_rank(values, w, attained), rel=1e-12, abs=0.0)


def _reference_rank(values: np.ndarray, w: np.ndarray, attained: float) -> float:
    """The Gittins rank by its definition, as numpy works it out in one go."""
    k = int(np.searchsorted(values, attained, side="right"))
    rest, tail_w = values[k:] - attained, w[k:]
    done_w = np.cumsum(tail_w)
    return float(np.min((np.cumsum(tail_w * rest) + (done_w[-1] - done_w) * rest) / done_w))


@settings(max_examples=300, deadline=None)
@given(distributions(), st.data())
def test_a_rank_line_gives_the_rank_bit_for_bit_wherever_it_holds(dist: SizeDistribution,
                                                                    data: st.DataObject) -> None:
    assert dist.largest == dist.values[-1]
    values = dist.values.tolist()
    for attained in [0.0, *values, *data.draw(st.lists(st.floats(0.0, 1.2e7, allow_nan=False), max_size=8))]:
        value, line = dist.gittins_line(attained)
        assert value == dist.gittins_rank(attained)
        if attained >= dist.largest or attained == 0.0 or attained in values:
            assert line is None  # past every sample, or a stretch's start: no line
            continue
        assert line is not None and line.holds(attained)
        # Service a little further on, as a running job's grows between events.
        for later in np.linspace(attained, line.end, 7).tolist():
            if line.holds(later):
                assert line.intercept + line.slope * (line.end - later) == dist.gittins_rank(later)


def test_a_rank_line_stops_at_its_stretch_and_its_breaks() -> None:
    dist = SizeDistribution([1.0, 2.0, 4.0, 8.0])
    _, line = dist.gittins_line(2.5)
    assert line is not None and (line.start, line.end) == (2.0, 4.0)
    assert line.holds(2.5) and not line.holds(2.0) and not line.holds(4.0) and not line.holds(1.5)
    assert dist.gittins_line(8.0) == (4.0, None)  # past every sample: half the service again


@settings(max_examples=300, deadline=None)
@given(distributions(), st.data())
def test_the_rank_bound_is_the_lesser_of_two_ratios_just_raised_and_above_the_rank(
        dist: SizeDistribution, data: st.DataObject) -> None:
    extra = data.draw(st.lists(st.floats(0.0, 1.2e7, allow_nan=False), max_size=8))
    values, weights = dist.values, dist.weights
    for attained in [0.0, *values.tolist(), *extra]:
        bound, rank = dist.rank_bound(attained), dist.gittins_rank(attained)
        if attained >= dist.largest:
            assert bound == rank == 0.5 * attained  # past every sample: the rank itself
            continue
        expected = dist.expected_remaining(attained)  # the quantum to the job's end
        k = int(np.searchsorted(values, attained, side="right"))
        to_next = (values[k] - attained) * weights[k:].sum() / weights[k]  # the quantum to the next sample
        assert rank < bound
        assert min(expected, to_next) < bound
        assert bound <= min(expected + 2e-9 * (attained + expected), to_next * (1 + 2e-9))


@settings(max_examples=300, deadline=None)
@given(distributions(), st.data())
def test_the_rank_bound_only_falls_from_where_it_was_worked_out_to_the_next_sample(
        dist: SizeDistribution, data: st.DataObject) -> None:
    values = dist.values.tolist()
    extra = data.draw(st.lists(st.floats(0.0, 1.2e7, allow_nan=False), max_size=8))
    for attained in [0.0, *values, *extra]:
        bound, until = dist.rank_bound_stretch(attained)
        assert bound == dist.rank_bound(attained)
        if attained >= dist.largest:
            assert until == attained  # past every sample the bound grows: it holds nowhere further
            continue
        assert until == min(v for v in values if v > attained)  # the next sample
        later = data.draw(st.lists(st.floats(attained, until, exclude_max=True), max_size=8))
        # Every service to the next sample, and the floats right after ``attained`` and before it.
        for further in [*later, np.nextafter(attained, until), np.nextafter(until, attained)]:
            if attained <= further < until:
                assert dist.rank_bound(float(further)) <= bound


def _reference_bound(values: np.ndarray, weights: np.ndarray, attained: float) -> float:
    """`SizeDistribution.rank_bound` with its tail sums as numpy's cumulative sums from the end."""
    k = int(np.searchsorted(values, attained, side="right"))
    tail_weight = np.cumsum(weights[::-1])[::-1]
    tail_size = np.cumsum(weights[::-1] * values[::-1])[::-1]
    mean_tail = tail_size[k] / tail_weight[k]
    to_end = mean_tail - attained + 1e-9 * mean_tail
    to_next = (values[k] - attained) * (tail_weight[k] / weights[k]) * (1.0 + 1e-9)
    return float(min(to_end, to_next))


@settings(max_examples=200, deadline=None)
@given(distributions(), st.data())
def test_sums_over_samples_are_numpys_bit_for_bit(dist: SizeDistribution, data: st.DataObject) -> None:
    values, weights = dist.values, dist.weights
    cumulative = np.cumsum(weights)
    assert dist.median() == float(values[int(np.searchsorted(cumulative, 0.5 * cumulative[-1]))])
    # The same samples taken as sorted (a Kaplan-Meier estimate's way in) give the same bits.
    as_sorted = SizeDistribution(values.tolist(), weights.tolist(), assume_sorted=True)
    assert as_sorted.median() == dist.median() and as_sorted.largest == dist.largest
    extra = data.draw(st.lists(st.floats(0.0, 1.2e7, allow_nan=False), max_size=8))
    for attained in [0.0, *values.tolist(), *extra]:
        assert as_sorted.gittins_line(attained) == dist.gittins_line(attained)
        assert as_sorted.rank_bound(attained) == dist.rank_bound(attained)
        if attained < dist.largest:
            assert dist.rank_bound(attained) == _reference_bound(values, weights, attained)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1e-3, 1e7, allow_nan=False), min_size=1, max_size=300))
def test_a_list_of_sizes_is_taken_as_an_array_of_them_is(sizes: list[float]) -> None:
    from_list, from_array = SizeDistribution(sizes), SizeDistribution(np.asarray(sizes))
    assert from_list.values.tolist() == from_array.values.tolist()
    assert from_list.weights.tolist() == from_array.weights.tolist()
    assert from_list.median() == from_array.median()
    assert from_list.gittins_line(0.0) == from_array.gittins_line(0.0)
