"""Decision latency of the ``marl`` policy on a 128-server cluster (needs the rl extra).

Fills a cluster of 128 servers x 8 GPUs (16 racks) to about 70% with running
jobs of mixed widths and models, then times single placement decisions
(graph features, candidate features with the interference model, one
forward pass of the actor). The actor keeps the network's outputs for
servers whose features did not change, so each decision is timed twice:
cold (a fresh cache: the whole network, an upper bound) and warm (nothing
changed since the last decision: a lower bound). Prints one JSON line.

    python benchmarks/bench_marl.py
    python benchmarks/bench_marl.py --servers 128 --decisions 200 --checkpoint results/marl/marl
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from provenance import provenance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=128)
    parser.add_argument("--decisions", type=int, default=200)
    parser.add_argument("--busy-frac", type=float, default=0.7)
    parser.add_argument("--checkpoint", default=None)
    args = parser.parse_args()

    from rackwise.cluster.topology import uniform_cluster
    from rackwise.perf.catalogue import CATALOGUE
    from rackwise.perf.model import NetworkPerf
    from rackwise.policies.marl import Marl
    from rackwise.policies.parts.marl.features import Placed
    from rackwise.sim.engine import Simulator
    from rackwise.workload.job import Job

    topology = uniform_cluster(args.servers, 8, 8)
    rng = np.random.default_rng(0)
    models = [name for name, spec in CATALOGUE.items() if spec.measured]
    policy = Marl(checkpoint=args.checkpoint)
    sim = Simulator(topology, [], policy, perf=NetworkPerf(), seed=0)
    sim.start()
    free = sim.view.tentative()
    placed = []
    target = int(args.busy_frac * topology.n_gpus)
    while topology.n_gpus - free.n_free < target:
        width = int(rng.choice([1, 1, 1, 2, 4, 8]))
        node = int(rng.integers(0, topology.n_nodes))
        ids = free.free_gpu_ids(node)[:width]
        if len(ids) < width:
            continue
        job = Job(f"r{len(placed)}", 0.0, width, 1000.0, model=models[int(rng.integers(len(models)))])
        free.take(ids)
        placed.append(Placed(job, tuple(ids)))
    heads = [Job(f"h{i}", 0.0, int(rng.choice([1, 1, 2, 4, 8, 16])), 100.0,
                 model=models[int(rng.integers(len(models)))]) for i in range(args.decisions)]
    from rackwise.policies.parts.marl.inference import CachedActor

    latencies_ms: list[float] = []
    warm_ms: list[float] = []
    for head in heads:
        policy.queues_[0] = [head]
        if policy.placement == "learned":
            policy.actor_ = CachedActor(policy.checkpoint_.actor, topology)
        for times in (latencies_ms, warm_ms):
            started = time.perf_counter()
            policy.decide(free, placed, 0, 0.0)
            times.append((time.perf_counter() - started) * 1e3)
    print(json.dumps({
        "figure": "marl_decision_latency_ms", "servers": args.servers, "gpus": topology.n_gpus,
        "running_jobs": len(placed), "decisions": len(heads),
        "p50_ms": round(float(np.percentile(latencies_ms, 50)), 3),
        "p99_ms": round(float(np.percentile(latencies_ms, 99)), 3),
        "mean_ms": round(float(np.mean(latencies_ms)), 3),
        "warm_p50_ms": round(float(np.percentile(warm_ms, 50)), 3),
        **provenance(),
    }))


if __name__ == "__main__":
    main()
