"""Finding results folders and reading what a report needs from them.

A results folder is any folder holding a ``summary.json`` (as ``rackwise
simulate`` writes it). A report reads one such folder, or every one below a
parent folder (a comparison or a sweep, one folder per policy and seed).
Only ``summary.json`` is read up front; the job and timeline tables are
read one run at a time, and only the columns a plot needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from rackwise.errors import InputError

SUMMARY = "summary.json"
SWEEP_TABLE = "results.parquet"
JOB_COLUMNS = ("jct_s", "queueing_delay_s")
TIMELINE_COLUMNS = ("time", "busy_gpus", "n_pending")
# Figures a sweep table may carry instead of per-run folders (summary.json names).
FIGURE_NAMES = ("n_jobs", "avg_jct_s", "median_jct_s", "p95_jct_s", "p99_jct_s",
                "avg_queueing_s", "p99_queueing_s", "makespan_s", "utilisation",
                "n_preemptions", "gpu_hours")
# Columns of a sweep table that describe the outcome or identify the cell,
# not its configuration: they must not split runs into groups.
_NOT_CONFIG = ("key", "status", "reason", "error", "wall_time_s", "n_steps", "n_gpus",
               "comm_overhead_gpu_hours", "comm_extra_gpu_hours")
_NOT_RUN = ("skipped", "failed")


@dataclass(frozen=True)
class Run:
    """One simulation run: where it lies, what produced it, its headline figures.

    Attributes:
        name: The folder relative to the report's root (its own name when it is the root).
        path: The folder, or None for a row of a sweep table without a folder.
        policy: ``config.policy`` of its summary, or its label in a sweep.
        seed: ``config.seed`` of its summary.
        config: The full configuration, as ``summary.json`` holds it.
        figures: The headline figures (seconds unless named).
        n_gpus: GPUs in the simulated cluster, when known.
        labels: In a sweep, the experiment file's names for its cell (policy,
            workload, cluster and load), which groups are named by, and its baseline.
    """

    name: str
    path: Path | None
    policy: str
    seed: int
    config: Mapping[str, Any]
    figures: Mapping[str, float]
    n_gpus: int | None = None
    labels: Mapping[str, Any] | None = None


def discover(root: str | Path) -> list[Path]:
    """Every results folder at or below ``root``, sorted by path.

    Raises:
        InputError: when ``root`` is missing or holds no results folder.
    """
    base = Path(root)
    if not base.exists():
        raise InputError("no such folder", source=str(base))
    if not base.is_dir():
        raise InputError("not a folder (give a results folder or a folder of them)",
                         source=str(base))
    if (base / SUMMARY).is_file():
        return [base]
    found = sorted(p.parent for p in base.rglob(SUMMARY) if not _hidden(p.relative_to(base)))
    return found


def _hidden(relative: Path) -> bool:
    # Results are staged in dot-folders before being renamed into place;
    # a half-written one must not be read as a run.
    return any(part.startswith(".") for part in relative.parts[:-1])


def load_runs(root: str | Path) -> list[Run]:
    """Read the summary of every run at or below ``root``.

    Falls back on a sweep's ``results.parquet`` table (figures only, no
    plots from per-job data) when no run folder lies below ``root``; when
    the table lies beside a sweep's run folders, it gives them their labels.

    Raises:
        InputError: a missing folder, no runs, or a corrupt summary (naming the file).
    """
    base = Path(root)
    folders = discover(base)
    table = base / SWEEP_TABLE
    if folders:
        runs = [read_run(folder, base) for folder in folders]
        return with_sweep_labels(runs, table) if table.is_file() else runs
    if table.is_file():
        return read_sweep_table(table)
    raise InputError(f"not a results folder: no {SUMMARY} in it or below it", source=str(base))


def read_run(folder: Path, root: Path) -> Run:
    """Read ``folder/summary.json`` into a `Run`."""
    path = folder / SUMMARY
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc.__class__.__name__}", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"corrupt JSON ({exc.msg})", source=str(path), line=exc.lineno) from None
    if not isinstance(summary, dict):
        raise InputError("expected a JSON object", source=str(path))
    config = summary.get("config")
    figures = summary.get("figures")
    if not isinstance(config, dict) or not isinstance(config.get("policy"), str):
        raise InputError("no config.policy: not a summary written by rackwise",
                         source=str(path), field="config")
    if not isinstance(figures, dict) or not figures.get("n_jobs"):
        raise InputError("no figures (or a run without jobs)", source=str(path), field="figures")
    seed = config.get("seed", 0)
    if not isinstance(seed, int):
        raise InputError(f"config.seed must be an integer, not {seed!r}", source=str(path),
                         field="config.seed")
    name = folder.relative_to(root).as_posix() if folder != root else folder.resolve().name
    return Run(name=name, path=folder, policy=config["policy"], seed=seed, config=config,
               figures={k: v for k, v in figures.items() if isinstance(v, (int, float))},
               n_gpus=cluster_gpus(summary))


def with_sweep_labels(runs: list[Run], table: Path) -> list[Run]:
    """The runs named by their sweep's labels: its table's row whose key is the run's folder.

    All or nothing: if any run has no row (a folder copied in from elsewhere),
    every run keeps its own configuration's names.
    """
    frame = _read_frame(table, None)
    if not {"key", "policy", "workload", "cluster", "load"} <= set(frame.columns):
        return runs
    rows = {str(row["key"]): row for row in frame.to_dict("records")}
    labelled = []
    for run in runs:
        row = rows.get(run.path.name) if run.path is not None else None
        if row is None:
            return runs
        policy = str(row["policy"])
        labels = {"policy": policy, "workload": str(row["workload"]),
                  "cluster": str(row["cluster"]), "load": float(row["load"]),
                  "baseline": str(row.get("baseline") or "")}
        labelled.append(replace(run, policy=policy, labels=labels))
    return labelled


def cluster_gpus(summary: Mapping[str, Any]) -> int | None:
    """GPUs in the run's cluster: from its description, else from the flags."""
    described = re.search(r"(\d+) GPUs", str(summary.get("cluster", "")))
    if described:
        return int(described.group(1))
    cluster = summary.get("config", {}).get("cluster", {})
    if isinstance(cluster, dict) and cluster.get("spec") is None:
        nodes, per_node = cluster.get("nodes"), cluster.get("gpus_per_node")
        if isinstance(nodes, int) and isinstance(per_node, int):
            return nodes * per_node
    return None


def read_sweep_table(path: Path) -> list[Run]:
    """Runs from a sweep's one-row-per-cell table (figures only)."""
    frame = _read_frame(path, None)
    if "policy" not in frame.columns:
        raise InputError("no 'policy' column", source=str(path), field="policy")
    renamed = {c: c.removeprefix("figures.") for c in frame.columns}
    frame = frame.rename(columns=renamed)
    figure_cols = [c for c in FIGURE_NAMES if c in frame.columns]
    if "avg_jct_s" not in figure_cols:
        raise InputError("no 'avg_jct_s' column", source=str(path), field="avg_jct_s")
    runs = []
    for index, row in enumerate(frame.to_dict("records")):
        if row.get("status") in _NOT_RUN or pd.isna(row["avg_jct_s"]):
            continue  # a cell that did not run has no figures to show
        config = {k: _plain(v) for k, v in row.items()
                  if k not in figure_cols and k not in _NOT_CONFIG}
        seed = config.get("seed", 0)
        n_gpus = row.get("n_gpus")
        runs.append(Run(name=str(row.get("key", f"{SWEEP_TABLE}#{index}")), path=None,
                        policy=str(row["policy"]), seed=int(seed) if pd.notna(seed) else 0,
                        config=config,
                        figures={c: float(row[c]) for c in figure_cols if pd.notna(row[c])},
                        n_gpus=int(n_gpus) if n_gpus is not None and pd.notna(n_gpus) else None))
    if not runs:
        raise InputError("the table has no finished cells", source=str(path))
    return runs


def _plain(value: Any) -> Any:
    # numpy scalars do not serialise to JSON; the report prints configs as JSON.
    return value.item() if hasattr(value, "item") else value


def read_jobs(run: Run) -> pd.DataFrame | None:
    """The run's JCT and queueing delay per job, or None when it has no folder."""
    return _read_table(run, "jobs", JOB_COLUMNS)


def read_timeline(run: Run) -> pd.DataFrame | None:
    """The run's busy GPUs and pending jobs over time, or None when it has no folder."""
    return _read_table(run, "timeline", TIMELINE_COLUMNS)


def _read_table(run: Run, stem: str, columns: tuple[str, ...]) -> pd.DataFrame | None:
    if run.path is None:
        return None
    for suffix in (".parquet", ".csv"):
        path = run.path / f"{stem}{suffix}"
        if path.is_file():
            return _read_frame(path, columns)
    raise InputError(f"missing {stem}.parquet (or {stem}.csv)", source=str(run.path))


def _read_frame(path: Path, columns: tuple[str, ...] | None) -> pd.DataFrame:
    try:
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path)
    except Exception as exc:  # pyarrow and pandas raise many kinds for a bad file
        raise InputError(f"cannot read table ({exc.__class__.__name__})", source=str(path)) from None
    if columns is None:
        return frame
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", source=str(path))
    return frame[list(columns)]
