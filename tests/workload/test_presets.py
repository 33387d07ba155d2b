"""The --format presets read their samples (tests/data), count what they leave out, name bad rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from preset_samples import DATA, SAMPLES, n_records
from rackwise.errors import InputError
from rackwise.run import TraceFormat
from rackwise.workload import readers
from rackwise.workload.readers.sacct import _gpus


def test_every_preset_is_a_run_format() -> None:
    assert set(get_args(TraceFormat)) == set(readers.FORMATS)
    assert set(SAMPLES) < set(readers.FORMATS)


@pytest.mark.parametrize("preset", SAMPLES)
def test_jobs_and_skipped_rows_add_up_to_the_file(preset: str) -> None:
    workload = readers.read(SAMPLES[preset], preset)
    assert len(workload) >= 1
    assert workload.n_skipped == sum(count for _, count in workload.skipped_by_reason)
    assert len(workload) + workload.n_skipped == n_records(preset, SAMPLES[preset])


def test_helios_rows() -> None:
    workload = readers.read(SAMPLES["helios"], "helios")
    assert [(job.job_id, job.submit_time, job.n_gpus, job.duration_s, job.group, job.user)
            for job in workload] == [("1425511", 0.0, 1, 36848.0, "vcJkd", "uXBbc"),
                                     ("1425512", 26.0, 4, 249.0, "vchbv", "uVMrF"),
                                     ("1425513", 27.0, 1, 675233.0, "vcpDC", "uzqls")]
    assert dict(workload[1].tags) == {"state": "FAILED"}
    assert workload.lines == (2, 3, 4)


def test_helios_skips_cpu_jobs_and_zero_runs(tmp_path: Path) -> None:
    header, *rows = SAMPLES["helios"].read_text().splitlines()
    cpu = rows[0].replace("1425511,uXBbc,vcJkd,1,", "9,uA,vcA,0,")
    # A 0 s job submitted before the others: skipped, and the arrivals still count from 0.
    instant = rows[1].replace("1425512,", "10,").replace(",249,", ",0,").replace(
        "2020-06-09 18:41:27", "2020-06-09 18:00:00", 1)
    path = tmp_path / "cluster_log.csv"
    path.write_text("\n".join([header, *rows, cpu, instant]) + "\n")
    workload = readers.read(path, "helios")
    assert [job.submit_time for job in workload] == [0.0, 26.0, 27.0]
    assert dict(workload.skipped_by_reason) == {"zero_gpus": 1, "missing_duration": 0,
                                                "zero_duration": 1}
    with pytest.raises(InputError, match=r"cluster_log.csv:5, field 'gpu_num'.*zero_gpus"):
        readers.read(path, "helios", strict=True)


def test_pai_rounds_up_a_gpu_share_and_keeps_it_as_a_tag() -> None:
    workload = readers.read(SAMPLES["pai"], "pai")
    (job,) = workload
    assert (job.job_id, job.submit_time, job.n_gpus, job.duration_s) == (
        "4f057009a5d481acec67b088/tensorflow", 0.0, 1, 38.0)
    assert dict(job.tags) == {"gpu_share": "0.5", "gpu_type": "MISC", "status": "Terminated"}
    assert workload.n_rounded_up == 1
    assert workload.lines == (1,)  # no header line: the first row is line 1


PAI_ROWS = ("a,worker,2.0,Terminated,100.0,400.0,600.0,29.3,100.0,V100\n"  # 2 whole GPUs
            "a,ps,1.0,Terminated,100.0,400.0,600.0,29.3,,\n"  # CPU-only parameter server
            "b,tensorflow,1.0,Running,150.0,,600.0,29.3,25.0,T4\n"
            "c,tensorflow,4.0,Failed,160.0,200.0,600.0,29.3,150.0,P100\n"  # 4 x 1.5 GPUs
            "d,tensorflow,1.0,Terminated,170.0,170.0,600.0,29.3,100.0,T4\n"
            "e,tensorflow,1.0,Terminated,180.0,190.0,600.0,29.3,0.0,\n")


def test_pai_filters_and_counts(tmp_path: Path) -> None:
    path = tmp_path / "pai_task_table.csv"
    path.write_text(PAI_ROWS)
    workload = readers.read(path, "pai")
    assert [(job.job_id, job.submit_time, job.n_gpus, job.duration_s) for job in workload] == [
        ("a/worker", 0.0, 2, 300.0), ("c/tensorflow", 60.0, 8, 40.0)]
    assert dict(workload[1].tags)["gpu_share"] == "1.5"
    assert "gpu_share" not in dict(workload[0].tags)
    assert dict(workload.skipped_by_reason) == {
        "zero_gpus": 1, "status": 1, "missing_start_time": 0, "missing_end_time": 0,
        "missing_plan_gpu": 1, "zero_duration": 1}
    assert len(workload) + workload.n_skipped == PAI_ROWS.count("\n")
    assert workload.n_rounded_up == 1


def test_pai_reads_a_file_with_its_header(tmp_path: Path) -> None:
    path = tmp_path / "pai_task_table.csv"
    header = ("job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,"
              "plan_gpu,gpu_type\n")
    path.write_text(header + PAI_ROWS)
    workload = readers.read(path, "pai")
    assert workload.lines == (2, 5)


def test_pai_names_a_bad_value(tmp_path: Path) -> None:
    path = tmp_path / "pai_task_table.csv"
    path.write_text(PAI_ROWS.replace("150.0,P100", "lots,P100"))
    with pytest.raises(InputError, match=r"pai_task_table.csv:4, field 'plan_gpu': not a number"):
        readers.read(path, "pai")


def test_philly_is_the_philly_json_reader() -> None:
    (job,) = readers.read(SAMPLES["philly"], "philly")
    # Two attempts on 8 GPUs: 74 s, then 2 days 5 h 39 min 42 s.
    assert (job.job_id, job.n_gpus, job.duration_s, job.group) == (
        "application_1506638472019_14199", 8, 74.0 + 193182.0, "ee9e8c")
    assert readers.read(SAMPLES["philly"], "philly-json") == readers.read(SAMPLES["philly"],
                                                                            "philly")


def test_sacct_rows() -> None:
    workload = readers.read(SAMPLES["sacct"], "sacct")
    assert [(job.job_id, job.submit_time, job.n_gpus, job.duration_s, job.group, job.user)
            for job in workload] == [("101", 0.0, 2, 7200.0, "gpu", "alice"),
                                     ("102", 300.0, 4, 600.0, "gpu", "bob"),
                                     ("107", 1200.0, 16, 86400.0, "gpu", "gina")]
    assert dict(workload.skipped_by_reason) == {"job_step": 3, "zero_gpus": 2, "missing_Start": 0,
                                                "missing_End": 1, "zero_duration": 1}
    assert workload.lines == (2, 5, 11)


@pytest.mark.parametrize(("tres", "gpus"), [
    ("billing=8,cpu=8,gres/gpu=2,mem=64G,node=1", 2),
    ("cpu=16,gres/gpu:a100=4,mem=128G", 4),
    ("cpu=16,gres/gpu:a100=2,gres/gpu:v100=1", 3),
    ("cpu=16,gres/gpu=3,gres/gpu:a100=3", 3),  # the untyped total, not counted twice
    ("cpu=4,mem=16G,node=1", 0),
])
def test_sacct_gpus_from_tres(tres: str, gpus: int) -> None:
    assert _gpus(tres) == gpus


def test_sacct_strict_and_bad_time(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"handwritten_fixture.sacct:3, field 'JobID'.*job_step"):
        readers.read(SAMPLES["sacct"], "sacct", strict=True)
    path = tmp_path / "jobs.sacct"
    path.write_text(SAMPLES["sacct"].read_text().replace("2024-03-01T10:16:00", "yesterday", 1))
    with pytest.raises(InputError, match=r"jobs.sacct:5, field 'End': not a date-time"):
        readers.read(path, "sacct")


def test_sacct_needs_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sacct"
    path.write_text("JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode\n"
                    "15|sleep.sh|debug|default|2|COMPLETED|0:0\n")
    with pytest.raises(InputError, match=r"jobs.sacct:1, field 'Submit': missing column"):
        readers.read(path, "sacct")


def test_k8s_pods() -> None:
    workload = readers.read(SAMPLES["k8s-pods"], "k8s-pods")
    assert [(job.job_id, job.submit_time, job.n_gpus, job.duration_s) for job in workload] == [
        ("vision/train-a", 0.0, 8, 7200.0),  # limits
        ("nlp/train-b", 600.0, 2, 600.0),  # requests only
        ("vision/prep-and-train", 1800.0, 4, 3630.0),  # init container's 4 > 1; last container
    ]
    assert dict(workload[1].tags) == {"phase": "Failed"}
    assert dict(workload.skipped_by_reason) == {"zero_gpus": 1, "not_started": 1,
                                                "not_finished": 1, "zero_duration": 0}


def test_k8s_pods_errors_name_the_pod_and_key(tmp_path: Path) -> None:
    document = json.loads(SAMPLES["k8s-pods"].read_text())
    document["items"][2]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1.5"
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match=r"pods.json, field 'spec.containers\[0\].resources"
                                         r".requests.nvidia.com/gpu': items\[2\] \(train-b\)"):
        readers.read(path, "k8s-pods")
    with pytest.raises(InputError, match=r"items\[1\] \(notebook\): pod skipped as zero_gpus"):
        readers.read(SAMPLES["k8s-pods"], "k8s-pods", strict=True)
    path.write_text(json.dumps({"kind": "Pod", "metadata": {"name": "x"}}))
    with pytest.raises(InputError, match="field 'items'"):
        readers.read(path, "k8s-pods")


def test_a_mapping_is_refused_for_a_preset() -> None:
    with pytest.raises(InputError, match="field 'mapping'"):
        readers.read(SAMPLES["helios"], "helios", mapping=DATA / "none.yaml")


def test_philly_counts_jobs_left_out(tmp_path: Path) -> None:
    records = json.loads(SAMPLES["philly"].read_text())
    never_ran = {**records[0], "jobid": "never_ran", "attempts": []}
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps([*records, never_ran]))
    workload = readers.read(path, "philly")
    assert dict(workload.skipped_by_reason) == {"no_attempts": 1}
    with pytest.raises(InputError, match=r"job #1 \(never_ran\): job left out: no attempts"):
        readers.read(path, "philly", strict=True)


def test_sacct_parsable_with_trailing_separators(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sacct"
    lines = SAMPLES["sacct"].read_text().splitlines()
    path.write_text("".join(f"{line}|\n" for line in lines))  # sacct --parsable
    trailing, plain = readers.read(path, "sacct"), readers.read(SAMPLES["sacct"], "sacct")
    assert trailing.jobs == plain.jobs
    assert trailing.skipped_by_reason == plain.skipped_by_reason
