from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from rackwise.errors import InputError
from rackwise.workload.readers.csv import ColumnMapping, read_csv

HEADER = "job_id,cluster,submit_time,duration,num_gpus\n"


def _write(tmp_path: Path, text: str, name: str = "jobs.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path, **kwargs: object) -> InputError:
    with pytest.raises(InputError) as caught:
        read_csv(path, **kwargs)  # type: ignore[arg-type]
    return caught.value


def test_reads_default_header(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "7,vcA,0,100,1\n8,vcB,30,50,4\n")
    workload = read_csv(path)
    assert len(workload) == 2
    first, second = workload
    assert (first.job_id, first.group, first.submit_time, first.duration_s, first.n_gpus) == (
        "7", "vcA", 0.0, 100.0, 1)
    assert first.total_iters == 100.0
    assert (second.job_id, second.submit_time, second.n_gpus) == ("8", 30.0, 4)
    assert workload.lines == (2, 3)
    assert workload.source == str(path)
    assert workload.name == "jobs"
    assert workload.n_gpus_field == "num_gpus"


def test_job_ids_stay_text(tmp_path: Path) -> None:
    workload = read_csv(_write(tmp_path, HEADER + "007,a,0,1,1\n"))
    assert workload[0].job_id == "007"


def test_gzip_by_suffix(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(HEADER + "1,a,5,60,2\n")
    workload = read_csv(path)
    assert workload.name == "jobs"
    assert (workload[0].submit_time, workload[0].n_gpus) == (5.0, 2)


def test_custom_mapping_and_time_unit(tmp_path: Path) -> None:
    path = _write(tmp_path, "id,t,gpus,len_min,who,net,bs,steps,extra\n"
                            "x,2,8,1.5,alice,ResNet-50,256,1000,zzz\n")
    mapping = ColumnMapping(job_id="id", submit_time="t", n_gpus="gpus", duration_s="len_min",
                            group=None, user="who", model="net", batch_size="bs",
                            total_iters="steps")
    job = read_csv(path, mapping, time_unit="min")[0]
    assert job.submit_time == 120.0
    assert job.duration_s == 90.0
    assert job.total_iters == 1000.0
    assert (job.user, job.model, job.batch_size, job.group) == ("alice", "ResNet-50", 256, None)


def test_empty_optional_text_is_none(tmp_path: Path) -> None:
    workload = read_csv(_write(tmp_path, HEADER + "1,,0,1,1\n"))
    assert workload[0].group is None


def test_blank_lines_keep_line_numbers(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "1,a,0,1,1\n\n2,a,0,-1,1\n")
    error = _error(path)
    assert error.line == 4
    workload = read_csv(_write(tmp_path, HEADER + "1,a,0,1,1\n\n2,a,0,1,1\n", "ok.csv"))
    assert workload.lines == (2, 4)


def test_mapping_from_yaml(tmp_path: Path) -> None:
    path = _write(tmp_path, "job_id: id\nn_gpus: gpus\ngroup: null\n", "map.yaml")
    mapping = ColumnMapping.from_yaml(path)
    assert (mapping.job_id, mapping.n_gpus, mapping.group, mapping.duration_s) == (
        "id", "gpus", None, "duration")


def test_mapping_yaml_rejects_unknown_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "job_id: id\nnum_gpu: gpus\n", "map.yaml")
    with pytest.raises(InputError) as caught:
        ColumnMapping.from_yaml(path)
    assert "map.yaml" in str(caught.value) and "num_gpu" in str(caught.value)


# ------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("rows", "line", "column", "words"),
    [
        ("1,a,0,10,1\n2,a,x,10,1\n", 3, "submit_time", "not a number: 'x'"),
        ("1,a,0,10,1\n2,a,5,ten,1\n", 3, "duration", "not a number: 'ten'"),
        ("1,a,0,0,1\n", 2, "duration", "must be positive"),
        ("1,a,0,10,1\n2,a,0,-3,1\n", 3, "duration", "must be positive, got -3"),
        ("1,a,0,10,0\n", 2, "num_gpus", "must be at least 1"),
        ("1,a,0,10,1.5\n", 2, "num_gpus", "not a whole number"),
        ("1,a,-1,10,1\n", 2, "submit_time", "must not be negative"),
        ("1,a,0,10,1\n2,b,0,10,1\n1,c,0,10,1\n", 4, "job_id",
         "duplicate job id '1' (first on line 2)"),
        ("1,a,0,10,1\n,a,0,10,1\n", 3, "job_id", "empty value"),
        ("1,a,0,,1\n", 2, "duration", "empty value"),
        ("1,a,0,inf,1\n", 2, "duration", "not a finite number"),
    ],
)
def test_bad_values_name_file_line_and_column(tmp_path: Path, rows: str, line: int, column: str,
                                              words: str) -> None:
    path = _write(tmp_path, HEADER + rows)
    error = _error(path)
    assert (error.line, error.field) == (line, column)
    message = str(error)
    assert message.startswith(f"{path}:{line}, field '{column}': ")
    assert words in message
    assert "\n" not in message


def test_missing_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "job_id,cluster,submit_time,duration\n1,a,0,10\n")
    error = _error(path)
    assert (error.line, error.field) == (1, "num_gpus")
    assert str(path) in str(error) and "missing column 'num_gpus'" in str(error)


def test_empty_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "")
    error = _error(path)
    assert str(path) in str(error) and "empty file" in str(error)


def test_header_only(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER)
    error = _error(path)
    assert str(path) in str(error) and "no jobs" in str(error)


def test_missing_file(tmp_path: Path) -> None:
    error = _error(tmp_path / "nope.csv")
    assert "nope.csv" in str(error) and "no such file" in str(error)


def test_unknown_time_unit(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "1,a,0,1,1\n")
    error = _error(path, time_unit="days")
    assert error.field == "time_unit"


def test_ragged_row(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "1,a,0,1,1\n2,a,0,1,1,9,9\n")
    error = _error(path)
    assert str(path) in str(error) and "line 3" in str(error)


def test_bad_total_iters(tmp_path: Path) -> None:
    path = _write(tmp_path, "id,t,d,g,it\n1,0,5,1,0\n")
    mapping = ColumnMapping(job_id="id", submit_time="t", duration_s="d", n_gpus="g",
                            group=None, total_iters="it")
    error = _error(path, mapping=mapping)
    assert (error.line, error.field) == (2, "it")


def test_mapping_yaml_syntax_error_is_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "job_id: [id\n", "map.yaml")
    with pytest.raises(InputError) as caught:
        ColumnMapping.from_yaml(path)
    assert "map.yaml" in str(caught.value) and "\n" not in str(caught.value)
