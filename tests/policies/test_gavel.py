"""Gavel: hand-solved LPs (papers/gavel.md §8, G1-G9) and the round mechanism."""

from __future__ import annotations

import gc
import logging

import numpy as np
import pytest

from rackwise.cluster.topology import uniform_cluster
from rackwise.policies.gavel import Gavel
from rackwise.policies.parts import lp
from rackwise.sim.engine import SimulationStuckError, Simulator, simulate
from rackwise.workload.job import Job

from .hetero_support import TablePerf, cluster, job

V100_K80 = cluster(("v100", 1, 1), ("k80", 1, 1))  # types sort as (k80, v100)


def _first_round(topology, jobs, perf, **params):  # type: ignore[no-untyped-def]
    policy = Gavel(min_reset_interval_s=0.0, **params)
    sim = Simulator(topology, jobs, policy, perf=perf)
    sim.start()
    sim.step()
    return sim, policy


def _x(policy: Gavel, job_id: str) -> np.ndarray:
    """X row in (v100, k80) order, as the digest writes it."""
    return policy.allocation[job_id][::-1]


def test_g1_aware_las_splits_both_types_evenly() -> None:
    perf = TablePerf({("a", "v100"): 4, ("a", "k80"): 1, ("b", "v100"): 4, ("b", "k80"): 2})
    _, policy = _first_round(V100_K80, [job("A", "a", 1e6), job("B", "b", 1e6)], perf)
    assert _x(policy, "A") == pytest.approx([0.5, 0.5], abs=1e-5)
    assert _x(policy, "B") == pytest.approx([0.5, 0.5], abs=1e-5)


def test_g2_scale_factor_equalises_gpu_time() -> None:
    perf = TablePerf({("a", "v100"): 10, ("b", "v100"): 5})
    topology = cluster(("v100", 1, 2))
    _, policy = _first_round(topology, [job("A", "a", 1e6, n_gpus=2), job("B", "b", 1e6)], perf)
    assert policy.allocation["A"] == pytest.approx([0.5], abs=1e-5)
    assert policy.allocation["B"] == pytest.approx([1.0], abs=1e-5)


def test_g3_makespan_puts_each_job_on_its_own_type() -> None:
    rates = np.array([[4.0, 1.0], [2.0, 2.0]])
    x, makespan_s = lp.min_makespan(rates, np.array([400.0, 200.0]), np.ones(2), np.ones(2))
    assert x == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0]]), abs=1e-6)
    assert makespan_s == pytest.approx(100.0, rel=1e-6)


def test_g4_makespan_mixes_types() -> None:
    perf = TablePerf({("a", "v100"): 4, ("a", "k80"): 1, ("b", "v100"): 4, ("b", "k80"): 2})
    _, policy = _first_round(V100_K80, [job("A", "a", 400), job("B", "b", 400)], perf,
                             objective="min_makespan")
    assert _x(policy, "A") == pytest.approx([0.6, 0.4], abs=1e-5)
    assert _x(policy, "B") == pytest.approx([0.4, 0.6], abs=1e-5)
    rates = np.array([[4.0, 1.0], [4.0, 2.0]])
    _, makespan_s = lp.min_makespan(rates, np.array([400.0, 400.0]), np.ones(2), np.ones(2))
    assert makespan_s == pytest.approx(1000 / 7, rel=1e-5)


def test_g5_max_throughput() -> None:
    perf = TablePerf({("a", "v100"): 4, ("a", "k80"): 1, ("b", "v100"): 2, ("b", "k80"): 2})
    _, policy = _first_round(V100_K80, [job("A", "a", 1e6), job("B", "b", 1e6)], perf,
                             objective="max_throughput")
    assert _x(policy, "A") == pytest.approx([1.0, 0.0], abs=1e-6)
    assert _x(policy, "B") == pytest.approx([0.0, 1.0], abs=1e-6)


def test_g6_finish_time_fairness_equals_las_when_fresh() -> None:
    rates = np.array([[4.0, 1.0], [4.0, 2.0]])
    x, rho = lp.finish_time_fairness(rates, np.array([400.0, 400.0]), np.zeros(2), np.zeros(2),
                                     np.ones(2), np.ones(2))
    assert x == pytest.approx(np.full((2, 2), 0.5), abs=1e-3)
    assert rho == pytest.approx(1.0, rel=2e-3)


def _ftf_by_bisection(rates: np.ndarray, remaining: np.ndarray, age: np.ndarray, iso: np.ndarray,
                     n_gpus: np.ndarray, capacity: np.ndarray) -> float:
    """Min max rho the straightforward way: bisection on r, one dense LP per step, row by row."""
    from scipy.optimize import linprog

    n_jobs, n_types = rates.shape
    thr_iso = (rates * np.where(rates > 0, lp.isolated_share(n_gpus, capacity), 0.0)).sum(axis=1)
    denom = iso + remaining / thr_iso

    def feasible(r: float) -> bool:
        rows, bounds = [], []
        for m in range(n_jobs):  # thr_m(X) * (r * denom_m - age_m) >= remaining_m; sum_j X[m] <= 1
            row = np.zeros(n_jobs * n_types)
            row[m * n_types:(m + 1) * n_types] = -rates[m] * (r * denom[m] - age[m])
            rows.append((row, -remaining[m]))
            row = np.zeros(n_jobs * n_types)
            row[m * n_types:(m + 1) * n_types] = 1.0
            rows.append((row, 1.0))
        for j in range(n_types):  # sum_m n_gpus[m] * X[m, j] <= capacity[j]
            row = np.zeros(n_jobs * n_types)
            row[j::n_types] = n_gpus
            rows.append((row, capacity[j]))
        for m in range(n_jobs):
            bounds.extend((0.0, 1.0 if rates[m, j] > 0 else 0.0) for j in range(n_types))
        result = linprog(np.zeros(n_jobs * n_types), A_ub=np.array([r for r, _ in rows]),
                         b_ub=np.array([b for _, b in rows]), bounds=bounds, method="highs")
        return bool(result.status == 0)

    lo, hi = float(np.max(age / denom)), float(np.max((age + remaining / thr_iso) / denom))
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


@pytest.mark.parametrize("seed", range(5))
def test_finish_time_fairness_matches_bisection_on_random_instances(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_jobs = 12
    rates = rng.uniform(0.2, 3.0, size=(n_jobs, 3)) * (rng.random((n_jobs, 3)) > 0.3)
    rates[:, 0] = np.maximum(rates[:, 0], 0.1)  # every job can run somewhere
    n_gpus = rng.choice([1.0, 2.0, 4.0], size=n_jobs)
    capacity = np.array([8.0, 4.0, 8.0])
    remaining = rng.uniform(1e3, 1e5, size=n_jobs)
    age = rng.uniform(0.0, 2e4, size=n_jobs) * (rng.random(n_jobs) > 0.3)
    iso = age * rng.uniform(0.0, 1.0, size=n_jobs)
    x, rho = lp.finish_time_fairness(rates, remaining, age, iso, n_gpus, capacity)
    expected = _ftf_by_bisection(rates, remaining, age, iso, n_gpus, capacity)
    assert expected * (1 - 1e-6) <= rho <= expected * (1 + 1e-3)  # within the default rel_tol
    # X is feasible and attains the value returned.
    assert np.all(x.sum(axis=1) <= 1 + 1e-6) and np.all((x * n_gpus[:, None]).sum(axis=0) <= capacity + 1e-6)
    assert np.all(x[rates == 0] == 0)
    thr_iso = (rates * np.where(rates > 0, lp.isolated_share(n_gpus, capacity), 0.0)).sum(axis=1)
    attained = (age + remaining / (rates * x).sum(axis=1)) / (iso + remaining / thr_iso)
    assert attained.max() == pytest.approx(rho, rel=1e-12)


def test_g7_mechanism_rotates_three_jobs_on_two_gpus() -> None:
    perf = TablePerf({("m", "v100"): 1.0})
    topology = cluster(("v100", 1, 2))
    jobs = [job(f"J{i}", "m", 1e6) for i in range(3)]
    sim, policy = _first_round(topology, jobs, perf)
    for job_id in ("J0", "J1", "J2"):
        assert policy.allocation[job_id] == pytest.approx([2 / 3], abs=1e-5)
    ran = [sorted(sim.running)]
    while len(ran) < 4:
        sim.step()
        if sim.now % 360 == 0:
            ran.append(sorted(sim.running))
    assert ran == [["J0", "J1"], ["J0", "J2"], ["J1", "J2"], ["J0", "J1"]]


def test_g9_job_wider_than_every_type_waits_without_span_types() -> None:
    perf = TablePerf({("a", "v100"): 10, ("a", "k80"): 2.5})
    with pytest.raises(SimulationStuckError):
        simulate(V100_K80, [job("A", "a", 900, n_gpus=2)], Gavel(span_types=False), perf=perf)
    result = simulate(V100_K80, [job("A", "a", 900, n_gpus=2)], Gavel(), perf=perf)
    assert result.records[0].finish_time == pytest.approx(900 / 2.5)


@pytest.mark.parametrize("objective", ["max_min_fairness", "finish_time_fairness"])
def test_lp_failure_keeps_previous_allocation(objective: str, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    perf = TablePerf({("a", "v100"): 4, ("a", "k80"): 1, ("b", "v100"): 4, ("b", "k80"): 2})
    jobs = [job("A", "a", 1e6), job("B", "b", 1e6), job("C", "a", 1e6, submit=100.0)]
    sim, policy = _first_round(V100_K80, jobs, perf, objective=objective)
    before = {k: v.copy() for k, v in policy.allocation.items()}

    def broken(*args: object) -> np.ndarray:
        raise lp.LPError("forced failure")

    monkeypatch.setattr(lp, "SOLVE", broken)
    with caplog.at_level(logging.WARNING, logger="rackwise.policies.gavel"):
        while sim.now < 360:
            sim.step()
    assert any("keeping the previous allocation" in r.message for r in caplog.records)
    assert sorted(policy.allocation) == ["A", "B"]
    for job_id, row in before.items():
        assert policy.allocation[job_id] == pytest.approx(row)


def _one_type_per_job(sim: Simulator) -> None:
    topology = sim.topology
    for state in sim.running.values():
        assert len({topology.gpu_type_of(g) for g in state.gpu_ids}) == 1


@pytest.mark.parametrize("objective", ["max_min_fairness", "min_makespan",
                                       "finish_time_fairness", "max_throughput"])
@pytest.mark.parametrize("aware", [True, False])
def test_small_hetero_trace_finishes_one_type_per_job(objective: str, aware: bool) -> None:
    topology = cluster(("v100", 2, 2), ("p100", 1, 4), ("k80", 2, 4))
    table = {("r50", "v100"): 3.0, ("r50", "p100"): 2.0, ("r50", "k80"): 1.0,
             ("lm", "v100"): 2.0, ("lm", "p100"): 1.8, ("lm", "k80"): 1.5}
    jobs = [job(f"j{i}", "r50" if i % 2 else "lm", 2000 + 500 * i, n_gpus=(1, 2, 4)[i % 3],
                submit=300.0 * i) for i in range(10)]
    policy = Gavel(objective=objective, heterogeneity_aware=aware)  # type: ignore[arg-type]
    result = simulate(topology, jobs, policy, perf=TablePerf(table, restart_s=5.0),
                      observers=[_one_type_per_job])
    assert sorted(r.job_id for r in result.records) == sorted(j.job_id for j in jobs)
    again = simulate(topology, jobs, Gavel(objective=objective, heterogeneity_aware=aware),  # type: ignore[arg-type]
                     perf=TablePerf(table, restart_s=5.0))
    assert again.records == result.records


def test_round_s_drives_the_engine() -> None:
    perf = TablePerf({("m", "v100"): 1.0})
    policy = Gavel(round_s=100.0)
    result = simulate(cluster(("v100", 1, 1)), [job("A", "m", 250), job("B", "m", 250)],
                      policy, perf=perf)
    # Each job gets the single GPU for alternate 100 s rounds until it is done.
    finish = {r.job_id: r.finish_time for r in result.records}
    assert finish == {"A": 450.0, "B": 500.0}


@pytest.mark.parametrize(("gate_s", "start_s"), [(1920.0, 2160.0), (0.0, 360.0)])
def test_a_job_arriving_after_a_solve_waits_for_the_next_one_on_an_idle_cluster(
        gate_s: float, start_s: float) -> None:
    # Gavel re-solves its LP at most every min_reset_interval_s; a job that arrives
    # in between waits, GPUs idle, until the first round after the gate opens.
    jobs = [Job(job_id="A", submit_time=0.0, n_gpus=1, duration_s=50_000.0, total_iters=50_000.0),
            Job(job_id="B", submit_time=100.0, n_gpus=1, duration_s=50_000.0, total_iters=50_000.0)]
    result = simulate(uniform_cluster(1, 4, 1), jobs, Gavel(min_reset_interval_s=gate_s))
    assert {r.job_id: r.first_start for r in result.records} == {"A": 0.0, "B": start_s}


@pytest.mark.parametrize("method", ["highs", "highs-ipm"])
def test_solver_gives_linprogs_answers(method: str) -> None:
    """`lp._solve` calls HiGHS as `linprog` does: the same optimum, and, where scipy
    bundles the pinned HiGHS, the same X bit for bit (the records depend on it)."""
    import highspy
    from scipy import sparse
    from scipy.optimize import linprog

    try:  # scipy's own copy of HiGHS (a private module, so it may be absent)
        from scipy.optimize._highspy import _core as scipy_highs
    except ImportError:
        scipy_highs = None
    parts = ("MAJOR", "MINOR", "PATCH")
    same_highs = all(getattr(scipy_highs, f"HIGHS_VERSION_{part}", None)
                     == getattr(highspy._core, f"HIGHS_VERSION_{part}") for part in parts)
    rng = np.random.default_rng(3)
    for _ in range(20):  # max-min fairness programs of random sizes, as Gavel builds them
        n_jobs, n_types = int(rng.integers(2, 40)), int(rng.integers(1, 4))
        rates = rng.uniform(0.5, 3.0, (n_jobs, n_types)) * (rng.random((n_jobs, n_types)) < 0.8)
        n_gpus = rng.choice([1.0, 2.0, 4.0, 8.0], n_jobs)
        a_ub, b_ub, ub = lp._base(rates, n_gpus, rng.integers(4, 32, n_types).astype(float))
        c = -rates.ravel()
        x = lp._solve(c, sparse.csr_matrix(a_ub), b_ub, ub, method)
        expected = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=np.column_stack([np.zeros_like(ub), ub]),
                           method=method)
        assert c @ x == pytest.approx(expected.fun, rel=1e-7, abs=1e-9)
        assert np.all(a_ub @ x <= b_ub + 1e-7) and np.all((x >= -1e-9) & (x <= ub + 1e-9))
        if same_highs:
            assert np.array_equal(x, expected.x)


def test_solver_reports_an_infeasible_program() -> None:
    from scipy import sparse

    with pytest.raises(lp.LPError, match="HiGHS: Infeasible"):
        # x <= -1 with 0 <= x: no point satisfies both
        lp._solve(np.array([1.0]), sparse.csr_matrix([[1.0]]), np.array([-1.0]), np.array([1.0]))


def test_solver_leaves_no_cyclic_garbage() -> None:
    """A solve's HiGHS instance is freed when it returns, solved or refused, not by a collection."""
    from scipy import sparse

    def solve_both() -> None:
        lp._solve(np.array([-1.0]), sparse.csr_matrix([[1.0]]), np.array([1.0]), np.array([1.0]))
        with pytest.raises(lp.LPError):
            lp._solve(np.array([1.0]), sparse.csr_matrix([[1.0]]), np.array([-1.0]), np.array([1.0]))

    solve_both()  # first-use imports leave their own garbage
    gc.collect()
    solve_both()
    assert gc.collect() == 0


def test_constraint_rows_follow_their_definition() -> None:
    """The CSR arrays `lp._base` and `lp._with_column` build equal the rows written out densely."""
    rng = np.random.default_rng(5)
    for n_jobs, n_types in [(1, 1), (3, 1), (5, 3), (7, 2)]:
        rates = rng.uniform(0.5, 2.0, (n_jobs, n_types))
        n_gpus = rng.choice([1.0, 2.0, 8.0], n_jobs)
        a_ub, b_ub, _ = lp._base(rates, n_gpus, np.full(n_types, 16.0))
        dense = np.zeros((n_jobs + n_types, n_jobs * n_types))
        for m in range(n_jobs):
            dense[m, m * n_types:(m + 1) * n_types] = 1.0  # sum_j X[m, j] <= 1
            for j in range(n_types):
                dense[n_jobs + j, m * n_types + j] = n_gpus[m]  # sum_m n_gpus[m] X[m, j] <= N[j]
        assert np.array_equal(a_ub.toarray(), dense)
        assert np.array_equal(b_ub, np.r_[np.ones(n_jobs), np.full(n_types, 16.0)])
        assert np.array_equal(lp._with_column(a_ub, 0.0).toarray(), np.c_[dense, np.zeros(len(dense))])
        assert np.array_equal(lp._with_column(a_ub, 1.0).toarray(), np.c_[dense, np.ones(len(dense))])
