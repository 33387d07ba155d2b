"""The ``combined`` policy against each single research policy, on busy windows of both traces.

Runs every policy on the busiest day of each shipped trace (its first
``--n-jobs`` jobs) with the network performance model, on a heterogeneous
cluster (examples/clusters/gavel-108.yaml) and a homogeneous one of the same
size (27 nodes of 4 V100, 9 per rack), and prints one JSON line per run.

    python benchmarks/combined_compare.py --n-jobs 300
    python benchmarks/combined_compare.py --policies combined,asrpt --clusters hetero
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from hetero_compare import busiest_day
from provenance import provenance

from rackwise import traces
from rackwise.cluster.topology import load_cluster, uniform_cluster
from rackwise.perf.model import NetworkPerf
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import simulate

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("fifo", "tiresias", "dally", "gavel", "hadar", "asrpt", "asrpt-oracle",
            "combined", "combined:oracle")


def topologies() -> dict[str, object]:
    return {"hetero": load_cluster(ROOT / "examples" / "clusters" / "gavel-108.yaml"),
            "homo": uniform_cluster(27, 4, 9, gpu_type="v100")}



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-jobs", type=int, default=300)
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help="names; 'combined:oracle' is combined with predictor=oracle")
    parser.add_argument("--clusters", default="hetero,homo")
    parser.add_argument("--traces", default=",".join(traces.names()))
    args = parser.parse_args()
    common = provenance()
    clusters = topologies()
    for trace in args.traces.split(","):
        start = busiest_day(trace)
        window = list(traces.load(trace, start_s=start, first_n=args.n_jobs))
        for cluster_name in args.clusters.split(","):
            topology = clusters[cluster_name]
            jobs = [j for j in window if j.n_gpus <= topology.n_gpus]  # type: ignore[attr-defined]
            for spec in args.policies.split(","):
                name, _, variant = spec.partition(":")
                params = {"predictor": variant} if variant else {}
                wall, cpu = time.perf_counter(), time.process_time()
                result = simulate(topology, jobs, make_policy(name, **params), perf=NetworkPerf(), seed=0)
                records = result.records
                first = min(r.submit_time for r in records)
                makespan_s = max(r.finish_time for r in records) - first
                jct = np.array([r.jct_s for r in records])
                print(json.dumps({
                    "trace": trace, "cluster": cluster_name, "policy": spec, "n_jobs": len(records),
                    "avg_jct_h": round(float(jct.mean()) / 3600, 3),
                    "p95_jct_h": round(float(np.percentile(jct, 95)) / 3600, 3),
                    "makespan_h": round(makespan_s / 3600, 3),
                    "avg_queue_h": round(float(np.mean([r.queueing_delay_s for r in records])) / 3600, 3),
                    "preemptions": sum(r.n_preemptions for r in records),
                    "comm_extra_gpu_h": round(sum(r.comm_extra_s * r.n_gpus for r in records) / 3600, 2),
                    "wall_s": round(time.perf_counter() - wall, 1),
                    "cpu_s": round(time.process_time() - cpu, 1), **common}), flush=True)


if __name__ == "__main__":
    main()
