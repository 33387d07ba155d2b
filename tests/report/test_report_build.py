"""Building the report: content, determinism, atomic writing and the command line."""

from __future__ import annotations

import base64
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from handmade_runs import write_run
from typer.testing import CliRunner

import rackwise.report
from rackwise.cli import report as report_cli
from rackwise.errors import InputError
from rackwise.report import html
from rackwise.report.build import build_report, make_page

FIGURE_ANCHORS = ["jct-cdf", "queue-cdf", "utilisation", "queue-length", "bars"]


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.callback()(lambda: None)  # a group, so the command is called by its name
    app.command("report")(report_cli.report)
    return app


def _figures(page: html.Page) -> list[html.FigureBlock]:
    return [s for s in page.sections if isinstance(s, html.FigureBlock)]


def _table(page: html.Page, anchor: str) -> html.TableBlock:
    return next(s for s in page.sections if isinstance(s, html.TableBlock) and s.anchor == anchor)


def test_page_from_real_runs(compare_dir: Path) -> None:
    page = make_page(compare_dir)
    assert [s.anchor for s in page.sections] == ["verdict", "summary", "ratios", *FIGURE_ANCHORS]
    for figure in _figures(page):
        assert figure.alt and figure.how_to_read and figure.caption
        assert figure.src.startswith("data:image/png;base64,")
        assert base64.b64decode(figure.src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    summary = _table(page, "summary")
    assert [row[0].text for row in summary.rows] == ["fifo", "sjf"]
    assert [row[1].text for row in summary.rows] == ["2", "2"]
    ratios = _table(page, "ratios")
    assert [c.text for c in ratios.rows[0][1:]] == ["1.00×"] * 4  # fifo against itself
    assert [b.title for b in page.configs] == ["fifo: 2 runs", "sjf: 2 runs"]
    assert '"seed": [\n    0,\n    1\n  ]' in page.configs[0].config_json


def test_summary_cells_are_means_with_t_intervals(tmp_path: Path) -> None:
    for seed, hours in enumerate([1.0, 2.0, 3.0]):
        write_run(tmp_path / f"fifo-{seed}", "fifo", seed, {"avg_jct_s": hours * 3600})
    write_run(tmp_path / "sjf-0", "sjf", 0, {"avg_jct_s": 3600.0, "utilisation": 0.25})
    page = make_page(tmp_path)
    rows = {row[0].text: [c.text for c in row] for row in _table(page, "summary").rows}
    # mean 2 h; s = 1 h; t(0.975, 2) = 4.302653; half-width = 4.302653 / sqrt(3) = 2.484138 h
    assert rows["fifo"][3] == "2.00 ± 2.48"
    assert rows["sjf"][3] == "1.00"  # one seed: no interval
    ratios = {row[0].text: row[1:] for row in _table(page, "ratios").rows}
    assert [c.text for c in ratios["sjf"]] == ["0.50×", "1.00×", "1.00×", "0.50×"]
    assert [c.tone for c in ratios["sjf"]] == ["better", "", "", "worse"]
    verdict = {(row[0].text, row[1].text): [c.text for c in row[2:]]
               for row in _table(page, "verdict").rows}
    # sjf's one seed has the lower mean JCT; fifo is the runner-up; one seed: no interval to compare
    assert verdict[("all runs", "avg JCT")] == ["sjf", "1.00 h", "0.50×", "1", "fifo", "n/a"]
    assert any("One seed only for sjf" in note for note in page.notes)
    bars = next(f for f in _figures(page) if f.anchor == "bars")
    assert "groups with one seed have none" in bars.caption


def test_baseline_changes_the_ratios(tmp_path: Path) -> None:
    write_run(tmp_path / "a", "fifo", 0, {"avg_jct_s": 100.0})
    write_run(tmp_path / "b", "sjf", 0, {"avg_jct_s": 50.0})
    ratios = _table(make_page(tmp_path, baseline="sjf"), "ratios")
    assert ratios.heading == "Against the baseline (sjf)"
    assert [row[1].text for row in ratios.rows] == ["2.00×", "1.00×"]


def test_single_seed_caption(tmp_path: Path) -> None:
    write_run(tmp_path / "a", "fifo", 0)
    page = make_page(tmp_path / "a")
    assert [s.anchor for s in page.sections] == ["summary", *FIGURE_ANCHORS]
    bars = next(f for f in _figures(page) if f.anchor == "bars")
    assert "one seed, so no confidence interval is drawn" in bars.caption


def test_sweep_table_gives_summary_and_bars_only(tmp_path: Path) -> None:
    pd.DataFrame({"policy": ["fifo", "sjf"], "seed": [0, 0], "avg_jct_s": [10.0, 5.0],
                  "p99_jct_s": [20.0, 9.0], "makespan_s": [30.0, 30.0], "utilisation": [0.5, 0.6],
                  "n_jobs": [3, 3]}).to_parquet(tmp_path / "results.parquet")
    page = make_page(tmp_path)
    assert [s.anchor for s in page.sections] == ["verdict", "summary", "ratios", "bars"]
    assert any("without run folders" in note for note in page.notes)


def test_same_input_gives_identical_png_report(compare_dir: Path, compare_report: Path,
                                                tmp_path: Path) -> None:
    again = build_report(compare_dir, tmp_path / "again.html")
    assert again.read_bytes() == compare_report.read_bytes()


def test_same_input_gives_identical_svg_report(tmp_path: Path) -> None:
    write_run(tmp_path / "runs" / "a", "fifo", 0)
    write_run(tmp_path / "runs" / "b", "sjf", 0, {"avg_jct_s": 50.0})
    first = build_report(tmp_path / "runs", tmp_path / "a.html", image_format="svg")
    second = build_report(tmp_path / "runs", tmp_path / "b.html", image_format="svg")
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text().count("data:image/svg+xml;base64,") == 5


def test_html_is_self_contained_and_accessible(compare_report: Path) -> None:
    text = compare_report.read_text(encoding="utf-8")
    assert "<script" not in text and "<link" not in text and "url(" not in text
    assert all(src.startswith("data:image/") for src in re.findall(r'src="([^"]*)"', text))
    assert all(href.startswith("#") for href in re.findall(r'href="([^"]*)"', text))
    images = re.findall(r"<img [^>]*>", text)
    assert len(images) == 5
    assert all(re.search(r'alt="[^"]{40,}"', tag) for tag in images)
    assert text.count("How to read:") == 9  # 3 tables, 5 figures, the configuration
    assert '<html lang="en">' in text and text.count("<h1>") == 1


def test_large_runs_give_a_small_report(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    for policy in ("fifo", "sjf"):
        folder = write_run(tmp_path / "big" / policy, policy, 0, tables=False)
        pd.DataFrame({"jct_s": rng.lognormal(8, 2, 82_000),
                      "queueing_delay_s": rng.lognormal(6, 3, 82_000)}
                     ).to_parquet(folder / "jobs.parquet")
        steps = np.sort(rng.uniform(0, 1e7, 150_000))
        pd.DataFrame({"time": steps, "busy_gpus": rng.integers(0, 5, steps.size),
                      "n_pending": rng.integers(0, 1000, steps.size)}
                     ).to_parquet(folder / "timeline.parquet")
    out = build_report(tmp_path / "big", tmp_path / "r.html")
    assert out.stat().st_size < 700_000  # bounded by the plots, not by 82k jobs


def test_bad_input_leaves_the_old_report_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out" / "report.html"
    out.parent.mkdir()
    out.write_text("old")
    folder = write_run(tmp_path / "r", "fifo", 0)
    (folder / "summary.json").write_text("{")
    with pytest.raises(InputError, match=r"summary\.json:1: corrupt JSON"):
        build_report(folder, out)
    assert out.read_text() == "old"
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.html"]


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    write_run(tmp_path / "r", "fifo", 0)
    out = tmp_path / "out" / "report.html"

    def broken(page: html.Page) -> str:
        return "\udcff"  # an unpaired surrogate: utf-8 cannot encode it, mid-write

    monkeypatch.setattr(html, "render", broken)
    with pytest.raises(UnicodeEncodeError):
        build_report(tmp_path / "r", out)
    assert list(out.parent.iterdir()) == []


def test_cli_writes_the_report(compare_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(_cli(), ["report", str(compare_dir), "--out", str(out),
                                         "--baseline", "sjf"])
    assert result.exit_code == 0, result.output
    assert "report written to" in result.output and out.is_file()
    assert "Against the baseline (sjf)" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize("args, message", [
    (["report", "{tmp}/nope"], "{tmp}/nope: no such folder"),
    (["report", "{tmp}", "--baseline", "fifoo"], "no runs of policy 'fifoo'"),
    (["report", "{tmp}", "--image-format", "gif"], "unknown image format 'gif'"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    write_run(tmp_path / "fifo-s0", "fifo", 0)
    out = tmp_path / "out.html"
    result = CliRunner().invoke(_cli(), [a.format(tmp=tmp_path) for a in args] + ["--out", str(out)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert message.format(tmp=tmp_path) in lines[0]
    assert not out.exists()


def test_cli_without_matplotlib_names_the_extra(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    write_run(tmp_path / "r", "fifo", 0)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    # Forget the report modules, as in a fresh process, so that they import matplotlib anew.
    for name in ("plots", "build"):
        monkeypatch.delitem(sys.modules, f"rackwise.report.{name}", raising=False)
        monkeypatch.delattr(rackwise.report, name, raising=False)
    result = CliRunner().invoke(_cli(), ["report", str(tmp_path / "r"),
                                         "--out", str(tmp_path / "x.html")])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: the report needs matplotlib: "
                                     "pip install 'rackwise[report]'")
    assert not (tmp_path / "x.html").exists()


def test_out_must_not_be_a_folder(tmp_path: Path) -> None:
    write_run(tmp_path / "r", "fifo", 0)
    with pytest.raises(InputError, match="is a folder; give a file name"):
        build_report(tmp_path / "r", tmp_path)


def test_the_verdict_says_whether_the_best_is_clearly_ahead(tmp_path: Path) -> None:
    for seed in range(3):
        write_run(tmp_path / f"fifo-{seed}", "fifo", seed, {"avg_jct_s": 3600.0 * (2.0 + 0.01 * seed)})
        write_run(tmp_path / f"sjf-{seed}", "sjf", seed, {"avg_jct_s": 3600.0 * (1.0 + 0.01 * seed)})
        write_run(tmp_path / f"srtf-{seed}", "srtf", seed, {"avg_jct_s": 3600.0 * (1.0 + 0.02 * seed)})
    rows = {row[1].text: [c.text for c in row[2:]] for row in _table(make_page(tmp_path), "verdict").rows}
    assert rows["avg JCT"][0] == "sjf" and rows["avg JCT"][4] == "srtf"
    assert rows["avg JCT"][5] == "no"  # sjf's and srtf's intervals overlap
    fifo_only = tmp_path / "two"
    for seed in range(3):
        write_run(fifo_only / f"fifo-{seed}", "fifo", seed, {"avg_jct_s": 3600.0 * (2.0 + 0.01 * seed)})
        write_run(fifo_only / f"sjf-{seed}", "sjf", seed, {"avg_jct_s": 3600.0 * (1.0 + 0.01 * seed)})
    rows = {row[1].text: [c.text for c in row[2:]] for row in _table(make_page(fifo_only), "verdict").rows}
    assert rows["avg JCT"][0] == "sjf" and rows["avg JCT"][2] == "0.50×" and rows["avg JCT"][5] == "yes"
