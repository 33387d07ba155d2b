"""``rackwise serve`` with the in-process fake backend (the Slurm path is in test_slurm.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import typer
from typer.testing import CliRunner

from rackwise.cli.serve import serve

app = typer.Typer()
app.command()(serve)


def test_fake_backend_replays_a_trace_and_logs_every_decision(tmp_path: Path) -> None:
    log, records = tmp_path / "decisions.jsonl", tmp_path / "records.csv"
    result = CliRunner().invoke(app, [
        "--backend", "fake", "--policy", "fifo", "--submit-trace", "philly_2017", "--first-n", "25",
        "--max-gpus", "16", "--decision-log", str(log), "--records-out", str(records)])
    assert result.exit_code == 0, result.output
    decisions = [json.loads(line) for line in log.read_text().splitlines()]
    frame = pd.read_csv(records)
    assert len(frame) == 25 and frame["job_id"].is_unique
    assert sorted(d["job_id"] for d in decisions) == sorted(frame["job_id"].astype(str))
    assert all(d["ok"] and d["action"] == "start" and d["nodes"] for d in decisions)


def test_unknown_backend_is_a_one_line_error() -> None:
    result = CliRunner().invoke(app, ["--backend", "nomad"])
    assert result.exit_code == 2
    assert "unknown backend 'nomad'" in result.output
