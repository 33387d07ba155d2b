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
"""

from __future__ import annotations

import importlib.util
import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence

from rackwise.policies.parts.predictor import IterationPredictor
from rackwise.workload.job import Job

MIN_FOREST_HISTORY = 60  # finished jobs before the forest is tried
HOLDOUT_FRAC = 0.3  # newest share of the history that measures the forest's error
MAX_RATIOS = 2_000  # ratios kept per group (the newest)
N_TREES = 50
ALL = ""


def sklearn_available() -> bool:
    return importlib.util.find_spec("sklearn") is not None


def predict_durations(history: Sequence[Job], targets: Sequence[Job], *,
                      use_forest: bool | None = None, seed: int = 0,
                      ) -> tuple[dict[str, float], dict[str, tuple[float, ...]]]:
    """Predicted duration of each target job, and error ratios by group.

    Args:
        history: Finished jobs, in the order they finished; ``duration_s``
            is what each actually took.
        targets: Jobs to predict (running, pending or arriving).
        use_forest: None: when scikit-learn is there and the history is long enough.
        seed: Seeds the forest.
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
        ratios = _ratios(history, cold)
        guesses = [predictor.cold_start(f)[0] for f in target_features]
        return {j.job_id: max(g, 1.0) for j, g in zip(targets, guesses)}, ratios

    import numpy as np
    from sklearn.ensemble import RandomForestRegressor

    x = np.asarray(rows, dtype=np.float32)
    y = np.log1p(np.asarray([job.duration_s for job in history], dtype=np.float64))
    split = max(1, int(len(history) * (1.0 - HOLDOUT_FRAC)))
    old = RandomForestRegressor(n_estimators=N_TREES, random_state=seed, n_jobs=1).fit(x[:split], y[:split])
    holdout = np.expm1(old.predict(x[split:]))
    guessed = list(cold[:split]) + [
        float(g) if keyed[split + i] else cold[split + i] for i, g in enumerate(holdout)]
    ratios = _ratios(history[split:], guessed[split:])
    predictor.forest_ = RandomForestRegressor(n_estimators=N_TREES, random_state=seed,
                                              n_jobs=1).fit(x, y)
    guesses = predictor.predict(target_features) if target_features else []
    return {j.job_id: max(g, 1.0) for j, (g, _) in zip(targets, guesses)}, ratios


def _ratios(jobs: Sequence[Job], guesses: Sequence[float]) -> dict[str, tuple[float, ...]]:
    by_group: dict[str, list[float]] = {ALL: []}
    for job, guess in zip(jobs, guesses):
        if guess > 0 and job.duration_s > 0:
            ratio = job.duration_s / guess
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
