"""A sweep on a Ray head started by the test gives the table a serial run gives."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from tests.experiments.conftest import EXPERIMENTS

from rackwise.experiments import load_experiment, plan, run_cells

if importlib.util.find_spec("ray") is None:
    pytest.skip("ray is an optional extra: pip install 'rackwise[ray]'", allow_module_level=True)
SMOKE = EXPERIMENTS / "smoke.yaml"
# Per docs/experiments.md: no auth token for a private head, and loopback only;
# every process (head and driver) needs both.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def ray_head() -> Iterator[str]:
    """A Ray head of this test's own, on its own ports, stopped by its PID afterwards."""
    port = free_port()
    # Ray's socket paths must stay under 107 bytes, which pytest's tmp_path can exceed.
    temp_dir = tempfile.mkdtemp(prefix="rw-ray-", dir="/tmp")
    ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    command = [ray_bin, "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
               f"--ray-client-server-port={free_port()}", f"--node-manager-port={free_port()}",
               f"--object-manager-port={free_port()}", f"--min-worker-port={free_port()}",
               "--max-worker-port=0", "--include-dashboard=false", "--num-cpus=2",
               f"--temp-dir={temp_dir}"]
    head = subprocess.Popen(command, env={**os.environ, **RAY_ENV}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.5)
    else:
        head.kill()
        pytest.fail("the Ray head did not open its port within 60 s")
    try:
        yield address
    finally:
        os.killpg(head.pid, 15)  # the head and the processes it started, nothing else
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, 9)
            head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


DRIVER = """
import sys
from rackwise.experiments import load_experiment, plan, run_cells
cells = plan(load_experiment(sys.argv[1]), sys.argv[1])
outcome = run_cells(cells, sys.argv[2], ray_address=sys.argv[3])
print("ran", outcome.n_ran)
"""


def test_ray_sweep_gives_the_serial_table(ray_head: str, tmp_path: Path) -> None:
    cells = plan(load_experiment(SMOKE), str(SMOKE))
    serial = run_cells(cells, tmp_path / "serial", jobs=1)
    # The driver runs in a process of its own: Ray reads its settings when imported.
    driver = subprocess.run([sys.executable, "-c", DRIVER, str(SMOKE), str(tmp_path / "ray"), ray_head],
                            env={**os.environ, **RAY_ENV}, capture_output=True, text=True, timeout=300)
    assert driver.returncode == 0, driver.stderr[-2000:]
    assert f"ran {len(cells)}" in driver.stdout
    pd.testing.assert_frame_equal(serial.table.drop(columns=["wall_time_s"]),
                                  pd.read_parquet(tmp_path / "ray" / "results.parquet").drop(columns=["wall_time_s"]))
