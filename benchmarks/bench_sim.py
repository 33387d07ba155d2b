"""Simulator speed and memory on the shipped traces.

Prints one JSON line per figure. Each measurement runs in a fresh process so
peak memory (max RSS) belongs to that run alone.

    python benchmarks/bench_sim.py                 # the figures the README quotes
    python benchmarks/bench_sim.py --policies fifo,tiresias,sjf --traces philly_2017,itp_2021
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from concurrent.futures import ProcessPoolExecutor

from provenance import provenance

CLUSTERS = {"philly_2017": (64, 8, 8), "itp_2021": (160, 8, 8)}



def measure(trace: str, policy: str, first_n: int | None) -> dict[str, object]:
    """Load, simulate and summarise one run; report wall times and peak memory."""
    from rackwise import traces
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.metrics.summary import summarize
    from rackwise.policies.registry import make_policy
    from rackwise.sim.engine import Simulator

    started = time.perf_counter()
    workload = traces.load(trace, first_n=first_n)
    loaded = time.perf_counter()
    cpu_loaded = time.process_time()
    nodes, gpus, per_rack = CLUSTERS[trace]
    topology = uniform_cluster(nodes, gpus, per_rack)
    result = Simulator(topology, workload.drop_oversized(topology.n_gpus),
                       make_policy(policy)).run()
    simulated = time.perf_counter()
    cpu_simulate_s = time.process_time() - cpu_loaded
    figures = summarize(result.records, result.timeline, topology.n_gpus)
    return {
        "trace": trace, "policy": policy, "n_jobs": len(result.records),
        "cluster_gpus": topology.n_gpus, "load_s": round(loaded - started, 3),
        "simulate_s": round(simulated - loaded, 3),
        # CPU time is steadier than wall time on a shared machine.
        "simulate_cpu_s": round(cpu_simulate_s, 3), "n_steps": result.n_steps,
        "jobs_per_s": round(len(result.records) / (simulated - loaded)),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "avg_jct_h": round(figures["avg_jct_s"] / 3600, 3),
        "utilisation": round(figures["utilisation"], 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="philly_2017")
    parser.add_argument("--policies", default="fifo,tiresias")
    parser.add_argument("--scaling", action=argparse.BooleanOptionalAction, default=True,
                        help="also time the first 8,224 jobs (1/10 of philly) under fifo")
    args = parser.parse_args()
    common = provenance()
    cells = [(t, p, None) for t in args.traces.split(",") for p in args.policies.split(",")]
    if args.scaling:
        cells.append(("philly_2017", "fifo", 8_224))
    results = {}
    # One process per cell, one at a time: timings are not disturbed by a neighbour.
    for cell in cells:
        with ProcessPoolExecutor(max_workers=1) as pool:
            figure = pool.submit(measure, *cell).result()
        results[cell] = figure
        print(json.dumps({**figure, "first_n": cell[2], **common}), flush=True)
    full, small = results.get(("philly_2017", "fifo", None)), results.get(("philly_2017", "fifo", 8_224))
    if full and small:
        ratio = float(full["simulate_cpu_s"]) / float(small["simulate_cpu_s"])  # type: ignore[arg-type]
        print(json.dumps({"figure": "scaling_82k_over_8k", "time_ratio": round(ratio, 2),
                          "jobs_ratio": round(int(full["n_jobs"]) / int(small["n_jobs"]), 2),  # type: ignore[call-overload]
                          **common}), flush=True)


if __name__ == "__main__":
    main()
