"""Claims: paired by seed, judged over every seed, written into results and policy documents."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rackwise.errors import InputError
from rackwise.experiments.claims import Claim, assess, claims_markdown
from rackwise.experiments.config import parse_experiment
from rackwise.experiments.reproduce import CLAIMS_BEGIN, CLAIMS_END, write_claims_block


def table(rows: list[tuple[str, str, float, int, float]]) -> pd.DataFrame:
    """Results rows of (policy, workload, load, seed, avg JCT)."""
    return pd.DataFrame([{"policy": policy, "workload": workload, "cluster": "c", "load": load,
                          "seed": seed, "status": "ok", "avg_jct_s": jct}
                         for policy, workload, load, seed, jct in rows])


CLAIM = Claim(paper="P", statement="lower JCT", policy="new", baseline="old")


def test_ratios_pair_by_seed_and_every_seed_must_agree() -> None:
    results = table([
        ("new", "w", 1.0, 0, 8.0), ("old", "w", 1.0, 0, 10.0),
        ("new", "w", 1.0, 1, 9.0), ("old", "w", 1.0, 1, 10.0),  # both seeds better: matches
        ("new", "w", 2.0, 0, 12.0), ("old", "w", 2.0, 0, 10.0),
        ("new", "w", 2.0, 1, 11.0), ("old", "w", 2.0, 1, 10.0),  # both worse: fails
        ("new", "v", 1.0, 0, 5.0), ("old", "v", 1.0, 0, 10.0),
        ("new", "v", 1.0, 1, 20.0), ("old", "v", 1.0, 1, 10.0),  # one each way: mixed
        ("new", "v", 2.0, 0, 10.05), ("old", "v", 2.0, 0, 10.0),
        ("new", "v", 2.0, 1, 9.95), ("old", "v", 2.0, 1, 10.0),  # within 1%: ties
        ("new", "u", 1.0, 0, 10.05), ("old", "u", 1.0, 0, 10.0),
        ("new", "u", 1.0, 1, 8.0), ("old", "u", 1.0, 1, 10.0),  # a tie and a win: mixed
    ])
    verdicts = assess([CLAIM], results).set_index(["workload", "load"])
    assert verdicts.loc[("w", 1.0), "verdict"] == "matches"
    assert verdicts.loc[("w", 1.0), "ratio_mean"] == pytest.approx(0.85)
    assert verdicts.loc[("w", 1.0), ["ratio_min", "ratio_max"]].tolist() == [0.8, 0.9]
    assert verdicts.loc[("w", 2.0), "verdict"] == "fails"
    assert verdicts.loc[("v", 1.0), "verdict"] == "mixed"
    assert verdicts.loc[("v", 2.0), "verdict"] == "ties"
    assert verdicts.loc[("u", 1.0), "verdict"] == "mixed"
    assert set(verdicts["n_seeds"]) == {2}


def test_higher_is_better_flips_the_direction_and_filters_keep_regimes() -> None:
    results = table([("new", "w", 1.0, 0, 12.0), ("old", "w", 1.0, 0, 10.0),
                     ("new", "w", 2.0, 0, 12.0), ("old", "w", 2.0, 0, 10.0)])
    claim = CLAIM.model_copy(update={"better": "higher", "loads": [2.0]})
    verdicts = assess([claim], results)
    assert verdicts[["load", "verdict"]].values.tolist() == [[2.0, "matches"]]


def test_a_seed_run_by_one_side_only_is_left_out() -> None:
    results = table([("new", "w", 1.0, 0, 8.0), ("old", "w", 1.0, 0, 10.0),
                     ("new", "w", 1.0, 1, 80.0)])
    assert assess([CLAIM], results)["n_seeds"].tolist() == [1]


def test_the_table_names_every_claim_even_one_not_run() -> None:
    results = table([("new", "w", 1.0, 0, 8.0), ("old", "w", 1.0, 0, 10.0)])
    other = CLAIM.model_copy(update={"statement": "shorter makespan", "note": "a reason"})
    text = claims_markdown([CLAIM, other], assess([CLAIM, other.model_copy(
        update={"workloads": ["absent"]})], results))
    assert "| lower JCT (P) | `new` vs `old`, avg JCT | w, c, load 1 | 1 | 0.80x (0.80-0.80) | matches |" in text
    assert "| shorter makespan (P) |" in text and "not run" in text
    assert "- shorter makespan: a reason" in text


@pytest.mark.parametrize(("claim", "field"), [
    ({"policy": "nope", "baseline": "fifo"}, "claims.0.policy"),
    ({"policy": "fifo", "baseline": "fifo", "clusters": ["nope"]}, "claims.0.clusters"),
    ({"policy": "fifo", "baseline": "fifo", "metric": "speed"}, "claims.0.metric"),
])
def test_a_claim_outside_the_grid_is_refused_naming_its_field(claim: dict, field: str) -> None:
    data = {"policies": ["fifo"], "workloads": [{"trace": "philly_2017"}],
            "claims": [{"paper": "P", "statement": "s", **claim}]}
    with pytest.raises(InputError) as error:
        parse_experiment(data, "exp.yaml", Path("."))
    assert "exp.yaml" in str(error.value) and field in str(error.value)


def test_a_policy_document_gets_its_claims_between_its_markers_only(tmp_path: Path) -> None:
    begin, end = CLAIMS_BEGIN.format(name="delay"), CLAIMS_END.format(name="delay")
    document = tmp_path / "delay.md"
    document.write_text(f"# Delay\n\nintro\n\n{begin}\nold table\n{end}\n\nafter\n")
    assert write_claims_block(document, "delay", "| new table |\n")
    assert document.read_text() == f"# Delay\n\nintro\n\n{begin}\n| new table |\n{end}\n\nafter\n"
    assert not write_claims_block(document, "hetero", "| other |\n")
