"""Run Gavel's own simulator and rackwise on the same Gavel-generated trace, and compare.

Gavel (github.com/stanford-futuredata/gavel) is not a dependency: point the
script at a checkout and at a Python that can run its ``scheduler/`` package
(a virtualenv with cvxpy, ecos, numpy, scipy, scikit-learn, matrix_completion,
grpcio and grpcio-tools; the gRPC stubs built once with ``make rpc_stubs`` in
``scheduler/``). Without either the script prints one line and exits 0.

For each case it

1. writes the trace with Gavel's generator (``scripts/utils/generate_trace.py``:
   single-GPU jobs, Poisson arrivals with mean gap ``--lam`` s, ``--seed``),
2. runs Gavel's ``scripts/drivers/simulate_scheduler_with_trace.py`` on it
   (cluster ``--cluster-spec``, ``--gpus-per-server``), timing the whole process,
3. runs rackwise on the same file (``--format gavel`` reader,
   examples/clusters/gavel-108.yaml, network performance model) in a child
   process of this script, also timed whole (start-up, imports, reading, run),

and prints one row per (case, policy, rackwise physics): average JCT and
makespan of both simulators over the jobs both completed, their ratio
(rackwise / Gavel), and wall seconds of both with the ratio Gavel / rackwise.

Two rackwise physics are run. ``gavel``: the network model with interference
off and free restarts, as Gavel's simulator has neither, so the rows differ
only by scheduling. ``network``: the model's defaults.

Usage:
    python benchmarks/bench_gavel_compare.py --gavel-checkout PATH --gavel-python PATH
        [--n-jobs 1000] [--lam 60] [--seed 0] [--out results/gavel-compare]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "examples" / "clusters" / "gavel-108.yaml"
# (Gavel policy, rackwise policy, rackwise parameters). Gavel's max-min LP has no second stage.
POLICIES: tuple[tuple[str, str, dict[str, object]], ...] = (
    ("fifo", "fifo", {}),
    ("max_min_fairness_perf", "gavel", {"second_stage": False}),
)
# rackwise physics -> PerfConfig fields: "gavel" turns off what Gavel's simulator does not model.
PHYSICS: dict[str, dict[str, float]] = {
    "gavel": {"interference_scale": 0.0, "restart_fixed_s": 0.0,
              "storage_read_gbytes_per_s": 1e12, "storage_write_gbytes_per_s": 1e12},
    "network": {},
}
_JCT_LINE = re.compile(r"^Job (\d+)(?: \(high priority\))?: ([0-9.eE+-]+)\s*$")


@dataclass(frozen=True)
class Outcome:
    """One simulator's run: JCT (s) per job id, and the process's wall seconds."""

    jct_s: dict[str, float]
    wall_s: float


def skip_reason(checkout: str | None, python: str | None) -> str | None:
    """Why the comparison cannot run (one line), or None if Gavel is there."""
    if not checkout or not python:
        return "skip: Gavel comparison needs --gavel-checkout and --gavel-python"
    if not (Path(checkout) / "scheduler" / "scheduler.py").is_file():
        return f"skip: no Gavel checkout at {checkout} (scheduler/scheduler.py not found)"
    if not Path(python).is_file():
        return f"skip: no Gavel Python at {python}"
    return None


def parse_gavel_jcts(stdout: str) -> dict[str, float]:
    """Per-job JCTs (s) from the output of Gavel's simulate_scheduler_with_trace.py.

    Gavel prints ``Job N: SECONDS`` (``Job N (high priority): SECONDS``) for
    each job it completed; jobs it dropped are not printed.
    """
    out: dict[str, float] = {}
    for line in stdout.splitlines():
        match = _JCT_LINE.match(line.strip())
        if match:
            out[match.group(1)] = float(match.group(2))
    return out


def trace_arrivals(path: Path) -> dict[str, float]:
    """Arrival second of each job of a Gavel trace; ids ``"0"``, ``"1"``, ... in file order."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {str(i): float(line.split("\t")[-1]) for i, line in enumerate(lines)}


def compare(gavel: Mapping[str, float], rackwise: Mapping[str, float],
            arrivals: Mapping[str, float]) -> dict[str, float]:
    """Average JCT and makespan (hours) of both, over the jobs both completed.

    Makespan is the last finish (arrival + JCT) less the first arrival among
    those jobs.
    """
    common = sorted(set(gavel) & set(rackwise), key=int)
    if not common:
        raise ValueError("the simulators completed no job in common")
    first = min(arrivals[j] for j in common)

    def figures(jct: Mapping[str, float]) -> tuple[float, float]:
        avg = sum(jct[j] for j in common) / len(common)
        makespan = max(arrivals[j] + jct[j] for j in common) - first
        return avg / 3600.0, makespan / 3600.0

    g_jct, g_span = figures(gavel)
    r_jct, r_span = figures(rackwise)
    return {"n_jobs": float(len(common)), "gavel_jct_h": g_jct, "rackwise_jct_h": r_jct,
            "gavel_makespan_h": g_span, "rackwise_makespan_h": r_span}


def gavel_commit(checkout: Path) -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=checkout).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git work tree)"


def generate_trace(python: str, scheduler_dir: Path, out: Path, n_jobs: int, lam: float,
                   seed: int) -> None:
    subprocess.run([python, "scripts/utils/generate_trace.py", "--num_jobs", str(n_jobs),
                    "--lam", str(lam), "--seed", str(seed), "--throughputs_file",
                    str(scheduler_dir / "simulation_throughputs.json"), "--output_file", str(out)],
                   cwd=scheduler_dir, check=True, capture_output=True, text=True)


def run_gavel(python: str, scheduler_dir: Path, trace: Path, policy: str, cluster_spec: str,
              gpus_per_server: str, seed: int, log: Path) -> Outcome:
    command = [python, "scripts/drivers/simulate_scheduler_with_trace.py", "-t", str(trace),
               "-p", policy, "-c", cluster_spec, "--num_gpus_per_server", gpus_per_server,
               "--seed", str(seed), "--throughputs_file",
               str(scheduler_dir / "simulation_throughputs.json")]
    with log.open("w", encoding="utf-8") as err:  # Gavel logs every event to stderr
        began = time.perf_counter()
        done = subprocess.run(command, cwd=scheduler_dir, stdout=subprocess.PIPE, stderr=err,
                              text=True)
        wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"Gavel's simulator failed ({done.returncode}); see {log}")
    return Outcome(parse_gavel_jcts(done.stdout), wall)


def run_rackwise(trace: Path, policy: str, params: Mapping[str, object], physics: str,
                 seed: int, result: Path) -> Outcome:
    command = [sys.executable, str(Path(__file__).resolve()), "--rackwise-child",
               json.dumps({"trace": str(trace), "policy": policy, "params": dict(params),
                           "physics": physics, "seed": seed, "result": str(result)})]
    began = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - began
    return Outcome(json.loads(result.read_text(encoding="utf-8")), wall)


def rackwise_child(spec: Mapping[str, object]) -> None:
    """The rackwise run, in its own process so that its start-up is timed like Gavel's."""
    from rackwise.cluster.topology import load_cluster
    from rackwise.perf.config import PerfConfig
    from rackwise.perf.model import NetworkPerf
    from rackwise.policies.registry import make_policy
    from rackwise.sim.engine import Simulator
    from rackwise.workload.readers.gavel import read_gavel

    jobs = list(read_gavel(str(spec["trace"])))
    params = spec["params"]
    assert isinstance(params, dict)
    perf = NetworkPerf(PerfConfig(**PHYSICS[str(spec["physics"])]))
    seed = spec["seed"]
    assert isinstance(seed, int)
    result = Simulator(load_cluster(CLUSTER), jobs, make_policy(str(spec["policy"]), **params),
                       perf=perf, seed=seed).run()
    jct = {r.job_id: r.finish_time - r.submit_time for r in result.records}
    Path(str(spec["result"])).write_text(json.dumps(jct), encoding="utf-8")


def table(rows: Sequence[Mapping[str, object]]) -> str:
    head = ("case", "policy (gavel/rackwise)", "rw physics", "jobs", "JCT h gavel", "JCT h rw",
            "rw/gavel", "makespan h gavel", "makespan h rw", "rw/gavel", "wall s gavel",
            "wall s rw", "gavel/rw")
    body = [(str(r["case"]), str(r["policy"]), str(r["physics"]), f"{r['n_jobs']:.0f}",
             f"{r['gavel_jct_h']:.2f}", f"{r['rackwise_jct_h']:.2f}",
             f"{r['rackwise_jct_h'] / r['gavel_jct_h']:.3f}",  # type: ignore[operator]
             f"{r['gavel_makespan_h']:.2f}", f"{r['rackwise_makespan_h']:.2f}",
             f"{r['rackwise_makespan_h'] / r['gavel_makespan_h']:.3f}",  # type: ignore[operator]
             f"{r['gavel_wall_s']:.1f}", f"{r['rackwise_wall_s']:.1f}",
             f"{r['gavel_wall_s'] / r['rackwise_wall_s']:.2f}")  # type: ignore[operator]
            for r in rows]
    widths = [max(len(row[i]) for row in (head, *body)) for i in range(len(head))]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in (head, *body)]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gavel-checkout", help="a checkout of stanford-futuredata/gavel")
    parser.add_argument("--gavel-python", help="a Python that runs Gavel's scheduler package")
    parser.add_argument("--n-jobs", type=int, default=1000)
    parser.add_argument("--lam", type=float, default=60.0, help="mean inter-arrival time (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cluster-spec", default="36:36:36", help="v100:p100:k80 GPUs")
    parser.add_argument("--gpus-per-server", default="4:4:4",
                        help="GPUs per server by type (examples/clusters/gavel-108.yaml has 4)")
    parser.add_argument("--physics", nargs="+", choices=sorted(PHYSICS), default=["gavel", "network"])
    parser.add_argument("--out", default=str(ROOT / "results" / "gavel-compare"),
                        help="folder for the trace, logs and results.json (not tracked)")
    parser.add_argument("--rackwise-child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rackwise_child:
        rackwise_child(json.loads(args.rackwise_child))
        return 0
    reason = skip_reason(args.gavel_checkout, args.gavel_python)
    if reason is not None:
        print(reason)
        return 0
    scheduler_dir = Path(args.gavel_checkout).resolve() / "scheduler"
    if not (scheduler_dir / "runtime" / "rpc_stubs" / "common_pb2.py").is_file():
        print(f"error: Gavel's gRPC stubs are not built; run `make rpc_stubs` in {scheduler_dir} "
              f"with {args.gavel_python} first as `python`", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    case = f"gavel-gen n={args.n_jobs} lam={args.lam:g}s seed={args.seed}"
    trace = out / f"gavel-gen-n{args.n_jobs}-lam{args.lam:g}-s{args.seed}.trace"
    generate_trace(args.gavel_python, scheduler_dir, trace, args.n_jobs, args.lam, args.seed)
    arrivals = trace_arrivals(trace)
    print(f"Gavel {gavel_commit(scheduler_dir.parent)}; trace {trace} ({len(arrivals)} single-GPU "
          f"jobs, Gavel's generator); cluster {args.cluster_spec} v100:p100:k80, "
          f"{args.gpus_per_server} GPUs per server; wall = whole process of each simulator",
          flush=True)
    rows: list[dict[str, object]] = []
    for gavel_policy, rw_policy, params in POLICIES:
        gavel = run_gavel(args.gavel_python, scheduler_dir, trace, gavel_policy, args.cluster_spec,
                          args.gpus_per_server, args.seed, out / f"gavel-{gavel_policy}.log")
        for physics in args.physics:
            rackwise = run_rackwise(trace, rw_policy, params, physics, args.seed,
                                    out / f"rackwise-{rw_policy}-{physics}.json")
            row: dict[str, object] = {"case": case, "policy": f"{gavel_policy}/{rw_policy}",
                                      "physics": physics,
                                      "gavel_completed": len(gavel.jct_s),
                                      "rackwise_completed": len(rackwise.jct_s),
                                      **compare(gavel.jct_s, rackwise.jct_s, arrivals),
                                      "gavel_wall_s": gavel.wall_s, "rackwise_wall_s": rackwise.wall_s}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(table(rows))
    (out / "results.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
