"""Read Slurm accounting: the output of ``sacct --parsable2`` (``|``-separated).

Produce it with, for example::

    sacct --allusers --parsable2 --starttime 2024-01-01 --endtime 2024-02-01 \\
        --format JobID,User,Partition,State,Submit,Start,End,AllocTRES > jobs.sacct

Needed columns: ``JobID``, ``Submit``, ``Start``, ``End`` and ``AllocTRES``
(or ``ReqTRES``); ``Partition``, ``User`` and ``State`` are used when present.
Times are ``YYYY-MM-DDTHH:MM:SS`` (the cluster's local time; only
differences matter). ``sacct --parsable`` output (a trailing ``|``) reads too.

How a row becomes a `Job`: ``JobID``; ``submit_time`` = ``Submit`` (seconds
after the earliest kept submission); ``duration_s`` = ``End - Start``;
``n_gpus`` = the ``gres/gpu=N`` of ``AllocTRES`` (or the sum of the typed
``gres/gpu:TYPE=N`` entries when the untyped one is absent); ``group`` =
``Partition``; ``user`` = ``User``; ``State`` kept as a tag. Every final
state is kept (a failed or timed-out job held its GPUs while it ran).

Skipped and counted, in this order: job steps (``123.batch``, ``123.0``,
``123.extern``: ``job_step``; ``sacct -X`` leaves them out), rows without
GPUs (``zero_gpus``), no start or end (``missing_Start``, ``missing_End``:
never started, or still running; sacct writes ``Unknown`` or ``None``),
and rows that ran for 0 s (``zero_duration``).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from rackwise.errors import InputError
from rackwise.workload.readers.columns import table_to_workload
from rackwise.workload.readers.csv import (
    ColumnMapping,
    frame_to_table,
    parse_csv,
    with_tags,
)
from rackwise.workload.readers.row_filters import RowFilters
from rackwise.workload.workload import Workload

_REQUIRED = ("JobID", "Submit", "Start", "End")
_NO_TIME = ("Unknown", "None")
_GPU_UNTYPED = re.compile(r"(?:^|(?<=,))gres/gpu=(\d+)(?=,|$)")
_GPU_TYPED = re.compile(r"(?:^|(?<=,))gres/gpu:[^=,]+=(\d+)(?=,|$)")


def read_sacct(path: str | Path, *, strict: bool = False) -> Workload:
    """Read ``sacct --parsable2`` output (``*.gz`` is decompressed); see the module docstring."""
    path = Path(path)
    source = str(path)
    raw = parse_csv(path, {"JobID": str, "Partition": str, "User": str, "State": str,
                           "AllocTRES": str, "ReqTRES": str}, sep="|")
    tres = next((c for c in ("AllocTRES", "ReqTRES") if c in raw.columns), None)
    for column in (*_REQUIRED, tres or "AllocTRES"):
        if column not in raw.columns:
            raise InputError(f"missing column '{column}'; run sacct with --format "
                             "JobID,User,Partition,State,Submit,Start,End,AllocTRES (the header "
                             f"has: {', '.join(map(str, raw.columns))})",
                             source=source, line=1, field=column)
    assert tres is not None
    steps = raw["JobID"].astype("string").str.contains(".", regex=False).fillna(False)
    steps_array = steps.to_numpy(dtype=bool)
    if strict and steps_array.any():
        at = int(np.argmax(steps_array))
        raise InputError(f"row skipped as job_step: {raw['JobID'].iloc[at]!r} (--strict refuses "
                         "such rows; sacct -X leaves steps out)", source=source,
                         line=int(raw.index[at]) + 2, field="JobID")
    raw = raw[~steps_array].copy()
    for column in ("Submit", "Start", "End"):
        raw[column] = raw[column].where(~raw[column].isin(_NO_TIME), None)
    raw[tres] = raw[tres].map(_gpus, na_action="ignore").fillna(0)
    mapping = ColumnMapping(
        job_id="JobID", submit_time="Submit", start_time="Start", end_time="End",
        duration_s=None, n_gpus=tres,
        group="Partition" if "Partition" in raw.columns else None,
        user="User" if "User" in raw.columns else None,
        tags=("State",) if "State" in raw.columns else (),
        units={"submit_time": "datetime", "start_time": "datetime", "end_time": "datetime"},
        skip=RowFilters(zero_gpus=True, required=("Start", "End"), zero_duration=True))
    table = frame_to_table(raw, mapping, source=source, strict=strict)
    skipped = {"job_step": int(steps_array.sum()), **table.attrs["skipped"]}
    name = path.name.removesuffix(".gz")
    workload = with_tags(table_to_workload(table, name=name, source=source, n_gpus_field=tres),
                         table)
    return dataclasses.replace(workload, n_skipped=sum(skipped.values()),
                               skipped_by_reason=tuple(skipped.items()))


def _gpus(tres: str) -> int:
    """GPUs in a TRES list such as ``billing=8,cpu=8,gres/gpu=2,mem=64G,node=1``."""
    untyped = _GPU_UNTYPED.search(tres)
    if untyped:
        return int(untyped.group(1))
    return sum(int(count) for count in _GPU_TYPED.findall(tres))
