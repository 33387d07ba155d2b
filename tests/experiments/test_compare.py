"""``rackwise compare``: ratios printed against the baseline match the written figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

ARGS = ["compare", "--trace", "itp_2021", "--start-s", "2024521", "--first-n", "40", "--nodes", "2",
        "--nodes-per-rack", "1", "--skip-oversized", "--perf", "network", "--jobs", "1",
        "--policies", "fifo,tiresias,sjf", "--baseline", "fifo"]


@pytest.mark.parametrize("columns", ["220", "80"])
def test_compare_prints_ratios_to_the_baseline(cli: typer.Typer, tmp_path: Path, columns: str) -> None:
    result = CliRunner().invoke(cli, [*ARGS, "--out", str(tmp_path)], env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    summary = pd.read_parquet(tmp_path / "summary.parquet").set_index("policy")
    assert list(summary.index) == ["fifo", "tiresias", "sjf"]
    base = summary.loc["fifo"]
    for policy in ("tiresias", "sjf"):
        line = next(row for row in result.output.splitlines() if re.search(rf"\b{policy}\b", row))
        shown = re.findall(r"(\d+\.\d\d)x", line)
        expected = [f"{summary.loc[policy, name] / base[name]:.2f}"
                    for name in ("avg_jct_s", "median_jct_s", "p99_jct_s", "avg_queueing_s",
                                 "makespan_s", "utilisation")]
        assert shown[:6] == expected
    assert "…" not in result.output  # nothing cut, even in an 80-column terminal
    assert max(len(line) for line in result.output.splitlines()) <= int(columns)
    for policy in summary.index:  # one results folder per policy, as simulate writes it
        figures = json.loads((tmp_path / policy / "summary.json").read_text())["figures"]
        assert figures["avg_jct_s"] == summary.loc[policy, "avg_jct_s"]
    payload = json.loads((tmp_path / "compare.json").read_text())
    assert payload["baseline"] == "fifo"
    assert payload["policies"]["sjf"]["ratios"]["avg_jct_s"] == summary.loc["sjf", "avg_jct_s"] / base["avg_jct_s"]


def test_compare_refuses_an_unknown_policy_with_exit_2(cli: typer.Typer, tmp_path: Path) -> None:
    args = [a if a != "fifo,tiresias,sjf" else "fifo,tiresais" for a in ARGS]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "tiresais" in result.output and "Did you mean 'tiresias'" in result.output
    assert not (tmp_path / "out").exists()


def test_compare_refuses_a_baseline_it_does_not_run(cli: typer.Typer, tmp_path: Path) -> None:
    args = [*[a if a != "--baseline" else "--baseline" for a in ARGS][:-1], "srtf"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "--baseline" in result.output
    assert not (tmp_path / "out").exists()


def test_compare_refuses_a_folder_holding_another_comparison(cli: typer.Typer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert CliRunner().invoke(cli, [*ARGS, "--out", str(out)]).exit_code == 0
    before = (out / "compare.json").read_text()
    again = CliRunner().invoke(cli, [*ARGS, "--out", str(out)])  # the same comparison may rerun
    assert again.exit_code == 0, again.output
    other = [*ARGS, "--out", str(out)]
    other[other.index("--first-n") + 1] = "30"
    refused = CliRunner().invoke(cli, other)
    assert refused.exit_code == 2
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "another --out" in lines[0]
    assert (out / "compare.json").read_text() == before
