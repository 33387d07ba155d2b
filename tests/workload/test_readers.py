from __future__ import annotations

import json
from pathlib import Path

import pytest

from rackwise.errors import InputError, UnknownNameError
from rackwise.workload import readers
from rackwise.workload.readers.csv import ColumnMapping


def test_read_csv_with_yaml_mapping(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text("id,t,g,d\nj1,3,2,9\n", encoding="utf-8")
    (tmp_path / "map.yaml").write_text(
        "job_id: id\nsubmit_time: t\nn_gpus: g\nduration_s: d\ngroup: null\n", encoding="utf-8")
    job = readers.read(tmp_path / "jobs.csv", "csv", mapping=tmp_path / "map.yaml")[0]
    assert (job.job_id, job.submit_time, job.n_gpus, job.duration_s) == ("j1", 3.0, 2, 9.0)
    same = readers.read(tmp_path / "jobs.csv", mapping=ColumnMapping.from_yaml(
        tmp_path / "map.yaml"))
    assert same.jobs == (job,)


def test_read_philly_json(tmp_path: Path) -> None:
    record = {"jobid": "j", "vc": "v", "user": "u", "status": "Pass",
              "submitted_time": "2017-10-07 01:00:00",
              "attempts": [{"start_time": "2017-10-07 01:00:00",
                            "end_time": "2017-10-07 01:00:30",
                            "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    assert readers.read(path, "philly-json")[0].duration_s == 30.0


def test_unknown_format_suggests(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError, match="Did you mean 'philly-json'"):
        readers.read(tmp_path / "x", "philly_json")


def test_mapping_only_for_csv(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        readers.read(tmp_path / "x", "gavel", mapping=ColumnMapping())
    assert caught.value.field == "mapping"


def test_import_stays_light() -> None:
    import subprocess
    import sys

    code = ("import sys, rackwise.workload, rackwise.workload.readers; "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
