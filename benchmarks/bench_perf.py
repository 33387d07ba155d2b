"""What the network performance model costs the simulator: full Philly under FIFO.

Runs the whole philly_2017 trace on uniform_cluster(64, 8, 8) under FIFO
with the trace-speed model (IdealPerf) and with NetworkPerf, each in a fresh
process, and prints one JSON line per run plus the ratio of the two.

    python benchmarks/bench_perf.py
    python benchmarks/bench_perf.py --first-n 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor

from provenance import provenance

TRACE = "philly_2017"  # a shipped trace name, or a CSV file in the shipped traces' format



def _timed(cls: type) -> type:
    """A subclass that adds up the CPU time spent inside the model's methods."""

    def wrap(name: str):  # type: ignore[no-untyped-def]
        method = getattr(cls, name)

        def timed(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            started = time.process_time()
            try:
                return method(self, *args, **kwargs)
            finally:
                self.spent_s += time.process_time() - started
        return timed

    names = [n for n in ("prepare", "rate", "rates", "restart_overhead_s", "comm_per_iter_s")
             if hasattr(cls, n)]
    body = {n: wrap(n) for n in names}
    body["spent_s"] = 0.0
    return type(f"Timed{cls.__name__}", (cls,), body)


def measure(model: str, first_n: int | None, path: str, timed: bool) -> dict[str, object]:
    """One run; ``timed`` also adds up the time inside the model (which costs a little)."""

    from rackwise.cluster.topology import uniform_cluster
    from rackwise.perf.base import IdealPerf
    from rackwise.perf.model import NetworkPerf
    from rackwise.policies.registry import make_policy
    from rackwise.sim.engine import Simulator

    from rackwise import traces
    from rackwise.workload.readers.csv import read_csv

    topology = uniform_cluster(64, 8, 8)
    if path in traces.names():
        workload = traces.load(path, first_n=first_n, rebase=False)
    else:
        workload = read_csv(path).select(first_n=first_n)
    jobs = list(workload.drop_oversized(topology.n_gpus))
    cls = NetworkPerf if model == "network" else IdealPerf
    perf = _timed(cls)() if timed else cls()
    started = time.perf_counter()
    cpu_started = time.process_time()
    simulator = Simulator(topology, jobs, make_policy("fifo"), perf=perf, seed=0)
    prepared = time.perf_counter()
    result = simulator.run()
    finished = time.perf_counter()
    cpu_s = time.process_time() - cpu_started
    records = result.records
    return {
        "figure": "philly_fifo", "perf": model, "n_jobs": len(records),
        "prepare_s": round(prepared - started, 3), "simulate_s": round(finished - prepared, 3),
        "total_s": round(finished - started, 3), "cpu_s": round(cpu_s, 3),
        "in_model_s": round(perf.spent_s, 3) if timed else None,  # type: ignore[attr-defined]
        "n_steps": result.n_steps,
        "avg_jct_h": round(sum(r.jct_s for r in records) / len(records) / 3600, 3),
        "comm_gpu_h": round(sum(r.comm_s * r.n_gpus for r in records) / 3600, 1),
        "comm_extra_gpu_h": round(sum(r.comm_extra_s * r.n_gpus for r in records) / 3600, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-n", type=int, default=None, help="only the first N jobs")
    parser.add_argument("--repeat", type=int, default=1, help="runs per model (best is kept)")
    parser.add_argument("--trace", default=TRACE)
    args = parser.parse_args()
    common = provenance()
    best: dict[str, dict[str, object]] = {}
    in_model: dict[str, float] = {}
    for model in ("ideal", "network"):
        # Plain runs give the times; one more, instrumented, says how much of it the
        # model's own methods take (the instrument's overhead stays out of the times).
        for timed in [False] * args.repeat + [True]:
            # A fresh process per run: no warm caches, no memory carried over.
            with ProcessPoolExecutor(max_workers=1) as pool:
                figure = pool.submit(measure, model, args.first_n, args.trace, timed).result()
            print(json.dumps({**figure, **common}), flush=True)
            if timed:
                in_model[model] = float(figure["in_model_s"])  # type: ignore[arg-type]
            elif model not in best or figure["cpu_s"] < best[model]["cpu_s"]:  # type: ignore[operator]
                best[model] = figure
    ideal, network = best["ideal"], best["network"]
    ratio = float(network["cpu_s"]) / float(ideal["cpu_s"])  # type: ignore[arg-type]
    # The model also changes what happens (slower spread jobs, longer queues, more
    # policy work); the second ratio counts only the model's own time on top of the
    # run without it.
    own = (float(ideal["cpu_s"]) + in_model["network"]) / float(ideal["cpu_s"])  # type: ignore[arg-type]
    print(json.dumps({"figure": "network_over_ideal_cpu_time", "ratio": round(ratio, 3),
                      "model_only_ratio": round(own, 3), "target": "< 2", **common}), flush=True)


if __name__ == "__main__":
    main()
