"""benchmarks/bench_gavel_compare.py without Gavel: its skip path and its helpers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tests.benchmark_scripts import BENCHMARKS, load_script

from rackwise.workload.readers.gavel import read_gavel

SCRIPT = BENCHMARKS / "bench_gavel_compare.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_gavel_compare")


def test_skips_without_gavel(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert done.stdout.strip() == "skip: Gavel comparison needs --gavel-checkout and --gavel-python"
    missing = tmp_path / "nowhere"
    done = subprocess.run([sys.executable, str(SCRIPT), "--gavel-checkout", str(missing),
                           "--gavel-python", sys.executable], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0
    assert done.stdout.count("\n") == 1 and done.stdout.startswith(f"skip: no Gavel checkout at {missing}")


def test_skip_reason_names_a_missing_python(bench: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "scheduler").mkdir()
    (tmp_path / "scheduler" / "scheduler.py").write_text("", encoding="utf-8")
    assert bench.skip_reason(str(tmp_path), sys.executable) is None
    assert bench.skip_reason(str(tmp_path), str(tmp_path / "python")) == \
        f"skip: no Gavel Python at {tmp_path / 'python'}"


def test_parse_gavel_jcts(bench: ModuleType) -> None:
    stdout = ("Total duration: 900.000 seconds (0.25 hours)\nJob completion times:\n"
              "Job 0: 3600.774\nJob 2 (high priority): 120.5\nJob 1 is not a figure\n"
              "Average job completion time: 1860.637 seconds (0.52 hours)\n")
    assert bench.parse_gavel_jcts(stdout) == {"0": 3600.774, "2": 120.5}


def test_compare_uses_jobs_both_completed(bench: ModuleType, tmp_path: Path) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text("A\tcmd\twd\t-n\t1\t10\t1\t1\t-1.000000\t0\n"
                     "B\tcmd\twd\t-n\t1\t10\t1\t1\t-1.000000\t360\n"
                     "C\tcmd\twd\t-n\t1\t10\t1\t1\t-1.000000\t720\n", encoding="utf-8")
    arrivals = bench.trace_arrivals(trace)
    assert arrivals == {"0": 0.0, "1": 360.0, "2": 720.0}
    # Gavel dropped job 2; rackwise finished it, but it is left out of both figures.
    gavel = {"0": 3600.0, "1": 7200.0}
    rackwise = {"0": 7200.0, "1": 3600.0, "2": 36000.0}
    figures = bench.compare(gavel, rackwise, arrivals)
    assert figures["n_jobs"] == 2
    assert figures["gavel_jct_h"] == pytest.approx(1.5)
    assert figures["rackwise_jct_h"] == pytest.approx(1.5)
    assert figures["gavel_makespan_h"] == pytest.approx(2.1)  # job 1: 360 s + 7200 s
    assert figures["rackwise_makespan_h"] == pytest.approx(2.0)  # job 0: 7200 s
    with pytest.raises(ValueError, match="no job in common"):
        bench.compare({"0": 1.0}, {"1": 1.0}, arrivals)


def test_table_has_a_row_per_result(bench: ModuleType) -> None:
    row = {"case": "c", "policy": "fifo", "mode": "compat", "gavel_dropped": 1, "n_jobs": 2.0,
           "gavel_jct_h": 2.0, "rackwise_jct_h": 1.0, "gavel_makespan_h": 4.0,
           "rackwise_makespan_h": 5.0, "gavel_wall_s": 10.0, "rackwise_wall_s": 2.0}
    lines = bench.table([row]).splitlines()
    assert len(lines) == 3
    cells = [cell.strip() for cell in lines[2].split("|")]
    assert cells == ["c", "fifo", "compat", "1", "2", "2.00", "1.00", "0.500", "4.00", "5.00",
                     "1.250", "10.0", "2.0", "5.0"]


MSR_ROWS = (
    "Transformer (batch size 128)\tcd %s/gpusched/workloads/pytorch/translation && python3 "
    "train.py -data %s/data/translation/multi30k.atok.low.pt -batch_size 128\t-step\t1\t95121"
    "\t0.000000\t1\n"
    "ResNet-18 (batch size 64)\tpython3 main.py --batch_size 64\t--num_steps\t0\t4000\t"
    "6.000000\t2\n")


def test_convert_msr_trace_writes_gavels_current_format(bench: ModuleType, tmp_path: Path) -> None:
    source = tmp_path / "msr.trace"
    source.write_text(MSR_ROWS + "\n", encoding="utf-8")
    out = tmp_path / "msr-now.trace"
    assert bench.convert_msr_trace(source, out) == 2
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows[0] == ["Transformer (batch size 128)",
                       "python3 train.py -data %s/data/translation/multi30k.atok.low.pt "
                       "-batch_size 128", "%s/gpusched/workloads/pytorch/translation", "-step",
                       "1", "95121", "1", "1", "-1.000000", "0.000000"]
    assert rows[1][1:3] == ["python3 main.py --batch_size 64", ""]  # no `cd DIR &&`
    assert rows[1][5:] == ["4000", "2", "1", "-1.000000", "6.000000"]
    assert bench.trace_arrivals(out) == {"0": 0.0, "1": 6.0}
    jobs = list(read_gavel(out, skip_unmeasured=True))
    assert [(j.n_gpus, j.total_iters, j.submit_time) for j in jobs][:1] == [(1, 95121.0, 0.0)]


def test_convert_msr_trace_names_a_bad_line(bench: ModuleType, tmp_path: Path) -> None:
    source = tmp_path / "bad.trace"
    source.write_text(MSR_ROWS + "A\tcmd\t-n\t1\t10\t0\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.trace:3: expected 7 tab-separated fields .* found 6"):
        bench.convert_msr_trace(source, tmp_path / "out.trace")


def test_rackwise_configs_of_both_modes(bench: ModuleType, tmp_path: Path) -> None:
    trace = tmp_path / "t.trace"
    compat = bench.rackwise_config(trace, "fifo", "compat", 0)
    assert (compat.policy, compat.policy_params["objective"]) == ("gavel", "fifo")
    assert compat.perf_params["config"]["interference_scale"] == 0.0
    assert compat.workload.file == trace and compat.workload.format == "gavel"
    las = bench.rackwise_config(trace, "max_min_fairness_perf", "compat", 0)
    assert las.policy_params["objective"] == "max_min_fairness"
    native = bench.rackwise_config(trace, "fifo", "native", 0)
    assert (native.policy, native.policy_params, native.perf_params) == ("fifo", {}, {})
