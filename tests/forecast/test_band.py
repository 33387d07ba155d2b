"""Uncertainty bands: ordered quantiles, same seed same band wherever the samples run."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy.special import ndtr

from rackwise.engine.snapshot import ClusterSnapshot
from rackwise.forecast.band import band, forecast_with_band, sampled_durations
from rackwise.forecast.durations import ratios_for, sample_total_s
from rackwise.forecast.forward import done_s


def test_band_is_deterministic_across_workers(snapshot: ClusterSnapshot) -> None:
    in_process = band(snapshot, n_samples=8, seed=3, workers=1)
    pooled = band(snapshot, n_samples=8, seed=3, workers=2)
    assert in_process == pooled
    assert band(snapshot, n_samples=8, seed=4, workers=1) != in_process


def test_quantiles_are_ordered(snapshot: ClusterSnapshot) -> None:
    for job in band(snapshot, n_samples=12, seed=0, workers=1):
        assert job.start_s[0] <= job.start_s[1] <= job.start_s[2]
        assert job.finish_s[0] <= job.finish_s[1] <= job.finish_s[2]
        assert job.start_s[0] < job.finish_s[0]


def test_no_error_no_spread(snapshot: ClusterSnapshot) -> None:
    exact = replace(snapshot, duration_error={})
    point, bands = forecast_with_band(exact, n_samples=5, workers=1)
    for row in point.jobs:
        low, mid, high = bands[row.job_id].finish_s
        assert low == mid == high == row.finish_s


def test_running_jobs_are_not_sampled_shorter_than_their_run() -> None:
    ratios = (0.2, 0.5, 1.0, 2.0, 4.0)
    for u in np.linspace(0, 0.999, 11):
        assert sample_total_s(1_000.0, 1_500.0, ratios, float(u)) > 1_500.0
    assert sample_total_s(1_000.0, 10_000.0, ratios, 0.5) == 15_000.0  # past every ratio
    assert sample_total_s(1_000.0, 0.0, ratios, 0.0) == 200.0


def test_sampled_durations_cover_every_job(snapshot: ClusterSnapshot) -> None:
    drawn = sampled_durations(snapshot, np.random.default_rng(0))
    ids = {s.job_id for s in (*snapshot.running, *snapshot.pending)}
    assert set(drawn) == ids and all(math.isfinite(v) and v > 0 for v in drawn.values())


def test_errors_of_one_sample_move_together(snapshot: ClusterSnapshot) -> None:
    """With full correlation the pending jobs of a group draw one error ratio; with none they differ."""
    pending = list(snapshot.pending)
    assert len(pending) >= 4

    def ratios_by_group(correlation: float, seed: int) -> dict[str | None, set[float]]:
        drawn = sampled_durations(snapshot, np.random.default_rng(seed), correlation=correlation)
        out: dict[str | None, set[float]] = {}
        for state in pending:
            ratio = drawn[state.job_id] / snapshot.predicted_duration_s[state.job_id]
            out.setdefault(state.job.group, set()).add(round(ratio, 9))
        return out

    for seed in range(5):
        assert all(len(r) == 1 for r in ratios_by_group(1.0, seed).values())
    assert any(len(r) > 1 for seed in range(5) for r in ratios_by_group(0.0, seed).values())


def test_each_snapshot_draws_from_its_own_quantile_tables(snapshot: ClusterSnapshot) -> None:
    """Durations are the scalar rule's, whichever snapshot was sampled before."""
    other = replace(snapshot, duration_error={"": (3.0, 4.0, 5.0)})
    for current in (snapshot, other, snapshot):
        drawn = sampled_durations(current, np.random.default_rng(7), correlation=0.0)
        u = ndtr(np.random.default_rng(7).standard_normal(1 + len(drawn))[1:])
        now, error = current.taken_at_s, current.duration_error
        for k, state in enumerate((*current.running, *current.pending)):
            elapsed = done_s(state, now) if state.status.value == "running" else 0.0
            expected = sample_total_s(current.predicted_duration_s[state.job_id], elapsed,
                                      ratios_for(state.job, error), float(u[k]))
            assert drawn[state.job_id] == expected
