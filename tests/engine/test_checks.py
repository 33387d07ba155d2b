"""The one decision check: all or nothing, the same in the simulator and the live driver."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NoReturn

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.engine.broken_policies import DoubleStarter

from rackwise.backends.base import serve
from rackwise.backends.fake import FakeBackend
from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.checks import (
    LIVE_CLUSTER,
    EngineSupport,
    _check_by_replay,
    _plain_decision_fits,
    check_decisions,
)
from rackwise.engine.contract import Decisions, Start
from rackwise.engine.view import ClusterView
from rackwise.errors import InvalidDecisionError
from rackwise.policies.base import BasePolicy
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job


def test_the_live_driver_refuses_a_double_start_and_applies_nothing() -> None:
    backend = FakeBackend(uniform_cluster(1, 4, 1), [Job("a", 0.0, 1, 10.0)])
    with pytest.raises(InvalidDecisionError, match="cannot start job a twice in one decision"):
        serve(backend, DoubleStarter(), poll_s=None)
    after = backend.observe()
    assert list(after.view.pending) == ["a"] and not after.view.running


def test_the_simulator_refuses_the_same_double_start() -> None:
    sim = Simulator(uniform_cluster(1, 4, 1), [Job("a", 0.0, 1, 10.0)], DoubleStarter())
    with pytest.raises(InvalidDecisionError, match="cannot start job a twice in one decision"):
        sim.run()


def _busy_simulator() -> Simulator:
    """Four 2-GPU nodes: jobs a (2 GPUs, on 0-1) and b (1 GPU, on 2) run; c, d, e wait."""
    jobs = [Job("a", 0.0, 2, 100.0), Job("b", 0.0, 1, 100.0), Job("c", 0.0, 1, 100.0),
            Job("d", 0.0, 2, 100.0), Job("e", 0.0, 3, 100.0)]

    @dataclass(kw_only=True)
    class Opening(BasePolicy):
        name: ClassVar[str] = "opening"

        def schedule(self, view: ClusterView, now: float) -> Decisions:
            if "a" in view.pending:
                return Decisions(start=(Start("a", (0, 1)), Start("b", (2,))))
            return Decisions()

    sim = Simulator(uniform_cluster(4, 2, 2), jobs, Opening())
    sim.start()
    sim.step()
    return sim


def _state(sim: Simulator) -> tuple[object, ...]:
    return (tuple(sim.allocation.owner), tuple(sim.pending), tuple(sim.running),
            tuple(s.n_preemptions for s in sim.running.values()))


JOB_IDS = st.sampled_from(["a", "b", "c", "d", "e", "zz"])
STARTS = st.builds(lambda job, gpus, copies: Start(job, tuple(gpus), copies=copies), JOB_IDS,
                   st.lists(st.integers(-1, 8), min_size=0, max_size=4), st.sampled_from([1, 1, 1, 2, 0]))
SIMULATED = EngineSupport(forking_refused=None, sharing_refused=None)
DECISIONS = st.builds(lambda starts, preempt: Decisions(start=tuple(starts), preempt=tuple(preempt)),
                      st.lists(STARTS, max_size=3), st.lists(JOB_IDS, max_size=2))


@settings(max_examples=300, deadline=None)
@given(DECISIONS)
def test_a_decision_is_applied_whole_or_not_at_all(decisions: Decisions) -> None:
    sim = _busy_simulator()
    before = _state(sim)
    try:
        sim.apply(decisions)
    except InvalidDecisionError:
        assert _state(sim) == before
        return
    owners = sim.allocation.owner
    for job_id, state in sim.running.items():
        assert all(owners[g] == job_id for g in state.gpu_ids)  # no GPU given to two jobs
        assert len(state.gpu_ids) == state.n_gpus
    held = [g for g in range(len(owners)) if owners[g] is not None]
    assert sorted(held) == sorted(g for s in sim.running.values() for g in s.gpu_ids)
    started = {s.job_id for s in decisions.start}
    assert started <= set(sim.running)


@settings(max_examples=200, deadline=None)
@given(DECISIONS)
def test_the_live_check_refuses_whatever_the_simulator_refuses(decisions: Decisions) -> None:
    sim = _busy_simulator()
    try:
        check_decisions(sim.view, decisions, "p", sim.now, support=SIMULATED)
    except InvalidDecisionError:
        with pytest.raises(InvalidDecisionError):
            check_decisions(sim.view, decisions, "p", sim.now, support=LIVE_CLUSTER)


def _refuse(reason: str) -> NoReturn:
    raise InvalidDecisionError(reason)


@settings(max_examples=300, deadline=None)
@given(DECISIONS)
@example(Decisions(preempt=("a",), start=(Start("d", (0, 1)), Start("a", (3, 4)))))
@example(Decisions(preempt=("b",), start=(Start("b", (2,)),)))
@example(Decisions(preempt=("a", "a")))
@example(Decisions(preempt=("a",), start=(Start("d", (0, 1)), Start("c", (1,)))))
@example(Decisions(start=(Start("d", (4, 5, 6, 7), copies=2),)))
@example(Decisions(preempt=("a",), start=(Start("a", (0, 1, 4, 5), copies=2),)))
def test_the_one_pass_check_passes_only_what_the_replay_passes(decisions: Decisions) -> None:
    sim = _busy_simulator()
    for support in (LIVE_CLUSTER, SIMULATED):
        if _plain_decision_fits(sim.view, decisions, support):
            _check_by_replay(sim.view, decisions, (), support, _refuse)


def test_the_one_pass_check_takes_plain_migrations_and_restarts() -> None:
    view = _busy_simulator().view
    assert _plain_decision_fits(view, Decisions(preempt=("a",), start=(Start("d", (0, 1)), Start("a", (3, 4)))))
    assert _plain_decision_fits(view, Decisions(preempt=("b",), start=(Start("b", (2,)),)))
    assert not _plain_decision_fits(view, Decisions(preempt=("a", "a")))
    assert not _plain_decision_fits(view, Decisions(preempt=("a",), start=(Start("c", (2,)),)))  # b holds 2


def test_the_one_pass_check_takes_forks_only_where_the_engine_runs_them() -> None:
    view = _busy_simulator().view
    fork = Decisions(preempt=("a",), start=(Start("a", (0, 1, 4, 5), copies=2),))
    assert _plain_decision_fits(view, fork, SIMULATED)
    assert not _plain_decision_fits(view, fork)  # a real cluster's: the replay words the refusal
    assert not _plain_decision_fits(view, Decisions(start=(Start("d", (4, 5, 6), copies=2),)), SIMULATED)
    assert not _plain_decision_fits(view, Decisions(start=(Start("d", (4, 5, 4, 5), copies=2),)), SIMULATED)
    assert not _plain_decision_fits(view, Decisions(start=(Start("d", (), copies=0),)), SIMULATED)


def test_a_migration_may_reuse_what_it_frees_but_a_preempt_twice_is_refused() -> None:
    sim = _busy_simulator()
    check_decisions(sim.view, Decisions(preempt=("a",), start=(Start("d", (0, 1)),)), "p", sim.now)
    with pytest.raises(InvalidDecisionError, match="cannot preempt job a: it is not running"):
        check_decisions(sim.view, Decisions(preempt=("a", "a")), "p", sim.now)


def test_real_clusters_refuse_forks_and_the_simulator_takes_them() -> None:
    sim = _busy_simulator()
    fork = Decisions(start=(Start("c", (3, 4), copies=2),))
    with pytest.raises(InvalidDecisionError, match=r"forked job .* runs only in the simulator"):
        check_decisions(sim.view, fork, "p", sim.now)
    sim.apply(fork)
    assert sim.running["c"].copies == 2


def test_the_check_leaves_the_view_alone() -> None:
    sim = _busy_simulator()
    before = _state(sim)
    check_decisions(sim.view, Decisions(preempt=("a", "b"), start=(Start("e", (0, 1, 2)),)), "p", sim.now)
    assert _state(sim) == before
