"""A paper's claims, written in its experiment file and checked against the sweep.

An experiment file may list what its policies are meant to show::

    claims:
      - paper: network-sensitive delay scheduling
        statement: up to 83% lower average JCT than consolidation-based schedulers
        policy: dally                 # a policy label of the grid
        baseline: consolidate-strict  # another one
        metric: avg_jct_s             # a figure of the results table
        better: lower
        clusters: [congested]         # optional: only these regimes
        note: why it does or does not hold, in the sweep's own terms

A claim is measured in every regime (workload x cluster x load) the grid
holds and its filters keep: on each seed, the policy's figure over the
baseline's on the same seed. A seed points the claimed way when its ratio
is better than 1 by more than `TIE` (1%), the other way when it is worse by
more than that. A regime *matches* when every seed points the claimed way,
*fails* when every seed points the other way, *ties* when no seed points
either way, and is *mixed* otherwise, so a verdict never rests on one lucky
seed nor on a difference too small to matter.
"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict

METRICS = {
    "avg_jct_s": "avg JCT", "median_jct_s": "median JCT", "p99_jct_s": "p99 JCT",
    "avg_queueing_s": "avg queueing", "makespan_s": "makespan", "utilisation": "utilisation",
    "comm_overhead_gpu_hours": "communication GPU-h", "gpu_hours": "GPU-hours",
}
MetricName = Literal["avg_jct_s", "median_jct_s", "p99_jct_s", "avg_queueing_s", "makespan_s",
                     "utilisation", "comm_overhead_gpu_hours", "gpu_hours"]
REGIME = ["workload", "cluster", "load"]
TIE = 0.01  # ratios within 1% of 1 point neither way


class Claim(BaseModel):
    """One claim of a paper: a policy beats a baseline on a figure."""

    model_config = ConfigDict(extra="forbid")
    paper: str
    statement: str
    policy: str
    baseline: str
    metric: MetricName = "avg_jct_s"
    better: Literal["lower", "higher"] = "lower"
    workloads: list[str] | None = None
    clusters: list[str] | None = None
    loads: list[float] | None = None
    note: str = ""


def seed_ratios(claims: list[Claim], table: pd.DataFrame) -> pd.DataFrame:
    """One row per claim, regime and seed: the policy's figure over the baseline's on that seed.

    ``table`` is a sweep's results table (one row per cell, ``policy`` holding
    the label). A regime where either side has no finished run is left out.
    """
    done = table[table["status"] == "ok"]
    rows = []
    for index, claim in enumerate(claims):
        chosen = done
        for column, values in (("workload", claim.workloads), ("cluster", claim.clusters),
                               ("load", claim.loads)):
            if values is not None:
                chosen = chosen[chosen[column].isin(values)]
        if claim.metric not in chosen:
            continue
        side = {label: chosen[chosen["policy"] == label].set_index([*REGIME, "seed"])[claim.metric]
                for label in (claim.policy, claim.baseline)}
        paired = pd.concat(side, axis=1, join="inner").dropna()
        for (workload, cluster, load, seed), row in paired.iterrows():
            rows.append({"claim": index, "paper": claim.paper, "statement": claim.statement,
                         "policy": claim.policy, "baseline": claim.baseline,
                         "metric": claim.metric, "better": claim.better, "workload": workload,
                         "cluster": cluster, "load": float(load), "seed": int(seed),
                         "ratio": float(row[claim.policy] / row[claim.baseline])})
    return pd.DataFrame(rows, columns=[*SEED_COLUMNS, "ratio"])


SEED_COLUMNS = ["claim", "paper", "statement", "policy", "baseline", "metric", "better",
                *REGIME, "seed"]


def direction(ratio: float, better: str) -> str:
    """Which way one seed points: ``claimed``, ``against`` or ``neither`` (within `TIE`)."""
    if abs(ratio - 1.0) <= TIE:
        return "neither"
    return "claimed" if (ratio < 1.0) == (better == "lower") else "against"


def assess(claims: list[Claim], table: pd.DataFrame) -> pd.DataFrame:
    """One row per claim and regime: seeds, ratio over the baseline (mean, min, max), verdict."""
    ratios = seed_ratios(claims, table)
    rows = []
    for (index, *regime), group in ratios.groupby(["claim", *REGIME], sort=False):
        claim = claims[index]
        ways = {direction(r, claim.better) for r in group["ratio"]}
        verdict = ("matches" if ways == {"claimed"} else "fails" if ways == {"against"}
                   else "ties" if ways == {"neither"} else "mixed")
        rows.append({"claim": index, "paper": claim.paper, "statement": claim.statement,
                     "policy": claim.policy, "baseline": claim.baseline,
                     "metric": claim.metric, **dict(zip(REGIME, regime)),
                     "n_seeds": len(group), "ratio_mean": float(group["ratio"].mean()),
                     "ratio_min": float(group["ratio"].min()),
                     "ratio_max": float(group["ratio"].max()), "verdict": verdict})
    return pd.DataFrame(rows)


def claims_markdown(claims: list[Claim], verdicts: pd.DataFrame) -> str:
    """The claims table: each claim, then one line per regime with its ratio, spread and verdict."""
    lines = ["| claim | policy vs baseline | regime | seeds | ratio (min-max) | verdict |",
             "|---|---|---|---:|---:|---|"]
    for index, claim in enumerate(claims):
        mine = verdicts[verdicts["claim"] == index] if not verdicts.empty else verdicts
        what = f"{claim.statement} ({claim.paper})"
        versus = f"`{claim.policy}` vs `{claim.baseline}`, {METRICS[claim.metric]}"
        if mine.empty:
            lines.append(f"| {what} | {versus} | not run | 0 | - | - |")
            continue
        for row in mine.itertuples():
            spread = f"{row.ratio_mean:.2f}x ({row.ratio_min:.2f}-{row.ratio_max:.2f})"
            regime = f"{row.workload}, {row.cluster}, load {row.load:g}"
            lines.append(f"| {what} | {versus} | {regime} | {row.n_seeds} | {spread} "
                         f"| {row.verdict} |")
            what = versus = '"'
    lines.append("")
    lines.append("A ratio is the policy's figure over the baseline's on the same seed; "
                 "below 1 is better where lower is better. Verdicts: matches (every seed "
                 "better by more than 1%), fails (every seed worse by more than 1%), ties "
                 "(every seed within 1%), mixed (the rest).")
    notes = [f"- {claim.statement}: {claim.note}" for claim in claims if claim.note]
    if notes:
        lines += ["", "Why:", "", *notes]
    return "\n".join(lines) + "\n"
