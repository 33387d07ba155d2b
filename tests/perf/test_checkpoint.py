"""Preemption cost: fixed restart plus writing and reading the checkpoint."""

from __future__ import annotations

import pytest

from rackwise.perf.checkpoint import restart_overhead_s
from rackwise.perf.config import PerfConfig
from rackwise.perf.model import NetworkPerf
from rackwise.workload.job import Job


def test_formula_by_hand() -> None:
    # 2 GB written at 1 GB/s and read at 2 GB/s, plus 30 s: 30 + 2 + 1
    assert restart_overhead_s(2e9, write_gbytes_per_s=1.0, read_gbytes_per_s=2.0,
                              fixed_s=30.0) == pytest.approx(33.0)


def test_model_uses_checkpoint_bytes_of_the_catalogue() -> None:
    perf = NetworkPerf()
    job = Job("a", 0.0, 1, 10.0, model="ResNet-50 (batch size 64)")
    # 25.6 M params x 8 B (weights + momentum) = 204.8 MB -> 0.2048 s + 0.1024 s
    assert perf.restart_overhead_s(job) == pytest.approx(30.0 + 0.2048 + 0.1024)


def test_configurable() -> None:
    perf = NetworkPerf(PerfConfig(restart_fixed_s=5.0, storage_write_gbytes_per_s=0.5,
                                  storage_read_gbytes_per_s=0.5))
    job = Job("a", 0.0, 1, 10.0, model_bytes=1e9)
    assert perf.restart_overhead_s(job) == pytest.approx(5.0 + 2.0 + 2.0)
