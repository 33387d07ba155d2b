"""``rackwise sweep``: run an experiment grid in local processes or on Ray, resumably."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from rackwise.cli.errors import reported
from rackwise.cli.progress import progress_report

if TYPE_CHECKING:  # the experiment machinery is imported when a command needs it
    import pandas as pd

    from rackwise.experiments import Cell
    from rackwise.experiments.runner import OnDone


@contextmanager
def cell_progress(console: Console, total: int | None, what: str) -> Iterator[OnDone]:
    """Progress over cells (a bar, or plain lines in a log); yields the callback that advances it."""
    done = 0
    with progress_report(console, what, "cells") as report:

        def advance(cell: Cell, status: str) -> None:
            nonlocal done
            done += 1
            report(done, total, f"{cell.policy_label} on {cell.workload_label}: {status}")

        yield advance


def print_sweep_summary(console: Console, mean: pd.DataFrame, baseline: str | None) -> None:
    """Mean figures over seeds, one row per regime and policy, narrow enough for 80 columns."""
    if mean.empty:
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  caption="means over seeds" + (f"; last column: avg JCT over {baseline}'s"
                                                if baseline else ""))
    for heading in ("workload", "cluster", "load", "policy", "avg JCT\n(h)", "p99 JCT\n(h)",
                    "makespan\n(h)", *(["vs\nbaseline"] if baseline else [])):
        table.add_column(heading, justify="left" if heading in ("workload", "cluster", "policy")
                         else "right", overflow="fold")
    for row in mean.itertuples():
        cells = [row.workload, row.cluster, f"{row.load:g}", row.policy,
                 f"{row.avg_jct_s / 3600:.2f}", f"{row.p99_jct_s / 3600:.1f}",
                 f"{row.makespan_s / 3600:.1f}"]
        if baseline:
            cells.append(f"{row.jct_vs_baseline:.2f}x")
        table.add_row(*(str(cell) for cell in cells))
    console.print(table)


def sweep(
    experiment: Annotated[Path, typer.Argument(help="Experiment file (YAML), e.g. experiments/delay.yaml.")],
    out: Annotated[Path | None, typer.Option(help="Results folder (default results/sweep-NAME).")] = None,
    jobs: Annotated[int, typer.Option(help="Cells run at once (local processes, or CPUs of a private Ray).")] = 2,
    ray: Annotated[bool, typer.Option("--ray", help="Run on a private local Ray instance.")] = False,
    ray_address: Annotated[str | None, typer.Option(
        help="Run on the Ray cluster at this address (auto, HOST:PORT).")] = None,
    fresh: Annotated[bool, typer.Option(help="Run every cell again, ignoring finished ones.")] = False,
) -> None:
    """Run every cell of an EXPERIMENT grid and gather one Parquet table.

    Finished cells are kept under OUT/cells/ and not run again.
    Example: rackwise sweep experiments/delay.yaml --jobs 2
    """
    from rackwise.experiments import load_experiment, plan, run_cells
    from rackwise.experiments.reproduce import summary_table

    console = Console()
    with reported():
        spec = load_experiment(experiment)
        cells = plan(spec, str(experiment))
        folder = out or Path("results") / f"sweep-{spec.name}"
        with cell_progress(console, len(cells), spec.name) as advance:
            outcome = run_cells(cells, folder, jobs=jobs, use_ray=ray, ray_address=ray_address,
                                resume=not fresh, on_done=advance)
    print_sweep_summary(console, summary_table(outcome.table, spec.baseline), spec.baseline)
    reasons = {cell.policy_label: cell.skip_reason for cell in cells if cell.skip_reason}
    for label, reason in sorted(reasons.items()):
        console.print(f"skipped {label}: {reason}")
    failed = outcome.table[outcome.table["status"] == "failed"]
    for _, row in failed.iterrows():
        console.print(f"failed {row['policy']} on {row['workload']} ({row['cluster']}, load "
                      f"{row['load']:g}, seed {row['seed']}): {row['reason']}")
    console.print(f"{len(cells)} cells: {outcome.n_ran} run, {outcome.n_cached} already done, "
                  f"{outcome.n_skipped} skipped, {outcome.n_failed} failed "
                  f"in {outcome.wall_time_s:.1f} s; table in {outcome.path}")
    if outcome.n_failed:
        raise typer.Exit(code=1)
