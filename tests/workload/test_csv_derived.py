"""Derived columns in a CSV mapping: durations from end times, units per column, constants."""

from __future__ import annotations

from pathlib import Path

import pytest

from rackwise.errors import InputError
from rackwise.workload.readers.csv import ColumnMapping, read_csv


def _write(tmp_path: Path, text: str, name: str = "jobs.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _mapping_file(tmp_path: Path, text: str) -> Path:
    return _write(tmp_path, text, name="mapping.yaml")


def test_duration_is_end_minus_start(tmp_path: Path) -> None:
    path = _write(tmp_path, "id,submit,start,end,gpus\na,0,10,70,2\nb,5,20,23,1\n")
    mapping = ColumnMapping(job_id="id", submit_time="submit", start_time="start",
                            end_time="end", duration_s=None, n_gpus="gpus", group=None)
    workload = read_csv(path, mapping)
    assert [job.duration_s for job in workload] == [60.0, 3.0]
    assert [job.submit_time for job in workload] == [0.0, 5.0]


def test_duration_is_end_minus_submit_without_start(tmp_path: Path) -> None:
    path = _write(tmp_path, "id,submit,end,gpus\na,4,10,1\n")
    mapping = ColumnMapping(job_id="id", submit_time="submit", end_time="end",
                            duration_s=None, n_gpus="gpus", group=None)
    (job,) = read_csv(path, mapping)
    assert job.duration_s == 6.0


def test_units_per_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "id,submit,run,gpus\na,2000,1.5,1\nb,3500000,250,1\n")
    mapping = ColumnMapping(job_id="id", submit_time="submit", duration_s="run",
                            n_gpus="gpus", group=None, units={"submit_time": "ms",
                                                              "duration_s": "min"})
    first, second = read_csv(path, mapping)
    assert (first.submit_time, first.duration_s) == (2.0, 90.0)
    assert (second.submit_time, second.duration_s) == (3500.0, 15000.0)
    mapping_us = ColumnMapping(job_id="id", submit_time="submit", duration_s="run",
                               n_gpus="gpus", group=None, units={"submit_time": "us"})
    assert read_csv(path, mapping_us).jobs[1].submit_time == 3.5


def test_datetime_columns_count_from_first_submit(tmp_path: Path) -> None:
    path = _write(tmp_path, "id,submitted,started,ended,gpus\n"
                            "a,2020-07-01 10:00:00,2020-07-01 10:00:30,2020-07-01 11:00:30,8\n"
                            "b,2020-07-01 09:59:00,2020-07-01 10:05:00,2020-07-01 10:06:00,1\n")
    mapping = ColumnMapping(job_id="id", submit_time="submitted", start_time="started",
                            end_time="ended", duration_s=None, n_gpus="gpus", group=None,
                            units={"submit_time": "datetime", "start_time": "datetime",
                                   "end_time": "datetime"})
    first, second = read_csv(path, mapping)
    assert (first.submit_time, first.duration_s) == (60.0, 3600.0)
    assert (second.submit_time, second.duration_s) == (0.0, 60.0)


def test_constants_fill_missing_columns(tmp_path: Path) -> None:
    path = _write(tmp_path, "id,submit,run\na,0,10\nb,3,20\n")
    mapping = ColumnMapping(job_id="id", submit_time="submit", duration_s="run", n_gpus=None,
                            group=None, constants={"n_gpus": 4, "group": "pool"})
    workload = read_csv(path, mapping)
    assert [(job.n_gpus, job.group) for job in workload] == [(4, "pool"), (4, "pool")]


def test_bad_datetime_names_file_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "id,submit,end,gpus\na,0,2020-01-01 00:00:10,1\nb,0,soon,1\n")
    mapping = ColumnMapping(job_id="id", submit_time="submit", end_time="end",
                            duration_s=None, n_gpus="gpus", group=None,
                            units={"end_time": "datetime"})
    with pytest.raises(InputError, match=r"jobs\.csv:3.*end.*not a date-time: 'soon'"):
        read_csv(path, mapping)


def test_end_before_start_names_end_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "id,submit,start,end,gpus\na,0,10,70,2\nb,0,50,40,1\n")
    mapping = ColumnMapping(job_id="id", submit_time="submit", start_time="start",
                            end_time="end", duration_s=None, n_gpus="gpus", group=None)
    with pytest.raises(InputError, match=r"jobs\.csv:3.*end.*must be positive, got -10"):
        read_csv(path, mapping)


@pytest.mark.parametrize(("yaml_text", "message"), [
    ("job_id: id\nwall_clock: t\n", "wall_clock"),
    ("units:\n  n_gpus: s\n", "'n_gpus' is not a time field"),
    ("units:\n  submit_time: fortnight\n", "units.submit_time"),
    ("units:\n  duration_s: datetime\n", "duration_s cannot be a datetime"),
    ("n_gpus: null\n", "n_gpus needs a column or a constant"),
    ("constants:\n  n_gpus: 2\n", "'n_gpus' is also mapped"),
    ("constants:\n  job_id: x\n", "'job_id' cannot be a constant"),
    ("duration_s: null\n", "duration_s needs a column, or end_time"),
    ("end_time: end\n", "either duration_s or end_time"),
])
def test_mapping_errors_name_the_key(tmp_path: Path, yaml_text: str, message: str) -> None:
    path = _mapping_file(tmp_path, yaml_text)
    with pytest.raises(InputError, match=r"mapping\.yaml") as caught:
        ColumnMapping.from_yaml(path)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
