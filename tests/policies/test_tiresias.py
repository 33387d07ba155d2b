"""Tiresias worked cases from baselines.md A.7 (T1-T3), on exact ideal speeds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rackwise
from policy_spy import Spy
from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.perf.base import IdealPerf
from rackwise.policies.base import Decisions, PolicyWrapper
from rackwise.policies.parts.las_queues import LasQueues
from rackwise.policies.parts.ordering import preempt_to_order
from rackwise.policies.registry import make_policy
from rackwise.policies.tiresias import Tiresias
from rackwise.sim.engine import Simulator, simulate
from rackwise.workload.job import Job

EXACT = IdealPerf(checkpoint_restore_s=0.0)


def run(jobs: list[Job], policy: Tiresias, n_gpus_per_node: int = 4,
        watch: str = "J1") -> tuple[dict, Spy, list[tuple[float, int | None]]]:
    """Run on one server; return records by id, the spy, and (time, queue of `watch`) per step."""
    spy = Spy(policy)
    queues: list[tuple[float, int | None]] = []

    def observe(sim: Simulator) -> None:
        queues.append((sim.now, policy.queue_of(watch)))

    sim = Simulator(uniform_cluster(1, n_gpus_per_node, 1), jobs, spy, perf=EXACT,  # type: ignore[arg-type]
                    observers=[observe])
    result = sim.run()
    return {r.job_id: r for r in result.records}, spy, queues


def queue_at(queues: list[tuple[float, int | None]], t: float) -> int | None:
    return [q for now, q in queues if now == t][-1]


class _EagerQueues(LasQueues):
    def _demotions_matter(self) -> bool:
        return True


class EagerTiresias(Tiresias):
    """Asks to be woken at every demotion, including those that change no decision."""

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        queues = self.queues_
        self.queues_ = _EagerQueues(queues.limits, queues.promote_knob, queues.running_first, queues.place)


@pytest.mark.parametrize(("n_gpus", "demote_s"), [(8, 450.0), (3, 1200.0), (1, 3600.0)])
def test_t1_demotion_after_3600_gpu_seconds(n_gpus: int, demote_s: float) -> None:
    records, spy, queues = run([Job("J1", 0.0, n_gpus, 5000.0)], EagerTiresias(), n_gpus_per_node=8)
    # The first decision starts J1 and asks to be woken at the crossing.
    now, first = spy.decisions[0]
    assert now == 0.0 and [s.job_id for s in first.start] == ["J1"]
    assert first.wake_at == demote_s
    assert [t for t, _ in queues] == [0.0, demote_s, 5000.0]
    assert queue_at(queues, 0.0) == 0
    assert queue_at(queues, demote_s) == 1
    # In the last queue there is nothing left to wake for.
    assert spy.decisions[1][1].wake_at is None
    assert records["J1"].finish_time == 5000.0 and records["J1"].n_preemptions == 0


def test_t2_demotion_preempts_for_a_q1_job() -> None:
    jobs = [Job("J1", 0.0, 4, 2000.0), Job("J2", 100.0, 4, 200.0)]
    records, spy, queues = run(jobs, Tiresias())
    # Alone, J1 needs no wake-up; J2 waits behind it in Q1, so its demotion then matters.
    assert [d.wake_at for _, d in spy.decisions[:2]] == [None, 900.0]
    assert queue_at(queues, 100.0) == 0  # J2 waits: both in Q1, J1 came first
    assert queue_at(queues, 900.0) == 1
    at_900 = next(d for t, d in spy.decisions if t == 900.0)
    assert at_900.preempt == ("J1",) and [s.job_id for s in at_900.start] == ["J2"]
    j1, j2 = records["J1"], records["J2"]
    assert (j2.first_start, j2.finish_time) == (900.0, 1100.0)
    # J1 resumes at 1100 with 1100 s left.
    assert (j1.first_start, j1.finish_time, j1.n_preemptions) == (0.0, 2200.0, 1)
    assert j1.queueing_delay_s == 200.0 and j1.gpu_s == 8000.0


class LateRounds(PolicyWrapper):
    """Wakes the policy 5 s after each instant it asks for, as a live driver's round may."""

    def schedule(self, view, now):  # type: ignore[no-untyped-def]
        decisions = self.inner.schedule(view, now)
        if decisions.wake_at is None:
            return decisions
        return Decisions(start=decisions.start, preempt=decisions.preempt,
                         wake_at=decisions.wake_at + 5.0, unplaced=decisions.unplaced)


def test_a_demotion_read_after_its_instant_still_preempts() -> None:
    """T2 with every round 5 s late: J1's demotion at 900 s is read at 905 s, and acted on."""
    jobs = [Job("J1", 0.0, 4, 2000.0), Job("J2", 100.0, 4, 200.0)]
    result = simulate(uniform_cluster(1, 4, 1), jobs, LateRounds(Tiresias()), perf=EXACT)
    records = {r.job_id: r for r in result.records}
    assert (records["J2"].first_start, records["J2"].finish_time) == (905.0, 1105.0)
    # J1 ran 905 s; it resumes when J2 ends at 1105 and needs 1095 s more.
    assert (records["J1"].n_preemptions, records["J1"].finish_time) == (1, 2200.0)


def test_single_queue_is_fifo() -> None:
    jobs = [Job("J1", 0.0, 4, 2000.0), Job("J2", 100.0, 4, 200.0)]
    records, spy, _ = run(jobs, Tiresias(queue_limits_gpu_s=()))
    assert all(d.wake_at is None and not d.preempt for _, d in spy.decisions)
    assert (records["J1"].finish_time, records["J1"].n_preemptions) == (2000.0, 0)
    assert (records["J2"].first_start, records["J2"].finish_time) == (2000.0, 2200.0)


def _t3_jobs() -> list[Job]:
    # Ten Q1 jobs of 750 s (3000 GPU-s, never demoted) keep the server busy until 8400.
    return [Job("J1", 0.0, 4, 2000.0)] + [Job(f"A{i}", 100.0, 4, 750.0) for i in range(10)]


def test_t3_promotion_after_eight_times_run_time() -> None:
    # Eager, to see the demotion at 9300 that nothing waits for.
    records, spy, queues = run(_t3_jobs(), EagerTiresias())
    at_900 = next(d for t, d in spy.decisions if t == 900.0)
    assert at_900.preempt == ("J1",)
    # Preempted at 900 after 900 s of running: eligible once it has waited 8 * 900 s.
    assert 8100.0 in {d.wake_at for _, d in spy.decisions}
    assert 8100.0 in [t for t, _ in queues]  # no other event falls there
    assert all(q == 1 for t, q in queues if 900.0 <= t < 8100.0)
    assert queue_at(queues, 8100.0) == 0
    # Promoted to the back of Q1: the last A job (in Q1 since 100) keeps the server.
    assert records["A9"].finish_time == 8400.0
    j1 = records["J1"]
    assert (j1.finish_time, j1.n_preemptions) == (9500.0, 1)
    # A fresh Q1 quantum: 3600 GPU-s more before it is demoted again, at 8400 + 900.
    assert queue_at(queues, 8400.0) == 0
    assert queue_at(queues, 9300.0) == 1


def test_t3_without_promotion_j1_stays_in_q2() -> None:
    records, spy, queues = run(_t3_jobs(), Tiresias(promote_knob=None))
    assert 8100.0 not in {d.wake_at for _, d in spy.decisions}
    assert 8100.0 not in [t for t, _ in queues]
    assert all(q == 1 for t, q in queues if 900.0 <= t < 9500.0)
    assert records["J1"].finish_time == 9500.0


def test_no_head_of_line_blocking() -> None:
    jobs = [Job("J1", 0.0, 4, 2000.0), Job("J2", 10.0, 8, 300.0), Job("J3", 20.0, 2, 100.0)]
    records, _, _ = run(jobs, Tiresias(), n_gpus_per_node=8)
    # J2 cannot fit beside J1, but the smaller J3 behind it runs at once.
    assert (records["J3"].first_start, records["J3"].finish_time) == (20.0, 120.0)
    # J1 is demoted at 900 behind J2, which takes the whole server.
    assert (records["J2"].first_start, records["J2"].finish_time) == (900.0, 1200.0)
    assert (records["J1"].finish_time, records["J1"].n_preemptions) == (2300.0, 1)


def test_three_queues_demote_one_at_a_time() -> None:
    _records, spy, queues = run([Job("J1", 0.0, 2, 10000.0)],
                               EagerTiresias(queue_limits_gpu_s=(1000.0, 5000.0)))
    assert queue_at(queues, 500.0) == 1
    assert queue_at(queues, 2500.0) == 2
    assert [d.wake_at for _, d in spy.decisions][:3] == [500.0, 2500.0, None]


def test_a_demotion_no_pending_job_can_use_waits_for_the_next_event() -> None:
    # J1 crosses 1000 GPU-s at 500 and 5000 at 2500 with nothing waiting: no wake-up.
    jobs = [Job("J1", 0.0, 2, 10000.0), Job("J2", 3000.0, 1, 10.0)]
    records, spy, queues = run(jobs, Tiresias(queue_limits_gpu_s=(1000.0, 5000.0)))
    assert [t for t, _ in queues] == [0.0, 3000.0, 3010.0, 10000.0]
    assert all(d.wake_at is None for _, d in spy.decisions)
    # Both demotions are applied at J2's arrival, the second timed from the first.
    assert queue_at(queues, 3000.0) == 2
    assert records["J1"].finish_time == 10000.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), limits=st.sampled_from([(600.0,), (600.0, 4000.0), (300.0, 900.0, 5000.0)]),
       knob=st.sampled_from([None, 0.0, 2.0]), running_first=st.booleans(),
       placement=st.sampled_from(["consolidated", "first-fit", "best-fit", "random"]))
def test_lazy_demotions_give_the_records_of_waking_at_every_one(
        seed: int, limits: tuple[float, ...], knob: float | None, running_first: bool,
        placement: str) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    submit = np.cumsum(rng.exponential(60.0, n))
    widths = rng.choice([1, 1, 2, 3, 4, 8], n)
    durations = rng.lognormal(np.log(600.0), 1.0, n)
    jobs = [Job(f"j{i:02d}", float(submit[i]), int(widths[i]), float(durations[i])) for i in range(n)]
    params = {"queue_limits_gpu_s": limits, "promote_knob": knob, "running_first": running_first,
                  "placement": placement}
    perf = IdealPerf(checkpoint_restore_s=10.0)
    lazy = Simulator(uniform_cluster(3, 4, 2), jobs, Tiresias(**params), perf=perf, seed=seed).run()
    eager = Simulator(uniform_cluster(3, 4, 2), jobs, EagerTiresias(**params), perf=perf, seed=seed).run()
    assert lazy.records == eager.records
    assert lazy.n_steps <= eager.n_steps


def test_registered_and_parameters_validated() -> None:
    policy = make_policy("tiresias", queue_limits_gpu_s=[1800, 7200], promote_knob=None)
    assert isinstance(policy, Tiresias) and policy.queue_limits_gpu_s == (1800.0, 7200.0)
    with pytest.raises(InputError, match="queue_limits_gpu_s"):
        simulate(uniform_cluster(1, 4, 1), [Job("J1", 0.0, 1, 10.0)],
                 Tiresias(queue_limits_gpu_s=(7200.0, 3600.0)))


class _Crosscheck(Tiresias):
    """Checks every decision against `preempt_to_order` over the full rank order."""

    def schedule(self, view, now):  # type: ignore[no-untyped-def]
        import rackwise.policies.parts.las_queues as module

        real = module.preempt_ranked

        def both(view_, keys, gpus, queue, place, total):  # type: ignore[no-untyped-def]
            assert total == sum(gpus)
            active = [*view_.running.values(), *view_.pending.values()]
            order = sorted(active, key=lambda s: self.queues_.key_of[s.job_id])
            fast = real(view_, keys, gpus, queue, place, total)
            slow = preempt_to_order(view_, order, place)
            assert (fast.start, fast.preempt) == (slow.start, slow.preempt), now
            self.n_checked_ += 1
            self.n_preempted_ += len(fast.preempt)
            return fast

        module.preempt_ranked = both
        try:
            return super().schedule(view, now)
        finally:
            module.preempt_ranked = real


# Replacing `preempt_ranked` to check its answers: the compiled build (setup.py) calls it directly.
@pytest.mark.skipif(rackwise.is_compiled(), reason="checks need the plain-Python build")
def test_fast_ranking_matches_preempt_to_order() -> None:
    rng = np.random.default_rng(11)
    n = 60
    submit = np.cumsum(rng.exponential(40.0, n))
    widths = rng.choice([1, 1, 2, 3, 4, 8], n)
    durations = rng.lognormal(np.log(900.0), 1.0, n)
    jobs = [Job(f"j{i:02d}", float(submit[i]), int(widths[i]), float(durations[i])) for i in range(n)]
    policy = _Crosscheck(queue_limits_gpu_s=(600.0, 4000.0), promote_knob=2.0)
    policy.n_checked_ = policy.n_preempted_ = 0
    Simulator(uniform_cluster(3, 4, 2), jobs, policy, perf=IdealPerf(checkpoint_restore_s=10.0)).run()
    assert policy.n_checked_ > 50 and policy.n_preempted_ > 10
