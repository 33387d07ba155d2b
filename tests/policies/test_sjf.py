"""SJF on hand-computed schedules (one 4-GPU server, exact ideal speeds)."""

from __future__ import annotations

from rackwise.cluster.topology import uniform_cluster
from rackwise.perf.base import IdealPerf
from rackwise.policies.registry import make_policy
from rackwise.policies.sjf import Sjf
from rackwise.sim.engine import simulate
from rackwise.workload.job import Job

EXACT = IdealPerf(checkpoint_restore_s=0.0)


def spans(jobs: list[Job], policy: Sjf) -> dict[str, tuple[float, float]]:
    result = simulate(uniform_cluster(1, 4, 1), jobs, policy, perf=EXACT)
    return {r.job_id: (r.first_start, r.finish_time) for r in result.records}


def test_shortest_waiting_job_goes_first() -> None:
    jobs = [Job("A", 0.0, 4, 100.0), Job("B", 10.0, 2, 300.0), Job("C", 20.0, 2, 50.0),
            Job("D", 30.0, 4, 10.0)]
    # At 100 the queue is B (300 s), C (50 s), D (10 s): D, then C and B side by side.
    assert spans(jobs, Sjf()) == {
        "A": (0.0, 100.0), "D": (100.0, 110.0), "C": (110.0, 160.0), "B": (110.0, 410.0)}


def test_ties_go_to_the_earlier_submission() -> None:
    jobs = [Job("A", 0.0, 4, 100.0), Job("Y", 20.0, 4, 50.0), Job("X", 10.0, 4, 50.0)]
    assert spans(jobs, Sjf()) == {"A": (0.0, 100.0), "X": (100.0, 150.0), "Y": (150.0, 200.0)}


def test_backfill_lets_a_longer_job_use_idle_gpus() -> None:
    jobs = [Job("A", 0.0, 2, 100.0), Job("B", 10.0, 4, 50.0), Job("C", 20.0, 2, 500.0)]
    # B is shortest but needs all 4 GPUs; C fits beside A and starts at once.
    assert spans(jobs, Sjf()) == {"A": (0.0, 100.0), "C": (20.0, 520.0), "B": (520.0, 570.0)}


def test_strict_order_blocks_behind_the_head() -> None:
    jobs = [Job("A", 0.0, 2, 100.0), Job("B", 10.0, 4, 50.0), Job("C", 20.0, 2, 500.0)]
    assert spans(jobs, Sjf(backfill=False)) == {
        "A": (0.0, 100.0), "B": (100.0, 150.0), "C": (150.0, 650.0)}


def test_never_preempts_and_declares_the_oracle() -> None:
    jobs = [Job("L", 0.0, 4, 1000.0), Job("S", 10.0, 4, 1.0)]
    result = simulate(uniform_cluster(1, 4, 1), jobs, Sjf(), perf=EXACT)
    assert {r.job_id: r.n_preemptions for r in result.records} == {"L": 0, "S": 0}
    assert Sjf.needs_oracle and not Sjf.preempts


def test_any_placement_strategy() -> None:
    jobs = [Job("A", 0.0, 1, 30.0), Job("B", 0.0, 3, 20.0), Job("C", 0.0, 2, 10.0)]
    for placement in ("consolidated", "first-fit", "best-fit", "random"):
        policy = make_policy("sjf", placement=placement)
        result = simulate(uniform_cluster(2, 2, 1), jobs, policy, perf=EXACT, seed=1)
        got = {r.job_id: (r.first_start, r.finish_time) for r in result.records}
        # C (2) and A (1) start at 0; B (3) needs C's GPUs back.
        assert got == {"C": (0.0, 10.0), "A": (0.0, 30.0), "B": (10.0, 30.0)}, placement
