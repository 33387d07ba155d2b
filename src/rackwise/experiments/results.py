"""A sweep's results folder: one file per finished cell, gathered into one table.

Layout of ``OUT/``::

    cells/<key>.json    one finished cell: its identity and its figures
    runs/<key>/         the cell's results folder, as `rackwise.run.save` writes it
    results.parquet     one row per cell: configuration columns, figures, wall time

Cell files are written atomically as each cell finishes, so an interrupted
sweep resumes where it stopped: a cell whose file exists (with the same
identity) is not run again.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rackwise.experiments.grid import Cell, cell_identity

RESULTS_FILE = "results.parquet"
# Figure columns in the order `metrics.summary.summarize` gives them; any other
# figure follows in name order, and the wall time comes last, so the table's
# columns do not depend on which cell finished (or was read back) first.
FIGURE_ORDER = ("n_jobs", "avg_jct_s", "median_jct_s", "p95_jct_s", "p99_jct_s", "avg_queueing_s",
                "p99_queueing_s", "makespan_s", "utilisation", "arrival_utilisation", "n_preemptions",
                "gpu_hours", "comm_overhead_gpu_hours", "comm_extra_gpu_hours", "n_gpus", "n_steps")


def cell_path(out_dir: Path, cell: Cell) -> Path:
    return out_dir / "cells" / f"{cell.key}.json"


def _write_atomic(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(handle)
    try:
        write(Path(staging))
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def write_cell(out_dir: Path, cell: Cell, figures: Mapping[str, Any]) -> Path:
    """Record a finished cell (figures only; labels come from the experiment when read back)."""
    path = cell_path(out_dir, cell)
    payload = {"identity": cell_identity(cell.config), "figures": dict(figures)}
    text = json.dumps(payload, sort_keys=True, indent=1) + "\n"
    _write_atomic(path, lambda target: target.write_text(text))
    return path


def read_cell(out_dir: Path, cell: Cell) -> dict[str, Any] | None:
    """The figures of a finished cell, or None if it has not finished (or its file is unreadable)."""
    path = cell_path(out_dir, cell)
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if payload.get("identity") != cell_identity(cell.config):
        return None
    figures: dict[str, Any] = payload["figures"]
    return figures


def row_of(cell: Cell, figures: Mapping[str, Any] | None, status: str,
           reason: str | None = None) -> dict[str, Any]:
    """One row of the table: the cell's columns, its status and its figures."""
    return {**cell.columns(), "status": status, "reason": reason or "", **(figures or {})}


def gather(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows (in cell order) as a table; figures a cell lacks are NaN."""
    frame = pd.DataFrame(list(rows))
    leading = [c for c in rows[0] if c not in FIGURE_ORDER] if rows else []
    leading = [c for c in leading if c != "wall_time_s"]
    known = [c for c in FIGURE_ORDER if c in frame]
    others = sorted(set(frame.columns) - set(leading) - set(known) - {"wall_time_s"})
    tail = ["wall_time_s"] if "wall_time_s" in frame else []
    frame = frame[leading + known + others + tail]
    for column in ("n_jobs", "n_preemptions", "n_steps", "n_gpus"):
        if column in frame:  # NaN for skipped cells would otherwise make these float
            frame[column] = frame[column].astype("Int64")
    return frame


def write_table(out_dir: Path, frame: pd.DataFrame, name: str = RESULTS_FILE) -> Path:
    """Write ``frame`` as Parquet into ``out_dir``, replacing any older table whole."""
    path = out_dir / name
    _write_atomic(path, lambda target: frame.to_parquet(target, index=False))
    return path
