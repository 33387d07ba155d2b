"""A real Slurm cluster on loopback, started and stopped by the tests.

One slurmctld and four ``slurmd -N nodeX`` run in the foreground under
``subprocess.Popen``, each in its own session, with every file (config,
state, spool, logs, fake GPU devices) under a temporary folder. Ports are
picked free at start, so two test runs on one machine do not collide.

Without the Slurm binaries the tests that need them are skipped, except
under CI (``CI=true``), where a missing binary is an error.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from rackwise.backends.slurm_cli import gpu_count

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
NODES = ("node1", "node2", "node3", "node4")
GPUS_PER_NODE = 4
SLURMD_TIMEOUT_S = 5


def free_ports(count: int) -> list[int]:
    sockets, ports = [], []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
        ports.append(sock.getsockname()[1])
    for sock in sockets:
        sock.close()
    return ports


def slurm_missing_reason() -> str | None:
    """Why the Slurm tests cannot run here, or None."""
    missing = [b for b in ("slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "sinfo")
               if shutil.which(b) is None]
    if not missing:
        return None
    return ("Slurm binaries not on PATH (" + ", ".join(missing) + "); install with "
            "`apt-get install -y slurmctld slurmd slurm-client`")


class LoopbackSlurm:
    """Start, inspect, break and stop a four-node Slurm cluster in ``base``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.conf = base / "etc" / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.ctld: subprocess.Popen[bytes] | None = None
        self.slurmd: dict[str, subprocess.Popen[bytes]] = {}

    # ------------------------------------------------------------- config
    def write_config(self, settings: dict[str, str] | None = None) -> None:
        """Write slurm.conf, gres.conf and topology.conf; ``settings`` replace slurm.conf lines by key."""
        ctld_port, *node_ports = free_ports(1 + len(NODES))
        etc = self.base / "etc"
        for sub in ("etc", "state", "log", "run", "dev", "out"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        for index in range(GPUS_PER_NODE):
            os.symlink("/dev/null", self.base / "dev" / f"gpu{index}")
        nodes = "\n".join(
            f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=8 "
            f"RealMemory=4000 Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
            for name, port in zip(NODES, node_ports))
        marks = {"@BASE@": str(self.base), "@CTLD_PORT@": str(ctld_port), "@NODES@": nodes,
                 "@SLURMD_TIMEOUT@": str(SLURMD_TIMEOUT_S)}
        for name in ("slurm.conf", "gres.conf"):
            text = (FIXTURES / f"{name}.in").read_text()
            for mark, value in marks.items():
                text = text.replace(mark, value)
            if name == "slurm.conf":
                text = _with_settings(text, settings or {})
            (etc / name).write_text(text)
        shutil.copy(FIXTURES / "topology.conf", etc / "topology.conf")

    # -------------------------------------------------------------- start
    def start(self, settings: dict[str, str] | None = None) -> None:
        self.write_config(settings)
        self._start_clean()

    def restart_clean(self) -> None:
        """Stop every daemon and start again on an empty state, as a new cluster would be.

        Slurm 22.05 can keep counting GPUs of an earlier test's requeued jobs as used, and
        a plain controller restart can bring the count back from the saved job records."""
        self.stop()
        for sub in ("state", "spool"):
            shutil.rmtree(self.base / sub, ignore_errors=True)
            (self.base / sub).mkdir()
        self._start_clean()

    def _start_clean(self) -> None:
        self._start_controller(["-c"])  # no saved state
        # slurmd only once the controller answers: before that it backs off for minutes.
        for name in NODES:
            self.start_node(name)
        self.wait_idle(NODES, timeout_s=20)

    def restart_controller(self, down_s: float) -> None:
        """Stop slurmctld, leave it down ``down_s`` seconds, start it again on its saved state."""
        assert self.ctld is not None
        self.ctld.terminate()
        self.ctld.wait(timeout=10)
        time.sleep(down_s)
        self._start_controller([])

    def _start_controller(self, flags: list[str]) -> None:
        self.ctld = self._spawn(["slurmctld", "-D", *flags, "-i"], "slurmctld")
        deadline = time.monotonic() + 15
        while not self._ctld_up():
            if self.ctld.poll() is not None:
                raise RuntimeError("slurmctld died: " + self.log_tail("slurmctld"))
            if time.monotonic() > deadline:
                raise RuntimeError("slurmctld did not answer within 15 s")
            time.sleep(0.1)

    def start_node(self, name: str) -> None:
        (self.base / "spool" / name).mkdir(parents=True, exist_ok=True)
        self.slurmd[name] = self._spawn(["slurmd", "-D", "-N", name], f"slurmd-{name}")

    def _spawn(self, argv: list[str], log_name: str) -> subprocess.Popen[bytes]:
        out = open(self.base / "log" / f"{log_name}.stdout", "ab")  # noqa: SIM115
        try:
            return subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            out.close()

    def _ctld_up(self) -> bool:
        result = self.run(["scontrol", "ping"], check=False, timeout_s=3)
        return "is UP" in result.stdout

    def run(self, argv: list[str], *, check: bool = True,
            timeout_s: float = 10) -> subprocess.CompletedProcess[str]:
        """A Slurm client command against this cluster."""
        try:
            result = subprocess.run(argv, env=self.env, capture_output=True, text=True,
                                    timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", "timeout")
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {result.stderr.strip()}")
        return result

    def node_states(self) -> dict[str, str]:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False, timeout_s=5).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def gpus_counted_used(self) -> dict[str, int]:
        """GPUs slurmctld counts as in use, by node."""
        lines = self.run(["sinfo", "-h", "-N", "-O", "NodeList:30,GresUsed:80"]).stdout.splitlines()
        return {name: gpu_count(used) for name, used in (line.split(None, 1) for line in lines)}

    def wait_idle(self, names: tuple[str, ...] | list[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            states = self.node_states()
            if all(states.get(name) == "idle" for name in names):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"nodes not idle after {timeout_s} s: {states}")
            time.sleep(0.1)

    # ------------------------------------------------------------ faults
    def kill_node(self, name: str) -> None:
        """Kill a node as a crash would: its slurmd and the job processes on it."""
        proc = self.slurmd.pop(name)
        proc.kill()
        proc.wait(timeout=10)
        for pid in self._job_pids(node=name):
            _kill(pid, signal.SIGKILL)

    def _job_pids(self, node: str | None = None) -> list[int]:
        """slurmstepd and payload processes of this cluster (optionally of one node).

        A killed slurmd leaves its job steps running (they are reparented to
        init), so teardown and node crashes must find them by environment.
        """
        wanted = f"SLURM_CONF={self.conf}".encode()
        node_mark = f"SLURMD_NODENAME={node}".encode() if node else None
        stepds: set[int] = set()
        pids: set[int] = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if wanted not in environ or entry.name == str(os.getpid()):
                continue
            if comm == "slurmstepd":
                stepds.add(int(entry.name))
            elif node_mark is None or node_mark in environ:
                pids.add(int(entry.name))
        for stepd in sorted(stepds):
            children = _children(stepd)
            if node_mark is None or any(child in pids for child in children):
                pids.add(stepd)
        if node_mark is None:
            return sorted(pids - {p.pid for p in self._daemons()})
        return sorted(pids)

    def _daemons(self) -> list[subprocess.Popen[bytes]]:
        return ([self.ctld] if self.ctld else []) + list(self.slurmd.values())

    # --------------------------------------------------------------- stop
    def cancel_all(self) -> None:
        ids = self.run(["squeue", "-h", "-o", "%i"], check=False, timeout_s=5).stdout.split()
        if ids:
            self.run(["scancel", *ids], check=False, timeout_s=5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if not self.run(["squeue", "-h", "-o", "%i"], check=False, timeout_s=5).stdout.strip():
                return
            time.sleep(0.1)

    def stop(self) -> None:
        if self.ctld is not None and self.ctld.poll() is None:
            self.cancel_all()
        daemons = self._daemons()
        for proc in daemons:
            if proc.poll() is None:
                proc.terminate()
        for proc in daemons:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        for pid in self._job_pids():
            _kill(pid, signal.SIGKILL)
        self.ctld = None
        self.slurmd.clear()

    def log_tail(self, name: str, lines: int = 5) -> str:
        path = self.base / "log" / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])


def _with_settings(text: str, settings: dict[str, str]) -> str:
    """slurm.conf text with each ``KEY=`` line set to ``settings[KEY]`` (new keys appended)."""
    lines = text.splitlines()
    for key, value in settings.items():
        at = [i for i, line in enumerate(lines) if line.startswith(f"{key}=")]
        if at:
            lines[at[0]] = f"{key}={value}"
        else:
            lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _kill(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
