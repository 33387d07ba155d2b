"""Training curves: one row per update, written as CSV and plotted as PNG."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any


def write_curves(rows: list[dict[str, Any]], stem: Path) -> None:
    """Training curve as ``<stem>.csv`` and ``<stem>.png``."""
    first = ["update", "phase"]
    keys = first + sorted({k for row in rows for k in row} - set(first))
    with stem.with_suffix(".csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ppo = [r for r in rows if r["phase"] == "ppo"]
    evals = [r for r in rows if "eval_return" in r]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.plot([r["update"] for r in ppo], [r["mean_return"] for r in ppo], label="sampled, new windows")
    if evals:
        left.plot([r["update"] for r in evals], [r["eval_return"] for r in evals], "o-",
                  label="greedy, fixed windows")
    left.legend()
    left.set_xlabel("PPO update")
    left.set_ylabel("mean episode return (scaled)")
    right.plot([r["update"] for r in ppo], [r["avg_jct_h"] for r in ppo])
    right.set_xlabel("PPO update")
    right.set_ylabel("avg JCT of the batch (h)")
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"), dpi=100)
    plt.close(fig)
