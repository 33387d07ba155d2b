"""The sample file of each --format preset (tests/data), and how many records it holds."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"

SAMPLES = {
    "helios": DATA / "helios" / "cluster_log.csv",
    "pai": DATA / "pai" / "pai_task_table.csv",
    "philly": DATA / "philly" / "cluster_job_log",
    "sacct": DATA / "sacct" / "handwritten_fixture.sacct",
    "k8s-pods": DATA / "k8s-pods" / "handwritten_fixture.json",
}


def n_records(preset: str, path: Path) -> int:
    """Rows (or JSON records) in a sample, counted without the reader."""
    if preset == "philly":
        return len(json.loads(path.read_text()))
    if preset == "k8s-pods":
        return len(json.loads(path.read_text())["items"])
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return len(lines) - (0 if preset == "pai" else 1)  # PAI's tables have no header line
