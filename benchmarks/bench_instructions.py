"""Instructions a simulation executes, counted by cachegrind: a cost the machine's load does not move.

On a shared machine the CPU time of one run varies by 10% from run to run
and by 2x from day to day, so two versions of the code compared in CPU
seconds must run side by side, and small changes drown in the noise. The
instructions a run executes hardly move: valgrind's cachegrind (without
its cache model) counts them, the same code on the same inputs giving
nearly the same count each time.

For each source tree (a ``src`` folder, a git worktree's say; by default the
installed package) and policy, two runs in fresh processes under cachegrind:
the setup alone (trace read, simulator built, as `bench_policies.speed`
does) and the setup and the simulation. The simulation's instructions are
the difference, free of the imports and reading that come first. Each
tree's modules are byte-compiled first (``__pycache__`` folders, as a first
import writes them), so that no tree pays for compiling a module it imports
late. Trees run side by side (``--jobs``), each line carries the
records' hash and the simulation's count over the first tree's.

    python benchmarks/bench_instructions.py --policies asrpt --traces philly_2017 --first-n 2000
    git worktree add /tmp/old HEAD~1
    python benchmarks/bench_instructions.py --policies asrpt --first-n 2000 --trees /tmp/old/src,src

Needs valgrind. A run takes some 30-50 times its time outside it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from provenance import provenance

HERE = Path(__file__).resolve().parent
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")
# The setup, a full collection and a frozen heap (as `rackwise simulate` runs), then the run:
# collections in the run then see only what it allocates, whatever the setup left behind.
_SNIPPET = """import gc, bench_policies
build = bench_policies.simulator_for({policy!r}, {trace!r}, first_n={first_n!r}, perf={perf!r})
simulator = build()
gc.collect()
gc.freeze()
if {run!r}:
    result = simulator.run()
    print("RESULT", bench_policies.records_sha256(result), result.n_steps, len(result.records))
else:
    print("RESULT - 0", len(simulator.jobs))
"""


def instructions(report: str) -> int:
    """The instruction count in cachegrind's report (its ``I refs`` line)."""
    found = _REFS.search(report)
    if found is None:
        raise ValueError(f"no 'I refs' line in cachegrind's report: {report[-300:]!r}")
    return int(found.group(1).replace(",", ""))


def counted(tree: str | None, policy: str, trace: str, first_n: int | None, perf: str,
            run: bool) -> tuple[int, list[str]]:
    """(instructions, the RESULT line's fields) of one run of `bench_policies.simulator_for` under cachegrind."""
    # Strings hash alike in every run, and pyarrow reads the trace in one thread: else both
    # move the count by some 1% from run to run (with them, by about a millionth).
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
    if tree:
        env["PYTHONPATH"] = str(Path(tree).resolve())
    snippet = _SNIPPET.format(policy=policy, trace=trace, first_n=first_n, perf=perf, run=run)
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           sys.executable, "-c", snippet], cwd=HERE, env=env, capture_output=True, text=True)
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not result:
        raise RuntimeError(f"the run under cachegrind failed (exit {done.returncode}): {done.stderr[-500:]}")
    return instructions(done.stderr), result[-1].split()[1:]


def compile_tree(tree: str | None) -> None:
    """Write the byte code of the tree's modules, as a first import would (unless told not to).

    A module imported without byte code is compiled at each import, which the
    run pays for the modules it imports late: trees must start alike.
    """
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = str(Path(tree).resolve())
    package = subprocess.run([sys.executable, "-c", "import rackwise; print(rackwise.__path__[0])"], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)


def measure(tree: str | None, policy: str, trace: str, first_n: int | None, perf: str) -> dict[str, object]:
    """One line: the setup's and the whole run's instructions, their difference, and the records' hash."""
    setup, _ = counted(tree, policy, trace, first_n, perf, run=False)
    total, (digest, n_steps, n_jobs) = counted(tree, policy, trace, first_n, perf, run=True)
    return {"figure": "instructions", "tree": tree or "installed", "policy": policy, "trace": trace,
            "first_n": first_n, "perf": perf, "n_jobs": int(n_jobs), "n_steps": int(n_steps),
            "instructions_setup": setup, "instructions_total": total,
            "instructions_simulation": total - setup, "records_sha256": digest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="fifo")
    parser.add_argument("--traces", default="philly_2017")
    parser.add_argument("--first-n", type=int, default=2_000)
    parser.add_argument("--perf", default="ideal")
    parser.add_argument("--trees", default="", help="source folders, comma-separated (default: the installed package)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions: valgrind is not installed")
    trees = [tree or None for tree in args.trees.split(",")]
    cases = [(tree, policy, trace) for policy in args.policies.split(",")
             for trace in args.traces.split(",") for tree in trees]
    common = provenance()
    for tree in trees:
        compile_tree(tree)
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda case: measure(*case, args.first_n, args.perf), cases))
    counts = [int(str(row["instructions_simulation"])) for row in rows]
    first: dict[tuple[object, object], int] = {}  # the first tree's count, per policy and trace
    for row, count in zip(rows, counts):
        base = first.setdefault((row["policy"], row["trace"]), count)
        print(json.dumps({**row, "over_first_tree": round(count / base, 4), **common}), flush=True)


if __name__ == "__main__":
    main()
