"""Compare heterogeneity-aware policies with FIFO and Tiresias on busy windows of the shipped traces.

Runs each policy on the busiest day of each trace (its first ``n_jobs`` jobs)
on examples/clusters/gavel-108.yaml with the network performance model, and
prints one JSON line per (trace, policy): makespan, average JCT, utilisation.
Usage: python benchmarks/hetero_compare.py [n_jobs] [policy ...]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from rackwise import traces
from rackwise.cluster.topology import load_cluster
from rackwise.perf.model import NetworkPerf
from rackwise.policies.registry import all_policies, make_policy
from rackwise.sim.engine import simulate

CLUSTER = Path(__file__).resolve().parents[1] / "examples" / "clusters" / "gavel-108.yaml"
DAY_S = 86_400.0


def busiest_day(name: str) -> float:
    submits = np.array([job.submit_time for job in traces.load(name, rebase=False)])
    days = np.floor(submits / DAY_S)
    values, counts = np.unique(days, return_counts=True)
    return float(values[np.argmax(counts)] * DAY_S)


def main() -> None:
    n_jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    wanted = sys.argv[2:] or ["fifo", "tiresias", "gavel", "hadar", "hadare"]
    topology = load_cluster(CLUSTER)
    for name in traces.names():
        start = busiest_day(name)
        jobs = [j for j in traces.load(name, start_s=start, first_n=n_jobs)
                if j.n_gpus <= topology.n_gpus]
        for policy_name in wanted:
            if policy_name not in all_policies():
                continue
            began = time.perf_counter()
            result = simulate(topology, jobs, make_policy(policy_name), perf=NetworkPerf(), seed=0)
            records = result.records
            first = min(r.submit_time for r in records)
            makespan_s = max(r.finish_time for r in records) - first
            print(json.dumps({
                "trace": name, "window_start_s": start, "n_jobs": len(records),
                "policy": policy_name, "makespan_h": round(makespan_s / 3600, 3),
                "avg_jct_h": round(float(np.mean([r.jct_s for r in records])) / 3600, 3),
                "utilisation": round(sum(r.gpu_s for r in records) / (topology.n_gpus * makespan_s), 4),
                "preemptions": sum(r.n_preemptions for r in records),
                "wall_s": round(time.perf_counter() - began, 1),
                "command": " ".join(["python", *sys.argv])}), flush=True)


if __name__ == "__main__":
    main()
