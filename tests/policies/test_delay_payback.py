"""dally's own-penalty timers and its pay-back test for preemption."""

from __future__ import annotations

import statistics
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.delay_helpers import HIGH, LOW, Run, SpanPerf, earlier_dally, job
from rackwise.cluster.topology import uniform_cluster
from rackwise.policies.delay import Dally
from rackwise.policies.delay_tuner import RunningMean, tune_timer

TOY = uniform_cluster(2, gpus_per_node=4, nodes_per_rack=2)
N0 = (0, 1, 2, 3)
TWO_RACKS = uniform_cluster(4, gpus_per_node=4, nodes_per_rack=2)


def _blocked(c_model: str) -> list:
    """On two racks of two nodes: A (2 GPUs) on n0 until 100, B (2 GPUs) on n1 until 50,
    D1 and D2 fill the other rack; C (4 GPUs) arrives at t=1."""
    return [job("A", 0, 2, 100), job("A2", 0, 2, 1), job("B", 0, 2, 50),
            job("D1", 0, 4, 5000), job("D2", 0, 4, 5000), job("C", 1, 4, 100, HIGH, c_model)]


def test_a_job_with_a_small_own_penalty_does_not_wait() -> None:
    """C's model loses 5% on a rack (below no_wait_penalty 0.1) though 90% across racks: high.

    With its own penalty it takes the rack at once; by its class's timer alone it waits 30 s.
    """
    perf = SpanPerf({"x": (0.05, 0.9)})
    own = Run(TWO_RACKS, _blocked("x"), Dally(timer_high_s=(30.0, 30.0), preempt=False), perf)
    assert own.start("C") == (1.0, (2, 3, 6, 7))
    by_class = Dally(timer_high_s=(30.0, 30.0), preempt=False, own_penalty_timers=False)
    assert Run(TWO_RACKS, _blocked("x"), by_class, perf).start("C") == (31.0, (2, 3, 6, 7))


def test_a_job_with_a_large_own_penalty_waits_its_class_timer() -> None:
    """Alone in its class, C's penalty is the class median: factor 1, the 30 s timer."""
    perf = SpanPerf({"lm": (1.0, 1.0)})
    run = Run(TWO_RACKS, _blocked("lm"), Dally(timer_high_s=(30.0, 30.0), preempt=False), perf)
    assert run.start("C") == (31.0, (2, 3, 6, 7))


def _fragmented(h_gpus: int) -> list:
    """A (3 GPUs) on n0 until 10 and B (``h_gpus``) on n1; E (1 GPU, low) lands on n0's
    last GPU; F (4 GPUs, high) arrives at 700 and finds no free node."""
    return [job("A", 0, 3, 10, HIGH, "lm"), job("B", 0, h_gpus, 10_000, HIGH, "lm"),
            job("E", 0, 1, 2000, LOW, "resnet"), job("F", 700, 4, 1000, HIGH, "lm")]


def _payback() -> Dally:
    return Dally(timer_high_s=(30.0, 30.0), own_penalty_timers=False)


PERF = {"lm": (1.0, 1.0), "resnet": (0.05, 0.05)}


def test_a_victim_that_can_restart_at_once_is_moved() -> None:
    """On arrival, E moves to n1's free GPU and F takes n0: both in one decision.

    F's gain, 4 GPUs x σ 1.0 x 1,144 s, is far above E's cost, 1 GPU x 30 s restore.
    """
    run = Run(TOY, _fragmented(h_gpus=3), _payback(), SpanPerf(PERF))
    assert run.start("F") == (700.0, N0)
    assert run.placements["E"] == [(0.0, (3,)), (700.0, (7,))]
    assert run.records["E"].n_preemptions == 1


def test_no_eviction_when_the_victim_would_have_to_queue() -> None:
    """n1 is full: E could only wait in the queue, so F waits for it to finish instead;
    the earlier rule evicts E and leaves it queued until F ends."""
    run = Run(TOY, _fragmented(h_gpus=4), _payback(), SpanPerf(PERF))
    assert run.records["E"].n_preemptions == 0
    assert run.start("F") == (2000.0, N0)
    earlier = Run(TOY, _fragmented(h_gpus=4), earlier_dally(timer_high_s=(30.0, 30.0)),
                  SpanPerf(PERF))
    assert earlier.start("F") == (730.0, N0)
    assert earlier.records["E"].n_preemptions == 1


def test_no_eviction_when_it_does_not_pay_back() -> None:
    """With a 1,200 s restore, E's cost (1 x 1,200) tops F's gain (4 x 0.25 x 1,144)."""
    perf = SpanPerf({"lm": (0.25, 0.25), "resnet": (0.05, 0.05)}, restore_by_model={"resnet": 1200.0})
    run = Run(TOY, _fragmented(h_gpus=3), _payback(), perf)
    assert run.records["E"].n_preemptions == 0


def test_the_tuner_lengthens_a_timer_when_relaxing_lost_more() -> None:
    """Jobs that gave up the level lost 2,000 s on average, more than the 300 s timer:
    it jumps to 0.5 x 2,000 s (at least one step up); without losses no rule fires."""
    quiet = {"queue_trend": 0, "utilisation": 1.0}
    assert tune_timer(300.0, hindsight_s=[], won_wait_s=[], gain_s=100.0,
                      relaxed_loss_s=[1000.0, 3000.0], **quiet) == (1000.0, "relaxing-lost-more")
    assert tune_timer(900.0, hindsight_s=[], won_wait_s=[], gain_s=100.0,
                      relaxed_loss_s=[1000.0], **quiet) == (1125.0, "relaxing-lost-more")
    assert tune_timer(300.0, hindsight_s=[], won_wait_s=[], gain_s=100.0, **quiet) == (300.0, None)


def test_a_relaxed_job_reports_its_loss_when_it_finishes() -> None:
    """C (lm, σ 1.0 on the rack) gives up L0 at t=31 and runs 100 s of L0 work on the rack:
    it lost 100 s, which the tuner keeps as the measured gain of waiting at L0."""
    perf = SpanPerf({"lm": (1.0, 1.0)})
    policy = Dally(timer_high_s=(30.0, 30.0), preempt=False, autotune=True, tune_every_s=10_000.0)
    Run(TWO_RACKS, _blocked("lm"), policy, perf)
    assert policy.tuner_ is not None
    assert policy.tuner_.losses[("high", 0)].n == 1
    assert policy.tuner_.gain_s("high", 0) == pytest.approx(100.0)


_EXTRA_JOBS = st.lists(st.tuples(st.integers(0, 3000), st.sampled_from([1, 1, 2, 4]), st.integers(20, 3000),
                                 st.sampled_from([LOW, HIGH]), st.sampled_from(["lm", "resnet"])), max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([2, 3, 4]), _EXTRA_JOBS)
def test_refusing_an_eviction_when_fewer_gpus_are_free_than_asked_changes_no_decision(h_gpus, extra) -> None:
    """Victims need their GPUs back elsewhere, so a clearing can pay back only if the requester's
    GPU count is free now; refusing the others at once leaves every start and move as it was.

    The fragmented cluster of the tests above, with other jobs coming and going: some runs
    move a victim, and most evictions asked for are refused at once.
    """
    jobs = _fragmented(h_gpus) + [job(f"x{i}", submit, n_gpus, duration, sens, model)
                                  for i, (submit, n_gpus, duration, sens, model) in enumerate(extra)]
    fast = Run(TOY, jobs, _payback(), SpanPerf(PERF))
    with mock.patch.object(Dally, "_victims_could_move", staticmethod(lambda free, n_gpus: True)):
        every = Run(TOY, jobs, _payback(), SpanPerf(PERF))
    assert fast.records == every.records
    assert fast.placements == every.placements


@pytest.mark.parametrize(("h_gpus", "could_move"), [(3, True), (4, False)])
def test_the_victims_could_move_only_if_the_requesters_gpus_are_free(h_gpus: int, could_move: bool) -> None:
    """At F's arrival 4 GPUs are free with B on 3 GPUs (E moves), 3 with B on 4 (E would queue)."""
    asked: list[bool] = []
    real = Dally._victims_could_move

    def watched(free, n_gpus):  # type: ignore[no-untyped-def]
        asked.append(real(free, n_gpus))
        return asked[-1]

    with mock.patch.object(Dally, "_victims_could_move", staticmethod(watched)):
        run = Run(TOY, _fragmented(h_gpus), _payback(), SpanPerf(PERF))
    assert asked and asked[0] is could_move
    assert run.records["E"].n_preemptions == int(could_move)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e12, 1e12, allow_nan=False), min_size=1, max_size=60))
def test_the_running_mean_is_fmean_of_the_series_bit_for_bit(values: list[float]) -> None:
    mean = RunningMean()
    for count, value in enumerate(values, start=1):
        mean.add(value)
        assert mean.n == count
        assert mean.mean() == statistics.fmean(values[:count])
