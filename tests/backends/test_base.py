"""The shared driver loop, run against the in-process fake backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from rackwise.backends.base import ServeStuckError, Snapshot, serve
from rackwise.backends.fake import FakeBackend
from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.checks import check_decisions
from rackwise.engine.view import ClusterView
from rackwise.errors import InvalidDecisionError
from rackwise.policies.base import BasePolicy, Decisions, Start
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import simulate
from rackwise.workload.job import Job

H = 3600.0


def small_trace() -> list[Job]:
    sizes = [4, 2, 4, 3, 2, 4, 1, 2, 4, 1, 8, 2, 3, 1, 4, 2]
    return [Job(f"j{i}", submit_time=i * 0.4 * H, n_gpus=n, duration_s=(2 + (i * 7) % 5) * H)
            for i, n in enumerate(sizes)]


def by_id(records: list) -> dict:  # type: ignore[type-arg]
    return {r.job_id: r for r in records}


@pytest.mark.parametrize("name", ["fifo", "fifo-backfill"])
@pytest.mark.parametrize("poll_s", [None, 0.25 * H])
def test_fake_backend_gives_the_simulators_records(name: str, poll_s: float | None) -> None:
    topology = uniform_cluster(4, 4, 2)
    jobs = small_trace()
    expected = simulate(topology, jobs, make_policy(name), seed=5).records
    result = serve(FakeBackend(topology, jobs, seed=5), make_policy(name), poll_s=poll_s, seed=5)
    assert result.stopped_idle
    assert by_id(result.records) == by_id(expected)
    started = [d.job_id for d in result.decisions if d.action == "start"]
    assert sorted(started) == sorted(j.job_id for j in jobs)  # each job started exactly once
    if name == "fifo":
        assert started == [j.job_id for j in jobs]  # FIFO order reached the backend


@dataclass(kw_only=True)
class Recorder(BasePolicy):
    """FIFO on node 0 only, recording every hook call, and asking for a timer."""

    name: ClassVar[str] = "recorder"
    wake_every_s: float = 1000.0
    calls: list[tuple[str, str, float]] = field(default_factory=list)

    def on_arrival(self, job: Job, now: float) -> None:
        self.calls.append(("arrival", job.job_id, now))

    def on_completion(self, job: Job, now: float) -> None:
        self.calls.append(("completion", job.job_id, now))

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        self.calls.append(("schedule", "", now))
        starts = []
        free = view.free_gpu_ids(0)
        for state in view.pending.values():
            if state.job.n_gpus > len(free):
                break
            starts.append(Start(state.job_id, tuple(free[:state.job.n_gpus])))
            free = free[state.job.n_gpus:]
        return Decisions(start=tuple(starts), wake_at=now + self.wake_every_s)


def test_hooks_come_before_schedule_and_timers_are_honoured() -> None:
    topology = uniform_cluster(2, 2, 2)
    jobs = [Job("a", 0.0, 2, 5000.0), Job("b", 10.0, 2, 100.0)]
    policy = Recorder()
    result = serve(FakeBackend(topology, jobs), policy, poll_s=None)
    assert [r.job_id for r in result.records] == ["a", "b"]
    kinds = [(kind, job_id) for kind, job_id, _ in policy.calls if kind != "schedule"]
    assert kinds == [("arrival", "a"), ("arrival", "b"), ("completion", "a"), ("completion", "b")]
    times = [now for kind, _, now in policy.calls if kind == "schedule"]
    # Called at each arrival/completion and at every wake_at in between.
    assert {0.0, 10.0, 1000.0, 2000.0, 5000.0, 5100.0} <= set(times)
    assert times == sorted(times)


def test_should_stop_ends_the_loop_early() -> None:
    topology = uniform_cluster(4, 4, 2)
    rounds: list[int] = []
    result = serve(FakeBackend(topology, small_trace()), make_policy("fifo"), poll_s=None,
                   should_stop=lambda: len(rounds.append(1) or rounds) > 3)
    assert not result.stopped_idle
    assert result.n_rounds == 3


@dataclass(kw_only=True)
class Idle(BasePolicy):
    name: ClassVar[str] = "idle"

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return Decisions()


def test_a_policy_that_never_starts_anything_is_reported_stuck() -> None:
    with pytest.raises(ServeStuckError, match="left 1 job"):
        serve(FakeBackend(uniform_cluster(1, 2, 1), [Job("a", 0.0, 1, 10.0)]), Idle(), poll_s=None)


def _snapshot() -> Snapshot:
    backend = FakeBackend(uniform_cluster(2, 2, 2), [Job("a", 0.0, 2, 10.0), Job("b", 0.0, 1, 10.0)])
    backend.apply(Decisions(start=(Start("a", (0, 1)),)), backend.observe())
    return backend.observe()


@pytest.mark.parametrize(("decisions", "message"), [
    (Decisions(start=(Start("b", (0,)),)), "GPU 0 is held by job a"),
    (Decisions(start=(Start("b", (2, 3)),)), "needs 1 distinct GPUs"),
    (Decisions(start=(Start("b", (9,)),)), "GPU 9 does not exist"),
    (Decisions(start=(Start("a", (2, 3)),)), "job a: it is running"),
    (Decisions(start=(Start("zz", (2,)),)), "job zz: it is not in the queue"),
    (Decisions(preempt=("b",)), "cannot preempt job b"),
    (Decisions(wake_at=0.0), "wake_at=0.0 is not after now"),
])
def test_impossible_decisions_are_rejected(decisions: Decisions, message: str) -> None:
    snapshot = _snapshot()
    with pytest.raises(InvalidDecisionError, match=message):
        check_decisions(snapshot.view, decisions, "p", snapshot.now)


def test_a_migration_may_reuse_the_gpus_it_frees() -> None:
    snapshot = _snapshot()
    check_decisions(snapshot.view, Decisions(preempt=("a",), start=(Start("b", (0,)),)), "p",
                    snapshot.now)
    check_decisions(snapshot.view, Decisions(preempt=("a",), start=(Start("a", (2, 3)),)), "p",
                    snapshot.now)
