"""``rackwise reproduce``: rerun the README's experiment and regenerate its table and figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from rackwise.cli.errors import reported
from rackwise.cli.sweep import cell_progress
from rackwise.experiments.reproduce import reproduce as run_reproduction


def reproduce(
    quick: Annotated[bool, typer.Option(
        help="One seed and 150 jobs per workload: a check in a minute, not the published figures.")] = False,
    experiment: Annotated[Path, typer.Option(help="The experiment to run.")] = Path("experiments/all.yaml"),
    out: Annotated[Path | None, typer.Option(help="Sweep results folder (default results/reproduce[-quick]).")] = None,
    docs: Annotated[Path | None, typer.Option(
        help="Where results.md and figures/ go (default docs, or the results folder with --quick).")] = None,
    jobs: Annotated[int, typer.Option(help="Cells run at once, in local processes.")] = 2,
) -> None:
    """Run experiments/all.yaml and write docs/results.md and docs/figures/.

    Finished cells are reused, so an interrupted run resumes.
    Example: rackwise reproduce --quick
    """
    console = Console()
    folder = out or Path("results") / ("reproduce-quick" if quick else "reproduce")
    docs_dir = docs or (folder if quick else Path("docs"))
    command = "rackwise reproduce" + (" --quick" if quick else "")
    if experiment != Path("experiments/all.yaml"):
        command += f" --experiment {experiment}"
    if docs is not None:
        command += f" --docs {docs}"
    with reported(), cell_progress(console, None, "reproducing") as advance:
        result = run_reproduction(experiment, folder, docs_dir, quick=quick, jobs=jobs,
                                  command=command, on_done=advance)
    outcome = result.outcome
    console.print(f"{outcome.n_ran} cells run, {outcome.n_cached} already done, "
                  f"{outcome.n_skipped} skipped, {outcome.n_failed} failed in "
                  f"{outcome.wall_time_s:.1f} s")
    console.print(f"table: {result.markdown}; figures: {', '.join(str(p) for p in result.figures)}")
    if outcome.n_failed:
        raise typer.Exit(code=1)
