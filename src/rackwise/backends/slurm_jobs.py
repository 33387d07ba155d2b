"""Which Slurm jobs rackwise manages, what it remembers about them, and trace submission.

rackwise keeps no state of its own between rounds that it cannot read back:
what it must remember about a job lives in the job's Slurm comment, as
``rackwise;job=ID;key=value;...``. A restarted driver reads it back from
``squeue``. Keys (times in workload seconds):

- ``job``, ``gpus``: the rackwise job id and GPU count;
- ``submit_s``, ``duration_s``: from the trace (a replay); ``t0`` and
  ``scale``: the wall-clock instant of workload second 0 and the speed-up;
- ``run_s``: time held over finished runs (set at each preemption);
- ``lost_s``: time held over runs a failure ended (a node died under the job),
  whose progress since the last preemption was lost;
- ``queued_s``: when the job last re-entered the queue;
- ``first_s``: when it first ran; ``started_s``: when its current run started;
- ``rc``: Slurm's restart count when rackwise last released it, which tells a
  start in flight from a job Slurm requeued on its own.

A replayed job runs a payload that sleeps for its remaining trace time,
``(duration_s - run_s) / scale`` real seconds, reading both from its own
comment, so a preempted job resumes where it stopped, as a checkpointed
training job would.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from rackwise.backends.slurm_cli import SlurmCli
from rackwise.errors import InputError
from rackwise.workload.job import Job

TAG = "rackwise"

PAYLOAD = """#!/bin/sh
# rackwise replay payload: sleep for the job's remaining trace time, scaled.
c=$(squeue -h -j "$SLURM_JOB_ID" -o %k 2>/dev/null)
left=$(printf '%s\\n' "$c" | tr ';' '\\n' | awk -F= '
  $1 == "duration_s" {d = $2} $1 == "run_s" {r = $2} $1 == "scale" {s = $2}
  END {if (s <= 0) s = 1; x = (d - r) / s; if (x < 0) x = 0; printf "%.3f", x}')
echo "start job=$SLURM_JOB_ID restart=${SLURM_RESTART_COUNT:-0} node=$SLURMD_NODENAME" \\
     "nodes=$SLURM_JOB_NODELIST gpus=$CUDA_VISIBLE_DEVICES sleep_s=$left t=$(date +%s.%N)"
# A stop signals the shell and the sleep one after the other: the shell may outlive
# the sleep long enough to go on, so only a sleep that ran out writes the end.
sleep "$left" && echo "end job=$SLURM_JOB_ID restart=${SLURM_RESTART_COUNT:-0} t=$(date +%s.%N)"
"""

_SAFE_ID = re.compile(r"^[A-Za-z0-9_.:@+-]+$")


def encode_tags(tags: Mapping[str, object]) -> str:
    """``{"job": "7", "gpus": 2}`` -> ``"rackwise;job=7;gpus=2"``."""
    parts = [TAG]
    for key, value in tags.items():
        if isinstance(value, float):
            value = f"{value:.6f}".rstrip("0").rstrip(".")
        parts.append(f"{key}={value}")
    return ";".join(parts)


def decode_tags(comment: str | None) -> dict[str, str] | None:
    """The tags of a rackwise comment, or None if the job is not rackwise's."""
    if not comment:
        return None
    head, _, rest = comment.partition(";")
    if head != TAG:
        return None
    tags: dict[str, str] = {}
    for item in rest.split(";"):
        key, sep, value = item.partition("=")
        if sep:
            tags[key.strip()] = value.strip()
    return tags


def float_tag(tags: Mapping[str, str], key: str, default: float) -> float:
    try:
        return float(tags[key])
    except (KeyError, ValueError):
        return default


def submit_held(cli: SlurmCli, jobs: Iterable[Job] | list[Job], *, time_scale: float,
                partition: str | None = None, output_dir: str | Path | None = None,
                t0: float | None = None) -> dict[str, int]:
    """Submit a trace window to Slurm, every job held, for `SlurmBackend` to release.

    Each job asks for its GPU count in total (``--gpus=N``); how many nodes
    it spans is set when rackwise pins it. Workload second 0 is ``t0`` (a
    Unix time; default: a moment after the submissions end), and one real
    second is ``time_scale`` workload seconds.

    Returns:
        Slurm job id by rackwise job id.

    Raises:
        InputError: a job id Slurm's comment cannot carry.
        SlurmCommandError: Slurm refused a submission (e.g. more GPUs than a node set has).
    """
    if time_scale <= 0:
        raise InputError(f"must be positive, got {time_scale}", field="time_scale")
    jobs = list(jobs)
    # Workload second 0 falls just after the submissions end, so that the
    # first jobs do not arrive late by the time it takes to submit them all.
    start = time.time() + 0.5 + 0.05 * len(jobs) if t0 is None else t0
    submitted: dict[str, int] = {}
    for job in jobs:
        if not _SAFE_ID.match(job.job_id):
            raise InputError(f"job id {job.job_id!r} has characters a Slurm comment cannot carry",
                             field="job_id")
        tags = {"job": job.job_id, "gpus": job.n_gpus, "submit_s": float(job.submit_time),
                "duration_s": float(job.duration_s), "t0": start, "scale": float(time_scale),
                "run_s": 0.0, "queued_s": float(job.submit_time)}
        argv = ["sbatch", "--parsable", "--hold", "--requeue", f"--gpus={job.n_gpus}",
                f"--job-name=rw-{job.job_id}", f"--comment={encode_tags(tags)}",
                "--open-mode=append", "--export=ALL"]
        if partition:
            argv.append(f"--partition={partition}")
        if output_dir is not None:
            argv.append(f"--output={Path(output_dir) / f'rw-{job.job_id}.out'}")
        out = cli.run(argv, stdin=PAYLOAD)
        submitted[job.job_id] = int(out.strip().split(";")[0])
    return submitted
