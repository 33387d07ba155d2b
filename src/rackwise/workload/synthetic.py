"""Synthetic workloads: job shapes resampled from a trace, Poisson arrivals at a chosen load.

Offered load is the GPU-seconds the jobs demand per second of arrivals,
divided by the cluster's GPUs. With mean job demand ``E[n_gpus *
duration_s]`` and arrival rate ``rate_per_s``, it is ``rate_per_s *
E[n_gpus * duration_s] / cluster_gpus``; `generate` solves this for the
rate. A load of 1.0 keeps a perfectly packed cluster exactly busy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from rackwise.errors import InputError
from rackwise.workload.job import Job
from rackwise.workload.workload import Workload


@dataclass(frozen=True, eq=False)
class WorkloadModel:
    """An empirical model of job shapes.

    Attributes:
        n_gpus: GPU count of each observed job.
        duration_s: Duration of each observed job (paired with ``n_gpus``:
            sampling a row keeps the joint distribution of size and length).
        groups: Observed groups, sorted (``()`` when no job had one).
        group_shares: Fraction of jobs in each of ``groups``.
    """

    n_gpus: np.ndarray
    duration_s: np.ndarray
    groups: tuple[str, ...] = ()
    group_shares: tuple[float, ...] = ()

    @classmethod
    def fit(cls, jobs: Iterable[Job]) -> WorkloadModel:
        """The empirical joint distribution of (n_gpus, duration_s) and group shares of ``jobs``."""
        jobs = list(jobs)
        if not jobs:
            raise InputError("cannot fit a workload model to no jobs", field="jobs")
        n_gpus = np.fromiter((job.n_gpus for job in jobs), dtype=np.int64, count=len(jobs))
        duration_s = np.fromiter((job.duration_s for job in jobs), dtype=np.float64,
                                 count=len(jobs))
        counts: dict[str, int] = {}
        for job in jobs:
            if job.group is not None:
                counts[job.group] = counts.get(job.group, 0) + 1
        groups = tuple(sorted(counts))
        total = sum(counts.values())
        shares = tuple(counts[group] / total for group in groups)
        n_gpus.setflags(write=False)
        duration_s.setflags(write=False)
        return cls(n_gpus=n_gpus, duration_s=duration_s, groups=groups, group_shares=shares)

    @property
    def mean_gpu_seconds(self) -> float:
        """Mean GPU-seconds one job demands."""
        return float(np.mean(self.n_gpus * self.duration_s))

    def gpu_count_shares(self) -> dict[int, float]:
        """Fraction of jobs asking for each GPU count."""
        sizes, counts = np.unique(self.n_gpus, return_counts=True)
        return {int(size): float(count) / len(self.n_gpus) for size, count in zip(sizes, counts)}


def arrival_rate_per_s(model: WorkloadModel, *, load: float, cluster_gpus: int) -> float:
    """Poisson arrival rate (jobs per second) that offers ``load`` to ``cluster_gpus`` GPUs."""
    return load * cluster_gpus / model.mean_gpu_seconds


def generate(model: WorkloadModel, n_jobs: int, *, load: float, cluster_gpus: int,
             rng: np.random.Generator) -> Workload:
    """Draw a synthetic workload.

    The first job submits at 0 and gaps between submissions are exponential
    with mean ``1 / arrival_rate_per_s(...)``. Each job's size and duration
    are one observed pair drawn uniformly from the model; its group is drawn
    independently from the model's group shares.

    Args:
        model: Job shapes to sample.
        n_jobs: Number of jobs.
        load: Target offered load (> 0), as a fraction of ``cluster_gpus``.
        cluster_gpus: GPUs of the cluster the load refers to.
        rng: The only source of randomness; same state, same workload.

    Returns:
        Jobs ``"0"``..``str(n_jobs - 1)`` in submit order.
    """
    if n_jobs < 1:
        raise InputError(f"must be at least 1, got {n_jobs}", field="n_jobs")
    if not load > 0.0 or not np.isfinite(load):
        raise InputError(f"must be a positive number, got {load}", field="load")
    if cluster_gpus < 1:
        raise InputError(f"must be at least 1, got {cluster_gpus}", field="cluster_gpus")
    mean_gap_s = 1.0 / arrival_rate_per_s(model, load=load, cluster_gpus=cluster_gpus)
    gaps_s = rng.exponential(mean_gap_s, size=n_jobs - 1)
    submit_times = np.concatenate(([0.0], np.cumsum(gaps_s))).tolist()
    rows = rng.integers(0, len(model.n_gpus), size=n_jobs)
    sizes = model.n_gpus[rows].tolist()
    durations = model.duration_s[rows].tolist()
    if model.groups:
        picks = rng.choice(len(model.groups), size=n_jobs, p=np.asarray(model.group_shares))
        groups: list[str | None] = [model.groups[i] for i in picks.tolist()]
    else:
        groups = [None] * n_jobs
    jobs = tuple(Job(job_id=str(i), submit_time=submit_times[i], n_gpus=sizes[i],
                     duration_s=durations[i], group=groups[i]) for i in range(n_jobs))
    return Workload(jobs=jobs, name="synthetic",
                    source=f"synthetic(load={load:g}, cluster_gpus={cluster_gpus})")
