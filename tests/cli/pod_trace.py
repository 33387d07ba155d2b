"""A pod-list style trace and its column mapping, for the CLI tests of row filters (imported by name)."""

from __future__ import annotations

from pathlib import Path

MAPPING = ("job_id: id\nsubmit_time: submitted\nend_time: ended\nduration_s: null\n"
           "n_gpus: gpus\ngroup: null\n"
           "skip:\n  zero_gpus: true\n  status: state\n  allowed_status: [done]\n")


def write_pod_trace(folder: Path, trace: str) -> tuple[Path, Path]:
    """``trace`` (CSV text with id, submitted, ended, gpus, state) and `MAPPING`, written to ``folder``."""
    path, mapping = folder / "pods.csv", folder / "mapping.yaml"
    path.write_text(trace, encoding="utf-8")
    mapping.write_text(MAPPING, encoding="utf-8")
    return path, mapping
