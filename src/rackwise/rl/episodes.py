"""Episode workloads: windows of a shipped trace and synthetic draws, at a chosen offered load.

Trace windows are split by time: the first ``TRAIN_FRAC`` of a trace's jobs
(by submit time) feed training, the rest evaluation, so evaluation windows
are never seen in training. Every window is rebased to start at 0, its
durations are clipped to ``[60 s, 8 h]`` (one episode then simulates in
about a second) and its gaps are scaled so that the offered load on the
cluster is the one asked for (`rackwise.workload.synthetic` defines load).
"""

from __future__ import annotations

import functools

import numpy as np

from rackwise import traces
from rackwise.workload.job import Job
from rackwise.workload.synthetic import WorkloadModel, generate

TRAIN_FRAC = 0.7
MIN_DURATION_S = 60.0
MAX_DURATION_S = 8 * 3600.0


@functools.lru_cache(maxsize=4)
def _trace(name: str) -> tuple[Job, ...]:
    return tuple(traces.load(name))


def _split(name: str, split: str) -> tuple[Job, ...]:
    jobs = _trace(name)
    cut = int(len(jobs) * TRAIN_FRAC)
    if split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
    return jobs[:cut] if split == "train" else jobs[cut:]


def shape_window(jobs: list[Job], *, load: float, cluster_gpus: int) -> list[Job]:
    """Rebase, clip durations, drop jobs wider than the cluster, and scale gaps to ``load``."""
    jobs = [j for j in jobs if j.n_gpus <= cluster_gpus]
    if not jobs:
        return []
    durations = np.clip([j.duration_s for j in jobs], MIN_DURATION_S, MAX_DURATION_S)
    demand = float(np.sum(durations * np.asarray([j.n_gpus for j in jobs])))
    submits = np.asarray([j.submit_time for j in jobs]) - jobs[0].submit_time
    span = float(submits[-1])
    # gaps scaled so that demand / (gpus * span) equals load (an instant burst if span is 0)
    scale = demand / (load * cluster_gpus * span) if span > 0 else 0.0
    return [Job(job_id=j.job_id, submit_time=float(s * scale), n_gpus=j.n_gpus,
                duration_s=float(d), group=j.group)
            for j, s, d in zip(jobs, submits.tolist(), durations.tolist())]


def trace_window(name: str, rng: np.random.Generator, *, n_jobs: int, load: float,
                 cluster_gpus: int, split: str = "train", start: int | None = None) -> list[Job]:
    """``n_jobs`` consecutive jobs of a shipped trace (a random start in the split, or ``start``)."""
    pool = _split(name, split)
    first = int(rng.integers(0, len(pool) - n_jobs)) if start is None else start
    return shape_window(list(pool[first:first + n_jobs]), load=load, cluster_gpus=cluster_gpus)


@functools.lru_cache(maxsize=4)
def _model(name: str) -> WorkloadModel:
    return WorkloadModel.fit(_split(name, "train"))


def synthetic_window(name: str, rng: np.random.Generator, *, n_jobs: int, load: float,
                     cluster_gpus: int) -> list[Job]:
    """``n_jobs`` drawn from the shapes of a trace's training split, Poisson arrivals at ``load``."""
    drawn = generate(_model(name), n_jobs, load=load, cluster_gpus=cluster_gpus, rng=rng)
    return shape_window(list(drawn.jobs), load=load, cluster_gpus=cluster_gpus)


def sample_episode(sources: tuple[str, ...], rng: np.random.Generator, *, n_jobs: int,
                   load: float, cluster_gpus: int) -> list[Job]:
    """One training episode: a source such as ``"philly_2017"`` (a trace window) or
    ``"synthetic:philly_2017"`` (a synthetic draw), picked uniformly."""
    source = sources[int(rng.integers(0, len(sources)))]
    kind, _, name = source.rpartition(":")
    if kind == "synthetic":
        return synthetic_window(name, rng, n_jobs=n_jobs, load=load, cluster_gpus=cluster_gpus)
    return trace_window(name, rng, n_jobs=n_jobs, load=load, cluster_gpus=cluster_gpus)
