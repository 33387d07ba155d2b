"""``rackwise forecast``: when will each pending job start and finish.

Examples:
    rackwise forecast --backend slurm --policy fifo
    rackwise forecast --snapshot snap.json --samples 100 --json
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rackwise.cli.errors import reported
from rackwise.cli.params import parse_params
from rackwise.errors import InputError


def forecast(
    backend: Annotated[str | None, typer.Option(help="Read a live cluster: slurm or kubernetes.")] = None,
    snapshot: Annotated[Path | None, typer.Option(help="Or a snapshot file (JSON).")] = None,
    policy: Annotated[str | None, typer.Option(
        help="Policy to forecast under (default: the snapshot's own, with its live state; "
             "fifo for a backend).")] = None,
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="Policy parameter key=value (repeatable).")] = None,
    samples: Annotated[int, typer.Option(
        help="Forward runs with sampled durations for a p10/p50/p90 band (0: point forecast only).")] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the samples and of a fresh policy.")] = 0,
    workers: Annotated[int | None, typer.Option(help="Local processes for the samples (default: all cores).")] = None,
    ray: Annotated[bool, typer.Option("--ray", help="Run the samples on Ray (needs ray importable).")] = False,
    arrivals: Annotated[bool, typer.Option(
        help="Draw further arrivals from the snapshot's fitted arrival model.")] = False,
    horizon_h: Annotated[float, typer.Option(help="With --arrivals: draw arrivals over this many hours.")] = 24.0,
    fresh_policy: Annotated[bool, typer.Option(
        help="Ignore the snapshot's live policy state; start the policy anew.")] = False,
    max_age_s: Annotated[float | None, typer.Option(
        help="Refuse a snapshot older than this (real-cluster snapshots).")] = None,
    partition: Annotated[str | None, typer.Option(help="slurm: partition to read.")] = None,
    cluster: Annotated[Path | None, typer.Option(
        help="slurm: cluster spec matching the partition's GPU nodes.")] = None,
    namespace: Annotated[str | None, typer.Option(help="kubernetes: namespace of rackwise's pods.")] = None,
    save_snapshot: Annotated[Path | None, typer.Option(
        help="Also write the snapshot read from the backend here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    limit: Annotated[int, typer.Option(help="Rows of the table (0: all).")] = 50,
) -> None:
    """Forecast each pending job's start, finish and GPUs by simulating on from now."""
    console = Console()
    with reported():
        from rackwise.engine import snapshot as snapshots
        from rackwise.forecast import live
        from rackwise.forecast.band import arrival_model_of, forecast_with_band
        from rackwise.forecast.output import forecast_dict

        if (backend is None) == (snapshot is None):
            raise InputError("give either --backend or --snapshot", field="--backend")
        if backend is not None:
            snap = live.snapshot_from_backend(backend, partition=partition, cluster=cluster,
                                              namespace=namespace)
            snap = replace(snap, policy_name=policy or "fifo",
                           policy_params=parse_params(param, "--param"))
            if save_snapshot is not None:
                snapshots.save(snap, save_snapshot)
        else:
            assert snapshot is not None
            snap = snapshots.load(snapshot)
            if policy is not None and (policy != snap.policy_name or param):
                snap = replace(snap, policy_name=policy, policy_params=parse_params(param, "--param"),
                               policy_state=None)
        if max_age_s is not None:
            snapshots.validate(snap, now_s=time.time(), max_age_s=max_age_s)
        model = arrival_model_of(snap, horizon_h * 3600.0) if arrivals else None
        if arrivals and model is None:
            raise InputError("the snapshot carries no arrival model", field="--arrivals")
        point, bands = forecast_with_band(snap, n_samples=samples, seed=seed, workers=workers,
                                          use_ray=ray, arrivals=model, fresh_policy=fresh_policy)
        data = forecast_dict(snap, point, bands, samples)
    if as_json:
        print(json.dumps(data, indent=1))
        return
    print_table(console, data, limit)


def _h(now: float, value: float | None) -> str:
    return "never" if value is None else f"{(value - now) / 3600:+,.2f} h"


def print_table(console: Console, data: dict[str, Any], limit: int) -> None:
    now = data["taken_at_s"]
    banded = data["n_samples"] > 0
    table = Table(title=f"{data['policy']} on {data['cluster']}: forecast at t={now / 3600:,.2f} h "
                        f"({data['n_running']} running, {data['n_pending']} pending)")
    for name in ("job", "status", "GPUs", "start", "finish", "nodes"):
        table.add_column(name, justify="left" if name in ("job", "status", "nodes") else "right")
    if banded:
        table.add_column("start p10-p90", justify="right")
        table.add_column("finish p10-p90", justify="right")
    rows = [job for job in data["jobs"] if job["status"] != "running"] + \
           [job for job in data["jobs"] if job["status"] == "running"]
    for job in rows[:limit or None]:
        nodes = ",".join(job["nodes"][:4]) + ("..." if len(job["nodes"]) > 4 else "")
        cells = [job["job_id"], job["status"], str(job["n_gpus"]), _h(now, job["start_s"]),
                 _h(now, job["finish_s"]), nodes]
        if banded:
            cells += [f"{_h(now, job.get('start_p10_s'))} .. {_h(now, job.get('start_p90_s'))}",
                      f"{_h(now, job.get('finish_p10_s'))} .. {_h(now, job.get('finish_p90_s'))}"]
        table.add_row(*cells)
    console.print(table)
    if limit and len(rows) > limit:
        console.print(f"... {len(rows) - limit} more rows (--limit 0 shows all)")
