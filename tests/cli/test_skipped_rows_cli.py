"""Rows a mapping's filters and --skip-oversized leave out: one summary line, summary.json, --strict."""

from __future__ import annotations

import json
from pathlib import Path

from pod_trace import write_pod_trace
from typer.testing import CliRunner

from rackwise.cli import app

RUNNER = CliRunner()

TRACE = ("id,submitted,ended,gpus,state\n"
         "a,0,100,1,done\n"
         "b,10,50,0,done\n"
         "c,20,80,2,killed\n"
         "d,30,90,64,done\n"
         "e,40,300,4,done\n")
def test_skipped_rows_are_printed_and_saved(tmp_path: Path) -> None:
    trace, mapping = write_pod_trace(tmp_path, TRACE)
    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["simulate", "--trace-file", str(trace), "--mapping", str(mapping),
                                 "--nodes", "2", "--skip-oversized", "--out", str(out),
                                 "--table-format", "csv"])
    assert result.exit_code == 0, result.output
    assert "skipped 3 rows (zero_gpus 1, status 1, oversized 1)" in " ".join(result.output.split())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped_rows"] == {"zero_gpus": 1, "status": 1, "oversized": 1}
    n_rows = TRACE.count("\n") - 1
    assert summary["figures"]["n_jobs"] + sum(summary["skipped_rows"].values()) == n_rows


def test_strict_refuses_the_first_skipped_row(tmp_path: Path) -> None:
    trace, mapping = write_pod_trace(tmp_path, TRACE)
    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["simulate", "--trace-file", str(trace), "--mapping", str(mapping),
                                 "--strict", "--out", str(out)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "pods.csv:3" in lines[0] and "gpus" in lines[0]
    assert not out.exists()
