"""``rackwise simulate``: run one policy over one workload and write the results."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from rackwise.cli import options
from rackwise.cli.errors import reported
from rackwise.cli.params import parse_params
from rackwise.cli.progress import progress_report
from rackwise.engine.snapshot import ClusterSnapshot
from rackwise.engine.snapshot import save as save_snapshot
from rackwise.errors import InputError
from rackwise.run import ClusterConfig, RunConfig, WorkloadConfig, build_simulator, save, summary_of
from rackwise.sim.collector import long_lived_objects


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.2f} h"


def print_summary(console: Console, figures: dict[str, float], title: str) -> None:
    console.print(title)
    table = Table(show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    rows = [
        ("jobs", f"{figures['n_jobs']:,}"),
        ("avg JCT", _hours(figures["avg_jct_s"])),
        ("median JCT", _hours(figures["median_jct_s"])),
        ("p95 JCT", _hours(figures["p95_jct_s"])),
        ("p99 JCT", _hours(figures["p99_jct_s"])),
        ("avg queueing", _hours(figures["avg_queueing_s"])),
        ("p99 queueing", _hours(figures["p99_queueing_s"])),
        ("makespan", _hours(figures["makespan_s"])),
        ("GPU utilisation", f"{figures['utilisation']:.1%}"),
        ("preemptions", f"{figures['n_preemptions']:,}"),
    ]
    if "comm_overhead_gpu_hours" in figures:
        rows.append(("comm overhead", f"{figures['comm_overhead_gpu_hours']:,.1f} GPU-h"))
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


def default_folder_name(trace: str, policy: str, seed: int, params: list[str] | None,
                        perf: str, perf_params: list[str] | None, load: float = 1.0,
                        history_jobs: int = 0) -> str:
    """``TRACE[-loadX][-logN]-POLICY[-KEY=VALUE...][-perf-MODEL[-KEY=VALUE...]]-sSEED``.

    Every -p and --perf-param value (and a load other than 1, a job log) is in the name, so
    variants of one run do not overwrite each other's folder; characters unsafe
    in a file name become ``_``.
    """
    parts = [trace, *([f"load{load:g}"] if load != 1.0 else []),
             *([f"log{history_jobs}"] if history_jobs else []), policy, *sorted(params or [])]
    if perf != "ideal":
        parts += [f"perf-{perf}", *sorted(perf_params or [])]
    parts.append(f"s{seed}")
    return re.sub(r"[^A-Za-z0-9_.,=+-]", "_", "-".join(parts))


def simulate(
    trace: options.Trace = None,
    trace_file: options.TraceFile = None,
    trace_format: options.TraceFormat = "csv",
    mapping: options.Mapping = None,
    groups: options.Groups = None,
    start_s: options.StartS = None,
    end_s: options.EndS = None,
    first_n: options.FirstN = None,
    skip_oversized: options.SkipOversized = False,
    strict: options.Strict = False,
    gpu_shares: options.GpuShares = False,
    load: options.Load = 1.0,
    history_jobs: options.HistoryJobs = 0,
    policy: Annotated[str, typer.Option(help="Scheduling policy (see `rackwise policies`).")] = "fifo",
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="Policy parameter key=value (repeatable); a tuple as key=[a,b].")] = None,
    cluster: options.Cluster = None,
    nodes: options.Nodes = 64,
    gpus_per_node: options.GpusPerNode = 8,
    nodes_per_rack: options.NodesPerRack = 8,
    gpu_type: options.GpuType = "v100",
    perf: options.Perf = "ideal",
    perf_param: options.PerfParam = None,
    seed: Annotated[int, typer.Option(help="Seed of every random choice in the run.")] = 0,
    start_latency_s: Annotated[float, typer.Option(
        help="Seconds a cluster manager takes to launch a started job (GPUs held meanwhile; "
             "docs/fidelity.md measures Slurm's).")] = 0.0,
    out: Annotated[Path | None, typer.Option(help="Results folder (default results/TRACE-POLICY-sSEED).")] = None,
    table_format: Annotated[str, typer.Option("--table-format", help="parquet or csv.")] = "parquet",
    forecast_at: Annotated[list[float] | None, typer.Option(
        help="Forecast at this second (repeatable); writes forecast.parquet, forecast beside outcome.")] = None,
    forecast_samples: Annotated[int, typer.Option(
        help="With --forecast-at: sampled runs per forecast for the p10-p90 band.")] = 0,
    save_snapshots: Annotated[bool, typer.Option(
        help="With --forecast-at: also write each instant's cluster snapshot, "
             "snapshot-SECONDS.json, for `rackwise forecast --snapshot`.")] = False,
) -> None:
    """Simulate POLICY on a trace and a cluster; print a summary and write a results folder.

    Example: rackwise simulate --trace philly_2017 --policy tiresias --nodes 64
    """
    console = Console()
    with reported(), long_lived_objects():
        if save_snapshots and not forecast_at:
            raise InputError("needs --forecast-at: snapshots are taken at its instants",
                             field="--save-snapshots")
        config = RunConfig(
            workload=WorkloadConfig(
                trace=trace, file=trace_file, format=trace_format, mapping=mapping,  # type: ignore[arg-type]
                groups=groups.split(",") if groups else None, start_s=start_s, end_s=end_s,
                first_n=first_n, skip_oversized=skip_oversized, strict=strict,
                gpu_shares=gpu_shares, load=load, history_jobs=history_jobs),
            cluster=ClusterConfig(spec=cluster, nodes=nodes, gpus_per_node=gpus_per_node,
                                  nodes_per_rack=nodes_per_rack, gpu_type=gpu_type),
            policy=policy, policy_params=parse_params(param, "--param"),
            perf=perf, perf_params=parse_params(perf_param, "--perf-param"), seed=seed,
            start_latency_s=start_latency_s,
        )
        snapshots: list[ClusterSnapshot] = []
        with progress_report(console, "simulating", "jobs finished") as progress:
            if forecast_at:
                from rackwise.forecast.accuracy import run_with_forecasts

                result, workload, forecasts = run_with_forecasts(
                    config, forecast_at, samples=forecast_samples, on_progress=progress,
                    on_snapshot=snapshots.append if save_snapshots else None)
            else:
                simulator, workload = build_simulator(config, on_progress=progress)
                result = simulator.run()  # which freezes the workload too
        name = trace or (trace_file.stem if trace_file else "trace")
        summary = summary_of(result, config, workload)
        folder = save(result, config, out or Path("results") / default_folder_name(
                          name, policy, seed, param, perf, perf_param, load, history_jobs),
                      fmt=table_format, workload=workload, summary=summary)  # type: ignore[arg-type]
        if any(count for _, count in workload.skipped_by_reason):
            from rackwise.workload.readers.row_filters import format_skipped

            console.print(f"{workload.source}: {format_skipped(dict(workload.skipped_by_reason))}")
        if workload.n_rounded_up:
            console.print(f"{workload.source}: rounded up {workload.n_rounded_up} fractional GPU "
                          "counts to whole GPUs")
        if forecast_at:
            from rackwise.forecast.accuracy import figures as forecast_figures

            forecasts.to_parquet(folder / "forecast.parquet", index=False)
            errors = forecast_figures(forecasts)
            console.print(f"forecast at {len(forecast_at)} instant(s): start MAE "
                          f"{errors['start_mae_h']:.2f} h over {errors['n_pending_forecasts']} "
                          f"pending jobs; {folder}/forecast.parquet")
            for snapshot in snapshots:
                path = save_snapshot(snapshot, folder / f"snapshot-{snapshot.taken_at_s:g}.json")
                console.print(f"snapshot at {snapshot.taken_at_s:g} s: {path}")
    print_summary(console, summary["figures"], f"{policy} on {workload.name}, {result.topology.describe()}")
    console.print(f"simulated in {result.wall_time_s:.2f} s; results in {folder}/")
