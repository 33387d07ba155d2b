"""Compare heterogeneity-aware policies with FIFO and Tiresias on busy windows of the shipped traces.

Runs each policy on the busiest day of each trace (its first ``n_jobs`` jobs)
on examples/clusters/gavel-108.yaml with the network performance model, and
prints one JSON line per (trace, policy): makespan, average JCT, utilisation.
``gavel-ss`` is Gavel with space sharing. Utilisation is GPU-seconds held by
jobs over the cluster's; with space sharing a shared GPU counts once per
job, so ``busy`` (the share of GPUs held by any job) is printed beside it,
and ``shared`` is the share of jobs' run time spent sharing GPUs.
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
from rackwise.metrics.summary import utilisation
from rackwise.perf.model import NetworkPerf
from rackwise.policies.registry import all_policies, make_policy
from rackwise.sim.engine import Simulator

CLUSTER = Path(__file__).resolve().parents[1] / "examples" / "clusters" / "gavel-108.yaml"
VARIANTS = {"gavel-ss": ("gavel", {"space_sharing": True})}
DAY_S = 86_400.0


class SharedTime:
    """Observer: job-seconds run, and those run sharing GPUs with a partner."""

    def __init__(self) -> None:
        self.last: float | None = None
        self.run_s = self.shared_s = 0.0

    def __call__(self, sim: Simulator) -> None:
        if self.last is not None:
            elapsed = sim.now - self.last
            self.run_s += elapsed * len(sim.running)
            self.shared_s += elapsed * sum(s.partner is not None for s in sim.running.values())
        self.last = sim.now

    @property
    def fraction(self) -> float:
        return self.shared_s / self.run_s if self.run_s else 0.0


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
            registered, params = VARIANTS.get(policy_name, (policy_name, {}))
            if registered not in all_policies():
                continue
            began = time.perf_counter()
            sharing = SharedTime()
            result = Simulator(topology, jobs, make_policy(registered, **params), perf=NetworkPerf(),
                               seed=0, observers=[sharing]).run()
            records = result.records
            first = min(r.submit_time for r in records)
            makespan_s = max(r.finish_time for r in records) - first
            print(json.dumps({
                "trace": name, "window_start_s": start, "n_jobs": len(records),
                "policy": policy_name, "makespan_h": round(makespan_s / 3600, 3),
                "avg_jct_h": round(float(np.mean([r.jct_s for r in records])) / 3600, 3),
                "utilisation": round(sum(r.gpu_s for r in records) / (topology.n_gpus * makespan_s), 4),
                "busy": round(utilisation(result.timeline, topology.n_gpus), 4),
                "shared": round(sharing.fraction, 4),
                "preemptions": sum(r.n_preemptions for r in records),
                "wall_s": round(time.perf_counter() - began, 1),
                "command": " ".join(["python", *sys.argv])}), flush=True)


if __name__ == "__main__":
    main()
