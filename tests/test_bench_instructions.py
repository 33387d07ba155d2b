"""benchmarks/bench_instructions.py: the instructions of a run's simulation, counted by cachegrind."""

from __future__ import annotations

import shutil
from types import ModuleType

import pytest
from tests.benchmark_scripts import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_instructions")


def test_the_count_is_read_from_cachegrinds_report(bench: ModuleType) -> None:
    report = "==41== Command: python -c ...\n==41== \n==41== I   refs:      1,396,887,306\n"
    assert bench.instructions(report) == 1_396_887_306
    with pytest.raises(ValueError, match="no 'I refs' line"):
        bench.instructions("==41== Command: python\nKilled\n")


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_a_run_counts_its_simulation_apart_from_its_setup_and_gives_the_records_of_speed(
        bench: ModuleType) -> None:
    policies = load_script("bench_policies")
    row = bench.measure(None, "fifo", "philly_2017", 40, "ideal")
    assert row["records_sha256"] == policies.speed("fifo", "philly_2017", first_n=40)["records_sha256"]
    assert row["n_jobs"] == 40 and row["n_steps"] > 40
    assert 0 < row["instructions_simulation"] < row["instructions_setup"]  # 40 jobs: the imports cost more
    assert row["instructions_total"] == row["instructions_setup"] + row["instructions_simulation"]
