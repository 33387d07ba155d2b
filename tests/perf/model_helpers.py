"""Shared set-up of the performance-model tests."""

from __future__ import annotations

import numpy as np

from rackwise.cluster.topology import Topology
from rackwise.perf.model import NetworkPerf
from rackwise.workload.job import Job
from rackwise.workload.state import JobState


def prepared(perf: NetworkPerf, topology: Topology, *jobs: Job) -> list[Job]:
    """The jobs as ``perf`` fills them in for ``topology`` (seed 0)."""
    return perf.prepare(list(jobs), topology, np.random.default_rng(0))


def placed(job: Job, gpu_ids: tuple[int, ...]) -> JobState:
    """A state of ``job`` holding ``gpu_ids``."""
    state = JobState(job)
    state.gpu_ids = gpu_ids
    return state
