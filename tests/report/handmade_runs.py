"""Hand-made results folders for the report tests (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd


def write_run(folder: Path, policy: str, seed: int, figures: Mapping[str, float] | None = None,
              *, config: Mapping[str, Any] | None = None, tables: bool = True) -> Path:
    """A hand-made results folder: a summary, and (optionally) tiny tables."""
    folder.mkdir(parents=True, exist_ok=True)
    full_config = {"policy": policy, "seed": seed, "workload": {"trace": "t"},
                   "cluster": {"nodes": 1, "gpus_per_node": 4, "spec": None}}
    full_config.update(config or {})
    summary = {"figures": {"n_jobs": 3, "avg_jct_s": 100.0, "p99_jct_s": 200.0,
                           "makespan_s": 300.0, "utilisation": 0.5, **(figures or {})},
               "config": full_config, "cluster": "c: 1 racks, 1 nodes, 4 GPUs (4 v100)"}
    (folder / "summary.json").write_text(json.dumps(summary))
    if tables:
        pd.DataFrame({"jct_s": [10.0, 20.0, 30.0], "queueing_delay_s": [0.0, 5.0, 10.0]}
                     ).to_parquet(folder / "jobs.parquet")
        pd.DataFrame({"time": [0.0, 10.0, 30.0], "busy_gpus": [4, 2, 0], "n_pending": [1, 0, 0]}
                     ).to_parquet(folder / "timeline.parquet")
    return folder
