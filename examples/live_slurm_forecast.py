"""Forecast a live Slurm cluster: the README's example, end to end.

Starts the four-node loopback Slurm test cluster (Debian's slurmctld and
slurmd, as the tests do), submits the first ITP jobs held, lets
`rackwise serve` run FIFO on them for a few seconds, then prints
`rackwise forecast --backend slurm` and stops everything.

    python examples/live_slurm_forecast.py        # needs root and slurmctld/slurmd
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "backends"))

from slurm_cluster import LoopbackSlurm  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="rw-slurm-") as base:
        cluster = LoopbackSlurm(Path(base))
        cluster.start()
        env = cluster.env
        common = ["--backend", "slurm", "--policy", "fifo", "--time-scale", "3600"]
        try:
            subprocess.run(["rackwise", "serve", *common, "--submit-trace", "itp_2021",
                            "--first-n", "60", "--max-gpus", "4", "--submit-only",
                            "--output-dir", str(Path(base) / "job-logs")],
                           env=env, check=True)
            serve = subprocess.Popen(["rackwise", "serve", *common, "--poll-s", "0.5"], env=env)
            time.sleep(3)
            serve.terminate()
            serve.wait(timeout=10)
            subprocess.run(["rackwise", "forecast", "--backend", "slurm", "--policy", "fifo",
                            "--samples", "20"], env=env, check=False)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
