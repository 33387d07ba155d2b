"""Fractional GPU counts in a trace: refused, rounded up and counted, or read as shares."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from tests.preset_samples import SAMPLES
from typer.testing import CliRunner

from rackwise.cli import app
from rackwise.errors import InputError
from rackwise.workload import readers
from rackwise.workload.readers.csv import ColumnMapping, read_csv

PAI_SAMPLE = SAMPLES["pai"]
# A pod export's GPU request in thousandths of a GPU (460 = 0.46 of one GPU).
TRACE = "id,submit,duration,gpu_milli\na,0,100,460\nb,0,100,500\nc,10,50,1000\nd,20,40,2500\n"


def _mapping(**options: object) -> ColumnMapping:
    return ColumnMapping(job_id="id", submit_time="submit", duration_s="duration",
                         n_gpus="gpu_milli", group=None, gpu_scale=0.001, **options)  # type: ignore[arg-type]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "pods.csv"
    path.write_text(TRACE, encoding="utf-8")
    return path


def test_a_fractional_count_is_refused_by_default_naming_line_and_column(trace: Path) -> None:
    with pytest.raises(InputError, match=r"pods.csv:2.*gpu_milli.*not a whole number of GPUs: 0\.46"):
        read_csv(trace, _mapping())


def test_round_up_counts_every_rounded_row(trace: Path) -> None:
    workload = read_csv(trace, _mapping(fractional_gpus="round_up"))
    assert [job.n_gpus for job in workload] == [1, 1, 1, 3]
    assert not any(job.is_fractional for job in workload)
    assert workload.n_rounded_up == 3


def test_shares_below_one_gpu_become_fractional_jobs(trace: Path) -> None:
    workload = read_csv(trace, _mapping(fractional_gpus="share"))
    assert [(job.n_gpus, job.gpu_share) for job in workload] == [(1, 0.46), (1, 0.5), (1, 1.0),
                                                                 (3, 1.0)]
    assert workload.n_rounded_up == 1  # 2.5 GPUs: shares are for jobs below one GPU


def test_a_scaled_whole_count_stays_whole(tmp_path: Path) -> None:
    path = tmp_path / "pai.csv"
    path.write_text("id,submit,duration,plan_gpu\na,0,10,300\nb,0,10,700\n", encoding="utf-8")
    mapping = ColumnMapping(job_id="id", submit_time="submit", duration_s="duration",
                            n_gpus="plan_gpu", group=None, gpu_scale=0.01)
    assert [job.n_gpus for job in read_csv(path, mapping)] == [3, 7]


def test_simulate_packs_the_shares_and_reports_the_rounding(trace: Path, tmp_path: Path) -> None:
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("job_id: id\nsubmit_time: submit\nduration_s: duration\nn_gpus: gpu_milli\n"
                       "group: null\ngpu_scale: 0.001\nfractional_gpus: share\n", encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["simulate", "--trace-file", str(trace), "--mapping",
                                      str(mapping), "--policy", "fifo", "--nodes", "1",
                                      "--gpus-per-node", "4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "rounded up 1 fractional GPU counts to whole GPUs" in " ".join(result.output.split())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounded_up_rows"] == 1
    # a (0.46) and b (0.5) share one GPU from t=0; c takes a second, d (3 GPUs) waits for c.
    jobs = pd.read_parquet(out / "jobs.parquet").set_index("job_id")
    assert jobs.loc[["a", "b", "c"], "first_start"].tolist() == [0.0, 0.0, 10.0]
    assert jobs.loc["d", "first_start"] == 60.0


def test_gpu_shares_turns_a_csv_trace_s_shares_into_fractional_jobs(trace: Path) -> None:
    workload = readers.read(trace, "csv", mapping=_mapping(), gpu_shares=True)
    assert [job.gpu_share for job in workload] == [0.46, 0.5, 1.0, 1.0]


def test_gpu_shares_reads_the_pai_sample_s_half_gpu_task_as_a_fractional_job() -> None:
    rounded = readers.read(PAI_SAMPLE, "pai")
    shared = readers.read(PAI_SAMPLE, "pai", gpu_shares=True)
    assert [(job.n_gpus, job.gpu_share) for job in rounded] == [(1, 1.0)]
    assert rounded.n_rounded_up == 1
    assert [(job.n_gpus, job.gpu_share) for job in shared] == [(1, 0.5)]
    assert shared.n_rounded_up == 0


def test_gpu_shares_is_refused_for_a_format_of_whole_gpus() -> None:
    with pytest.raises(InputError, match="field 'gpu_shares': helios traces ask for whole GPUs"):
        readers.read(PAI_SAMPLE, "helios", gpu_shares=True)
