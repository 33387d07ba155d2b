"""Fixtures for the report tests: small real results folders, and hand-made ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from rackwise.run import ClusterConfig, RunConfig, WorkloadConfig, execute, save

POLICIES = ("fifo", "sjf")
SEEDS = (0, 1)


@pytest.fixture(scope="session")
def compare_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of real runs: a tiny Philly prefix under 2 policies x 2 seeds."""
    root = tmp_path_factory.mktemp("compare")
    for policy in POLICIES:
        for seed in SEEDS:
            config = RunConfig(workload=WorkloadConfig(trace="philly_2017", first_n=40),
                               cluster=ClusterConfig(nodes=2, gpus_per_node=8, nodes_per_rack=2),
                               policy=policy, seed=seed)
            result, _ = execute(config)
            save(result, config, root / f"{policy}-s{seed}")
    return root


@pytest.fixture(scope="session")
def compare_report(compare_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of `compare_dir`, built once for the tests that only read it."""
    from rackwise.report.build import build_report

    return build_report(compare_dir, tmp_path_factory.mktemp("report") / "report.html")
