"""Checking the published claims: each claim rerun on one seed and set beside ``claims.csv``.

`rackwise reproduce` writes every claim's ratio per regime and seed to
``docs/claims.csv``. `check_published` reruns, for each experiment, only the
policies its claims compare, at its busiest load and on its first seed, on
the same windows and clusters, and sets each rerun ratio beside the
published one. The simulator is deterministic, so the two are equal unless
the code has changed what the published results say; then the results must
be regenerated, and the report says which claims turned the other way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rackwise.errors import InputError
from rackwise.experiments.claims import REGIME, direction, seed_ratios
from rackwise.experiments.config import Experiment, load_experiment
from rackwise.experiments.grid import plan
from rackwise.experiments.runner import OnDone, run_cells

# One paper statement may be claimed for several policies (a variant beside the default).
KEY = ["experiment", "statement", "policy", "baseline", *REGIME, "seed"]


def claims_version(experiment: Experiment) -> Experiment:
    """The experiment cut to the policies its claims compare, its busiest load and first seed."""
    sides = {label for claim in experiment.claims for label in (claim.policy, claim.baseline)}
    return experiment.model_copy(update={
        "name": f"{experiment.name}-claims",
        "policies": [entry for entry in experiment.policies if entry.label in sides],
        "loads": [max(experiment.loads)], "seeds": experiment.seeds[:1]})


def read_published(path: str | Path) -> pd.DataFrame:
    """``claims.csv`` as `rackwise reproduce` wrote it."""
    try:
        table = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise InputError(f"cannot read the published claims: {error}", source=str(path)) from None
    missing = [column for column in (*KEY, "ratio", "better") if column not in table.columns]
    if missing:
        raise InputError(f"not a claims table (no column {missing[0]!r}): rerun `rackwise reproduce`",
                         source=str(path))
    return table


def check_published(experiment_paths: Sequence[str | Path], published: str | Path,
                    out_dir: str | Path, *, jobs: int = 2,
                    on_done: OnDone | None = None) -> pd.DataFrame:
    """Each claim's rerun ratio beside the published one, one row per claim and regime.

    Columns: the `KEY`, ``published`` and ``rerun`` ratios, their directions
    (`rackwise.experiments.claims.direction`) and ``agrees`` (the ratios are
    equal to 1e-9; a regime missing from the published table never agrees).
    """
    table = read_published(published)
    rows = []
    for path in experiment_paths:
        experiment = claims_version(load_experiment(path))
        if not experiment.claims:
            continue
        outcome = run_cells(plan(experiment, str(path)), Path(out_dir) / experiment.name,
                            jobs=jobs, on_done=on_done)
        rerun = seed_ratios(experiment.claims, outcome.table)
        rows.append(rerun.assign(experiment=experiment.name.removesuffix("-claims")))
    rerun = pd.concat(rows, ignore_index=True)
    merged = rerun.merge(table[[*KEY, "ratio"]].rename(columns={"ratio": "published"}),
                         on=KEY, how="left").rename(columns={"ratio": "rerun"})
    merged["published_direction"] = [direction(r, b) if pd.notna(r) else "missing"
                                     for r, b in zip(merged["published"], merged["better"])]
    merged["rerun_direction"] = [direction(r, b) for r, b in zip(merged["rerun"], merged["better"])]
    close = (merged["rerun"] - merged["published"]).abs() <= 1e-9 * merged["published"].abs()
    merged["agrees"] = close.fillna(False).astype(bool)
    return merged[[*KEY, "published", "rerun", "published_direction",
                   "rerun_direction", "agrees"]]
