from __future__ import annotations

import gzip
from importlib import resources
from pathlib import Path

import pytest

from rackwise import traces
from rackwise.errors import InputError, UnknownNameError
from rackwise.traces import catalog
from rackwise.workload.readers.csv import ColumnMapping, read_table


def test_names() -> None:
    assert traces.names() == ("itp_2021", "philly_2017")


def test_describe_philly_matches_published_shape() -> None:
    info = traces.describe("philly_2017")
    assert info["n_jobs"] == 82_247
    assert info["n_groups"] == len(info["groups"]) == 15
    assert sum(info["groups"].values()) == 82_247
    percent = {n: 100 * count / info["n_jobs"] for n, count in info["gpu_histogram"].items()}
    assert [round(percent[n], 1) for n in (1, 2, 4, 8)] == [93.2, 2.2, 2.3, 2.0]
    # The published "16+" share (0.4 %) counts every job above 8 GPUs, 12-GPU jobs included.
    assert round(sum(p for n, p in percent.items() if n > 8), 1) == 0.4
    assert min(n for n in percent if n > 8) == 12
    assert round(info["duration_p50_s"]) == 1_144
    assert round(info["duration_p90_s"]) == 11_265
    assert round(info["duration_p99_s"]) == 254_758
    assert round(info["duration_max_s"] / 1e6, 2) == 4.63


def test_describe_itp_matches_published_shape() -> None:
    info = traces.describe("itp_2021")
    assert info["n_jobs"] == 69_351
    assert info["n_groups"] == 10
    assert round(info["span_s"] / 86_400, 1) == 59.9
    shares = {n: count / info["n_jobs"] for n, count in info["gpu_histogram"].items()}
    assert round(shares[1], 3) == 0.832
    assert round(shares[8], 3) == 0.101
    assert round(sum(s for n, s in shares.items() if n >= 64), 3) == 0.001
    assert (info["duration_p50_s"], info["duration_p90_s"], info["duration_p99_s"]) == (
        10_537.0, 28_787.0, 210_110.0)


def test_load_full_trace() -> None:
    workload = traces.load("philly_2017")
    assert len(workload) == 82_247
    assert workload.source == "philly_2017"
    first = workload[0]
    # First data line of the shipped file: 0,7f04ca,0,2240194,8
    assert (first.job_id, first.group, first.submit_time, first.duration_s, first.n_gpus) == (
        "0", "7f04ca", 0.0, 2_240_194.0, 8)
    assert workload.lines[:2] == (2, 3)
    submits = [job.submit_time for job in workload]
    assert submits == sorted(submits)


def test_rebase_moves_first_job_to_zero() -> None:
    raw = traces.load("itp_2021", rebase=False)
    rebased = traces.load("itp_2021", first_n=3)
    assert raw[0].submit_time == 1_999.0  # the file's first job: 0,cluster07,1999,13423,1
    assert [job.submit_time for job in rebased] == [0.0, 0.0, 2.0]
    assert [job.job_id for job in rebased] == ["0", "1", "2"]


def test_filters_compose() -> None:
    window = traces.load("philly_2017", groups=["6214e9", "11cb48"], start_s=1_000_000,
                         end_s=2_000_000, rebase=False)
    assert len(window) > 0
    assert {job.group for job in window} <= {"6214e9", "11cb48"}
    assert all(1_000_000 <= job.submit_time < 2_000_000 for job in window)
    full = traces.load("philly_2017", rebase=False)
    expected = [job.job_id for job in full if job.group in {"6214e9", "11cb48"}
                and 1_000_000 <= job.submit_time < 2_000_000]
    assert [job.job_id for job in window] == expected
    first_five = traces.load("philly_2017", groups="11cb48", start_s=1_000_000, first_n=5,
                             rebase=False)
    assert [job.job_id for job in first_five] == [
        job.job_id for job in full if job.group == "11cb48" and job.submit_time >= 1_000_000][:5]


def test_single_group_as_string() -> None:
    workload = traces.load("philly_2017", groups="795a4c")
    assert len(workload) == 3 and workload[0].submit_time == 0.0


def test_unknown_trace_suggests() -> None:
    with pytest.raises(UnknownNameError, match="Did you mean 'philly_2017'"):
        traces.load("phily_2017")
    with pytest.raises(UnknownNameError):
        traces.attribution("alibaba")


def test_unknown_group_suggests() -> None:
    with pytest.raises(UnknownNameError, match="Did you mean 'cluster04'"):
        traces.load("itp_2021", groups=["cluster4"])


def test_bad_filters() -> None:
    with pytest.raises(InputError, match="first_n"):
        traces.load("itp_2021", first_n=0)
    with pytest.raises(InputError, match="end_s"):
        traces.load("itp_2021", start_s=10, end_s=10)
    with pytest.raises(InputError, match="no job"):
        traces.load("itp_2021", start_s=1e12)


def test_attribution_names_licence_and_citation() -> None:
    philly = traces.attribution("philly_2017")
    assert "CC BY 4.0" in philly and "ATC 2019" in philly and "msr-fiddle" in philly
    itp = traces.attribution("itp_2021")
    assert "MIT" in itp and "ASPLOS 2023" in itp and "elasticflow-traces" in itp


def test_packaged_files_present() -> None:
    from importlib import resources

    data = resources.files("rackwise.traces").joinpath("data")
    for name in ("philly_2017.csv.gz", "itp_2021.csv.gz", "LICENSE-philly_2017.txt",
                 "LICENSE-itp_2021.txt", "README.md"):
        assert data.joinpath(name).is_file(), name


@pytest.mark.parametrize("name", traces.names())
def test_the_shipped_files_read_without_pandas_as_the_csv_reader_reads_them(name: str) -> None:
    ref = resources.files("rackwise.traces").joinpath("data", f"{name}.csv.gz")
    with resources.as_file(ref) as path:
        expected = read_table(path, ColumnMapping())
        columns = catalog.read_shipped(path)
    assert sorted(columns) == sorted(expected.columns)
    for field, values in columns.items():
        wanted = expected[field].to_numpy()
        assert values.dtype == wanted.dtype, field
        assert values.tolist() == wanted.tolist(), field
        assert {type(v) for v in values.tolist()} == {type(v) for v in wanted.tolist()}, field


@pytest.mark.parametrize(("row", "message", "line", "field"), [
    ("2,vc,5,,1", "empty value", 3, "duration"),
    ("2,vc,5,0,1", "must be positive", 3, "duration"),
    ("2,vc,-5,10,1", "must not be negative", 3, "submit_time"),
    ("2,vc,5,10,1.5", "whole number", 3, "num_gpus"),
    ("2,vc,5,ten,1", "cannot read shipped trace", None, None),
])
def test_a_damaged_file_in_the_shipped_format_is_refused(tmp_path: Path, row: str, message: str,
                                                        line: int | None, field: str | None) -> None:
    path = tmp_path / "trace.csv.gz"
    path.write_bytes(gzip.compress(f"job_id,cluster,submit_time,duration,num_gpus\n1,vc,0,60,2\n{row}\n"
                                   .encode()))
    with pytest.raises(InputError, match=message) as error:
        catalog.read_shipped(path)
    assert (error.value.line, error.value.field) == (line, field)
