"""The combined policy: GPU-type choice, sensitivity-class delay, A-SRPT fall-back, registry."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.policies.hetero_support import TablePerf, cluster, job

from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.perf.base import IdealPerf
from rackwise.policies.asrpt import AsrptOracle
from rackwise.policies.combined import Combined
from rackwise.policies.parts.heterogeneity import TypeMask
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import Simulator, simulate
from rackwise.testing.policy_checks import TRACE
from rackwise.workload.job import Job

HETERO = cluster(("v100", 1, 4), ("k80", 1, 4))  # GPUs 0-3 are V100, 4-7 are K80
RATES = {("m", "v100"): 4.0, ("m", "k80"): 1.0}


def oracle(**params: object) -> Combined:
    """The oracle variant, ranked as asrpt-oracle; without copies unless asked (most tests here are about placement)."""
    return replace(Combined(predictor="oracle", rank="vm", copies=False), **params)


def _finish(records: list, job_id: str) -> float:
    return next(r.finish_time for r in records if r.job_id == job_id)


def _start(records: list, job_id: str) -> float:
    return next(r.first_start for r in records if r.job_id == job_id)


# ------------------------------------------------------------------------- GPU type


def test_type_mask_hides_other_types() -> None:
    sim = Simulator(HETERO, [], oracle())
    mask = TypeMask(sim.allocation, (1,))
    assert (mask.n_free, mask.free_in_node(0), mask.free_in_node(1)) == (4, 0, 4)
    assert mask.free_gpu_ids(0) == [] and mask.free_gpu_ids(1) == [4, 5, 6, 7]
    assert mask.free_in_rack(0) == 0 and mask.free_in_rack(1) == 4
    assert mask.tightest_node(2) == 1 and mask.tightest_node(5) is None
    assert mask.lowest_node_with(4) == 1 and mask.lowest_node_with(0) == 0
    assert mask.lowest_node_with(8) is None
    assert mask.free_nodes() == [(1, 4)] and mask.free_counts() == [0, 4]


def test_a_job_takes_its_fastest_type() -> None:
    starts: list[tuple[int, ...]] = []
    sim = Simulator(HETERO, [job("J", "m", 400.0)], oracle(), perf=TablePerf(RATES))
    sim.observers = (lambda s: starts.extend(st.gpu_ids for st in s.running.values()),)
    result = sim.run()
    assert starts and set(starts[0]) <= {0, 1, 2, 3}
    assert _finish(result.records, "J") == pytest.approx(100.0)  # 400 iterations at 4/s


@pytest.mark.parametrize(("params", "b_finish"), [
    ({}, 1_100.0),  # K80 is a quarter as fast: B waits for the V100 node (free at 1000)
    ({"type_wait_s": 100.0}, 101.0 + 400.0),  # after 100 s of waiting it takes the K80
    ({"min_speed_frac": 0.0}, 1.0 + 400.0),  # any type is acceptable at once
])
def test_a_much_slower_type_is_refused_until_the_job_has_waited(
        params: dict[str, object], b_finish: float) -> None:
    jobs = [job("A", "m", 4_000.0, n_gpus=4), job("B", "m", 400.0, submit=1.0)]
    result = simulate(HETERO, jobs, oracle(**params), perf=TablePerf(RATES))
    assert _finish(result.records, "A") == pytest.approx(1_000.0)
    assert _finish(result.records, "B") == pytest.approx(b_finish)


# ---------------------------------------------------------------------------- delay


def _busy_two_racks(sensitivity: float) -> list[Job]:
    """A holds 3 GPUs of node 0 until 1000, A2 3 of node 1 until 2000; H (2 GPUs) comes at 1."""
    return [Job("A", 0.0, 3, 1_000.0), Job("A2", 0.0, 3, 2_000.0),
            Job("H", 1.0, 2, 100.0, comm_sensitivity=sensitivity)]


@pytest.mark.parametrize(("sensitivity", "params", "start", "n_nodes"), [
    (0.9, {}, 1_000.0, 1),  # high: waits for one node, which A frees at 1000
    (0.0, {}, 1.0, 2),  # low: no timer, spreads across racks at once
    (0.9, {"timer_high_s": (300.0, 300.0)}, 601.0, 2),  # both timers run out first
])
def test_sensitive_jobs_wait_for_locality_as_long_as_their_class_allows(
        sensitivity: float, params: dict[str, object], start: float, n_nodes: int) -> None:
    topology = uniform_cluster(2, 4, 1)  # one node per rack
    result = simulate(topology, _busy_two_racks(sensitivity), oracle(**params), perf=IdealPerf())
    record = next(r for r in result.records if r.job_id == "H")
    assert record.first_start == pytest.approx(start)
    assert record.n_nodes == n_nodes


def test_classes_follow_the_thresholds() -> None:
    policy = oracle()
    sim = Simulator(uniform_cluster(2, 4, 1), [], policy)
    sim.start()
    classes = [policy.sensitivity_class(sim.view, Job(f"j{s}", 0.0, 2, 1.0, comm_sensitivity=s))
               for s in (0.1, 0.3, 0.7)]
    assert classes == ["low", "med", "high"]
    assert policy.sensitivity_class(sim.view, Job("one", 0.0, 1, 1.0, comm_sensitivity=0.9)) == "low"


# --------------------------------------------------------------- ordering, ablation


def test_other_placements_fall_back_to_asrpt() -> None:
    cluster_ = uniform_cluster(4, 4, 2)
    mine = simulate(cluster_, TRACE, oracle(placement="consolidated"), seed=3).records
    theirs = simulate(cluster_, TRACE, AsrptOracle(placement="consolidated"), seed=3).records
    assert mine == theirs


def test_shortest_predicted_job_goes_first() -> None:
    # One node: the oracle knows S is short, so S runs before L although L came first in line.
    jobs = [Job("X", 0.0, 4, 50.0), Job("L", 1.0, 4, 1_000.0), Job("S", 2.0, 4, 10.0)]
    records = simulate(uniform_cluster(1, 4, 1), jobs, oracle(preempt=False)).records
    assert _start(records, "S") == pytest.approx(50.0)
    assert _start(records, "L") == pytest.approx(60.0)


def test_same_seed_same_records_and_view_not_kept() -> None:
    cluster_ = uniform_cluster(4, 4, 2)
    first = Simulator(cluster_, TRACE, oracle(), seed=5)
    records = first.run().records
    assert not [v for v in vars(first.policy).values() if isinstance(v, ClusterView)]
    assert records == simulate(cluster_, TRACE, oracle(), seed=5).records
    assert len(records) == len(TRACE)


def test_registered_with_validated_parameters() -> None:
    policy = make_policy("combined", predictor="oracle", type_wait_s=60.0)
    assert isinstance(policy, Combined) and policy.type_wait_s == 60.0
    with pytest.raises(InputError, match="type_wait"):
        make_policy("combined", type_wait="soon")


# ------------------------------------------------------------------- copies on idle GPUs

TWO_NODES = uniform_cluster(2, 4, 1)


def test_a_lone_job_forks_onto_the_idle_node_at_hadares_efficiency_and_cost() -> None:
    policy = oracle(copies=True)
    alone = [Job("A", 0.0, 4, 1_000.0)]
    forked = _finish(simulate(TWO_NODES, alone, policy).records, "A")
    frac = policy.fork_overhead_frac(alone[0])
    assert frac > 0
    assert forked == pytest.approx(1_000.0 / ((1.0 + policy.copy_efficiency) * (1.0 - frac)))
    assert _finish(simulate(TWO_NODES, alone, oracle()).records, "A") == pytest.approx(1_000.0)


def test_a_copy_never_delays_a_job_and_running_jobs_fork_only_at_a_sync() -> None:
    jobs = [Job("A", 0.0, 4, 5_000.0), Job("B", 100.0, 4, 150.0)]
    sim = Simulator(TWO_NODES, jobs, oracle(copies=True, sync_s=360.0))
    seen: list[tuple[float, int]] = []
    sim.observers = (lambda s: seen.append((s.now, s.running["A"].copies)) if "A" in s.running else None,)
    records = sim.run().records
    assert _start(records, "B") == pytest.approx(100.0)  # it took A's copy, at once
    assert (100.0, 1) in seen  # A gave its copy up for B
    # B leaves at 250, but A forks again only at the next sync.
    assert all(copies == 1 for now, copies in seen if 100.0 <= now < 360.0)
    assert (360.0, 2) in seen


def test_copies_switch_off_forking_in_the_capabilities() -> None:
    assert oracle(copies=True).capabilities.forks
    assert not oracle(copies=False).capabilities.forks
    with pytest.raises(InputError, match="copy_efficiency"):
        oracle(copies=True, copy_efficiency=1.5).__post_init__()
