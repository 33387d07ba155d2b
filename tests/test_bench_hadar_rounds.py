"""benchmarks/bench_hadar_rounds.py: its counters count without changing a decision."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from tests.benchmark_scripts import BENCHMARKS, load_script

import rackwise

# Its counters replace methods that the compiled build calls directly (setup.py).
pytestmark = pytest.mark.skipif(rackwise.is_compiled(), reason="counts need the plain-Python build")

FIRST_N = 20


@pytest.mark.parametrize("perf", ["ideal", "network"])
def test_counters_leave_the_records_as_they_are_and_add_up(perf: str) -> None:
    from rackwise import traces
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.policies.registry import make_policy
    from rackwise.run import make_perf
    from rackwise.sim.engine import Simulator

    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_hadar_rounds.py"), "--first-n", str(FIRST_N),
                           "--perf", perf], capture_output=True, text=True, check=True, cwd=BENCHMARKS)
    figures = json.loads(done.stdout)
    assert figures["perf"] == perf
    topology = uniform_cluster(*load_script("bench_policies").SPEED_CLUSTERS["philly_2017"])
    jobs = traces.load("philly_2017", first_n=FIRST_N).drop_oversized(topology.n_gpus)
    records = Simulator(topology, jobs, make_policy("hadar"), perf=make_perf(perf, {}), seed=0).run().records
    assert figures["records_sha256"] == hashlib.sha256(repr(records).encode()).hexdigest()[:16]
    assert 0 < figures["rounds"] <= figures["jobs_planned"]
    assert 0 <= figures["offered_nothing_last"] <= figures["jobs_offered_nothing"] <= figures["jobs_planned"]
    assert 0 <= figures["planned_after_slot0_full"] <= figures["jobs_planned"]
    assert 0 <= figures["rounds_moved_as_planned"] <= figures["rounds"]
    assert figures["preemptions"] == sum(r.n_preemptions for r in records)
    assert figures["avg_jct_s"] == round(sum(r.jct_s for r in records) / len(records), 1)
