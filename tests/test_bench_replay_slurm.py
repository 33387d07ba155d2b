"""benchmarks/replay_slurm.py without Slurm: its skip path, and how it measures a replay's delays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tests.benchmark_scripts import BENCHMARKS, load_script

from rackwise.metrics.records import JobRecord

SCRIPT = BENCHMARKS / "replay_slurm.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("replay_slurm")


def test_skips_in_one_line_without_slurm(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no Slurm binary on it
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env,
                          check=False)
    assert done.returncode == 0
    assert done.stdout.startswith("skipped: Slurm binaries not on PATH")
    assert len(done.stdout.strip().splitlines()) == 1


def _record(job_id: str, first_start: float, finish: float) -> JobRecord:
    return JobRecord(job_id=job_id, group=None, model=None, n_gpus=1, submit_time=0.0,
                     first_start=first_start, finish_time=finish, jct_s=finish, queueing_delay_s=0.0,
                     run_time_s=finish - first_start, overhead_s=0.0, gpu_s=0.0, n_preemptions=0,
                     n_nodes=1, n_racks=1, duration_s=1.0, total_iters=1.0)


def test_each_run_is_paired_with_the_start_that_launched_it(bench: ModuleType) -> None:
    """Job a: started at 0, running at 150; preempted, started again at 1000, running at 1100.
    Job b: a start refused at 500 (not counted), started at 600, running at 900."""
    scale, t0 = 100.0, 1_000.0
    wall = lambda now: t0 + now / scale  # noqa: E731
    decisions = [
        {"action": "start", "ok": True, "job_id": "a", "now": 0.0, "wall_time": wall(20.0)},
        {"action": "start", "ok": False, "job_id": "b", "now": 500.0, "wall_time": wall(510.0)},
        {"action": "start", "ok": True, "job_id": "b", "now": 600.0, "wall_time": wall(640.0)},
        {"action": "preempt", "ok": True, "job_id": "a", "now": 1000.0, "wall_time": wall(1005.0)},
        {"action": "start", "ok": True, "job_id": "a", "now": 1000.0, "wall_time": wall(1010.0)},
    ]
    run = bench.RealRun(
        records=[_record("a", 160.0, 2000.0), _record("b", 880.0, 1500.0)], decisions=decisions,
        starts={"a": [150.0, 1100.0], "b": [900.0]}, ends={"a": [1990.0], "b": [1450.0]},
        t0=t0, scale=scale, wall_s=30.0, n_rounds=100, serve_exit=0, topology=None)
    latency = bench.measure(run, poll_trace_s=20.0)
    assert sorted(latency.start_s) == pytest.approx([100.0, 150.0, 300.0])
    assert sorted(latency.apply_s) == pytest.approx([10.0, 20.0, 40.0])
    assert latency.first_start_stamp_s == pytest.approx([10.0, -20.0])
    assert latency.finish_stamp_s == pytest.approx([10.0, 50.0])
    # no start decision follows either end; a was started 0 s after its arrival (b 600 s: over a poll)
    assert latency.end_to_decision_s == []
    assert latency.arrival_to_round_s == [0.0]
    starts = {r.job_id: r.first_start for r in bench.with_payload_starts(run)}
    assert starts == {"a": 150.0, "b": 900.0}


def test_serve_rhythm_sees_a_completion_at_the_next_round(bench: ModuleType) -> None:
    """Rounds every 30 s from the last one: a ends at 90, b waits for the round at 100."""
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.workload.job import Job

    jobs = [Job("a", 0.0, 1, 90.0), Job("b", 10.0, 1, 5.0)]
    cluster = uniform_cluster(1, gpus_per_node=1)
    every_event = {r.job_id: r for r in bench.simulate(jobs, "fifo", cluster, 0, 0.0).records}
    polled = {r.job_id: r for r in bench.simulate(jobs, "fifo", cluster, 0, 0.0, rounds_every_s=30.0).records}
    assert (every_event["b"].first_start, polled["b"].first_start) == (90.0, 100.0)
    assert polled["a"].finish_time == 90.0  # the job itself ends on time; only the next start waits
    # with a 2 s launch: b is started at 100 and runs from 102
    late = {r.job_id: r for r in bench.simulate(jobs, "fifo", cluster, 0, 2.0, rounds_every_s=30.0).records}
    assert (late["a"].finish_time, late["b"].first_start, late["b"].finish_time) == (92.0, 102.0, 107.0)


def test_serve_rhythm_reads_an_arrival_late(bench: ModuleType) -> None:
    """Rounds read the cluster 3 s after they are due: b, arriving on a free GPU at 10, starts at 13."""
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.workload.job import Job

    jobs = [Job("a", 0.0, 1, 90.0), Job("b", 10.0, 1, 5.0)]
    polled = {r.job_id: r for r in bench.simulate(jobs, "fifo", uniform_cluster(1, gpus_per_node=2), 0,
                                                  0.0, rounds_every_s=30.0, rounds_late_s=3.0).records}
    assert (polled["a"].first_start, polled["b"].first_start) == (3.0, 13.0)
