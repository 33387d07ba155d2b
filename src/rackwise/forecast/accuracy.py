"""Forecast error measured in simulation: forecast at instants, then see what happened.

`run_with_forecasts` simulates a run as ``rackwise simulate`` does, takes
snapshots at the given instants (durations predicted from the jobs finished
by then, no knowledge of later arrivals), forecasts from each, and returns
one row per (instant, job) with the predicted and the actual next start and
finish. `figures` sums the rows up: mean absolute error of start times and
the share of actual starts inside the p10-p90 band.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from rackwise.engine.snapshot import ClusterSnapshot
from rackwise.forecast.band import arrival_model_of, forecast_with_band
from rackwise.forecast.from_sim import ForecastTap, Predictions, snapshot_of
from rackwise.run import RunConfig, build_simulator
from rackwise.sim.engine import SimResult
from rackwise.workload.workload import Workload

COLUMNS = ("taken_at_s", "job_id", "status", "n_gpus", "predicted_start_s", "predicted_finish_s",
           "start_p10_s", "start_p50_s", "start_p90_s", "finish_p10_s", "finish_p50_s",
           "finish_p90_s", "actual_start_s", "actual_finish_s")


def run_with_forecasts(config: RunConfig, at_s: Sequence[float], *, samples: int = 0,
                       predictions: Predictions = "history", workers: int | None = None,
                       use_ray: bool = False, arrivals_horizon_s: float | None = None,
                       on_progress: Callable[[int, int], None] | None = None,
                       on_snapshot: Callable[[ClusterSnapshot], None] | None = None,
                       ) -> tuple[SimResult, Workload, pd.DataFrame]:
    """Simulate ``config`` and forecast at each of ``at_s``; rows compare forecast and outcome.

    Args:
        config: The run.
        at_s: Instants to forecast at, seconds.
        samples: Forward runs per instant for the band (0: point forecasts only).
        predictions: ``"history"`` (honest) or ``"exact"`` (true durations).
        workers, use_ray: Where the samples run.
        arrivals_horizon_s: Draw further arrivals over this horizon from the
            fitted arrival model (None: no further arrivals).
        on_snapshot: Given each instant's snapshot, e.g. to save it for
            ``rackwise forecast --snapshot``.
    """
    seed = config.seed
    tap = ForecastTap(at_s, lambda sim, t: snapshot_of(sim, taken_at_s=t, predictions=predictions,
                                                      seed=seed))
    simulator, workload = build_simulator(config, observers=[tap], on_progress=on_progress)
    result = simulator.run()
    tap.finish(simulator)
    rows: list[dict[str, Any]] = []
    for taken in tap.taken:
        snapshot = taken.snapshot
        if on_snapshot is not None:
            on_snapshot(snapshot)
        model = (arrival_model_of(snapshot, arrivals_horizon_s)
                 if arrivals_horizon_s is not None else None)
        point, bands = forecast_with_band(snapshot, n_samples=samples, seed=seed, workers=workers,
                                          use_ray=use_ray, arrivals=model)
        for row in point.jobs:
            if row.job_id.startswith("~"):
                continue
            band = bands.get(row.job_id)
            start_band = band.start_s if band else (math.nan,) * 3
            finish_band = band.finish_s if band else (math.nan,) * 3
            rows.append({
                "taken_at_s": snapshot.taken_at_s, "job_id": row.job_id, "status": row.status,
                "n_gpus": row.n_gpus,
                "predicted_start_s": row.start_s if row.start_s is not None else math.inf,
                "predicted_finish_s": row.finish_s if row.finish_s is not None else math.inf,
                "start_p10_s": start_band[0], "start_p50_s": start_band[1],
                "start_p90_s": start_band[2], "finish_p10_s": finish_band[0],
                "finish_p50_s": finish_band[1], "finish_p90_s": finish_band[2],
                "actual_start_s": (taken.actual_start.get(row.job_id, math.nan)
                                   if row.status != "running" else row.start_s),
                "actual_finish_s": taken.actual_finish.get(row.job_id, math.nan),
            })
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return result, workload, frame


def figures(frame: pd.DataFrame) -> dict[str, float]:
    """Error of pending jobs' start forecasts (hours) and band coverage, over all instants.

    ``start_mae_h``: mean |predicted - actual| start; ``start_in_band_frac``:
    share of actual starts within [p10, p90] (NaN without a band);
    ``finish_mae_h``: the same for finishes of every job.
    """
    pending = frame[(frame["status"] != "running") & frame["actual_start_s"].notna()]
    finite = pending[pending["predicted_start_s"] < math.inf]
    start_err = (finite["predicted_start_s"] - finite["actual_start_s"]).abs() / 3600.0
    done = frame[frame["actual_finish_s"].notna() & (frame["predicted_finish_s"] < math.inf)]
    finish_err = (done["predicted_finish_s"] - done["actual_finish_s"]).abs() / 3600.0
    banded = pending[pending["start_p10_s"].notna()]
    inside = ((banded["start_p10_s"] <= banded["actual_start_s"])
              & (banded["actual_start_s"] <= banded["start_p90_s"]))
    wait_h = (pending["actual_start_s"] - pending["taken_at_s"]) / 3600.0
    return {
        "n_instants": int(frame["taken_at_s"].nunique()),
        "n_pending_forecasts": len(pending),
        "mean_actual_wait_h": float(wait_h.mean()) if len(wait_h) else math.nan,
        "start_mae_h": float(start_err.mean()) if len(start_err) else math.nan,
        "start_median_ae_h": float(start_err.median()) if len(start_err) else math.nan,
        "finish_mae_h": float(finish_err.mean()) if len(finish_err) else math.nan,
        "start_in_band_frac": float(inside.mean()) if len(banded) else math.nan,
        "never_started_frac": float((pending["predicted_start_s"] == math.inf).mean())
        if len(pending) else math.nan,
    }
