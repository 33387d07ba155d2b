"""What every benchmark line carries: the command, the commit, the digests of the code that ran and the machine."""

from __future__ import annotations

import hashlib
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


def source_sha256(package: Path) -> str:
    """First 16 hex digits of the sha256 of a package's Python sources (each file's path and text, in path order)."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def provenance() -> dict[str, object]:
    """Command, commit, machine, CPUs, Python and rackwise build (`rackwise.is_compiled`) of this run,
    for one JSON line.

    ``commit`` is the checkout's; the code that ran may be an installed build of
    another, so the line also carries the sources' digests of the rackwise that was
    imported and of the checkout's ``src/rackwise``: equal digests, the checkout's code.
    """
    return {"command": " ".join(["python", *sys.argv]), "commit": commit(),
            "rackwise_sources": source_sha256(Path(rackwise.__file__).parent),
            "checkout_sources": source_sha256(ROOT / "src" / "rackwise"),
            "machine": f"{platform.machine()} {platform.processor()}".strip(),
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "build": "compiled" if rackwise.is_compiled() else "python"}
