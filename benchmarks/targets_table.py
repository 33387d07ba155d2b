"""The target tables of docs/benchmarks.md, as Markdown, from the JSON lines `bench_policies.py` prints.

    python targets_table.py ROWS.jsonl [MORE.jsonl ...]

Rows of both builds may come from several files (plain Python and compiled,
each row names its ``build``); each table shows the figures each build has,
and a dash where a build has no row. A row that was skipped or failed shows
why. The speed and network tables read the whole-trace rows alone, those the
targets speak of.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

Row = dict[str, object]
BUILDS = ("python", "compiled")


def read_rows(paths: Iterable[Path]) -> Iterator[Row]:
    """Every JSON object in ``paths``, one per non-blank line; a bad line names its file and line."""
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{number}: not a JSON line ({exc.msg})") from None
            if not isinstance(row, dict):
                raise SystemExit(f"{path}:{number}: not a JSON object")
            yield row


def by_key(rows: Iterable[Row], figure: str, *fields: str) -> dict[tuple[object, ...], Row]:
    """``figure``'s rows keyed by ``fields`` and their build; the last row of a key wins."""
    return {tuple(row.get(name) for name in (*fields, "build")): row
            for row in rows if row.get("figure") == figure}


def full_trace(rows: Iterable[Row]) -> Iterator[Row]:
    """The rows held to a target: `bench_policies.py` sets one on whole-trace runs alone."""
    return (row for row in rows if "target" in row)


def number(value: object, digits: int = 2) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def why_not(row: Row | None) -> str | None:
    """Why ``row`` has no figure (skipped, failed, absent), or None when it has one."""
    if row is None:
        return "—"
    reason = row.get("skipped") or row.get("error")
    return f"{reason}" if reason else None


def pair(rows: dict[tuple[object, ...], Row], key: tuple[object, ...], field: str, digits: int = 2) -> str:
    """``field`` of the plain and the compiled row of ``key``, as ``plain / compiled``."""
    cells = []
    for build in BUILDS:
        row = rows.get((*key, build))
        cells.append(why_not(row) or number(row.get(field) if row else None, digits))
    return " / ".join(cells)


def meets(row: Row | None) -> str:
    if row is None or "meets_target" not in row:
        return "—"
    return "yes" if row["meets_target"] else "no"


def speed_table(rows: list[Row]) -> list[str]:
    speed = by_key((row for row in full_trace(rows) if row.get("perf") == "ideal"), "speed", "policy", "trace")
    policies = sorted({str(key[0]) for key in speed})
    if not policies:
        return []
    lines = ["| policy | philly_2017, CPU s: Python / compiled | itp_2021, CPU s: Python / compiled "
             "| peak RSS on philly_2017, MiB: Python / compiled | under 60 s on both: Python / compiled |",
             "|---|---:|---:|---:|---|"]
    for policy in policies:
        both = []
        for build in BUILDS:
            answers = [meets(speed.get((policy, trace, build))) for trace in ("philly_2017", "itp_2021")]
            both.append("—" if "—" in answers else "yes" if answers == ["yes", "yes"] else "no")
        lines.append(f"| {policy} | {pair(speed, (policy, 'philly_2017'), 'cpu_s')} "
                     f"| {pair(speed, (policy, 'itp_2021'), 'cpu_s')} "
                     f"| {pair(speed, (policy, 'philly_2017'), 'peak_rss_mib', 0)} | {' / '.join(both)} |")
    return lines


def network_table(rows: list[Row]) -> list[str]:
    ratios = by_key(full_trace(rows), "network-ratio", "policy", "trace")
    keys = sorted({key[:2] for key in ratios}, key=lambda key: (str(key[0]), str(key[1]) != "philly_2017"))
    if not keys:
        return []
    lines = ["| policy | trace | CPU s, ideal / network (ratio): Python | compiled "
             "| steps: ideal / network | mean queue: ideal / network |",
             "|---|---|---|---|---|---|"]
    for policy, trace in keys:
        cells = []
        for build in BUILDS:
            row = ratios.get((policy, trace, build))
            reason = why_not(row)
            if reason is not None or row is None:
                cells.append(reason or "—")
                continue
            over = "" if row.get("meets_target") else ", over"
            cells.append(f"{number(row.get('cpu_s_ideal'))} / {number(row.get('cpu_s_network'))} "
                         f"({number(row.get('cpu_ratio'))}x{over})")
        shown = ratios.get((policy, trace, "compiled")) or ratios.get((policy, trace, "python")) or {}
        lines.append(f"| {policy} | {trace} | {cells[0]} | {cells[1]} "
                     f"| {number(shown.get('n_steps_ideal'))} / {number(shown.get('n_steps_network'))} "
                     f"| {number(shown.get('mean_pending_ideal'), 1)} / "
                     f"{number(shown.get('mean_pending_network'), 1)} |")
    return lines


def decision_table(rows: list[Row]) -> list[str]:
    decisions = by_key(rows, "decision", "policy")
    targets = {key[0]: row.get("target") or 0.0 for key, row in decisions.items()}
    policies = sorted(targets, key=lambda policy: (targets[policy], str(policy)))
    if not policies:
        return []
    lines = ["| policy | target, ms | Python: best / median, ms | compiled: best / median, ms "
             "| jobs started | decision hash |",
             "|---|---:|---|---|---:|---|"]
    for policy in policies:
        cells, hashes, shown = [], [], {}
        for build in BUILDS:
            row = decisions.get((policy, build))
            reason = why_not(row)
            if reason is not None or row is None:
                cells.append(reason or "—")
                continue
            shown = row
            cells.append(f"{number(row.get('decision_ms_best'))} / {number(row.get('decision_ms_median'))}")
            hashes.append(str(row.get("decisions_sha256")))
        lines.append(f"| {policy} | {number(shown.get('target'), 0)} | {cells[0]} | {cells[1]} "
                     f"| {number(shown.get('n_started'))} | {' / '.join(dict.fromkeys(hashes)) or '—'} |")
    return lines


def process_lines(rows: list[Row]) -> list[str]:
    lines = []
    for row in rows:
        if row.get("figure") != "process":
            continue
        runs = row.get("wall_s_runs")
        runs = runs if isinstance(runs, list) else []
        figure = why_not(row) or (f"median {number(row.get('wall_s_median'), 3)} s wall of "
                                  f"{', '.join(number(run, 3) for run in runs)}"
                                  f" (target {number(row.get('target'), 0)} s: {meets(row)})")
        lines.append(f"- {row.get('policy')} on {row.get('trace')}, {row.get('build')}: {figure}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+", type=Path, help="files of bench_policies.py's JSON lines")
    rows = list(read_rows(parser.parse_args().rows))
    sections = [("Full traces, IdealPerf", speed_table(rows)),
                ("The network model over the ideal one", network_table(rows)),
                ("One decision at 10,000 GPUs", decision_table(rows)),
                ("The whole process", process_lines(rows))]
    for title, lines in sections:
        if lines:
            print(f"**{title}**\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
