"""Reading what Slurm prints, and the comment tags rackwise keeps in jobs (no Slurm needed)."""

from __future__ import annotations

import pytest

from rackwise.backends.slurm_cli import (
    SlurmCli, SlurmCommandError, expand_hostlist, gpu_count, gpu_indices, gpu_type, job_gpu_count)
from rackwise.backends.slurm_jobs import decode_tags, encode_tags


@pytest.mark.parametrize(("hostlist", "names"), [
    ("node1", ["node1"]),
    ("node[1-3]", ["node1", "node2", "node3"]),
    ("node[2,4],gpu07", ["node2", "node4", "gpu07"]),
    ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
    ("a[1-2]-ib", ["a1-ib", "a2-ib"]),
    ("", []),
])
def test_hostlists_expand_like_slurm(hostlist: str, names: list[str]) -> None:
    assert expand_hostlist(hostlist) == names


def test_unknown_hostlist_forms_are_left_to_scontrol() -> None:
    assert expand_hostlist("r[1-2]n[1-2]") is None


@pytest.mark.parametrize(("gres", "count", "kind"), [
    ("gpu:4", 4, None),
    ("gpu:a100:8(S:0-1)", 8, "a100"),
    ("gpu:v100:2,mps:100", 2, "v100"),
    ("", 0, None),
])
def test_gres_strings(gres: str, count: int, kind: str | None) -> None:
    assert gpu_count(gres) == count
    assert gpu_type(gres) == kind


def test_gres_detail_and_job_gpu_counts() -> None:
    assert gpu_indices("gpu:3(IDX:0-1,3)") == [0, 1, 3]
    assert gpu_indices("gpu:a100:1(IDX:2)") == [2]
    assert gpu_indices("gpu:2(IDX:N/A)") is None
    assert job_gpu_count({"tres_per_job": "gres:gpu:6"}) == 6
    assert job_gpu_count({"tres_per_node": "gres:gpu:2", "node_count": 3}) == 6


def test_tags_round_trip_and_foreign_comments_are_ignored() -> None:
    comment = encode_tags({"job": "j7", "gpus": 2, "submit_s": 1800.0, "t0": 1712345678.25})
    assert comment == "rackwise;job=j7;gpus=2;submit_s=1800;t0=1712345678.25"
    assert decode_tags(comment) == {"job": "j7", "gpus": "2", "submit_s": "1800",
                                    "t0": "1712345678.25"}
    assert decode_tags("nightly build") is None
    assert decode_tags(None) is None
    assert decode_tags("rackwiser;job=1") is None


def test_a_refused_command_is_one_line_naming_it() -> None:
    cli = SlurmCli()
    with pytest.raises(SlurmCommandError) as info:
        cli.run(["sh", "-c", "echo 'boom\nbang' >&2; exit 3"])
    assert str(info.value) == "sh -c echo 'boom bang' >&2; exit 3: boom bang"
    with pytest.raises(SlurmCommandError, match="cannot run"):
        cli.run(["/nonexistent/scontrol", "show"])
