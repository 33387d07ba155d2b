"""Compare the trained MARL agents with placement heuristics, tiresias, fifo and dally on held-out windows.

    .venv/bin/python experiments/marl_eval.py [--windows 3] [--n-jobs 300] [--checkpoint PATH]

Cluster: 16 servers x 8 GPUs in 4 racks (the training cluster). Workload:
windows of consecutive jobs from the *evaluation* split of each shipped
trace (the last 30% by submit time, never seen in training), rebased, with
durations clipped to [60 s, 8 h] and gaps scaled to offered load 0.9
(`rackwise.rl.episodes`). Performance: `NetworkPerf()` (models assigned per
job, communication over the placement's bottleneck, co-location
interference). The placement heuristics run under marl's own agents and
FIFO order (``marl`` with a fixed ``placement`` rule); ``marl-untrained`` is
the same network freshly initialised (the checkpoint's configuration, seed
and interference model; no cloning, no update). Prints one JSON line
per (window, policy), then a markdown table of average JCT.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

# label: (policy, params)
POLICIES: dict[str, tuple[str, dict[str, Any]]] = {
    "marl": ("marl", {}),
    "marl-untrained": ("marl", {}),  # its checkpoint is written by `untrained_checkpoint`
    "pack": ("marl", {"placement": "first-fit"}),
    "spread": ("marl", {"placement": "spread"}),
    "topology-consolidate": ("marl", {"placement": "consolidated"}),
    "interference-greedy": ("marl", {"placement": "greedy"}),
    "tiresias": ("tiresias", {}),
    "fifo": ("fifo", {"placement": "consolidated"}),
    "dally": ("dally", {}),
}


def untrained_checkpoint(trained: str | None, out_dir: str) -> str:
    """Save ``trained``'s network (default: the shipped one) freshly initialised; its path."""
    from rackwise.policies.parts.marl.checkpoint import load, save
    from rackwise.rl.mappo import untrained

    save(f"{out_dir}/marl", untrained(load(trained)))
    return f"{out_dir}/marl"


def run(trace: str, start: int, label: str, n_jobs: int, load: float, seed: int) -> dict[str, Any]:
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.perf.model import NetworkPerf
    from rackwise.policies.registry import make_policy
    from rackwise.rl.episodes import trace_window
    from rackwise.sim.engine import simulate

    cluster = uniform_cluster(16, 8, 4)
    jobs = trace_window(trace, np.random.default_rng(0), n_jobs=n_jobs, load=load,
                        cluster_gpus=cluster.n_gpus, split="eval", start=start)
    policy, params = POLICIES[label]
    started = time.perf_counter()
    result = simulate(cluster, jobs, make_policy(policy, **params), perf=NetworkPerf(), seed=seed)
    jct = np.asarray([r.jct_s for r in result.records])
    return {"trace": trace, "start": start, "policy": label, "n_jobs": len(jct),
            "avg_jct_h": float(jct.mean() / 3600), "p95_jct_h": float(np.percentile(jct, 95) / 3600),
            "wall_s": round(time.perf_counter() - started, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=3, help="windows per trace")
    parser.add_argument("--n-jobs", type=int, default=300)
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--traces", default="philly_2017,itp_2021")
    parser.add_argument("--checkpoint", default=None, help="marl checkpoint (default: shipped)")
    args = parser.parse_args()
    import tempfile

    from rackwise.rl.episodes import _split

    if args.checkpoint:
        for label, (policy, params) in POLICIES.items():
            if policy == "marl":
                POLICIES[label] = (policy, {**params, "checkpoint": args.checkpoint})
    POLICIES["marl-untrained"] = ("marl", {"checkpoint": untrained_checkpoint(
        args.checkpoint, tempfile.mkdtemp(prefix="marl-untrained-"))})
    rows = []
    for trace in args.traces.split(","):
        pool = len(_split(trace, "eval"))
        starts = np.linspace(0, pool - args.n_jobs - 1, args.windows).astype(int).tolist()
        for i, start in enumerate(starts):
            for label in POLICIES:
                row = run(trace, start, label, args.n_jobs, args.load, seed=i)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print()
    print("| trace | window start | " + " | ".join(POLICIES) + " |")
    print("|---|---|" + "---|" * len(POLICIES))
    keys = sorted({(r["trace"], r["start"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for trace, start in keys:
        cells = {r["policy"]: r["avg_jct_h"] for r in rows if (r["trace"], r["start"]) == (trace, start)}
        print(f"| {trace} | {start} | " + " | ".join(f"{cells[p]:.2f}" for p in POLICIES) + " |")
    for trace in sorted({k[0] for k in keys}):
        means = {p: np.mean([r["avg_jct_h"] for r in rows if r["trace"] == trace and r["policy"] == p])
                 for p in POLICIES}
        print(f"| {trace} | **mean** | " + " | ".join(f"**{means[p]:.2f}**" for p in POLICIES) + " |")


if __name__ == "__main__":
    main()
