from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from rackwise.errors import InputError
from rackwise.workload.readers.gavel import read_gavel

CMD = "cd %s/workloads && python3 main.py --data_dir=%s/data"


def _throughputs(tmp_path: Path) -> Path:
    table = {
        "v100": {
            "('ResNet-50 (batch size 64)', 1)": {"null": 4.0, "('A3C', 1)": [1.0, 1.0]},
            "('ResNet-50 (batch size 64)', 4)": {"null": 10.0},
            "('A3C', 1)": {"null": 2.5},
        },
        "k80": {"('A3C', 1)": {"null": 0.5}},
    }
    path = tmp_path / "throughputs.json"
    path.write_text(json.dumps(table), encoding="utf-8")
    return path


def _line(job_type: str, steps: object, scale: object, arrival: object,
          priority: object = 1, slo: object = -1) -> str:
    return "\t".join(map(str, (job_type, CMD, "--num_steps", 1, steps, scale, priority, slo,
                               arrival)))


def _trace(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "jobs.trace"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reads_current_format(tmp_path: Path) -> None:
    path = _trace(tmp_path,
                  _line("ResNet-50 (batch size 64)", 400, 1, "0.000000"),
                  _line("ResNet-50 (batch size 64)", 1000, 4, "12.5", priority=2.0, slo=3.0),
                  _line("A3C", 50, 1, "30"))
    workload = read_gavel(path, throughputs_path=_throughputs(tmp_path))
    assert [job.job_id for job in workload] == ["0", "1", "2"]
    first, second, third = workload
    assert (first.model, first.batch_size, first.n_gpus) == ("ResNet-50 (batch size 64)", 64, 1)
    assert first.duration_s == pytest.approx(100.0)  # 400 steps at 4 steps/s
    assert first.total_iters == 400.0
    assert (second.n_gpus, second.submit_time) == (4, 12.5)
    assert second.duration_s == pytest.approx(100.0)  # 1000 steps at 10 steps/s
    assert dict(second.tags) == {"priority_weight": "2.0", "slo": "3.0"}
    assert (third.model, third.batch_size) == ("A3C", None)
    assert third.duration_s == pytest.approx(20.0)
    assert workload.lines == (1, 2, 3)
    assert workload.n_gpus_field == "scale_factor"
    assert workload.name == "jobs"


def test_reads_ten_field_format_with_working_directory(tmp_path: Path) -> None:
    # Gavel's generator now writes the working directory as a third field.
    line = "\t".join(("ResNet-50 (batch size 64)", "python3 main.py", "image_classification",
                      "--num_steps", "1", "2000", "4", "2", "-1.000000", "44"))
    workload = read_gavel(_trace(tmp_path, line), throughputs_path=_throughputs(tmp_path))
    job = workload[0]
    assert (job.submit_time, job.n_gpus, job.duration_s) == (44.0, 4, pytest.approx(200.0))
    assert job.total_iters == 2000.0
    assert dict(job.tags) == {"priority_weight": "2", "slo": "-1.000000"}


def test_reads_older_seven_field_format(tmp_path: Path) -> None:
    # job_type, command, num_steps_arg, needs_data_dir, total_steps, arrival_time, scale_factor
    line = "\t".join(("ResNet-50 (batch size 64)", CMD, "-n", "1", "2000", "44.0", "4"))
    workload = read_gavel(_trace(tmp_path, line), throughputs_path=_throughputs(tmp_path))
    job = workload[0]
    assert (job.submit_time, job.n_gpus, job.duration_s) == (44.0, 4, pytest.approx(200.0))


def test_other_worker_type(tmp_path: Path) -> None:
    path = _trace(tmp_path, _line("A3C", 50, 1, 0))
    job = read_gavel(path, throughputs_path=_throughputs(tmp_path), worker_type="k80")[0]
    assert job.duration_s == pytest.approx(100.0)


def test_real_measurements(tmp_path: Path) -> None:
    path = _trace(tmp_path, _line("ResNet-50 (batch size 64)", 4394774823323071, 1, 0))
    job = read_gavel(path)[0]  # the measured table shipped in the package
    # Gavel measured 4.394774823323071 steps/s for this job type alone on one V100.
    assert job.duration_s == pytest.approx(1e15)


def test_skip_unmeasured(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _trace(tmp_path, _line("A3C", 50, 4, 0), _line("A3C", 50, 1, 5))
    with caplog.at_level(logging.INFO, logger="rackwise.workload.readers.gavel"):
        workload = read_gavel(path, throughputs_path=_throughputs(tmp_path),
                              skip_unmeasured=True)
    assert [job.job_id for job in workload] == ["1"]
    assert workload.lines == (2,)
    assert workload.n_skipped == 1
    assert "left out 1 jobs" in caplog.text


# ------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"steps": "many"}, "total_steps", "not a number: 'many'"),
        ({"steps": 0}, "total_steps", "must be at least 1"),
        ({"scale": 0}, "scale_factor", "must be at least 1"),
        ({"scale": 1.5}, "scale_factor", "not a whole number"),
        ({"arrival": -2}, "arrival_time", "must not be negative"),
        ({"arrival": "soon"}, "arrival_time", "not a number"),
        ({"priority": "high"}, "priority_weight", "not a number"),
        ({"job_type": "ResNet-50 (batch size 64)", "scale": 2}, "job_type",
         "no measured v100 throughput"),
        ({"job_type": "GPT-9"}, "job_type", "'GPT-9'"),
    ],
)
def test_bad_values_name_file_line_and_field(tmp_path: Path, fields: dict[str, object],
                                             field: str, words: str) -> None:
    values: dict[str, object] = {"job_type": "A3C", "steps": 10, "scale": 1, "arrival": 0}
    values.update(fields)
    path = _trace(tmp_path, _line("A3C", 10, 1, 0), _line(**values))  # type: ignore[arg-type]
    with pytest.raises(InputError) as caught:
        read_gavel(path, throughputs_path=_throughputs(tmp_path))
    error = caught.value
    assert (error.line, error.field) == (2, field)
    assert str(error).startswith(f"{path}:2, field '{field}': ")
    assert words in str(error)


def test_wrong_field_count(tmp_path: Path) -> None:
    path = _trace(tmp_path, "A3C\tcmd\t--steps\t10")
    with pytest.raises(InputError) as caught:
        read_gavel(path, throughputs_path=_throughputs(tmp_path))
    assert caught.value.line == 1
    assert str(path) in str(caught.value) and "found 4" in str(caught.value)


def test_empty_file(tmp_path: Path) -> None:
    path = _trace(tmp_path, "")
    with pytest.raises(InputError, match="empty file"):
        read_gavel(path, throughputs_path=_throughputs(tmp_path))


def test_unknown_worker_type(tmp_path: Path) -> None:
    path = _trace(tmp_path, _line("A3C", 10, 1, 0))
    with pytest.raises(InputError) as caught:
        read_gavel(path, throughputs_path=_throughputs(tmp_path), worker_type="h100")
    assert caught.value.field == "worker_type"
    assert "throughputs.json" in str(caught.value) and "k80, v100" in str(caught.value)


def test_bad_throughput_table(tmp_path: Path) -> None:
    table = tmp_path / "bad.json"
    table.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_gavel(_trace(tmp_path, _line("A3C", 10, 1, 0)), throughputs_path=table)
    assert "bad.json" in str(caught.value)
