"""Serve through its own restarts and a controller that stops answering (fake backend)."""

from __future__ import annotations

import dataclasses
import logging
import pickle
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from rackwise.backends import base, serve_state
from rackwise.backends.base import BackendError, ServeHealth, ServeResult, Snapshot, serve
from rackwise.backends.fake import FakeBackend
from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.view import ClusterView
from rackwise.metrics.records import JobRecord
from rackwise.perf.base import IdealPerf
from rackwise.policies.base import BasePolicy, Decisions, Start
from rackwise.policies.registry import all_policies, make_policy
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

H = 3600.0
TOPOLOGY = uniform_cluster(4, 4, 2)


def trace() -> list[Job]:
    sizes = [4, 2, 4, 3, 2, 4, 1, 2, 4, 1, 8, 2, 3, 1, 4, 2, 6, 1, 2, 4]
    return [Job(f"j{i}", submit_time=i * 0.3 * H, n_gpus=n, duration_s=(1 + (i * 7) % 5) * H)
            for i, n in enumerate(sizes)]


@dataclass(kw_only=True)
class Rotating(BasePolicy):
    """Starts the pending job at a position that moves every round: its order lives in its state."""

    name: ClassVar[str] = "rotating"

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.turn_ = 0

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        self.turn_ += 1
        pending = sorted(view.pending.values(), key=lambda s: s.job_id)
        if not pending:
            return Decisions()
        state = pending[self.turn_ % len(pending)]
        free = [g for node in view.topology.nodes for g in view.free_gpu_ids(node.node_id)]
        if state.n_gpus > len(free):
            return Decisions(wake_at=now + 600.0)
        return Decisions(start=(Start(state.job_id, tuple(free[:state.n_gpus])),), wake_at=now + 600.0)


def stop_after(n_rounds: int) -> Callable[[], bool]:
    calls = iter(range(10**9))
    return lambda: next(calls) >= n_rounds


def run(make: Callable[[], BasePolicy], state_file: Path | None, stop_at: int | None) -> ServeResult:
    """One serve to the end, or one stopped after ``stop_at`` rounds and a second that finishes."""
    backend = FakeBackend(TOPOLOGY, trace(), seed=2)
    if stop_at is None:
        return serve(backend, make(), poll_s=0.25 * H, seed=2, state_file=state_file)
    first = serve(backend, make(), poll_s=0.25 * H, seed=2, state_file=state_file,
                  should_stop=stop_after(stop_at))
    assert not first.stopped_idle
    second = serve(backend, make(), poll_s=0.25 * H, seed=2, state_file=state_file)
    second.decisions[:0] = first.decisions
    return second


def outcome(result: ServeResult) -> tuple[list[tuple[str, float, float]], list[tuple[float, str, str]]]:
    records = sorted((r.job_id, r.first_start, r.finish_time) for r in result.records)
    decisions = [(d.now, d.action, d.job_id) for d in result.decisions]
    return records, decisions


@pytest.mark.parametrize("name", ["rotating", "tiresias", "dally", "asrpt"])
def test_a_restart_from_the_state_file_decides_as_if_never_stopped(name: str, tmp_path: Path) -> None:
    def make() -> BasePolicy:
        return Rotating() if name == "rotating" else make_policy(name)

    uninterrupted = outcome(run(make, None, None))
    restarted = outcome(run(make, tmp_path / "serve.state", stop_at=9))
    assert len(uninterrupted[0]) == len(trace())
    assert restarted == uninterrupted


def test_without_its_state_a_restarted_policy_forgets_and_decides_otherwise() -> None:
    # The check above can fail: the same restart with no state file changes the outcome.
    assert outcome(run(Rotating, None, stop_at=9)) != outcome(run(Rotating, None, None))


def test_an_unreadable_state_file_is_reported_and_serve_starts_fresh(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    state_file = tmp_path / "serve.state"
    state_file.write_bytes(b"not a pickle")
    with caplog.at_level(logging.WARNING, logger="rackwise.serve"):
        result = run(lambda: make_policy("fifo"), state_file, None)
    assert "cannot read the saved state" in caplog.text
    assert len(result.records) == len(trace())


def test_a_state_saved_for_other_parameters_is_not_restored(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    state_file = tmp_path / "serve.state"
    backend = FakeBackend(TOPOLOGY, trace(), seed=2)
    serve(backend, make_policy("tiresias"), poll_s=0.25 * H, state_file=state_file,
          should_stop=stop_after(3))
    other = make_policy("tiresias", promote_knob=4.0)
    with caplog.at_level(logging.WARNING, logger="rackwise.serve"):
        assert serve_state.load(state_file, other) is None
    assert "starting fresh" in caplog.text
    assert serve_state.load(state_file, make_policy("tiresias")) is not None


def test_a_crash_while_saving_leaves_the_previous_state_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state_file = tmp_path / "serve.state"
    policy = make_policy("fifo")
    serve_state.save(state_file, serve_state.ServeState(policy, {"a"}, set(), set(), float("inf")))

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pickle, "dump", crash)
    with pytest.raises(OSError):
        serve_state.save(state_file, serve_state.ServeState(policy, {"b"}, set(), set(), 0.0))
    monkeypatch.undo()
    restored = serve_state.load(state_file, policy)
    assert restored is not None and restored.known_active == {"a"}


class Flaky:
    """A fake backend whose controller does not answer ``observe`` on the given calls."""

    def __init__(self, inner: FakeBackend, failing_calls: set[int]) -> None:
        self.inner, self.failing_calls, self.calls = inner, failing_calls, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def observe(self) -> Snapshot:
        self.calls += 1
        if self.calls in self.failing_calls:
            raise BackendError("slurm_load_jobs error: Unable to contact slurm controller")
        return self.inner.observe()


def test_serve_rides_out_a_controller_that_stops_answering(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(base.wallclock, "sleep", pauses.append)
    expected = outcome(run(lambda: make_policy("tiresias"), None, None))
    backend = Flaky(FakeBackend(TOPOLOGY, trace(), seed=2), failing_calls=set(range(5, 12)))
    with caplog.at_level(logging.WARNING, logger="rackwise.serve"):
        result = serve(backend, make_policy("tiresias"), poll_s=0.25 * H, seed=2)  # type: ignore[arg-type]
    assert outcome(result) == expected  # nothing lost, nothing repeated, same decisions
    assert pauses == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]  # backing off, bounded
    assert "answers again after 7 failed tries" in caplog.text


def test_serve_gives_up_after_the_longest_outage_it_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 10**6, 5))
    monkeypatch.setattr(base.wallclock, "sleep", lambda s: None)
    monkeypatch.setattr(base.wallclock, "monotonic", lambda: float(next(clock)))
    backend = Flaky(FakeBackend(TOPOLOGY, trace(), seed=2), failing_calls=set(range(3, 10**6)))
    with pytest.raises(BackendError, match=r"has not answered for 60 s \(13 tries\)"):
        serve(backend, make_policy("fifo"), poll_s=0.25 * H, max_outage_s=60)  # type: ignore[arg-type]


class HealthLog:
    """Keeps a copy of every health report."""

    def __init__(self) -> None:
        self.reports: list[ServeHealth] = []

    def observe_round(self, *args: object) -> None:
        pass

    def observe_health(self, health: ServeHealth) -> None:
        self.reports.append(dataclasses.replace(health))


def test_health_counts_failed_reads_outages_restarts_and_adopted_jobs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base.wallclock, "sleep", lambda s: None)
    state_file, watch = tmp_path / "serve.state", HealthLog()
    backend = Flaky(FakeBackend(TOPOLOGY, trace(), seed=2), failing_calls={4, 5, 6})
    serve(backend, make_policy("tiresias"), poll_s=0.25 * H, state_file=state_file,  # type: ignore[arg-type]
          observers=[watch], should_stop=stop_after(12))
    assert [r.consecutive_errors for r in watch.reports if r.consecutive_errors] == [1, 2, 3]
    last = watch.reports[-1]
    assert (last.consecutive_errors, last.outages_recovered, last.restarts_recovered) == (0, 1, 0)
    assert last.last_poll_wall > 0 and last.jobs_adopted == 0

    again = HealthLog()  # the same policy from its state file: nothing to adopt
    serve(backend, make_policy("tiresias"), poll_s=0.25 * H, state_file=state_file,  # type: ignore[arg-type]
          observers=[again], should_stop=stop_after(1))
    assert (again.reports[-1].restarts_recovered, again.reports[-1].jobs_adopted) == (1, 0)
    running = len(backend.observe().view.running)
    assert running > 0
    fresh = HealthLog()  # no state file: every running job is adopted
    serve(backend, make_policy("tiresias"), poll_s=0.25 * H, observers=[fresh],  # type: ignore[arg-type]
          should_stop=stop_after(1))
    assert (fresh.reports[-1].restarts_recovered, fresh.reports[-1].jobs_adopted) == (0, running)



class Refusing:
    """A fake backend whose controller refuses whole rounds of decisions when ``refuses`` says so."""

    def __init__(self, inner: FakeBackend, refuses: Callable[[Decisions], bool]) -> None:
        self.inner, self.refuses, self.refused = inner, refuses, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def apply(self, decisions: Decisions, snapshot: Snapshot) -> list[base.Outcome]:
        if not self.refuses(decisions):
            return self.inner.apply(decisions, snapshot)
        self.refused += 1
        return [base.Outcome(action, job_id, False, detail="Job is pending execution")
                for action, job_id in [*(("preempt", j) for j in decisions.preempt),
                                       *(("start", s.job_id) for s in decisions.start)]]


def test_a_refused_preemption_with_a_promotion_due_is_announced_again_not_promoted() -> None:
    """Tiresias preempts a demoted job whose promotion is due at once (knob 0); the cluster keeps
    it running, so serve announces it again: the promotion belongs to the job it forgot."""
    jobs = [Job("j1", submit_time=0.0, n_gpus=1, duration_s=2 * H),
            Job("j2", submit_time=0.5 * H, n_gpus=1, duration_s=H)]
    backend = Refusing(FakeBackend(uniform_cluster(1, 1, 1), jobs), lambda d: bool(d.preempt))
    policy = make_policy("tiresias", queue_limits_gpu_s=(600.0,), promote_knob=0.0)
    result = serve(backend, policy, poll_s=0.25 * H)  # type: ignore[arg-type]
    assert backend.refused > 0
    assert sorted(r.job_id for r in result.records) == ["j1", "j2"]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(set(all_policies()) - {"hadare"}))  # hadare forks: sim only
def test_every_policy_finishes_every_job_when_the_cluster_refuses_rounds_at_random(
        name: str, seed: int) -> None:
    coin = random.Random(seed)
    backend = Refusing(FakeBackend(TOPOLOGY, trace(), seed=2), lambda d: coin.random() < 0.4)
    params = {"copies": False} if name == "combined" else {}  # copies run only in the simulator
    result = serve(backend, make_policy(name, **params), poll_s=0.25 * H, seed=2)  # type: ignore[arg-type]
    assert backend.refused > 0
    assert sorted(r.job_id for r in result.records) == sorted(job.job_id for job in trace())


class Scripted:
    """A backend that shows a fixed series of pending queues, one per round, at set instants."""

    def __init__(self, rounds: list[tuple[float, list[Job], dict[str, base.FailedJob]]]) -> None:
        self.topology = uniform_cluster(1, 4, 1)
        self.rounds, self.index = rounds, 0

    def observe(self) -> Snapshot:
        now, pending, failed = self.rounds[self.index]
        view = ClusterView(self.topology, Allocation(self.topology),
                           {job.job_id: JobState(job) for job in pending}, {}, IdealPerf())
        return Snapshot(now=now, view=view, failed=failed)

    def apply(self, decisions: Decisions, snapshot: Snapshot) -> list[base.Outcome]:
        return [base.Outcome("start", start.job_id, True) for start in decisions.start]

    def wait(self, deadline: float) -> bool:
        self.index += 1
        return self.index < len(self.rounds)

    def records(self) -> list[JobRecord]:
        return []


def test_a_job_the_cluster_fails_leaves_the_policy_as_a_finished_job_does() -> None:
    """Tiresias starts a and arms its demotion; the cluster then fails a, and later b. The
    policy is told each left (else it would demote a job it no longer sees)."""
    a, b = Job("a", 0.0, 4, 4 * H), Job("b", 0.0, 4, H)
    failed = {job.job_id: base.FailedJob(job, "NODE_FAIL") for job in (a, b)}
    backend = Scripted([(0.0, [a], {}), (2 * H, [b], {"a": failed["a"]}), (3 * H, [], failed)])
    result = serve(backend, make_policy("tiresias"), poll_s=H)  # type: ignore[arg-type]
    assert [(d.now, d.job_id) for d in result.decisions] == [(0.0, "a"), (2 * H, "b")]
