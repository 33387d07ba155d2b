from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from rackwise.errors import InputError
from rackwise.workload.readers.philly_json import read_philly_json


def _attempt(start: str | None, end: str | None, *servers: int) -> dict[str, Any]:
    return {"start_time": start, "end_time": end,
            "detail": [{"ip": f"m{i}", "gpus": [f"gpu{g}" for g in range(n)]}
                       for i, n in enumerate(servers)]}


def _job(jobid: str, submitted: str, *attempts: dict[str, Any], vc: str = "vc1",
         user: str = "u1", status: str = "Pass") -> dict[str, Any]:
    return {"status": status, "vc": vc, "jobid": jobid, "attempts": list(attempts),
            "submitted_time": submitted, "user": user}


def _write(tmp_path: Path, records: object, name: str = "cluster_job_log") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


RECORDS = [
    # Two attempts on 8 + 8 GPUs: 74 s + 3 s = 77 s held.
    _job("app_2", "2017-10-07 01:11:39",
         _attempt("2017-10-07 01:12:09", "2017-10-07 01:13:23", 8, 8),
         _attempt("2017-10-07 01:13:30", "2017-10-07 01:13:33", 8, 8), vc="ee9e8c", user="ce2f4c"),
    _job("app_1", "2017-10-07 01:10:00",
         _attempt("2017-10-07 01:10:00", "2017-10-07 02:10:00", 1), status="Killed"),
    _job("never_ran", "2017-10-07 00:00:00"),
    _job("running", "2017-10-07 01:20:00", _attempt("2017-10-07 01:21:00", None, 2)),
    _job("no_gpus", "2017-10-07 01:30:00",
         _attempt("2017-10-07 01:30:00", "2017-10-07 01:31:00")),
]


def test_maps_jobs(tmp_path: Path) -> None:
    workload = read_philly_json(_write(tmp_path, RECORDS))
    assert [job.job_id for job in workload] == ["app_1", "app_2"]
    first, second = workload
    # Submit times count from the earliest kept submission (01:10:00).
    assert (first.submit_time, first.n_gpus, first.duration_s) == (0.0, 1, 3600.0)
    assert (second.submit_time, second.n_gpus, second.duration_s) == (99.0, 16, 77.0)
    assert (second.group, second.user) == ("ee9e8c", "ce2f4c")
    assert dict(first.tags) == {"status": "Killed"}
    assert workload.lines == (0, 0)
    assert workload.n_gpus_field == "attempts[0].detail.gpus"


def test_counts_and_logs_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="rackwise.workload.readers.philly_json"):
        workload = read_philly_json(_write(tmp_path, RECORDS))
    assert workload.n_skipped == 3
    assert "left out 3 of 5 jobs" in caplog.text
    assert "1 no attempts" in caplog.text
    assert "1 attempt without start or end time" in caplog.text
    assert "1 no GPUs in first attempt" in caplog.text


def test_none_strings_count_as_missing(tmp_path: Path) -> None:
    records = [RECORDS[1], _job("x", "2017-10-07 01:20:00", _attempt("None", "None", 1))]
    assert read_philly_json(_write(tmp_path, records)).n_skipped == 1


def test_gzip(tmp_path: Path) -> None:
    path = tmp_path / "log.json.gz"
    path.write_bytes(gzip.compress(json.dumps(RECORDS[:2]).encode()))
    workload = read_philly_json(path)
    assert len(workload) == 2 and workload.name == "log"


# ------------------------------------------------------------------- bad input


def _error(tmp_path: Path, records: object) -> tuple[InputError, Path]:
    path = _write(tmp_path, records)
    with pytest.raises(InputError) as caught:
        read_philly_json(path)
    return caught.value, path


@pytest.mark.parametrize(
    ("record", "field", "words"),
    [
        ({"jobid": "bad", "attempts": []}, "submitted_time", "missing key"),
        (_job("bad", "07/10/2017"), "submitted_time", "not a date"),
        (_job("bad", "2017-10-07 01:00:00") | {"attempts": {"x": 1}}, "attempts",
         "expected a list"),
        (_job("bad", "2017-10-07 01:00:00", _attempt("2017-10-07 01:00:00", "noon", 1)),
         "attempts[0].end_time", "not a date"),
        (_job("bad", "2017-10-07 01:00:00",
              {"start_time": "2017-10-07 01:00:00", "end_time": "2017-10-07 01:01:00",
               "detail": [{"ip": "m1", "gpus": 3}]}),
         "attempts[0].detail[0].gpus", "expected a list of GPUs"),
        (_job("bad", "2017-10-07 01:00:00",
              {"start_time": "2017-10-07 01:00:00", "end_time": 5, "detail": []}),
         "attempts[0].end_time", "expected a date string"),
    ],
)
def test_bad_records_name_index_jobid_and_field(tmp_path: Path, record: dict[str, Any],
                                                field: str, words: str) -> None:
    error, path = _error(tmp_path, [RECORDS[1], record])
    assert error.field == field
    message = str(error)
    assert message.startswith(f"{path}, field '{field}': job #1 (bad): ")
    assert words in message


def test_duplicate_jobid(tmp_path: Path) -> None:
    error, _path = _error(tmp_path, [RECORDS[1], RECORDS[1]])
    assert error.field == "jobid"
    assert "job #1 (app_1)" in str(error) and "duplicate job id (first at index 0)" in str(error)


def test_missing_jobid(tmp_path: Path) -> None:
    record = dict(RECORDS[1])
    del record["jobid"]
    error, _ = _error(tmp_path, [record])
    assert error.field == "jobid" and "job #0 (?)" in str(error)


def test_not_a_list(tmp_path: Path) -> None:
    error, path = _error(tmp_path, {"jobs": []})
    assert str(path) in str(error) and "expected a JSON list" in str(error)


def test_record_not_an_object(tmp_path: Path) -> None:
    error, _ = _error(tmp_path, [RECORDS[1], 42])
    assert "job #1: expected an object" in str(error)


def test_invalid_json_names_line(tmp_path: Path) -> None:
    path = tmp_path / "log.json"
    path.write_text('[\n{"jobid": 1,\n oops}\n]', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_philly_json(path)
    assert caught.value.line == 3
    assert str(caught.value).startswith(f"{path}:3: not valid JSON")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "log.json"
    path.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="empty file"):
        read_philly_json(path)


def test_no_usable_job(tmp_path: Path) -> None:
    error, _ = _error(tmp_path, [RECORDS[2]])
    assert "no usable job among 1 records (1 no attempts)" in str(error)
