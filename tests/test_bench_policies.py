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


def _fifo_run(perf: PerfModel | None, seed: int = 0) -> tuple[str, int, float]:
    """The first jobs of philly_2017 under FIFO, built without the script: (records hash, steps, mean queue)."""
    from rackwise import traces
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.policies.registry import make_policy
    from rackwise.sim.engine import Simulator

    topology = uniform_cluster(64, 8, 8)
    jobs = traces.load("philly_2017", first_n=FIRST_N).drop_oversized(topology.n_gpus)
    result = Simulator(topology, jobs, make_policy("fifo"), perf=perf, seed=seed).run()
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


def test_the_seed_draws_another_workload_under_the_network_model(bench: ModuleType) -> None:
    from rackwise.perf.model import NetworkPerf

    runs = [bench.speed("fifo", "philly_2017", first_n=FIRST_N, perf="network", seed=seed) for seed in (0, 1)]
    assert [run["seed"] for run in runs] == [0, 1]
    assert [run["records_sha256"] for run in runs] == [_fifo_run(NetworkPerf(), seed)[0] for seed in (0, 1)]
    assert runs[0]["records_sha256"] != runs[1]["records_sha256"]


def test_the_network_ratio_runs_both_models_on_the_seed_asked(bench: ModuleType,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _scripted_runs(bench, monkeypatch, [{"cpu_s": 2.0, "records_sha256": "a"},
                                                {"cpu_s": 3.0, "records_sha256": "b"}])
    row = bench.network_ratio("gavel", "itp_2021", None, None, 60.0, seed=2)
    assert [args[6:] for args in asked] == [("ideal", 2), ("network", 2)]
    assert (row["seed"], row["cpu_ratio"]) == (2, 1.5)


def test_the_command_line_names_the_model_in_each_row() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "speed", "--policies", "fifo", "--traces", "philly_2017",
                           "--first-n", "50", "--perf", "network", "--seed", "3"],
                          capture_output=True, text=True, check=True)
    (row,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert (row["perf"], row["seed"], row["n_jobs"]) == ("network", 3, 50)


def test_an_unknown_model_is_refused_in_one_line() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "speed", "--perf", "roofline"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "--perf: invalid choice: 'roofline'" in done.stderr


def test_the_network_ratio_is_the_network_model_run_over_the_ideal_one() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "network-ratio", "--policies", "fifo", "--traces",
                           "philly_2017", "--first-n", str(FIRST_N), "--repeat", "1"],
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
    ({"figure": "process", "policy": "fifo", "trace": "philly_2017", "wall_s_median": 1.99}, True, 2.0, True),
    ({"figure": "process", "policy": "fifo", "trace": "philly_2017", "error": "exit code 2"}, True, 2.0, False),
])
def test_a_row_is_held_to_its_target(bench: ModuleType, row: dict[str, object], full_trace: bool,
                                     target: float, meets: bool) -> None:
    judged = bench.with_target(row, full_trace=full_trace)
    assert (judged["target"], judged["meets_target"]) == (target, meets)


@pytest.mark.parametrize(("row", "full_trace"), [({"figure": "speed", "perf": "network", "cpu_s": 1.0}, True),
                                               ({"figure": "speed", "perf": "ideal", "cpu_s": 1.0}, False),
                                               ({"figure": "network-ratio", "cpu_ratio": 1.0}, False),
                                               ({"figure": "process", "policy": "sjf", "trace": "philly_2017",
                                                 "wall_s_median": 1.0}, True)])
def test_a_row_no_target_speaks_of_carries_none(bench: ModuleType, row: dict[str, object], full_trace: bool) -> None:
    assert "target" not in bench.with_target(row, full_trace=full_trace)


def _scripted_runs(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                   runs: list[dict[str, object]]) -> list[tuple[object, ...]]:
    """``in_fresh_process`` answering with ``runs`` in turn; the calls it was asked for."""
    asked: list[tuple[object, ...]] = []
    answers = iter(runs)

    def answer(fn: str, args: tuple[object, ...], limit_s: float) -> dict[str, object]:
        asked.append((fn, *args))
        return next(answers)

    monkeypatch.setattr(bench, "in_fresh_process", answer)
    return asked


def test_linearity_is_the_ratio_of_the_least_times_of_its_repeats(bench: ModuleType,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = {"n_jobs": 10, "records_sha256": "a"}, {"n_jobs": 100, "records_sha256": "b"}
    asked = _scripted_runs(bench, monkeypatch, [{**small, "cpu_s": 0.4}, {**large, "cpu_s": 3.0},
                                                {**small, "cpu_s": 0.25, "n_steps": 20, "mean_running": 4.5},
                                                {**large, "cpu_s": 3.5},
                                                {**small, "cpu_s": 0.3},
                                                {**large, "cpu_s": 2.9, "n_steps": 230, "mean_running": 5.5}])
    row = bench.linearity("fifo", "philly_2017", 10, 60.0, repeat=3)
    assert [args[4] for args in asked] == [1, 10, 1, 10, 1, 10]  # small and large in turn
    assert (row["cpu_s_small"], row["cpu_s_large"], row["cpu_ratio"]) == (0.25, 2.9, 11.6)
    assert row["cpu_s_small_runs"] == [0.4, 0.25, 0.3] and row["cpu_s_large_runs"] == [3.0, 3.5, 2.9]
    assert (row["n_steps_small"], row["n_steps_large"], row["mean_running_small"], row["mean_running_large"]) \
        == (20, 230, 4.5, 5.5)  # of the runs the ratio is of


def test_the_network_ratio_is_of_the_least_times_of_its_repeats(bench: ModuleType,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ideal, network = {"records_sha256": "a"}, {"records_sha256": "b"}
    asked = _scripted_runs(bench, monkeypatch, [{**ideal, "cpu_s": 2.1}, {**network, "cpu_s": 4.0},
                                                {**ideal, "cpu_s": 2.0, "n_steps": 7}, {**network, "cpu_s": 4.4},
                                                {**ideal, "cpu_s": 2.2}, {**network, "cpu_s": 3.9, "n_steps": 9}])
    row = bench.network_ratio("dally", "itp_2021", None, None, 60.0, repeat=3)
    assert [args[6:] for args in asked] == [("ideal", 0), ("network", 0)] * 3  # the two models in turn
    assert (row["cpu_s_ideal"], row["cpu_s_network"], row["cpu_ratio"]) == (2.0, 3.9, 1.95)
    assert row["cpu_s_ideal_runs"] == [2.1, 2.0, 2.2] and row["cpu_s_network_runs"] == [4.0, 4.4, 3.9]
    assert (row["n_steps_ideal"], row["n_steps_network"]) == (7, 9)  # of the runs the ratio is of


def test_the_network_ratio_gives_none_when_its_repeats_keep_different_records(
        bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    _scripted_runs(bench, monkeypatch, [{"cpu_s": 2.0, "records_sha256": "a"}, {"cpu_s": 4.0, "records_sha256": "b"},
                                        {"cpu_s": 2.0, "records_sha256": "a"}, {"cpu_s": 4.0, "records_sha256": "c"}])
    row = bench.network_ratio("dally", "itp_2021", None, None, 60.0, repeat=2)
    assert "cpu_ratio" not in row and "records differ" in str(row["error"])


@pytest.mark.parametrize(("runs", "says"), [
    ([{"cpu_s": 0.3, "records_sha256": "a"}, {"skipped": "took more than 60 s"},
      {"cpu_s": 0.2, "records_sha256": "a"}, {"cpu_s": 2.0, "records_sha256": "b"}], "took more than 60 s"),
    ([{"cpu_s": 0.3, "records_sha256": "a"}, {"cpu_s": 3.0, "records_sha256": "b"},
      {"cpu_s": 0.2, "records_sha256": "c"}, {"cpu_s": 2.0, "records_sha256": "b"}], "records differ"),
])
def test_linearity_gives_no_ratio_when_a_repeat_fails_or_differs(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                                 runs: list[dict[str, object]], says: str) -> None:
    _scripted_runs(bench, monkeypatch, runs)
    row = bench.linearity("fifo", "philly_2017", 10, 60.0, repeat=2)
    assert "cpu_ratio" not in row
    assert says in str(row.get("skipped") or row.get("error"))


def test_linearity_from_several_base_copies_runs_ten_times_as_many(bench: ModuleType,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _scripted_runs(bench, monkeypatch, [{"cpu_s": 1.0, "records_sha256": "a"},
                                                {"cpu_s": 11.0, "records_sha256": "b"}])
    row = bench.linearity("asrpt", "itp_2021", 2_000, 60.0, start_s=101_017.0, base_copies=5)
    assert [args[3:] for args in asked] == [(2_000, 5, 101_017.0, "ideal", 0), (2_000, 50, 101_017.0, "ideal", 0)]
    assert (row["base_copies"], row["cpu_ratio"]) == (5, 11.0)


def test_the_process_figure_times_the_whole_command(bench: ModuleType) -> None:
    row = bench.process("fifo", "philly_2017", 1)
    assert (row["figure"], row["policy"], row["trace"]) == ("process", "fifo", "philly_2017")
    assert row["wall_s_runs"] == [row["wall_s_median"]] and row["wall_s_median"] > 0.1
    assert row["cpu_s_runs"] == [row["cpu_s_median"]] and row["cpu_s_median"] > 0.1


def test_a_process_that_fails_is_reported_with_its_message(bench: ModuleType) -> None:
    row = bench.process("no-such-policy", "philly_2017", 3)
    assert "unknown policy 'no-such-policy'" in str(row["error"])
    assert "wall_s_median" not in row
