"""``rackwise forecast`` and ``rackwise simulate --forecast-at``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import typer
from typer.testing import CliRunner

from rackwise.cli import simulate
from rackwise.cli.forecast import forecast
from rackwise.engine.snapshot import ClusterSnapshot, save

app = typer.Typer()
app.command("forecast")(forecast)
app.command("simulate")(simulate.simulate)
runner = CliRunner()


def test_json_from_a_snapshot_file(snapshot: ClusterSnapshot, tmp_path: Path) -> None:
    path = save(snapshot, tmp_path / "snap.json")
    result = runner.invoke(app, ["forecast", "--snapshot", str(path), "--json", "--samples", "4",
                                 "--workers", "1"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    pending = [job for job in data["jobs"] if job["status"] == "pending"]
    assert len(pending) == len(snapshot.pending) and data["n_samples"] == 4
    starts = [job["start_s"] for job in pending]
    assert starts == sorted(starts)
    assert all(job["start_p10_s"] <= job["start_p90_s"] for job in pending)


def test_table_is_sorted_and_names_nodes(snapshot: ClusterSnapshot, tmp_path: Path) -> None:
    path = save(snapshot, tmp_path / "snap.json")
    result = runner.invoke(app, ["forecast", "--snapshot", str(path), "--policy", "tiresias"])
    assert result.exit_code == 0, result.output
    assert "tiresias on" in result.output and "pending" in result.output and "n0" in result.output


def test_bad_snapshot_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"format": "rackwise-snapshot/1", "taken_at_s": 0}')
    out = tmp_path / "copy.json"
    result = runner.invoke(app, ["forecast", "--snapshot", str(path), "--save-snapshot", str(out)])
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert not out.exists()


def test_unreachable_slurm(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm clients at all
    result = runner.invoke(app, ["forecast", "--backend", "slurm"])
    assert result.exit_code == 2
    assert "cannot read the slurm cluster" in result.output


def test_simulate_forecast_at_writes_predicted_and_actual(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", "--trace", "philly_2017", "--first-n", "300",
                                 "--nodes", "8", "--forecast-at", "1700000", "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out / "forecast.parquet")
    assert set(frame["taken_at_s"]) == {1700000.0}
    pending = frame[frame["status"] == "pending"]
    assert len(pending) > 0 and pending["actual_start_s"].notna().all()
    # FIFO without backfill: later arrivals never pass a queued job, so the order holds
    order_pred = pending.sort_values(["predicted_start_s", "job_id"])["job_id"].tolist()
    order_real = pending.sort_values(["actual_start_s", "job_id"])["job_id"].tolist()
    assert order_pred == order_real
