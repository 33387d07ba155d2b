"""A-SRPT's survival predictor against the cold-start rule, on the shipped traces' held-out windows."""

from __future__ import annotations

from pathlib import Path

import pytest

from rackwise.run import ClusterConfig, RunConfig, WorkloadConfig, execute

ROOT = Path(__file__).resolve().parents[2]
WINDOWS = {"philly_2017": 4_055_952, "itp_2021": 2_024_521}  # experiments/asrpt.yaml's


def _avg_jct_s(trace: str, predictor: str) -> float:
    config = RunConfig(
        workload=WorkloadConfig(trace=trace, start_s=WINDOWS[trace], first_n=1000, load=4, history_jobs=2000),
        cluster=ClusterConfig(spec=ROOT / "experiments" / "clusters" / "rack16-normal.yaml"),
        policy="asrpt", policy_params={"predictor": predictor, "rank": "gittins"}, perf="network")
    result, _ = execute(config)
    return sum(r.jct_s for r in result.records) / len(result.records)


@pytest.mark.parametrize("trace", sorted(WINDOWS))
def test_counting_running_jobs_beats_the_recently_finished_ones(trace: str) -> None:
    """Both rank by a Gittins rank; the cold-start population is biased short under load."""
    assert _avg_jct_s(trace, "survival") < 0.97 * _avg_jct_s(trace, "median")
