"""`Job` objects from a table's columns, with no pandas needed to build them."""

from __future__ import annotations

from itertools import repeat
from typing import Any

from rackwise.workload.job import build_job
from rackwise.workload.workload import Workload


def table_to_workload(table: Any, *, name: str, source: str, n_gpus_field: str) -> Workload:
    """Build the `Job` objects of a frame from `read_table` (fast: no per-row pandas).

    ``table`` is that frame, or a mapping of the same column names to numpy
    arrays: anything whose ``name in table`` finds a column and whose
    ``table[name].tolist()`` gives its values.
    """
    n_rows = len(table["job_id"])

    def column(field: str) -> Any:
        return table[field].tolist() if field in table else repeat(None, n_rows)

    durations = table["duration_s"].tolist()
    iters = table["total_iters"].tolist() if "total_iters" in table else durations
    jobs = tuple(map(build_job, table["job_id"].tolist(), table["submit_time"].tolist(),
                     table["n_gpus"].tolist(), durations, iters, column("group"),
                     column("user"), column("model"), column("batch_size")))
    if "gpu_share" in table:
        jobs = tuple(job.with_changes(gpu_share=share) if share < 1.0 else job
                     for job, share in zip(jobs, table["gpu_share"].tolist(), strict=True))
    return Workload(jobs=jobs, name=name, source=source, lines=tuple(table["line"].tolist()),
                    n_gpus_field=n_gpus_field)
