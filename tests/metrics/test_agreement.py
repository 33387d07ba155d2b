"""Tests for rackwise.metrics.agreement: two record sets of the same jobs compared, by hand."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from rackwise.metrics.agreement import compare_records, kendall_tau, same_order


@dataclass(frozen=True)
class Rec:
    job_id: str
    submit_time: float
    first_start: float
    finish_time: float

    @property
    def jct_s(self) -> float:
        return self.finish_time - self.submit_time


def test_per_job_and_average_differences_and_makespans() -> None:
    real = [Rec("a", 0.0, 2.0, 110.0), Rec("b", 10.0, 115.0, 215.0), Rec("c", 20.0, 4.0, 60.0)]
    sim = [Rec("a", 0.0, 0.0, 100.0), Rec("b", 10.0, 100.0, 200.0), Rec("c", 20.0, 20.0, 60.0)]
    agreement = compare_records(real, sim)
    # in the real run's start order: a (2), c (4), b (115)
    assert [j.job_id for j in agreement.jobs] == ["a", "c", "b"]
    assert [j.jct_diff_s for j in agreement.jobs] == [10.0, 0.0, 15.0]
    assert agreement.jobs[0].jct_rel == pytest.approx(0.1)
    assert agreement.jobs[1].start_diff_s == -16.0
    # mean JCT real (110 + 205 + 40) / 3, simulated (100 + 190 + 40) / 3
    assert agreement.avg_jct_real_s == pytest.approx(355 / 3)
    assert agreement.avg_jct_sim_s == pytest.approx(330 / 3)
    assert agreement.avg_jct_rel == pytest.approx(25 / 330)
    assert agreement.mean_abs_jct_diff_s == pytest.approx(25 / 3)
    assert (agreement.makespan_real_s, agreement.makespan_sim_s) == (215.0, 200.0)
    assert agreement.makespan_rel == pytest.approx(0.075)


def test_start_order_agreement_counts_swapped_pairs() -> None:
    """Real order a, c, b; simulated a, c, b but with a and c tied: 2 of 2 untied pairs agree."""
    real = [Rec("a", 0.0, 2.0, 110.0), Rec("b", 10.0, 115.0, 215.0), Rec("c", 20.0, 4.0, 60.0)]
    sim = [Rec("a", 0.0, 20.0, 100.0), Rec("b", 10.0, 100.0, 200.0), Rec("c", 20.0, 20.0, 60.0)]
    agreement = compare_records(real, sim)
    assert (agreement.same_order_share, agreement.n_pairs) == (1.0, 2)
    # one swap among four jobs: 5 of 6 pairs agree
    share, n_pairs = same_order(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 2.0, 4.0]))
    assert (share, n_pairs) == (5 / 6, 6)
    # tau-b without ties: (concordant - discordant) / pairs = (5 - 1) / 6
    assert kendall_tau(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 2.0, 4.0])) == pytest.approx(4 / 6)
    assert kendall_tau(np.arange(5.0), -np.arange(5.0)) == pytest.approx(-1.0)


def test_jobs_in_one_set_only_are_left_out_and_named() -> None:
    real = [Rec("a", 0.0, 0.0, 10.0), Rec("b", 0.0, 1.0, 20.0), Rec("x", 0.0, 0.0, 99.0)]
    sim = [Rec("a", 0.0, 0.0, 10.0), Rec("b", 0.0, 1.0, 10.0), Rec("y", 0.0, 0.0, 5.0)]
    agreement = compare_records(real, sim)
    assert (agreement.only_real, agreement.only_sim) == (("x",), ("y",))
    assert [j.job_id for j in agreement.jobs] == ["a", "b"]
    assert agreement.avg_jct_real_s == 15.0


def test_no_untied_pair_gives_nan() -> None:
    share, n_pairs = same_order(np.array([1.0, 1.0]), np.array([0.0, 5.0]))
    assert math.isnan(share) and n_pairs == 0


@pytest.mark.parametrize(("real", "message"), [
    ([Rec("a", 0.0, 0.0, 1.0), Rec("a", 0.0, 0.0, 2.0)], "job a appears twice in the real records"),
    ([Rec("a", 0.0, 0.0, 1.0)], "1 job"),
])
def test_bad_record_sets_are_refused(real: list[Rec], message: str) -> None:
    sim = [Rec("a", 0.0, 0.0, 1.0), Rec("b", 0.0, 0.0, 1.0)]
    with pytest.raises(ValueError, match=message):
        compare_records(real, sim)
