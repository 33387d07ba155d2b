"""The ``rackwise`` command line: parse flags, call the library, print the result.

Each command group lives in its own module; this one only assembles them
and turns rackwise's named errors into a one-line message and exit code 2.
"""

from __future__ import annotations

import typer

from rackwise.cli import compare, forecast, policies, report, reproduce, serve, simulate, sweep, traces, train

app = typer.Typer(
    name="rackwise",
    help="Schedule deep-learning training jobs on GPU clusters, and simulate schedulers on real traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("simulate")(simulate.simulate)
app.command("compare")(compare.compare)
app.command("sweep")(sweep.sweep)
app.command("report")(report.report)
app.command("reproduce")(reproduce.reproduce)
app.command("forecast")(forecast.forecast)
app.command("policies")(policies.list_policies)
app.command("serve")(serve.serve)
app.command("train-marl")(train.train_marl)
app.add_typer(traces.app, name="traces")


def _mount_optional() -> None:
    try:
        from rackwise.cli import perf
    except ImportError:  # the performance-model commands are not installed
        return
    app.add_typer(perf.app, name="perf")


_mount_optional()

__all__ = ["app"]
