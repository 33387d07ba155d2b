"""Break-even initial timers of ``dally`` (digest §3.1 "Initial timers").

T[c][ℓ] = κ (σ_c(ℓ+1) − σ_c(ℓ)) D_c with κ = 0.5, σ_c the class's median
slowdowns and D_c its median L0 duration (1,144 s until a job of it
finished). Toy cluster as in test_delay: 1 rack x 2 nodes x 4 GPUs.
"""

from __future__ import annotations

import pytest

from policies.delay_helpers import MED, Run, SpanPerf, earlier_dally, job
from rackwise.cluster.topology import uniform_cluster
from rackwise.errors import InputError
from rackwise.policies.delay import Dally
from rackwise.policies.delay_tuner import ClassProfile, break_even_timer
from rackwise.policies.parts.locality import L0, L1
from rackwise.policies.registry import make_policy

TOY = uniform_cluster(2, gpus_per_node=4, nodes_per_rack=2)
TWO_RACKS = uniform_cluster(4, gpus_per_node=4, nodes_per_rack=2)


def break_even(**params: object) -> Dally:
    return earlier_dally(initial_timers="break-even", preempt=False, autotune=False, **params)


def test_break_even_timer_is_kappa_times_the_gain_clamped() -> None:
    assert break_even_timer(1000.0) == 500.0
    assert break_even_timer(1000.0, kappa=0.25) == 250.0
    assert break_even_timer(-5.0) == 0.0
    assert break_even_timer(1e9) == 14_400.0


def test_profile_uses_medians_and_the_default_duration() -> None:
    profile = ClassProfile(("high",), default_duration_s=1144.0)
    assert not profile.seen("high") and profile.gain_s("high", L0) == 0.0
    for sigma in [(0.0, 0.6, 2.0), (0.0, 0.2, 1.0), (0.0, 0.4, 1.2)]:
        profile.note_sigma("high", sigma)
    profile.note_sigma("low", (0.0, 0.1, 0.1))  # not profiled: ignored
    assert profile.seen("high") and not profile.seen("low")
    assert profile.duration_s("high") == 1144.0
    assert profile.gain_s("high", L0) == pytest.approx(0.4 * 1144.0)
    profile.note_finish("high", 3000.0)
    profile.note_finish("high", 1000.0)
    assert profile.duration_s("high") == 2000.0  # median of two
    assert profile.gain_s("high", L0) == pytest.approx(0.4 * 2000.0)
    assert profile.gain_s("high", L1) == pytest.approx((1.2 - 0.4) * 2000.0)


def test_timers_equal_the_hand_computed_table() -> None:
    """Known σ from the perf model, known D from finished jobs: T = 0.5 Δσ D per level.

    lm on 4 GPUs: σ = (0, 0.4, 1.0) -> high; bert: σ = (0, 0.1, 0.3) -> med.
    Each class has two finished jobs; no low job enters the table.
    """
    perf = SpanPerf({"lm": (0.4, 1.0), "bert": (0.1, 0.3)})
    jobs = [job("h1", 0, 4, 1000, model="lm"), job("h2", 0, 4, 3000, model="lm"),
            job("m1", 0, 4, 600, model="bert"), job("m2", 0, 4, 1000, model="bert"),
            job("l1", 0, 4, 50_000)]
    policy = break_even()
    Run(TWO_RACKS, jobs, policy, perf)
    assert policy.delay.timers["high"] == pytest.approx([0.5 * 0.4 * 2000, 0.5 * 0.6 * 2000])  # 400, 600
    assert policy.delay.timers["med"] == pytest.approx([0.5 * 0.1 * 800, 0.5 * 0.2 * 800])  # 40, 80
    assert policy.delay.timers["low"] == [0.0, 0.0]


def _blocked_c(c_submit: float) -> list:
    """A on n0 and B on n1 hold 2 GPUs each for long; C (4 GPUs, lm) must wait for a node."""
    return [job("A", c_submit - 1, 2, 10_000), job("A2", c_submit - 1, 2, 1),
            job("B", c_submit - 1, 2, 10_000), job("C", c_submit, 4, 100, model="lm")]


@pytest.mark.parametrize(("initial_timers", "wait_s"), [("table", 1800.0), ("break-even", 286.0)])
def test_a_job_waits_its_break_even_time_before_spreading(initial_timers: str, wait_s: float) -> None:
    """On one rack lm's σ is (0, 0.5, 0.5): high; no high job finished, so D = 1,144 s.

    Break-even: T(L0) = 0.5 x 0.5 x 1,144 = 286 s, where the table says 1,800 s.
    """
    perf = SpanPerf({"lm": (0.5, 0.5)})
    policy = earlier_dally(initial_timers=initial_timers, preempt=False, autotune=False)
    run = Run(TOY, _blocked_c(1.0), policy, perf)
    assert run.start("C") == (pytest.approx(1.0 + wait_s), (2, 3, 6, 7))


def test_finished_jobs_of_the_class_set_the_duration() -> None:
    """H (lm, 400 s) finishes first: D = 400, so C waits 0.5 x 0.5 x 400 = 100 s."""
    perf = SpanPerf({"lm": (0.5, 0.5)})
    jobs = [job("H", 0, 4, 400, model="lm"), *_blocked_c(501.0)]
    run = Run(TOY, jobs, break_even(), perf)
    assert run.start("C") == (pytest.approx(601.0), (2, 3, 6, 7))


def test_classes_not_seen_yet_keep_the_table() -> None:
    perf = SpanPerf({"lm": (0.5, 0.5)})
    policy = break_even()
    Run(TOY, [job("H", 0, 4, 400, model="lm")], policy, perf)
    assert policy.delay.timers["high"] == pytest.approx([100.0, 0.0])  # σ(L2) = σ(L1) on one rack
    assert policy.delay.timers["med"] == [300.0, 300.0]


def test_the_tuner_starts_from_the_break_even_timers() -> None:
    """Med jobs (σ = 0, 0.15, 0.3 from comm_sensitivity) get 0.5 x 0.15 x 1,144 = 85.8 s.

    A and B leave one GPU per node. M1 waits 85.8 s for a node, then takes
    the rack. The first epoch ends at t=100, after the med class was seen:
    from then on the tuner owns its timers. M2 gives up on L1 at 191.6 and a
    slot comes at 195.8 (M1 ends), so at t=200 the tuner lengthens the
    break-even value it started from.
    """
    jobs = [job("A", 0, 3, 1000), job("B", 0, 3, 1000), job("M1", 10, 2, 100, MED),
            job("M2", 20, 2, 100, MED), job("M3", 30, 2, 100, MED)]
    policy = earlier_dally(initial_timers="break-even", preempt=False, tune_every_s=100.0)
    run = Run(TOY, jobs, policy)
    assert run.start("M1") == (pytest.approx(10.0 + 85.8), (3, 7))
    [update] = policy.timer_log
    assert (update.time, update.cls, update.level, update.reason) == (
        200.0, "med", L1, "gave-up-too-early")
    assert (update.old_s, update.new_s) == (pytest.approx(85.8), pytest.approx(85.8 * 1.25))
    # M1's finish (D = 100 s) no longer moves them: break-even alone would now say 7.5 s
    assert policy.delay.timers["med"] == pytest.approx([85.8, 85.8 * 1.25])
    assert policy.delay.timers["high"] == [1800.0, 1800.0]  # no high job: the table


def test_break_even_runs_repeat() -> None:
    perf_models = {"lm": (0.6, 1.2), "bert": (0.2, 0.35)}
    jobs = [job(f"j{i:02d}", 37.0 * i % 3000, (1, 2, 4, 6, 8)[i % 5], 50.0 + 97.0 * i % 2900,
                model=("lm", "bert", "cnn")[i % 3]) for i in range(40)]
    policy = earlier_dally(initial_timers="break-even", tune_every_s=600.0)
    first = Run(TWO_RACKS, jobs, policy, SpanPerf(perf_models))
    second = Run(TWO_RACKS, jobs, earlier_dally(initial_timers="break-even", tune_every_s=600.0),
                 SpanPerf(perf_models))
    assert first.records == second.records


def test_the_option_is_validated_and_the_table_is_the_default() -> None:
    assert Dally().initial_timers == "table"
    assert make_policy("dally", initial_timers="break-even").initial_timers == "break-even"
    with pytest.raises(InputError):
        make_policy("dally", initial_timers="breakeven")
