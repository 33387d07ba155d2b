"""Time one Gavel scheduling round (LP solve + round mechanism) for many active jobs.

Prints one JSON line per figure, with wall (``*_s``) and CPU (``*_cpu_s``) seconds.
``max_min_fairness+ss`` is max-min fairness with space sharing (pairs of the
one-GPU jobs, each offered four partners, with pair factors drawn per pair of
six model names).
Usage: python benchmarks/bench_lp.py [n_jobs ...]
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from provenance import provenance

from rackwise.cluster.topology import ClusterSpec
from rackwise.policies.gavel import Gavel
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job

MODELS = ("m0", "m1", "m2", "m3", "m4", "m5")


class _TypePerf:
    """Per-(job, type) rates drawn once; enough to exercise the LP at scale."""

    def __init__(self, topology, jobs, seed=0):  # type: ignore[no-untyped-def]
        rng = np.random.default_rng(seed)
        self.speed = {t: float(s) for t, s in zip(("v100", "p100", "k80"), (1.0, 0.6, 0.3))}
        self.factor = {j.job_id: float(rng.uniform(0.5, 2.0)) for j in jobs}
        self.shares = {(a, b): float(rng.uniform(0.4, 0.9)) for a in MODELS for b in MODELS}
        self.topology = topology

    def sharing_factor(self, job, partner, gpu_type):  # type: ignore[no-untyped-def]
        return self.shares[(job.model, partner.model)]

    def prepare(self, jobs, topology, rng):  # type: ignore[no-untyped-def]
        return list(jobs)

    def rate(self, job, gpu_ids, running):  # type: ignore[no-untyped-def]
        return self.factor[job.job_id] * min(self.speed[self.topology.gpu_type_of(g)] for g in gpu_ids)

    def rates(self, running, changed):  # type: ignore[no-untyped-def]
        return {j: self.rate(running[j].job, running[j].gpu_ids, running) for j in changed if j in running}

    def restart_overhead_s(self, job):  # type: ignore[no-untyped-def]
        return 0.0


def bench(n_jobs: int, objective: str) -> dict[str, object]:
    spec = ClusterSpec(name="gavel-108", nodes_per_rack=9, node_groups=[
        {"count": 9, "gpus_per_node": 4, "gpu_type": t} for t in ("v100", "p100", "k80")])
    topology = spec.build()
    rng = np.random.default_rng(0)
    sizes = rng.choice([1, 2, 4, 8], p=[0.7, 0.1, 0.15, 0.05], size=n_jobs)
    models = rng.choice(MODELS, size=n_jobs)
    jobs = [Job(f"j{i:05d}", 0.0, int(s), 3600.0 * 10, model=str(m))
            for i, (s, m) in enumerate(zip(sizes, models))]
    sharing = objective.endswith("+ss")
    policy = Gavel(objective=objective.removesuffix("+ss"), space_sharing=sharing)  # type: ignore[arg-type]
    sim = Simulator(topology, jobs, policy, perf=_TypePerf(topology, jobs))  # type: ignore[arg-type]
    sim.start()
    start, cpu = time.perf_counter(), time.process_time()
    sim.step()  # arrivals, throughputs, LP, mechanism, placements
    first, first_cpu = time.perf_counter() - start, time.process_time() - cpu
    # A second round with throughputs cached: only the LP and the mechanism.
    policy.dirty_ = True
    policy.last_reset_ = None
    sim.view.now = sim.now = sim.now + policy.round_s
    start, cpu = time.perf_counter(), time.process_time()
    policy.schedule(sim.view, sim.now)
    second, second_cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"bench": "gavel_round", "objective": objective, "n_jobs": n_jobs, "n_gpu_types": 3,
            "n_gpus": topology.n_gpus, "first_round_s": round(first, 4),
            "lp_round_s": round(second, 4), "first_round_cpu_s": round(first_cpu, 4),
            "lp_round_cpu_s": round(second_cpu, 4), **provenance()}


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [32, 256, 2048]
    for n in sizes:
        for objective in ("max_min_fairness", "min_makespan", "finish_time_fairness",
                          "max_min_fairness+ss"):
            print(json.dumps(bench(n, objective)), flush=True)
