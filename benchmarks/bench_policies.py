"""Per-policy cost: simulation speed on the full traces, and one decision at scale.

Each figure is measured in fresh processes (so max RSS belongs to one run):

* ``speed``: the whole trace under one policy (philly_2017 on 512 GPUs,
  itp_2021 on 1,280), jobs simulated per second of wall and CPU time, peak
  memory. A run past ``--limit-s`` seconds is stopped and reported as skipped.
  ``records_sha256`` (first 16 hex digits of the sha256 of ``repr(records)``)
  shows whether a speed-up kept every decision. ``--perf network`` runs it
  under the network performance model, built as ``rackwise simulate --perf
  network`` builds it (default: ``ideal``, the trace-speed model).
  ``--seed`` (default 0) seeds the simulator, as ``rackwise simulate
  --seed``: under the network model it draws the models of jobs the trace
  gives none, so each seed is another workload (``speed``, ``linearity``,
  ``network-ratio``).
* ``linearity``: ``speed`` on the first ``--first-n`` jobs (default 2,000;
  ``--base-copies`` copies of them) and on ten times as many copies
  arriving one after another (the same arrival rate, so the same load);
  the CPU time's ratio is the cost of 10x the jobs (target: at most 12x),
  of the least of ``--repeat`` runs of each, with each run's steps and
  mean running jobs (``mean_running``, after a step, averaged over steps).
  A prefix of the trace ten times as long would mix in the trace's busier
  months, whose longer queues cost more per job.
* ``network-ratio``: ``speed`` under both models, and the network model's
  CPU time over the ideal one's, of the least of ``--repeat`` runs of each
  (run in turn), with each run's steps and mean queue (``mean_pending``,
  jobs waiting after a step, averaged over steps).
* ``process``: the whole ``rackwise simulate --trace T --policy P`` command
  (the ``rackwise`` beside this Python), ``--repeat`` times in turn: wall
  and CPU seconds of each, from start to exit (imports, reading the trace,
  the simulation, the summary and the results written).
* ``decision``: one ``schedule(view, now)`` call on a built state of
  10,000 GPUs (1,250 nodes of 8, 16 per rack) with ``--pending`` jobs waiting
  and ~90% of the GPUs busy with about ``--running`` jobs (default 2,000; 0:
  as many as philly_2017's first jobs in order take, about 6,800); jobs are
  from philly_2017 (`rackwise.testing.busy_cluster`). The state is
  built directly (allocation, running and pending tables, the policy's hooks
  called as the engine would), not by stepping a simulator.
  ``decisions_sha256`` (first 16 hex digits of the sha256 of the decision's
  ``repr``) shows whether a speed-up kept it.

Where a row measures what a target speaks of, it carries the target and
``meets_target``: a full trace under the ideal model in under 60 CPU s; under
the network model in under twice that run's time; one decision (the median
of ``--repeat``) in under 50 ms for the queue and delay-scheduling policies
(fifo, fifo-backfill, sjf, srtf, tiresias, dally, consolidate-strict,
philly-relax) and 1 s for the rest; ten times the jobs in at most twelve
times the CPU time; the whole FIFO process on philly_2017 (its median wall
time) in under 2 s.

    python benchmarks/bench_policies.py decision
    python benchmarks/bench_policies.py decision --policies asrpt -p predictor=forest -p rank=vm
    python benchmarks/bench_policies.py speed --policies fifo,tiresias --traces philly_2017
    python benchmarks/bench_policies.py speed --policies asrpt --traces philly_2017 --first-n 20000
    python benchmarks/bench_policies.py speed --policies tiresias --traces philly_2017 --perf network
    python benchmarks/bench_policies.py network-ratio --policies fifo,sjf --traces itp_2021
    python benchmarks/bench_policies.py linearity --traces philly_2017 --first-n 2000
    python benchmarks/bench_policies.py process --policies fifo --traces philly_2017 --repeat 5
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import multiprocessing
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from provenance import provenance

if TYPE_CHECKING:
    from rackwise.sim.engine import SimResult, Simulator

ROOT = Path(__file__).resolve().parents[1]
SPEED_CLUSTERS = {"philly_2017": (64, 8, 8), "itp_2021": (160, 8, 8)}

# The targets (see the module's docstring).
FULL_TRACE_CPU_S = 60.0
NETWORK_RATIO = 2.0
DECISION_MS = 1_000.0
FAST_DECISION_MS = 50.0
FAST_POLICIES = frozenset({"fifo", "fifo-backfill", "sjf", "srtf", "tiresias", "dally", "consolidate-strict",
                           "philly-relax"})
TEN_TIMES_THE_JOBS = 12.0
WHOLE_PROCESS_S = 2.0


def with_target(row: dict[str, object], *, full_trace: bool = True) -> dict[str, object]:
    """``row`` with the target it is held to and ``meets_target``, where one applies.

    Speed and network-ratio rows are held to a target on a whole trace only
    (``full_trace``); a row that was skipped or failed meets none.
    """
    figure, policy = row.get("figure"), str(row.get("policy"))
    measured: object = None
    target: float | None = None
    if figure == "speed" and full_trace and row.get("perf") == "ideal":
        measured, target = row.get("cpu_s"), FULL_TRACE_CPU_S
    elif figure == "network-ratio" and full_trace:
        measured, target = row.get("cpu_ratio"), NETWORK_RATIO
    elif figure == "decision":
        measured = row.get("decision_ms_median")
        target = FAST_DECISION_MS if policy in FAST_POLICIES else DECISION_MS
    elif figure == "linearity":
        measured, target = row.get("cpu_ratio"), TEN_TIMES_THE_JOBS
    elif figure == "process" and (policy, row.get("trace")) == ("fifo", "philly_2017"):
        measured, target = row.get("wall_s_median"), WHOLE_PROCESS_S
    if target is None:
        return row
    meets = isinstance(measured, (int, float)) and measured < target
    return {**row, "target": target, "meets_target": meets}


def _rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def simulator_for(policy: str, trace: str, first_n: int | None = None, copies: int = 1,
                  start_s: float | None = None, perf: str = "ideal", seed: int = 0) -> Callable[[], Simulator]:
    """What `speed` runs, read and ready to build: a trace (or its first ``first_n`` jobs from
    ``start_s``) on its cluster under one policy.

    With ``copies``, the jobs arrive that many times, each copy one arrival span
    after the last: as many jobs again at the same arrival rate. ``perf`` names
    the performance model (`rackwise.run.PERF_MODELS`), with its default parameters;
    ``seed`` the simulator's.
    """
    from dataclasses import replace

    from rackwise import traces
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.policies.registry import make_policy
    from rackwise.run import make_perf
    from rackwise.sim.engine import Simulator
    from rackwise.workload.workload import Workload

    topology = uniform_cluster(*SPEED_CLUSTERS[trace])
    jobs = traces.load(trace, first_n=first_n, start_s=start_s).drop_oversized(topology.n_gpus)
    if copies > 1:
        span = jobs.jobs[-1].submit_time - jobs.jobs[0].submit_time
        jobs = Workload(tuple(replace(job, job_id=f"{job.job_id}#{k}", submit_time=job.submit_time + k * span)
                              for k in range(copies) for job in jobs), name=jobs.name)
    model = make_perf(perf, {})
    return lambda: Simulator(topology, jobs, make_policy(policy), perf=model, seed=seed)


def records_sha256(result: SimResult) -> str:
    """First 16 hex digits of the sha256 of ``repr(result.records)``: equal records, equal hash."""
    return hashlib.sha256(repr(result.records).encode()).hexdigest()[:16]


def speed(policy: str, trace: str, first_n: int | None = None, copies: int = 1,
          start_s: float | None = None, perf: str = "ideal", seed: int = 0) -> dict[str, object]:
    """Build and run `simulator_for` these arguments: its speed, peak memory and records' hash."""
    build = simulator_for(policy, trace, first_n, copies, start_s, perf, seed)
    wall, cpu = time.perf_counter(), time.process_time()
    simulator = build()
    result = simulator.run()
    wall_s, cpu_s = time.perf_counter() - wall, time.process_time() - cpu
    n = len(result.records)
    rss = _rss_mib()  # before the hash, whose text of every record would count too
    waiting, running = result.timeline.n_pending, result.timeline.n_running
    return {"figure": "speed", "policy": policy, "trace": trace, "perf": perf, "seed": seed,
            "cluster_gpus": simulator.topology.n_gpus,
            "n_jobs": n, "n_steps": result.n_steps, "mean_pending": round(sum(waiting) / max(1, len(waiting)), 1),
            "mean_running": round(sum(running) / max(1, len(running)), 1),
            "simulate_s": round(wall_s, 2),
            "cpu_s": round(cpu_s, 2), "jobs_per_s": round(n / wall_s), "jobs_per_cpu_s": round(n / cpu_s),
            "peak_rss_mib": rss, "records_sha256": records_sha256(result)}


def decision(policy_name: str, n_pending: int, n_nodes: int, busy_frac: float,
             repeat: int, params: dict[str, object] | None = None,
             running: int | None = 2_000) -> dict[str, object]:
    """Time one ``schedule`` call on freshly built states (best and median of ``repeat``).

    ``running``: about this many jobs hold the busy GPUs (`busy_cluster`'s ``n_running``).
    """
    from rackwise.testing.busy_cluster import busy_cluster

    walls, cpus, n_started, n_running, n_busy, digest = [], [], 0, 0, 0, ""
    for _ in range(repeat):
        state = busy_cluster(policy_name, n_nodes=n_nodes, n_pending=n_pending, busy_frac=busy_frac,
                             n_running=running, params=params)
        # A full collection now, so that the decision does not pay for the garbage of the
        # state's construction (a long-running scheduler's heap is in that settled state).
        gc.collect()
        n_busy = state.view.topology.n_gpus - state.view.n_free
        wall, cpu = time.perf_counter(), time.process_time()
        decisions = state.decide()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        n_started, n_running = len(decisions.start), state.n_running
        digest = hashlib.sha256(repr(decisions).encode()).hexdigest()[:16]
    return {"figure": "decision", "policy": policy_name, "params": params or {}, "cluster_gpus": 8 * n_nodes,
            "n_pending": n_pending, "n_running": n_running, "busy_gpus": n_busy, "busy_frac": busy_frac,
            "decision_ms_best": round(1e3 * min(walls), 2),
            "decision_ms_median": round(1e3 * sorted(walls)[len(walls) // 2], 2),
            "decision_cpu_ms_best": round(1e3 * min(cpus), 2), "n_started": n_started,
            "decisions_sha256": digest,
            "peak_rss_mib": _rss_mib()}


def _child(queue: multiprocessing.Queue, fn: str, args: tuple) -> None:  # type: ignore[type-arg]
    try:
        queue.put(globals()[fn](*args))
    except Exception as exc:  # reported as a row, so one failing policy does not stop the rest
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def in_fresh_process(fn: str, args: tuple, limit_s: float) -> dict[str, object]:
    """Run ``fn(*args)`` in a new process; stop it after ``limit_s`` seconds."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(queue, fn, args))
    process.start()
    process.join(limit_s)
    if process.is_alive():
        process.terminate()
        process.join()
        return {"skipped": f"took more than {limit_s:.0f} s"}
    return queue.get() if not queue.empty() else {"error": f"exit code {process.exitcode}"}


def process(policy: str, trace: str, repeat: int) -> dict[str, object]:
    """The whole ``rackwise simulate`` command, run ``repeat`` times in turn: wall and CPU seconds of each."""
    command = Path(sys.executable).with_name("rackwise")
    row: dict[str, object] = {"figure": "process", "policy": policy, "trace": trace}
    walls, cpus = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            done = subprocess.run([str(command), "simulate", "--trace", trace, "--policy", policy, "--out", out],
                                  capture_output=True, text=True)
            walls.append(round(time.perf_counter() - started, 3))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode:
            return {**row, "error": (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]}
        cpus.append(round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3))
    return {**row, "wall_s_median": statistics.median(walls), "wall_s_best": min(walls),
            "cpu_s_median": statistics.median(cpus), "wall_s_runs": walls, "cpu_s_runs": cpus}


def linearity(policy: str, trace: str, n_small: int, limit_s: float,
              start_s: float | None = None, repeat: int = 1, base_copies: int = 1,
              seed: int = 0) -> dict[str, object]:
    """CPU time on ``base_copies`` copies of ``n_small`` jobs and on ten times as many, and their ratio.

    The copies hold the offered load, so the ratio measures cost per job only
    where the window's load is below the cluster's capacity (else each copy
    inherits the last one's queue): ``start_s`` picks such a window. More
    than one base copy measures from a run past its warm-up (a policy that
    learns from finished jobs keeps bounded histories, which a short run
    has not filled). Each is run ``repeat`` times, in turn, and the ratio
    is of the least times: the small run takes a fraction of a second,
    where the machine's jitter alone moves the ratio by more than the
    target's margin.
    """
    smalls, larges = [], []
    for _ in range(repeat):
        smalls.append(in_fresh_process("speed", (policy, trace, n_small, base_copies, start_s, "ideal", seed),
                                       limit_s))
        larges.append(in_fresh_process("speed", (policy, trace, n_small, 10 * base_copies, start_s, "ideal", seed),
                                       limit_s))
    small, large = _least(smalls), _least(larges)
    row: dict[str, object] = {
        "figure": "linearity", "policy": policy, "trace": trace, "seed": seed, "start_s": start_s,
        "base_copies": base_copies,
        "n_small": small.get("n_jobs"), "cpu_s_small": small.get("cpu_s"),
        "n_large": large.get("n_jobs"), "cpu_s_large": large.get("cpu_s"),
        "cpu_s_small_runs": [run.get("cpu_s") for run in smalls],
        "cpu_s_large_runs": [run.get("cpu_s") for run in larges],
        # A policy whose step reads every running job costs more per job where more run at once:
        # the copies keep the cluster fuller than one copy that starts empty and drains.
        "n_steps_small": small.get("n_steps"), "n_steps_large": large.get("n_steps"),
        "mean_running_small": small.get("mean_running"), "mean_running_large": large.get("mean_running")}
    return _with_ratio(row, small, large, smalls, larges)


def _least(runs: list[dict[str, object]]) -> dict[str, object]:
    """The run of least CPU time, or the first that has none (skipped or failed: the row says why)."""
    timed = [run for run in runs if isinstance(run.get("cpu_s"), float)]
    if len(timed) < len(runs):
        return next(run for run in runs if run not in timed)
    return min(timed, key=lambda run: cast(float, run["cpu_s"]))


def network_ratio(policy: str, trace: str, first_n: int | None, start_s: float | None,
                  limit_s: float, repeat: int = 1, seed: int = 0) -> dict[str, object]:
    """``speed`` under the ideal model and under the network model, ``repeat`` times each in
    turn, and the ratio of their least CPU times (as `linearity`'s: the machine's jitter only
    ever adds time, and a ratio near its target moves by more than its margin from run to run)."""
    ideals, networks = [], []
    for _ in range(repeat):
        ideals.append(in_fresh_process("speed", (policy, trace, first_n, 1, start_s, "ideal", seed), limit_s))
        networks.append(in_fresh_process("speed", (policy, trace, first_n, 1, start_s, "network", seed), limit_s))
    ideal, network = _least(ideals), _least(networks)
    return _with_ratio({"figure": "network-ratio", "policy": policy, "trace": trace, "seed": seed,
                        "n_jobs": ideal.get("n_jobs"), "cpu_s_ideal": ideal.get("cpu_s"),
                        "cpu_s_network": network.get("cpu_s"),
                        "cpu_s_ideal_runs": [run.get("cpu_s") for run in ideals],
                        "cpu_s_network_runs": [run.get("cpu_s") for run in networks],
                        # A model that slows jobs down lengthens the queue, which a policy that
                        # reads every waiting job at every step pays for: the regime, shown.
                        "n_steps_ideal": ideal.get("n_steps"), "n_steps_network": network.get("n_steps"),
                        "mean_pending_ideal": ideal.get("mean_pending"),
                        "mean_pending_network": network.get("mean_pending"),
                        "records_sha256_ideal": ideal.get("records_sha256"),
                        "records_sha256_network": network.get("records_sha256")},
                       ideal, network, ideals, networks)


def _with_ratio(row: dict[str, object], base: dict[str, object], other: dict[str, object],
                *repeats: list[dict[str, object]]) -> dict[str, object]:
    """``row`` with ``other``'s CPU time over ``base``'s, or, when either run has none or the
    runs of one of ``repeats`` (the same arguments each) keep different records, why."""
    for runs in repeats:
        hashes = [run["records_sha256"] for run in runs if "records_sha256" in run]
        if len(set(hashes)) > 1:  # a deterministic run has one
            return {**row, "error": f"the repeated runs' records differ: {hashes}"}
    base_s, other_s = base.get("cpu_s"), other.get("cpu_s")
    if isinstance(base_s, float) and isinstance(other_s, float):
        return {**row, "cpu_ratio": round(other_s / max(base_s, 1e-3), 2)}
    return {**row, "skipped": base.get("skipped") or base.get("error") or other.get("skipped")
            or other.get("error")}


def main() -> None:
    from rackwise.policies.registry import POLICIES
    from rackwise.run import PERF_MODELS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figure", choices=("speed", "network-ratio", "decision", "linearity", "process"))
    parser.add_argument("--policies", default=",".join(sorted(POLICIES)))
    parser.add_argument("--traces", default="philly_2017,itp_2021")
    parser.add_argument("--limit-s", type=float, default=300.0)
    parser.add_argument("--pending", type=int, default=5_000)
    parser.add_argument("--nodes", type=int, default=1_250)
    parser.add_argument("--busy-frac", type=float, default=0.9)
    parser.add_argument("--running", type=int, default=2_000,
                        help="decision: about this many running jobs (0: the trace's first jobs in order)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--first-n", type=int, default=None, help="speed: only the trace's first N jobs")
    parser.add_argument("--base-copies", type=int, default=1,
                        help="linearity: this many copies of the jobs against ten times as many")
    parser.add_argument("--start-s", type=float, default=None,
                        help="speed, linearity: the jobs from this submit time on")
    parser.add_argument("--perf", choices=sorted(PERF_MODELS), default="ideal",
                        help="speed: the performance model, as `rackwise simulate --perf`")
    parser.add_argument("--seed", type=int, default=0,
                        help="speed, linearity, network-ratio: the simulator's seed, as `rackwise simulate --seed`")
    parser.add_argument("-p", "--param", action="append", default=None, metavar="KEY=VALUE",
                        help="decision: a policy parameter (repeatable), as `rackwise simulate -p`")
    args = parser.parse_args()
    from rackwise.cli.params import parse_params

    params = parse_params(args.param, "--param")
    common = provenance()
    full_trace = args.first_n is None and args.start_s is None
    for policy in args.policies.split(","):
        rows: list[dict[str, object]] = []
        if args.figure == "speed":
            for trace in args.traces.split(","):
                row = in_fresh_process("speed", (policy, trace, args.first_n, 1, args.start_s, args.perf,
                                                 args.seed), args.limit_s)
                rows.append({"figure": "speed", "policy": policy, "trace": trace, "perf": args.perf,
                             "seed": args.seed, **row})
        elif args.figure == "network-ratio":
            rows = [network_ratio(policy, trace, args.first_n, args.start_s, args.limit_s, args.repeat, args.seed)
                    for trace in args.traces.split(",")]
        elif args.figure == "process":
            rows = [process(policy, trace, args.repeat) for trace in args.traces.split(",")]
        elif args.figure == "linearity":
            rows = [linearity(policy, trace, args.first_n or 2_000, args.limit_s, args.start_s, args.repeat,
                              args.base_copies, args.seed)
                    for trace in args.traces.split(",")]
        else:
            row = in_fresh_process("decision", (policy, args.pending, args.nodes, args.busy_frac,
                                                args.repeat, params, args.running or None), args.limit_s)
            rows = [{"figure": "decision", "policy": policy, **row}]
        for row in rows:
            print(json.dumps({**with_target(row, full_trace=full_trace), **common}), flush=True)


if __name__ == "__main__":
    main()
