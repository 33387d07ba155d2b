"""Read Alibaba PAI's ``pai_task_table`` (alibaba/clusterdata, cluster-trace-gpu-v2020).

The published file has no header line; its columns are `TASK_COLUMNS`
(a file that starts with that header is read too). Times are seconds
(shifted by a constant for anonymity); ``plan_gpu`` is the GPUs each
instance asks for, in percent (50 is half a GPU); ``inst_num`` counts
the task's instances.

How a row (one task of a job) becomes a `Job`:
- ``job_id``: ``job_name/task_name`` (a job's tasks, e.g. ``ps`` and
  ``worker``, are separate rows).
- ``submit_time``: the task's ``start_time`` (its launch: the table has
  no submission time), in seconds after the earliest kept launch.
- ``duration_s``: ``end_time - start_time``.
- ``n_gpus``: ``inst_num`` (1 when empty) times ``plan_gpu / 100``
  rounded up per instance: a share of a GPU is read as a whole one. Such
  rows are counted in ``Workload.n_rounded_up`` and keep the share asked
  for per instance as the tag ``gpu_share`` (``plan_gpu 50`` gives ``"0.5"``).
  With ``gpu_shares``, a one-instance task below one GPU is instead a
  fractional job asking for that share (``Job.gpu_share``), not rounded.
- tags: ``gpu_type`` and ``status``.

Skipped and counted, in this order: CPU-only tasks (``plan_gpu`` 0,
``zero_gpus``), tasks not ``Terminated`` or ``Failed`` (``status``:
still running or waiting), no start, end or ``plan_gpu``
(``missing_<column>``), and tasks that ran for 0 s (``zero_duration``).
"""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import numpy as np
import pandas as pd

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

TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")

# job_name holds job_name/task_name and plan_gpu the whole GPUs once `_derive` has run,
# so errors still name the file's columns.
MAPPING = ColumnMapping(
    job_id="job_name", submit_time="start_time", start_time="start_time", end_time="end_time",
    duration_s=None, n_gpus="plan_gpu", group=None, tags=("gpu_share", "gpu_type", "status"),
    skip=RowFilters(zero_gpus=True, status="status", allowed_status=("Terminated", "Failed"),
                    required=("start_time", "end_time", "plan_gpu"), zero_duration=True))


def read_pai(path: str | Path, *, strict: bool = False, gpu_shares: bool = False) -> Workload:
    """Read a PAI task table (``*.gz`` is decompressed); see the module docstring."""
    path = Path(path)
    source = str(path)
    header = _has_header(path)
    raw = parse_csv(path, {"job_name": str, "task_name": str, "status": str, "gpu_type": str},
                    names=None if header else TASK_COLUMNS)
    missing = [column for column in TASK_COLUMNS if column not in raw.columns]
    if missing:
        raise InputError(f"missing column '{missing[0]}'; a PAI task table has: "
                         f"{', '.join(TASK_COLUMNS)}", source=source, line=1, field=missing[0])
    first_line = 2 if header else 1
    raw = _derive(raw, source, first_line)
    table = frame_to_table(raw, MAPPING, source=source, strict=strict, first_line=first_line)
    table["submit_time"] -= table["submit_time"].min()  # the published times are shifted anyway
    workload = with_tags(table_to_workload(table, name=_stem(path), source=source,
                                           n_gpus_field="plan_gpu"), table)
    shares = table["tag:gpu_share"]
    rounded = shares.notna().tolist()
    n_rounded_up = sum(rounded)
    if gpu_shares:
        jobs = tuple(job.with_changes(gpu_share=float(share)) if up and job.n_gpus == 1 else job
                     for job, share, up in zip(workload.jobs, shares.tolist(), rounded, strict=True))
        n_rounded_up -= sum(job.is_fractional for job in jobs)
        workload = dataclasses.replace(workload, jobs=jobs)
    skipped = table.attrs["skipped"]
    return dataclasses.replace(workload, n_skipped=sum(skipped.values()),
                               skipped_by_reason=tuple(skipped.items()),
                               n_rounded_up=n_rounded_up)


def _derive(raw: pd.DataFrame, source: str, first_line: int) -> pd.DataFrame:
    """Job ids, whole GPUs per task and the GPU share of fractional tasks."""
    raw = raw.copy()
    numbers = {}
    for column in ("inst_num", "plan_gpu"):
        values = pd.to_numeric(raw[column], errors="coerce")
        bad = (values.isna() & raw[column].notna()).to_numpy()
        if bad.any():
            at = int(np.argmax(bad))
            raise InputError(f"not a number: {raw[column].iloc[at]!r}", source=source,
                             line=int(raw.index[at]) + first_line, field=column)
        numbers[column] = values
    share = numbers["plan_gpu"] / 100.0
    per_instance = np.ceil(share)
    instances = numbers["inst_num"].fillna(1.0)
    fractional = share.notna() & (share != per_instance)
    raw["gpu_share"] = [f"{value:g}" if keep else None
                        for value, keep in zip(share.tolist(), fractional.tolist())]
    raw["plan_gpu"] = per_instance * instances
    names = raw["job_name"]
    raw["job_name"] = (names + "/" + raw["task_name"].fillna("")).where(names.notna(), None)
    return raw


def _has_header(path: Path) -> bool:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            first = handle.readline()
    except FileNotFoundError:
        raise InputError("no such file", source=str(path)) from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"cannot read file: {exc}", source=str(path)) from None
    return first.startswith("job_name,")


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".csv"):
        name = name.removesuffix(suffix)
    return name
