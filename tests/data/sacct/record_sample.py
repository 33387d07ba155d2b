"""Record ``loopback_itp_window.sacct``: real Slurm accounting of a real trace window.

A window of itp_2021 is run by plain Slurm (its own backfill scheduler, no
rackwise in the loop) on the loopback test cluster of
``tests/backends/slurm_cluster.py`` (4 nodes x 4 fake GPUs), with job
accounting kept by ``slurmdbd`` in a MariaDB server, all started in a
temporary folder. Each job is submitted at its trace submission time and
sleeps for its trace duration, both divided by the time scale; its name
carries its trace id. When every job has ended, ``sacct`` writes what the
accounting database holds, as an operator would dump it.

Needs Debian's ``slurmctld slurmd slurm-client slurmdbd mariadb-server``.

Usage (about 5 minutes):
    python tests/data/sacct/record_sample.py [--start-h 312] [--jobs 300] [--time-scale 1200]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests" / "backends"))

from slurm_cluster import GPUS_PER_NODE, NODES, LoopbackSlurm, free_ports  # noqa: E402

from rackwise import load_trace  # noqa: E402
from rackwise.workload.job import Job  # noqa: E402

FORMAT = "JobID,JobName,User,Partition,State,Submit,Start,End,AllocTRES"
OUT = HERE / "loopback_itp_window.sacct"


def window(start_h: float, n_jobs: int) -> list[Job]:
    """The first ``n_jobs`` itp_2021 jobs submitted from hour ``start_h`` that fit the cluster."""
    fits = len(NODES) * GPUS_PER_NODE
    jobs = [job for job in load_trace("itp_2021").jobs
            if job.submit_time >= start_h * 3600 and job.n_gpus <= fits]
    return jobs[:n_jobs]


class Accounting:
    """A MariaDB server and a slurmdbd on loopback ports, all files under ``base``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.db_port, self.dbd_port = free_ports(2)
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, etc: Path) -> None:
        data, run = self.base / "db", self.base / "run"
        for folder in (etc, run):
            folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mariadb-install-db", f"--datadir={data}", "--user=root",
                        "--auth-root-authentication-method=normal"],
                       check=True, capture_output=True)
        socket = run / "mysql.sock"
        self._spawn(["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={socket}",
                     f"--port={self.db_port}", "--bind-address=127.0.0.1", "--user=root",
                     f"--pid-file={run / 'mysql.pid'}"], "mariadb")
        _wait(lambda: socket.exists(), "MariaDB")
        subprocess.run(["mariadb", "--no-defaults", "-S", str(socket), "-u", "root", "-e",
                        "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm'; "
                        "GRANT ALL ON *.* TO 'slurm'@'127.0.0.1';"], check=True)
        conf = etc / "slurmdbd.conf"
        conf.write_text("\n".join([
            "AuthType=auth/none", "DbdHost=localhost", "DbdAddr=127.0.0.1",
            f"DbdPort={self.dbd_port}", "SlurmUser=root", f"PidFile={run / 'slurmdbd.pid'}",
            f"LogFile={self.base / 'log' / 'slurmdbd.log'}",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
            f"StoragePort={self.db_port}", "StorageUser=slurm", "StoragePass=slurm",
            "StorageLoc=slurm_acct", ""]))
        conf.chmod(0o600)  # slurmdbd refuses a config others can read
        self._spawn(["slurmdbd", "-D"], "slurmdbd", env={**os.environ, "SLURM_CONF": str(etc / "slurm.conf")})
        _wait(lambda: "started" in _read(self.base / "log" / "slurmdbd.log"), "slurmdbd")

    def slurm_settings(self) -> dict[str, str]:
        """The slurm.conf lines that send job records to this slurmdbd, GPUs included."""
        return {"AccountingStorageType": "accounting_storage/slurmdbd",
                "AccountingStorageHost": "localhost",
                "AccountingStoragePort": str(self.dbd_port),
                "AccountingStorageTRES": "gres/gpu"}

    def _spawn(self, argv: list[str], name: str, env: dict[str, str] | None = None) -> None:
        (self.base / "log").mkdir(parents=True, exist_ok=True)
        with open(self.base / "log" / f"{name}.stdout", "ab") as out:
            self.procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                               stdin=subprocess.DEVNULL, start_new_session=True))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _wait(ready: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start within {timeout_s} s")
        time.sleep(0.2)


def run_window(slurm: LoopbackSlurm, jobs: list[Job], time_scale: float) -> None:
    """Submit each job at its scaled submission time; wait until the queue is empty."""
    first = jobs[0].submit_time
    t0 = time.monotonic()
    for job in jobs:
        delay = (job.submit_time - first) / time_scale - (time.monotonic() - t0)
        if delay > 0:
            time.sleep(delay)
        nodes = math.ceil(job.n_gpus / GPUS_PER_NODE)
        slurm.run(["sbatch", "--parsable", f"--job-name=itp-{job.job_id}", f"--nodes={nodes}",
                   f"--gpus={job.n_gpus}", f"--output={slurm.base / 'out' / '%j.out'}",
                   f"--wrap=sleep {job.duration_s / time_scale:.3f}"])
    while slurm.run(["squeue", "-h", "-o", "%i"], check=False).stdout.strip():
        time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-h", type=float, default=312)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--time-scale", type=float, default=1200)
    args = parser.parse_args()
    for binary in ("slurmctld", "slurmd", "slurmdbd", "sacct", "mariadbd", "mariadb-install-db"):
        if shutil.which(binary) is None:
            sys.exit(f"error: {binary} not on PATH: apt-get install slurmctld slurmd slurm-client "
                     "slurmdbd mariadb-server")
    jobs = window(args.start_h, args.jobs)
    with tempfile.TemporaryDirectory(prefix="rackwise-sacct-") as folder:
        base = Path(folder)
        slurm = LoopbackSlurm(base)
        accounting = Accounting(base)
        try:
            accounting.start(slurm.conf.parent)
            slurm.start(accounting.slurm_settings())
            started = time.strftime("%Y-%m-%dT%H:%M:%S")
            run_window(slurm, jobs, args.time_scale)
            time.sleep(5)  # slurmctld hands the last end records to slurmdbd
            dump = slurm.run(["sacct", "--allusers", "--parsable2", f"--starttime={started}",
                              f"--format={FORMAT}"], timeout_s=60).stdout
        finally:
            slurm.stop()
            accounting.stop()
    OUT.write_text(dump)
    print(f"wrote {OUT.relative_to(REPO)}: {len(dump.splitlines()) - 1} rows for {len(jobs)} jobs "
          f"(itp_2021 from hour {args.start_h:g}, time scale {args.time_scale:g})")


if __name__ == "__main__":
    main()
