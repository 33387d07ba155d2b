"""Aggregate figures of a run: JCT and queueing percentiles, makespan, utilisation."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter, mul
from typing import TYPE_CHECKING, Any

import numpy as np

from rackwise.metrics.quantiles import median, percentile
from rackwise.metrics.records import JobRecord, Timeline

if TYPE_CHECKING:
    import pandas as pd


def records_frame(records: Sequence[JobRecord]) -> pd.DataFrame:
    """One row per job, columns as in `JobRecord`, sorted by job submission."""
    import pandas as pd  # only here: summaries need numpy alone

    columns = JobRecord.columns()
    frame = pd.DataFrame({name: _column(list(map(attrgetter(name), records))) for name in columns},
                         columns=columns)
    return frame.sort_values(["submit_time", "job_id"], kind="stable").reset_index(drop=True)


def timeline_frame(timeline: Timeline) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({
        "time": _column(timeline.time), "busy_gpus": _column(timeline.busy_gpus),
        "n_pending": _column(timeline.n_pending), "n_running": _column(timeline.n_running),
    })


def _column(values: list[Any]) -> list[Any] | np.ndarray:
    """A column of only floats or only ints as the float64 or int64 array pandas would make of it.

    numpy builds it far faster than pandas' inference over a list; any other
    column (strings, None, mixed types) is left to pandas as before.
    """
    kinds = set(map(type, values))
    if kinds == {float}:
        return np.array(values, dtype=np.float64)
    if kinds == {int}:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:  # beyond int64: pandas picks the type
            return values
    return values


def utilisation(timeline: Timeline, n_gpus: int, start: float | None = None,
                end: float | None = None) -> float:
    """Time-weighted share of GPUs held from ``start`` to ``end`` (default: first to last event)."""
    return _utilisation(np.asarray(timeline.time, dtype=float), timeline.busy_gpus, n_gpus,
                        start, end)


def _utilisation(time: np.ndarray, busy_gpus: Sequence[int] | np.ndarray, n_gpus: int,
                 start: float | None, end: float | None) -> float:
    if len(time) < 2:
        return 0.0
    start = time[0] if start is None else start
    end = time[-1] if end is None else end
    if end <= start:
        return 0.0
    busy = np.asarray(busy_gpus, dtype=float)
    # Each count holds from its event to the next; clip those spans to the window.
    span = np.clip(np.append(time[1:], end), start, end) - np.clip(time, start, end)
    return float(np.sum(busy * span)) / (n_gpus * (end - start))


def summarize(records: Sequence[JobRecord], timeline: Timeline, n_gpus: int) -> dict[str, Any]:
    """The headline figures of a run, as a JSON-ready dict (seconds unless named)."""
    if not records:
        return {"n_jobs": 0}
    # map(attrgetter) rather than generators: the same values in the same order, read in C.
    jct = np.fromiter(map(attrgetter("jct_s"), records), float, len(records))
    queue = np.fromiter(map(attrgetter("queueing_delay_s"), records), float, len(records))
    jct_sorted = np.sort(jct)
    submits = list(map(attrgetter("submit_time"), records))
    submit = min(submits)
    finish = max(map(attrgetter("finish_time"), records))
    # The timeline as arrays once, for both utilisations.
    time = np.fromiter(timeline.time, float, len(timeline.time))
    busy = np.fromiter(timeline.busy_gpus, float, len(timeline.busy_gpus))
    summary: dict[str, Any] = {
        "n_jobs": len(records),
        "avg_jct_s": float(jct.mean()),
        "median_jct_s": median(jct_sorted),
        "p95_jct_s": percentile(jct_sorted, 95),
        "p99_jct_s": percentile(jct_sorted, 99),
        "avg_queueing_s": float(queue.mean()),
        "p99_queueing_s": percentile(np.sort(queue), 99),
        "makespan_s": float(finish - submit),
        "utilisation": _utilisation(time, busy, n_gpus, None, None),
        # The regime a run is in: how busy the cluster is while jobs still arrive.
        "arrival_utilisation": _utilisation(time, busy, n_gpus, submit, max(submits)),
        "n_preemptions": int(sum(map(attrgetter("n_preemptions"), records))),
        "gpu_hours": float(sum(map(attrgetter("gpu_s"), records)) / 3600.0),
    }
    comm = list(map(attrgetter("comm_s"), records))
    if any(comm):
        gpus = list(map(attrgetter("n_gpus"), records))
        summary["comm_overhead_gpu_hours"] = float(sum(map(mul, comm, gpus)) / 3600.0)
        summary["comm_extra_gpu_hours"] = float(
            sum(map(mul, map(attrgetter("comm_extra_s"), records), gpus)) / 3600.0)
    if any(map(attrgetter("lost_s"), records)):
        summary["lost_gpu_hours"] = float(
            sum(r.lost_s * r.n_gpus for r in records if r.lost_s) / 3600.0)
    return summary

