"""Run A-SRPT and its baselines on the grid of ``experiments/asrpt.yaml``.

    .venv/bin/python experiments/asrpt.py experiments/asrpt.yaml [--jobs 2]

Prints one JSON line per cell (window, load, seed, policy), then a markdown
table: average and p99 JCT, makespan, preemptions, the prediction error of
policies that predict (MAPE; the median of predicted over actual, below 1
when the typical job is predicted too short; the share predicted too short),
and each policy's total JCT over the virtual single machine's lower bound
(SRPT on true work, g x duration / G).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

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
        "trace": cell.config.workload.trace, "load": cell.config.workload.load,
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
    return row


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel")
    parser.add_argument("--policies", default=None, help="comma-separated labels: a subset")
    args = parser.parse_args()
    from rackwise.experiments import load_experiment, plan

    wanted = set(args.policies.split(",")) if args.policies else None
    cells = [cell for cell in plan(load_experiment(args.config), str(args.config))
             if cell.skip_reason is None and (wanted is None or cell.policy_label in wanted)]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_cell, cell) for cell in cells]
        rows = []
        for future in futures:
            rows.append(future.result())
            print(json.dumps({**rows[-1], "command": " ".join(sys.argv)}), flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
