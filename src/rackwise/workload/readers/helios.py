"""Read a Helios ``cluster_log.csv`` (S-Lab-System-Group/HeliosData, SenseTime, SC '21).

Header: ``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,
start_time,end_time,duration,queue``; times are ``YYYY-MM-DD HH:MM:SS``
strings and ``duration`` is ``end_time - start_time`` in seconds.

How a row becomes a `Job`: ``job_id``; ``submit_time`` (seconds after the
earliest submission); ``duration``; ``gpu_num``; ``group`` = ``vc``;
``user``; the final ``state`` kept as a tag. Every state is kept (a failed
or cancelled job held its GPUs as long as it ran). Skipped and counted:
CPU-only rows (``gpu_num`` 0, ``zero_gpus``), rows without a duration
(``missing_duration``) and rows that ran for 0 s (``zero_duration``).
"""

from __future__ import annotations

from pathlib import Path

from rackwise.workload.readers.csv import ColumnMapping, read_csv
from rackwise.workload.readers.row_filters import RowFilters
from rackwise.workload.workload import Workload

MAPPING = ColumnMapping(
    job_id="job_id", submit_time="submit_time", duration_s="duration", n_gpus="gpu_num",
    group="vc", user="user", tags=("state",), units={"submit_time": "datetime"},
    skip=RowFilters(zero_gpus=True, required=("duration",), zero_duration=True))


def read_helios(path: str | Path, *, strict: bool = False) -> Workload:
    """Read a Helios cluster log (``*.gz`` is decompressed); see the module docstring."""
    return read_csv(path, MAPPING, strict=strict)
