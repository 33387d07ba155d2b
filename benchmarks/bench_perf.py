"""What the network performance model costs the simulator: full Philly under FIFO.

Runs the whole philly_2017 trace on uniform_cluster(64, 8, 8) under FIFO
with the trace-speed model (IdealPerf) and with NetworkPerf, each in a fresh
process, and prints one JSON line per run plus the ratio of the two.

The two runs are different simulations (the model changes what happens), so
a third run splits the network run's time in two: it replays the network
run's answers (prepared jobs, rates, communication) from memory instead of
computing them. Its records are the network run's, bit for bit, and its time
is what that history costs the engine and the policy; the rest of the
network run's time is the model's own.

Last, it times the run as a user makes it, `rackwise simulate` from start-up
to results folder (a child process's CPU time), with each model.

    python benchmarks/bench_perf.py
    python benchmarks/bench_perf.py --first-n 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

from provenance import provenance

TRACE = "philly_2017"  # a shipped trace name, or a CSV file in the shipped traces' format


class _Recording:
    """Wraps a model and keeps every answer it gives, in order."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.answers: dict[str, list[object]] = {}

    @property
    def comm_per_iter(self) -> object:
        return self.inner.comm_per_iter  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        method = getattr(self.inner, name)
        kept = self.answers.setdefault(name, [])
        comm = self.answers.setdefault("comm_per_iter", []) if name == "rates" else None

        def recorded(*args, **kwargs):  # type: ignore[no-untyped-def]
            answer = method(*args, **kwargs)
            kept.append(answer)
            if comm is not None:  # the engine reads the re-rated jobs' entries right after
                table = self.inner.comm_per_iter  # type: ignore[attr-defined]
                comm.append({job_id: table[job_id] for job_id in answer if job_id in table})
            return answer
        return recorded


class _Replay:
    """Gives back a recorded run's answers in order, computing nothing."""

    def __init__(self, answers: dict[str, list[object]]) -> None:
        self._next = {name: iter(values).__next__ for name, values in answers.items()}
        for name in ("rate", "rates", "restart_overhead_s", "sharing_factor"):
            if name in answers:
                setattr(self, name, self._replayed(name))
        if "comm_per_iter" in answers:  # each `rates` answer brings its jobs' entries
            self.comm_per_iter: dict[str, tuple[float, float]] = {}
            rates, entries = self.rates, self._next["comm_per_iter"]

            def replayed_rates(*args, **kwargs):  # type: ignore[no-untyped-def]
                self.comm_per_iter.update(entries())
                return rates(*args, **kwargs)
            self.rates = replayed_rates

    def _replayed(self, name: str):  # type: ignore[no-untyped-def]
        take = self._next[name]
        return lambda *args, **kwargs: take()

    def prepare(self, jobs, topology, rng):  # type: ignore[no-untyped-def]
        return self._next["prepare"]()


def _workload(path: str, first_n: int | None):  # type: ignore[no-untyped-def]
    from rackwise import traces
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.workload.readers.csv import read_csv

    topology = uniform_cluster(64, 8, 8)
    if path in traces.names():
        workload = traces.load(path, first_n=first_n, rebase=False)
    else:
        workload = read_csv(path).select(first_n=first_n)
    return topology, list(workload.drop_oversized(topology.n_gpus))


def record(first_n: int | None, path: str) -> dict[str, list[object]]:
    """The network model's answers over a whole run (``measure``'s ``replay`` input)."""

    from rackwise.perf.model import NetworkPerf
    from rackwise.policies.registry import make_policy
    from rackwise.sim.engine import Simulator

    topology, jobs = _workload(path, first_n)
    recording = _Recording(NetworkPerf())
    Simulator(topology, jobs, make_policy("fifo"), perf=recording, seed=0).run()  # type: ignore[arg-type]
    return recording.answers


def measure(model: str, first_n: int | None, path: str,
            replay: dict[str, list[object]] | None = None) -> dict[str, object]:
    """One run of ``model`` (ideal or network), or of ``replay``: a recorded run's answers."""

    import hashlib

    from rackwise.perf.base import IdealPerf
    from rackwise.perf.model import NetworkPerf
    from rackwise.policies.registry import make_policy
    from rackwise.sim.engine import Simulator

    topology, jobs = _workload(path, first_n)
    if replay is not None:
        perf = _Replay(replay)
    else:
        perf = NetworkPerf() if model == "network" else IdealPerf()
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
        "n_steps": result.n_steps,
        "records_sha256": hashlib.sha256(repr(records).encode()).hexdigest()[:16],
        "avg_jct_h": round(sum(r.jct_s for r in records) / len(records) / 3600, 3),
        "comm_gpu_h": round(sum(r.comm_s * r.n_gpus for r in records) / 3600, 1),
        "comm_extra_gpu_h": round(sum(r.comm_extra_s * r.n_gpus for r in records) / 3600, 1),
    }


def whole_run(model: str, first_n: int | None, path: str) -> dict[str, object]:
    """CPU seconds of ``rackwise simulate`` under FIFO, start-up to results folder."""
    from rackwise import traces

    source = ["--trace", path] if path in traces.names() else ["--trace-file", path]
    limit = [] if first_n is None else ["--first-n", str(first_n)]
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-c", "from rackwise.cli import app; app()", "simulate", *source,
                   *limit, "--skip-oversized", "--policy", "fifo", "--perf", model, "--out", out]
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own CPU time
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"{' '.join(command)} exited with {os.waitstatus_to_exitcode(status)}")
        with open(os.path.join(out, "summary.json")) as file:
            figures = json.load(file)["figures"]
    return {"figure": "philly_fifo_whole_run", "perf": model, "n_jobs": figures["n_jobs"],
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "avg_jct_h": round(figures["avg_jct_s"] / 3600, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-n", type=int, default=None, help="only the first N jobs")
    parser.add_argument("--repeat", type=int, default=1, help="runs per model (best is kept)")
    parser.add_argument("--trace", default=TRACE)
    args = parser.parse_args()
    common = provenance()
    best: dict[str, dict[str, object]] = {}

    def keep(key: str, figure: dict[str, object]) -> None:
        print(json.dumps({**figure, **common}), flush=True)
        if key not in best or figure["cpu_s"] < best[key]["cpu_s"]:  # type: ignore[operator]
            best[key] = figure

    answers = None  # the network run's answers, recorded once
    for model in ("ideal", "network", "replay"):
        if model == "replay":
            with ProcessPoolExecutor(max_workers=1) as pool:
                answers = pool.submit(record, args.first_n, args.trace).result()
        for _ in range(args.repeat):
            # A fresh process per run: no warm caches, no memory carried over.
            with ProcessPoolExecutor(max_workers=1) as pool:
                keep(model, pool.submit(measure, model, args.first_n, args.trace, answers).result())
    for model in ("ideal", "network"):
        for _ in range(args.repeat):
            keep(f"whole_{model}", whole_run(model, args.first_n, args.trace))
    if best["replay"]["records_sha256"] != best["network"]["records_sha256"]:
        raise SystemExit("the replayed run's records differ from the network run's")
    for model in ("ideal", "network"):
        if best[f"whole_{model}"]["avg_jct_h"] != best[model]["avg_jct_h"]:
            raise SystemExit(f"rackwise simulate's {model} run differs from the one timed here")
    ideal, network, history, whole_ideal, whole_network = (
        float(best[k]["cpu_s"]) for k in ("ideal", "network", "replay", "whole_ideal", "whole_network"))  # type: ignore[arg-type]
    # The model also changes what happens (slower spread jobs, longer queues, more
    # rate changes to apply): `history_s` is what that costs, `model_s` the model's own time.
    print(json.dumps({"figure": "network_over_ideal_cpu_time", "ratio": round(network / ideal, 3),
                      "history_s": round(history, 3), "model_s": round(network - history, 3),
                      "model_only_ratio": round((ideal + network - history) / ideal, 3),
                      "whole_run_ratio": round(whole_network / whole_ideal, 3),
                      "target": "< 2", **common}), flush=True)


if __name__ == "__main__":
    main()
