"""The shape of a workload at a glance: size, GPU-count histogram, arrival span, skipped rows."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rackwise.workload.workload import Workload


def shape(workload: Workload) -> dict[str, Any]:
    """Jobs, jobs per GPU count, first and last arrival and their span, skipped rows by reason."""
    submits = [job.submit_time for job in workload]
    sizes = Counter(job.n_gpus for job in workload)
    return {
        "n_jobs": len(workload),
        "gpu_histogram": {n_gpus: sizes[n_gpus] for n_gpus in sorted(sizes)},
        "first_arrival_s": min(submits, default=0.0),
        "last_arrival_s": max(submits, default=0.0),
        "arrival_span_s": max(submits, default=0.0) - min(submits, default=0.0),
        "skipped_rows": {reason: count for reason, count in workload.skipped_by_reason if count},
        "n_skipped": workload.n_skipped,
    }
