"""The job's figures a `JobState` keeps beside its job record follow the record."""

from __future__ import annotations

import pytest

from rackwise.workload.job import Job
from rackwise.workload.state import JOB_FIELDS, JobState, Status


def test_a_new_state_keeps_its_jobs_figures() -> None:
    job = Job("j1", 5.0, 1, 1_000.0, total_iters=400.0, gpu_share=0.5)
    state = JobState(job)
    assert [getattr(state, name) for name in JOB_FIELDS] == [getattr(job, name) for name in JOB_FIELDS]


def test_a_swapped_record_brings_its_work_to_the_progress_arithmetic() -> None:
    state = JobState(Job("j1", 0.0, 2, 1_000.0))
    state.status, state.rate_iters_per_s, state.last_update, state.busy_until = Status.RUNNING, 1.0, 0.0, 0.0
    state.swap_job(state.job.with_changes(duration_s=500.0, total_iters=500.0))
    assert [getattr(state, name) for name in JOB_FIELDS] == [1.0, "j1", 2, 500.0]
    assert state.finish_eta() == 500.0
    assert state.iters_at(800.0) == 500.0  # capped at the new work, not the old
    assert state.remaining_iters(100.0) == 400.0


def test_a_record_of_another_job_is_refused() -> None:
    state = JobState(Job("j1", 0.0, 2, 1_000.0))
    with pytest.raises(ValueError, match="'j2' is not 'j1'"):
        state.swap_job(Job("j2", 0.0, 2, 500.0))
    assert state.job.job_id == "j1" and state.total_iters == 1_000.0
