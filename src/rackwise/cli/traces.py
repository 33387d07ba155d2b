"""``rackwise traces list|describe``: the shipped real traces, or the shape of a trace file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from rackwise.cli import options
from rackwise.cli.errors import reported

app = typer.Typer(help="The real traces shipped with rackwise.", no_args_is_help=True)


@app.command("list")
def list_traces() -> None:
    """List the shipped traces with their size and source."""
    from rackwise import traces

    table = Table(title="Shipped traces (use with --trace NAME)")
    for column in ("name", "jobs", "groups", "span (days)", "source"):
        table.add_column(column)
    for name in traces.names():
        info = traces.describe(name)
        table.add_row(name, f"{info['n_jobs']:,}", str(info["n_groups"]),
                      f"{info['span_s'] / 86400:.1f}", traces.attribution(name).splitlines()[0])
    Console().print(table)


@app.command("describe")
def describe(name: Annotated[str, typer.Argument(help="A shipped trace name, or a trace file.")],
             mapping: options.Mapping = None, trace_format: options.TraceFormat = "csv",
             strict: options.Strict = False, gpu_shares: options.GpuShares = False) -> None:
    """Shape of a trace before any simulation: jobs, GPU sizes, arrivals, skipped rows.

    A shipped trace also shows its durations, groups and licence.
    """
    if Path(name).is_file() or mapping is not None or trace_format != "csv":
        _describe_file(Path(name), mapping, trace_format, strict=strict, gpu_shares=gpu_shares)
        return
    from rackwise import traces

    with reported():
        info = traces.describe(name)
        text = traces.attribution(name)
    console = Console()
    console.print(_figures_table(name, info))
    console.print(text)


def _describe_file(path: Path, mapping: Path | None, trace_format: str, *, strict: bool,
                   gpu_shares: bool) -> None:
    from rackwise.workload import readers
    from rackwise.workload.shape import shape

    with reported():
        workload = readers.read(path, trace_format, mapping=mapping, strict=strict,
                                gpu_shares=gpu_shares)
    Console().print(_figures_table(str(path), shape(workload)))


def _figures_table(title: str, info: dict[str, object]) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value")
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {v}" for k, v in value.items()) or "none"
        elif isinstance(value, float):
            value = f"{value:,.1f}"
        table.add_row(key, str(value))
    return table
