"""benchmarks/targets_table.py: the target tables of docs/benchmarks.md from bench_policies.py's rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.benchmark_scripts import load_script

targets_table = load_script("targets_table")


def _speed(policy: str, trace: str, build: str, cpu_s: float | None, **extra: object) -> dict[str, object]:
    # as `bench_policies.with_target` marks them: a row without a figure meets no target
    row: dict[str, object] = {"figure": "speed", "policy": policy, "trace": trace, "perf": "ideal",
                              "build": build, "target": 60.0, "peak_rss_mib": 250.4,
                              "meets_target": cpu_s is not None and cpu_s < 60.0, **extra}
    return row if cpu_s is None else {**row, "cpu_s": cpu_s}


def _lines(tmp_path: Path, rows: list[dict[str, object]]) -> list[Path]:
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n\n")
    return [path]


def test_speed_table_pairs_the_builds_and_says_which_meet_the_target(tmp_path: Path) -> None:
    rows = list(targets_table.read_rows(_lines(tmp_path, [
        _speed("hadar", "philly_2017", "python", 126.5), _speed("hadar", "itp_2021", "python", 110.7),
        _speed("hadar", "philly_2017", "compiled", 51.2), _speed("hadar", "itp_2021", "compiled", 48.4),
        _speed("fifo", "philly_2017", "compiled", 1.1), _speed("fifo", "itp_2021", "compiled", None,
                                                               skipped="took more than 1200 s"),
        # a first-N run carries no target: not a full-trace figure
        {"figure": "speed", "policy": "gavel", "trace": "itp_2021", "perf": "ideal", "build": "compiled",
         "cpu_s": 1.0}])))
    table = targets_table.speed_table(rows)
    assert table[2:] == [
        "| fifo | — / 1.10 | — / took more than 1200 s | — / 250 | — / no |",
        "| hadar | 126.50 / 51.20 | 110.70 / 48.40 | 250 / 250 | no / yes |"]


def test_network_table_shows_the_ratio_of_each_build_and_marks_those_over(tmp_path: Path) -> None:
    common = {"figure": "network-ratio", "policy": "fifo", "target": 2.0, "n_steps_ideal": 126341,
              "n_steps_network": 128935, "mean_pending_ideal": 185.1, "mean_pending_network": 20415.6}
    rows = [{**common, "trace": "itp_2021", "build": "compiled", "cpu_s_ideal": 1.0, "cpu_s_network": 2.57,
             "cpu_ratio": 2.57, "meets_target": False},
            {**common, "trace": "philly_2017", "build": "compiled", "cpu_s_ideal": 1.09, "cpu_s_network": 2.0,
             "cpu_ratio": 1.83, "meets_target": True},
            {**common, "trace": "philly_2017", "build": "python", "meets_target": False,
             "skipped": "took more than 600 s"}]
    assert targets_table.network_table(rows)[2:] == [
        "| fifo | philly_2017 | took more than 600 s | 1.09 / 2.00 (1.83x) | 126,341 / 128,935 | 8.6 / 15.5 "
        "| 185.1 / 20,415.6 |",
        "| fifo | itp_2021 | — | 1.00 / 2.57 (2.57x, over) | 126,341 / 128,935 | 7.9 / 19.9 | 185.1 / 20,415.6 |"]


def test_decision_table_orders_by_target_and_names_a_hash_once_when_the_builds_agree() -> None:
    def row(policy: str, build: str, target: float, digest: str) -> dict[str, object]:
        return {"figure": "decision", "policy": policy, "build": build, "target": target,
                "decision_ms_best": 1.5, "decision_ms_median": 2.0, "n_started": 836,
                "decisions_sha256": digest}

    rows = [row("gavel", "python", 1000.0, "aa"), row("gavel", "compiled", 1000.0, "bb"),
            row("sjf", "compiled", 50.0, "cc"), row("sjf", "python", 50.0, "cc")]
    assert targets_table.decision_table(rows)[2:] == [
        "| sjf | 50 | 1.50 / 2.00 | 1.50 / 2.00 | 836 | cc |",
        "| gavel | 1,000 | 1.50 / 2.00 | 1.50 / 2.00 | 836 | aa / bb |"]


def test_no_rows_of_a_figure_make_no_table() -> None:
    assert targets_table.speed_table([]) == targets_table.network_table([]) == []
    assert targets_table.decision_table([]) == targets_table.process_lines([]) == []


def test_a_line_that_is_not_json_names_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"figure": "speed"}\nnot json\n')
    with pytest.raises(SystemExit, match=r"rows.jsonl:2: not a JSON line"):
        list(targets_table.read_rows([path]))


def test_linearity_table_names_each_window_and_marks_a_ratio_over_twelve() -> None:
    def row(trace: str, build: str, start_s: float | None, large: float) -> dict[str, object]:
        return {"figure": "linearity", "policy": "asrpt", "trace": trace, "build": build, "start_s": start_s,
                "cpu_s_small": 0.5, "cpu_s_large": large, "cpu_ratio": round(large / 0.5, 2),
                "target": 12.0, "meets_target": large / 0.5 < 12.0}

    rows = [row("itp_2021", "compiled", 101017.0, 7.0), row("philly_2017", "compiled", None, 5.0),
            row("philly_2017", "python", None, 5.5)]
    table = targets_table.linearity_table(rows)
    assert table[0] == ("| policy | philly_2017: Python | philly_2017: compiled | itp_2021 from 101,017 s: Python "
                        "| itp_2021 from 101,017 s: compiled |")
    assert table[2] == "| asrpt | 0.50 / 5.50 (11.00x) | 0.50 / 5.00 (10.00x) | — | 0.50 / 7.00 (14.00x, over) |"


def test_process_line_gives_the_median_and_every_run() -> None:
    rows = [{"figure": "process", "policy": "fifo", "trace": "philly_2017", "build": "compiled",
             "wall_s_median": 1.92, "wall_s_runs": [1.95, 1.92, 1.9], "target": 2.0, "meets_target": True},
            {"figure": "process", "policy": "fifo", "trace": "philly_2017", "build": "python",
             "error": "exit code 1"}]
    assert targets_table.process_lines(rows) == [
        "- fifo on philly_2017, compiled: median 1.920 s wall of 1.950, 1.920, 1.900 (target 2 s: yes)",
        "- fifo on philly_2017, python: exit code 1"]


def test_a_table_has_columns_for_the_builds_it_has_rows_of() -> None:
    rows = [_speed("fifo", trace, "compiled", 1.0) for trace in ("philly_2017", "itp_2021")]
    table = targets_table.speed_table(rows)
    assert table[0] == ("| policy | philly_2017, CPU s: compiled | itp_2021, CPU s: compiled "
                        "| peak RSS on philly_2017, MiB: compiled | under 60 s on both: compiled |")
    assert table[2] == "| fifo | 1.00 | 1.00 | 250 | yes |"
