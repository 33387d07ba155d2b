"""Utilisation over a run, and over the window in which jobs arrive."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackwise.metrics.records import Timeline
from rackwise.metrics.summary import utilisation


def timeline(times: list[float], busy: list[int]) -> Timeline:
    return Timeline(time=times, busy_gpus=busy, n_pending=[0] * len(times), n_running=[0] * len(times))


def test_a_count_holds_until_the_next_event() -> None:
    run = timeline([0.0, 10.0, 30.0], [4, 2, 0])
    assert utilisation(run, 4) == pytest.approx((4 * 10 + 2 * 20) / (4 * 30))


def test_a_window_counts_only_the_time_inside_it() -> None:
    run = timeline([0.0, 10.0, 30.0], [4, 2, 0])
    assert utilisation(run, 4, 5.0, 15.0) == pytest.approx((4 * 5 + 2 * 5) / (4 * 10))
    # After the last event the last count holds.
    assert utilisation(run, 4, 25.0, 40.0) == pytest.approx((2 * 5 + 0 * 10) / (4 * 15))
    assert utilisation(run, 4, 7.0, 7.0) == 0.0


@given(st.lists(st.tuples(st.floats(0.1, 100.0), st.integers(0, 8)), min_size=2, max_size=20))
def test_the_whole_run_as_a_window_gives_the_plain_figure(steps: list[tuple[float, int]]) -> None:
    times, now = [], 0.0
    for gap, _ in steps:
        times.append(now)
        now += gap
    run = timeline(times, [busy for _, busy in steps])
    assert utilisation(run, 8, times[0], times[-1]) == pytest.approx(utilisation(run, 8))
    assert 0.0 <= utilisation(run, 8) <= 1.0
