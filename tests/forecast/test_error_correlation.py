"""The fitted error correlation: the estimator, its fallback, and where snapshots carry it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.snapshot import (
    DEFAULT_ERROR_CORRELATION,
    ClusterSnapshot,
    from_json,
    load,
    save,
    to_json,
    validate,
)
from rackwise.errors import InputError
from rackwise.forecast.band import sampled_durations
from rackwise.forecast.durations import (
    MAX_CORRELATION,
    error_correlation,
    fit_durations,
    predict_durations,
)
from rackwise.forecast.from_sim import ForecastTap, snapshot_of
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job


def copula_ratios(rho: float, n_windows: int, per_window: int, seed: int) -> np.ndarray:
    """Lognormal ratios in finishing order, each window sharing ``rho`` of the normal score."""
    rng = np.random.default_rng(seed)
    common = np.repeat(rng.standard_normal(n_windows), per_window)
    own = rng.standard_normal(n_windows * per_window)
    return np.exp(0.8 * (np.sqrt(rho) * common + np.sqrt(1.0 - rho) * own))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_independent_errors_share_nothing(seed: int) -> None:
    assert error_correlation(copula_ratios(0.0, 40, 30, seed), window_jobs=30) < 0.05


@pytest.mark.parametrize(("rho", "seed"), [(0.6, 0), (0.6, 1), (0.3, 2), (0.85, 3)])
def test_recovers_the_copula_correlation(rho: float, seed: int) -> None:
    assert error_correlation(copula_ratios(rho, 40, 30, seed), window_jobs=30) == pytest.approx(
        rho, abs=0.15)


def test_unequal_windows_and_the_marginal_do_not_matter() -> None:
    """The remainder joins the last window; only ranks count, not the ratios' scale."""
    ratios = copula_ratios(0.6, 41, 30, seed=4)[:-17]  # 40 full windows + 13 left over
    fitted = error_correlation(ratios, window_jobs=30)
    assert fitted == pytest.approx(0.6, abs=0.15)
    assert error_correlation(ratios ** 3 * 7.0, window_jobs=30) == fitted


def test_clamped() -> None:
    assert error_correlation(copula_ratios(1.0, 40, 30, seed=5), window_jobs=30) == MAX_CORRELATION
    # windows that alternate low/high within and match across: negative ICC, clamped to 0
    alternating = np.tile([0.5, 2.0], 20 * 15)
    assert error_correlation(alternating, window_jobs=30) == 0.0


@pytest.mark.parametrize(("n", "window_jobs"), [(0, 50), (49, 10), (99, 50)])
def test_short_history_falls_back(n: int, window_jobs: int) -> None:
    ratios = copula_ratios(0.9, 1, max(n, 1), seed=6)[:n]
    assert error_correlation(ratios, window_jobs=window_jobs) == DEFAULT_ERROR_CORRELATION


def test_no_spread_falls_back() -> None:
    assert error_correlation(np.ones(200), window_jobs=50) == DEFAULT_ERROR_CORRELATION


def test_window_of_one_job_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2 jobs"):
        error_correlation(np.ones(200), window_jobs=1)


def drifting_history(n: int, seed: int) -> list[Job]:
    """Jobs whose durations run long or short together, 40 jobs at a time.

    They have no group or model, so the cold-start rule is the median of all
    jobs so far, which does not follow the drift (a group's median over its
    last 20 jobs would absorb most of it).
    """
    rng = np.random.default_rng(seed)
    mood = np.repeat(rng.standard_normal(n // 40 + 1), 40)[:n]
    durations = 3_600.0 * np.exp(0.7 * mood + 0.3 * rng.standard_normal(n))
    return [Job(f"h{i}", submit_time=60.0 * i, n_gpus=1, duration_s=float(d))
            for i, d in enumerate(durations)]


def test_fit_durations_measures_it_on_the_history() -> None:
    history = drifting_history(600, seed=7)
    targets = [Job("t", submit_time=36_000.0, n_gpus=1, duration_s=1.0)]
    fitted = fit_durations(history, targets, use_forest=False)
    assert fitted.error_correlation > 0.3  # the shared mood shows
    assert (fitted.predicted_s, fitted.duration_error) == predict_durations(
        history, targets, use_forest=False)
    short = fit_durations(history[:30], targets, use_forest=False)
    assert short.error_correlation == DEFAULT_ERROR_CORRELATION


def snapshot_at(make: Callable[[Simulator, float], ClusterSnapshot],
                at_s: float = 100_000.0) -> ClusterSnapshot:
    """A FIFO run of 600 drifting jobs on 16 GPUs, snapshotted at ``at_s`` by ``make``."""
    tap = ForecastTap([at_s], make)
    Simulator(uniform_cluster(2, 8, 2), drifting_history(600, seed=8), make_policy("fifo"),
              observers=[tap]).run()
    return tap.taken[0].snapshot


def test_simulation_snapshot_carries_the_fitted_value_when_asked() -> None:
    expected: list[float] = []
    default: list[float] = []

    def make(sim: Simulator, at_s: float) -> ClusterSnapshot:
        history = [s.job for s in sorted(sim.finished.values(),
                                         key=lambda s: (s.finish_time, s.job_id))]
        targets = [s.job for s in (*sim.running.values(), *sim.pending.values())]
        expected.append(fit_durations(history, targets).error_correlation)
        default.append(snapshot_of(sim, taken_at_s=at_s).error_correlation)
        return snapshot_of(sim, taken_at_s=at_s, fit_correlation=True)

    snapshot = snapshot_at(make)
    assert snapshot.pending and expected[0] != DEFAULT_ERROR_CORRELATION
    assert snapshot.error_correlation == expected[0]
    assert default == [DEFAULT_ERROR_CORRELATION]


def test_exact_durations_keep_the_default() -> None:
    snapshot = snapshot_at(lambda sim, t: snapshot_of(sim, taken_at_s=t, predictions="exact"))
    assert snapshot.error_correlation == DEFAULT_ERROR_CORRELATION


def test_json_round_trip_keeps_it(snapshot: ClusterSnapshot, tmp_path: Path) -> None:
    fitted = replace(snapshot, error_correlation=0.37)
    again = load(save(fitted, tmp_path / "snap.json"))
    assert again.error_correlation == 0.37
    assert to_json(again) == to_json(fitted)


def test_old_file_without_it_reads_as_default(snapshot: ClusterSnapshot) -> None:
    data = to_json(replace(snapshot, error_correlation=0.2))
    del data["error_correlation"]
    assert from_json(data).error_correlation == DEFAULT_ERROR_CORRELATION


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_out_of_range_is_refused(snapshot: ClusterSnapshot, bad: float) -> None:
    with pytest.raises(InputError, match="error_correlation"):
        validate(replace(snapshot, error_correlation=bad))


def test_band_draws_with_the_snapshot_value(snapshot: ClusterSnapshot) -> None:
    for value in (0.0, 0.8):
        own = replace(snapshot, error_correlation=value)
        for seed in range(3):
            assert sampled_durations(own, np.random.default_rng(seed)) == sampled_durations(
                snapshot, np.random.default_rng(seed), correlation=value)
