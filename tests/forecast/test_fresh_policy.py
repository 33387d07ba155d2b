"""Forecasts from snapshots without policy state: a fresh policy takes over the cluster."""

from __future__ import annotations

import pytest
from forecast_runs import take

from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.snapshot import ClusterSnapshot
from rackwise.errors import MissingExtraError
from rackwise.forecast.forward import forward
from rackwise.policies.registry import all_policies, make_policy
from rackwise.workload.job import Job
from rackwise.workload.state import JobState, Status


@pytest.mark.parametrize("name", sorted(all_policies()))
def test_a_fresh_policy_forecasts_every_job(name: str) -> None:
    try:
        make_policy(name)
    except MissingExtraError as exc:
        pytest.skip(f"policy '{name}' needs an optional extra: {exc}")
    snapshot = take(name)
    assert snapshot.running and snapshot.pending, "the snapshot should hold both kinds of job"
    forecast = forward(snapshot, fresh_policy=True)
    for row in forecast.jobs:
        assert row.start_s is not None and row.finish_s is not None, row
        assert row.finish_s >= row.start_s


def test_a_fresh_tiresias_sees_the_jobs_already_running() -> None:
    """A job that has had hours of service yields its GPU to a new job at once."""
    now = 50_000.0
    old = JobState(Job("old", submit_time=0.0, n_gpus=1, duration_s=100_000.0))
    old.status = Status.RUNNING
    old.gpu_ids = (0,)
    old.run_start = old.last_update = old.busy_until = old.first_start = 0.0
    old.rate_iters_per_s = 1.0
    old.iters_done = now
    new = JobState(Job("new", submit_time=now, n_gpus=1, duration_s=600.0))
    snapshot = ClusterSnapshot(
        taken_at_s=now, topology=uniform_cluster(1, 1, 1), running=(old,), pending=(new,),
        predicted_duration_s={"old": 100_000.0, "new": 600.0}, duration_error={},
        policy_name="tiresias")
    rows = {row.job_id: row for row in forward(snapshot, fresh_policy=True).jobs}
    # The old job is demoted the instant the policy hears of it; the new one then runs.
    assert rows["new"].start_s == pytest.approx(now)
    assert rows["old"].finish_s is not None and rows["old"].finish_s > now + 50_000.0 + 600.0
