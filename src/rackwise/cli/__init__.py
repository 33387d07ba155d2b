"""The ``rackwise`` command line: parse flags, call the library, print the result.

Each command group lives in its own module; this one only assembles them
and turns rackwise's named errors into a one-line message and exit code 2.
"""

from __future__ import annotations

import atexit
import gc
import os
from importlib.metadata import PackageNotFoundError, version

# One BLAS thread unless the user asks for more, set before numpy loads OpenBLAS: rackwise's
# arrays are small, so OpenBLAS's other threads would only spin after starting (about 0.2 of
# the 2 CPU s of a FIFO run on philly_2017, on 2 cores), and sweeps run a process per core.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from typing import Annotated

import typer

from rackwise import is_compiled
from rackwise.cli import compare, forecast, policies, report, reproduce, serve, simulate, sweep, traces, train

app = typer.Typer(
    name="rackwise",
    help="Schedule deep-learning training jobs on GPU clusters, and simulate schedulers on real traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help wraps flags and text to any width; the boxed help cut long flags at 80 columns.
    rich_markup_mode=None,
)


# When a command is over, the interpreter's shutdown collections would walk every object
# left only to free it anyway (0.08-0.12 s after a full-trace run, on a busy 2-core
# machine); frozen, they are freed without that walk. Handlers run before those collections.
atexit.register(gc.freeze)


def _print_version(requested: bool) -> None:
    if not requested:
        return
    try:
        number = version("rackwise")
    except PackageNotFoundError:  # run from a source tree that was never installed
        number = "unknown"
    print(f"rackwise {number}" + (" (compiled)" if is_compiled() else ""))
    raise typer.Exit()


@app.callback()
def main(
    show_version: Annotated[bool, typer.Option(
        "--version", help="Print rackwise's version and exit.", callback=_print_version,
        is_eager=True)] = False,
) -> None:
    """Schedule deep-learning training jobs on GPU clusters, and simulate schedulers on real traces."""


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
