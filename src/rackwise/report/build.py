"""From results folders to a report file: load, group, summarise, draw, write.

`build_report` is the one entry point; `make_page` does the same but
returns the page in memory (what the tests inspect).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rackwise.errors import InputError
from rackwise.report import html, plots  # plots raises MissingExtraError without matplotlib
from rackwise.report.groups import Group, baseline_of, choose_baseline, group_runs
from rackwise.report.load import load_runs, read_jobs, read_timeline
from rackwise.report.series import cdf_levels, mean_quantiles, quantiles, resample_steps, time_edges
from rackwise.report.stats import Estimate, t_interval

HOUR_S = 3600.0
DAY_S = 86400.0
TIMELINE_BINS = 2000


def build_report(results: str | Path, out: str | Path = "report.html", *,
                 baseline: str | None = None, image_format: str = "png") -> Path:
    """Write a self-contained HTML report of the runs at or below ``results``.

    Args:
        results: A results folder, or a folder of them (a comparison or a sweep).
        out: The HTML file to write; written whole or not at all.
        baseline: Policy the ratios compare against (default fifo, else the first).
        image_format: ``png`` or ``svg`` for the embedded figures.

    Returns:
        The path of the written report.

    Raises:
        InputError: bad or missing results (the message names the file).
        MissingExtraError: matplotlib is not installed.
    """
    page = make_page(results, baseline=baseline, image_format=image_format)
    return write_atomically(Path(out), html.render(page))


def write_atomically(path: Path, text: str) -> Path:
    """Write ``text`` to a temporary sibling, then rename it onto ``path``."""
    if path.is_dir():
        raise InputError("is a folder; give a file name for the report", source=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(staging, 0o644)
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    return path


# (figure key, table/plot title, scale for display, unit, lower is better)
_FIGURES = (
    ("avg_jct_s", "avg JCT", 1 / HOUR_S, "h", True),
    ("median_jct_s", "median JCT", 1 / HOUR_S, "h", True),
    ("p99_jct_s", "p99 JCT", 1 / HOUR_S, "h", True),
    ("avg_queueing_s", "avg queueing", 1 / HOUR_S, "h", True),
    ("makespan_s", "makespan", 1 / HOUR_S, "h", True),
    ("utilisation", "utilisation", 100.0, "%", False),
)
_BARS = ("avg_jct_s", "p99_jct_s", "makespan_s", "utilisation")
_RATIOS = ("avg_jct_s", "p99_jct_s", "makespan_s", "utilisation")
_VERDICTS = ("avg_jct_s", "p99_jct_s", "makespan_s")


def make_page(results: str | Path, *, baseline: str | None = None,
              image_format: str = "png") -> html.Page:
    """Everything the report shows, as a `Page` (see `build_report`)."""
    if image_format not in ("png", "svg"):
        raise InputError(f"unknown image format '{image_format}' (png or svg)", field="--image-format")
    root = Path(results)
    runs = load_runs(root)
    groups = group_runs(runs)
    base = choose_baseline(groups, baseline)
    labels = [g.label for g in groups]
    estimates = {g.label: {key: _estimate(g, key) for key, *_ in _FIGURES} for g in groups}

    def encode(fig: plots.Figure) -> str:
        return plots.encode(fig, image_format)  # type: ignore[arg-type]

    sections: list[html.FigureBlock | html.TableBlock] = []
    if len(groups) > 1:
        sections.append(_verdict_table(groups, estimates, base))
    sections.append(_summary_table(groups, estimates))
    if len(groups) > 1:
        sections.append(_ratio_table(groups, estimates, base))
    notes: list[str] = []
    if all(run.path is not None for g in groups for run in g.runs):
        sections += _distribution_sections(groups, encode)
        sections += _timeline_sections(groups, encode)
    else:
        notes.append("These runs come from a sweep table without run folders: the summary "
                     "and the bars are shown, the distributions and timelines are not.")
    sections.append(_bars_section(groups, estimates, encode))
    single = [g.label for g in groups if len(g.runs) == 1]
    if single:
        notes.append(f"One seed only for {', '.join(single)}: no confidence interval "
                     "can be given for these.")
    n_runs = sum(len(g.runs) for g in groups)
    if len(groups) <= 8:
        listed = f" ({', '.join(labels)})"
    else:  # a sweep: name its policies and count its settings, not every group
        policies = list(dict.fromkeys(g.policy for g in groups))
        n_settings = len({g.variant for g in groups})
        listed = f": {', '.join(policies)}, under {n_settings} settings"
    intro = [f"{n_runs} run{'s' if n_runs != 1 else ''} of {len(groups)} "
             f"group{'s' if len(groups) != 1 else ''}{listed}, read from {root}."]
    if len(groups) > 1:
        intro.append(f"Ratios compare each group with the baseline policy, {base}, run under "
                     "the same settings.")
    intro.append("Times are in hours unless stated.")
    return html.Page(title=f"rackwise report: {root.resolve().name}", intro=intro, notes=notes,
                     sections=sections, configs=[_config_block(g) for g in groups])


def _estimate(group: Group, key: str) -> Estimate | None:
    values = [float(run.figures[key]) for run in group.runs if key in run.figures]
    return t_interval(values) if values else None


def _fmt(estimate: Estimate | None, scale: float, unit: str) -> str:
    if estimate is None:
        return "n/a"
    digits = 1 if unit == "%" else 2
    text = f"{estimate.mean * scale:,.{digits}f}"
    if estimate.half_width is not None:
        text += f" ± {estimate.half_width * scale:,.{digits}f}"
    return text


def _verdict_table(groups: Sequence[Group], estimates: dict[str, dict[str, Estimate | None]],
                   base: str) -> html.TableBlock:
    """Per setting and headline figure: the best policy, by how much, and whether clearly."""
    headers = ["setting", "figure", "best", "mean", f"÷ {base}", "seeds", "runner-up", "clear?"]
    rows = []
    settings = list(dict.fromkeys(g.variant for g in groups))
    for variant in settings:
        here = [g for g in groups if g.variant == variant]
        setting = ", ".join(f"{k}={v}" for k, v in variant) or "all runs"
        for key in _VERDICTS:
            scale, unit, lower = next((sc, u, lo) for k, _, sc, u, lo in _FIGURES if k == key)
            scored = [(e, g) for g in here if (e := estimates[g.label][key]) is not None]
            if not scored:
                continue
            scored.sort(key=lambda pair: pair[0].mean if lower else -pair[0].mean)
            (mine, best), runner = scored[0], (scored[1] if len(scored) > 1 else None)
            reference = baseline_of(best, groups, base)
            ratio = _ratio_cell(mine, estimates[reference.label][key] if reference else None,
                                lower_better=lower)
            rows.append([html.Cell(setting), html.Cell(_title(key)), html.Cell(best.policy),
                         html.Cell(f"{_fmt(mine, scale, unit)} {unit}"), ratio,
                         html.Cell(str(len(best.runs))),
                         html.Cell(runner[1].policy if runner else "-"),
                         html.Cell(_clearly_ahead(mine, runner[0] if runner else None, lower))])
    return html.TableBlock(
        anchor="verdict", heading="Verdict", headers=headers, rows=rows,
        how_to_read=("for each setting and figure, the policy with the best mean over its seeds, "
                     f"its mean ± the 95% t-interval, its ratio to {base} under the same setting, "
                     "and the next best policy. 'yes' when the two intervals do not overlap, "
                     "'no' when they do, 'n/a' with one seed."),
        caption="Best policy per setting and figure; the tables below give every group.")


def _clearly_ahead(best: Estimate | None, runner: Estimate | None, lower_better: bool) -> str:
    if best is None or runner is None:
        return "-"
    if best.half_width is None or runner.half_width is None:
        return "n/a"
    ahead = best.high < runner.low if lower_better else best.low > runner.high
    return "yes" if ahead else "no"


def _summary_table(groups: Sequence[Group],
                   estimates: dict[str, dict[str, Estimate | None]]) -> html.TableBlock:
    headers = ["group", "seeds", "jobs"] + [f"{title} ({unit})" for _, title, _, unit, _ in _FIGURES]
    rows = []
    for group in groups:
        mine = estimates[group.label]
        jobs = _estimate(group, "n_jobs")
        row = [html.Cell(group.label), html.Cell(str(len(group.runs))),
               html.Cell(f"{jobs.mean:,.0f}" if jobs else "n/a")]
        row += [html.Cell(_fmt(mine[key], scale, unit)) for key, _, scale, unit, _ in _FIGURES]
        rows.append(row)
    return html.TableBlock(
        anchor="summary", heading="Summary", headers=headers, rows=rows,
        how_to_read=("one row per group; each figure is the mean over its seeds ± the "
                     "half-width of the 95% t-interval (no ± with a single seed)."),
        caption="Headline figures per group, from each run's summary.json.")


def _ratio_table(groups: Sequence[Group], estimates: dict[str, dict[str, Estimate | None]],
                 base: str) -> html.TableBlock:
    headers = ["group"] + [f"{_title(key)} ÷ {base}" for key in _RATIOS]
    rows = []
    for group in groups:
        reference = baseline_of(group, groups, base)
        row = [html.Cell(group.label)]
        for key in _RATIOS:
            row.append(_ratio_cell(estimates[group.label][key],
                                   estimates[reference.label][key] if reference else None,
                                   lower_better=_lower_better(key)))
        rows.append(row)
    return html.TableBlock(
        anchor="ratios", heading=f"Against the baseline ({base})", headers=headers, rows=rows,
        how_to_read=(f"each group's mean divided by {base}'s under the same settings; below 1 "
                     "means less than the baseline: better for times, worse for utilisation. "
                     "Green marks better, red worse."),
        caption=f"Ratios of means against {base} (n/a where {base} did not run the same settings).")


def _title(key: str) -> str:
    return next(title for k, title, *_ in _FIGURES if k == key)


def _lower_better(key: str) -> bool:
    return next(lower for k, *_, lower in _FIGURES if k == key)


def _ratio_cell(mine: Estimate | None, reference: Estimate | None, *, lower_better: bool) -> html.Cell:
    if mine is None or reference is None or reference.mean == 0:
        return html.Cell("n/a")
    ratio = mine.mean / reference.mean
    tone = ""
    if not np.isclose(ratio, 1.0, rtol=1e-3):
        tone = "better" if (ratio < 1.0) == lower_better else "worse"
    return html.Cell(f"{ratio:.2f}×", tone)


def _distribution_sections(groups: Sequence[Group],
                           encode: Callable[[plots.Figure], str]) -> list[html.FigureBlock]:
    levels = cdf_levels()
    jct_lines, queue_lines = [], []
    medians_jct, medians_queue = [], []
    for group in groups:
        per_run_jct, per_run_queue = [], []
        for run in group.runs:
            jobs = read_jobs(run)
            assert jobs is not None
            per_run_jct.append(quantiles(jobs["jct_s"].to_numpy(), levels))
            per_run_queue.append(quantiles(jobs["queueing_delay_s"].to_numpy(), levels))
        jct, queue = mean_quantiles(per_run_jct), mean_quantiles(per_run_queue)
        jct_lines.append(plots.Line(group.label, jct / HOUR_S, levels))
        queue_lines.append(plots.Line(group.label, queue / HOUR_S, levels))
        medians_jct.append(f"{group.label} {np.interp(0.5, levels, jct) / HOUR_S:,.2f} h")
        medians_queue.append(f"{group.label} {np.interp(0.5, levels, queue) / HOUR_S:,.2f} h")
    seeds_note = ("With several seeds, a group's line averages their quantiles. "
                  f"Drawn from {len(levels)} quantiles per run.")
    floor_h = 1.0 / HOUR_S
    return [
        html.FigureBlock(
            anchor="jct-cdf", heading="Job completion time",
            how_to_read=("the height of a line at x is the share of jobs that finished within x "
                         "hours of being submitted; higher and further left is better."),
            alt=("Line chart of the cumulative distribution of job completion time in hours, "
                 "log scale, one line per group. Median: " + "; ".join(medians_jct) + "."),
            src=encode(plots.cdf_figure(jct_lines, "job completion time (hours, log scale)",
                                        floor_h)),
            caption="Cumulative distribution of job completion time (submission to finish). "
                    + seeds_note),
        html.FigureBlock(
            anchor="queue-cdf", heading="Queueing delay",
            how_to_read=("the height of a line at x is the share of jobs that waited at most x "
                         "hours in the queue in all; a line that starts high means many jobs "
                         "never waited."),
            alt=("Line chart of the cumulative distribution of queueing delay in hours, log "
                 "scale, one line per group. Median: " + "; ".join(medians_queue) + "."),
            src=encode(plots.cdf_figure(queue_lines, "queueing delay (hours, log scale)",
                                        floor_h)),
            caption="Cumulative distribution of the time each job spent pending, before its "
                    "first start and between preemptions; delays under one second are drawn "
                    "at one second. " + seeds_note),
    ]


def _timeline_sections(groups: Sequence[Group],
                       encode: Callable[[plots.Figure], str]) -> list[html.FigureBlock]:
    known_gpus = all(run.n_gpus for g in groups for run in g.runs)
    util_lines, queue_lines = [], []
    peak_queue = []
    bin_s = 0.0
    for group in groups:
        frames = [read_timeline(run) for run in group.runs]
        end = max(float(f["time"].max()) for f in frames if f is not None and len(f))
        edges = time_edges(end, TIMELINE_BINS)
        bin_s = max(bin_s, float(edges[1] - edges[0]))
        busy, pending = [], []
        for run, frame in zip(group.runs, frames):
            assert frame is not None
            t = frame["time"].to_numpy()
            share = frame["busy_gpus"].to_numpy() / (run.n_gpus or 1)
            busy.append(resample_steps(t, share if known_gpus else frame["busy_gpus"].to_numpy(),
                                       edges))
            pending.append(resample_steps(t, frame["n_pending"].to_numpy(), edges))
        centres = (edges[:-1] + edges[1:]) / 2.0 / DAY_S
        util_lines.append(plots.Line(group.label, centres, np.mean(busy, axis=0)))
        mean_pending = np.mean(pending, axis=0)
        queue_lines.append(plots.Line(group.label, centres, mean_pending))
        peak_queue.append(f"{group.label} {mean_pending.max():,.0f}")
    bins_note = (f"Each point is a time-weighted mean over a bin of {bin_s / HOUR_S:,.2f} hours "
                 f"(at most {TIMELINE_BINS} bins per line); with several seeds, a line averages them.")
    util_label = "GPUs busy (%)" if known_gpus else "busy GPUs"
    return [
        html.FigureBlock(
            anchor="utilisation", heading="Utilisation over time",
            how_to_read=("the share of the cluster's GPUs held by jobs as the trace is replayed; "
                         "a line that stays high for longer is busier, and where it ends is the "
                         "makespan."),
            alt=("Line chart of the " + ("percentage of GPUs" if known_gpus else "number of GPUs")
                 + " busy over time in days, one line per group."),
            src=encode(plots.timeline_figure(util_lines, util_label, percent=known_gpus)),
            caption="GPUs held by running jobs over time. " + bins_note),
        html.FigureBlock(
            anchor="queue-length", heading="Queue length over time",
            how_to_read="the number of jobs waiting at each moment; lower is better.",
            alt=("Line chart of the number of pending jobs over time in days, one line per "
                 "group. Highest bin mean: " + "; ".join(peak_queue) + "."),
            src=encode(plots.timeline_figure(queue_lines, "pending jobs")),
            caption="Jobs pending (submitted, not running) over time. " + bins_note),
    ]


def _bars_section(groups: Sequence[Group], estimates: dict[str, dict[str, Estimate | None]],
                  encode: Callable[[plots.Figure], str]) -> html.FigureBlock:
    panels = []
    for key in _BARS:
        _, title, scale, unit, lower = next(f for f in _FIGURES if f[0] == key)
        shown = [g for g in groups if estimates[g.label][key] is not None]
        panels.append(plots.BarPanel(
            title=f"{title} ({unit}; {'lower' if lower else 'higher'} is better)",
            labels=[g.label for g in shown],
            estimates=[e for g in shown if (e := estimates[g.label][key]) is not None], scale=scale))
    seeds = sorted({len(g.runs) for g in groups})
    if seeds == [1]:
        interval = "Each group ran with one seed, so no confidence interval is drawn."
    else:
        interval = ("Error bars are 95% t-intervals over seeds (Student's t with n-1 degrees "
                    "of freedom)" + ("; groups with one seed have none." if 1 in seeds else "."))
    described = "; ".join(f"{g.label}: avg JCT {_fmt(estimates[g.label]['avg_jct_s'], 1 / HOUR_S, 'h')} h"
                          for g in groups)
    return html.FigureBlock(
        anchor="bars", heading="Headline figures per group",
        how_to_read=("each bar is a group's mean over its seeds; a short error bar means the "
                     "seeds agree, and bars whose error bars overlap are not clearly different."),
        alt=("Four bar charts: average JCT, p99 JCT and makespan in hours, and utilisation in "
             "percent, one bar per group. " + described + "."),
        src=encode(plots.bars_figure(panels)),
        caption="Means over seeds of the figures in summary.json. " + interval)


def _config_block(group: Group) -> html.ConfigBlock:
    config = dict(group.runs[0].config)
    config["seed"] = group.seeds
    return html.ConfigBlock(
        title=f"{group.label}: {len(group.runs)} run{'s' if len(group.runs) != 1 else ''}",
        folders=[run.name for run in group.runs],
        config_json=json.dumps(config, indent=2, sort_keys=True, default=str))


__all__ = ["build_report", "make_page", "write_atomically"]
