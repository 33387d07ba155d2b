"""The target tables of docs/benchmarks.md, as Markdown, from the JSON lines `bench_policies.py` prints.

    python targets_table.py ROWS.jsonl [MORE.jsonl ...]

Rows of both builds may come from several files (plain Python and compiled,
each row names its ``build``); a table has columns for the builds it has rows
of, and a dash where a build has no row. A row that was skipped or failed
shows why. The speed and network tables read the whole-trace rows alone, those the
targets speak of.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

Row = dict[str, object]
BUILDS = ("python", "compiled")
LABELS = {"python": "Python", "compiled": "compiled"}


def read_rows(paths: Iterable[Path]) -> Iterator[Row]:
    """Every JSON object in ``paths``, one per non-blank line; a bad line names its file and line."""
    for path in paths:
        for line_no, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{line_no}: not a JSON line ({exc.msg})") from None
            if not isinstance(row, dict):
                raise SystemExit(f"{path}:{line_no}: not a JSON object")
            yield row


def by_key(rows: Iterable[Row], figure: str, *fields: str) -> dict[tuple[object, ...], Row]:
    """``figure``'s rows keyed by ``fields`` and their build; the last row of a key wins."""
    return {tuple(row.get(name) for name in (*fields, "build")): row
            for row in rows if row.get("figure") == figure}


def builds_of(keyed: dict[tuple[object, ...], Row]) -> list[str]:
    """The builds ``keyed`` (from `by_key`) has rows of, plain Python first."""
    return [build for build in BUILDS if any(key[-1] == build for key in keyed)]


def labels(builds: list[str]) -> str:
    return " / ".join(LABELS[build] for build in builds)


def full_trace(rows: Iterable[Row]) -> Iterator[Row]:
    """The rows held to a target: `bench_policies.py` sets one on whole-trace runs alone."""
    return (row for row in rows if "target" in row)


def number(value: object, digits: int = 2) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def cell(row: Row | None, render: Callable[[Row], str]) -> str:
    """``render(row)``, or why ``row`` has no figure: a dash where it is absent, else its skip or error."""
    if row is None:
        return "—"
    reason = row.get("skipped") or row.get("error")
    return str(reason) if reason else render(row)


def pair(rows: dict[tuple[object, ...], Row], builds: list[str], key: tuple[object, ...], field: str,
         digits: int = 2) -> str:
    """``field`` of each build's row of ``key``, as ``plain / compiled``."""
    return " / ".join(cell(rows.get((*key, build)), lambda row: number(row.get(field), digits))
                      for build in builds)


def ratio(row: Row, small: str, large: str) -> str:
    """``small / large (ratio)``, marked where the ratio is over its target."""
    over = "" if row.get("meets_target") else ", over"
    return f"{number(row.get(small))} / {number(row.get(large))} ({number(row.get('cpu_ratio'))}x{over})"


def meets(row: Row | None) -> str:
    if row is None or "meets_target" not in row:
        return "—"
    return "yes" if row["meets_target"] else "no"


def speed_table(rows: list[Row]) -> list[str]:
    speed = by_key((row for row in full_trace(rows) if row.get("perf") == "ideal"), "speed", "policy", "trace")
    policies = sorted({str(key[0]) for key in speed})
    if not policies:
        return []
    builds = builds_of(speed)
    named = labels(builds)
    lines = [f"| policy | philly_2017, CPU s: {named} | itp_2021, CPU s: {named} "
             f"| peak RSS on philly_2017, MiB: {named} | under 60 s on both: {named} |",
             "|---|---:|---:|---:|---|"]
    for policy in policies:
        both = []
        for build in builds:
            answers = [meets(speed.get((policy, trace, build))) for trace in ("philly_2017", "itp_2021")]
            both.append("—" if "—" in answers else "yes" if answers == ["yes", "yes"] else "no")
        lines.append(f"| {policy} | {pair(speed, builds, (policy, 'philly_2017'), 'cpu_s')} "
                     f"| {pair(speed, builds, (policy, 'itp_2021'), 'cpu_s')} "
                     f"| {pair(speed, builds, (policy, 'philly_2017'), 'peak_rss_mib', 0)} | {' / '.join(both)} |")
    return lines


def network_table(rows: list[Row]) -> list[str]:
    ratios = by_key(full_trace(rows), "network-ratio", "policy", "trace")
    keys = sorted({key[:2] for key in ratios}, key=lambda key: (str(key[0]), str(key[1]) != "philly_2017"))
    if not keys:
        return []
    builds = builds_of(ratios)
    lines = ["| policy | trace | " + " | ".join(f"{LABELS[build]}, CPU s: ideal / network (ratio)"
                                                for build in builds)
             + " | steps: ideal / network | CPU us per step: ideal / network | mean queue: ideal / network |",
             "|---|---|" + "---|" * (len(builds) + 3)]
    for policy, trace in keys:
        cells = [cell(ratios.get((policy, trace, build)), lambda row: ratio(row, "cpu_s_ideal", "cpu_s_network"))
                 for build in builds]
        shown = ratios.get((policy, trace, "compiled")) or ratios.get((policy, trace, "python")) or {}
        lines.append(f"| {policy} | {trace} | {' | '.join(cells)} "
                     f"| {number(shown.get('n_steps_ideal'))} / {number(shown.get('n_steps_network'))} "
                     f"| {per_step(shown, 'ideal')} / {per_step(shown, 'network')} "
                     f"| {number(shown.get('mean_pending_ideal'), 1)} / "
                     f"{number(shown.get('mean_pending_network'), 1)} |")
    return lines


def per_step(row: Row, model: str) -> str:
    """CPU microseconds per simulation step under ``model``; a ratio is the steps' ratio times this one's."""
    cpu_s, n_steps = row.get(f"cpu_s_{model}"), row.get(f"n_steps_{model}")
    if not isinstance(cpu_s, (int, float)) or not isinstance(n_steps, int) or n_steps <= 0:
        return "—"
    return number(cpu_s / n_steps * 1e6, 1)


def decision_table(rows: list[Row]) -> list[str]:
    decisions = by_key(rows, "decision", "policy")
    targets = {key[0]: row.get("target") or 0.0 for key, row in decisions.items()}
    policies = sorted(targets, key=lambda policy: (targets[policy], str(policy)))
    if not policies:
        return []
    builds = builds_of(decisions)
    lines = ["| policy | target, ms | " + " | ".join(f"{LABELS[build]}: best / median, ms" for build in builds)
             + " | jobs started | decision hash |",
             "|---|---:|" + "---|" * len(builds) + "---:|---|"]
    for policy in policies:
        built = [decisions.get((policy, build)) for build in builds]
        cells = [cell(row, lambda row: f"{number(row.get('decision_ms_best'))} / "
                                       f"{number(row.get('decision_ms_median'))}") for row in built]
        shown = next((row for row in built if row is not None), {})
        hashes = [str(row["decisions_sha256"]) for row in built if row and "decisions_sha256" in row]
        lines.append(f"| {policy} | {number(shown.get('target'), 0)} | {' | '.join(cells)} "
                     f"| {number(shown.get('n_started'))} | {' / '.join(dict.fromkeys(hashes)) or '—'} |")
    return lines


def linearity_table(rows: list[Row]) -> list[str]:
    runs = by_key(rows, "linearity", "policy", "trace")
    policies = sorted({str(key[0]) for key in runs})
    if not policies:
        return []
    traces = sorted({key[1] for key in runs}, key=lambda trace: (trace != "philly_2017", str(trace)))
    starts = {key[1]: row.get("start_s") for key, row in runs.items()}
    names = [f"{trace}" + (f" from {number(starts[trace], 0)} s" if starts[trace] else "") for trace in traces]
    builds = builds_of(runs)
    lines = ["| policy | " + " | ".join(f"{name}: {LABELS[build]}" for name in names for build in builds) + " |",
             "|---|" + "---|" * (len(builds) * len(traces))]
    for policy in policies:
        cells = [cell(runs.get((policy, trace, build)), lambda row: ratio(row, "cpu_s_small", "cpu_s_large"))
                 for trace in traces for build in builds]
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    return lines


def process_figure(row: Row) -> str:
    runs = row.get("wall_s_runs")
    walls = ", ".join(number(run, 3) for run in runs) if isinstance(runs, list) else "—"
    return (f"median {number(row.get('wall_s_median'), 3)} s wall of {walls} "
            f"(target {number(row.get('target'), 0)} s: {meets(row)})")


def process_lines(rows: list[Row]) -> list[str]:
    return [f"- {row.get('policy')} on {row.get('trace')}, {row.get('build')}: {cell(row, process_figure)}"
            for row in rows if row.get("figure") == "process"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+", type=Path, help="files of bench_policies.py's JSON lines")
    rows = list(read_rows(parser.parse_args().rows))
    sections = [("Full traces, IdealPerf", speed_table(rows)),
                ("The network model over the ideal one", network_table(rows)),
                ("One decision at 10,000 GPUs", decision_table(rows)),
                ("Ten times the jobs", linearity_table(rows)),
                ("The whole process", process_lines(rows))]
    for title, lines in sections:
        if lines:
            print(f"**{title}**\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
