"""Tests for rackwise.sim.engine: worked cases of the simulator, computed by hand."""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackwise.cluster.topology import Topology, uniform_cluster
from rackwise.errors import InputError, InvalidDecisionError
from rackwise.metrics.records import JobRecord
from rackwise.perf.base import IdealPerf
from rackwise.policies.base import BasePolicy, Capabilities, Decisions, Start
from rackwise.policies.fifo import Fifo
from rackwise.policies.parts.placement import first_fit
from rackwise.sim import engine
from rackwise.sim.engine import SimulationStuckError, Simulator, simulate
from rackwise.workload.job import Job
from rackwise.workload.state import JobState
from strategies import topologies


@dataclass(kw_only=True)
class Scripted(BasePolicy):
    """Returns the decisions planned for each instant, and nothing otherwise."""

    name: ClassVar[str] = "scripted"
    preempts: ClassVar[bool] = True
    plan: dict[float, Decisions] = field(default_factory=dict)

    def reset(self, view: object, rng: np.random.Generator) -> None:  # type: ignore[override]
        super().reset(view, rng)  # type: ignore[arg-type]
        self.calls_: list[float] = []

    def schedule(self, view: object, now: float) -> Decisions:  # type: ignore[override]
        self.calls_.append(now)
        return self.plan.get(now, Decisions())


@dataclass(kw_only=True)
class Idle(BasePolicy):
    """Never starts anything."""

    name: ClassVar[str] = "idle"

    def schedule(self, view: object, now: float) -> Decisions:  # type: ignore[override]
        return Decisions()


def _by_id(records: Sequence[JobRecord]) -> dict[str, JobRecord]:
    return {r.job_id: r for r in records}


def _run(topology: Topology, jobs: list[Job], policy: BasePolicy, restore_s: float = 30.0,
         **kwargs: object) -> dict[str, JobRecord]:
    result = simulate(topology, jobs, policy, perf=IdealPerf(checkpoint_restore_s=restore_s), **kwargs)
    return _by_id(result.records)


# ---------------------------------------------------------------------------- plain runs


def test_single_job_runs_for_its_duration() -> None:
    """One job on an empty cluster: JCT equals its duration, no queueing, no overhead."""
    records = _run(uniform_cluster(1, gpus_per_node=4), [Job("a", 5.0, 2, 100.0)], Fifo())
    a = records["a"]
    assert (a.first_start, a.finish_time, a.jct_s) == (5.0, 105.0, 100.0)
    assert (a.queueing_delay_s, a.run_time_s, a.overhead_s) == (0.0, 100.0, 0.0)
    assert a.gpu_s == 200.0
    assert (a.n_preemptions, a.n_nodes, a.n_racks) == (0, 1, 1)


def test_job_queues_behind_a_full_cluster() -> None:
    """A job arriving at 10 on a cluster held until 100 starts at 100."""
    jobs = [Job("a", 0.0, 4, 100.0), Job("b", 10.0, 2, 50.0)]
    records = _run(uniform_cluster(1, gpus_per_node=4), jobs, Fifo())
    b = records["b"]
    assert (b.first_start, b.finish_time, b.jct_s, b.queueing_delay_s) == (100.0, 150.0, 140.0, 90.0)
    assert records["a"].finish_time == 100.0


def test_completion_frees_gpus_for_an_arrival_at_the_same_instant() -> None:
    """A job finishing at t=100 releases its GPUs to a job arriving at t=100."""
    jobs = [Job("a", 0.0, 2, 100.0), Job("b", 100.0, 2, 30.0)]
    result = simulate(uniform_cluster(1, gpus_per_node=2), jobs, Fifo())
    b = _by_id(result.records)["b"]
    assert (b.first_start, b.finish_time, b.queueing_delay_s) == (100.0, 130.0, 0.0)
    assert result.timeline.time == [0.0, 100.0, 130.0]
    assert result.timeline.busy_gpus == [2, 2, 0]


def test_input_order_does_not_matter() -> None:
    """Jobs given out of submit order are simulated in submit order."""
    jobs = [Job("late", 50.0, 1, 10.0), Job("early", 0.0, 1, 100.0)]
    records = _run(uniform_cluster(1, gpus_per_node=1), jobs, Fifo())
    assert records["early"].first_start == 0.0
    assert records["late"].first_start == 100.0


# ---------------------------------------------------------------- preemption and migration


def test_preemption_charges_the_restore_time_exactly() -> None:
    """Run 0-40, wait 40-60, restore 60-90, run 90-150: 30 s of overhead, JCT 150."""
    plan = {
        0.0: Decisions(start=(Start("a", (0, 1)),), wake_at=40.0),
        40.0: Decisions(preempt=("a",), wake_at=60.0),
        60.0: Decisions(start=(Start("a", (0, 1)),)),
    }
    a = _run(uniform_cluster(1, gpus_per_node=2), [Job("a", 0.0, 2, 100.0)], Scripted(plan=plan),
             restore_s=30.0)["a"]
    assert (a.first_start, a.finish_time, a.jct_s) == (0.0, 150.0, 150.0)
    assert (a.run_time_s, a.overhead_s, a.queueing_delay_s) == (130.0, 30.0, 20.0)
    assert a.gpu_s == 260.0
    assert a.n_preemptions == 1


def test_preemption_during_restore_charges_the_part_spent() -> None:
    """Preempted 10 s into a 30 s restore: 10 s are charged, then a full restore again."""
    plan = {
        0.0: Decisions(start=(Start("a", (0,)),), wake_at=40.0),
        40.0: Decisions(preempt=("a",), wake_at=60.0),
        60.0: Decisions(start=(Start("a", (0,)),), wake_at=70.0),
        70.0: Decisions(preempt=("a",), wake_at=80.0),
        80.0: Decisions(start=(Start("a", (0,)),)),
    }
    a = _run(uniform_cluster(1, gpus_per_node=1), [Job("a", 0.0, 1, 100.0)], Scripted(plan=plan),
             restore_s=30.0)["a"]
    # runs 0-40 (40 done), restores 60-70 (cut), restores 80-110, runs 110-170
    assert a.finish_time == 170.0
    assert (a.overhead_s, a.run_time_s, a.queueing_delay_s) == (40.0, 140.0, 30.0)
    assert (a.n_preemptions, a.gpu_s) == (2, 140.0)


def test_migration_moves_a_job_in_one_decision() -> None:
    """Preempt and start in one decision: the job moves at once and pays one restore."""
    plan = {
        0.0: Decisions(start=(Start("a", (0, 1)),), wake_at=40.0),
        40.0: Decisions(preempt=("a",), start=(Start("a", (2, 3)),)),
    }
    owners: list[tuple[float, tuple[str | None, ...]]] = []
    sim = Simulator(uniform_cluster(2, gpus_per_node=2), [Job("a", 0.0, 2, 100.0)],
                    Scripted(plan=plan), perf=IdealPerf(checkpoint_restore_s=30.0),
                    observers=[lambda s: owners.append((s.now, tuple(s.allocation.owner)))])
    a = _by_id(sim.run().records)["a"]
    assert owners[:2] == [(0.0, ("a", "a", None, None)), (40.0, (None, None, "a", "a"))]
    # 40 done, restore 40-70, 60 left: done at 130
    assert (a.finish_time, a.overhead_s, a.queueing_delay_s, a.n_preemptions) == (130.0, 30.0, 0.0, 1)
    assert a.gpu_s == 260.0


@dataclass(kw_only=True)
class PreemptOnce(Fifo):
    """FIFO, but ``a`` starts at 0 and is preempted at 10; keeps each call's start mark."""

    name: ClassVar[str] = "preempt-once"
    marks: list[tuple[int, int]] = field(default_factory=list)

    def schedule(self, view, now):  # type: ignore[no-untyped-def]
        self.marks.append(view.start_mark)
        if now == 0.0:
            return Decisions(start=(Start("a", (0,)),), wake_at=10.0)
        if now == 10.0:
            return Decisions(preempt=("a",))
        return super().schedule(view, now)


def test_preempted_job_can_be_restarted_by_fifo() -> None:
    """A preempted job goes back to the queue, and a plain policy restarts it."""
    # preempted at 10 with 10 done; the same step's schedule call ran before the
    # preemption, so FIFO restarts it at the next event: b's arrival at 20
    jobs = [Job("a", 0.0, 1, 50.0), Job("b", 20.0, 1, 5.0)]
    records = _run(uniform_cluster(1, gpus_per_node=1), jobs, PreemptOnce(), restore_s=5.0)
    assert records["a"].finish_time == 20.0 + 5.0 + 40.0
    assert records["b"].first_start == 65.0


def test_the_start_mark_counts_every_start_on_one_view() -> None:
    """As in the test above, a starts at 0, is preempted at 10 and starts again at 20, then b
    once a ends: the mark moves once per start, the restart included, and keeps the view's own
    number; another run's view has another."""
    jobs = [Job("a", 0.0, 1, 50.0), Job("b", 20.0, 1, 5.0)]
    first, second = PreemptOnce(), PreemptOnce()
    _run(uniform_cluster(1, gpus_per_node=1), jobs, first)
    _run(uniform_cluster(1, gpus_per_node=1), jobs, second)
    # calls at 0, 10, 20, a's finish and b's: a started, a preempted, a again, b
    assert [count for _, count in first.marks] == [count for _, count in second.marks] == [0, 1, 1, 2, 3]
    assert len({serial for serial, _ in first.marks}) == 1
    assert first.marks[0][0] != second.marks[0][0]


# ---------------------------------------------------------------------- start latency


def test_start_latency_holds_the_gpus_before_the_job_runs() -> None:
    """With a 10 s launch: a is started at 0 and runs 10-110; b is started at 110 and runs 120-170."""
    jobs = [Job("a", 0.0, 2, 100.0), Job("b", 5.0, 2, 50.0)]
    records = _run(uniform_cluster(1, gpus_per_node=2), jobs, Fifo(), start_latency_s=10.0)
    a, b = records["a"], records["b"]
    assert (a.first_start, a.finish_time, a.jct_s) == (10.0, 110.0, 110.0)
    assert (a.run_time_s, a.overhead_s, a.queueing_delay_s, a.gpu_s) == (100.0, 0.0, 10.0, 200.0)
    assert (b.first_start, b.finish_time, b.jct_s, b.queueing_delay_s) == (120.0, 170.0, 165.0, 115.0)


def test_start_latency_is_paid_again_by_a_restart_before_the_restore() -> None:
    """Latency 5, restore 30: runs 5-40 (35 done); started again at 60, runs at 65, restores until 95, done at 160."""
    plan = {
        0.0: Decisions(start=(Start("a", (0,)),), wake_at=40.0),
        40.0: Decisions(preempt=("a",), wake_at=60.0),
        60.0: Decisions(start=(Start("a", (0,)),)),
    }
    a = _run(uniform_cluster(1, gpus_per_node=1), [Job("a", 0.0, 1, 100.0)], Scripted(plan=plan),
             restore_s=30.0, start_latency_s=5.0)["a"]
    assert (a.first_start, a.finish_time, a.overhead_s, a.run_time_s, a.queueing_delay_s) == (
        5.0, 160.0, 30.0, 130.0, 30.0)


def test_nothing_accrues_to_a_job_before_its_launch() -> None:
    """Latency 10: started at 0, preempted at 5 before it ran, started again at 20: runs 30-130."""
    plan = {
        0.0: Decisions(start=(Start("a", (0, 1)),), wake_at=5.0),
        5.0: Decisions(preempt=("a",), wake_at=20.0),
        20.0: Decisions(start=(Start("a", (0, 1)),), wake_at=25.0),
    }
    seen: list[tuple[float, float, float, float]] = []

    def watch(sim: Simulator) -> None:
        state = sim.running.get("a") or sim.pending.get("a")
        if state is not None:
            seen.append((sim.now, state.attained_service_gpu_s(sim.now), state.executed_time_s(sim.now),
                         state.iters_at(sim.now)))

    sim = Simulator(uniform_cluster(1, gpus_per_node=2), [Job("a", 0.0, 2, 100.0)], Scripted(plan=plan),
                    perf=IdealPerf(checkpoint_restore_s=30.0), start_latency_s=10.0, observers=[watch])
    a = _by_id(sim.run().records)["a"]
    assert seen == [(0.0, 0.0, 0.0, 0.0), (5.0, 0.0, 0.0, 0.0), (20.0, 0.0, 0.0, 0.0),
                    (25.0, 0.0, 0.0, 0.0)]
    # its first start is the run that happened; the restart pays the restore time all the same
    assert (a.first_start, a.finish_time, a.run_time_s, a.gpu_s) == (30.0, 160.0, 130.0, 260.0)
    assert (a.overhead_s, a.queueing_delay_s, a.n_preemptions) == (30.0, 30.0, 1)


def test_zero_start_latency_changes_no_record() -> None:
    """The default and an explicit 0 give the same records as each other, bit for bit."""
    jobs = [Job(f"j{i}", 7.0 * i, 1 + i % 3, 30.0 + 11.0 * i) for i in range(12)]
    cluster = uniform_cluster(2, gpus_per_node=2)
    assert _run(cluster, jobs, Fifo()) == _run(cluster, jobs, Fifo(), start_latency_s=0.0)


@pytest.mark.parametrize("latency", [-1.0, float("nan"), float("inf")])
def test_a_start_latency_that_is_not_a_time_is_refused(latency: float) -> None:
    with pytest.raises(InputError, match="start latency"):
        Simulator(uniform_cluster(1, gpus_per_node=1), [Job("a", 0.0, 1, 1.0)], Fifo(),
                  start_latency_s=latency)


# ----------------------------------------------------------------------------- timers


def test_wake_at_fires_once_at_its_time() -> None:
    """The same wake_at asked twice makes one call at that instant."""
    plan = {
        0.0: Decisions(wake_at=50.0),
        10.0: Decisions(wake_at=50.0),
        50.0: Decisions(start=(Start("a", (0,)), Start("b", (1,)))),
    }
    policy = Scripted(plan=plan)
    jobs = [Job("a", 0.0, 1, 100.0), Job("b", 10.0, 1, 100.0)]
    records = _run(uniform_cluster(1, gpus_per_node=2), jobs, policy)
    assert policy.calls_ == [0.0, 10.0, 50.0, 150.0]
    assert records["a"].first_start == records["b"].first_start == 50.0


@pytest.mark.parametrize("wake_at", [0.0, -1.0])
def test_wake_at_not_in_the_future_is_rejected(wake_at: float) -> None:
    """wake_at <= now is an invalid decision."""
    policy = Scripted(plan={0.0: Decisions(wake_at=wake_at)})
    with pytest.raises(InvalidDecisionError, match=rf"wake_at={wake_at} is not after now"):
        _run(uniform_cluster(1, gpus_per_node=1), [Job("a", 0.0, 1, 10.0)], policy)


# --------------------------------------------------------------------- invalid decisions


@pytest.mark.parametrize(("later", "message"), [
    (Decisions(start=(Start("b", (1, 2)),)), "job b: GPU 1 is held by job a"),
    (Decisions(start=(Start("b", (2,)),)), r"job b needs 2 distinct GPUs.*, got \[2\]"),
    (Decisions(start=(Start("b", (2, 2)),)), r"job b needs 2 distinct GPUs.*, got \[2, 2\]"),
    (Decisions(start=(Start("b", (2, 9)),)), "job b: GPU 9 does not exist"),
    (Decisions(start=(Start("b", (-1, 2)),)), "job b: GPU -1 does not exist"),
    (Decisions(start=(Start("a", (2, 3)),)), "cannot start job a: it is running"),
    (Decisions(start=(Start("zz", (2, 3)),)), "cannot start job zz: it is not in the queue"),
    (Decisions(preempt=("b",)), "cannot preempt job b: it is not running"),
    (Decisions(start=(Start("b", (2, 3)), Start("c", (3,)))), "job c: GPU 3 is held by job b"),
])
def test_invalid_decisions_are_rejected(later: Decisions, message: str) -> None:
    """Each bad decision raises InvalidDecisionError naming the policy, time, job and reason."""
    plan = {0.0: Decisions(start=(Start("a", (0, 1)),)), 10.0: later}
    jobs = [Job("a", 0.0, 2, 100.0), Job("b", 10.0, 2, 10.0), Job("c", 10.0, 1, 10.0)]
    with pytest.raises(InvalidDecisionError, match=rf"policy 'scripted' at t=10.000 s: {message}"):
        _run(uniform_cluster(1, gpus_per_node=4), jobs, Scripted(plan=plan))


def test_starting_a_finished_job_is_rejected() -> None:
    """A job that has finished cannot be started again."""
    plan = {0.0: Decisions(start=(Start("a", (0,)),)), 10.0: Decisions(start=(Start("a", (0,)),))}
    jobs = [Job("a", 0.0, 1, 5.0), Job("b", 10.0, 1, 5.0)]
    with pytest.raises(InvalidDecisionError, match="cannot start job a: it is finished"):
        _run(uniform_cluster(1, gpus_per_node=1), jobs, Scripted(plan=plan))


def test_a_policy_that_never_starts_is_reported_stuck() -> None:
    """With nothing left to happen and jobs pending, the run stops with a clear error."""
    with pytest.raises(SimulationStuckError, match=r"policy 'idle' left 2 job\(s\) unfinished"):
        _run(uniform_cluster(1, gpus_per_node=1), [Job("a", 0.0, 1, 5.0), Job("b", 3.0, 1, 5.0)],
             Idle())


@dataclass(kw_only=True)
class Dawdler(BasePolicy):
    """A round-based policy that starts jobs (first-fit) only from its n-th call on."""

    name: ClassVar[str] = "dawdler"
    start_from_call: int = 10**9

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(round_s=60.0)

    def reset(self, view: object, rng: np.random.Generator) -> None:  # type: ignore[override]
        super().reset(view, rng)  # type: ignore[arg-type]
        self.n_calls_ = 0

    def schedule(self, view, now):  # type: ignore[no-untyped-def]
        self.n_calls_ += 1
        if self.n_calls_ < self.start_from_call:
            return Decisions()
        starts, free = [], view.tentative()
        for job_id, state in view.pending.items():
            gpus = first_fit(free, state.n_gpus, self.rng_)
            if gpus is not None:
                free.take(gpus)
                starts.append(Start(job_id, gpus))
        return Decisions(start=tuple(starts))


def test_rounds_on_an_idle_cluster_are_reported_stuck(monkeypatch: pytest.MonkeyPatch) -> None:
    """A round-based policy that never starts anything stops with an error, not a hang."""
    monkeypatch.setattr(engine, "MAX_IDLE_STEPS", 50)
    sim = Simulator(uniform_cluster(1, gpus_per_node=1), [Job("a", 0.0, 1, 5.0)], Dawdler())
    with pytest.raises(SimulationStuckError, match="after 50 steps on an idle cluster"):
        sim.run()
    assert sim.n_steps == 50  # the arrival, then 49 rounds
    assert sim.now == 49 * 60.0


def test_timers_on_an_idle_cluster_are_reported_stuck(monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy that only ever asks to be woken later stops with an error, not a hang."""

    @dataclass(kw_only=True)
    class Snoozer(BasePolicy):
        name: ClassVar[str] = "snoozer"

        def schedule(self, view, now):  # type: ignore[no-untyped-def]
            return Decisions(wake_at=now + 1.0)

    monkeypatch.setattr(engine, "MAX_IDLE_STEPS", 30)
    with pytest.raises(SimulationStuckError, match="policy 'snoozer' left 1 job"):
        _run(uniform_cluster(1, gpus_per_node=1), [Job("a", 0.0, 1, 5.0)], Snoozer())


def test_waiting_a_while_on_an_idle_cluster_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy that starts on its 50th call, within the limit, finishes normally."""
    monkeypatch.setattr(engine, "MAX_IDLE_STEPS", 50)
    records = _run(uniform_cluster(1, gpus_per_node=1), [Job("a", 0.0, 1, 5.0)],
                   Dawdler(start_from_call=50))
    assert records["a"].first_start == 49 * 60.0
    assert records["a"].finish_time == 49 * 60.0 + 5.0


# ------------------------------------------------------------------------------ input


def test_duplicate_job_ids_are_refused() -> None:
    """Two jobs with one id raise InputError naming the id."""
    jobs = [Job("a", 0.0, 1, 5.0), Job("a", 1.0, 1, 5.0)]
    with pytest.raises(InputError, match="job id 'a' appears twice") as info:
        Simulator(uniform_cluster(1), jobs, Fifo())
    assert info.value.field == "job_id"


@pytest.mark.parametrize(("n_gpus", "message"), [
    (9, "job big asks for 9 GPUs but cluster '1x8-v100' has 8"),
    (0, "job big asks for 0 GPUs"),
])
def test_jobs_that_cannot_fit_are_refused(n_gpus: int, message: str) -> None:
    """A job larger than the cluster (or of no GPUs) raises InputError on n_gpus."""
    with pytest.raises(InputError, match=message) as info:
        Simulator(uniform_cluster(1, gpus_per_node=8), [Job("big", 0.0, n_gpus, 5.0)], Fifo())
    assert info.value.field == "n_gpus"


def test_empty_workload_finishes_at_once() -> None:
    """No jobs: no steps, no records, no error."""
    result = simulate(uniform_cluster(1), [], Fifo())
    assert (result.records, result.n_steps) == ([], 0)


# --------------------------------------------------------------------- rate changes


@dataclass(frozen=True)
class SharedSpeed:
    """Every running job's speed is divided by the number of running jobs (re-rated by id)."""

    def prepare(self, jobs: Sequence[Job], topology: Topology,
                rng: np.random.Generator) -> list[Job]:
        return list(jobs)

    def rate(self, job: Job, gpu_ids: tuple[int, ...], running: Mapping[str, JobState]) -> float:
        return job.total_iters / job.duration_s / max(1, len(running))

    def rates(self, running: Mapping[str, JobState], changed: Collection[str]) -> dict[str, float]:
        return {job_id: self.rate(running[job_id].job, running[job_id].gpu_ids, running)
                for job_id in sorted(running)}

    def restart_overhead_s(self, job: Job) -> float:
        return 0.0


def test_stale_completion_after_a_rate_change_is_ignored() -> None:
    """a would finish at 100 alone; b halves its speed for 20 s, so it finishes at 110."""
    jobs = [Job("a", 0.0, 1, 100.0), Job("b", 20.0, 1, 10.0)]
    result = simulate(uniform_cluster(1, gpus_per_node=2), jobs, Fifo(), perf=SharedSpeed())
    records = _by_id(result.records)
    # b: 10 iterations at 0.5/s from 20 -> 40; a: 20 + 10 done by 40, 70 left at 1/s
    assert records["b"].finish_time == 40.0
    assert records["a"].finish_time == 110.0
    assert records["a"].run_time_s == 110.0
    assert result.timeline.time == [0.0, 20.0, 40.0, 110.0]


@dataclass(frozen=True)
class FirstComeWaits(SharedSpeed):
    """A job stands still while a later-submitted one runs beside it."""

    def rate(self, job: Job, gpu_ids: tuple[int, ...], running: Mapping[str, JobState]) -> float:
        later = any(s.job.submit_time > job.submit_time for s in running.values())
        return 0.0 if later else job.total_iters / job.duration_s


def test_a_job_that_stands_still_for_a_while_finishes_when_its_work_is_done() -> None:
    """a would finish at 100 alone; it stands still while b runs (20 to 120), so it finishes at 200."""
    jobs = [Job("a", 0.0, 1, 100.0), Job("b", 20.0, 1, 100.0)]
    result = simulate(uniform_cluster(1, gpus_per_node=2), jobs, Fifo(), perf=FirstComeWaits())
    assert [(r.job_id, r.finish_time) for r in result.records] == [("b", 120.0), ("a", 200.0)]
    assert result.timeline.time == [0.0, 20.0, 120.0, 200.0]


def test_a_slowed_job_finishes_in_the_place_of_its_last_re_rating() -> None:
    """a would finish at 100 alone; d, from 20, halves both, and both finish at 180.

    The re-rating at 20 names a before d, so a's finish goes first at the shared
    instant, as if it had been queued then; the event a queued for 100 brings
    no step of its own.
    """
    jobs = [Job("a", 0.0, 1, 100.0), Job("d", 20.0, 1, 80.0)]
    result = simulate(uniform_cluster(1, gpus_per_node=2), jobs, Fifo(), perf=SharedSpeed())
    assert [(r.job_id, r.finish_time) for r in result.records] == [("a", 180.0), ("d", 180.0)]
    assert result.timeline.time == [0.0, 20.0, 180.0]


def test_a_copy_taken_while_a_finish_is_put_off_finishes_in_the_same_order() -> None:
    """z would finish at 100 alone; b, from 10, halves both, and both finish at 190.

    Copied at 10, when z's event for 100 is early and was queued before b's: b's
    finish goes first, as the re-rating at 10 named b before z, in the run and in the copy.
    """
    jobs = [Job("z", 0.0, 1, 100.0), Job("b", 10.0, 1, 90.0)]
    topology = uniform_cluster(1, gpus_per_node=4)
    taken: list[Simulator] = []

    def copy_at_10(sim: Simulator) -> None:
        if sim.now == 10.0:
            running, policy = [copy.deepcopy(s) for s in sim.running.values()], Fifo()
            taken.append(Simulator.resume(topology, now=sim.now, running=running, pending=[], policy=policy,
                                          perf=SharedSpeed(), completion_order=sim.completion_order()))
            policy.reset(taken[0].view, np.random.default_rng(0))
            for state in running:
                policy.on_arrival(state.job, sim.now)

    result = Simulator(topology, jobs, Fifo(), perf=SharedSpeed(), observers=[copy_at_10]).run()
    (resumed,) = taken
    while resumed.step():
        pass
    assert [(r.job_id, r.finish_time) for r in result.records] == [("b", 190.0), ("z", 190.0)]
    assert [(r.job_id, r.finish_time) for r in resumed.records] == [("b", 190.0), ("z", 190.0)]


class SharedSpeedInStartOrder(SharedSpeed):
    """`SharedSpeed`, re-rating the running jobs in the order they started."""

    def rates(self, running: Mapping[str, JobState], changed: Collection[str]) -> dict[str, float]:
        return {job_id: self.rate(s.job, s.gpu_ids, running) for job_id, s in running.items()}


@pytest.mark.parametrize(("perf", "order"), [(SharedSpeed(), ["b", "z"]), (SharedSpeedInStartOrder(), ["z", "b"])])
def test_finishes_at_one_instant_go_in_the_order_the_model_re_rated_them(perf: SharedSpeed, order: list[str]) -> None:
    """z and b both finish at 190 (the case above): the one its model's last answer named first goes first."""
    jobs = [Job("z", 0.0, 1, 100.0), Job("b", 10.0, 1, 90.0)]
    result = Simulator(uniform_cluster(1, gpus_per_node=4), jobs, Fifo(), perf=perf).run()
    assert [(r.job_id, r.finish_time) for r in result.records] == [(job_id, 190.0) for job_id in order]


def test_what_a_snapshot_reads_of_a_running_simulation() -> None:
    """The read-only accessors a forecast snapshot is built from, seen mid-run."""
    from rackwise.policies.registry import make_policy

    jobs = [Job(f"j{i}", submit_time=100.0 * i, n_gpus=1 + i % 4, duration_s=900.0 + 37.0 * i)
            for i in range(12)]
    seen: list[bool] = []

    def look(sim: Simulator) -> None:
        if seen or len(sim.records) < 2 or not sim.running:
            return
        arrived = len(jobs) - sim.n_waiting
        assert [job.job_id for job in sim.submitted] == [j.job_id for j in jobs[:arrived]]
        assert sorted(sim.completion_order()) == sorted(sim.running)
        due = sim.next_round_at()
        assert due is not None and due > sim.now
        timers = sim.timers()
        assert list(timers) == sorted(timers) and all(t > sim.now for t in timers)
        assert sorted(sim.allocation.node_order()) == [0, 1]
        seen.append(True)

    Simulator(uniform_cluster(2, 4, 2), jobs, make_policy("gavel"), seed=0, observers=[look]).run()
    assert seen, "the run should reach a moment with two jobs done and some running"



@pytest.mark.parametrize("policy", ["fifo", "tiresias"])
def test_the_queue_order_mirrors_the_pending_dict_at_every_step(policy: str) -> None:
    """Arrivals, starts and (Tiresias') preemptions: the order the view reads the queue
    from its front in (`ClusterView.queued`) is always the pending dict's."""
    from rackwise.policies.registry import make_policy

    jobs = [Job(f"j{i:04d}", submit_time=float(i % 200), n_gpus=1 + i % 3, duration_s=400.0 + 97.0 * (i % 13))
            for i in range(1_500)]
    returned: list[int] = []

    def look(sim: Simulator) -> None:
        assert len(sim._queue_order) == len(sim.pending)  # so `queued` reads the order
        assert list(sim.view.queued()) == list(sim.pending.values())
        returned.append(sum(state.n_preemptions for state in sim.pending.values()))

    result = Simulator(uniform_cluster(1, gpus_per_node=4), jobs, make_policy(policy), seed=0,
                       observers=[look]).run()
    assert len(result.records) == len(jobs)
    assert (max(returned) > 0) == (policy == "tiresias")  # preempted jobs came back to the queue


@given(st.data())
def test_the_engine_counts_a_placements_spread_as_the_topology_does(data: st.DataObject) -> None:
    """The engine's own copy of `Topology.spread` (compiled, where the topology's is Python)."""
    topology = data.draw(topologies())
    gpu_ids = tuple(data.draw(st.sets(st.integers(0, topology.n_gpus - 1), min_size=1)))
    assert engine._spread(topology.gpu_node, topology.gpu_rack, gpu_ids) == topology.spread(gpu_ids)
