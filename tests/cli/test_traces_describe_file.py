"""`rackwise traces describe FILE --mapping M`: a trace file's shape before any simulation."""

from __future__ import annotations

from pathlib import Path

from pod_trace import write_pod_trace
from typer.testing import CliRunner

from rackwise.cli import app
from rackwise.workload.readers.csv import ColumnMapping, read_csv
from rackwise.workload.shape import shape

RUNNER = CliRunner(env={"COLUMNS": "200"})

TRACE = ("id,submitted,ended,gpus,state\n"
         "a,0,100,1,done\n"
         "b,10,50,0,done\n"
         "c,20,80,2,killed\n"
         "d,30,90,8,done\n"
         "e,40,300,1,done\n")
def test_shape_of_a_filtered_file(tmp_path: Path) -> None:
    trace, mapping = write_pod_trace(tmp_path, TRACE)
    info = shape(read_csv(trace, ColumnMapping.from_yaml(mapping)))
    assert info["n_jobs"] == 3
    assert info["gpu_histogram"] == {1: 2, 8: 1}
    assert (info["first_arrival_s"], info["arrival_span_s"]) == (0.0, 40.0)
    assert info["skipped_rows"] == {"zero_gpus": 1, "status": 1}


def test_describe_prints_the_shape(tmp_path: Path) -> None:
    trace, mapping = write_pod_trace(tmp_path, TRACE)
    result = RUNNER.invoke(app, ["traces", "describe", str(trace), "--mapping", str(mapping)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("\u2502", " ").split())  # drop table borders
    assert "n_jobs 3" in text
    assert "gpu_histogram 1: 2, 8: 1" in text
    assert "skipped_rows zero_gpus: 1, status: 1" in text


def test_describe_bad_file_is_one_line(tmp_path: Path) -> None:
    trace, mapping = write_pod_trace(tmp_path, TRACE)
    trace.write_text(TRACE.replace("a,0,100", "a,0,oops"), encoding="utf-8")
    result = RUNNER.invoke(app, ["traces", "describe", str(trace), "--mapping", str(mapping)])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and "pods.csv:2" in result.output
