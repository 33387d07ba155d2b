"""Several policies on the same jobs, cluster and seed, each figure relative to a baseline.

A comparison is a one-axis experiment: it runs through the same cells and
runner as a sweep, and writes ``OUT/<policy>/`` (each run's results folder,
as `rackwise.run.save` writes it), ``OUT/summary.parquet`` (one row per
policy) and ``OUT/compare.json`` (figures, ratios to the baseline, skipped
policies and why).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rackwise.errors import InputError, UnknownNameError, suggest
from rackwise.experiments.config import ClusterEntry, Experiment, PolicyEntry, WorkloadEntry
from rackwise.experiments.grid import Cell, plan
from rackwise.experiments.results import write_table
from rackwise.experiments.runner import OnDone, run_cells
from rackwise.policies.registry import all_policies

# The figures a comparison shows, in order; ratios are value / baseline value.
COMPARED = ("avg_jct_s", "median_jct_s", "p99_jct_s", "avg_queueing_s", "makespan_s",
            "utilisation", "comm_overhead_gpu_hours", "n_preemptions")


@dataclass(frozen=True)
class Comparison:
    """The outcome: one row per policy (``status`` ok or skipped) and the ratios."""

    table: pd.DataFrame
    ratios: dict[str, dict[str, float | None]]  # policy -> figure -> ratio (None: undefined)
    baseline: str
    skipped: dict[str, str]  # policy -> reason
    out_dir: Path


def comparison_experiment(workload: WorkloadEntry, cluster: ClusterEntry, policies: list[str],
                          *, perf: str, perf_params: dict[str, Any], seed: int,
                          load: float = 1.0) -> Experiment:
    """The one-axis experiment a comparison runs."""
    if not policies:
        raise InputError("name at least one policy", field="--policies")
    if len(set(policies)) != len(policies):
        raise InputError(f"a policy is named twice: {','.join(policies)}", field="--policies")
    known = all_policies()
    for name in policies:
        if name not in known:
            raise UnknownNameError(f"--policies: unknown policy '{name}'.{suggest(name, list(known))}"
                                   f" Known: {', '.join(sorted(known))}")
    return Experiment(name="compare", workloads=[workload], clusters=[cluster],
                      policies=[PolicyEntry(policy=name) for name in policies],
                      perf=perf, perf_params=perf_params, seeds=[seed], loads=[load])


def ratio(value: float | None, base: float | None) -> float | None:
    """``value / base``, or None where that means nothing (missing, or a zero baseline)."""
    if value is None or base is None or _missing(value) or _missing(base) or base == 0:
        return None
    return float(value) / float(base)


def _missing(value: Any) -> bool:
    return value is pd.NA or (isinstance(value, float) and math.isnan(value))


def compare(experiment: Experiment, out_dir: str | Path, *, baseline: str, jobs: int = 1,
            on_done: OnDone | None = None) -> Comparison:
    """Run every policy of ``experiment`` and relate its figures to ``baseline``'s.

    Raises:
        InputError: the baseline is not among the policies, or cannot run here;
            any bad input, before anything is written.
    """
    labels = [entry.label for entry in experiment.policies]
    if baseline not in labels:
        raise InputError(f"baseline '{baseline}' is not one of the policies ({', '.join(labels)})",
                         field="--baseline")
    cells = plan(experiment, "compare")
    skipped = {cell.policy_label: cell.skip_reason for cell in cells if cell.skip_reason}
    if baseline in skipped:
        raise InputError(f"baseline '{baseline}' cannot run: {skipped[baseline]}",
                         field="--baseline")
    out = Path(out_dir)
    config = cells[0].config.model_dump(mode="json", exclude={"policy", "policy_params"})
    _refuse_another_comparison(out, config, labels)

    def run_dir(cell: Cell) -> Path:
        return out / cell.policy_label

    # A comparison always runs afresh: its run folders are part of the result.
    outcome = run_cells(cells, out, jobs=jobs, resume=False, run_dirs=run_dir, on_done=on_done)
    table = outcome.table
    failed = table[table["status"] == "failed"]
    if len(failed):
        row = failed.iloc[0]
        raise InputError(f"policy '{row['policy']}' failed: {row['reason']}")
    base = table[table["policy"] == baseline].iloc[0]
    ratios: dict[str, dict[str, float | None]] = {}
    for _, row in table[table["status"] == "ok"].iterrows():
        ratios[row["policy"]] = {name: ratio(row.get(name), base.get(name)) for name in COMPARED}
    write_table(out, table, "summary.parquet")
    (out / "results.parquet").unlink(missing_ok=True)  # summary.parquet is this folder's table
    payload = {
        "baseline": baseline,
        "config": config,
        "policies": {
            row["policy"]: {
                "status": row["status"],
                "figures": {name: _plain(row.get(name)) for name in COMPARED},
                "ratios": ratios.get(row["policy"]),
                "reason": row["reason"] or None,
            } for _, row in table.iterrows()
        },
    }
    (out / "compare.json").write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return Comparison(table, ratios, baseline, skipped, out)


def _refuse_another_comparison(out: Path, config: dict[str, Any], labels: list[str]) -> None:
    """A folder that holds a comparison of other runs is not overwritten (its runs would mix)."""
    previous = out / "compare.json"
    if not previous.is_file():
        return
    try:
        payload = json.loads(previous.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # unreadable: nothing of it is worth keeping apart
    same = payload.get("config") == config and sorted(payload.get("policies", {})) == sorted(labels)
    if not same:
        raise InputError("holds a comparison of other settings or policies; give another --out, "
                         "or remove the folder", source=str(out))


def _plain(value: Any) -> float | int | None:
    if value is None or _missing(value):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    return float(value)
