"""One decision of every policy on a large busy cluster, hashed, against the hashes beside this file.

The records hashes (test_records_hash.py) run small clusters; the code paths a
large one takes (overlays that bucket hundreds of touched nodes, scans over
many racks, queues of hundreds) are pinned here. A speed-up meant to change
no decision must leave these alone; one that changes decisions on purpose
regenerates them (``python tests/golden/test_decision_hash.py --update``)
and says why in its commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from rackwise.policies.registry import POLICIES
from rackwise.testing.busy_cluster import busy_cluster

HASHES = Path(__file__).with_name("decision_hashes.json")


def decision_hash(policy: str) -> str:
    # 3,200 GPUs, 2,000 waiting: every policy in about 13 s
    decisions = busy_cluster(policy, n_nodes=400, n_pending=2_000, busy_frac=0.9).decide()
    return hashlib.sha256(repr(decisions).encode()).hexdigest()[:20]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_decision_matches_the_stored_hash(policy: str) -> None:
    if policy == "marl":
        pytest.importorskip("torch")
    stored = json.loads(HASHES.read_text())
    assert policy in stored, f"no stored hash for {policy}: run this file with --update"
    assert decision_hash(policy) == stored[policy]


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/golden/test_decision_hash.py --update")
    hashes = {name: decision_hash(name) for name in sorted(POLICIES)}
    HASHES.write_text(json.dumps(hashes, indent=1) + "\n")
    print(f"wrote {len(hashes)} hashes to {HASHES}")
