"""Hadar: prices, the dual subroutine and task-level placement (papers/hadar.md §6, H1-H4, H9-H10)."""

from __future__ import annotations

import math
import signal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackwise.errors import InputError
from rackwise.policies.gavel import Gavel
from rackwise.policies.hadar import Hadar
from rackwise.policies.hadare import HadarE
from rackwise.policies.parts.primal_dual import (
    Option,
    PriceBook,
    best_plan,
    cheapest_gpus,
    position_prices,
    sigmoid_utility,
)
from rackwise.sim.engine import Simulator, simulate

from .hetero_support import TablePerf, cluster, job


def test_h1_price_curve_and_marginal_cost() -> None:
    assert position_prices(1.0, 16.0, 4) == pytest.approx([1, 2, 4, 8])
    book = PriceBook([4], 1.0, [16.0], horizon=1)
    assert book.cost(0, 0, 2) == pytest.approx(3.0)
    book.take(0, 0, 2)
    assert book.cost(0, 0, 2) == pytest.approx(12.0)


def _rows(book: PriceBook, n_gpus: int, progress: float) -> list[list[Option]]:
    rows = []
    for t in range(book.horizon):
        picked = cheapest_gpus(book, t, [0], n_gpus)
        rows.append([] if picked is None else [Option(picked[0], progress, picked[1])])
    return rows


def test_h2_admission_sequence() -> None:
    book = PriceBook([4], 1.0, [16.0], horizon=2)
    utility = {0: 20.0, 1: 10.0}
    payoffs = []
    for _ in range(3):
        plan = best_plan(_rows(book, 2, 1.0), 1.0, lambda t: utility.get(t, 0.0), 2)
        assert plan is not None
        payoffs.append((plan.payoff, plan.finish_slot))
        book.commit(plan)
    assert payoffs == [(pytest.approx(17.0), 0), (pytest.approx(8.0), 0), (pytest.approx(7.0), 1)]


def test_h4_subroutine_waits_for_a_cheaper_slot() -> None:
    rows = [[Option(2 * price, 2.0, ((0, 2),))] for price in (1.0, 3.0, 1.0)]
    plan = best_plan(rows, 4.0, lambda t: 20.0 - 3.0 * (t + 1) if t < 3 else 0.0, 3)
    assert plan is not None
    assert plan.finish_slot == 2 and plan.payoff == pytest.approx(7.0)
    assert [slot for slot, _ in plan.slots] == [0, 2]  # slot 1 (index 1) stays idle


def test_h4_without_waiting_finishes_early_at_lower_payoff() -> None:
    rows = [[Option(2 * price, 2.0, ((0, 2),))] for price in (1.0, 3.0, 1.0)]
    plan = best_plan(rows, 4.0, lambda t: 20.0 - 3.0 * (t + 1) if t < 3 else 0.0, 0)
    assert plan is not None and plan.payoff == pytest.approx(6.0) and plan.finish_slot == 1


def _hadar_on(topology, perf, jobs, **params):  # type: ignore[no-untyped-def]
    policy = Hadar(**params)
    sim = Simulator(topology, jobs, policy, perf=perf)
    sim.start()
    return sim, policy


@pytest.mark.parametrize(("model", "progress_per_s"), [("bottleneck", 2.0), ("additive", 6.25)])
def test_h3_mixed_option_progress(model: str, progress_per_s: float) -> None:
    topology = cluster(("v100", 1, 2), ("k80", 1, 2))
    perf = TablePerf({("a", "v100"): 10.0, ("a", "k80"): 2.5})
    _, policy = _hadar_on(topology, perf, [job("A", "a", 900, n_gpus=2)], progress_model=model)
    book = PriceBook([2, 2], 1.0, [1.0, 1.0], horizon=1, groups=policy.planner.node_type)
    book.take(0, 0, 1)  # one free V100 on node 0, one free K80 on node 1
    book.take(0, 1, 1)
    rates = np.array([2.5, 10.0])  # (k80, v100): types sort by name
    options = policy.planner.slot_options(book, 0, rates, 2)
    assert max(o.progress for o in options) == pytest.approx(360.0 * progress_per_s)
    assert all(o.take == ((0, 1), (1, 1)) for o in options)


def test_h3_hadar_runs_a_job_across_types_where_gavel_cannot() -> None:
    topology = cluster(("v100", 1, 1), ("k80", 1, 1))
    perf = TablePerf({("a", "v100"): 10.0, ("a", "k80"): 2.5})
    seen: list[set[str]] = []
    result = simulate(topology, [job("A", "a", 900, n_gpus=2)], Hadar(backfill=False), perf=perf,
                      observers=[lambda sim: seen.extend(
                          {topology.gpu_type_of(g) for g in s.gpu_ids} for s in sim.running.values())])
    assert {"v100", "k80"} in seen
    assert result.records[0].finish_time == pytest.approx(900 / 2.5)  # the stub's bottleneck rate


@given(theta=st.lists(st.floats(0.5, 50.0), min_size=3, max_size=3),
       n_gpus=st.sampled_from([1, 2, 4]), work=st.floats(100.0, 1e6))
def test_h9_price_guard_no_plan_pays_at_full_price(theta: list[float], n_gpus: int,
                                                   work: float) -> None:
    delta = 360.0
    d = [math.ceil(work / (delta * t)) for t in theta]
    gamma3 = 1.5 * min(d)
    f = [sigmoid_utility(di, 1.0, 1.0, gamma3) for di in d]
    u_max = max(fi / (n_gpus * di) for fi, di in zip(f, d))
    book = PriceBook([4, 4, 4], u_max, [u_max] * 3, horizon=4)  # every GPU at U_max
    rows = []
    for t in range(book.horizon):
        row = []
        for node in range(3):
            picked = cheapest_gpus(book, t, [node], n_gpus)
            assert picked is not None
            row.append(Option(picked[0], delta * theta[node], picked[1]))
        rows.append(row)
    plan = best_plan(rows, work, lambda t: sigmoid_utility(t + 1, 1.0, 1.0, gamma3), 3)
    assert plan is None or plan.payoff <= 1e-12



def test_plan_ends_when_rounding_leaves_less_than_a_slot_tolerance() -> None:
    # Seen on philly_2017 under hadare: 3 slots and 1,556 tail slots of 360 iterations fall
    # 1.4e-9 short of the work (rounding); the tail then needed 0 more slots, forever.
    option = Option(360.0 * 3.4e-7, 360.0, ((0, 1),))
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("best_plan did not return"))
    signal.alarm(10)
    try:
        plan = best_plan([[option]] * 4, 561240.0000000014, lambda t: 1.0, 2)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert plan is not None and plan.finish_slot == 1559 and plan.tail_slots == 1556

def test_h10_no_gratuitous_mixing() -> None:
    topology = cluster(("v100", 1, 4), ("p100", 1, 4), ("k80", 1, 4))
    perf = TablePerf({("a", t): 5.0 for t in ("v100", "p100", "k80")})
    nodes: list[int] = []
    simulate(topology, [job("A", "a", 5000, n_gpus=2)], Hadar(backfill=False), perf=perf,
             observers=[lambda sim: nodes.extend(
                 len({topology.gpu_node[g] for g in s.gpu_ids}) for s in sim.running.values())])
    assert nodes and set(nodes) == {1}


def test_small_hetero_trace_finishes_and_repeats() -> None:
    topology = cluster(("v100", 2, 2), ("p100", 1, 4), ("k80", 2, 4))
    table = {("r50", "v100"): 3.0, ("r50", "p100"): 2.0, ("r50", "k80"): 1.0,
             ("lm", "v100"): 2.0, ("lm", "p100"): 1.8, ("lm", "k80"): 1.5}
    jobs = [job(f"j{i}", "r50" if i % 2 else "lm", 2000 + 500 * i, n_gpus=(1, 2, 4, 8)[i % 4],
                submit=200.0 * i) for i in range(12)]
    for params in ({}, {"progress_model": "additive"}, {"order": "utility_density"},
                   {"order": "arrival"}, {"backfill": False}):
        first = simulate(topology, jobs, Hadar(**params), perf=TablePerf(table, restart_s=5.0))
        assert sorted(r.job_id for r in first.records) == sorted(j.job_id for j in jobs)
        again = simulate(topology, jobs, Hadar(**params), perf=TablePerf(table, restart_s=5.0))
        assert again.records == first.records


def test_hadar_and_gavel_say_when_they_read_true_iterations() -> None:
    assert Hadar().capabilities.needs_oracle and HadarE().capabilities.needs_oracle
    assert not Gavel().capabilities.needs_oracle
    assert Gavel(objective="min_makespan").capabilities.needs_oracle
    assert Gavel(objective="finish_time_fairness").capabilities.needs_oracle


def test_longest_then_density_keeps_the_total_time_and_runs_short_jobs_early() -> None:
    # One fast and one slow GPU; the long job bounds the total time (7,200 s on the V100).
    topology = cluster(("v100", 1, 1), ("k80", 1, 1))
    table = {("m", "v100"): 10.0, ("m", "k80"): 2.5}
    jobs = [job("A-long", "m", 72_000), job("B-mid", "m", 18_000), job("C-short", "m", 900)]
    finish = {}
    for order in ("arrival", "utility_density", "longest_then_density"):
        result = simulate(topology, jobs, Hadar(order=order), perf=TablePerf(table))  # type: ignore[arg-type]
        finish[order] = {r.job_id: r.finish_time for r in result.records}
    ours = finish["longest_then_density"]
    # Arrival order gives the K80 to the mid job, so the short one waits 2 hours.
    assert finish["arrival"]["C-short"] == 7290.0 and ours["C-short"] == 360.0
    # Density order gives the V100 to the short job first, so the long one finishes a slot late.
    assert max(finish["utility_density"].values()) == 8820.0
    assert ours["A-long"] == 7200.0 and max(ours.values()) == max(finish["arrival"].values()) == 7290.0


@pytest.mark.parametrize("field", ["utility_gamma1", "utility_gamma2"])
def test_the_utility_must_fall_from_a_positive_top(field: str) -> None:
    with pytest.raises(InputError, match=field):
        Hadar(**{field: 0.0})
    with pytest.raises(InputError, match=field):
        HadarE(**{field: -1.0})


def test_longest_share_must_be_a_share() -> None:
    with pytest.raises(InputError, match="longest_share"):
        Hadar(longest_share=0.0)
    with pytest.raises(InputError, match="longest_share"):
        HadarE(longest_share=1.5)


@pytest.mark.parametrize(("order", "first"), [("arrival", "A-long"), ("utility_density", "B-short")])
def test_utility_density_plans_the_short_job_first(order: str, first: str) -> None:
    # One GPU, two jobs submitted together: the long one comes first in arrival order.
    jobs = [job("A-long", "m", 36_000), job("B-short", "m", 3_600)]
    result = simulate(cluster(("v100", 1, 1)), jobs, Hadar(order=order),  # type: ignore[arg-type]
                      perf=TablePerf({("m", "v100"): 10.0}))
    finish = {r.job_id: r.finish_time for r in result.records}
    assert min(finish, key=finish.__getitem__) == first
    assert sum(finish.values()) == pytest.approx(3600 + 360 + 360 if first == "B-short" else 3600 + 3960)


@pytest.mark.parametrize("policy", [Hadar(), HadarE()])
def test_a_round_that_keeps_no_running_job_preempts_them_all(policy: Hadar) -> None:
    """With no layout at all, every running job moves off its GPUs, and nothing is placed."""
    topology = cluster(("v100", 2, 4))
    jobs = [job(f"j{i}", "m", 3_600, n_gpus=2) for i in range(3)]
    sim = Simulator(topology, jobs, policy, perf=TablePerf({("m", "v100"): 1.0}))
    sim.start()
    while not sim.running:
        sim.step()
    active = [*sim.view.pending.values(), *sim.view.running.values()]
    decisions = policy.planner_._decide(sim.view, active, {})
    assert sorted(decisions.preempt) == sorted(sim.running) and not decisions.start


@given(st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=6, unique=True), min_size=1, max_size=5,
                unique_by=tuple),
       st.lists(st.integers(1, 8), min_size=1, max_size=6))
def test_making_room_counts_the_kept_gpus_left_on_each_node(held: list[list[int]], asks: list[int]) -> None:
    """However many kept jobs `_InShape` moves, each node's count of kept GPUs is what they hold there."""
    from rackwise.cluster.allocation import Allocation, TentativeAllocation
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.policies.parts.hadar_planning import _InShape
    from rackwise.workload.job import Job
    from rackwise.workload.state import JobState

    topology = uniform_cluster(4, 4, 2)
    allocation = Allocation(topology)
    taken: set[int] = set()
    kept: dict[str, JobState] = {}
    for i, gpus in enumerate(held):
        gpus = [g for g in gpus if g not in taken]
        if not gpus:
            continue
        taken.update(gpus)
        state = JobState(Job(f"k{i}", 0.0, len(gpus), 10.0))
        state.gpu_ids = tuple(gpus)
        allocation.allocate(state.job_id, gpus)
        kept[state.job_id] = state
    placing = _InShape(TentativeAllocation(allocation), topology.gpu_node, [0] * topology.n_nodes, kept)
    for n in asks:
        made = placing._make_room(0, n, set())
        if made is not None:
            assert placing._room[made[0]] >= n
        for node, states in placing._kept_on.items():
            assert placing._kept_gpus[node] == sum(placing._gpus_on(s, node) for s in states)
