"""Fixtures for the backend tests: a real Slurm cluster on loopback (see slurm_cluster.py).

Without the Slurm binaries the tests that need them are skipped, except
under CI (``CI=true``), where a missing binary is an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from slurm_cluster import NODES, LoopbackSlurm, slurm_missing_reason


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSlurm]:
    """A running four-node cluster, shared by one test module."""
    reason = slurm_missing_reason()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must run the Slurm tests: {reason}")
        pytest.skip(reason)
    cluster = LoopbackSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm(slurm_cluster: LoopbackSlurm) -> Iterator[LoopbackSlurm]:
    """The shared cluster, emptied of jobs and with every node back up, before and after a test."""
    _restore(slurm_cluster)
    yield slurm_cluster
    _restore(slurm_cluster)


def _restore(cluster: LoopbackSlurm) -> None:
    cluster.cancel_all()
    if any(cluster.gpus_counted_used().values()):
        # Slurm's GPU accounting kept GPUs of a requeued job; only a restart rebuilds it.
        cluster.restart_controller(down_s=0.0)
    for name in NODES:
        if name not in cluster.slurmd or cluster.slurmd[name].poll() is not None:
            cluster.start_node(name)
    states = cluster.node_states()
    for name in NODES:
        if states.get(name, "").startswith(("down", "drain")):
            cluster.run(["scontrol", "update", f"NodeName={name}", "State=RESUME"], check=False)
    cluster.wait_idle(NODES, timeout_s=30)
