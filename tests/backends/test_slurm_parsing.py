"""Reading what Slurm prints, and the comment tags rackwise keeps in jobs (no Slurm needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from rackwise.backends.slurm_cli import (
    SlurmCli,
    SlurmCommandError,
    expand_hostlist,
    gpu_count,
    gpu_indices,
    gpu_type,
    job_gpu_count,
)
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


def test_json_that_reports_errors_is_not_read_as_an_empty_cluster(tmp_path: Path) -> None:
    # What squeue 22.05 prints, exit status 0, while slurmctld is down.
    squeue = tmp_path / "squeue"
    squeue.write_text('#!/bin/sh\necho \'{"errors": [{"description": "Failed while looking for jobs", '
                      '"error_number": -1, "error": "Unspecified error", "source": "slurm_load_jobs"}], '
                      '"jobs": []}\'\n')
    squeue.chmod(0o755)
    with pytest.raises(SlurmCommandError) as info:
        SlurmCli(bin_dir=str(tmp_path)).jobs()
    assert str(info.value) == "squeue: slurm_load_jobs; Failed while looking for jobs; Unspecified error"


def test_jobs_of_an_earlier_window_are_told_apart_by_their_t0_tag() -> None:
    """A job that ended within the same wall second as the next window began is not adopted."""
    from rackwise.backends.slurm import SlurmBackend
    from rackwise.cluster.topology import uniform_cluster

    t0 = 1_700_000_000.4
    backend = SlurmBackend(topology=uniform_cluster(1, gpus_per_node=4),
                           node_names=("n1",), t0=t0, time_scale=3600.0, clock=lambda: t0 + 1)

    def raw(slurm_id: int, job: str, window_t0: float, state: str) -> dict[str, object]:
        tags = {"job": job, "gpus": 1, "submit_s": 0.0, "duration_s": 60.0, "t0": window_t0}
        return {"job_id": slurm_id, "job_state": state, "comment": encode_tags(tags),
                "end_time": int(t0), "priority": 0}

    left_over = raw(1, "old", t0 - 30.0, "COMPLETED")  # ended in t0's second, yet earlier
    ours = raw(2, "new", t0, "COMPLETED")
    untagged = {**raw(3, "user", t0, "CANCELLED"), "comment": "rackwise;job=user;gpus=1"}
    chosen = backend.classify([left_over, ours, untagged], now=3600.0)
    assert sorted(chosen) == ["new", "user"]  # untagged: its end time decides, within the second


class ListingCli(SlurmCli):
    """Answers squeue and sinfo from lists the test sets; runs nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.raw_jobs: list[dict[str, object]] = []
        self.raw_nodes: list[dict[str, object]] = []

    def jobs(self) -> list[dict[str, object]]:  # type: ignore[override]
        return self.raw_jobs

    def nodes(self) -> list[dict[str, object]]:  # type: ignore[override]
        return self.raw_nodes


def test_gpus_slurm_counts_used_that_no_job_holds_are_left_out_from_the_second_poll() -> None:
    """Slurm's GPU accounting can keep a requeued job's GPUs; a policy must not count on them.
    One poll's surplus may be a job started between squeue and sinfo, so it waits a poll."""
    from rackwise.backends.slurm import SlurmBackend
    from rackwise.cluster.topology import uniform_cluster

    cli = ListingCli()
    backend = SlurmBackend(cli=cli, topology=uniform_cluster(2, gpus_per_node=4),
                           node_names=("n1", "n2"), t0=0.0, time_scale=1.0, clock=lambda: 10.0)
    cli.raw_nodes = [{"name": "n1", "state": "idle", "gres_used": "gpu:3(IDX:0-2)"},
                     {"name": "n2", "state": "idle", "gres_used": "gpu:0"}]
    assert backend.observe().view.n_free == 8
    view = backend.observe().view
    assert (view.free_in_node(0), view.free_in_node(1)) == (1, 4)
    assert {view.owner_of(g) for g in range(3)} == {"!unaccounted:n1"}
    cli.raw_nodes[0]["gres_used"] = "gpu:0"  # slurmctld restarted: the count is right again
    assert backend.observe().view.n_free == 8


def test_a_node_back_from_a_failure_takes_jobs_only_after_it_settles() -> None:
    """On a failed node's return slurmctld cancels the runs it lost there, so a job relaunched on
    it at once would go with them: the node stays out for NODE_SETTLE_S of wall time."""
    from rackwise.backends.slurm import NODE_SETTLE_S, SlurmBackend
    from rackwise.cluster.topology import uniform_cluster

    cli, wall = ListingCli(), [10.0]
    backend = SlurmBackend(cli=cli, topology=uniform_cluster(2, gpus_per_node=4),
                           node_names=("n1", "n2"), t0=0.0, time_scale=1.0, clock=lambda: wall[0])
    cli.raw_nodes = [{"name": "n1", "state": "idle"}, {"name": "n2", "state": "idle"}]
    assert backend.observe().view.n_free == 8  # never seen down: usable at once
    cli.raw_nodes[1] = {"name": "n2", "state": "down", "state_flags": ["NOT_RESPONDING"]}
    assert backend.observe().view.free_in_node(1) == 0
    cli.raw_nodes[1] = {"name": "n2", "state": "idle"}
    for wall[0] in (11.0, 11.0 + NODE_SETTLE_S / 2, 11.0 + NODE_SETTLE_S - 0.01):
        view = backend.observe().view
        assert view.free_in_node(1) == 0 and view.owner_of(4) == "!down:n2"
    wall[0] = 11.0 + NODE_SETTLE_S
    assert backend.observe().view.free_in_node(1) == 4
    cli.raw_nodes[1] = {"name": "n2", "state": "down"}  # down again, and back: it settles again
    assert backend.observe().view.free_in_node(1) == 0
    cli.raw_nodes[1] = {"name": "n2", "state": "idle"}
    assert backend.observe().view.free_in_node(1) == 0
    cli.raw_nodes = cli.raw_nodes[:1]  # a node sinfo no longer lists is down too
    wall[0] += NODE_SETTLE_S
    assert backend.observe().view.free_in_node(1) == 0
    cli.raw_nodes.append({"name": "n2", "state": "idle"})
    assert backend.observe().view.free_in_node(1) == 0


@pytest.mark.parametrize(("state", "started_s", "refused"), [
    ("RUNNING", 9_000.0, ""),  # 1,000 s of 3,600 run: may be requeued
    ("RUNNING", 5_000.0, "it has run its whole duration; Slurm has not reported its end yet"),
    ("COMPLETING", 9_000.0, "it is completing"),
])
def test_a_job_slurm_may_have_finished_is_not_requeued(state: str, started_s: float,
                                                        refused: str) -> None:
    """Slurm would requeue a job whose end it has not taken in and run its script again."""
    from rackwise.backends.slurm import SlurmBackend
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.policies.base import Decisions

    cli = ListingCli()
    backend = SlurmBackend(cli=cli, topology=uniform_cluster(1, gpus_per_node=4),
                           node_names=("n1",), t0=0.0, time_scale=1.0, clock=lambda: 10_000.0)
    tags = {"job": "a", "gpus": 2, "submit_s": 0.0, "duration_s": 3_600.0, "t0": 0.0, "scale": 1.0,
            "run_s": 0.0, "rc": 0, "first_s": started_s, "started_s": started_s}
    cli.raw_jobs = [{"job_id": 7, "job_state": state, "comment": encode_tags(tags), "priority": 1,
                     "restart_cnt": 0, "nodes": "n1", "gres_detail": ["gpu:2(IDX:0-1)"],
                     "job_resources": {"allocated_nodes": [{"nodename": "n1"}]}}]
    cli.raw_nodes = [{"name": "n1", "state": "mixed", "gres_used": "gpu:2(IDX:0-1)"}]
    snapshot = backend.observe()
    assert list(snapshot.view.running) == ["a"]
    if refused:
        [outcome] = backend.apply(Decisions(preempt=("a",)), snapshot)
        assert (outcome.ok, outcome.detail) == (False, refused)
    else:
        assert backend._ending(backend._current["a"], snapshot.now) == ""


class RecordingCli(ListingCli):
    """A `ListingCli` that keeps every command it is asked to run, and runs none."""

    def __init__(self) -> None:
        super().__init__()
        self.commands: list[list[str]] = []

    def run(self, argv: Sequence[str], *, stdin: str | None = None) -> str:
        self.commands.append(list(argv))
        return ""


@pytest.mark.parametrize("comment_kept", ["last", "first"])
@pytest.mark.parametrize(("restart_after_s", "begin"), [(0.5, "StartTime=now+2"), (3.0, "StartTime=now")])
def test_a_restarted_driver_keeps_the_relaunch_gap_after_a_requeue(restart_after_s: float, begin: str,
                                                                   comment_kept: str) -> None:
    """Slurm fails a job launched again within a moment of its requeue ("Job credential
    revoked"); a driver started just after another one requeued a job must wait too, even
    when the other was killed before it could record the requeue's progress ("first": only
    the comment written before the requeue reached Slurm)."""
    from rackwise.backends.slurm import RELAUNCH_GAP_S, SlurmBackend
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.policies.base import Decisions, Start

    assert RELAUNCH_GAP_S == 2.0  # the figures below are worked out for it
    cli = RecordingCli()
    tags = {"job": "a", "gpus": 2, "submit_s": 0.0, "duration_s": 3_600.0, "t0": 0.0, "scale": 1.0,
            "run_s": 0.0, "rc": 0, "first_s": 9_000.0, "started_s": 9_000.0}
    cli.raw_jobs = [{"job_id": 7, "job_state": "RUNNING", "comment": encode_tags(tags), "priority": 1,
                     "restart_cnt": 0, "nodes": "n1", "gres_detail": ["gpu:2(IDX:0-1)"],
                     "job_resources": {"allocated_nodes": [{"nodename": "n1"}]}}]
    cli.raw_nodes = [{"name": "n1", "state": "mixed", "gres_used": "gpu:2(IDX:0-1)"}]
    first = SlurmBackend(cli=cli, topology=uniform_cluster(1, gpus_per_node=4), node_names=("n1",),
                         t0=0.0, time_scale=1.0, clock=lambda: 10_000.0)
    [outcome] = first.apply(Decisions(preempt=("a",)), first.observe())
    assert outcome.ok
    first_comment, *_, last_comment = [arg for command in cli.commands for arg in command
                                       if arg.startswith("Comment=")]
    comment = last_comment if comment_kept == "last" else first_comment
    # What Slurm now holds: the job requeued and held, with the comment the driver wrote.
    cli.raw_jobs = [{"job_id": 7, "job_state": "PENDING", "comment": comment.removeprefix("Comment="),
                     "priority": 0, "restart_cnt": 1, "state_reason": "JobHeldUser"}]
    cli.raw_nodes = [{"name": "n1", "state": "idle", "gres_used": "gpu:0"}]
    cli.commands.clear()
    second = SlurmBackend(cli=cli, topology=uniform_cluster(1, gpus_per_node=4), node_names=("n1",),
                          t0=0.0, time_scale=1.0, clock=lambda: 10_000.0 + restart_after_s)
    snapshot = second.observe()
    assert list(snapshot.view.pending) == ["a"]
    [outcome] = second.apply(Decisions(start=(Start("a", (0, 1)),)), snapshot)
    assert outcome.ok
    [update] = [command for command in cli.commands if command[:2] == ["scontrol", "update"]]
    assert begin in update
