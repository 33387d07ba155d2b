"""Run A-SRPT and its baselines on the grid of ``experiments/asrpt.yaml``.

    .venv/bin/python experiments/asrpt.py experiments/asrpt.yaml [--jobs 2] [--summary]

Prints one JSON line per cell (window, load, seed, policy), then a markdown
table: average and p99 JCT, makespan, preemptions, the prediction error of
policies that predict (MAPE; the median of predicted over actual, below 1
when the typical job is predicted too short; the share predicted too short),
and each policy's total JCT over the virtual single machine's lower bound
(SRPT on true work, g x duration / G). ``--summary`` prints instead one row
per window, load and policy over the seeds: average JCT over the
experiment's baseline's on the same seed, and how well the predictions the
policy scheduled on rank and size the jobs (Spearman's rank correlation
with the true sizes; the median of |log(predicted / actual)|; the share of
jobs whose prediction no other job shared).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from rackwise.experiments import Cell


def run_cell(cell: Cell) -> dict[str, Any]:
    """Simulate one cell of the grid and summarise it."""
    from rackwise.metrics.summary import summarize
    from rackwise.policies.parts.predicted_srpt import PredictedSrpt
    from rackwise.policies.parts.predictor import prediction_accuracy
    from rackwise.policies.parts.virtual_machine import srpt_finish_times
    from rackwise.run import execute

    started = time.perf_counter()
    result, _ = execute(cell.config)
    wall_s = time.perf_counter() - started
    figures = summarize(result.records, result.timeline, result.topology.n_gpus)
    n_gpus = result.topology.n_gpus
    # The bound uses each job's run time on its own placement in this run.
    bound = srpt_finish_times([(r.job_id, r.submit_time, r.n_gpus * (r.run_time_s - r.overhead_s) / n_gpus)
                               for r in result.records])
    vm_flow = sum(bound[r.job_id] - r.submit_time for r in result.records)
    row: dict[str, Any] = {
        "window": cell.workload_label, "trace": cell.config.workload.trace, "load": cell.config.workload.load,
        "seed": cell.config.seed, "policy": cell.policy_label, "n_jobs": figures["n_jobs"],
        "avg_jct_h": figures["avg_jct_s"] / 3600, "p99_jct_h": figures["p99_jct_s"] / 3600,
        "makespan_h": figures["makespan_s"] / 3600, "n_preemptions": figures["n_preemptions"],
        "utilisation": figures["utilisation"],
        "jct_over_vm_bound": sum(r.jct_s for r in result.records) / vm_flow,
        "wall_s": round(wall_s, 1),
    }
    srpt = getattr(result.policy, "srpt", None)
    if isinstance(srpt, PredictedSrpt):
        accuracy = prediction_accuracy(srpt.prediction_log)
        row.update({name: accuracy[name] for name in
                    ("mae_iters", "mape_pct", "within_20pct_frac", "median_ratio", "under_frac")})
        row.update(rank_quality(srpt.prediction_log))
    return row


def rank_quality(log: Any) -> dict[str, float]:
    """The prediction log's rank quality: see the module's ``--summary``."""
    pairs = [(r.predicted_iters, r.actual_iters) for r in log if r.actual_iters > 0]
    if len(pairs) < 2:
        return {"spearman": float("nan"), "median_abs_log_error": float("nan"), "unique_share": float("nan")}
    predicted, actual = np.array(pairs).T
    _, counts = np.unique(predicted, return_counts=True)
    return {"spearman": float(spearmanr(predicted, actual).statistic),
            "median_abs_log_error": float(np.median(np.abs(np.log(predicted / actual)))),
            "unique_share": float((counts == 1).sum() / len(predicted))}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| trace | load | seed | policy | avg JCT (h) | p99 JCT (h) | makespan (h) "
             "| preemptions | JCT / VM bound | MAPE | median predicted / actual | predicted too short |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        mape = f"{r['mape_pct']:.0f}%" if "mape_pct" in r else "-"
        ratio = f"{r['median_ratio']:.2f}" if "median_ratio" in r else "-"
        under = f"{r['under_frac']:.0%}" if "under_frac" in r else "-"
        lines.append(f"| {r['trace']} | {r['load']:g} | {r['seed']} | {r['policy']} "
                     f"| {r['avg_jct_h']:.2f} | {r['p99_jct_h']:.1f} | {r['makespan_h']:.1f} "
                     f"| {r['n_preemptions']} | {r['jct_over_vm_bound']:.2f} | {mape} | {ratio} "
                     f"| {under} |")
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]], baseline: str) -> str:
    """Per window, load and policy, over seeds: average JCT over the baseline's, and rank quality."""
    base = {(r["window"], r["load"], r["seed"]): r["avg_jct_h"] for r in rows if r["policy"] == baseline}
    groups: dict[tuple[str, float, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["window"], r["load"], r["policy"])].append(r)
    lines = [f"| window | load | policy | avg JCT / {baseline} (min-max) | Spearman | median abs log error "
             "| unique predictions | seeds |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for (window, load, policy), group in groups.items():
        ratios = [r["avg_jct_h"] / base[(window, load, r["seed"])] for r in group]
        quality = [f"{np.mean([r[name] for r in group]):.2f}" if name in group[0] else "-"
                   for name in ("spearman", "median_abs_log_error", "unique_share")]
        lines.append(f"| {window} | {load:g} | {policy} | {np.mean(ratios):.2f}x "
                     f"({min(ratios):.2f}-{max(ratios):.2f}) | {' | '.join(quality)} | {len(group)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel")
    parser.add_argument("--policies", default=None, help="comma-separated labels: a subset")
    parser.add_argument("--summary", action="store_true",
                        help="one row per window, load and policy: ratio to the baseline over seeds")
    args = parser.parse_args()
    from rackwise.experiments import load_experiment, plan

    experiment = load_experiment(args.config)
    wanted = set(args.policies.split(",")) if args.policies else None
    if args.summary and wanted is not None and experiment.baseline is not None:
        wanted.add(experiment.baseline)
    cells = [cell for cell in plan(experiment, str(args.config))
             if cell.skip_reason is None and (wanted is None or cell.policy_label in wanted)]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_cell, cell) for cell in cells]
        rows = []
        for future in futures:
            rows.append(future.result())
            print(json.dumps({**rows[-1], "command": " ".join(sys.argv)}), flush=True)
    if args.summary and experiment.baseline is not None:
        print(summary(rows, experiment.baseline))
    else:
        print(table(rows))


if __name__ == "__main__":
    main()
