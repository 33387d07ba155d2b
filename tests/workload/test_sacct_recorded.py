"""The sacct preset on real Slurm accounting: a trace window that Slurm ran and slurmdbd recorded.

``tests/data/sacct/loopback_itp_window.sacct`` is what ``sacct`` printed after
the loopback Slurm cluster ran 300 jobs of itp_2021 (each named after its trace
job, sleeping its trace duration divided by 1,200), recorded by
``tests/data/sacct/record_sample.py``. Read back with ``--format sacct``, each
job keeps its trace GPU count and its scaled duration.
"""

from __future__ import annotations

import pandas as pd
from tests.preset_samples import DATA

from rackwise import load_trace
from rackwise.workload import readers

RECORDED = DATA / "sacct" / "loopback_itp_window.sacct"
TIME_SCALE = 1200.0


def test_every_recorded_job_is_read_or_counted_as_skipped() -> None:
    workload = readers.read(RECORDED, "sacct")
    rows = pd.read_csv(RECORDED, sep="|", dtype=str)
    allocations = rows[~rows["JobID"].str.contains(".", regex=False)]
    assert len(allocations) == 300
    # Jobs shorter than Slurm's one-second stamps start and end in the same second.
    instant = int((allocations["Start"] == allocations["End"]).sum())
    assert dict(workload.skipped_by_reason) == {"job_step": len(rows) - 300, "zero_gpus": 0,
                                                "missing_Start": 0, "missing_End": 0,
                                                "zero_duration": instant}
    assert len(workload.jobs) == 300 - instant


def test_each_job_keeps_its_trace_gpus_and_scaled_duration() -> None:
    workload = readers.read(RECORDED, "sacct")
    names = pd.read_csv(RECORDED, sep="|", dtype=str).set_index("JobID")["JobName"]
    trace = {job.job_id: job for job in load_trace("itp_2021").jobs}
    for job in workload.jobs:
        source = trace[names[job.job_id].removeprefix("itp-")]
        assert job.n_gpus == source.n_gpus
        # Slurm stamps whole seconds: start and end each within a second of the real instant.
        assert abs(job.duration_s - source.duration_s / TIME_SCALE) <= 2.0, job.job_id
