"""A forecast as JSON-ready data: the one shape the CLI, the HTTP endpoint and files share."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rackwise.engine.snapshot import ClusterSnapshot
from rackwise.forecast.band import JobBand
from rackwise.forecast.forward import Forecast


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def forecast_dict(snapshot: ClusterSnapshot, forecast: Forecast,
                  bands: Mapping[str, JobBand] | None = None,
                  n_samples: int = 0) -> dict[str, Any]:
    """Per job: status, request, predicted start/finish, GPUs, nodes, and the band if any.

    Jobs drawn from an arrival model (ids starting with ``~``) are left out.
    Times are seconds on the workload clock; None means "not in the forward run".
    """
    bands = bands or {}
    jobs = []
    for row in forecast.jobs:
        if row.job_id.startswith("~"):
            continue
        item: dict[str, Any] = {
            "job_id": row.job_id, "status": row.status, "n_gpus": row.n_gpus,
            "submit_time": row.submit_time, "start_s": _num(row.start_s),
            "finish_s": _num(row.finish_s),
            "wait_s": (_num(row.start_s - max(snapshot.taken_at_s, row.submit_time))
                       if row.start_s is not None and row.status != "running" else None),
            "gpu_ids": list(row.gpu_ids), "nodes": list(row.nodes),
        }
        band = bands.get(row.job_id)
        if band is not None:
            item["start_p10_s"], item["start_p50_s"], item["start_p90_s"] = map(_num, band.start_s)
            item["finish_p10_s"], item["finish_p50_s"], item["finish_p90_s"] = map(_num, band.finish_s)
        jobs.append(item)
    return {
        "taken_at_s": snapshot.taken_at_s, "taken_wall_s": snapshot.taken_wall_s,
        "source": snapshot.source, "policy": forecast.policy, "cluster": snapshot.topology.describe(),
        "n_running": len(snapshot.running), "n_pending": len(snapshot.pending),
        "n_samples": n_samples, "wall_time_s": round(forecast.wall_time_s, 4), "jobs": jobs,
    }
