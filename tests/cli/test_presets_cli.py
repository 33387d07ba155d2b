"""Each --format preset's sample simulates under fifo and tiresias from one command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from preset_samples import SAMPLES, n_records
from rackwise.cli import app

RUNNER = CliRunner(env={"COLUMNS": "200"})


@pytest.mark.parametrize("policy", ["fifo", "tiresias"])
@pytest.mark.parametrize("preset", SAMPLES)
def test_sample_simulates(preset: str, policy: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["simulate", "--trace-file", str(SAMPLES[preset]),
                                 "--format", preset, "--policy", policy, "--nodes", "2",
                                 "--out", str(out), "--table-format", "csv"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    n_jobs = summary["figures"]["n_jobs"]
    assert n_jobs >= 1
    assert n_jobs + sum(summary["skipped_rows"].values()) == n_records(preset, SAMPLES[preset])
    assert summary["config"]["workload"]["format"] == preset


def test_rounded_up_shares_are_reported(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["simulate", "--trace-file", str(SAMPLES["pai"]), "--format",
                                 "pai", "--nodes", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "rounded up 1 fractional GPU counts to whole GPUs" in " ".join(result.output.split())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounded_up_rows"] == 1


def test_describe_a_preset_file() -> None:
    result = RUNNER.invoke(app, ["traces", "describe", str(SAMPLES["sacct"]), "--format", "sacct"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("\u2502", " ").split())
    assert "n_jobs 3" in text
    assert "skipped_rows job_step: 3, zero_gpus: 2, missing_End: 1, zero_duration: 1" in text


def test_an_unknown_format_is_named(tmp_path: Path) -> None:
    result = RUNNER.invoke(app, ["simulate", "--trace-file", str(SAMPLES["sacct"]),
                                 "--format", "sact", "--out", str(tmp_path / "run")])
    assert result.exit_code != 0
    assert "sacct" in result.output
