"""benchmarks/bench_policies.py speed: which performance model a row was simulated under."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from types import ModuleType

import pytest
from tests.benchmark_scripts import BENCHMARKS, load_script

from rackwise.perf.base import PerfModel

SCRIPT = BENCHMARKS / "bench_policies.py"
FIRST_N = 300


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_policies")


def _records_sha256(perf: PerfModel | None) -> str:
    """The records hash of the first jobs of philly_2017 under FIFO, built without the script."""
    from rackwise import traces
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.policies.registry import make_policy
    from rackwise.sim.engine import Simulator

    topology = uniform_cluster(64, 8, 8)
    jobs = traces.load("philly_2017", first_n=FIRST_N).drop_oversized(topology.n_gpus)
    records = Simulator(topology, jobs, make_policy("fifo"), perf=perf, seed=0).run().records
    return hashlib.sha256(repr(records).encode()).hexdigest()[:16]


def test_each_model_gives_the_records_of_that_model(bench: ModuleType) -> None:
    from rackwise.perf.model import NetworkPerf

    ideal = bench.speed("fifo", "philly_2017", first_n=FIRST_N)
    network = bench.speed("fifo", "philly_2017", first_n=FIRST_N, perf="network")
    assert (ideal["perf"], network["perf"]) == ("ideal", "network")
    assert ideal["records_sha256"] == _records_sha256(None)  # the simulator's default model
    assert network["records_sha256"] == _records_sha256(NetworkPerf())
    assert ideal["records_sha256"] != network["records_sha256"]


def test_the_command_line_names_the_model_in_each_row() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "speed", "--policies", "fifo", "--traces", "philly_2017",
                           "--first-n", "50", "--perf", "network"],
                          capture_output=True, text=True, check=True)
    (row,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert (row["perf"], row["n_jobs"]) == ("network", 50)


def test_an_unknown_model_is_refused_in_one_line() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "speed", "--perf", "roofline"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "--perf: invalid choice: 'roofline'" in done.stderr
