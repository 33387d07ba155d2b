"""The replay payload that `submit_held` gives Slurm, run here by /bin/sh with a stand-in squeue."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rackwise.backends.slurm_jobs import PAYLOAD


def run_payload(tmp_path: Path, comment: str, stop_sleep_after_s: float | None = None) -> list[str]:
    """Run the payload as Slurm would; with ``stop_sleep_after_s``, signal its sleep alone
    (a stop whose signal reaches the shell only later). The payload's output lines."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = bin_dir / "squeue"
    squeue.write_text(f"#!/bin/sh\necho '{comment}'\n")
    squeue.chmod(0o755)
    script = tmp_path / "payload.sh"
    script.write_text(PAYLOAD)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "7",
           "SLURMD_NODENAME": "node1", "SLURM_JOB_NODELIST": "node1", "CUDA_VISIBLE_DEVICES": "0"}
    shell = subprocess.Popen(["/bin/sh", str(script)], env=env, stdout=subprocess.PIPE, text=True)
    if stop_sleep_after_s is not None:
        time.sleep(stop_sleep_after_s)
        sleeps = subprocess.run(["pgrep", "-P", str(shell.pid), "sleep"], capture_output=True,
                                text=True).stdout.split()
        assert sleeps, "the payload's sleep was not running"
        for pid in sleeps:
            os.kill(int(pid), signal.SIGTERM)
    out, _ = shell.communicate(timeout=30)
    return out.splitlines()


@pytest.mark.skipif(not Path("/bin/sh").exists(), reason="needs /bin/sh")
def test_the_payload_sleeps_the_job_s_remaining_time_and_then_ends(tmp_path: Path) -> None:
    lines = run_payload(tmp_path, "rackwise;job=j1;duration_s=7200;run_s=3600;scale=36000")
    assert [line.split()[0] for line in lines] == ["start", "end"]
    assert "sleep_s=0.100" in lines[0] and "job=7" in lines[1]


@pytest.mark.skipif(not Path("/bin/sh").exists() or shutil.which("pgrep") is None,
                    reason="needs /bin/sh and pgrep")
def test_a_stopped_run_writes_no_end_even_if_its_shell_outlives_the_sleep(tmp_path: Path) -> None:
    lines = run_payload(tmp_path, "rackwise;job=j1;duration_s=36000;run_s=0;scale=3600",
                        stop_sleep_after_s=0.5)
    assert [line.split()[0] for line in lines] == ["start"]
