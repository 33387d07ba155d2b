"""Aggregate figures of a run: JCT and queueing percentiles, makespan, utilisation."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import attrgetter, mul
from typing import TYPE_CHECKING, Any

import numpy as np

from rackwise.metrics.quantiles import median, percentile
from rackwise.metrics.records import JobRecord, Timeline

if TYPE_CHECKING:
    import pandas as pd


# The records' figures `summarize` reads as floats, in the order it unpacks them.
_SUMMED_FIELDS = ("jct_s", "queueing_delay_s", "finish_time", "gpu_s", "comm_s", "comm_extra_s", "lost_s")
_SUMMED = attrgetter(*_SUMMED_FIELDS)


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
    # The figures summed here as one float table, read a record at a time: a job's figures lie
    # together in memory (`metrics.tables._float_columns`).
    table = np.fromiter(chain.from_iterable(map(_SUMMED, records)), float,
                        len(records) * len(_SUMMED_FIELDS)).reshape(len(records), len(_SUMMED_FIELDS))
    jct, queue, finish, gpu_s, comm, comm_extra, lost = table.T
    jct_sorted = np.sort(jct)
    submits = list(map(attrgetter("submit_time"), records))
    submit = min(submits)
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
        "makespan_s": float(finish.max() - submit),
        "utilisation": _utilisation(time, busy, n_gpus, None, None),
        # The regime a run is in: how busy the cluster is while jobs still arrive.
        "arrival_utilisation": _utilisation(time, busy, n_gpus, submit, max(submits)),
        "n_preemptions": int(sum(map(attrgetter("n_preemptions"), records))),
        # Sums in Python, one record after another: numpy's pairwise sum rounds otherwise.
        "gpu_hours": sum(gpu_s.tolist()) / 3600.0,
    }
    if comm.any():
        gpus = list(map(attrgetter("n_gpus"), records))
        summary["comm_overhead_gpu_hours"] = sum(map(mul, comm.tolist(), gpus)) / 3600.0
        summary["comm_extra_gpu_hours"] = sum(map(mul, comm_extra.tolist(), gpus)) / 3600.0
    if lost.any():
        gpus = list(map(attrgetter("n_gpus"), records))
        summary["lost_gpu_hours"] = sum(loss * n for loss, n in zip(lost.tolist(), gpus) if loss) / 3600.0
    return summary
