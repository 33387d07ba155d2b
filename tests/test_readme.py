"""Every command of the README, run as written, in a fresh virtual environment.

A copy of the checkout (the files git tracks or would track) gets README
line 1 verbatim: a new ``.venv``, ``pip install .`` and the full Philly
replay. Each command of the README's usage block then runs in that venv,
in the README's order (``report`` reads the folder ``compare`` wrote), and
the two lines that talk to a live cluster (``forecast`` and ``serve`` with
``--backend slurm``) run against the loopback Slurm cluster of the backend
tests. Line 2 is the test command itself, so it is checked to be what CI
runs (``.ci/run``) rather than run again from inside it.

The module installs from the package index and replays 82,247 jobs (about
seven minutes on a 2-core machine), so it runs under CI (``CI=true``) or
with ``RACKWISE_README_TESTS=1``, and is skipped otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from rackwise.backends.slurm_cli import SlurmCli
from rackwise.backends.slurm_jobs import submit_held
from rackwise.workload.job import Job

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# The backend tests' loopback Slurm cluster, used as it is (as tests/forecast does).
sys.path.insert(0, str(ROOT / "tests" / "backends"))
from slurm_cluster import LoopbackSlurm  # noqa: E402

_spec = importlib.util.spec_from_file_location("backend_fixtures", ROOT / "tests" / "backends" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)
slurm_cluster = _fixtures.slurm_cluster
slurm = _fixtures.slurm


def bash_blocks() -> list[list[str]]:
    """The README's ```bash blocks, each as its commands (continuation lines joined)."""
    blocks = re.findall(r"^```bash\n(.*?)^```", README.read_text(), flags=re.MULTILINE | re.DOTALL)
    return [[line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
            for block in blocks]


FIRST_BLOCK, USAGE = bash_blocks()[:2]
LIVE = [command for command in USAGE if "--backend slurm" in command]
OFFLINE = [command for command in USAGE if command not in LIVE]


@dataclass(frozen=True)
class Checkout:
    """A fresh copy of the project where README line 1 has run."""

    root: Path
    env: dict[str, str]

    def shell(self, command: str) -> list[str]:
        """``bash -c`` with the venv of line 1 active, as a reader's shell after line 1."""
        return ["bash", "-c", f". .venv/bin/activate && {command}"]

    def run(self, command: str, timeout_s: float = 900, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.shell(command), cwd=self.root, env={**self.env, **env},
                              capture_output=True, text=True, timeout=timeout_s, check=False)


def _outside_this_venv() -> dict[str, str]:
    """The environment of a new shell: no active venv, no path into this checkout."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        env["PATH"] = os.pathsep.join(part for part in env["PATH"].split(os.pathsep)
                                      if not part.startswith(venv))
    return env


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Checkout:
    if os.environ.get("CI", "").lower() != "true" and os.environ.get("RACKWISE_README_TESTS") != "1":
        pytest.skip("installs from the package index and replays full Philly: "
                    "set RACKWISE_README_TESTS=1 (CI runs it)")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    root = tmp_path_factory.mktemp("readme") / "rackwise"
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, root / name)
    env = _outside_this_venv()
    line_1 = subprocess.run(["bash", "-c", FIRST_BLOCK[0]], cwd=root, env=env,
                            capture_output=True, text=True, timeout=1800, check=False)
    assert line_1.returncode == 0, line_1.stdout[-3000:] + line_1.stderr[-3000:]
    (root / "line-1.out").write_text(line_1.stdout)
    return Checkout(root, env)


def test_readme_line_1_installs_and_replays_all_of_philly(fresh: Checkout) -> None:
    [folder] = (fresh.root / "results").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert folder.name == "philly_2017-tiresias-s0"
    assert summary["figures"]["n_jobs"] == 82_247
    assert (fresh.root / ".venv" / "bin" / "rackwise").is_file()
    assert "82,247/82,247 jobs finished" in (fresh.root / "line-1.out").read_text()


def test_readme_line_2_is_what_ci_runs() -> None:
    assert FIRST_BLOCK[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_compiled_build_is_what_ci_builds() -> None:
    compiled = [command for block in bash_blocks() for command in block if "RACKWISE_COMPILE=1" in command]
    assert len(compiled) == 1
    assert compiled[0] in (ROOT / ".ci" / "run").read_text().splitlines()


@pytest.mark.parametrize("command", OFFLINE, ids=[" ".join(c.split()[1:3]) for c in OFFLINE])
def test_readme_usage_command_runs_as_written(fresh: Checkout, command: str) -> None:
    result = fresh.run(command)
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr


def _held_window(cluster: LoopbackSlurm, out: Path) -> list[Job]:
    """Three small jobs submitted held to the loopback cluster (a trace hour per real second)."""
    jobs = [Job(f"r{i}", submit_time=0.0, n_gpus=n, duration_s=2 * 3600.0)
            for i, n in enumerate((4, 2, 8), start=1)]
    out.mkdir()
    submit_held(SlurmCli(env={"SLURM_CONF": str(cluster.conf)}),
                jobs, time_scale=3600.0, output_dir=out)
    return jobs


def _n_ended(out: Path) -> int:
    """Jobs whose payload has written its ``end`` line."""
    return sum("\nend " in "\n" + path.read_text() for path in out.glob("rw-*.out"))


def test_readme_forecast_line_forecasts_the_held_jobs(fresh: Checkout, slurm: LoopbackSlurm, tmp_path: Path) -> None:
    [command] = [command for command in LIVE if command.startswith("rackwise forecast")]
    jobs = _held_window(slurm, tmp_path / "out")
    result = fresh.run(command, timeout_s=300, SLURM_CONF=str(slurm.conf))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for job in jobs:
        assert job.job_id in result.stdout, result.stdout


def test_readme_serve_line_runs_the_held_jobs_until_stopped(fresh: Checkout, slurm: LoopbackSlurm,
                                                             tmp_path: Path) -> None:
    [command] = [command for command in LIVE if command.startswith("rackwise serve")]
    jobs = _held_window(slurm, tmp_path / "out")
    serving = subprocess.Popen(fresh.shell(f"exec {command}"), cwd=fresh.root,
                               env={**fresh.env, "SLURM_CONF": str(slurm.conf)},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while _n_ended(tmp_path / "out") < len(jobs) and time.monotonic() < deadline \
                and serving.poll() is None:
            time.sleep(0.5)
        assert _n_ended(tmp_path / "out") == len(jobs)
        time.sleep(2)  # a poll or two, so that serve sees the last job end
    finally:
        serving.send_signal(signal.SIGTERM)
        output, _ = serving.communicate(timeout=60)
    assert serving.returncode == 0, output
    assert f"{len(jobs)} jobs finished" in output, output
