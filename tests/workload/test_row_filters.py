"""Row filters declared in a CSV mapping: skipped rows counted by reason, or refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rackwise.errors import InputError
from rackwise.workload.readers.csv import ColumnMapping, read_csv
from rackwise.workload.readers.row_filters import RowFilters, format_skipped

ROWS = ("id,submit,start,end,gpus,state\n"
        "a,0,1,10,1,Terminated\n"
        "b,1,,10,1,Terminated\n"
        "c,2,3,10,0,Terminated\n"
        "d,3,4,10,2,Failed\n"
        "e,4,5,10,4,Running\n"
        "f,5,6,10,0,Failed\n"
        "g,6,7,10,8,Failed\n")


def _mapping(**skip: object) -> ColumnMapping:
    return ColumnMapping(job_id="id", submit_time="submit", start_time="start",
                         end_time="end", duration_s=None, n_gpus="gpus", group=None,
                         skip=RowFilters.model_validate(skip))


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text(ROWS, encoding="utf-8")
    return path


def test_counts_by_first_reason_add_up_to_rows(tmp_path: Path) -> None:
    # "b" has no start and would fail the duration; the filter skips it first.
    mapping = _mapping(zero_gpus=True, status="state",
                       allowed_status=["Terminated", "Failed"], required=["start"])
    workload = read_csv(_write(tmp_path), mapping)
    assert [job.job_id for job in workload] == ["a", "d", "g"]
    assert workload.lines == (2, 5, 8)
    assert workload.skipped_by_reason == (("zero_gpus", 2), ("status", 1), ("missing_start", 1))
    n_rows = ROWS.count("\n") - 1
    assert len(workload) + workload.n_skipped == n_rows
    assert format_skipped(dict(workload.skipped_by_reason)) == (
        "skipped 4 rows (zero_gpus 2, status 1, missing_start 1)")


def test_strict_refuses_first_skipped_row(tmp_path: Path) -> None:
    mapping = _mapping(zero_gpus=True)
    with pytest.raises(InputError, match=r"jobs\.csv:4.*gpus.*zero_gpus"):
        read_csv(_write(tmp_path), mapping, strict=True)


def test_without_filters_nothing_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("id,submit,start,end,gpus\na,0,1,10,1\n", encoding="utf-8")
    workload = read_csv(path, _mapping())
    assert (workload.n_skipped, workload.skipped_by_reason) == (0, ())


def test_all_rows_skipped_says_why(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("id,submit,start,end,gpus\na,0,1,10,0\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"no jobs left after skipping rows: skipped 1 rows"):
        read_csv(path, _mapping(zero_gpus=True))


def test_filter_on_absent_column_names_it(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"jobs\.csv:1.*missing column 'queue'"):
        read_csv(_write(tmp_path), _mapping(required=["queue"]))


def test_status_needs_allowed_values() -> None:
    with pytest.raises(ValueError, match="status and allowed_status go together"):
        RowFilters(status="state")
