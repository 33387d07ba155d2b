"""A bounded soak run of ``rackwise serve`` on the loopback Slurm cluster, with one fault of each kind.

It starts the four-node test cluster of ``tests/backends/slurm_cluster.py`` in
a temporary folder (Slurm's daemons from Debian's packages; nothing leaves
loopback), submits a trace window as held jobs, and runs ``rackwise serve``
in a child process with a state file. At seeded random instants within the
first ``--fault-window-s`` seconds it

1. SIGKILLs serve and starts a new one on the same state file,
2. stops slurmctld for ``--ctld-down-s`` seconds and starts it on its saved state,
3. kills one node (its slurmd and its jobs' processes) while it runs a job,
   and starts its slurmd again once Slurm has marked it down,

then waits for serve to finish the window and prints, from the jobs' own
output and from Slurm: jobs ended exactly once, lost (never ended), ended
twice, run as two Slurm jobs at once, GPUs seen held by two jobs, and the
records' figures (JCT, preemptions, lost GPU-hours).

Usage:
    python benchmarks/soak_slurm.py [--jobs 200] [--policy tiresias] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "backends"))
sys.path.insert(0, str(REPO))

from slurm_cluster import NODES, LoopbackSlurm, slurm_missing_reason  # noqa: E402
from tests.backends.test_slurm import Sampler, read_runs  # noqa: E402

from rackwise.backends.slurm_cli import SlurmCli  # noqa: E402
from rackwise.workload.job import Job  # noqa: E402

SCALE = 3600.0  # trace seconds per real second
H = 3600.0


def window(n_jobs: int, rng: random.Random) -> list[Job]:
    """Jobs of 1-4 GPUs and 1-3 trace hours; arrivals keep the 16 GPUs about full."""
    jobs, t = [], 0.0
    for i in range(n_jobs):
        jobs.append(Job(f"j{i + 1}", submit_time=round(t), n_gpus=rng.choice((1, 1, 2, 2, 3, 4)),
                        duration_s=rng.choice((1, 2, 3)) * H))
        t += rng.expovariate(1 / (0.3 * H))
    return jobs


class Serve:
    """``rackwise serve`` in a child process that the soak may kill and start again."""

    def __init__(self, conf: Path, work: Path, policy: str) -> None:
        self.env = {**os.environ, "SLURM_CONF": str(conf)}
        self.work, self.policy = work, policy
        self.n_started = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, first_args: list[str]) -> None:
        self.n_started += 1
        log = open(self.work / f"serve-{self.n_started}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from rackwise.cli import app; app()", "serve", "--backend", "slurm",
             "--policy", self.policy, "--poll-s", "0.2", "--exit-when-idle",
             "--state-file", str(self.work / "serve.state"),
             "--decision-log", str(self.work / f"decisions-{self.n_started}.jsonl"),
             "--records-out", str(self.work / f"records-{self.n_started}.csv"), *first_args],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--policy", default="tiresias")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fault-window-s", type=float, default=60.0)
    parser.add_argument("--ctld-down-s", type=float, default=8.0)
    parser.add_argument("--limit-s", type=float, default=1200.0)
    args = parser.parse_args()
    if (reason := slurm_missing_reason()) is not None:
        print(f"skipped: {reason}")
        return
    rng = random.Random(args.seed)
    jobs = window(args.jobs, rng)
    base = Path(tempfile.mkdtemp(prefix="rackwise-soak-"))
    slurm = LoopbackSlurm(base / "slurm")
    slurm.start()
    work, out = base / "serve", base / "out"
    work.mkdir()
    trace = work / "trace.csv"
    trace.write_text("job_id,cluster,submit_time,duration,num_gpus\n" + "".join(
        f"{j.job_id},c,{j.submit_time:.0f},{j.duration_s:.0f},{j.n_gpus}\n" for j in jobs))
    serve = Serve(slurm.conf, work, args.policy)
    cli = SlurmCli(env={"SLURM_CONF": str(slurm.conf)})
    faults: list[dict[str, Any]] = []
    started = time.monotonic()

    def at(offset_s: float, name: str) -> float:
        time.sleep(max(0.0, started + offset_s - time.monotonic()))
        faults.append({"fault": name, "at_s": round(time.monotonic() - started, 1)})
        return time.monotonic()

    def kill_serve(offset_s: float) -> None:
        at(offset_s, "serve SIGKILLed and restarted")
        serve.kill()
        serve.start([])

    def restart_controller(offset_s: float) -> None:
        at(offset_s, f"slurmctld down {args.ctld_down_s:g} s")
        slurm.restart_controller(down_s=args.ctld_down_s)

    def kill_node(offset_s: float) -> None:
        at(offset_s, "node killed under a job, slurmd restarted once down")
        victim = NODES[rng.randrange(len(NODES))]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until one of its jobs' payloads runs there
            try:
                if any(j.get("job_state") == "RUNNING" and j.get("nodes") == victim
                       for j in cli.jobs()):
                    break
            except Exception:  # a busy controller: ask again
                pass
            time.sleep(0.2)
        slurm.kill_node(victim)
        faults[-1]["node"] = victim
        while time.monotonic() < deadline + 60:
            if slurm.node_states().get(victim, "").startswith("down"):
                break
            time.sleep(0.5)
        time.sleep(2.0)
        slurm.start_node(victim)

    offsets = sorted(rng.uniform(5.0, args.fault_window_s) for _ in range(3))
    kinds = [kill_serve, restart_controller, kill_node]
    rng.shuffle(kinds)
    try:
        serve.start(["--trace-file", str(trace), "--time-scale", str(SCALE),
                     "--output-dir", str(out)])
        with Sampler(cli) as sampler:
            threads = [threading.Thread(target=kind, args=(offset,), daemon=True)
                       for kind, offset in zip(kinds, offsets)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=args.limit_s)
            while serve.proc is not None and serve.proc.poll() is None:
                if time.monotonic() - started > args.limit_s:
                    serve.kill()
                    break
                time.sleep(0.5)
        wall_s = time.monotonic() - started
        report(jobs, out, work, serve, sampler, faults, wall_s, args)
    finally:
        slurm.stop()


def report(jobs: list[Job], out: Path, work: Path, serve: Serve, sampler: Sampler,
           faults: list[dict[str, Any]], wall_s: float, args: argparse.Namespace) -> None:
    import pandas as pd

    ends = Counter({job.job_id: len(read_runs(out, job.job_id)[1]) for job in jobs})
    runs = sum(len(read_runs(out, job.job_id)[0]) for job in jobs)
    records = pd.read_csv(work / f"records-{serve.n_started}.csv")
    rc = serve.proc.returncode if serve.proc is not None else None
    figures = {
        "jobs": len(jobs), "policy": args.policy, "seed": args.seed, "serve_exit": rc,
        "wall_s": round(wall_s, 1), "faults": faults,
        "ended_once": sum(n == 1 for n in ends.values()),
        "lost": sum(n == 0 for n in ends.values()),
        "ended_twice_or_more": sum(n > 1 for n in ends.values()),
        "run_as_two_slurm_jobs_at_once": len(sampler.doubles),
        "gpus_held_by_two_jobs": len(sampler.overlaps),
        "payload_runs": runs, "records": len(records),
        "preemptions": int(records["n_preemptions"].sum()),
        "avg_jct_h": round(float(records["jct_s"].mean()) / H, 2),
        "lost_gpu_h": round(float((records["lost_s"] * records["n_gpus"]).sum()) / H, 1),
        "squeue_samples": sampler.n_samples,
    }
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
