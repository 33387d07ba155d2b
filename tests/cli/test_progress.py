"""Progress in a log: plain lines, at most every LOG_EVERY_S seconds, with the time left."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from rackwise.cli import progress
from rackwise.cli.progress import ProgressReport


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_log_gets_a_plain_line_every_interval_and_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    out = io.StringIO()
    report = ProgressReport(Console(file=out, force_terminal=False, width=200), "simulating",
                            "jobs finished")
    for second, done in ((0.5, 10), (5.0, 100), (12.0, 250), (15.0, 300), (30.0, 800), (31.0, 1000)):
        clock.now = second
        report(done, 1000)
    assert out.getvalue().splitlines() == [
        "simulating: 250/1,000 jobs finished, 0:00:12 elapsed, about 0:00:36 left",
        "simulating: 800/1,000 jobs finished, 0:00:30 elapsed, about 0:00:08 left",
        "simulating: 1,000/1,000 jobs finished, 0:00:31 elapsed",
    ]


def test_a_count_without_a_total_has_no_time_left() -> None:
    report = ProgressReport(Console(file=io.StringIO()), "reproducing", "cells")
    assert report.line(7, None, 65.0) == "reproducing: 7 cells, 0:01:05 elapsed"


def test_work_done_within_a_second_reports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    out = io.StringIO()
    report = ProgressReport(Console(file=out, force_terminal=False), "simulating", "jobs finished")
    clock.now = 0.4
    report(5, 10)
    clock.now = 0.9
    report(10, 10)
    assert out.getvalue() == ""
