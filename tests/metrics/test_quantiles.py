"""The median and percentiles of a summary are numpy's, to the bit."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rackwise.metrics.quantiles import median, percentile

# Finite sums, and no negative zeros: a sort may order 0.0 and -0.0 otherwise than numpy's partition.
finite_lists = st.lists(st.floats(-1e300, 1e300).map(lambda x: x + 0.0),
                        min_size=1, max_size=40)


@given(finite_lists)
def test_the_median_is_numpys(values: list[float]) -> None:
    array = np.array(values)
    assert repr(median(np.sort(array))) == repr(float(np.median(array)))


@given(finite_lists, st.one_of(st.sampled_from([0, 1, 25, 50, 95, 99, 99.9, 100]), st.floats(0, 100)))
def test_a_percentile_is_numpys(values: list[float], q: float) -> None:
    array = np.array(values)
    assert repr(percentile(np.sort(array), q)) == repr(float(np.percentile(array, q)))


def test_a_job_lengths_percentiles_are_numpys() -> None:
    lengths = np.random.default_rng(0).lognormal(8, 2, size=10_001)
    ordered = np.sort(lengths)
    for q in (50, 95, 99):
        assert percentile(ordered, q) == float(np.percentile(lengths, q))
    assert median(ordered) == float(np.median(lengths))
    assert median(ordered[:-1]) == float(np.median(ordered[:-1]))  # an even count: the mean of two
