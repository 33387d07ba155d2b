"""Shared pieces of the forecast tests: a small simulated run snapshotted mid-way."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from forecast_runs import take

from rackwise.engine.snapshot import ClusterSnapshot

# the Slurm fixture lives beside the backend tests
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))


@pytest.fixture
def snapshot() -> ClusterSnapshot:
    return take()
