"""Talking to Slurm through its command-line clients, and reading what they print.

Every call has a timeout: a client talking to a dead controller blocks for
seconds. A refused command raises `SlurmCommandError` whose message is one
line (the command and Slurm's own words), fit for a log.

The JSON readers follow what Slurm 22.05 prints (``openapi/v0.0.38``):
``squeue --json`` and ``sinfo --json`` ignore filters there and list every
job and node, so callers filter on their side. Unknown or missing fields are
tolerated, since later releases changed the schema.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from rackwise.backends.base import BackendError


class SlurmCommandError(BackendError):
    """A Slurm client exited non-zero, timed out or could not be run."""


class SlurmCli:
    """Runs Slurm client commands (``squeue``, ``sinfo``, ``scontrol``, ``sbatch``).

    Args:
        env: Extra environment (e.g. ``{"SLURM_CONF": path}``) over ``os.environ``.
        timeout_s: Limit for one command.
        bin_dir: Folder holding the clients, if they are not on PATH.
    """

    def __init__(self, env: Mapping[str, str] | None = None, timeout_s: float = 15.0,
                 bin_dir: str | None = None) -> None:
        self.env = {**os.environ, **(env or {})}
        self.timeout_s = timeout_s
        self.bin_dir = bin_dir

    def run(self, argv: Sequence[str], *, stdin: str | None = None) -> str:
        """Run one command; return its stdout.

        Raises:
            SlurmCommandError: one line naming the command and Slurm's message.
        """
        command = list(argv)
        if self.bin_dir:
            command[0] = os.path.join(self.bin_dir, command[0])
        shown = " ".join(" ".join(argv[:3]).split())  # one line, whatever the arguments
        try:
            result = subprocess.run(command, input=stdin, capture_output=True, text=True,
                                    env=self.env, timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise SlurmCommandError(f"{shown}: no answer within {self.timeout_s:g} s") from None
        except OSError as exc:
            raise SlurmCommandError(f"{shown}: cannot run: {exc.strerror}") from None
        if result.returncode != 0:
            message = " ".join((result.stderr or result.stdout).split()) or f"exit {result.returncode}"
            raise SlurmCommandError(f"{shown}: {message}")
        return result.stdout

    def json(self, argv: Sequence[str]) -> dict[str, Any]:
        text = self.run(argv)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SlurmCommandError(f"{argv[0]} printed no JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise SlurmCommandError(f"{argv[0]} printed JSON that is not an object")
        # With the controller down, squeue and sinfo still exit 0, with empty lists and the
        # failure under "errors": an empty cluster that must not be believed.
        errors = data.get("errors") or []
        if errors:
            first = errors[0] if isinstance(errors[0], dict) else {"error": str(errors[0])}
            message = "; ".join(str(first[key]) for key in ("source", "description", "error")
                                if first.get(key))
            raise SlurmCommandError(f"{argv[0]}: {message or 'an error without a message'}")
        return data

    def jobs(self) -> list[dict[str, Any]]:
        """Every job the controller remembers (``squeue --json``)."""
        return list(self.json(["squeue", "--json"]).get("jobs", []))

    def nodes(self) -> list[dict[str, Any]]:
        """Every node (``sinfo --json``)."""
        return list(self.json(["sinfo", "--json"]).get("nodes", []))

    def hostnames(self, hostlist: str) -> list[str]:
        """Expand a hostlist the way Slurm does."""
        names = expand_hostlist(hostlist)
        if names is None:
            names = self.run(["scontrol", "show", "hostnames", hostlist]).split()
        return names


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(hostlist: str) -> list[str] | None:
    """``"node[1-3,7],gpu05"`` -> names; None for forms this reader does not know.

    Handles one bracket group per name with ranges and zero padding, which
    covers the usual node names; the caller asks ``scontrol`` for the rest.
    """
    names: list[str] = []
    for part in split_top_level(hostlist.strip()):
        if not part:
            continue
        if "[" not in part:
            names.append(part)
            continue
        match = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)", part)
        if match is None:
            return None
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            bounds = _RANGE.match(item)
            if bounds is None:
                return None
            low, high = bounds.group(1), bounds.group(2) or bounds.group(1)
            width = len(low) if low.startswith("0") else 0
            for number in range(int(low), int(high) + 1):
                names.append(f"{prefix}{number:0{width}d}{suffix}")
    return names


def split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets and parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def parse_index_list(text: str) -> list[int]:
    """``"0-1,3"`` -> ``[0, 1, 3]``."""
    out: list[int] = []
    for item in text.split(","):
        bounds = _RANGE.match(item.strip())
        if bounds is None:
            continue
        low, high = int(bounds.group(1)), int(bounds.group(2) or bounds.group(1))
        out.extend(range(low, high + 1))
    return out


def gpu_count(gres: str) -> int:
    """GPUs in a gres string: ``"gpu:4"``, ``"gpu:a100:4(S:0-1),mps:100"`` -> 4."""
    total = 0
    for item in split_top_level(gres or ""):
        fields = item.split("(")[0].split(":")
        if fields[0] == "gpu" and len(fields) >= 2 and fields[-1].isdigit():
            total += int(fields[-1])
    return total


def gpu_type(gres: str) -> str | None:
    """The GPU type in a gres string (``"gpu:a100:4"`` -> ``"a100"``), or None."""
    for item in split_top_level(gres or ""):
        fields = item.split("(")[0].split(":")
        if fields[0] == "gpu" and len(fields) == 3:
            return fields[1].lower()
    return None


def gpu_indices(detail: str) -> list[int] | None:
    """GPU indices of one node's ``gres_detail`` entry (``"gpu:2(IDX:0-1)"``), or None."""
    match = re.search(r"gpu[^,(]*\(IDX:([0-9,\-]+)\)", detail or "")
    return parse_index_list(match.group(1)) if match else None


def job_gpu_count(job: Mapping[str, Any]) -> int:
    """GPUs a Slurm job asked for, from ``tres_per_job`` or ``tres_per_node`` x nodes."""
    per_job = _tres_gpus(str(job.get("tres_per_job") or ""))
    if per_job:
        return per_job
    per_node = _tres_gpus(str(job.get("tres_per_node") or ""))
    return per_node * max(1, int(job.get("node_count") or 1))


def _tres_gpus(tres: str) -> int:
    total = 0
    for item in split_top_level(tres):
        fields = item.split(":")
        if "gpu" in fields[:2] and fields[-1].isdigit():
            total += int(fields[-1])
    return total
