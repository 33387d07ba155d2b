"""Shared pieces of the rl tests: tiny clusters, workloads and a crowding performance model."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from rackwise.cluster.topology import Topology
from rackwise.perf.base import IdealPerf
from rackwise.workload.job import Job


class Crowded(IdealPerf):
    """Trace speed divided by (1 + ``penalty`` x other jobs on the job's busiest node)."""

    def __init__(self, penalty: float = 1.0) -> None:
        super().__init__()
        self.penalty = penalty
        self.topology: Topology | None = None

    def prepare(self, jobs: Sequence[Job], topology: Topology, rng: np.random.Generator) -> list[Job]:
        self.topology = topology
        return list(jobs)

    def rate(self, job, gpu_ids, running) -> float:  # type: ignore[no-untyped-def]
        assert self.topology is not None
        nodes = {self.topology.gpu_node[g] for g in gpu_ids}
        crowd = max(sum(1 for other in running.values() if other.job_id != job.job_id
                        and nodes_of(self.topology, other.gpu_ids) & {n}) for n in nodes)
        return super().rate(job, gpu_ids, running) / (1.0 + self.penalty * crowd)

    def rates(self, running: Mapping, changed: Collection[str]) -> dict[str, float]:  # type: ignore[type-arg]
        return {job_id: self.rate(s.job, s.gpu_ids, running) for job_id, s in running.items()}


def nodes_of(topology: Topology, gpu_ids: Sequence[int]) -> set[int]:
    return {topology.gpu_node[g] for g in gpu_ids}


def steady_jobs(n: int = 12, gap_s: float = 30.0, duration_s: float = 100.0,
                groups: Sequence[str] = ("a",)) -> list[Job]:
    """One-GPU jobs arriving every ``gap_s``, groups in turn."""
    return [Job(f"j{i:02d}", i * gap_s, 1, duration_s, group=groups[i % len(groups)])
            for i in range(n)]
