"""Simulated against real: a trace window replayed on the loopback Slurm cluster, then simulated.

For each policy it starts the four-node test cluster of
``tests/backends/slurm_cluster.py`` (4 nodes x 4 fake GPUs, 2 racks) in a
temporary folder, submits the window held (``submit_held``; each job's
payload sleeps for its trace duration divided by the time scale) and runs
``rackwise serve --backend slurm`` in a child process until the window is
done. From serve's decision log and the payloads' own time stamps it
measures the scheduling latency: from the round in which serve decided a
start (its workload clock) to the payload running, in trace seconds. It then
simulates the same jobs with the same policy and seed on the topology serve
saw, with that latency as the simulator's ``start_latency_s`` (and, for
reference, without it), and prints per-job and average JCT differences,
makespans and start-order agreement (`rackwise.metrics.agreement`).

Usage:
    python benchmarks/replay_slurm.py [--policies fifo,tiresias,dally] [--trace itp_2021]
        [--start-h 312] [--jobs 40] [--time-scale 200] [--poll-s 0.2] [--seed 0] [--per-job]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "backends"))

from slurm_cluster import LoopbackSlurm, slurm_missing_reason  # noqa: E402

from rackwise import __version__, traces  # noqa: E402
from rackwise.backends.slurm_cli import SlurmCli  # noqa: E402
from rackwise.backends.slurm_jobs import submit_held  # noqa: E402
from rackwise.backends.slurm_topology import discover  # noqa: E402
from rackwise.metrics.agreement import compare_records  # noqa: E402
from rackwise.metrics.records import JobRecord  # noqa: E402
from rackwise.perf.base import IdealPerf  # noqa: E402
from rackwise.policies.base import Decisions  # noqa: E402
from rackwise.policies.registry import make_policy  # noqa: E402
from rackwise.sim.engine import Simulator  # noqa: E402
from rackwise.workload.job import Job  # noqa: E402

H = 3600.0


def window(trace: str, start_h: float, n_jobs: int, max_gpus: int) -> list[Job]:
    """The first ``n_jobs`` jobs of at most ``max_gpus`` GPUs from ``start_h`` on, shifted to start at 0.

    Only what serve reads back from a Slurm job's comment is kept (id, submit
    time, GPUs, duration), so the simulator sees the jobs exactly as serve does.
    """
    jobs = [job for job in traces.load(trace, start_s=start_h * H) if job.n_gpus <= max_gpus][:n_jobs]
    origin = jobs[0].submit_time
    return [Job(job.job_id, job.submit_time - origin, job.n_gpus, job.duration_s) for job in jobs]


@dataclass
class RealRun:
    """What one replay on Slurm left behind, in trace seconds from the window's second 0."""

    records: list[JobRecord]
    decisions: list[dict[str, Any]]
    starts: dict[str, list[float]]  # payload start stamps per job, in order
    ends: dict[str, list[float]]  # payload end stamps per job
    t0: float
    scale: float
    wall_s: float
    n_rounds: int | None
    serve_exit: int | None
    topology: Any  # the cluster as serve reads it from Slurm


def payload_stamps(out_dir: Path, job_ids: list[str], t0: float, scale: float
                   ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """The payloads' own ``start``/``end`` stamps (``date +%s.%N``), on the trace clock."""
    starts: dict[str, list[float]] = {}
    ends: dict[str, list[float]] = {}
    for job_id in job_ids:
        path = out_dir / f"rw-{job_id}.out"
        for line in path.read_text().splitlines() if path.exists() else []:
            kind, _, rest = line.partition(" ")
            fields = dict(item.split("=", 1) for item in rest.split() if "=" in item)
            if kind in ("start", "end") and "t" in fields:
                (starts if kind == "start" else ends).setdefault(job_id, []).append(
                    (float(fields["t"]) - t0) * scale)
    return starts, ends


def replay(jobs: list[Job], policy: str, args: argparse.Namespace, base: Path) -> RealRun:
    """Serve ``jobs`` on a fresh loopback cluster under ``policy``; the topology it saw comes with it."""
    slurm = LoopbackSlurm(base / "slurm")
    slurm.start()
    try:
        cli = SlurmCli(env={"SLURM_CONF": str(slurm.conf)})
        topology, _ = discover(cli)
        work, out = base / "serve", base / "out"
        work.mkdir()
        out.mkdir()
        # Workload second 0 falls after the submissions, so no job arrives late.
        t0 = time.time() + 2.0 + 0.15 * len(jobs)
        submit_held(cli, jobs, time_scale=args.time_scale, output_dir=out, t0=t0)
        log_path = work / "serve.log"
        started = time.monotonic()
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-c", "from rackwise.cli import app; app()", "serve",
                 "--backend", "slurm", "--policy", policy, "--poll-s", str(args.poll_s),
                 "--seed", str(args.seed), "--exit-when-idle",
                 "--decision-log", str(work / "decisions.jsonl"),
                 "--records-out", str(work / "records.csv")],
                env={**os.environ, "SLURM_CONF": str(slurm.conf)}, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
            try:
                proc.wait(timeout=args.limit_s)
            except subprocess.TimeoutExpired:
                proc.terminate()
                proc.wait(timeout=30)
        wall_s = time.monotonic() - started
        text = log_path.read_text()
        rounds = [line for line in text.splitlines() if line.rstrip().endswith(" rounds")]
        n_rounds = int(rounds[-1].split(",")[-1].split()[0]) if rounds else None
        records = read_records(work / "records.csv")
        decisions = [json.loads(line) for line in (work / "decisions.jsonl").read_text().splitlines()
                     ] if (work / "decisions.jsonl").exists() else []
        starts, ends = payload_stamps(out, [job.job_id for job in jobs], t0, args.time_scale)
        if proc.returncode != 0:
            print(f"serve exited {proc.returncode}; its log ends:\n{text[-2000:]}", file=sys.stderr)
        return RealRun(records, decisions, starts, ends, t0, args.time_scale, wall_s, n_rounds,
                       proc.returncode, topology)
    finally:
        slurm.stop()


def read_records(path: Path) -> list[JobRecord]:
    """Records serve wrote with ``--records-out``."""
    if not path.exists():
        return []
    import pandas as pd

    frame = pd.read_csv(path, dtype={"job_id": str})
    columns = JobRecord.columns()
    return [JobRecord(**{c: (None if pd.isna(row[c]) else row[c]) for c in columns if c in row})
            for row in frame.to_dict("records")]


@dataclass(frozen=True)
class Latency:
    """Measured delays of a replay, in trace seconds."""

    start_s: list[float]  # decision round -> payload running, one per run
    apply_s: list[float]  # decision round -> serve's commands done (its decision log's stamp)
    first_start_stamp_s: list[float]  # serve's record of a job's first start - its payload's stamp
    finish_stamp_s: list[float]  # serve's record of a job's finish - its payload's end stamp
    end_to_decision_s: list[float]  # a payload's end -> the next round that started a job
    arrival_to_round_s: list[float]  # a job's arrival -> the round that started it, if within a poll


def measure(run: RealRun, poll_trace_s: float) -> Latency:
    """Pair every payload run with the start decision that launched it, and records with stamps."""
    ok_starts: dict[str, list[dict[str, Any]]] = {}
    for decision in run.decisions:
        if decision["action"] == "start" and decision["ok"]:
            ok_starts.setdefault(decision["job_id"], []).append(decision)
    start_s, apply_s = [], []
    for job_id, stamps in run.starts.items():
        for stamp in stamps:
            before = [d for d in ok_starts.get(job_id, []) if d["now"] <= stamp]
            if before:
                decision = before[-1]
                start_s.append(stamp - decision["now"])
                apply_s.append((decision["wall_time"] - run.t0) * run.scale - decision["now"])
    first_stamp = [r.first_start - run.starts[r.job_id][0] for r in run.records if run.starts.get(r.job_id)]
    finish_stamp = [r.finish_time - run.ends[r.job_id][-1] for r in run.records if run.ends.get(r.job_id)]
    # A job's end answered by a start in the next few polls: serve's reaction to freed GPUs.
    rounds = sorted({d["now"] for ds in ok_starts.values() for d in ds})
    reaction = []
    for stamps in run.ends.values():
        end = stamps[-1]
        later = [t for t in rounds if t >= end]
        if later and later[0] - end <= 5 * poll_trace_s + run.scale:
            reaction.append(later[0] - end)
    # Jobs started in the round their arrival woke serve for: how late that round read the cluster.
    submitted = {r.job_id: r.submit_time for r in run.records}
    arrival = [ds[0]["now"] - submitted[job_id] for job_id, ds in ok_starts.items()
               if job_id in submitted and 0.0 <= ds[0]["now"] - submitted[job_id] <= poll_trace_s]
    return Latency(start_s, apply_s, first_stamp, finish_stamp, reaction, arrival)


class Polled:
    """A policy as serve drives it: it sees the cluster only at rounds, not at every event.

    Serve reads Slurm every poll, and when a job is due to arrive or the
    policy asked for a timer; each read lands ``late_s`` after the instant it
    was due (the read itself takes that long), and a job that ends between
    two rounds is noticed at the next one. This wrapper gives the simulator
    the same rhythm: completions and arrivals are held back until the next
    round, which comes ``poll_s`` after the last one, or ``late_s`` after an
    arrival or a timer the inner policy asked for, whichever is first.
    """

    def __init__(self, inner: Any, poll_s: float, late_s: float = 0.0) -> None:
        self.inner, self.poll_s, self.late_s = inner, poll_s, late_s
        self.name, self.capabilities = inner.name, inner.capabilities

    def reset(self, view: Any, rng: Any) -> None:
        self.inner.reset(view, rng)
        self.due_at = float("inf")
        self.completed: list[Job] = []
        self.arrived: list[Job] = []

    def on_history(self, jobs: Any) -> None:
        self.inner.on_history(jobs)

    def on_completion(self, job: Job, now: float) -> None:
        self.completed.append(job)

    def on_arrival(self, job: Job, now: float) -> None:
        self.arrived.append(job)
        self.due_at = min(self.due_at, now + self.late_s)

    def schedule(self, view: Any, now: float) -> Decisions:
        if now < self.due_at:
            return Decisions(wake_at=self.due_at if self.due_at < float("inf") else None)
        for job in self.completed:
            self.inner.on_completion(job, now)
        for job in self.arrived:
            self.inner.on_arrival(job, now)
        self.completed, self.arrived = [], []
        decisions = self.inner.schedule(view, now)
        due = [now + self.poll_s] if (view.pending or view.running or decisions.start) else []
        if decisions.wake_at is not None:
            due.append(decisions.wake_at + self.late_s)
        self.due_at = min(due, default=float("inf"))
        return replace(decisions, wake_at=self.due_at if due else None)


@dataclass
class SimRun:
    """A simulation of the window, and its preemptions that serve would have refused."""

    records: list[JobRecord]
    preempted_near_end: int  # preemptions of a job within one poll of its end (`SlurmBackend._ending`)


def simulate(jobs: list[Job], policy: str, topology: Any, seed: int, start_latency_s: float,
             poll_trace_s: float = 0.0, rounds_every_s: float | None = None,
             rounds_late_s: float = 0.0) -> SimRun:
    """The window under ``policy`` on ``topology``; payloads restore nothing, so neither does the model.

    ``rounds_every_s`` and ``rounds_late_s`` drive the policy as serve does (`Polled`);
    None: at every event.
    """
    running: dict[str, Any] = {}
    near_end = 0

    def watch(sim: Simulator) -> None:
        nonlocal near_end
        for job_id, state in running.items():
            if job_id in sim.pending:  # preempted in this step
                near_end += state.iters_done + poll_trace_s >= state.job.total_iters
        running.clear()
        running.update(sim.running)

    chosen = make_policy(policy)
    if rounds_every_s is not None:
        chosen = Polled(chosen, rounds_every_s, rounds_late_s)
    simulator = Simulator(topology, jobs, chosen, perf=IdealPerf(checkpoint_restore_s=0.0),
                          seed=seed, start_latency_s=start_latency_s, observers=[watch])
    return SimRun(simulator.run().records, near_end)


def with_payload_starts(run: RealRun) -> list[JobRecord]:
    """The real records with each first start taken from the payload's stamp instead of Slurm's."""
    return [replace(r, first_start=run.starts[r.job_id][0]) if run.starts.get(r.job_id) else r
            for r in run.records]


def _stats(values: list[float], scale: float) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (f"mean {statistics.fmean(values):.0f} s ({statistics.fmean(values) / scale:.2f} real s), "
            f"median {statistics.median(values):.0f}, p90 {p90:.0f}, min {ordered[0]:.0f}, "
            f"max {ordered[-1]:.0f} (n={len(values)})")


def report(policy: str, jobs: list[Job], run: RealRun, latency: Latency, topology: Any,
           args: argparse.Namespace) -> dict[str, Any]:
    poll_trace_s = args.poll_s * args.time_scale
    mean_latency = statistics.fmean(latency.start_s) if latency.start_s else 0.0
    sim_run = simulate(jobs, policy, topology, args.seed, mean_latency, poll_trace_s)
    sim, sim_plain = sim_run.records, simulate(jobs, policy, topology, args.seed, 0.0).records
    print(f"\n=== {policy}: {len(run.records)}/{len(jobs)} jobs finished on Slurm, serve exit "
          f"{run.serve_exit}, {run.wall_s:.0f} s wall, {run.n_rounds} rounds")
    if len(run.records) < 2:
        print("too few records to compare")
        return {"policy": policy, "finished": len(run.records)}
    agreement = compare_records(run.records, sim)
    plain = compare_records(run.records, sim_plain)
    stamped = compare_records(with_payload_starts(run), sim)
    measured_poll = run.wall_s / run.n_rounds * args.time_scale if run.n_rounds else float("nan")
    late_s = statistics.median(latency.arrival_to_round_s) if latency.arrival_to_round_s else 0.0
    polled_run = simulate(jobs, policy, topology, args.seed, mean_latency, poll_trace_s,
                          rounds_every_s=measured_poll if run.n_rounds else poll_trace_s,
                          rounds_late_s=late_s)
    polled = compare_records(run.records, polled_run.records)
    print(f"scheduling latency, decision round -> payload running: {_stats(latency.start_s, args.time_scale)}")
    print(f"  of which decision round -> serve's commands done:    {_stats(latency.apply_s, args.time_scale)}")
    print(f"poll interval: --poll-s {args.poll_s} = {poll_trace_s:.0f} trace s; measured "
          f"(serve's wall time / rounds) {measured_poll:.0f} trace s")
    for label, values in (("payload end -> next round starting a job", latency.end_to_decision_s),
                          ("arrival -> the round that started the job", latency.arrival_to_round_s),
                          ("serve's first start - payload stamp", latency.first_start_stamp_s),
                          ("serve's finish - payload end stamp", latency.finish_stamp_s)):
        print(f"{label + ':':<55}{_stats(values, args.time_scale)}")
    if args.per_job:
        print(f"{'job':>8} {'gpus':>4} {'submit':>8} {'start real':>10} {'start sim':>10} "
              f"{'jct real':>9} {'jct sim':>9} {'diff':>8} {'rel':>7}")
        for j in agreement.jobs:
            n_gpus = next(job.n_gpus for job in jobs if job.job_id == j.job_id)
            submit = next(job.submit_time for job in jobs if job.job_id == j.job_id)
            print(f"{j.job_id:>8} {n_gpus:>4} {submit:>8.0f} {j.real_start_s:>10.0f} {j.sim_start_s:>10.0f} "
                  f"{j.real_jct_s:>9.0f} {j.sim_jct_s:>9.0f} {j.jct_diff_s:>+8.0f} {j.jct_rel:>+7.1%}")
    diffs = sorted(abs(j.jct_diff_s) for j in agreement.jobs)
    preempt_real = sum(r.n_preemptions for r in run.records)
    refused = sum(1 for d in run.decisions if d["action"] == "preempt" and not d["ok"])
    preempt_sim = sum(r.n_preemptions for r in sim)
    figures = {
        "policy": policy, "finished": len(run.records), "jobs": len(jobs),
        "avg_jct_real_h": agreement.avg_jct_real_s / H, "avg_jct_sim_h": agreement.avg_jct_sim_s / H,
        "avg_jct_rel": agreement.avg_jct_rel, "avg_jct_sim0_h": plain.avg_jct_sim_s / H,
        "avg_jct_rel0": plain.avg_jct_rel, "avg_jct_polled_h": polled.avg_jct_sim_s / H,
        "avg_jct_rel_polled": polled.avg_jct_rel,
        "makespan_real_h": agreement.makespan_real_s / H, "makespan_sim_h": agreement.makespan_sim_s / H,
        "makespan_rel": agreement.makespan_rel,
        "kendall_tau": agreement.kendall_tau, "same_order": agreement.same_order_share,
        "kendall_tau_stamped": stamped.kendall_tau, "same_order_stamped": stamped.same_order_share,
        "mean_abs_diff_h": agreement.mean_abs_jct_diff_s / H,
        "p90_abs_diff_h": diffs[min(len(diffs) - 1, int(0.9 * len(diffs)))] / H,
        "latency_s": mean_latency, "poll_s": poll_trace_s, "poll_measured_s": measured_poll,
        "round_late_s": late_s,
        "preemptions_real": preempt_real, "preemptions_sim": preempt_sim, "wall_s": run.wall_s,
        "preemptions_refused_real": refused, "sim_preempted_near_end": sim_run.preempted_near_end,
    }
    print(f"avg JCT: real {figures['avg_jct_real_h']:.3f} h, sim {figures['avg_jct_sim_h']:.3f} h with "
          f"{mean_latency:.0f} s latency ({agreement.avg_jct_rel:+.1%}); sim without latency "
          f"{figures['avg_jct_sim0_h']:.3f} h ({plain.avg_jct_rel:+.1%}); sim with latency and serve's "
          f"rounds (every {measured_poll:.0f} s, {late_s:.0f} s late) {figures['avg_jct_polled_h']:.3f} h "
          f"({polled.avg_jct_rel:+.1%}, {sum(r.n_preemptions for r in polled_run.records)} preemptions)")
    print(f"makespan: real {figures['makespan_real_h']:.2f} h, sim {figures['makespan_sim_h']:.2f} h "
          f"({agreement.makespan_rel:+.1%}); per-job |JCT diff| mean {figures['mean_abs_diff_h']:.2f} h, "
          f"p90 {figures['p90_abs_diff_h']:.2f} h")
    print(f"preemptions (restarts): real {preempt_real}, sim {preempt_sim}; serve refused {refused} "
          f"preemption(s) of a job within one poll of its end; the sim made {sim_run.preempted_near_end} such")
    print(f"start order: Kendall tau {agreement.kendall_tau:.3f}, same order {agreement.same_order_share:.1%} "
          f"of {agreement.n_pairs} pairs (Slurm's stamps); with the payloads' stamps tau "
          f"{stamped.kendall_tau:.3f}, same order {stamped.same_order_share:.1%}")
    if agreement.only_real or agreement.only_sim:
        print(f"finished in one run only: real {list(agreement.only_real)}, sim {list(agreement.only_sim)}")
    return figures


def summary_table(rows: list[dict[str, Any]]) -> str:
    head = ("| policy | jobs | avg JCT real (h) | sim (h) | diff | sim, no latency (h) | diff | "
            "sim, serve's rounds (h) | diff | makespan real / sim (h) | Kendall tau | same order | "
            "latency (s) | poll (s) | preemptions real / sim |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        if "avg_jct_real_h" not in r:
            lines.append(f"| {r['policy']} | {r['finished']} | n/a |" + "  |" * 12)
            continue
        lines.append(
            f"| {r['policy']} | {r['finished']}/{r['jobs']} | {r['avg_jct_real_h']:.3f} | "
            f"{r['avg_jct_sim_h']:.3f} | {r['avg_jct_rel']:+.1%} | {r['avg_jct_sim0_h']:.3f} | "
            f"{r['avg_jct_rel0']:+.1%} | {r['avg_jct_polled_h']:.3f} | {r['avg_jct_rel_polled']:+.1%} | "
            f"{r['makespan_real_h']:.2f} / {r['makespan_sim_h']:.2f} | "
            f"{r['kendall_tau']:.3f} | {r['same_order']:.1%} | {r['latency_s']:.0f} | "
            f"{r['poll_s']:.0f} ({r['poll_measured_s']:.0f}) | {r['preemptions_real']} / {r['preemptions_sim']} |")
    return "\n".join(lines)


def slurm_version() -> str:
    """Slurm's release, from the controller binary (the clients need a configuration to answer)."""
    try:
        done = subprocess.run(["slurmctld", "-V"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "Slurm (version unknown)"
    return done.stdout.strip() or "Slurm (version unknown)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policies", default="fifo,tiresias,dally")
    parser.add_argument("--trace", default="itp_2021")
    parser.add_argument("--start-h", type=float, default=312.0, help="window start, trace hours")
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--max-gpus", type=int, default=16)
    parser.add_argument("--time-scale", type=float, default=200.0, help="trace seconds per real second")
    parser.add_argument("--poll-s", type=float, default=0.2, help="serve's poll, real seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit-s", type=float, default=900.0, help="real seconds per replay")
    parser.add_argument("--per-job", action="store_true", help="print every job's figures")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    if (reason := slurm_missing_reason()) is not None:
        print(f"skipped: {reason}")
        return
    jobs = window(args.trace, args.start_h, args.jobs, args.max_gpus)
    print(f"rackwise {__version__}, {slurm_version()}, Python {platform.python_version()}; "
          f"{args.trace} from hour {args.start_h:g}: {len(jobs)} jobs of <= {args.max_gpus} GPUs, "
          f"time scale {args.time_scale:g}, poll {args.poll_s:g} s, seed {args.seed}")
    rows = []
    for policy in args.policies.split(","):
        base = Path(tempfile.mkdtemp(prefix=f"rackwise-replay-{policy}-"))
        run = replay(jobs, policy, args, base)
        latency = measure(run, args.poll_s * args.time_scale)
        rows.append(report(policy, jobs, run, latency, run.topology, args))
    print("\n" + summary_table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
