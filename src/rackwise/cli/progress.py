"""Progress of a long command, in a terminal or in a log.

In a terminal a bar shows what is done, the time spent and the time left;
it appears only once the work has taken more than a second, and goes away
when it ends. When the output is piped or logged, a plain line is printed
at most every `LOG_EVERY_S` seconds instead, with the same figures.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

LOG_EVERY_S = 10.0
SHOW_AFTER_S = 1.0


class ProgressReport:
    """Call with ``(done, total, note)`` as work advances; `close` when it ends.

    Args:
        console: Where to report.
        what: What is being done ("simulating").
        unit: What is counted ("jobs finished").
    """

    def __init__(self, console: Console, what: str, unit: str) -> None:
        self.console = console
        self.what = what
        self.unit = unit
        self.started = time.monotonic()
        self.last_line = self.started
        self.bar: Progress | None = None
        self.task = TaskID(0)

    def __call__(self, done: int, total: int | None, note: str = "") -> None:
        now = time.monotonic()
        if now - self.started < SHOW_AFTER_S:  # quick work needs no report
            return
        if self.console.is_terminal:
            self._draw(done, total, note)
        elif now - self.last_line >= LOG_EVERY_S or (total is not None and done >= total):
            self.last_line = now
            self.console.print(self.line(done, total, now - self.started), highlight=False)

    def line(self, done: int, total: int | None, elapsed_s: float) -> str:
        """The plain report: counts, time spent and, once something is done, time left."""
        counted = f"{done:,}/{total:,}" if total is not None else f"{done:,}"
        text = f"{self.what}: {counted} {self.unit}, {timedelta(seconds=round(elapsed_s))} elapsed"
        if total is not None and 0 < done < total:
            left_s = elapsed_s * (total - done) / done
            text += f", about {timedelta(seconds=round(left_s))} left"
        return text

    def _draw(self, done: int, total: int | None, note: str) -> None:
        if self.bar is None:
            self.bar = Progress(TextColumn(self.what), BarColumn(), MofNCompleteColumn(),
                                TextColumn(self.unit), TimeElapsedColumn(), TimeRemainingColumn(),
                                TextColumn("{task.description}"), console=self.console,
                                transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=total)
        self.bar.update(self.task, completed=done, total=total, description=note)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@contextmanager
def progress_report(console: Console, what: str, unit: str) -> Iterator[ProgressReport]:
    """A `ProgressReport` that is closed however the block ends."""
    report = ProgressReport(console, what, unit)
    try:
        yield report
    finally:
        report.close()
