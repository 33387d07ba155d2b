"""SRTF on hand-computed schedules (one 4-GPU server, exact ideal speeds)."""

from __future__ import annotations

from rackwise.cluster.topology import uniform_cluster
from rackwise.perf.base import IdealPerf
from rackwise.policies.srtf import Srtf
from rackwise.sim.engine import simulate
from rackwise.workload.job import Job

EXACT = IdealPerf(checkpoint_restore_s=0.0)


def records(jobs: list[Job], perf: IdealPerf = EXACT) -> dict:
    result = simulate(uniform_cluster(1, 4, 1), jobs, Srtf(), perf=perf)
    return {r.job_id: r for r in result.records}


def test_short_arrival_preempts_a_long_job() -> None:
    got = records([Job("L", 0.0, 4, 1000.0), Job("S", 200.0, 4, 100.0)])
    assert (got["S"].first_start, got["S"].finish_time) == (200.0, 300.0)
    # L had 800 s left at 200 and resumes at 300.
    assert (got["L"].finish_time, got["L"].n_preemptions, got["L"].queueing_delay_s) == (1100.0, 1, 100.0)


def test_longer_arrival_waits() -> None:
    got = records([Job("L", 0.0, 4, 1000.0), Job("M", 200.0, 4, 900.0)])
    # L has 800 s left when M (900 s) arrives: no preemption.
    assert got["L"].n_preemptions == 0
    assert (got["M"].first_start, got["M"].finish_time) == (1000.0, 1900.0)


def test_preempted_job_is_ranked_by_what_it_has_left() -> None:
    jobs = [Job("L", 0.0, 4, 1000.0), Job("S", 200.0, 4, 100.0), Job("N", 250.0, 4, 700.0)]
    got = records(jobs)
    # At 300: N has 700 s left, L 800 s, so N runs first.
    assert (got["N"].first_start, got["N"].finish_time) == (300.0, 1000.0)
    assert (got["L"].finish_time, got["L"].n_preemptions) == (1800.0, 1)


def test_remaining_time_counts_progress_not_restore() -> None:
    # A 30 s restore holds GPUs but makes no progress: L's remaining stays 800 s.
    jobs = [Job("L", 0.0, 4, 1000.0), Job("S", 200.0, 4, 100.0), Job("N", 310.0, 4, 790.0)]
    got = records(jobs, IdealPerf(checkpoint_restore_s=30.0))
    # L resumes at 300 and restores until 330; at 310 it still has 800 s > 790 s left.
    assert got["L"].n_preemptions == 2
    assert (got["N"].first_start, got["N"].finish_time) == (310.0, 1100.0)
    assert got["L"].finish_time == 1100.0 + 30.0 + 800.0


def test_no_head_of_line_blocking() -> None:
    jobs = [Job("R", 0.0, 2, 100.0), Job("W", 10.0, 4, 200.0), Job("C", 20.0, 1, 500.0)]
    got = records(jobs)
    # W ranks before C but cannot fit beside R; C can, and runs until W's turn.
    assert got["C"].first_start == 20.0
    assert (got["W"].first_start, got["W"].finish_time) == (100.0, 300.0)
    # C did 80 s before the preemption at 100 and resumes at 300 with 420 s left.
    assert (got["C"].finish_time, got["C"].n_preemptions) == (720.0, 1)


def test_flags() -> None:
    assert Srtf.preempts and Srtf.needs_oracle
