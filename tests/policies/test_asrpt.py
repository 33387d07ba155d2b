"""A-SRPT end to end: the digest's worked cases (a_srpt.md §6), the lower bound, determinism."""

from __future__ import annotations

import dataclasses
import importlib.util
import pickle
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.policies.test_predictor import recurring_jobs
from tests.strategies import clusters_and_workloads

import rackwise
from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import uniform_cluster
from rackwise.errors import InputError, MissingExtraError
from rackwise.perf.base import IdealPerf
from rackwise.perf.graph_placement import place_graph
from rackwise.perf.job_graph import build_job_graph, graph_kind
from rackwise.policies.asrpt import Asrpt, AsrptOracle
from rackwise.policies.parts.predictor import prediction_accuracy
from rackwise.policies.parts.virtual_machine import srpt_finish_times
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import Simulator, simulate
from rackwise.workload.job import Job, Parallelism

pytest.importorskip("sklearn")
# Replacing a method to count its calls: the compiled build (setup.py) calls it directly.
COUNTS_CALLS = pytest.mark.skipif(rackwise.is_compiled(), reason="counts need the plain-Python build")

# (r, g, tau, N) of TC1 as jobs: duration N * tau, iterations N.
TC1 = [Job("J1", 0.0, 4, 100.0, 100.0), Job("J2", 10.0, 2, 40.0, 40.0), Job("J3", 20.0, 8, 50.0, 100.0)]
TC2 = [Job("J1", 0.0, 4, 100.0), Job("J2", 1.0, 4, 10.0)]


def _mean_jct(n_gpus: int, jobs: list[Job], restore_s: float = 0.0, **params: object) -> float:
    result = simulate(uniform_cluster(1, n_gpus, 8), jobs, make_policy("asrpt-oracle", **params),
                      perf=IdealPerf(restore_s))
    return sum(r.jct_s for r in result.records) / len(result.records)


@pytest.mark.parametrize(("params", "expected"), [
    ({}, 90.0),
    ({"preempt": False}, 90.0),
    ({"gate": "vm_completion"}, 400.0 / 3),  # J2 20-60, J1 60-160, J3 160-210
])
def test_tc1_mean_jct(params: dict[str, object], expected: float) -> None:
    assert _mean_jct(8, TC1, **params) == pytest.approx(expected)


@pytest.mark.parametrize(("params", "restore_s", "expected"), [
    ({"min_run_s": 0.0}, 0.0, 60.0),  # J2 1-11, J1 ends 110
    ({"min_run_s": 0.0}, 5.0, 62.5),  # J1 ends 115
    ({"preempt": False}, 0.0, 104.5),
    ({"gate": "vm_completion"}, 0.0, 115.0),  # J2 11-21, J1 110-210
    ({}, 0.0, 89.5),  # min_run blocks at t=1; the t=60 tick preempts; J1 ends 110
    ({}, 30.0, 104.5),  # the same with a 30 s restore: J1 ends 140
])
def test_tc2_mean_jct(params: dict[str, object], restore_s: float, expected: float) -> None:
    assert _mean_jct(4, TC2, restore_s, **params) == pytest.approx(expected)


def test_hysteresis_delays_displacing_a_job_that_is_only_slightly_longer() -> None:
    # Machine sizes (G = 4): J1 100 s, J2 90 s. At t=1 J2's 90 is not below 0.9 x J1's 99,
    # so J1 keeps its GPUs; the machine then serves J2, and at the t=60 tick J2 (31) beats
    # J1 (99): J1 ran 0-60, J2 60-150, J1 150-190.
    jobs = [Job("J1", 0.0, 4, 100.0), Job("J2", 1.0, 4, 90.0)]
    assert _mean_jct(4, jobs, min_run_s=0.0) == pytest.approx((190 + 149) / 2)
    # Without the margin J2 takes over at once: J2 1-91, J1 91-190.
    assert _mean_jct(4, jobs, min_run_s=0.0, epsilon=0.0) == pytest.approx((190 + 90) / 2)


def test_ideal_placements_kept_per_kind_of_job_are_the_partitioner_s_own() -> None:
    topology = uniform_cluster(2, 4, 8)
    kinds = [Job("", 0.0, 8, 1.0, model="GPT-2 XL", parallelism=Parallelism(2, 2, 2)),
             Job("", 0.0, 4, 1.0, gradient_bytes=4e8), Job("", 0.0, 1, 1.0)]
    jobs = [kinds[i % 3].with_changes(job_id=f"J{i}", submit_time=10.0 * i, duration_s=50.0 + i,
                                      total_iters=50.0 + i) for i in range(9)]
    policy = Asrpt()
    simulate(topology, jobs, policy)
    assert len(policy.ideal_placements_) == 3  # asked once per kind
    for job in jobs:
        fresh = place_graph(Allocation(topology), build_job_graph(job), kl_passes=policy.kl_passes)
        assert policy.ideal_placements_[graph_kind(job)] == fresh


def test_the_oracle_policy_is_asrpt_with_the_oracle_predictor() -> None:
    topology = uniform_cluster(1, 8, 8)
    a = simulate(topology, TC1, Asrpt(predictor="oracle", rank="vm")).records
    b = simulate(topology, TC1, AsrptOracle()).records
    assert a == b
    assert AsrptOracle.needs_oracle and not Asrpt.needs_oracle
    assert issubclass(AsrptOracle, Asrpt)


def test_tc7_overrun_grows_the_prediction_and_the_virtual_work() -> None:
    # Nothing finished yet: the default 100 iterations. J1 has 300; at t=100 it reaches 100.
    jobs = [Job("J1", 0.0, 4, 300.0), Job("J2", 100.0, 2, 5.0)]
    policy = Asrpt(predictor="median", default_prediction=100.0)
    seen: dict[str, float] = {}

    def watch(sim: Simulator) -> None:
        if sim.now == 100.0:
            seen["estimate"] = policy.srpt.estimate_iters("J1")
            seen["vm_remaining_s"] = policy.srpt.virtual_remaining_s("J1")

    Simulator(uniform_cluster(1, 8, 8), jobs, policy, observers=[watch]).run()
    assert seen == {"estimate": 150.0, "vm_remaining_s": 25.0}  # 4 * 50 * 1 / 8
    logged = {r.job_id: r for r in policy.srpt.prediction_log}
    assert logged["J1"].predicted_iters == 100.0 and logged["J1"].actual_iters == 300.0


def _recurring_trace(n_jobs: int = 150) -> list[Job]:
    jobs, actual = recurring_jobs(n_jobs, seed=11)
    # arrivals every 20 s, 500 iterations per second: about 65% load on 8 GPUs
    return [job.with_changes(submit_time=20.0 * i, duration_s=iters / 500, total_iters=iters)
            for i, (job, iters) in enumerate(zip(jobs, actual))]


def test_asrpt_finishes_every_job_of_a_small_trace_and_learns() -> None:
    jobs = _recurring_trace()
    policy = make_policy("asrpt", predictor="forest", n_estimators=10, refit_every=20)
    result = simulate(uniform_cluster(2, 4, 2), jobs, policy, seed=3)
    assert sorted(r.job_id for r in result.records) == sorted(j.job_id for j in jobs)
    log = policy.srpt.prediction_log
    assert len(log) == len(jobs)
    assert policy.srpt.n_fits >= 5
    assert sum(r.source == "forest" for r in log) > len(jobs) // 2
    rules = make_policy("asrpt", predictor="median")
    simulate(uniform_cluster(2, 4, 2), jobs, rules, seed=3)
    mae = prediction_accuracy(log)["mae_iters"]
    assert mae < 0.75 * prediction_accuracy(rules.srpt.prediction_log)["mae_iters"]


def test_same_seed_identical_records_and_predictions() -> None:
    jobs = _recurring_trace(80)
    runs = []
    for _ in range(2):
        policy = make_policy("asrpt", predictor="forest", n_estimators=5, refit_every=10)
        result = simulate(uniform_cluster(2, 4, 2), jobs, policy, seed=9)
        runs.append((result.records, policy.srpt.prediction_log, policy.srpt.placement_log))
    assert runs[0] == runs[1]


def test_multi_server_starts_report_their_traffic() -> None:
    job = Job("big", 0.0, 8, 10.0, model="GPT-2 XL", parallelism=Parallelism(2, 2, 2))
    policy = AsrptOracle()
    simulate(uniform_cluster(2, 4, 8), [job], policy)
    (record,) = policy.srpt.placement_log
    assert record.n_servers == 2
    assert record.cut_bytes == pytest.approx(4 * 8 * 3.2768e6 / 2)  # four pipeline edges
    assert record.comm_s_per_iter > 0


def test_missing_scikit_learn_is_a_named_error(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Asrpt(predictor="forest").capabilities.needs_extra == "ml"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sklearn" else real(name, *a))
    with pytest.raises(MissingExtraError, match=r"pip install 'rackwise\[ml\]'"):
        make_policy("asrpt", predictor="forest")
    for name in ("asrpt", "asrpt-oracle"):  # the survival predictor and the oracle need no forest
        assert make_policy(name).capabilities.needs_extra is None


def test_run_state_appears_only_at_reset_and_survives_pickling_mid_run() -> None:
    policy = make_policy("asrpt", predictor="forest", n_estimators=3, min_train_rows=2, refit_every=2)
    assert not [k for k in vars(policy) if k.endswith("_")]
    sim = Simulator(uniform_cluster(2, 4, 2), _recurring_trace(40), policy)
    sim.start()
    for _ in range(60):
        sim.step()
    clone = pickle.loads(pickle.dumps(policy))
    assert clone.srpt.prediction_log == policy.srpt.prediction_log
    fresh = dataclasses.replace(policy)
    assert fresh == policy and not hasattr(fresh, "srpt_")


@settings(max_examples=30)
@given(clusters_and_workloads(max_jobs=12))
def test_tc8_no_schedule_beats_the_virtual_machine(case: tuple) -> None:
    topology, jobs = case
    capacity = topology.n_gpus
    bound = srpt_finish_times([(j.job_id, j.submit_time, j.n_gpus * j.duration_s / capacity)
                               for j in jobs])
    vm_flow = sum(bound[j.job_id] - j.submit_time for j in jobs)
    for policy in (AsrptOracle(), Asrpt(predictor="median", default_prediction=50.0)):
        result = simulate(topology, jobs, policy, perf=IdealPerf(0.0))
        assert len(result.records) == len(jobs)
        assert sum(r.jct_s for r in result.records) >= vm_flow * (1 - 1e-9) - 1e-6


def _censoring_case(rank: str) -> float:
    # The log: group a ran three 10 s jobs and one of 1,000 s; group b three of 20 s.
    # Predictions are group medians: 10 s for L (1,000 s, from 0), 20 s for S (10 s, at 15 s).
    history = [Job(f"H{i}", -2000.0, 4, size, group=group) for i, (group, size) in
               enumerate([("a", 10.0)] * 3 + [("a", 1000.0)] + [("b", 20.0)] * 3)]
    jobs = [Job("L", 0.0, 4, 1000.0, group="a"), Job("S", 15.0, 4, 10.0, group="b")]
    policy = Asrpt(predictor="median", rank=rank, min_run_s=0.0, epsilon=0.0)  # type: ignore[arg-type]
    result = simulate(uniform_cluster(1, 4, 4), jobs, policy, perf=IdealPerf(0.0), history=history)
    return sum(r.jct_s for r in result.records) / len(result.records)


def test_gittins_rank_conditions_on_attained_service() -> None:
    # At 15 s L has outlived group a's short jobs, so only the 1,000 s one is left for it
    # (rank 985), against S's 20: S runs at once, 15-25.
    assert _censoring_case("gittins") == pytest.approx((1010.0 + 10.0) / 2)
    # On point predictions L's overrun (10 -> 23 s) leaves it 13 s to go, less than S's 20:
    # S waits for the 60 s tick, when L has grown to 90 s.
    assert _censoring_case("vm") == pytest.approx((1010.0 + 55.0) / 2)


@pytest.mark.parametrize("rank", ["gittins", "expected"])
def test_exact_sizes_rank_as_srpt(rank: str) -> None:
    assert _mean_jct(8, TC1, rank=rank) == pytest.approx(90.0)
    assert _mean_jct(4, TC2, rank=rank, min_run_s=0.0) == pytest.approx(60.0)


def test_oracle_error_spreads_predictions_by_its_sigma_whatever_the_arrival_order() -> None:
    jobs = _recurring_trace(400)
    logs = []
    for order in (jobs, jobs[::-1]):
        # Reversed ids, same sizes: each job's error depends on its id and the seed only.
        policy = AsrptOracle(oracle_error=0.5)
        simulate(uniform_cluster(2, 4, 2), [j.with_changes(submit_time=20.0 * i) for i, j in enumerate(order)],
                 policy, seed=5)
        logs.append({r.job_id: r for r in policy.srpt.prediction_log})
    assert logs[0].keys() == {j.job_id for j in jobs}
    first = [logs[0][j.job_id].predicted_iters for j in jobs]
    assert first == [logs[1][j.job_id].predicted_iters for j in jobs]
    log_errors = np.log([logs[0][j.job_id].predicted_iters / j.total_iters for j in jobs])
    assert abs(float(np.std(log_errors)) - 0.5) < 0.06  # 400 draws: the estimate's sd is about 0.018
    assert abs(float(np.mean(log_errors))) < 0.08


@pytest.mark.parametrize(("params", "message"), [
    ({"oracle_error": -0.1}, "field 'oracle_error'"),
    ({"oracle_error": float("nan")}, "field 'oracle_error'"),
    ({"predictor": "median", "oracle_error": 0.5}, "predictor 'oracle' only"),
])
def test_bad_oracle_error_is_refused_when_the_policy_is_built(params: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        make_policy("asrpt", **params)


def test_the_class_oracle_predicts_the_median_true_size_of_its_class_so_far() -> None:
    jobs = [Job("a", 0.0, 2, 100.0, group="vc1"), Job("b", 1.0, 2, 300.0, group="vc1"),
            Job("c", 2.0, 4, 50.0, group="vc1"), Job("d", 3.0, 2, 200.0, group="vc1"),
            Job("e", 4.0, 2, 40.0, group="vc2")]
    policy = make_policy("asrpt", predictor="class-oracle")
    simulate(uniform_cluster(1, 8, 8), jobs, policy)
    predicted = {r.job_id: r.predicted_iters for r in policy.srpt.prediction_log}
    # vc1 with 2 GPUs: [100] -> 100, [100, 300] -> 200, [100, 200, 300] -> 200; the others are alone.
    assert predicted == pytest.approx({"a": 100.0, "b": 200.0, "c": 50.0, "d": 200.0, "e": 40.0})
    assert policy.capabilities.needs_oracle and not make_policy("asrpt").capabilities.needs_oracle


def test_the_survival_predictor_counts_running_jobs_as_lower_bounds() -> None:
    # One class; a finishes at 10 s, b and c run 1,000 s. When d arrives (t=50), the finished jobs
    # alone say 10 s; counting b and c as "more than 50" leaves 2/3 of the mass past 50, at 1.5 x 50.
    jobs = [Job("a", 0.0, 2, 10.0, group="vc"), Job("b", 0.0, 2, 1_000.0, group="vc"),
            Job("c", 0.0, 2, 1_000.0, group="vc"), Job("d", 50.0, 2, 10.0, group="vc")]
    policy = make_policy("asrpt", predictor="survival", rank="gittins", default_prediction=10.0)
    result = simulate(uniform_cluster(1, 8, 8), jobs, policy)
    assert sorted(r.job_id for r in result.records) == ["a", "b", "c", "d"]
    logged = {r.job_id: r for r in policy.srpt.prediction_log}
    assert (logged["d"].source, logged["d"].predicted_iters) == ("survival", pytest.approx(75.0))
    runs = [simulate(uniform_cluster(2, 4, 2), _recurring_trace(80),
                     make_policy("asrpt", predictor="survival", rank="gittins"), seed=4).records
            for _ in range(2)]
    assert runs[0] == runs[1]
    with pytest.raises(InputError, match="field 'survival_window'"):
        make_policy("asrpt", predictor="survival", survival_window=0)
    with pytest.raises(InputError, match="field 'survival_refresh'"):
        make_policy("asrpt", survival_refresh=1.5)


def test_the_forest_fits_on_the_latest_train_window_jobs_only() -> None:
    jobs = _recurring_trace(120)
    policy = make_policy("asrpt", predictor="forest", n_estimators=5, refit_every=20, train_window=30)
    simulate(uniform_cluster(2, 4, 2), jobs, policy, seed=3)
    predictor = policy.srpt._predictor
    assert predictor.n_fits >= 3 and len(predictor._fit_rows) == 30


def test_a_train_window_below_min_train_rows_is_refused() -> None:
    with pytest.raises(InputError, match="train_window"):
        make_policy("asrpt", predictor="forest", train_window=10, min_train_rows=20)
    make_policy("asrpt", predictor="median", train_window=10)  # no forest: nothing to refuse


def test_survival_refresh_reaches_the_class_sizes() -> None:
    """A class worked out less often ranks on staler sizes: other decisions, every job still done."""
    jobs = [Job(f"j{i}", 30.0 * i, 1 + i % 4, 200.0 + 37.0 * (i % 9), group=f"vc{i % 2}") for i in range(80)]

    def records(share: float) -> list[tuple[str, float]]:
        result = simulate(uniform_cluster(2, 4, 4), jobs, make_policy("asrpt", survival_refresh=share), seed=0)
        return sorted((r.job_id, r.finish_time) for r in result.records)

    every, seldom = records(0.0), records(1.0)
    assert [job_id for job_id, _ in seldom] == sorted(job.job_id for job in jobs)
    assert seldom != every


@COUNTS_CALLS
def test_running_jobs_bounded_below_the_best_waiting_key_leave_every_decision_as_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounds, and bounds kept from an earlier decision, change no record and save ranks and bounds."""
    from rackwise import traces
    from rackwise.policies.parts.size_distribution import SizeDistribution

    topology = uniform_cluster(32, 8, 8)  # 256 GPUs: jobs wait, and running ones are ranked against them
    jobs = traces.load("philly_2017", first_n=300).drop_oversized(topology.n_gpus)
    calls = {"rank": 0, "bound": 0}
    gittins_line, rank_bound_stretch = SizeDistribution.gittins_line, SizeDistribution.rank_bound_stretch

    def counted_rank(self: SizeDistribution, attained: float) -> object:
        calls["rank"] += 1
        return gittins_line(self, attained)

    def counted_bound(self: SizeDistribution, attained: float) -> tuple[float, float]:
        calls["bound"] += 1
        return rank_bound_stretch(self, attained)

    def run() -> tuple[object, dict[str, int]]:
        records = Simulator(topology, jobs, Asrpt(), perf=IdealPerf(), seed=0).run().records
        counted = dict(calls)
        calls.update(rank=0, bound=0)
        return records, counted

    monkeypatch.setattr(SizeDistribution, "gittins_line", counted_rank)
    monkeypatch.setattr(SizeDistribution, "rank_bound_stretch", counted_bound)
    kept, with_kept = run()
    # A stretch that ends where it starts: no bound outlives the decision that worked it out.
    monkeypatch.setattr(SizeDistribution, "rank_bound_stretch",
                        lambda self, attained: (counted_bound(self, attained)[0], attained))
    bounded, with_bounds = run()
    monkeypatch.setattr(SizeDistribution, "rank_bound_stretch",
                        lambda self, attained: (np.inf, attained))  # never under the bar
    exact, without = run()
    assert kept == bounded == exact
    assert with_kept["rank"] == with_bounds["rank"] < without["rank"]  # the bounds did stand in for ranks
    assert with_kept["bound"] < with_bounds["bound"] / 2  # and kept bounds for most new ones


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100, allow_nan=False), st.integers(1, 8), st.booleans()),
                max_size=40, unique_by=lambda item: item[0]),
       st.integers(1, 64), st.randoms(use_true_random=False))
def test_the_greedy_prefix_is_the_plain_merge_of_both_lists(
        jobs: list[tuple[float, int, bool]], capacity: int, rng: random.Random) -> None:
    from rackwise.policies.parts.ordering import RankedQueue
    from rackwise.policies.parts.predicted_srpt import _greedy_prefix
    from rackwise.workload.state import JobState

    def pair(job_id: str, key: float, n_gpus: int) -> tuple[tuple[float, float, int, str], JobState]:
        return (key, 0.0, 0, job_id), JobState(Job(job_id, 0.0, n_gpus, 1.0))

    items = sorted(pair(f"j{i}", key, n_gpus) for i, (key, n_gpus, _) in enumerate(jobs))
    is_running = {f"j{i}": running for i, (_, _, running) in enumerate(jobs)}
    running = [item for item in items if is_running[item[0][3]]]
    eligible = [item for item in items if not is_running[item[0][3]]]
    # Some running jobs keyed under every eligible one are only named, in any order
    # (`PredictedSrpt._ranked`); in key order when they hold more than the GPUs (sharing them).
    n_under = rng.randint(0, sum(1 for item in running if eligible and item[0] < eligible[0][0]))
    under = [state for _, state in running[:n_under]]
    if sum(state.job.n_gpus for state in under) <= capacity:
        rng.shuffle(under)
    desired, waiting, room = [], [], capacity  # the merge, walked one job at a time
    for item in items:
        if item[1].job.n_gpus <= room:
            desired.append(item)
            if not is_running[item[0][3]]:
                waiting.append(item)
            room -= item[1].job.n_gpus
            if room == 0:
                break
    queue = RankedQueue()  # the waiting jobs as `PredictedSrpt` keeps them
    for key, state in eligible:
        queue.add(state.job_id, state.n_gpus, key)
    pending = {state.job_id: state for _, state in eligible}
    got_desired, got_waiting = _greedy_prefix(under, running[n_under:], queue.cursor(), pending, capacity)
    assert got_waiting == waiting
    assert got_desired == [item for item in desired if item[0] not in {key for key, _ in running[:n_under]}]


@COUNTS_CALLS
@pytest.mark.parametrize(("policy", "params"), [
    ("asrpt", {}), ("asrpt", {"rank": "expected"}), ("asrpt", {"predictor": "median"}),
    ("asrpt", {"predictor": "forest", "min_train_rows": 20, "refit_every": 20}),
    ("asrpt", {"strict_order": True}), ("asrpt", {"rank": "vm"}), ("asrpt-oracle", {}), ("combined", {})])
def test_the_kept_waiting_queue_decides_as_one_built_afresh_at_every_decision(
        monkeypatch: pytest.MonkeyPatch, policy: str, params: dict[str, object]) -> None:
    """Mended from the change log between decisions, the queue (and, rank "vm", the running jobs'
    keys) gives the records of one built from every job at every decision (as when the view keeps
    no log)."""
    from rackwise import traces
    from rackwise.engine.view import ClusterView
    from rackwise.policies.parts import predicted_srpt
    from rackwise.run import make_perf

    topology = uniform_cluster(8, 8, 2)  # 64 GPUs: a queue forms, and jobs are preempted
    jobs = traces.load("itp_2021", first_n=400).drop_oversized(topology.n_gpus)
    built = 0

    class CountedQueue(predicted_srpt.RankedQueue):
        def __init__(self) -> None:
            nonlocal built
            built += 1
            super().__init__()

    monkeypatch.setattr(predicted_srpt, "RankedQueue", CountedQueue)

    def run() -> tuple[list[object], int, int]:
        nonlocal built
        built = 0
        result = Simulator(topology, jobs, make_policy(policy, **params), perf=make_perf("network", {}),
                           seed=0).run()
        return result.records, max(result.timeline.n_pending), built

    kept, most_waiting, kept_builds = run()
    monkeypatch.setattr(ClusterView, "running_changes_since", lambda self, mark: None)
    afresh, _, afresh_builds = run()
    assert kept == afresh
    assert most_waiting > 50 and sum(record.n_preemptions for record in kept) > 0  # the regime it is for
    assert kept_builds < afresh_builds / 10  # mended, mostly
