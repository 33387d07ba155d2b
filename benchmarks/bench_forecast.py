"""Forecast speed and accuracy. Prints one JSON line per figure.

    python benchmarks/bench_forecast.py speed              # 5,000 pending + 2,000 running, 10,000 GPUs
    python benchmarks/bench_forecast.py accuracy           # both shipped traces, busy windows
    python benchmarks/bench_forecast.py accuracy --policies fifo --instants 4 --samples 20

Speed: a synthetic snapshot (1,250 nodes of 8 GPUs) with every GPU in use by
2,000 running jobs and 5,000 jobs queued; a point forecast, then a band of
100 sampled runs over the local cores.

Accuracy: each trace window is simulated once to find busy instants (the
most jobs queued), then again forecasting at those instants with durations
predicted from the jobs finished so far and no knowledge of later arrivals;
see rackwise.forecast.accuracy for the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from provenance import provenance

WINDOWS = {  # trace -> (nodes, gpus per node, nodes per rack, start day, days)
    "philly_2017": (64, 8, 8, 40.0, 10.0),
    "itp_2021": (160, 8, 8, 20.0, 6.0),
}



def emit(figure: str, value: object, **extra: object) -> None:
    print(json.dumps({"figure": figure, "value": value, **extra, **provenance()}), flush=True)


def big_snapshot(policy: str, n_running: int = 2_000, n_pending: int = 5_000,
                 n_nodes: int = 1_250, seed: int = 0):  # type: ignore[no-untyped-def]
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.engine.snapshot import ClusterSnapshot
    from rackwise.workload.job import Job
    from rackwise.workload.state import JobState, Status

    rng = np.random.default_rng(seed)
    topology = uniform_cluster(n_nodes, 8, 16)
    sizes = rng.choice([1, 2, 4, 8, 16], p=[0.45, 0.2, 0.15, 0.15, 0.05], size=n_running + n_pending)
    durations = rng.lognormal(np.log(3_600), 1.2, size=len(sizes))
    running, pending, predicted = [], [], {}
    gpu = 0
    now = 100_000.0
    for i in range(n_running):  # fill the cluster: running jobs hold every GPU
        n = int(sizes[i]) if i < n_running - 1 else topology.n_gpus - gpu
        n = min(n, topology.n_gpus - gpu - (n_running - 1 - i))
        job = Job(f"r{i}", now - 5_000.0, n, float(durations[i]) + 5_000.0)
        state = JobState(job)
        state.status = Status.RUNNING
        state.gpu_ids = tuple(range(gpu, gpu + n))
        gpu += n
        state.run_start = state.last_update = state.busy_until = state.first_start = now - 4_000.0
        state.rate_iters_per_s = 1.0
        state.iters_done = 0.0
        running.append(state)
        predicted[job.job_id] = job.duration_s
    for i in range(n_pending):
        job = Job(f"p{i}", now - 1_000.0 + i * 0.1, int(sizes[n_running + i]),
                  float(durations[n_running + i]))
        state = JobState(job)
        pending.append(state)
        predicted[job.job_id] = job.duration_s
    ratios = tuple(sorted(rng.lognormal(0.0, 0.6, size=500)))
    return ClusterSnapshot(taken_at_s=now, topology=topology, running=tuple(running),
                           pending=tuple(pending), predicted_duration_s=predicted,
                           duration_error={"": ratios}, policy_name=policy)


def speed(args: argparse.Namespace) -> None:
    from rackwise.forecast.band import band
    from rackwise.forecast.forward import forward

    for policy in args.policies.split(","):
        snapshot = big_snapshot(policy)
        started = time.perf_counter()
        point = forward(snapshot)
        point_s = time.perf_counter() - started
        emit("point_forecast_s", round(point_s, 3), policy=policy, n_pending=len(snapshot.pending),
             n_running=len(snapshot.running), n_gpus=snapshot.topology.n_gpus,
             n_steps=point.n_steps)
        if args.samples:
            started = time.perf_counter()
            band(snapshot, n_samples=args.samples, workers=args.workers)
            emit("band_forecast_s", round(time.perf_counter() - started, 3), policy=policy,
                 n_samples=args.samples, workers=args.workers or os.cpu_count())


def busy_instants(config, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    """The ``n`` instants with the longest queue, at least a twentieth of the window apart."""
    from rackwise.run import execute

    result, _ = execute(config)
    times = np.asarray(result.timeline.time)
    queue = np.asarray(result.timeline.n_pending)
    start, end = times[0], times[-1]
    gap = (end - start) / 20
    chosen: list[float] = []
    for index in np.argsort(-queue, kind="stable"):
        t = float(times[index])
        if queue[index] == 0 or len(chosen) >= n:
            break
        if all(abs(t - c) >= gap for c in chosen):
            chosen.append(t + 1.0)  # just after the event: the state the queue has then
    return sorted(chosen)


def accuracy(args: argparse.Namespace) -> None:
    from rackwise.forecast.accuracy import figures, run_with_forecasts
    from rackwise.run import ClusterConfig, RunConfig, WorkloadConfig

    for trace in args.traces.split(","):
        nodes, per_node, per_rack, start_day, days = WINDOWS[trace]
        for policy in args.policies.split(","):
            config = RunConfig(
                workload=WorkloadConfig(trace=trace, start_s=start_day * 86_400,
                                        end_s=(start_day + days) * 86_400, skip_oversized=True),
                cluster=ClusterConfig(nodes=nodes, gpus_per_node=per_node, nodes_per_rack=per_rack),
                policy=policy, seed=0)
            instants = busy_instants(config, args.instants)
            started = time.perf_counter()
            _, _, frame = run_with_forecasts(config, instants, samples=args.samples,
                                             workers=args.workers)
            result = figures(frame)
            emit("forecast_accuracy", {k: round(v, 4) if isinstance(v, float) else v
                                       for k, v in result.items()},
                 trace=trace, policy=policy, cluster=f"{nodes}x{per_node}",
                 window_days=[start_day, start_day + days], samples=args.samples,
                 wall_s=round(time.perf_counter() - started, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["speed", "accuracy"])
    parser.add_argument("--policies", default=None)
    parser.add_argument("--traces", default="philly_2017,itp_2021")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--instants", type=int, default=12)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    if args.what == "speed":
        args.policies = args.policies or "fifo,tiresias"
        args.samples = 100 if args.samples is None else args.samples
        speed(args)
    else:
        args.policies = args.policies or "fifo,tiresias,asrpt-oracle"
        args.samples = 30 if args.samples is None else args.samples
        accuracy(args)


if __name__ == "__main__":
    main()
