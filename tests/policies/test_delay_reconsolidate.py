"""Re-consolidation in ``dally`` (digest §3.2 Variant B): running jobs move to tighter slots.

A move happens when remaining iterations x (t_iter now − t_iter there)
exceed the restart cost. Perf stub: a job runs at 1 iteration/s on one node
and at 1/(1 + σ) when spread, so every figure below can be checked by hand.
The simulator's invariant checker (tests/sim) rides along on every run.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.delay_helpers import SpanPerf, job
from rackwise.cluster.topology import Topology, uniform_cluster
from rackwise.metrics.records import JobRecord
from rackwise.policies.delay import Dally, Migration
from rackwise.policies.parts.locality import L0, L1, L2
from rackwise.sim.engine import Simulator
from sim.test_invariants import InvariantChecker
from strategies import clusters_and_workloads

TOY = uniform_cluster(2, gpus_per_node=4, nodes_per_rack=2)  # n0: GPUs 0-3, n1: 4-7
N0, N1 = (0, 1, 2, 3), (4, 5, 6, 7)


def moving(**params: object) -> Dally:
    """High jobs spread at once (timers 0), no preemption or tuning: only moves."""
    defaults = {"reconsolidate": True, "timer_high_s": (0.0, 0.0), "preempt": False,
                "autotune": False}
    return Dally(**{**defaults, **params})


class Checked:
    """A simulation with the invariant checker attached; records and placements per job."""

    def __init__(self, topology: Topology, jobs: list, policy: Dally, perf: SpanPerf) -> None:
        self.placements: dict[str, list[tuple[float, tuple[int, ...]]]] = {}

        def watch(sim: Simulator) -> None:
            for job_id, state in sorted(sim.running.items()):
                runs = self.placements.setdefault(job_id, [])
                if not runs or runs[-1] != (state.run_start, state.gpu_ids):
                    runs.append((state.run_start, state.gpu_ids))

        self.checker = InvariantChecker()
        result = Simulator(topology, jobs, policy, perf=perf,
                           observers=[self.checker, watch]).run()
        self.records: dict[str, JobRecord] = {r.job_id: r for r in result.records}
        assert sorted(self.records) == sorted(j.job_id for j in jobs)  # every job finished
        self.migrations: list[Migration] = list(policy.migrations)


def _spread_c(b_end: float, extra: tuple = ()) -> list:
    """A holds n0's 0-1 for long, B n1's 4-5 until ``b_end``; C (4 GPUs, lm, 3000 s) spreads at t=1."""
    return [job("A", 0, 2, 10_000), job("A2", 0, 2, 1), job("B", 0, 2, b_end),
            job("C", 1, 4, 3000, model="lm"), *extra]


@pytest.mark.parametrize(("restore_s", "moves"), [(30.0, True), (2000.0, True), (3000.0, False)])
def test_a_spread_job_moves_to_a_node_when_the_gain_beats_the_restart(
        restore_s: float, moves: bool) -> None:
    """C runs on 2,3,6,7 at half speed (σ = 1). B ends at t=1000 and frees n1's 4-5.

    By then C did 999 x 0.5 = 499.5 of 3000 iterations: moving to n1 saves
    2500.5 x (2 − 1) = 2500.5 s, against the restore. It moves unless the
    restore costs more; it keeps its own 6-7 on n1.
    """
    perf = SpanPerf({"lm": (1.0, 1.0)}, restore_s=restore_s)
    run = Checked(TOY, _spread_c(1000.0), moving(), perf)
    c = run.records["C"]
    if moves:
        assert run.placements["C"] == [(1.0, (2, 3, 6, 7)), (1000.0, N1)]
        assert run.migrations == [Migration(1000.0, "C", L1, L0, pytest.approx(2500.5), restore_s)]
        assert c.n_preemptions == 1 and c.overhead_s == pytest.approx(restore_s)
        assert c.finish_time == pytest.approx(1000.0 + restore_s + 2500.5)
    else:
        assert run.placements["C"] == [(1.0, (2, 3, 6, 7))]
        assert run.migrations == [] and c.n_preemptions == 0
        assert c.finish_time == pytest.approx(1.0 + 2 * 3000.0)


def test_no_move_when_the_slot_is_no_tighter_or_the_option_is_off() -> None:
    perf = SpanPerf({"lm": (1.0, 1.0)})
    off = Checked(TOY, _spread_c(1000.0), moving(reconsolidate=False), perf)
    assert off.placements["C"] == [(1.0, (2, 3, 6, 7))] and off.migrations == []
    # C spreads over 3 and 7; no node frees up before it ends at 1 + 2 x 3000
    jobs = [job("A", 0, 3, 10_000), job("B", 0, 3, 10_000), job("C", 1, 2, 3000, model="lm")]
    still = Checked(TOY, jobs, moving(), perf)
    assert still.placements["C"] == [(1.0, (3, 7))] and still.migrations == []


def test_a_job_spread_across_racks_moves_into_one_rack() -> None:
    """2 racks x 2 nodes x 4 GPUs. J (8 GPUs, σ 0.2 in a rack, 1.0 across) starts on n1+n3.

    X1 holds n0 and X3 n2 (X2 kept n1 for a second). X3 ends at t=1000 and
    frees n2: rack 1 (n2 + J's own n3) now holds J.
    Done by then: 999 x 0.5; left 3500.5 iterations, each 2 − 1.2 s faster.
    """
    cluster = uniform_cluster(4, gpus_per_node=4, nodes_per_rack=2)
    jobs = [job("X1", 0, 4, 10_000), job("X2", 0, 4, 1), job("X3", 0, 4, 1000),
            job("J", 1, 8, 4000, model="lm")]
    run = Checked(cluster, jobs, moving(), SpanPerf({"lm": (0.2, 1.0)}))
    assert run.placements["J"] == [(1.0, (4, 5, 6, 7, 12, 13, 14, 15)),
                                   (1000.0, tuple(range(8, 16)))]
    assert run.migrations == [Migration(1000.0, "J", L2, L1, pytest.approx(3500.5 * 0.8), 30.0)]
    assert run.records["J"].finish_time == pytest.approx(1030.0 + 3500.5 * 1.2)


def test_a_waiting_job_goes_before_a_move() -> None:
    """P (2 GPUs) queues at t=2 and takes 4-5 when B ends; C moves only when P ends at 1500.

    Done by then: 1499 x 0.5 = 749.5 of 3000 iterations.
    """
    run = Checked(TOY, _spread_c(1000.0, (job("P", 2, 2, 500),)), moving(),
                  SpanPerf({"lm": (1.0, 1.0)}))
    assert run.placements["P"] == [(1000.0, (4, 5))]
    assert run.placements["C"] == [(1.0, (2, 3, 6, 7)), (1500.0, N1)]
    assert run.migrations == [Migration(1500.0, "C", L1, L0, pytest.approx(2250.5), 30.0)]


def test_min_run_holds_a_move_back_and_a_wake_up_makes_it_later() -> None:
    """B ends at t=300, when C has run 299 s < min_run_s = 600: C moves at t=601.

    Nothing else happens then, so the policy asked to be woken. Done by
    then: 600 x 0.5 = 300 of 3000 iterations.
    """
    run = Checked(TOY, _spread_c(300.0), moving(), SpanPerf({"lm": (1.0, 1.0)}))
    assert run.placements["C"] == [(1.0, (2, 3, 6, 7)), (601.0, N1)]
    assert run.records["C"].finish_time == pytest.approx(601.0 + 30.0 + 2700.0)


def test_the_gpus_a_move_leaves_go_to_a_waiting_job_at_once() -> None:
    """A and B end at t=1000; C moves to n0 (its own 2-3 plus 0-1) and leaves n1 whole.

    Q (4 GPUs, med, long timers) waits for a node: it gets n1 in the pass
    just after the move, not at the next event (C's finish, or Q's timer).
    """
    jobs = [job("A", 0, 2, 1000), job("A2", 0, 2, 1), job("B", 0, 2, 1000),
            job("C", 1, 4, 3000, model="lm"), job("Q", 2, 4, 500, model="bert")]
    policy = moving(timer_med_s=(5000.0, 5000.0))
    run = Checked(TOY, jobs, policy, SpanPerf({"lm": (1.0, 1.0), "bert": (0.3, 0.3)}))
    assert run.placements["C"] == [(1.0, (2, 3, 6, 7)), (1000.0, N0)]
    start, gpus = run.placements["Q"][0]
    assert gpus == N1 and 1000.0 < start < 1000.01


def test_no_move_for_a_job_out_of_preemptions() -> None:
    """The case above with max_preemptions=0: J may not be stopped, so it stays spread."""
    cluster = uniform_cluster(4, gpus_per_node=4, nodes_per_rack=2)
    jobs = [job("X1", 0, 4, 10_000), job("X2", 0, 4, 1), job("X3", 0, 4, 1000),
            job("J", 1, 8, 4000, model="lm")]
    run = Checked(cluster, jobs, moving(max_preemptions=0), SpanPerf({"lm": (0.2, 1.0)}))
    assert run.migrations == [] and run.records["J"].n_preemptions == 0


def _checked_twice(topology: Topology, jobs: list, min_run_s: float) -> Checked:
    """Run with moves, preemption and tuning all on; check what must hold of any run."""
    sigmas = {"lm": (0.7, 1.5), "bert": (0.25, 0.4)}

    def simulate() -> Checked:
        policy = Dally(reconsolidate=True, min_run_s=min_run_s, timer_high_s=(30.0, 30.0),
                       tune_every_s=600.0)
        return Checked(topology, jobs, policy, SpanPerf(sigmas))  # checks every step

    run = simulate()
    assert all(m.to_level < m.from_level and m.gain_s > m.restart_s for m in run.migrations)
    assert all(r.n_preemptions <= 2 for r in run.records.values())  # moves included
    again = simulate()
    assert again.records == run.records and again.migrations == run.migrations
    return run


@pytest.mark.parametrize("min_run_s", [0.0, 50.0, 600.0])
def test_moves_keep_the_invariants_on_busy_random_workloads(min_run_s: float) -> None:
    """40 jobs of 1-8 GPUs on 2 racks x 2 nodes x 4 GPUs, five seeds: no GPU is held
    twice at any step, every job finishes, and runs repeat. Moves do happen."""
    cluster = uniform_cluster(4, gpus_per_node=4, nodes_per_rack=2)
    n_moves = 0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        jobs = [job(f"j{i:02d}", float(rng.integers(0, 4000)), int(rng.choice([1, 2, 3, 4, 6, 8])),
                    float(rng.integers(50, 3000)), model=str(rng.choice(["lm", "bert", "cnn"])))
                for i in range(40)]
        n_moves += len(_checked_twice(cluster, jobs, min_run_s).migrations)
    assert n_moves > 0


@settings(max_examples=40)
@given(drawn=clusters_and_workloads(max_jobs=20), min_run_s=st.sampled_from([0.0, 50.0, 600.0]))
def test_moves_keep_the_invariants_on_drawn_clusters(drawn, min_run_s: float) -> None:
    """Odd clusters (mixed node sizes and GPU types) and workloads: the same checks."""
    topology, jobs = drawn
    models = ("lm", "bert", "cnn")
    _checked_twice(topology, [j.with_changes(model=models[i % 3]) for i, j in enumerate(jobs)],
                   min_run_s)
