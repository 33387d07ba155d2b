"""The published claims are what the code gives: each claim rerun on seed 0 equals docs/claims.csv.

`rackwise reproduce` writes every claim's ratio per regime and seed to
docs/claims.csv (and the verdicts to docs/results.md). Here each shipped
experiment's claims are rerun at its busiest load on its first seed, only
the two policies each claim compares, and every ratio must equal the
published one. A change to a policy or the simulator that moves a published
result therefore fails here until the results are regenerated; the failure
lists the claims that moved and those that turned the other way.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import typer
from tests.experiments.conftest import EXPERIMENTS
from typer.testing import CliRunner

from rackwise.cli.reproduce import DEFAULT_EXPERIMENTS
from rackwise.experiments import load_experiment
from rackwise.experiments.claims_check import check_published
from rackwise.experiments.reproduce import reproduce

ROOT = EXPERIMENTS.parent
SMOKE = EXPERIMENTS / "smoke.yaml"


def test_every_published_claim_reruns_to_its_published_ratio(tmp_path: Path) -> None:
    paths = [ROOT / path for path in DEFAULT_EXPERIMENTS]
    rows = check_published(paths, ROOT / "docs" / "claims.csv", tmp_path, jobs=2)
    for path in paths:
        experiment = load_experiment(path)
        assert {claim.statement for claim in experiment.claims} <= set(rows["statement"]), path
    moved = rows[~rows["agrees"]]
    turned = moved[moved["published_direction"] != moved["rerun_direction"]]
    columns = ["experiment", "policy", "baseline", "workload", "cluster", "published", "rerun"]
    assert moved.empty, (f"{len(moved)} published claim ratios moved ({len(turned)} turned): rerun "
                         f"`rackwise reproduce`\n{moved[columns].to_string()}")


def test_a_moved_ratio_is_reported_and_the_check_fails(cli: typer.Typer, tmp_path: Path) -> None:
    reproduce([SMOKE], tmp_path / "out", tmp_path / "docs", jobs=1)
    published = tmp_path / "docs" / "claims.csv"
    args = ["reproduce", "--check", "--experiment", str(SMOKE), "--docs", str(tmp_path / "docs"),
            "--out", str(tmp_path / "check"), "--jobs", "1"]
    same = CliRunner().invoke(cli, args)
    assert same.exit_code == 0, same.output
    assert "2 claim regimes rerun on their first seed: 2 as published, 0 moved, 0 turned" in same.output

    table = pd.read_csv(published)
    first = (table["seed"] == 0) & (table["load"] == 2.0) & (table["workload"] == "itp")
    assert (table.loc[first, "ratio"] > 1.1).all()  # tiresias is worse here: halved, it wins
    table.loc[first, "ratio"] /= 2
    table.to_csv(published, index=False)
    moved = CliRunner().invoke(cli, args)
    assert moved.exit_code == 1
    assert "2 claim regimes rerun on their first seed: 1 as published, 1 moved, 1 turned" in moved.output
    assert f"{published} is stale: rerun `rackwise reproduce`" in moved.output


def test_a_table_that_is_not_a_claims_table_is_refused(cli: typer.Typer, tmp_path: Path) -> None:
    (tmp_path / "claims.csv").write_text("a,b\n1,2\n")
    result = CliRunner().invoke(cli, ["reproduce", "--check", "--experiment", str(SMOKE),
                                      "--docs", str(tmp_path), "--out", str(tmp_path / "check")])
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: {tmp_path / 'claims.csv'}: not a claims table "
                                     "(no column 'experiment'): rerun `rackwise reproduce`")


@pytest.mark.parametrize("experiment", DEFAULT_EXPERIMENTS, ids=lambda p: p.stem)
def test_published_table_holds_every_claim_regime_and_seed(experiment: Path) -> None:
    table = pd.read_csv(ROOT / "docs" / "claims.csv")
    spec = load_experiment(ROOT / experiment)
    mine = table[table["experiment"] == spec.name]
    assert set(mine["seed"]) == set(spec.seeds)
    assert set(mine["load"]) == set(spec.loads)
