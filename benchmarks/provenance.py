"""What every benchmark line carries: the command, the commit and the machine."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import rackwise

ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    """The short hash of the checked-out commit, or 'unknown' outside git."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def provenance() -> dict[str, object]:
    """Command, commit, machine, CPUs, Python and rackwise build (`rackwise.is_compiled`) of this run,
    for one JSON line."""
    return {"command": " ".join(["python", *sys.argv]), "commit": commit(),
            "machine": f"{platform.machine()} {platform.processor()}".strip(),
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "build": "compiled" if rackwise.is_compiled() else "python"}
