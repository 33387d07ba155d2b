"""Gavel's simulator's rules in the `gavel` policy: its FIFO, the re-solve gate, round ends."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from rackwise.experiments.config import load_experiment
from rackwise.experiments.grid import expand
from rackwise.policies.gavel import Gavel, gavel_fifo_types
from rackwise.run import execute
from rackwise.sim.engine import Simulator

from .hetero_support import TablePerf, cluster, job

ROOT = Path(__file__).resolve().parents[2]
TYPES = ("k80", "p100", "v100")


def _types(previous: dict[str, int], active: list[str], capacity: list[int],
           n_gpus: dict[str, int] | None = None, seed: int = 0,
           rates: dict[str, list[float]] | None = None) -> dict[str, str]:
    ids = sorted({*previous, *active}, key=int)
    sizes = dict.fromkeys(ids, 1) | (n_gpus or {})
    speeds = {job_id: np.ones(3) for job_id in ids} | {
        k: np.array(v) for k, v in (rates or {}).items()}
    out = gavel_fifo_types(previous, active, sizes, TYPES, np.array(capacity), speeds,
                           {job_id: int(job_id) for job_id in ids}, random.Random(seed))
    return {job_id: TYPES[j] for job_id, j in out.items()}


def _draws(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3) for _ in range(n)]


def test_fifo_gives_queued_jobs_the_last_listed_type_past_its_gpus() -> None:
    # Every queued job draws an index among the types with room (all three here), and
    # takes the type listed last (v100). Job 1 fills the two V100s: the type at its drawn
    # index leaves the list. With seed 0 that is index 1 (p100): v100 stays last and
    # takes jobs 2 and 3 past its GPUs.
    assert _draws(0, 2) == [1, 1]
    assert _types({}, ["0", "1", "2", "3"], [1, 1, 2], seed=0) == dict.fromkeys("0123", "v100")
    # With seed 1 job 1 draws index 2: v100 leaves the list and p100 is last.
    assert _draws(1, 2) == [0, 2]
    got = _types({}, ["0", "1", "2"], [1, 1, 2], seed=1)
    assert got == {"0": "v100", "1": "v100", "2": "p100"}


def test_fifo_hands_a_finished_jobs_type_to_the_head_of_the_queue() -> None:
    # Job 0 (on k80) finished; queued job 2 takes its k80 although v100 is listed last.
    got = _types({"0": 0, "1": 2}, ["1", "2", "3"], [1, 0, 2])
    assert got["2"] == "k80"
    assert "0" not in got and got["1"] == "v100"


def test_fifo_queue_stops_at_a_job_no_listed_type_has_room_for() -> None:
    got = _types({}, ["0", "1", "2"], [2, 0, 2], n_gpus={"0": 2, "1": 4, "2": 1})
    assert got == {"0": "v100"}  # job 1 needs 4 GPUs: nothing listed has room; 2 waits behind it


def test_fifo_skips_a_type_the_job_cannot_run_on() -> None:
    got = _types({}, ["0", "1"], [4, 4, 4], rates={"0": [1.0, 1.0, 0.0]})
    assert "0" not in got and got["1"] == "v100"


def _freed_gpu_run(**params: object) -> dict[str, float]:
    """Two GPUs, three jobs at t=0: A is short, B and C long. When does C start?"""
    perf = TablePerf({("m", "v100"): 1.0})
    jobs = [job("0", "m", 500.0), job("1", "m", 1e5), job("2", "m", 1e5)]
    policy = Gavel(objective="fifo", heterogeneity_aware=False, fifo_seed=0,
                   second_stage=False, **params)  # type: ignore[arg-type]
    result = Simulator(cluster(("v100", 1, 2)), jobs, policy, perf=perf).run()
    return {r.job_id: r.first_start for r in result.records}


def test_fifo_leaves_a_freed_gpu_idle_until_the_next_gated_solve() -> None:
    starts = _freed_gpu_run()
    assert starts["0"] == starts["1"] == 0.0
    # Job 0 ends at 500 s; the solve at 0 s shuts the gate for 1,920 s, so job 2 waits
    # for the first round after it (2,160 s), with a GPU idle from 500 s on.
    assert starts["2"] == pytest.approx(2160.0)


def test_a_solve_at_time_zero_leaves_the_gate_open_when_asked() -> None:
    starts = _freed_gpu_run(zero_reset_opens_gate=True)
    assert starts["2"] == pytest.approx(720.0)  # the first round after job 0 ended


def test_whole_steps_stop_each_job_and_end_the_round_with_the_last() -> None:
    # At 0.33 iterations/s a round of 360 s holds floor(118.8) = 118 whole steps, which
    # end at 357.58 s; both running jobs stop there, so the next round starts then, as
    # in Gavel's simulator, and job 2 runs in it.
    perf = TablePerf({("m", "v100"): 0.33})
    jobs = [job("0", "m", 1e5), job("1", "m", 1e5), job("2", "m", 1e5)]
    policy = Gavel(min_reset_interval_s=0.0, whole_steps=True)
    sim = Simulator(cluster(("v100", 1, 2)), jobs, policy, perf=perf)
    sim.start()
    sim.step()
    assert sorted(sim.running) == ["0", "1"]
    sim.step()
    assert sim.now == pytest.approx(118 / 0.33)
    state = sim.running.get("0") or sim.pending["0"]
    assert state.iters_at(sim.now) == pytest.approx(118.0)
    assert "2" in sim.running
    # A job with a faster micro-task idles until the round ends: here no round is cut.
    plain = Simulator(cluster(("v100", 1, 2)), jobs, Gavel(min_reset_interval_s=0.0), perf=perf)
    plain.start()
    plain.step()
    plain.step()
    assert plain.now == pytest.approx(360.0)


@pytest.mark.parametrize(("order", "expected"), [(None, "p100"), (["v100", "p100", "k80"], "v100")])
def test_type_order_offers_gpu_types_in_gavels_fixed_order(order: list[str] | None,
                                                         expected: str) -> None:
    # The job runs 3x faster on the P100, so X puts it there; Gavel offers V100s first,
    # and a job of priority 0 on a type still takes a free GPU of it (LAS).
    perf = TablePerf({("m", "v100"): 1.0, ("m", "p100"): 3.0})
    topology = cluster(("v100", 1, 1), ("p100", 1, 1))
    policy = Gavel(second_stage=False, type_order=order)
    sim = Simulator(topology, [job("0", "m", 1e5)], policy, perf=perf)
    sim.start()
    sim.step()
    assert policy.allocation["0"][list(policy.rates_.types).index("p100")] == pytest.approx(1.0)
    assert {topology.gpu_type_of(g) for g in sim.running["0"].gpu_ids} == {expected}


def test_compat_experiment_runs_both_policies_on_a_small_gavel_trace() -> None:
    experiment = load_experiment(ROOT / "experiments" / "gavel-compat.yaml")
    assert [p.label for p in experiment.policies] == ["fifo", "max_min_fairness_perf"]
    for cell in expand(experiment):
        config = cell.config.model_copy(update={"workload": cell.config.workload.model_copy(
            update={"first_n": 20})})
        result, workload = execute(config)
        assert len(result.records) == len(workload) == 20
        again, _ = execute(config)
        assert [(r.job_id, r.finish_time) for r in again.records] == \
            [(r.job_id, r.finish_time) for r in result.records]
