"""Predicted durations, and how wrong such predictions were on finished jobs.

With scikit-learn installed and enough history, A-SRPT's predictor
(`rackwise.policies.parts.predictor`) builds each job's features from the
jobs finished before it, and a random forest of the same kind learns
``log1p(duration)``. Its errors are measured out of sample: the forest is
fitted on the older part of the history and asked about the newer part.
Otherwise the predictor's cold-start rules (same model, same group, global
median) predict, and their own errors on the history are the distribution.

Errors are kept as actual/predicted ratios per job group; key ``""`` pools
every group. Sampling a duration is ``prediction x ratio``.

How much of the error jobs share (`error_correlation`) is measured on the
same finished jobs: jobs that finished close together are more often all
too long, or all too short, than jobs far apart.
"""

from __future__ import annotations

import importlib.util
import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rackwise.engine.snapshot import DEFAULT_ERROR_CORRELATION
from rackwise.policies.parts.predictor import IterationPredictor
from rackwise.workload.job import Job

MIN_FOREST_HISTORY = 60  # finished jobs before the forest is tried
HOLDOUT_FRAC = 0.3  # newest share of the history that measures the forest's error
MAX_RATIOS = 2_000  # ratios kept per group (the newest)
N_TREES = 50
ALL = ""
WINDOW_JOBS = 50  # consecutive finished jobs that form one window of the correlation estimate
MIN_CORRELATION_JOBS = 50  # fewer measured errors: the correlation falls back to the default
MAX_CORRELATION = 0.95  # a band needs some error of each job's own


def sklearn_available() -> bool:
    return importlib.util.find_spec("sklearn") is not None


@dataclass(frozen=True)
class FittedDurations:
    """Predicted durations and the predictor's errors on finished jobs.

    Attributes:
        predicted_s: Predicted duration of each target job, by id.
        duration_error: Sorted actual/predicted ratios by group (``""``: all).
        error_correlation: Share of the error that jobs finishing together
            have in common (see `error_correlation`).
    """

    predicted_s: dict[str, float]
    duration_error: dict[str, tuple[float, ...]]
    error_correlation: float


def predict_durations(history: Sequence[Job], targets: Sequence[Job], *,
                      use_forest: bool | None = None, seed: int = 0,
                      ) -> tuple[dict[str, float], dict[str, tuple[float, ...]]]:
    """Predicted duration of each target job, and error ratios by group.

    The first two parts of `fit_durations`, which takes the same arguments.
    """
    fitted = fit_durations(history, targets, use_forest=use_forest, seed=seed)
    return fitted.predicted_s, fitted.duration_error


def fit_durations(history: Sequence[Job], targets: Sequence[Job], *,
                  use_forest: bool | None = None, seed: int = 0,
                  window_jobs: int = WINDOW_JOBS) -> FittedDurations:
    """Predict the targets' durations; measure the errors and their correlation on the history.

    Args:
        history: Finished jobs, in the order they finished; ``duration_s``
            is what each actually took.
        targets: Jobs to predict (running, pending or arriving).
        use_forest: None: when scikit-learn is there and the history is long enough.
        seed: Seeds the forest.
        window_jobs: Finished jobs per window of the correlation estimate.
    """
    if use_forest is None:
        use_forest = sklearn_available() and len(history) >= MIN_FOREST_HISTORY
    predictor = IterationPredictor(use_forest=False)
    rows: list[tuple[float, ...]] = []
    keyed: list[bool] = []
    cold: list[float] = []
    for job in history:  # features from the jobs finished before each one: nothing leaks
        features = predictor.features(job)
        rows.append(features.row)
        keyed.append(bool(features.row[11]))  # jobs sharing its recurrence key had finished
        cold.append(predictor.cold_start(features)[0])
        predictor.observe(features, job.duration_s)
    target_features = [predictor.features(job) for job in targets]
    if not use_forest or len(history) < 2:
        guesses = [predictor.cold_start(f)[0] for f in target_features]
        return _fitted(targets, guesses, history, cold, window_jobs)

    from sklearn.ensemble import RandomForestRegressor

    x = np.asarray(rows, dtype=np.float32)
    y = np.log1p(np.asarray([job.duration_s for job in history], dtype=np.float64))
    split = max(1, int(len(history) * (1.0 - HOLDOUT_FRAC)))
    old = RandomForestRegressor(n_estimators=N_TREES, random_state=seed, n_jobs=1).fit(x[:split], y[:split])
    holdout = np.expm1(old.predict(x[split:]))
    guessed = [float(g) if keyed[split + i] else cold[split + i] for i, g in enumerate(holdout)]
    predictor.adopt_forest(RandomForestRegressor(n_estimators=N_TREES, random_state=seed,
                                                 n_jobs=1).fit(x, y))
    guesses = [g for g, _ in predictor.predict(target_features)] if target_features else []
    return _fitted(targets, guesses, history[split:], guessed, window_jobs)


def _fitted(targets: Sequence[Job], guesses: Sequence[float], measured: Sequence[Job],
            measured_guesses: Sequence[float], window_jobs: int) -> FittedDurations:
    """Predictions of the targets, and the errors of the guesses made for ``measured``."""
    ordered = _ordered_ratios(measured, measured_guesses)
    return FittedDurations(
        predicted_s={j.job_id: max(g, 1.0) for j, g in zip(targets, guesses)},
        duration_error=_ratios(ordered),
        # on the newest ratios, as the pooled ones the band draws from
        error_correlation=error_correlation([r for _, r in ordered[-MAX_RATIOS:]], window_jobs))


def _ordered_ratios(jobs: Sequence[Job], guesses: Sequence[float]) -> list[tuple[Job, float]]:
    """(job, actual/predicted) in finishing order, for the jobs whose ratio is defined."""
    return [(job, job.duration_s / guess) for job, guess in zip(jobs, guesses)
            if guess > 0 and job.duration_s > 0]


def error_correlation(ratios: Sequence[float], window_jobs: int = WINDOW_JOBS) -> float:
    """How much of the duration error jobs that finish together share, in [0, 0.95].

    The estimate for the band's Gaussian copula (`forecast.band.sampled_durations`):
    each ratio becomes a normal score (``ndtri`` of its mid-rank quantile
    among all of them), consecutive runs of ``window_jobs`` jobs form
    windows (the remainder joins the last one), and the intraclass
    correlation ICC(1) of a one-way random-effects ANOVA over the windows
    is the share of the score's variance that a window has in common.

    With fewer than `MIN_CORRELATION_JOBS` ratios, fewer than two windows,
    or no spread at all, there is nothing to measure it on: the result is
    `DEFAULT_ERROR_CORRELATION` (0.5).

    Args:
        ratios: Actual/predicted durations, in the order the jobs finished.
        window_jobs: Jobs per window.
    """
    from scipy.special import ndtri
    from scipy.stats import rankdata

    if window_jobs < 2:
        raise ValueError(f"a window needs at least 2 jobs, got {window_jobs}")
    values = np.asarray(ratios, dtype=np.float64)
    values = values[np.isfinite(values)]
    n_windows = len(values) // window_jobs
    if len(values) < MIN_CORRELATION_JOBS or n_windows < 2:
        return DEFAULT_ERROR_CORRELATION
    scores = ndtri((rankdata(values) - 0.5) / len(values))  # ties share their mid-rank
    window = np.minimum(np.arange(len(values)) // window_jobs, n_windows - 1)
    icc = _icc1(scores, window, n_windows)
    return DEFAULT_ERROR_CORRELATION if math.isnan(icc) else min(max(icc, 0.0), MAX_CORRELATION)


def _icc1(values: np.ndarray, group: np.ndarray, n_groups: int) -> float:
    """ICC(1) of ``values`` in groups ``0 .. n_groups - 1`` of any sizes (NaN: no variance)."""
    n = len(values)
    sizes = np.bincount(group, minlength=n_groups).astype(np.float64)
    means = np.bincount(group, weights=values, minlength=n_groups) / sizes
    between = float(np.sum(sizes * (means - values.mean()) ** 2)) / (n_groups - 1)
    within = float(np.sum((values - means[group]) ** 2)) / (n - n_groups)
    n0 = (n - float(np.sum(sizes ** 2)) / n) / (n_groups - 1)  # the mean size, for unequal ones
    denominator = between + (n0 - 1.0) * within
    return (between - within) / denominator if denominator > 0 else math.nan


def _ratios(ordered: Sequence[tuple[Job, float]]) -> dict[str, tuple[float, ...]]:
    """Sorted ratios by group, the newest `MAX_RATIOS` of each."""
    by_group: dict[str, list[float]] = {ALL: []}
    for job, ratio in ordered:
        by_group[ALL].append(ratio)
        if job.group:
            by_group.setdefault(job.group, []).append(ratio)
    return {g: tuple(sorted(r[-MAX_RATIOS:])) for g, r in by_group.items() if r}


def sample_total_s(predicted_s: float, elapsed_s: float, ratios: Sequence[float],
                   u: float) -> float:
    """Quantile ``u`` of a job's total duration, given that it has run ``elapsed_s``.

    ``ratios`` are sorted actual/predicted ratios; only those that would
    have let the job run this long count (a job known to have run 5 h did
    not take 1 h). Without any such ratio the job gets half its run again.
    """
    if not ratios:
        return predicted_s if predicted_s > elapsed_s else max(elapsed_s * 1.5, predicted_s)
    low = bisect_right(ratios, elapsed_s / predicted_s) if elapsed_s > 0 else 0
    if low >= len(ratios):
        return elapsed_s * 1.5
    index = low + min(int(u * (len(ratios) - low)), len(ratios) - low - 1)
    return max(predicted_s * ratios[index], 1e-3)


def ratios_for(job: Job, duration_error: Mapping[str, Sequence[float]]) -> Sequence[float]:
    """The job's group's ratios when there are enough, else the pooled ones."""
    own = duration_error.get(job.group or ALL, ())
    return own if len(own) >= 20 else duration_error.get(ALL, own)


def median_ratio(duration_error: Mapping[str, Sequence[float]]) -> float:
    pooled = duration_error.get(ALL, ())
    return pooled[len(pooled) // 2] if pooled else math.nan
