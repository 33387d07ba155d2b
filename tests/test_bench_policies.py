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


def _fifo_run(perf: PerfModel | None) -> tuple[str, int, float]:
    """The first jobs of philly_2017 under FIFO, built without the script: (records hash, steps, mean queue)."""
    from rackwise import traces
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.policies.registry import make_policy
    from rackwise.sim.engine import Simulator

    topology = uniform_cluster(64, 8, 8)
    jobs = traces.load("philly_2017", first_n=FIRST_N).drop_oversized(topology.n_gpus)
    result = Simulator(topology, jobs, make_policy("fifo"), perf=perf, seed=0).run()
    waiting = result.timeline.n_pending
    return (hashlib.sha256(repr(result.records).encode()).hexdigest()[:16], result.n_steps,
            round(sum(waiting) / len(waiting), 1))


def test_each_model_gives_the_records_of_that_model(bench: ModuleType) -> None:
    from rackwise.perf.model import NetworkPerf

    ideal = bench.speed("fifo", "philly_2017", first_n=FIRST_N)
    network = bench.speed("fifo", "philly_2017", first_n=FIRST_N, perf="network")
    assert (ideal["perf"], network["perf"]) == ("ideal", "network")
    assert ideal["records_sha256"] == _fifo_run(None)[0]  # the simulator's default model
    assert network["records_sha256"] == _fifo_run(NetworkPerf())[0]
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


def test_the_network_ratio_is_the_network_model_run_over_the_ideal_one() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "network-ratio", "--policies", "fifo", "--traces",
                           "philly_2017", "--first-n", str(FIRST_N)],
                          capture_output=True, text=True, check=True)
    (row,) = [json.loads(line) for line in done.stdout.splitlines()]
    from rackwise.perf.model import NetworkPerf

    for model, perf in (("ideal", None), ("network", NetworkPerf())):
        expected = _fifo_run(perf)
        assert (row[f"records_sha256_{model}"], row[f"n_steps_{model}"], row[f"mean_pending_{model}"]) == expected
    assert row["cpu_ratio"] == round(row["cpu_s_network"] / max(row["cpu_s_ideal"], 1e-3), 2)
    assert "meets_target" not in row  # the target speaks of whole traces


@pytest.mark.parametrize(("row", "full_trace", "target", "meets"), [
    ({"figure": "speed", "perf": "ideal", "cpu_s": 59.9}, True, 60.0, True),
    ({"figure": "speed", "perf": "ideal", "cpu_s": 60.0}, True, 60.0, False),
    ({"figure": "speed", "perf": "ideal", "skipped": "took more than 300 s"}, True, 60.0, False),
    ({"figure": "network-ratio", "cpu_ratio": 2.01}, True, 2.0, False),
    ({"figure": "network-ratio", "cpu_ratio": 1.5}, True, 2.0, True),
    ({"figure": "decision", "policy": "tiresias", "decision_ms_median": 51.0}, True, 50.0, False),
    ({"figure": "decision", "policy": "gavel", "decision_ms_median": 51.0}, True, 1_000.0, True),
    ({"figure": "linearity", "cpu_ratio": 12.5}, True, 12.0, False),
])
def test_a_row_is_held_to_its_target(bench: ModuleType, row: dict[str, object], full_trace: bool,
                                     target: float, meets: bool) -> None:
    judged = bench.with_target(row, full_trace=full_trace)
    assert (judged["target"], judged["meets_target"]) == (target, meets)


@pytest.mark.parametrize(("row", "full_trace"), [({"figure": "speed", "perf": "network", "cpu_s": 1.0}, True),
                                               ({"figure": "speed", "perf": "ideal", "cpu_s": 1.0}, False),
                                               ({"figure": "network-ratio", "cpu_ratio": 1.0}, False)])
def test_a_row_no_target_speaks_of_carries_none(bench: ModuleType, row: dict[str, object], full_trace: bool) -> None:
    assert "target" not in bench.with_target(row, full_trace=full_trace)
