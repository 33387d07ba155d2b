"""``rackwise reproduce``: rerun the README's experiment and regenerate its table and figures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from rackwise.cli.errors import reported
from rackwise.cli.sweep import cell_progress

# The published results: every policy side by side, then one experiment per research paper.
DEFAULT_EXPERIMENTS = tuple(Path("experiments") / f"{name}.yaml"
                            for name in ("all", "delay", "hetero", "asrpt", "marl"))


def reproduce(
    quick: Annotated[bool, typer.Option(
        help="One seed, the busiest load, 150 jobs per workload: a check, not the published figures.")] = False,
    experiment: Annotated[list[Path] | None, typer.Option(
        help="An experiment to run (repeatable; default: all, delay, hetero, asrpt and marl "
             "from experiments/).")] = None,
    out: Annotated[Path | None, typer.Option(help="Sweep results folder (default results/reproduce[-quick]).")] = None,
    docs: Annotated[Path | None, typer.Option(
        help="Where results.md and figures/ go (default docs, or the results folder with --quick).")] = None,
    jobs: Annotated[int, typer.Option(help="Cells run at once, in local processes.")] = 2,
    check: Annotated[bool, typer.Option(
        help="Rerun each claim's two policies on the first seed at the busiest load and compare "
             "with DOCS/claims.csv; write nothing, exit 1 on a difference.")] = False,
) -> None:
    """Run the published experiments; write docs/results.md, docs/figures/ and the claims tables.

    Each paper's claims are checked over seeds and written into results.md and
    into the policy documents that hold the experiment's markers. Finished
    cells are reused, so an interrupted run resumes.
    Example: rackwise reproduce --quick
    """
    console = Console()
    if check:
        with reported():
            check_claims(console, experiment or list(DEFAULT_EXPERIMENTS), (docs or Path("docs")) / "claims.csv",
                         out or Path("results") / "reproduce-check", jobs)
        return
    from rackwise.experiments.reproduce import reproduce as run_reproduction

    folder = out or Path("results") / ("reproduce-quick" if quick else "reproduce")
    docs_dir = docs or (folder if quick else Path("docs"))
    command = "rackwise reproduce" + (" --quick" if quick else "")
    for path in experiment or ():
        command += f" --experiment {path}"
    if docs is not None:
        command += f" --docs {docs}"
    with reported(), cell_progress(console, None, "reproducing") as advance:
        result = run_reproduction(experiment or DEFAULT_EXPERIMENTS, folder, docs_dir, quick=quick, jobs=jobs,
                                  command=command, on_done=advance)
    for name, outcome in result.outcomes.items():
        console.print(f"{name}: {outcome.n_ran} cells run, {outcome.n_cached} already done, "
                      f"{outcome.n_skipped} skipped, {outcome.n_failed} failed in "
                      f"{outcome.wall_time_s:.1f} s")
    console.print(f"table: {result.markdown}; {len(result.figures)} figures under "
                  f"{result.markdown.parent / 'figures'}")
    for document in result.documents:
        console.print(f"claims table rewritten in {document}")
    if any(outcome.n_failed for outcome in result.outcomes.values()):
        raise typer.Exit(code=1)


def check_claims(console: Console, experiments: list[Path], published: Path, out: Path, jobs: int) -> None:
    """Print each claim's rerun ratio beside the published one; exit 1 unless all agree."""
    from rackwise.experiments.claims_check import check_published

    with cell_progress(console, None, "checking claims") as advance:
        rows = check_published(experiments, published, out, jobs=jobs, on_done=advance)
    table = Table("experiment", "claim", "regime", "published", "rerun", "same", box=None)
    for row in rows.itertuples():
        published_ratio = "missing" if math.isnan(row.published) else f"{row.published:.3f}"
        table.add_row(row.experiment, f"{row.policy} vs {row.baseline}",
                      f"{row.workload}, {row.cluster}, load {row.load:g}", published_ratio,
                      f"{row.rerun:.3f}", "yes" if row.agrees else "NO")
    console.print(table)
    turned = rows[rows["published_direction"] != rows["rerun_direction"]]
    differ = int((~rows["agrees"]).sum())
    console.print(f"{len(rows)} claim regimes rerun on their first seed: {len(rows) - differ} as published, "
                  f"{differ} moved, {len(turned)} turned", soft_wrap=True)
    if differ:
        console.print(f"{published} is stale: rerun `rackwise reproduce`", soft_wrap=True)
        raise typer.Exit(code=1)
