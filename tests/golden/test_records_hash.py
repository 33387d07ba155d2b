"""Every policy's per-job records, hashed, against the hashes stored beside this file.

A refactoring or speed-up that is meant to change no decision must leave
these hashes alone. One that changes decisions on purpose regenerates them
(``python tests/golden/test_records_hash.py --update``) and says why in its
commit. Each case is a loaded window of a shipped trace, so queues form and
the policies' choices matter.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from rackwise.policies.registry import POLICIES
from rackwise.run import ClusterConfig, RunConfig, WorkloadConfig, execute

HASHES = Path(__file__).with_name("records_hashes.json")
HETERO = Path(__file__).parents[2] / "examples" / "clusters" / "gavel-108.yaml"


def cases() -> dict[str, RunConfig]:
    """Case name -> run: every policy under both models on ITP, and on a heterogeneous cluster."""
    found: dict[str, RunConfig] = {}
    for policy in sorted(POLICIES):
        for perf in ("ideal", "network"):
            found[f"{policy}/{perf}/itp"] = RunConfig(
                workload=WorkloadConfig(trace="itp_2021", first_n=120, load=3.0, skip_oversized=True),
                cluster=ClusterConfig(nodes=8, gpus_per_node=8, nodes_per_rack=2),
                policy=policy, perf=perf, seed=3)
        found[f"{policy}/ideal/philly-hetero"] = RunConfig(
            workload=WorkloadConfig(trace="philly_2017", start_s=86400.0 * 60, first_n=120, load=8.0,
                                    skip_oversized=True),
            cluster=ClusterConfig(spec=HETERO), policy=policy, perf="ideal", seed=5)
    return found


def records_hash(config: RunConfig) -> str:
    result, _ = execute(config)
    return hashlib.sha256(repr(result.records).encode()).hexdigest()[:20]


@pytest.mark.parametrize("case", sorted(cases()))
def test_records_match_the_stored_hash(case: str) -> None:
    config = cases()[case]
    if config.policy == "marl":
        pytest.importorskip("torch")
    stored = json.loads(HASHES.read_text())
    assert case in stored, f"no stored hash for {case}: run this file with --update"
    assert records_hash(config) == stored[case]


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/golden/test_records_hash.py --update")
    hashes = {name: records_hash(config) for name, config in sorted(cases().items())}
    HASHES.write_text(json.dumps(hashes, indent=1) + "\n")
    print(f"wrote {len(hashes)} hashes to {HASHES}")
