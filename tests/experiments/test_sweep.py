"""Sweeps: the same table in one process or many, finished cells never run twice, bad input writes nothing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer
from tests.experiments.conftest import EXPERIMENTS
from typer.testing import CliRunner

from rackwise.experiments import load_experiment, plan, run_cells
from rackwise.experiments.results import cell_path

SMOKE = EXPERIMENTS / "smoke.yaml"


def smoke_cells() -> list:
    return plan(load_experiment(SMOKE), str(SMOKE))


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """Everything but the wall time, which no two runs share."""
    return frame.drop(columns=["wall_time_s"])


def test_processes_give_the_serial_table(tmp_path: Path) -> None:
    cells = smoke_cells()
    serial = run_cells(cells, tmp_path / "serial", jobs=1)
    parallel = run_cells(cells, tmp_path / "parallel", jobs=2)
    assert serial.n_ran == parallel.n_ran == len(cells) == 16
    written = pd.read_parquet(parallel.path)
    pd.testing.assert_frame_equal(comparable(pd.read_parquet(serial.path)), comparable(written))
    assert len(written) == len(cells) and (written["status"] == "ok").all()
    assert list(written["key"]) == [cell.key for cell in cells]
    # the figures are there, and the load axis changes them
    assert written["avg_jct_s"].notna().all() and (written["n_jobs"] == 60).all()
    itp = written[(written["workload"] == "itp") & (written["seed"] == 0) & (written["policy"] == "fifo")]
    assert itp.set_index("load")["avg_queueing_s"][2.0] > itp.set_index("load")["avg_queueing_s"][1.0]


def test_rerun_skips_finished_cells(tmp_path: Path) -> None:
    cells = smoke_cells()
    first = run_cells(cells, tmp_path, jobs=1)
    seen: list[str] = []
    second = run_cells(cells, tmp_path, jobs=1, on_done=lambda cell, status: seen.append(status))
    assert (second.n_ran, second.n_cached) == (0, len(cells))
    assert seen == ["cached"] * len(cells)
    pd.testing.assert_frame_equal(comparable(first.table), comparable(second.table))
    # a lost cell file is the only cell run again
    cell_path(tmp_path, cells[5]).unlink()
    third = run_cells(cells, tmp_path, jobs=2)
    assert (third.n_ran, third.n_cached) == (1, len(cells) - 1)
    pd.testing.assert_frame_equal(comparable(first.table), comparable(third.table))


def test_unavailable_policy_is_a_skipped_row(tmp_path: Path) -> None:
    text = SMOKE.read_text().replace("policies:\n", "policies:\n  - {policy: no-such-policy-either, optional: true}\n")
    path = tmp_path / "smoke-plus.yaml"
    path.write_text(text)
    cells = plan(load_experiment(path), str(path))
    outcome = run_cells(cells, tmp_path / "out", jobs=1)
    table = outcome.table
    skipped = table[table["status"] == "skipped"]
    assert set(skipped["policy"]) == {"no-such-policy-either"}
    assert outcome.n_skipped == len(skipped) == 8
    assert skipped["reason"].str.contains("not installed").all()
    assert skipped["avg_jct_s"].isna().all()


def test_cli_sweep_writes_the_table_and_counts(cli: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["sweep", str(SMOKE), "--out", str(tmp_path), "--jobs", "1"])
    assert result.exit_code == 0, result.output
    assert "16 cells: 16 run, 0 already done" in result.output
    assert len(pd.read_parquet(tmp_path / "results.parquet")) == 16
    again = CliRunner().invoke(cli, ["sweep", str(SMOKE), "--out", str(tmp_path), "--jobs", "1"])
    assert "16 cells: 0 run, 16 already done" in again.output


def test_cli_sweep_refuses_an_unknown_key_with_exit_2(cli: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SMOKE.read_text().replace("seeds:", "sedes:"))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["sweep", str(path), "--out", str(out)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "'sedes'" in lines[0]
    assert not out.exists()


def test_reproduce_quick_writes_claims_a_table_and_charts(cli: typer.Typer, tmp_path: Path) -> None:
    from rackwise.experiments.claims import assess

    result = CliRunner().invoke(cli, ["reproduce", "--quick", "--experiment", str(SMOKE),
                                      "--out", str(tmp_path / "out"), "--docs", str(tmp_path / "docs"),
                                      "--jobs", "1"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "docs" / "results.md").read_text()
    assert f"rackwise reproduce --quick --experiment {SMOKE}" in text
    table = pd.read_parquet(tmp_path / "out" / "smoke-quick" / "results.parquet")
    assert set(table["load"]) == {2.0}  # the busiest load
    fifo = table[(table["policy"] == "fifo") & (table["workload"] == "philly")]
    assert f"| philly | 4x8 | 2 | fifo | {fifo['avg_jct_s'].mean() / 3600:.2f} |" in text
    verdicts = assess(load_experiment(SMOKE).claims, table)
    for row in verdicts.itertuples():
        assert f"| {row.workload}, 4x8, load 2 | 1 | {row.ratio_mean:.2f}x" in text
        assert row.verdict in text
    figures = tmp_path / "docs" / "figures" / "smoke-quick"
    assert (figures / "avg_jct.png").stat().st_size > 1000
    assert not (figures / "load-avg_jct.png").exists()  # one load: no curves


def test_reproduce_draws_each_figure_against_load(tmp_path: Path) -> None:
    from rackwise.experiments.reproduce import reproduce

    result = reproduce([SMOKE], tmp_path / "out", tmp_path / "docs", jobs=1)
    names = {path.name for path in result.figures}
    assert {"load-avg_jct.png", "load-p99_jct.png", "load-makespan.png"} <= names
    assert "## smoke" in result.markdown.read_text()


def test_sweep_ends_with_a_summary_that_fits_80_columns(cli: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["sweep", str(SMOKE), "--out", str(tmp_path), "--jobs", "1"],
                                env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(tmp_path / "results.parquet")
    itp = table[(table["policy"] == "tiresias-packed") & (table["workload"] == "itp")
                & (table["load"] == 2.0)]
    row = next(line for line in result.output.splitlines()
               if line.split()[:4] == ["itp", "4x8", "2", "tiresias-packed"])
    assert f"{itp['avg_jct_s'].mean() / 3600:.2f}" in row
    assert max(len(line) for line in result.output.splitlines()) <= 80
