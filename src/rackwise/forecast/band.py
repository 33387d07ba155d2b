"""Uncertainty bands: many forward runs, each on durations drawn from the predictor's errors.

Sample k draws, for every job, a total duration from the snapshot's
actual/predicted ratios (`durations.sample_total_s`: a running job's draw
is conditioned on how long it has already run), and, when an arrival model
is given, its own future arrivals. Each sample's generator comes from
``SeedSequence(seed).spawn(n)[k]``, so the band is the same however the
samples are spread over processes or Ray workers.
"""

from __future__ import annotations

import math
import os
from bisect import bisect_right
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from rackwise.engine.snapshot import ClusterSnapshot
from rackwise.errors import InputError, MissingExtraError
from rackwise.forecast.durations import ratios_for, sample_total_s
from rackwise.forecast.forward import Forecast, done_s, forecast_ids, forward, start_finish_s
from rackwise.workload.job import Job
from rackwise.workload.synthetic import WorkloadModel

QUANTILES = (10, 50, 90)


@dataclass(frozen=True, slots=True)
class ArrivalModel:
    """Poisson arrivals of job shapes resampled from a fitted `WorkloadModel`."""

    model: WorkloadModel
    rate_per_s: float
    horizon_s: float

    def draw(self, after_s: float, rng: np.random.Generator) -> list[Job]:
        """Jobs submitted in ``(after_s, after_s + horizon_s]``, ids ``~0``, ``~1``, ..."""
        if self.rate_per_s <= 0:
            return []
        n = int(rng.poisson(self.rate_per_s * self.horizon_s))
        times = np.sort(rng.uniform(after_s, after_s + self.horizon_s, size=n))
        rows = rng.integers(0, len(self.model.n_gpus), size=n)
        return [Job(f"~{i}", float(times[i]), int(self.model.n_gpus[rows[i]]),
                    float(self.model.duration_s[rows[i]])) for i in range(n)]


def arrival_model_of(snapshot: ClusterSnapshot, horizon_s: float) -> ArrivalModel | None:
    """The snapshot's fitted arrival model, if it carries one."""
    if not snapshot.arrival_shapes or snapshot.arrival_rate_per_s <= 0:
        return None
    sizes, durations = zip(*snapshot.arrival_shapes)
    model = WorkloadModel(n_gpus=np.asarray(sizes, dtype=np.int64),
                          duration_s=np.asarray(durations, dtype=np.float64))
    return ArrivalModel(model, snapshot.arrival_rate_per_s, horizon_s)


@dataclass(frozen=True, slots=True)
class JobBand:
    """p10/p50/p90 of one job's next start and finish (inf: not in the forward run)."""

    job_id: str
    start_s: tuple[float, float, float]
    finish_s: tuple[float, float, float]


def sampled_durations(snapshot: ClusterSnapshot, rng: np.random.Generator,
                      correlation: float | None = None) -> dict[str, float]:
    """One draw of every job's total duration (`durations.sample_total_s` for each).

    The quantiles drawn follow a Gaussian copula: every job's normal score is
    ``sqrt(correlation) * common + sqrt(1 - correlation) * own``. Prediction
    errors of jobs in one cluster move together (a busy week, a new model
    version); drawn independently they cancel along a queue and the band comes
    out far too narrow. ``correlation`` defaults to the snapshot's
    ``error_correlation`` (0.5 unless it was fitted, see docs/forecast.md).
    """
    from scipy.special import ndtr

    if correlation is None:
        correlation = snapshot.error_correlation
    quantiles = _quantiles_of(snapshot)
    common = rng.standard_normal()
    own = rng.standard_normal(len(quantiles.job_ids))
    return quantiles.at(ndtr(math.sqrt(correlation) * common + math.sqrt(1.0 - correlation) * own))


class _Quantiles:
    """Every job's total duration as a function of the quantile drawn for it.

    `durations.sample_total_s`, with what depends only on the snapshot (the
    prediction, the work done, which ratios a job draws from) worked out
    once, so that a sample costs a few array operations per ratio group.
    """

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        now, error, predicted = snapshot.taken_at_s, snapshot.duration_error, snapshot.predicted_duration_s
        jobs = [(state.job, predicted[state.job_id],
                 done_s(state, now) if state.status.value == "running" else 0.0)
                for state in (*snapshot.running, *snapshot.pending)]
        jobs += [(job, predicted.get(job.job_id, job.duration_s), 0.0) for job in snapshot.arrivals]
        self.job_ids = [job.job_id for job, _, _ in jobs]
        self.fixed = np.empty(len(jobs))  # the value of jobs whose draw does not matter
        drawn: dict[int, tuple[Sequence[float], list[int], list[int], list[float]]] = {}
        for position, (job, predicted_s, elapsed_s) in enumerate(jobs):
            ratios = ratios_for(job, error)
            low = bisect_right(ratios, elapsed_s / predicted_s) if elapsed_s > 0 and ratios else 0
            if low >= len(ratios):  # no ratio, or none this long: no quantile to draw
                self.fixed[position] = sample_total_s(predicted_s, elapsed_s, ratios, 0.0)
                continue
            _, positions, lows, predictions = drawn.setdefault(id(ratios), (ratios, [], [], []))
            positions.append(position)
            lows.append(low)
            predictions.append(predicted_s)
        self.groups = [(np.asarray(ratios), np.asarray(positions), np.asarray(lows),
                        len(ratios) - np.asarray(lows), np.asarray(predictions))
                       for ratios, positions, lows, predictions in drawn.values()]

    def at(self, u: np.ndarray) -> dict[str, float]:
        """Durations by job id for quantiles ``u`` (in `job_ids` order)."""
        values = self.fixed.copy()
        for ratios, positions, lows, spans, predictions in self.groups:
            index = lows + np.minimum((u[positions] * spans).astype(np.int64), spans - 1)
            values[positions] = np.maximum(predictions * ratios[index], 1e-3)
        return dict(zip(self.job_ids, values.tolist()))


_LAST_QUANTILES: list[tuple[ClusterSnapshot, _Quantiles]] = []  # the last snapshot's, reused by its samples


def _quantiles_of(snapshot: ClusterSnapshot) -> _Quantiles:
    # Read once into locals: `serve` may draw bands of two snapshots in two threads.
    cached = _LAST_QUANTILES[0] if _LAST_QUANTILES else None
    if cached is not None and cached[0] is snapshot:
        return cached[1]
    quantiles = _Quantiles(snapshot)
    _LAST_QUANTILES[:] = [(snapshot, quantiles)]
    return quantiles


def one_sample(snapshot: ClusterSnapshot, seed: int, index: int, n_samples: int,
               arrivals: ArrivalModel | None, fresh_policy: bool) -> np.ndarray:
    """(start, finish) of every job in sample ``index``, in `forecast_ids` order (inf: none)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(n_samples)[index])
    durations = sampled_durations(snapshot, rng)
    extra = arrivals.draw(snapshot.taken_at_s, rng) if arrivals is not None else []
    return start_finish_s(snapshot, seed=seed, durations_s=durations, extra_arrivals=extra,
                          fresh_policy=fresh_policy)


_WORKER_SNAPSHOT: ClusterSnapshot | None = None


def _init_worker(snapshot: ClusterSnapshot) -> None:
    global _WORKER_SNAPSHOT
    _WORKER_SNAPSHOT = snapshot


def _worker(args: tuple[int, int, int, ArrivalModel | None, bool]) -> np.ndarray:
    seed, index, n, arrivals, fresh = args
    assert _WORKER_SNAPSHOT is not None
    return one_sample(_WORKER_SNAPSHOT, seed, index, n, arrivals, fresh)


def band(snapshot: ClusterSnapshot, *, n_samples: int = 100, seed: int = 0,
         workers: int | None = None, use_ray: bool = False,
         arrivals: ArrivalModel | None = None, fresh_policy: bool = False) -> list[JobBand]:
    """p10/p50/p90 of start and finish for every job, from ``n_samples`` forward runs.

    Args:
        snapshot: Where to start.
        n_samples: Forward runs.
        seed: Same seed, same band.
        workers: Local processes (default: the machine's cores; 1 runs in-process).
        use_ray: Spread the runs over Ray instead (needs ``ray`` importable).
        arrivals: Draw further arrivals in each run.
        fresh_policy: Ignore the live policy state.
    """
    if n_samples < 1:
        raise InputError(f"must be at least 1, got {n_samples}", field="samples")
    tasks = [(seed, k, n_samples, arrivals, fresh_policy) for k in range(n_samples)]
    if use_ray:
        results = _run_ray(snapshot, tasks)
    else:
        workers = workers or os.cpu_count() or 1
        if workers <= 1 or n_samples == 1:
            results = [one_sample(snapshot, *t[:2], n_samples, *t[3:]) for t in tasks]
        else:
            # One sample per task: samples differ in length, and chunks of them left
            # one worker running alone at the end.
            with ProcessPoolExecutor(max_workers=min(workers, n_samples), initializer=_init_worker,
                                     initargs=(snapshot,)) as pool:
                results = list(pool.map(_worker, tasks))
    return summarize(forecast_ids(snapshot), results)


def _run_ray(snapshot: ClusterSnapshot,
             tasks: Sequence[tuple[int, int, int, ArrivalModel | None, bool]]) -> list[np.ndarray]:
    try:
        import ray
    except ImportError:
        raise MissingExtraError("--ray needs ray: pip install ray") from None
    if not ray.is_initialized():
        ray.init(ignore_reinit_error=True, log_to_driver=False)
    remote = ray.remote(one_sample)
    shared = ray.put(snapshot)
    return list(ray.get([remote.remote(shared, s, k, n, a, f) for s, k, n, a, f in tasks]))


def summarize(job_ids: Sequence[str], samples: Sequence[np.ndarray]) -> list[JobBand]:
    """Per-job percentiles over samples, ordered by job id.

    ``samples[k][j]`` is (start, finish) of ``job_ids[j]`` in sample k (inf: never).
    """
    if not job_ids:
        return []
    cuts = np.percentile(np.stack(samples), QUANTILES, axis=0, method="inverted_cdf")  # (q, job, 2)
    return [JobBand(job_ids[j], tuple(cuts[:, j, 0].tolist()), tuple(cuts[:, j, 1].tolist()))
            for j in sorted(range(len(job_ids)), key=job_ids.__getitem__)]


def forecast_with_band(snapshot: ClusterSnapshot, *, n_samples: int, seed: int = 0,
                       workers: int | None = None, use_ray: bool = False,
                       arrivals: ArrivalModel | None = None,
                       fresh_policy: bool = False) -> tuple[Forecast, dict[str, JobBand]]:
    """The point forecast and, for ``n_samples > 0``, its band by job id."""
    point = forward(snapshot, seed=seed, fresh_policy=fresh_policy,
                    extra_arrivals=arrivals.draw(snapshot.taken_at_s, np.random.default_rng(seed))
                    if arrivals is not None else ())
    if n_samples <= 0:
        return point, {}
    bands = band(snapshot, n_samples=n_samples, seed=seed, workers=workers, use_ray=use_ray,
                 arrivals=arrivals, fresh_policy=fresh_policy)
    return point, {b.job_id: b for b in bands}
