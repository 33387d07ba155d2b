"""benchmarks/bench_marl_replay.py: the actor it times chooses as the torch network does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.benchmark_scripts import BENCHMARKS

pytest.importorskip("torch", reason="needs the rl extra: pip install 'rackwise[rl]'")


def test_replay_compares_the_actor_with_the_network() -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_marl_replay.py"), "--first-n", "300",
                           "--passes", "1", "--ops", "3", "--network"],
                          capture_output=True, text=True, check=True, cwd=BENCHMARKS)
    figures = json.loads(done.stdout)
    assert figures["observations"] > 20 and len(figures["actor_us_per_call"]) == 1
    assert len(figures["top_ops"]) == 3
    assert figures["choices_unlike_the_network"] == 0
    assert figures["largest_logit_difference"] < 1e-4  # numpy sums in another order: a little rounding
    # the run's pair terms are the model's, from numpy tables: equal to float32 rounding
    assert figures["pair_terms"] > 0
    assert figures["pair_terms_largest_relative_difference"] < 1e-5
