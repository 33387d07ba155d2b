"""The Kaplan-Meier class sizes behind A-SRPT's "survival" predictor."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackwise.policies.parts.class_sizes import ClassSizes
from rackwise.policies.parts.class_sizes import kaplan_meier as sorted_kaplan_meier
from rackwise.policies.parts.size_distribution import SizeDistribution


def kaplan_meier(values: np.ndarray, finished: np.ndarray, *, beyond_factor: float) -> SizeDistribution | None:
    """The estimator on jobs in any order, as `ClassSizes` hands them over: sorted, split by finish."""
    return sorted_kaplan_meier(sorted(values[finished].tolist()), sorted(values[~finished].tolist()),
                               beyond_factor=beyond_factor)


def array_kaplan_meier(values: np.ndarray, finished: np.ndarray, *,
                       beyond_factor: float) -> SizeDistribution | None:
    """The estimator as array operations, to check `kaplan_meier`'s loop against, bit for bit."""
    if not finished.any():
        return None
    order = np.lexsort((~finished, values))  # at equal values a finish comes first
    x, done = values[order], finished[order]
    at_risk = len(x) - np.arange(len(x))
    survival = np.cumprod(np.where(done, 1.0 - 1.0 / at_risk, 1.0))
    mass = np.concatenate(([1.0], survival[:-1])) - survival
    sizes, weights = x[done], mass[done]
    if survival[-1] > 0:
        sizes = np.append(sizes, (1.0 + beyond_factor) * float(x[-1]))
        weights = np.append(weights, float(survival[-1]))
    return SizeDistribution(sizes, weights, beyond_factor=beyond_factor)


def _mass(values: list[float], finished: list[bool], beyond: float = 0.5) -> dict[float, float]:
    dist = kaplan_meier(np.array(values), np.array(finished), beyond_factor=beyond)
    assert dist is not None
    mass: dict[float, float] = {}
    for value, weight in zip(dist.values, dist.weights):
        mass[float(value)] = mass.get(float(value), 0.0) + float(weight)
    return mass


def test_without_lower_bounds_it_is_the_sample_itself() -> None:
    assert _mass([4.0, 1.0, 2.0, 2.0], [True] * 4) == pytest.approx({1.0: 0.25, 2.0: 0.5, 4.0: 0.25})


def test_a_lower_bound_passes_its_share_to_the_larger_sizes() -> None:
    # The textbook case: 3, 5+, 6, 8+, 10 (+: still running). S(3) = 4/5, S(6) = 4/5 * 2/3, S(10) = 0.
    assert _mass([3.0, 5.0, 6.0, 8.0, 10.0], [True, False, True, False, True]) == pytest.approx(
        {3.0: 0.2, 6.0: 0.8 / 3, 10.0: 1.6 / 3})
    dist = kaplan_meier(np.array([3.0, 5.0, 6.0, 8.0, 10.0]), np.array([True, False, True, False, True]),
                        beyond_factor=0.5)
    assert dist is not None and dist.median() == 10.0  # the finished jobs' own median is 6


def test_mass_past_the_largest_lower_bound_sits_beyond_it() -> None:
    # Half the jobs outlive 4 and nothing says by how much: put at (1 + 0.5) * 4.
    assert _mass([2.0, 4.0], [True, False]) == pytest.approx({2.0: 0.5, 6.0: 0.5})


def test_nothing_finished_is_no_distribution() -> None:
    assert kaplan_meier(np.array([1.0, 2.0]), np.array([False, False]), beyond_factor=0.5) is None


@given(st.lists(st.tuples(st.floats(1.0, 1e6), st.booleans()), min_size=1, max_size=40))
def test_the_estimate_is_a_distribution_at_least_as_long_as_the_finished_jobs(
        jobs: list[tuple[float, bool]]) -> None:
    values = np.array([v for v, _ in jobs])
    finished = np.array([f for _, f in jobs])
    dist = kaplan_meier(values, finished, beyond_factor=0.5)
    if not finished.any():
        assert dist is None
        return
    assert dist is not None
    weights = dist.weights
    assert weights.sum() == pytest.approx(1.0) and (weights > 0).all()
    # Counting the running jobs as lower bounds can only lengthen the estimate (survivor bias removed).
    naive = float(values[finished].mean())
    assert float(np.dot(dist.values, weights)) >= naive * (1 - 1e-9)


@given(st.lists(st.tuples(st.one_of(st.integers(1, 6).map(float), st.floats(1.0, 1e6)), st.booleans()),
                min_size=1, max_size=60),
       st.floats(0.0, 2.0))
def test_the_loop_gives_the_array_formulation_bit_for_bit(jobs: list[tuple[float, bool]], beyond: float) -> None:
    """Ties between finished jobs and lower bounds included (small integer sizes draw them)."""
    values = np.array([v for v, _ in jobs])
    finished = np.array([f for _, f in jobs])
    got = kaplan_meier(values, finished, beyond_factor=beyond)
    want = array_kaplan_meier(values, finished, beyond_factor=beyond)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert got.values.tolist() == want.values.tolist() and got.weights.tolist() == want.weights.tolist()
    assert got.largest == want.largest and got.median() == want.median()


def test_class_sizes_keep_the_last_jobs_and_read_lower_bounds_when_asked() -> None:
    sizes = ClassSizes(window=2, beyond_factor=0.5)
    attained = {"b": 30.0, "c": 5.0}
    sizes.arrive("a", "vc")
    sizes.finish("a", "vc", 10.0)
    sizes.arrive("b", "vc")
    dist = sizes.distribution("vc", attained.__getitem__)
    assert dist is not None and list(dist.values) == [10.0, 45.0]  # b outlived a: beyond 30
    attained["b"] = 99.0
    assert sizes.distribution("vc", attained.__getitem__) is dist  # kept until the class changes
    sizes.arrive("c", "vc")  # a leaves the window of 2
    assert sizes.distribution("vc", attained.__getitem__) is None  # nothing in the window finished
    sizes.finish("a", "vc", 10.0)  # no longer counted
    sizes.finish("c", "vc", 8.0)
    dist = sizes.distribution("vc", attained.__getitem__)
    assert dist is not None and list(dist.values) == [8.0, 148.5]
    assert sizes.distribution("other", attained.__getitem__) is None


def test_a_class_is_worked_out_again_once_a_share_of_its_jobs_changed() -> None:
    sizes = ClassSizes(window=100, beyond_factor=0.5, refresh_share=0.1)
    attained = {f"j{i}": 0.0 for i in range(100)}.get
    for i in range(100):
        sizes.arrive(f"j{i}", "c")
    assert sizes.distribution("c", attained) is None  # nothing finished yet
    sizes.finish("j0", "c", 5.0)  # the first finish gives the class a distribution at once
    first = sizes.distribution("c", attained)
    assert first is not None and list(first.values) == [5.0]
    for i in range(1, 10):  # nine more changes: under a tenth of the 100 jobs
        sizes.finish(f"j{i}", "c", 5.0 + i)
        assert sizes.distribution("c", attained) is first
    sizes.finish("j10", "c", 15.0)  # the tenth
    again = sizes.distribution("c", attained)
    assert again is not first and again is not None and list(again.values) == [5.0 + i for i in range(11)]


def test_with_no_share_every_change_works_the_class_out_again() -> None:
    sizes = ClassSizes(window=10, beyond_factor=0.5)
    attained = {f"j{i}": 1.0 for i in range(3)}.get
    for i in range(3):
        sizes.arrive(f"j{i}", "c")
    sizes.finish("j0", "c", 2.0)
    before = sizes.distribution("c", attained)
    sizes.arrive("j3", "c")
    assert sizes.distribution("c", lambda job_id: 1.0) is not before



@given(st.lists(st.tuples(st.sampled_from(["arrive", "finish", "ask"]), st.integers(0, 1), st.integers(0, 40),
                          st.integers(1, 8).map(float)), max_size=80),
       st.integers(1, 6))
def test_a_distribution_is_the_estimate_over_the_window_as_it_stands(
        events: list[tuple[str, int, int, float]], window: int) -> None:
    """Whatever arrives, finishes (in the window or after leaving it) and leaves the window, a class's
    distribution is the array estimator's over its last ``window`` arrivals, bit for bit."""
    sizes = ClassSizes(window=window, beyond_factor=0.5)
    arrived: dict[int, list[str]] = {0: [], 1: []}
    counted: dict[str, float] = {}  # sizes of jobs that finished while in their class's window
    attained = {f"j{i}": float(i % 7) + 0.5 for i in range(100)}
    for n, (kind, job_class, which, size) in enumerate(events):
        members = arrived[job_class]
        if kind == "arrive":
            members.append(f"j{n}")
            sizes.arrive(f"j{n}", job_class)
        elif kind == "finish" and members:
            job_id = members[which % len(members)]
            if job_id not in counted and job_id not in members[-window:]:
                continue  # left the window unfinished: its finish counts for nothing
            if job_id not in counted:
                counted[job_id] = size
                sizes.finish(job_id, job_class, size)
        elif kind == "ask":
            in_window = members[-window:]
            values = np.array([counted.get(j, attained.get(j, 0.0)) for j in in_window], dtype=float)
            finished = np.array([j in counted for j in in_window], dtype=bool)
            want = array_kaplan_meier(values, finished, beyond_factor=0.5)
            got = sizes.distribution(job_class, attained.__getitem__)
            if want is None:
                assert got is None
            else:
                assert got is not None
                assert (got.values.tolist(), got.weights.tolist()) == (want.values.tolist(), want.weights.tolist())
