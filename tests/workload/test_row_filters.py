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


ZERO_RUNS = ("id,submit,start,end,gpus,state\n"
             "a,0,1,10,1,done\n"
             "b,1,5,5,1,done\n"
             "c,2,3,10,0,done\n"
             "d,3,9,8,2,lost\n"
             "e,4,5,10,4,done\n")


def test_zero_duration_rows_are_skipped_last(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text(ZERO_RUNS, encoding="utf-8")
    mapping = _mapping(zero_gpus=True, zero_duration=True)
    workload = read_csv(path, mapping)
    assert [job.job_id for job in workload] == ["a", "e"]
    assert dict(workload.skipped_by_reason) == {"zero_gpus": 1, "zero_duration": 2}
    assert workload.lines == (2, 6)
    with pytest.raises(InputError, match=r"jobs.csv:4, field 'gpus'.*zero_gpus: 0 "):
        read_csv(path, mapping, strict=True)  # filters on columns run before zero_duration
    with pytest.raises(InputError, match=r"jobs.csv:3, field 'end'.*zero_duration"):
        read_csv(path, _mapping(zero_duration=True), strict=True)
    with pytest.raises(InputError, match=r"jobs.csv:3, field 'end': must be positive"):
        read_csv(path, _mapping(zero_gpus=True))


def test_tag_columns_are_kept_on_jobs(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text(ROWS.replace("d,3,4,10,2,Failed", "d,3,4,10,2,"), encoding="utf-8")
    mapping = ColumnMapping(job_id="id", submit_time="submit", start_time="start", end_time="end",
                            duration_s=None, n_gpus="gpus", group=None, tags=("state",),
                            skip=RowFilters(zero_gpus=True, required=("start",)))
    tags = {job.job_id: dict(job.tags) for job in read_csv(path, mapping)}
    assert tags["a"] == {"state": "Terminated"}
    assert tags["d"] == {}  # an empty cell is no tag
    with pytest.raises(InputError, match=r"field 'owner'.*missing column 'owner' \(for tags\)"):
        read_csv(path, mapping.model_copy(update={"tags": ("owner",)}))
