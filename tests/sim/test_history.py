"""A run's job log: what finished before the window opens, given to the policy once at the start."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from rackwise import traces
from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.perf.model import NetworkPerf
from rackwise.policies.fifo import Fifo
from rackwise.policies.parts.predictor import prediction_accuracy
from rackwise.run import ClusterConfig, RunConfig, WorkloadConfig, execute, load_history
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job

ROOT = Path(__file__).resolve().parents[2]
PHILLY_BUSY_S = 4_055_952  # the busy Philly window of experiments/asrpt.yaml


@dataclass(kw_only=True)
class HookLog(Fifo):
    """FIFO that notes the order of its hooks."""

    name: ClassVar[str] = "hook-log"
    calls: list[str] = field(default_factory=list)
    log: list[Job] = field(default_factory=list)

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.calls.append("reset")

    def on_history(self, jobs: Sequence[Job]) -> None:
        self.calls.append("history")
        self.log = list(jobs)

    def on_arrival(self, job: Job, now: float) -> None:
        self.calls.append("arrival")


def _jobs(n: int, prefix: str) -> list[Job]:
    return [Job(f"{prefix}{i}", submit_time=10.0 * i, n_gpus=1 + i % 4, duration_s=100.0 + i)
            for i in range(n)]


def test_the_log_reaches_the_policy_once_after_reset_before_any_arrival_prepared_by_the_model() -> None:
    policy = HookLog()
    Simulator(uniform_cluster(2, 4, 2), _jobs(3, "w"), policy, perf=NetworkPerf(),
              history=_jobs(5, "h")).run()
    assert policy.calls[:3] == ["reset", "history", "arrival"]
    assert policy.calls.count("history") == 1
    assert [job.job_id for job in policy.log] == [f"h{i}" for i in range(5)]
    assert all(job.model is not None for job in policy.log)  # the network model gave each one


def test_a_log_leaves_the_runs_own_draws_and_decisions_alone() -> None:
    def records(history: list[Job]) -> list[tuple[str, float, str | None]]:
        result = Simulator(uniform_cluster(2, 4, 2), _jobs(20, "w"), Fifo(), perf=NetworkPerf(), seed=3,
                           history=history).run()
        models = {job.job_id: job.model for job in result.jobs}
        return [(r.job_id, r.finish_time, models[r.job_id]) for r in result.records]

    assert records([]) == records(_jobs(50, "h"))


def test_the_log_is_the_last_jobs_to_finish_before_the_window_opens() -> None:
    log = load_history(WorkloadConfig(trace="philly_2017", start_s=PHILLY_BUSY_S, first_n=10,
                                      history_jobs=50))
    finish = [job.submit_time + job.duration_s for job in log]
    assert len(log) == 50 and finish == sorted(finish) and finish[-1] <= PHILLY_BUSY_S
    earlier = traces.load("philly_2017", end_s=PHILLY_BUSY_S, rebase=False)
    later_finishers = [job for job in earlier
                       if finish[0] < job.submit_time + job.duration_s <= PHILLY_BUSY_S]
    assert len(later_finishers) == 49  # nothing that finished later was left out


def test_a_log_needs_a_window_that_opens_after_the_trace_starts() -> None:
    with pytest.raises(InputError, match="history_jobs"):
        load_history(WorkloadConfig(trace="philly_2017", first_n=10, history_jobs=5))


def test_the_log_calibrates_asrpts_predictions_on_a_busy_window() -> None:
    """Without the log the forest learns only the short jobs that finish first, under load."""
    pytest.importorskip("sklearn")

    def median_ratio(history_jobs: int) -> float:
        config = RunConfig(
            workload=WorkloadConfig(trace="philly_2017", start_s=PHILLY_BUSY_S, first_n=400, load=4,
                                    history_jobs=history_jobs),
            cluster=ClusterConfig(spec=ROOT / "experiments" / "clusters" / "rack16-normal.yaml"),
            policy="asrpt", policy_params={"predictor": "forest", "rank": "vm"}, perf="network")
        result, _ = execute(config)
        return prediction_accuracy(result.policy.srpt.prediction_log)["median_ratio"]

    without, with_log = median_ratio(0), median_ratio(2000)
    assert without < 0.6  # the typical job predicted far too short
    assert 0.8 < with_log < 1.25
    assert abs(math.log(with_log)) < abs(math.log(without))
