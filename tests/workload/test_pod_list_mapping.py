"""The pod-list mapping of docs/traces.md reads a pod export as it comes."""

from __future__ import annotations

import re
from pathlib import Path

from rackwise.workload.readers.csv import ColumnMapping, read_csv

DOCS = Path(__file__).resolve().parents[2] / "docs" / "traces.md"

PODS = ("pod,namespace,created,started,finished,gpus,phase\n"
        "train-a,vision,2024-03-01T10:00:00Z,2024-03-01T10:01:00Z,2024-03-01T12:01:00Z,8,Succeeded\n"
        "notebook,lab,2024-03-01T10:05:00Z,2024-03-01T10:05:10Z,2024-03-01T11:00:00Z,0,Succeeded\n"
        "train-b,nlp,2024-03-01T10:10:00Z,2024-03-01T10:30:00Z,2024-03-01T10:40:00Z,2,Failed\n"
        "train-c,nlp,2024-03-01T10:20:00Z,2024-03-01T10:21:00Z,2024-03-01T10:50:00Z,1,Running\n")


def test_docs_pod_list_mapping_reads_a_pod_export(tmp_path: Path) -> None:
    block = re.search(r"## Example: a pod list.*?```yaml\n(.*?)```", DOCS.read_text(), re.S)
    assert block is not None
    mapping_file = tmp_path / "pods.yaml"
    mapping_file.write_text(block.group(1), encoding="utf-8")
    trace = tmp_path / "pods.csv"
    trace.write_text(PODS, encoding="utf-8")
    workload = read_csv(trace, ColumnMapping.from_yaml(mapping_file))
    assert [(job.job_id, job.group, job.n_gpus) for job in workload] == [
        ("train-a", "vision", 8), ("train-b", "nlp", 2)]
    assert [(job.submit_time, job.duration_s) for job in workload] == [(0.0, 7200.0),
                                                                       (600.0, 600.0)]
    assert dict(workload.skipped_by_reason) == {"zero_gpus": 1, "status": 1}
