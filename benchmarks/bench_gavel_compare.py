"""Run Gavel's own simulator and rackwise on the same Gavel traces, and compare.

Gavel (github.com/stanford-futuredata/gavel) is not a dependency: point the
script at a checkout and at a Python that can run its ``scheduler/`` package
(a virtualenv with cvxpy, ecos, numpy, scipy, scikit-learn, matrix_completion,
grpcio and grpcio-tools; the gRPC stubs built once with ``make rpc_stubs`` in
``scheduler/``). Without either the script prints one line and exits 0.

Three traces (``--cases``), each in Gavel's current ten-field format:

- ``gen-single``: Gavel's generator (``scripts/utils/generate_trace.py``),
  ``--n-jobs`` single-GPU jobs, Poisson arrivals with mean gap ``--lam`` s;
- ``gen-multi``: the same generator with ``--generate-multi-gpu-jobs``
  (``--multi-n-jobs`` jobs, mean gap ``--multi-lam`` s);
- ``msr``: one of Gavel's Philly-derived traces (``scheduler/traces/msr``),
  written in the old seven-field format, converted (`convert_msr_trace`).

For each trace and each Gavel policy (``fifo``, ``max_min_fairness_perf``)
it runs Gavel's ``scripts/drivers/simulate_scheduler_with_trace.py`` and
rackwise in two modes, each as its own process timed whole (start-up,
imports, reading, run):

- ``compat``: experiments/gavel-compat.yaml, rackwise with Gavel's timing
  rules (the policy entry labelled like the Gavel policy, its physics);
- ``native``: rackwise's own policies and default physics: the
  event-driven ``fifo`` and ``gavel`` with its defaults.

It prints one row per (trace, policy, mode): jobs Gavel dropped, average JCT
and makespan of both over the jobs both completed with their ratio
(rackwise / Gavel), and wall seconds of both with the ratio Gavel / rackwise.

Usage:
    python benchmarks/bench_gavel_compare.py --gavel-checkout PATH --gavel-python PATH
        [--cases gen-single gen-multi msr] [--modes compat native] [--out results/gavel-compare]
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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rackwise.run import RunConfig

ROOT = Path(__file__).resolve().parents[1]
COMPAT = ROOT / "experiments" / "gavel-compat.yaml"
CLUSTER = ROOT / "examples" / "clusters" / "gavel-108.yaml"
GAVEL_POLICIES = ("fifo", "max_min_fairness_perf")
# native mode: Gavel policy -> (rackwise policy, parameters), rackwise's defaults otherwise.
NATIVE: dict[str, tuple[str, dict[str, object]]] = {
    "fifo": ("fifo", {}),
    "max_min_fairness_perf": ("gavel", {}),
}
CASES = ("gen-single", "gen-multi", "msr")
MODES = ("compat", "native")
# The msr trace of Gavel's repository (seed 0) that Gavel's simulator can run: the only one
# of over 100 jobs whose every job type and size its throughput table measures (951 single-GPU jobs).
MSR_TRACE = "traces/msr/seed=0/ed69ec.trace"
_MSR_COMMAND = re.compile(r"^cd (\S+) && (.*)$")
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
                   seed: int, multi_gpu: bool = False) -> None:
    command = [python, "scripts/utils/generate_trace.py", "--num_jobs", str(n_jobs),
               "--lam", str(lam), "--seed", str(seed), "--throughputs_file",
               str(scheduler_dir / "simulation_throughputs.json"), "--output_file", str(out)]
    if multi_gpu:
        command.append("--generate-multi-gpu-jobs")
    subprocess.run(command, cwd=scheduler_dir, check=True, capture_output=True, text=True)


def convert_msr_trace(source: Path, out: Path) -> int:
    """Write Gavel's old seven-field msr trace in its current ten-field format; returns the jobs.

    Old: ``job_type command num_steps_arg needs_data_dir total_steps
    arrival_time scale_factor``, the command starting ``cd DIR && ``.
    Current (``utils.parse_trace``): ``job_type command working_directory
    num_steps_arg needs_data_dir total_steps scale_factor priority_weight SLO
    arrival_time``; ``DIR`` becomes the working directory, the priority
    weight 1 and the SLO -1 (none), as Gavel's generator writes them.

    Raises:
        ValueError: naming the file and line of a row that is not seven fields.
    """
    rows: list[str] = []
    for line_no, text in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        fields = text.split("\t")
        if len(fields) != 7:
            raise ValueError(f"{source}:{line_no}: expected 7 tab-separated fields "
                             f"(Gavel's msr format), found {len(fields)}")
        job_type, command, steps_arg, needs_data, total_steps, arrival, scale = fields
        match = _MSR_COMMAND.match(command)
        directory, command = (match.group(1), match.group(2)) if match else ("", command)
        rows.append("\t".join((job_type, command, directory, steps_arg, needs_data, total_steps,
                               scale, "1", "-1.000000", arrival)))
    out.write_text("".join(row + "\n" for row in rows), encoding="utf-8")
    return len(rows)


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


def run_rackwise(trace: Path, gavel_policy: str, mode: str, seed: int, result: Path) -> Outcome:
    command = [sys.executable, str(Path(__file__).resolve()), "--rackwise-child",
               json.dumps({"trace": str(trace), "gavel_policy": gavel_policy, "mode": mode,
                           "seed": seed, "result": str(result)})]
    began = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - began
    return Outcome(json.loads(result.read_text(encoding="utf-8")), wall)


def rackwise_config(trace: Path, gavel_policy: str, mode: str, seed: int) -> RunConfig:
    """The rackwise run of one row: the compat experiment's cell, or rackwise's own defaults."""
    from rackwise.experiments.config import load_experiment
    from rackwise.run import ClusterConfig, RunConfig, WorkloadConfig

    workload = WorkloadConfig(file=trace, format="gavel")
    if mode == "compat":
        experiment = load_experiment(COMPAT)
        entry = next((p for p in experiment.policies if p.label == gavel_policy), None)
        if entry is None:
            raise ValueError(f"{COMPAT}: no policy labelled {gavel_policy!r}")
        return RunConfig(workload=workload, cluster=experiment.clusters[0].run_config(),
                         policy=entry.policy, policy_params=entry.params, perf=experiment.perf,
                         perf_params=experiment.perf_params, seed=seed)
    policy, params = NATIVE[gavel_policy]
    return RunConfig(workload=workload, cluster=ClusterConfig(spec=CLUSTER), policy=policy,
                     policy_params=dict(params), perf="network", seed=seed)


def rackwise_child(spec: Mapping[str, object]) -> None:
    """The rackwise run, in its own process so that its start-up is timed like Gavel's."""
    from rackwise.run import execute

    seed = spec["seed"]
    assert isinstance(seed, int)
    config = rackwise_config(Path(str(spec["trace"])), str(spec["gavel_policy"]),
                             str(spec["mode"]), seed)
    result, _ = execute(config)
    jct = {r.job_id: r.finish_time - r.submit_time for r in result.records}
    Path(str(spec["result"])).write_text(json.dumps(jct), encoding="utf-8")


def table(rows: Sequence[Mapping[str, object]]) -> str:
    head = ("case", "policy", "rw mode", "dropped", "jobs", "JCT h gavel", "JCT h rw",
            "rw/gavel", "makespan h gavel", "makespan h rw", "rw/gavel", "wall s gavel",
            "wall s rw", "gavel/rw")
    body = [(str(r["case"]), str(r["policy"]), str(r["mode"]), str(r["gavel_dropped"]),
             f"{r['n_jobs']:.0f}",
             f"{r['gavel_jct_h']:.2f}", f"{r['rackwise_jct_h']:.2f}",
             f"{r['rackwise_jct_h'] / r['gavel_jct_h']:.3f}",  # type: ignore[operator]
             f"{r['gavel_makespan_h']:.2f}", f"{r['rackwise_makespan_h']:.2f}",
             f"{r['rackwise_makespan_h'] / r['gavel_makespan_h']:.3f}",  # type: ignore[operator]
             f"{r['gavel_wall_s']:.1f}", f"{r['rackwise_wall_s']:.1f}",
             f"{r['gavel_wall_s'] / r['rackwise_wall_s']:.1f}")  # type: ignore[operator]
            for r in rows]
    widths = [max(len(row[i]) for row in (head, *body)) for i in range(len(head))]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in (head, *body)]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gavel-checkout", help="a checkout of stanford-futuredata/gavel")
    parser.add_argument("--gavel-python", help="a Python that runs Gavel's scheduler package")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--n-jobs", type=int, default=1000, help="gen-single: jobs")
    parser.add_argument("--lam", type=float, default=60.0, help="gen-single: mean gap (s)")
    parser.add_argument("--multi-n-jobs", type=int, default=500, help="gen-multi: jobs")
    parser.add_argument("--multi-lam", type=float, default=1200.0,
                        help="gen-multi: mean gap (s); 1200 is 3 jobs an hour, the highest "
                             "rate of Gavel's Figure 9 sweep (-b 3.0)")
    parser.add_argument("--msr-trace", default=MSR_TRACE,
                        help="msr: the trace, relative to Gavel's scheduler/ folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cluster-spec", default="36:36:36", help="v100:p100:k80 GPUs")
    parser.add_argument("--gpus-per-server", default="4:4:4",
                        help="GPUs per server by type (examples/clusters/gavel-108.yaml has 4)")
    parser.add_argument("--out", default=str(ROOT / "results" / "gavel-compare"),
                        help="folder for the traces, logs and results.json (not tracked)")
    parser.add_argument("--rackwise-child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def write_case(case: str, args: argparse.Namespace, scheduler_dir: Path, out: Path
               ) -> tuple[str, Path]:
    """Write one case's trace in Gavel's current format; its description and path."""
    if case == "gen-single":
        trace = out / f"gen-single-n{args.n_jobs}-lam{args.lam:g}-s{args.seed}.trace"
        generate_trace(args.gavel_python, scheduler_dir, trace, args.n_jobs, args.lam, args.seed)
        return f"gen-single n={args.n_jobs} lam={args.lam:g}s", trace
    if case == "gen-multi":
        trace = out / f"gen-multi-n{args.multi_n_jobs}-lam{args.multi_lam:g}-s{args.seed}.trace"
        generate_trace(args.gavel_python, scheduler_dir, trace, args.multi_n_jobs,
                       args.multi_lam, args.seed, multi_gpu=True)
        return f"gen-multi n={args.multi_n_jobs} lam={args.multi_lam:g}s", trace
    source = scheduler_dir / args.msr_trace
    trace = out / f"msr-{source.stem}.trace"
    n = convert_msr_trace(source, trace)
    return f"msr {source.stem} n={n}", trace


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
    print(f"Gavel {gavel_commit(scheduler_dir.parent)}; cluster {args.cluster_spec} "
          f"v100:p100:k80, {args.gpus_per_server} GPUs per server, seed {args.seed}; "
          f"wall = whole process of each simulator", flush=True)
    rows: list[dict[str, object]] = []
    for case in args.cases:
        label, trace = write_case(case, args, scheduler_dir, out)
        arrivals = trace_arrivals(trace)
        for gavel_policy in GAVEL_POLICIES:
            gavel = run_gavel(args.gavel_python, scheduler_dir, trace, gavel_policy,
                              args.cluster_spec, args.gpus_per_server, args.seed,
                              out / f"gavel-{case}-{gavel_policy}.log")
            for mode in args.modes:
                rackwise = run_rackwise(trace, gavel_policy, mode, args.seed,
                                        out / f"rackwise-{case}-{gavel_policy}-{mode}.json")
                row: dict[str, object] = {
                    "case": label, "policy": gavel_policy, "mode": mode,
                    "trace_jobs": len(arrivals), "gavel_dropped": len(arrivals) - len(gavel.jct_s),
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
