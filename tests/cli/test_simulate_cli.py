"""`rackwise simulate` end to end: a results folder on success, one line and exit 2 on bad input."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from rackwise.cli import app

RUNNER = CliRunner()


def test_simulate_writes_a_results_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--first-n", "200",
                                 "--nodes", "4", "--policy", "tiresias", "--out", str(out),
                                 "--table-format", "csv"])
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == {"jobs.csv", "timeline.csv", "summary.json"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["figures"]["n_jobs"] == 200
    assert summary["config"]["policy"] == "tiresias"
    assert len((out / "jobs.csv").read_text().splitlines()) == 201


def test_simulate_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    """The run's collector settings (frozen objects, a higher young threshold) end with it,
    whether the run succeeds or is refused."""
    before = gc.get_threshold(), gc.get_freeze_count()
    ok = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--first-n", "50", "--nodes", "4",
                             "--out", str(tmp_path / "run")])
    refused = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--policy", "no-such-policy",
                                  "--out", str(tmp_path / "refused")])
    assert (ok.exit_code, refused.exit_code) == (0, 2), ok.output + refused.output
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_malformed_trace_names_file_line_and_field(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("job_id,cluster,submit_time,duration,num_gpus\n1,a,0,100,1\n2,a,5,-3,1\n")
    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["simulate", "--trace-file", str(trace), "--out", str(out)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "bad.csv:3" in lines[0] and "duration" in lines[0]
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["bad.csv"]


def test_job_larger_than_the_cluster_and_unknown_policy(tmp_path: Path) -> None:
    trace = tmp_path / "big.csv"
    trace.write_text("job_id,cluster,submit_time,duration,num_gpus\n1,a,0,100,1\n2,a,5,3,64\n")
    result = RUNNER.invoke(app, ["simulate", "--trace-file", str(trace), "--nodes", "2",
                                 "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "big.csv:3" in result.output and "num_gpus" in result.output
    result = RUNNER.invoke(app, ["simulate", "--trace", "itp_2021", "--policy", "tiresas",
                                 "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "Did you mean 'tiresias'" in result.output
    assert not (tmp_path / "run").exists()


def test_start_latency_delays_each_launch_and_is_refused_below_zero(tmp_path: Path) -> None:
    trace = tmp_path / "one.csv"
    trace.write_text("job_id,cluster,submit_time,duration,num_gpus\na,c,0,100,1\nb,c,10,100,1\n")
    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["simulate", "--trace-file", str(trace), "--nodes", "1",
                                 "--gpus-per-node", "1", "--start-latency-s", "50",
                                 "--out", str(out), "--table-format", "csv"])
    assert result.exit_code == 0, result.output
    rows = [line.split(",") for line in (out / "jobs.csv").read_text().splitlines()]
    first_start = {row[0]: float(row[rows[0].index("first_start")]) for row in rows[1:]}
    # a launches at 0 + 50 and ends at 150; b is decided at 150 and launches at 200
    assert first_start == {"a": 50.0, "b": 200.0}
    bad = RUNNER.invoke(app, ["simulate", "--trace-file", str(trace), "--start-latency-s", "-1",
                              "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 2
    assert "start_latency_s" in bad.output and len(bad.output.strip().splitlines()) == 1


def _blas_threads(first_import: str, **environ: str) -> str:
    """``OPENBLAS_NUM_THREADS`` and numpy's BLAS pools' threads, in a process that first imports this."""
    code = (f"import {first_import}, os\n"
            "from threadpoolctl import threadpool_info\n"
            "pools = [pool['num_threads'] for pool in threadpool_info() if pool['user_api'] == 'blas']\n"
            "print(os.environ.get('OPENBLAS_NUM_THREADS'), pools)")
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", code], env={**env, **environ}, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def test_the_command_runs_one_blas_thread_unless_told_otherwise() -> None:
    """Set before numpy loads its BLAS (numpy's pool then reports one thread), and only as a default."""
    assert _blas_threads("rackwise.cli") == "1 [1]"
    # What the user sets is what numpy alone makes of it (OpenBLAS caps it at the machine's cores).
    assert _blas_threads("rackwise.cli", OPENBLAS_NUM_THREADS="2") == _blas_threads(
        "numpy", OPENBLAS_NUM_THREADS="2")
