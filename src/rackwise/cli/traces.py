"""``rackwise traces list|describe``: the shipped real traces."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

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
def describe(name: Annotated[str, typer.Argument(help="A shipped trace name.")]) -> None:
    """Shape of one trace: GPU counts, durations, groups, and its licence."""
    from rackwise import traces

    with reported():
        info = traces.describe(name)
        text = traces.attribution(name)
    table = Table(title=name, show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value")
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {v}" for k, v in value.items())
        elif isinstance(value, float):
            value = f"{value:,.1f}"
        table.add_row(key, str(value))
    console = Console()
    console.print(table)
    console.print(text)
