"""`JobState.copy`: every field carried, the copy independent of its original."""

from __future__ import annotations

from rackwise.workload.job import Job
from rackwise.workload.state import STATE_FIELDS, JobState, Status


def test_a_copy_carries_every_field_and_stands_alone() -> None:
    state = JobState(Job("j1", 5.0, 2, 1_000.0))
    # A distinct value in every field, so a field the copy leaves out shows.
    ints = {"copies", "n_gpus", "n_nodes", "n_preemptions", "n_racks", "version"}
    others = {"job": state.job, "job_id": "j1", "status": Status.RUNNING, "gpu_ids": (3, 4), "partner": "j0"}
    for number, slot in enumerate(STATE_FIELDS, start=1):
        setattr(state, slot, others.get(slot, number if slot in ints else float(number)))
    twin = state.copy()
    assert twin is not state and type(twin) is JobState
    assert [getattr(twin, slot) for slot in STATE_FIELDS] == [getattr(state, slot) for slot in STATE_FIELDS]
    twin.iters_done, twin.gpu_ids = 999.0, (3,)
    assert state.iters_done != 999.0 and state.gpu_ids == (3, 4)
