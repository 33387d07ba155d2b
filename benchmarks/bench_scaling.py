"""How simulation cost grows with jobs and with cluster size (FIFO, consolidated placement).

* ``jobs``: the first 1k, 10k and all 82k jobs of philly_2017 on 512 GPUs.
* ``gpus``: all of philly_2017 on clusters of 64 to 10,000 GPUs (8 per node,
  8 nodes per rack; jobs larger than the cluster are dropped).

Each run is a fresh process (max RSS is that run's); one JSON line per run,
then the ratios (time per job should stay flat if cost is linear in jobs).

    python benchmarks/bench_scaling.py
    python benchmarks/bench_scaling.py --jobs 1000,10000 --gpus 64,512 --policy tiresias
"""

from __future__ import annotations

import argparse
import json
import time

from bench_policies import _rss_mib
from provenance import provenance


def run(policy: str, first_n: int | None, n_gpus: int) -> dict[str, object]:
    from rackwise import traces
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.policies.registry import make_policy
    from rackwise.sim.engine import Simulator

    topology = uniform_cluster(max(1, n_gpus // 8), 8, 8)
    jobs = traces.load("philly_2017", first_n=first_n).drop_oversized(topology.n_gpus)
    wall, cpu = time.perf_counter(), time.process_time()
    result = Simulator(topology, jobs, make_policy(policy), seed=0).run()
    wall_s, cpu_s = time.perf_counter() - wall, time.process_time() - cpu
    n = len(result.records)
    return {"n_jobs": n, "cluster_gpus": topology.n_gpus, "n_steps": result.n_steps,
            "simulate_s": round(wall_s, 2), "cpu_s": round(cpu_s, 2),
            "cpu_us_per_job": round(1e6 * cpu_s / n, 1), "peak_rss_mib": _rss_mib()}


def main() -> None:

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="fifo")
    parser.add_argument("--jobs", default="1000,10000,0", help="first N jobs; 0 = all")
    parser.add_argument("--gpus", default="64,512,2048,10000")
    parser.add_argument("--limit-s", type=float, default=300.0)
    args = parser.parse_args()
    common = {**provenance(), "policy": args.policy}
    by_jobs = {}
    for n in (int(x) for x in args.jobs.split(",")):
        row = in_fresh_process_run(args.policy, n or None, 512, args.limit_s)
        by_jobs[n] = row
        print(json.dumps({"figure": "scaling_jobs", "first_n": n or None, **row, **common}), flush=True)
    for n_gpus in (int(x) for x in args.gpus.split(",")):
        row = in_fresh_process_run(args.policy, None, n_gpus, args.limit_s)
        print(json.dumps({"figure": "scaling_gpus", **row, **common}), flush=True)
    done = sorted((r for r in by_jobs.values() if "cpu_s" in r), key=lambda r: r["n_jobs"])
    if len(done) >= 2:
        small, large = done[0], done[-1]
        print(json.dumps({"figure": "scaling_ratio", "jobs_ratio": round(large["n_jobs"] / small["n_jobs"], 1),
                          "cpu_time_ratio": round(large["cpu_s"] / small["cpu_s"], 1), **common}),
              flush=True)


def in_fresh_process_run(policy: str, first_n: int | None, n_gpus: int,
                         limit_s: float) -> dict[str, object]:
    """`run` in a new (forked) process, stopped after ``limit_s`` seconds."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1, maxtasksperchild=1) as pool:
        pending = pool.apply_async(run, (policy, first_n, n_gpus))
        try:
            return pending.get(limit_s)  # type: ignore[no-any-return]
        except multiprocessing.TimeoutError:
            return {"skipped": f"took more than {limit_s:.0f} s"}


if __name__ == "__main__":
    main()
