"""``rackwise report RESULTS``: a self-contained HTML report of one or many runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from rackwise.cli.errors import reported


def report(
    results: Annotated[Path, typer.Argument(help="A results folder, or a folder of them (compare/sweep output).")],
    out: Annotated[Path, typer.Option(help="The HTML file to write.")] = Path("report.html"),
    baseline: Annotated[str | None, typer.Option(
        help="Policy the ratios compare against (default: a sweep's own baseline, else fifo, else the first).")] = None,
    image_format: Annotated[str, typer.Option("--image-format", help="Figures as png or svg.")] = "png",
) -> None:
    """Write an HTML report (plots, summary table, configuration) of the runs in RESULTS.

    Example: rackwise report results/ --out report.html --baseline fifo
    """
    with reported():
        # Imported here: matplotlib is an optional extra, and a missing one is reported.
        from rackwise.report.build import build_report

        path = build_report(results, out, baseline=baseline, image_format=image_format)
    size_kib = path.stat().st_size / 1024
    Console().print(f"report written to {path} ({size_kib:,.0f} KiB)")
