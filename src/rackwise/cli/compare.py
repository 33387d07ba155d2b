"""``rackwise compare``: several policies on the same jobs, cluster and seed, side by side."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rackwise.cli import options
from rackwise.cli.errors import reported
from rackwise.cli.params import parse_params
from rackwise.cli.sweep import cell_progress

if TYPE_CHECKING:  # the experiment machinery is imported when the command runs
    from rackwise.experiments.compare import Comparison

# Short stacked headings with the unit the baseline row is in, so that the table fits 80 columns.
HEADINGS = {"avg_jct_s": "avg\nJCT\n(h)", "median_jct_s": "p50\nJCT\n(h)", "p99_jct_s": "p99\nJCT\n(h)",
            "avg_queueing_s": "queue\n(h)", "makespan_s": "make-\nspan\n(h)",
            "utilisation": "util.", "comm_overhead_gpu_hours": "comm\nGPU-h",
            "n_preemptions": "pre-\nempt."}


def absolute(name: str, value: Any) -> str:
    """A figure in the unit its heading names, as the baseline row shows it."""
    if value is None or value != value:
        return "-"
    if name.endswith("_s"):
        return f"{value / 3600:,.2f}"
    if name == "utilisation":
        return f"{value:.1%}"
    if name == "comm_overhead_gpu_hours":
        return f"{value:,.1f}"
    return f"{int(value):,}"


def relative(name: str, value: Any, factor: float | None) -> str:
    """``0.82x``; the value itself where no ratio exists (a zero or missing baseline figure)."""
    return f"{factor:.2f}x" if factor is not None else absolute(name, value)


def print_comparison(console: Console, result: Comparison, title: str) -> None:
    from rackwise.experiments.compare import COMPARED

    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  caption=f"{result.baseline}: absolute; others: ratio to {result.baseline}")
    table.add_column("policy", style="bold", no_wrap=True)
    for name in COMPARED:
        table.add_column(HEADINGS[name], justify="right", no_wrap=True)
    for _, row in result.table[result.table["status"] == "ok"].iterrows():
        label = row["policy"]
        if label == result.baseline:
            cells = [absolute(name, row.get(name)) for name in COMPARED]
        else:
            cells = [relative(name, row.get(name), result.ratios[label][name]) for name in COMPARED]
        table.add_row(label, *cells)
    console.print(table)
    for label, reason in result.skipped.items():
        # escaped: rich would read an extra's name, e.g. ``rackwise[ml]``, as markup and drop it
        console.print(f"skipped {escape(label)}: {escape(reason)}")


def compare(
    policies: Annotated[str, typer.Option(help="Comma-separated policies, e.g. fifo,tiresias,dally.")],
    trace: options.Trace = None,
    trace_file: options.TraceFile = None,
    trace_format: options.TraceFormat = "csv",
    mapping: options.Mapping = None,
    groups: options.Groups = None,
    start_s: options.StartS = None,
    end_s: options.EndS = None,
    first_n: options.FirstN = None,
    skip_oversized: options.SkipOversized = False,
    load: options.Load = 1.0,
    cluster: options.Cluster = None,
    nodes: options.Nodes = 64,
    gpus_per_node: options.GpusPerNode = 8,
    nodes_per_rack: options.NodesPerRack = 8,
    gpu_type: options.GpuType = "v100",
    perf: options.Perf = "ideal",
    perf_param: options.PerfParam = None,
    baseline: Annotated[str | None, typer.Option(
        help="Policy the others are relative to (default: the first).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of every random choice in the runs.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Results folder (default results/compare-TRACE-sSEED).")] = None,
    jobs: Annotated[int, typer.Option(help="Policies simulated at once, in local processes.")] = 2,
) -> None:
    """Simulate several POLICIES on the same workload, cluster and seed; print each figure
    relative to a baseline and write a results folder (one sub-folder per policy).

    Exits 1, after printing the others, when a policy was skipped (e.g. for a missing extra).

    Example: rackwise compare --trace philly_2017 --first-n 2000 --policies fifo,tiresias,dally
    """
    from rackwise.experiments.compare import compare as run_comparison
    from rackwise.experiments.compare import comparison_experiment
    from rackwise.experiments.config import ClusterEntry, WorkloadEntry

    console = Console()
    with reported():
        names = [name.strip() for name in policies.split(",") if name.strip()]
        workload = WorkloadEntry(
            trace=trace, file=trace_file, format=trace_format, mapping=mapping,  # type: ignore[arg-type]
            groups=groups.split(",") if groups else None, start_s=start_s, end_s=end_s,
            first_n=first_n, skip_oversized=skip_oversized)
        spec = ClusterEntry(spec=cluster, nodes=nodes, gpus_per_node=gpus_per_node,
                            nodes_per_rack=nodes_per_rack, gpu_type=gpu_type)
        experiment = comparison_experiment(workload, spec, names, perf=perf,
                                           perf_params=parse_params(perf_param, "--perf-param"),
                                           seed=seed, load=load)
        name = trace or (trace_file.stem if trace_file else "trace")
        folder = out or Path("results") / f"compare-{name}-s{seed}"
        with cell_progress(console, len(names), "comparing") as advance:
            result = run_comparison(experiment, folder, baseline=baseline or names[0], jobs=jobs,
                                    on_done=advance)
    print_comparison(console, result, f"{len(result.ratios)} policies on {workload.label}, seed {seed}")
    console.print(f"results in {result.out_dir}/")
    if result.skipped:
        # a comparison missing a policy the user asked for is not a success
        print(f"error: {len(result.skipped)} of {len(names)} policies skipped", file=sys.stderr)
        raise typer.Exit(code=1)
