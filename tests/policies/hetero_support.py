"""Helpers for the heterogeneity-aware policy tests: a table-driven perf model and small clusters."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rackwise.cluster.topology import Node, Topology
from rackwise.workload.job import Job
from rackwise.workload.state import JobState


@dataclass
class TablePerf:
    """Whole-job iterations/s from a {(model, gpu type): rate} table.

    A job on mixed types runs at the rate of its slowest type (the
    bottleneck rule); no spread penalty, no interference, no restart cost.
    """

    table: dict[tuple[str, str], float]
    restart_s: float = 0.0
    calls: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    topology: Topology | None = None

    def prepare(self, jobs: Sequence[Job], topology: Topology,
                rng: np.random.Generator) -> list[Job]:
        self.topology = topology
        return list(jobs)

    def rate(self, job: Job, gpu_ids: tuple[int, ...], running: Mapping[str, JobState]) -> float:
        assert self.topology is not None
        self.calls.append((job.job_id, tuple(gpu_ids)))
        types = {self.topology.gpu_type_of(g) for g in gpu_ids}
        return min(self.table.get((job.model or "", t), 0.0) for t in types)

    def rates(self, running: Mapping[str, JobState], changed: Collection[str]) -> dict[str, float]:
        return {j: self.rate(running[j].job, running[j].gpu_ids, running)
                for j in changed if j in running}

    def restart_overhead_s(self, job: Job) -> float:
        return self.restart_s


def cluster(*groups: tuple[str, int, int]) -> Topology:
    """Nodes from (gpu type, number of nodes, GPUs per node) groups, one rack per group."""
    nodes: list[Node] = []
    first = 0
    for rack, (gpu_type, count, per_node) in enumerate(groups):
        for _ in range(count):
            nodes.append(Node(len(nodes), rack, gpu_type, per_node, first))
            first += per_node
    return Topology(tuple(nodes), name="test")


def job(job_id: str, model: str, iters: float, n_gpus: int = 1, submit: float = 0.0,
        **extra: object) -> Job:
    return Job(job_id=job_id, submit_time=submit, n_gpus=n_gpus, duration_s=iters,
               total_iters=iters, model=model, **extra)  # type: ignore[arg-type]
