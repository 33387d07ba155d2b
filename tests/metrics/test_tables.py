"""The pyarrow tables written as Parquet read back as the pandas frames of the same records."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyarrow import ArrowException, parquet

from rackwise.metrics.records import JobRecord, Timeline
from rackwise.metrics.summary import records_frame, timeline_frame
from rackwise.metrics.tables import records_table, timeline_table

numbers = st.one_of(st.floats(allow_nan=False, width=64), st.integers(-2**40, 2**40))
texts = st.one_of(st.none(), st.sampled_from(["a", "b", "vc-é"]), st.text(max_size=4))


@st.composite
def record_lists(draw: st.DrawFn) -> list[JobRecord]:
    """Records whose columns mix what runs produce: text or None, ints, floats, ties."""
    n = draw(st.integers(1, 8))
    float_kind = draw(st.sampled_from(["floats", "numbers"]))
    value = st.floats(0, 1e6, width=64) if float_kind == "floats" else numbers
    group, model = draw(texts), draw(texts)
    # Submit times all floats, or all ints (close ones that float64 would not tell apart).
    submit = st.sampled_from(draw(st.sampled_from([[0.0, 1.0, 2.5], [0, 2**60, 2**60 + 1]])))
    records = []
    for i in range(n):
        records.append(JobRecord(
            job_id=draw(st.sampled_from([f"j{i}", "dup", "10", "9", "é"])),
            group=draw(st.one_of(st.just(group), texts)), model=model,
            n_gpus=draw(st.integers(1, 64)), submit_time=draw(submit),
            first_start=draw(value), finish_time=draw(value), jct_s=draw(value),
            queueing_delay_s=draw(value), run_time_s=draw(value), overhead_s=draw(value),
            gpu_s=draw(value), n_preemptions=draw(st.integers(0, 3)), n_nodes=1, n_racks=1,
            duration_s=draw(value), total_iters=draw(value)))
    return records


def _read_back(table: object, path: Path) -> pd.DataFrame:
    parquet.write_table(table, path)
    return pd.read_parquet(path)


@settings(max_examples=60, deadline=None)
@given(record_lists())
def test_the_jobs_table_reads_back_as_the_records_frame(tmp_path_factory: pytest.TempPathFactory,
                                                        records: list[JobRecord]) -> None:
    folder = tmp_path_factory.mktemp("jobs")
    expected = records_frame(records)
    expected.to_parquet(folder / "frame.parquet", index=False)
    got = _read_back(records_table(records), folder / "table.parquet")
    pd.testing.assert_frame_equal(got, pd.read_parquet(folder / "frame.parquet"), check_exact=True)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(numbers, st.none(), st.text(max_size=3), st.integers(2**63, 2**64)),
                min_size=1, max_size=6),
       st.sampled_from(["ints", "floats", "numbers", "text", "any"]))
def test_the_timeline_table_reads_back_as_the_timeline_frame(
        tmp_path_factory: pytest.TempPathFactory, values: list, kind: str) -> None:
    keep = {"ints": lambda v: type(v) is int and abs(v) < 2**63,
            "floats": lambda v: type(v) is float, "numbers": lambda v: type(v) in (int, float),
            "text": lambda v: v is None or type(v) is str, "any": lambda v: True}[kind]
    values = [v for v in values if keep(v)]
    if not values:
        return
    timeline = Timeline(time=values, busy_gpus=values, n_pending=values, n_running=values)
    folder = tmp_path_factory.mktemp("timeline")
    expected = timeline_frame(timeline)
    try:
        expected.to_parquet(folder / "frame.parquet", index=False)
    except (ArrowException, OverflowError):  # a column pandas cannot write (mixed kinds, huge ints)
        return
    got = _read_back(timeline_table(timeline), folder / "table.parquet")
    pd.testing.assert_frame_equal(got, pd.read_parquet(folder / "frame.parquet"), check_exact=True)


def test_a_parquet_run_imports_neither_pandas_nor_numpy_ma(tmp_path: Path) -> None:
    """Nor ``numpy.ma``, which ``np.median`` and ``np.percentile`` import (`metrics.quantiles`)."""
    script = (
        "import sys\n"
        "from rackwise.run import RunConfig, WorkloadConfig, build_simulator, save\n"
        "config = RunConfig(workload=WorkloadConfig(trace='philly_2017', first_n=300))\n"
        "simulator, workload = build_simulator(config)\n"
        f"save(simulator.run(), config, {str(tmp_path / 'out')!r}, workload=workload)\n"
        "print('pandas' in sys.modules, 'numpy.ma' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False False"
    assert (tmp_path / "out" / "jobs.parquet").exists()
