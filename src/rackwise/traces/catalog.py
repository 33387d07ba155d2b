"""Find, filter and describe the shipped traces (files under ``data/``)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rackwise.errors import InputError, UnknownNameError, suggest
from rackwise.workload.readers.columns import table_to_workload
from rackwise.workload.workload import Workload

if TYPE_CHECKING:
    import pyarrow as pa

# The shipped files' header (`ColumnMapping`'s default), column -> rackwise field.
_HEADER = {"job_id": "job_id", "cluster": "group", "submit_time": "submit_time",
           "duration": "duration_s", "num_gpus": "n_gpus"}
_N_GPUS_COLUMN = "num_gpus"
# A trace's columns under rackwise's field names, plus each job's ``line`` in the file.
Columns = dict[str, np.ndarray]


@dataclass(frozen=True, slots=True)
class _Trace:
    file: str
    licence_file: str
    attribution: str


_TRACES: dict[str, _Trace] = {
    "philly_2017": _Trace(
        file="philly_2017.csv.gz",
        licence_file="LICENSE-philly_2017.txt",
        attribution=(
            "Microsoft Philly GPU clusters, 2017 (msr-fiddle/philly-traces)\n"
            "Jobs of 15 virtual clusters submitted 2017-09-04 to 2017-12-22, published by\n"
            "Microsoft Research Project Fiddle at github.com/msr-fiddle/philly-traces; this\n"
            "per-job table is the one the Pollux (OSDI 2021) artifact derived from it\n"
            "(github.com/petuum/adaptdl, branch osdi21-artifact, simulator/traces/philly.csv).\n"
            "Licence: CC BY 4.0 (LICENSE-philly_2017.txt).\n"
            "Cite: M. Jeon, S. Venkataraman, A. Phanishayee, J. Qian, W. Xiao, F. Yang,\n"
            "\"Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads\",\n"
            "USENIX ATC 2019."),
    ),
    "itp_2021": _Trace(
        file="itp_2021.csv.gz",
        licence_file="LICENSE-itp_2021.txt",
        attribution=(
            "Microsoft ITP GPU clusters (microsoft/elasticflow-traces)\n"
            "Jobs of 10 clusters over 59.9 days, published with ElasticFlow at\n"
            "github.com/microsoft/elasticflow-traces (raw-traces).\n"
            "Licence: MIT, (c) Microsoft Corporation (LICENSE-itp_2021.txt).\n"
            "Cite: D. Gu, Y. Zhao, Y. Zhong, Y. Xiong, Z. Han, P. Cheng, F. Yang, G. Huang,\n"
            "X. Jin, X. Liu, \"ElasticFlow: An Elastic Serverless Training Platform for\n"
            "Distributed Deep Learning\", ASPLOS 2023."),
    ),
}


def names() -> tuple[str, ...]:
    """Names of the shipped traces, sorted."""
    return tuple(sorted(_TRACES))


def attribution(name: str) -> str:
    """Who published trace ``name``, where from, under which licence, what to cite.

    The first line is a short label; the rest gives the details.
    """
    return _trace(name).attribution


def load(name: str, *, groups: str | Iterable[str] | None = None, start_s: float | None = None,
         end_s: float | None = None, first_n: int | None = None,
         rebase: bool = True) -> Workload:
    """Load a shipped trace, optionally a slice of it.

    Args:
        name: One of `names()`.
        groups: Keep only jobs of these clusters / virtual clusters (`Job.group`).
        start_s: Keep jobs submitted at or after this time (trace seconds).
        end_s: Keep jobs submitted before this time (trace seconds).
        first_n: Then keep the first ``first_n`` jobs by submit time.
        rebase: Shift submit times so the first kept job submits at 0.

    Returns:
        The jobs in submit order; ``source`` is the trace name and ``lines``
        the jobs' lines in the shipped file.

    Raises:
        UnknownNameError: unknown trace or group.
        InputError: a bad filter, or filters that leave no job.
    """
    table = _table(name)
    keep = np.ones(len(table["job_id"]), dtype=bool)
    if groups is not None:
        wanted = [groups] if isinstance(groups, str) else sorted(set(groups))
        known = sorted(set(table["group"].tolist()))
        for group in wanted:
            if group not in known:
                raise UnknownNameError(f"trace {name!r} has no group {group!r}."
                                       f"{suggest(group, known)} Groups: {', '.join(known)}")
        keep &= np.isin(table["group"], wanted)
    submit = table["submit_time"]
    if start_s is not None:
        keep &= submit >= start_s
    if end_s is not None:
        if start_s is not None and end_s <= start_s:
            raise InputError(f"end_s ({end_s}) must be after start_s ({start_s})", field="end_s")
        keep &= submit < end_s
    if first_n is not None and first_n < 1:
        raise InputError(f"must be at least 1, got {first_n}", field="first_n")
    rows = np.flatnonzero(keep)[:first_n]
    if not len(rows):
        raise InputError(f"no job of trace {name!r} passes the filters (groups={groups!r}, "
                         f"start_s={start_s}, end_s={end_s})")
    selected = table if len(rows) == len(keep) else {
        field: values[rows] for field, values in table.items()}
    if rebase:
        selected = {**selected, "submit_time": selected["submit_time"] - selected["submit_time"][0]}
    return table_to_workload(selected, name=name, source=name, n_gpus_field=_N_GPUS_COLUMN)


def describe(name: str) -> dict[str, Any]:
    """Summary figures of a whole shipped trace (plain Python values).

    Keys: ``name``, ``n_jobs``, ``n_groups``, ``groups`` (jobs per group),
    ``span_s`` (first to last submission), ``gpu_histogram`` (jobs per GPU count),
    ``gpu_seconds``, ``duration_p50_s``, ``duration_p90_s``,
    ``duration_p99_s``, ``duration_max_s``.
    """
    table = _table(name)
    duration = table["duration_s"]
    p50, p90, p99 = np.percentile(duration, [50.0, 90.0, 99.0])
    groups = Counter(table["group"].tolist())
    gpus, gpu_counts = np.unique(table["n_gpus"], return_counts=True)
    submit = table["submit_time"]
    return {
        "name": name,
        "n_jobs": len(submit),
        "n_groups": len(groups),
        "groups": {str(g): int(n) for g, n in sorted(groups.items())},
        "span_s": float(submit.max() - submit.min()),
        "gpu_histogram": {int(g): int(n) for g, n in zip(gpus, gpu_counts, strict=True)},
        "gpu_seconds": float((duration * table["n_gpus"]).sum()),
        "duration_p50_s": float(p50),
        "duration_p90_s": float(p90),
        "duration_p99_s": float(p99),
        "duration_max_s": float(duration.max()),
    }


def _trace(name: str) -> _Trace:
    try:
        return _TRACES[name]
    except KeyError:
        raise UnknownNameError(f"unknown trace {name!r}.{suggest(name, names())} "
                               f"Known traces: {', '.join(names())}") from None


@functools.cache
def _table(name: str) -> Columns:
    # Cached and shared: callers select rows into new arrays and never write to these.
    ref = resources.files("rackwise.traces").joinpath("data", _trace(name).file)
    with resources.as_file(ref) as path:
        table = read_shipped(path)
    order = np.argsort(table["submit_time"], kind="stable")
    if (np.diff(order) != 1).any():
        table = {field: values[order] for field, values in table.items()}
    return table


def read_shipped(path: Path) -> Columns:
    """The columns of a file in the shipped traces' format, read by pyarrow, rows in file order.

    The same values and types as `rackwise.workload.readers.csv.read_table`
    with the default mapping gives for these files (times as float64, GPU
    counts as int64, text as Python strings), without pandas: reading the
    shipped trace is part of every `rackwise simulate --trace`, and pandas is
    most of its import time. Only well-formed files are read (every cell
    filled, no blank line); another file is refused naming its first fault.
    """
    import pyarrow as pa
    from pyarrow import csv as pa_csv

    types = {"job_id": pa.string(), "cluster": pa.string(), "submit_time": pa.float64(),
             "duration": pa.float64(), "num_gpus": pa.float64()}
    try:
        table = pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
            column_types=types, include_columns=list(_HEADER), null_values=[""],
            strings_can_be_null=True))
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"cannot read shipped trace: {exc}", source=str(path)) from None
    columns: Columns = {}
    for column, field in _HEADER.items():
        values = table.column(column)
        if values.null_count:
            at = values.to_pylist().index(None)
            raise InputError("empty value", source=str(path), line=at + 2, field=column)
        columns[field] = _to_numpy(values)
    gpus = columns["n_gpus"]
    checks = [("submit_time", columns["submit_time"] >= 0.0, "must not be negative"),
              ("duration", columns["duration_s"] > 0.0, "must be positive"),
              ("num_gpus", (gpus >= 1.0) & (gpus == np.floor(gpus)), "must be a whole number >= 1")]
    for column, ok, message in checks:
        if not ok.all():
            raise InputError(message, source=str(path), line=int(np.argmin(ok)) + 2, field=column)
    columns["n_gpus"] = gpus.astype(np.int64)
    columns["line"] = np.arange(2, len(gpus) + 2, dtype=np.int64)
    return columns


def _to_numpy(values: pa.ChunkedArray) -> np.ndarray:
    """A column without nulls as numpy: float64, or Python strings in an object array.

    Not pyarrow's ``to_numpy``, which imports pandas.
    """
    import pyarrow as pa

    if values.type == pa.float64():
        return np.concatenate([
            np.frombuffer(chunk.buffers()[1], dtype=np.float64)[chunk.offset:chunk.offset + len(chunk)]
            for chunk in values.chunks]) if values.num_chunks else np.empty(0, dtype=np.float64)
    return np.array(values.to_pylist(), dtype=object)
