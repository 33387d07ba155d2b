"""benchmarks/bench_asrpt_work.py: its counters count without changing a decision."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys

import pytest
from tests.benchmark_scripts import BENCHMARKS

import rackwise

# Its counters replace methods that the compiled build calls directly (setup.py).
pytestmark = pytest.mark.skipif(rackwise.is_compiled(), reason="counts need the plain-Python build")

SCRIPT = BENCHMARKS / "bench_asrpt_work.py"
FIRST_N = 300


def _run(*args: str, first_n: int = FIRST_N) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), "--first-n", str(first_n), *args],
                          capture_output=True, text=True, check=True, cwd=BENCHMARKS)
    return done.stdout


def _asrpt_records_sha256() -> str:
    """The records hash of the first jobs of philly_2017 under asrpt, built without the script."""
    from rackwise import traces
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.perf.base import IdealPerf
    from rackwise.policies.asrpt import Asrpt
    from rackwise.sim.engine import Simulator

    topology = uniform_cluster(64, 8, 8)
    jobs = traces.load("philly_2017", first_n=FIRST_N).drop_oversized(topology.n_gpus)
    records = Simulator(topology, jobs, Asrpt(), perf=IdealPerf(), seed=0).run().records
    return hashlib.sha256(repr(records).encode()).hexdigest()[:16]


def test_the_counted_run_decides_as_asrpt_and_counts_its_running_jobs() -> None:
    out = _run()
    assert f"records_sha256 {_asrpt_records_sha256()}" in out
    ranked = int(re.search(r"running jobs ranked: (\d+)", out).group(1))  # type: ignore[union-attr]
    below = int(re.search(r"below the best waiting key: (\d+)", out).group(1))  # type: ignore[union-attr]
    assert 0 < below <= ranked
    assert re.search(r"distributions worked out, after a finish: [1-9]", out)


def test_every_decision_is_counted_once_and_nothing_new_is_a_part_of_them() -> None:
    out = _run(first_n=2_000)  # the first decisions with nothing new come past the first 1,000 jobs

    def count(name: str) -> int:
        return int(re.search(rf"^{name}: (\d+)", out, re.MULTILINE).group(1))  # type: ignore[union-attr]

    steps = int(re.search(r"steps (\d+)", out).group(1))  # type: ignore[union-attr]
    assert count("decisions") == steps  # the simulator asks the policy once per step
    assert count("decisions with nothing new that acted") <= count("decisions with nothing new") < steps
    assert count("CPU us deciding with nothing new") <= count("CPU us deciding")
    why = re.findall(r"^with nothing new, did nothing: (.+): (\d+)$", out, re.MULTILINE)
    assert {reason for reason, _ in why} <= {"no waiting job kept", "no victim", "victims made no room",
                                            "no pass"}
    idle = count("decisions with nothing new") - count("decisions with nothing new that acted")
    assert sum(int(n) for _, n in why) == idle > 0


def test_the_variants_change_what_is_worked_out_again() -> None:
    plain = int(re.search(r"envelopes built: (\d+)", _run()).group(1))  # type: ignore[union-attr]
    refreshed = int(re.search(r"envelopes built: (\d+)", _run("--refresh-s", "3600")).group(1))  # type: ignore[union-attr]
    assert refreshed < plain
