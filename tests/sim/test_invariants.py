"""Invariants of the simulator under every registered policy, on drawn clusters and workloads.

An `InvariantChecker` rides along as an observer and checks the engine's
state after every step; the run's records are checked at the end.
"""

from __future__ import annotations

import functools
from importlib import metadata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invariant_checker import REL, InvariantChecker
from rackwise.cluster.topology import Topology, uniform_cluster
from rackwise.errors import MissingExtraError
from rackwise.perf.base import IdealPerf
from rackwise.policies.base import BasePolicy
from rackwise.policies.registry import all_policies, policy_class
from rackwise.sim.engine import SimResult, Simulator
from rackwise.workload.job import Job
from strategies import clusters_and_workloads, workloads

RESTORE_S = 30.0

# Each example runs whole simulations under every policy: fewer than the profile's count.
SWEEP = settings(max_examples=max(5, settings.default.max_examples // 4))


def check_result(result: SimResult, checker: InvariantChecker, cls: type[BasePolicy]) -> None:
    """End-of-run checks: everything finished and GPU-seconds add up (IdealPerf).

    A job forked into copies holds more GPUs than it asked for and runs
    faster, so the run-time and GPU-second identities cover the other jobs.
    """
    jobs = {job.job_id: job for job in result.jobs}
    assert checker.n_checks == result.n_steps
    assert sorted(r.job_id for r in result.records) == sorted(jobs)
    for record in result.records:
        job = jobs[record.job_id]
        assert record.jct_s == record.finish_time - job.submit_time
        assert job.submit_time <= record.first_start <= record.finish_time
        assert 1 <= record.n_racks <= record.n_nodes <= result.topology.n_nodes
        if record.job_id not in checker.forked:
            assert record.n_nodes <= record.n_gpus
            assert record.run_time_s == pytest.approx(job.duration_s + record.overhead_s, rel=REL)
            assert record.gpu_s == pytest.approx(record.n_gpus * record.run_time_s, rel=REL)
        assert record.queueing_delay_s == pytest.approx(record.jct_s - record.run_time_s,
                                                        rel=REL, abs=1e-6)
        assert record.queueing_delay_s >= -1e-6 * max(1.0, record.jct_s)
        assert 0.0 <= record.overhead_s <= record.n_preemptions * RESTORE_S * (1 + REL)
        if not cls.preempts:
            assert record.n_preemptions == 0
    plain = [r for r in result.records if r.job_id not in checker.forked]
    gpu_s = sum(r.gpu_s for r in plain)
    expected = sum(jobs[r.job_id].n_gpus * jobs[r.job_id].duration_s for r in plain) + sum(
        r.n_gpus * r.overhead_s for r in plain)
    assert gpu_s == pytest.approx(expected, rel=REL)
    assert all(0 <= busy <= result.topology.n_gpus for busy in result.timeline.busy_gpus)


# ------------------------------------------------------------------------ which policies


def _extra_installed(extra: str) -> bool:
    """Whether every requirement of rackwise's optional extra ``extra`` is installed."""
    marker = f'extra == "{extra}"'
    for requirement in metadata.requires("rackwise") or []:
        if marker in requirement.replace("'", '"'):
            name = requirement.split(";")[0].strip()
            for stop in "<>=!~[ (":
                name = name.split(stop)[0]
            try:
                metadata.distribution(name)
            except metadata.PackageNotFoundError:
                return False
    return True


@functools.cache
def _usable(name: str) -> type[BasePolicy] | str:
    """The policy class, or why it cannot run here (a missing optional extra)."""
    try:
        cls = policy_class(name)
    except MissingExtraError as exc:
        return str(exc)
    extras = getattr(cls, "needs_extra", None) or ()
    for extra in (extras,) if isinstance(extras, str) else extras:
        if not _extra_installed(extra):
            return f"policy '{name}' needs the '{extra}' extra"
    try:  # an extra the installed metadata does not know yet shows up on first use
        Simulator(uniform_cluster(1, gpus_per_node=2), [Job("probe", 0.0, 1, 1.0)], cls()).run()
    except MissingExtraError as exc:
        return str(exc)
    return cls


@pytest.fixture(scope="module", params=sorted(all_policies()))
def policy_cls(request: pytest.FixtureRequest) -> type[BasePolicy]:
    usable = _usable(request.param)
    if isinstance(usable, str):
        pytest.skip(usable)
    return usable


@pytest.fixture(scope="module")
def quiet_policy_cls(policy_cls: type[BasePolicy]) -> type[BasePolicy]:
    """The policy class, if it never preempts."""
    if policy_cls.preempts:
        pytest.skip(f"policy '{policy_cls.name}' preempts")
    return policy_cls


def _simulate(topology: Topology, jobs: list[Job], cls: type[BasePolicy],
              seed: int) -> tuple[SimResult, InvariantChecker]:
    checker = InvariantChecker()
    sim = Simulator(topology, jobs, cls(), perf=IdealPerf(checkpoint_restore_s=RESTORE_S),
                    seed=seed, observers=[checker])
    return sim.run(), checker


# ---------------------------------------------------------------------------- properties


@SWEEP
@given(case=clusters_and_workloads(), seed=st.integers(0, 2**32 - 1))
def test_invariants_hold_and_runs_repeat(policy_cls: type[BasePolicy],
                                         case: tuple[Topology, list[Job]], seed: int) -> None:
    """Every step keeps the invariants, every job finishes, and a seed fixes the records."""
    topology, jobs = case
    result, checker = _simulate(topology, jobs, policy_cls, seed)
    check_result(result, checker, policy_cls)
    again, _ = _simulate(topology, jobs, policy_cls, seed)
    assert again.records == result.records
    assert again.timeline == result.timeline


@SWEEP
@given(jobs=workloads(capacity=8), seed=st.integers(0, 2**32 - 1))
def test_room_for_all_means_no_waiting(quiet_policy_cls: type[BasePolicy], jobs: list[Job],
                                       seed: int) -> None:
    """On a cluster with a free node for every job, a non-preempting policy runs each at once."""
    policy_cls = quiet_policy_cls
    gpus_per_node = max(job.n_gpus for job in jobs)
    topology = uniform_cluster(len(jobs), gpus_per_node=gpus_per_node, nodes_per_rack=len(jobs))
    result, checker = _simulate(topology, jobs, policy_cls, seed)
    check_result(result, checker, policy_cls)
    for record in result.records:
        assert record.first_start == record.submit_time
        if record.job_id in checker.forked:  # copies only speed a job up
            assert record.jct_s <= record.duration_s * (1 + REL)
        else:
            assert record.jct_s == pytest.approx(record.duration_s, rel=REL)


# ----------------------------------------------------------------- the checker itself


def test_checker_catches_a_gpu_held_twice() -> None:
    """The checker fails when the allocation and the running jobs disagree."""
    checker = InvariantChecker()

    def corrupt(sim: Simulator) -> None:
        if sim.running:
            sim.allocation.owner[sim.running[sorted(sim.running)[0]].gpu_ids[0]] = "intruder"

    from rackwise.policies.fifo import Fifo

    sim = Simulator(uniform_cluster(1, gpus_per_node=2), [Job("a", 0.0, 1, 5.0)], Fifo(),
                    observers=[corrupt, checker])
    with pytest.raises(AssertionError):
        sim.run()
