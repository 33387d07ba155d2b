"""Tests for rackwise.sim.collector: the collector's settings last exactly as long as a run."""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import ClassVar

import pytest

from rackwise.cluster.topology import uniform_cluster
from rackwise.policies.base import BasePolicy, Decisions
from rackwise.policies.fifo import Fifo
from rackwise.sim.collector import YOUNG_THRESHOLD, long_lived_objects
from rackwise.sim.engine import simulate
from rackwise.workload.job import Job


def _settings() -> tuple[tuple[int, ...], int]:
    return gc.get_threshold(), gc.get_freeze_count()


def test_nested_blocks_keep_objects_frozen_until_the_outermost_ends() -> None:
    before = _settings()
    with long_lived_objects():
        outer = gc.get_freeze_count()
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD and outer > 0
        made_between = [[] for _ in range(10)]  # tracked objects the inner block freezes too
        with long_lived_objects():
            assert gc.get_freeze_count() >= outer + len(made_between)
        # The inner block's end neither unfreezes (which would leave none) nor restores.
        assert gc.get_freeze_count() >= outer + len(made_between)
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert _settings() == before


@dataclass(kw_only=True)
class Broken(BasePolicy):
    """Fails at its first decision."""

    name: ClassVar[str] = "broken"

    def schedule(self, view: object, now: float) -> Decisions:
        raise RuntimeError("no decision")


def test_a_run_restores_the_collector_whether_it_ends_or_fails() -> None:
    jobs = [Job("a", 0.0, 1, 5.0), Job("b", 3.0, 2, 5.0)]
    before = _settings()
    result = simulate(uniform_cluster(1, gpus_per_node=2), jobs, Fifo())
    assert len(result.records) == 2 and _settings() == before
    with pytest.raises(RuntimeError, match="no decision"):
        simulate(uniform_cluster(1, gpus_per_node=2), jobs, Broken())
    assert _settings() == before
