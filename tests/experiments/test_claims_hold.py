"""The papers' claims that the published results show still hold, in the busiest regime.

Each case is a claim of a shipped experiment file whose verdict in
docs/results.md is "matches" in every regime. It is rerun here on the
experiment's own windows and cluster, at its busiest load, on one seed,
with only the two policies it compares, so a change that breaks the
mechanism behind it fails here rather than in the next `rackwise reproduce`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.experiments.conftest import EXPERIMENTS

from rackwise.experiments import load_experiment, plan, run_cells
from rackwise.experiments.claims import assess

HOLDING = [
    ("delay", "up to 98% less communication overhead"),
    ("hetero", "total time duration 1.20x shorter than Gavel's"),
    ("hetero", "lower average JCT than Gavel (the paper reports"),
    ("hetero", "total time duration down 50-80% against Hadar"),
    ("hetero", "cluster utilisation up 1.45x against Hadar"),
]


@pytest.mark.parametrize(("name", "statement"), HOLDING)
def test_a_published_claim_still_matches_at_the_busiest_load(tmp_path: Path, name: str,
                                                              statement: str) -> None:
    path = EXPERIMENTS / f"{name}.yaml"
    experiment = load_experiment(path)
    claim = next(c for c in experiment.claims if c.statement.startswith(statement))
    busiest = max(experiment.loads)
    sides = {claim.policy, claim.baseline}
    small = experiment.model_copy(update={
        "policies": [p for p in experiment.policies if p.label in sides],
        "clusters": [c for c in experiment.clusters
                     if claim.clusters is None or c.label in claim.clusters],
        "loads": [busiest], "seeds": experiment.seeds[:1], "claims": [claim]})
    outcome = run_cells(plan(small, str(path)), tmp_path, jobs=2)
    verdicts = assess([claim], outcome.table)
    assert len(verdicts) == len(small.workloads) * len(small.clusters)
    assert set(verdicts["verdict"]) == {"matches"}, verdicts.to_string()
