"""Read Gavel's tab-separated job traces (stanford-futuredata/gavel, ``scheduler/traces``).

Each line is one job, no header. Current Gavel (since it split the working
directory from the command) writes ten fields::

    job_type  command  working_directory  num_steps_arg  needs_data_dir
    total_steps  scale_factor  priority_weight  SLO  arrival_time

earlier releases nine (the same without ``working_directory``), and older
traces seven (``job_type command num_steps_arg needs_data_dir total_steps
arrival_time scale_factor``); all three are accepted, told apart by the
number of fields.

A Gavel trace gives work in steps, not a duration. This reader derives the
duration a job would take alone on ``worker_type`` GPUs (V100 by default):
``total_steps / throughput``, where ``throughput`` is Gavel's measured
isolated rate (steps per second, the ``"null"`` entry) of that job type at
that scale factor. It is a reference figure that keeps the job comparable
with duration-only traces; a performance model may recompute rates.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
from importlib import resources
from pathlib import Path

from rackwise.errors import InputError
from rackwise.workload.job import Job
from rackwise.workload.workload import Workload

_FIELDS_NOW = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
               "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time")
_FIELDS_NINE = tuple(f for f in _FIELDS_NOW if f != "working_directory")
_FIELDS_OLD = ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps",
               "arrival_time", "scale_factor")
_BY_COUNT = {len(f): f for f in (_FIELDS_NOW, _FIELDS_NINE, _FIELDS_OLD)}
_log = logging.getLogger(__name__)
_BATCH_SIZE = re.compile(r"\(batch size (\d+)\)")
_KEY = re.compile(r"^\('(.*)', (\d+)\)$")
# Where the perf package keeps its copy of Gavel's measurements.
_PACKAGED_THROUGHPUTS = ("rackwise.perf", "data", "gavel_throughputs.json.gz")


def read_gavel(path: str | Path, *, throughputs_path: str | Path | None = None,
               worker_type: str = "v100", skip_unmeasured: bool = False) -> Workload:
    """Read a Gavel trace file.

    Args:
        path: The trace (tab-separated; ``*.gz`` is decompressed).
        throughputs_path: Gavel's ``simulation_throughputs.json`` (optionally
            gzipped); default: the copy packaged with `rackwise.perf`.
        worker_type: GPU type whose isolated throughput sets ``duration_s``.
        skip_unmeasured: Leave out (and count in ``n_skipped``) jobs whose
            job type and scale factor have no measurement, instead of failing.

    Returns:
        Jobs ``"0"``, ``"1"``, ... in file order (Gavel numbers jobs so),
        with ``model`` the job type, ``batch_size`` parsed from it,
        ``n_gpus`` the scale factor and ``total_iters`` the total steps.

    Raises:
        InputError: naming the file, line and field of the first bad value.
    """
    source = str(path)
    throughputs = _isolated_throughputs(throughputs_path, worker_type)
    jobs: list[Job] = []
    lines: list[int] = []
    n_skipped = 0
    n_read = 0
    for line_no, text in enumerate(_read_lines(Path(path)), start=1):
        if not text.strip():
            continue
        parts = text.split("\t")
        fields = _BY_COUNT.get(len(parts))
        if fields is None:
            raise InputError(f"expected {len(_FIELDS_NOW)}, {len(_FIELDS_NINE)} or "
                             f"{len(_FIELDS_OLD)} tab-separated fields, found {len(parts)}",
                             source=source, line=line_no)
        row = dict(zip(fields, parts))
        n_read += 1
        try:
            jobs.append(_job(row, str(n_read - 1), throughputs, worker_type, source, line_no))
        except _Unmeasured as exc:
            if not skip_unmeasured:
                raise InputError(str(exc), source=source, line=line_no, field="job_type") from None
            n_skipped += 1
            continue
        lines.append(line_no)
    if n_read == 0:
        raise InputError("empty file: no jobs", source=source)
    if n_skipped:
        _log.info("%s: left out %d jobs with no measured %s throughput", source, n_skipped,
                  worker_type)
    name = Path(path).name.removesuffix(".gz").removesuffix(".trace")
    return Workload(jobs=tuple(jobs), name=name, source=source, lines=tuple(lines),
                    n_gpus_field="scale_factor", n_skipped=n_skipped)


class _Unmeasured(Exception):
    """A job type and scale factor the throughput table does not cover."""


def _job(row: dict[str, str], job_id: str, throughputs: dict[tuple[str, int], float],
         worker_type: str, source: str, line: int) -> Job:
    def number(field: str) -> float:
        try:
            value = float(row[field])
        except ValueError:
            raise InputError(f"not a number: {row[field]!r}", source=source, line=line,
                             field=field) from None
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"not a finite number: {row[field]!r}", source=source, line=line,
                             field=field)
        return value

    def whole(field: str, minimum: int) -> int:
        value = number(field)
        if value != int(value):
            raise InputError(f"not a whole number: {row[field]!r}", source=source, line=line,
                             field=field)
        if value < minimum:
            raise InputError(f"must be at least {minimum}, got {row[field]!r}", source=source,
                             line=line, field=field)
        return int(value)

    job_type = row["job_type"].strip()
    total_steps = whole("total_steps", 1)
    scale_factor = whole("scale_factor", 1)
    arrival_s = number("arrival_time")
    if arrival_s < 0:
        raise InputError(f"must not be negative, got {row['arrival_time']!r}", source=source,
                         line=line, field="arrival_time")
    rate = throughputs.get((job_type, scale_factor))
    if rate is None:
        raise _Unmeasured(f"no measured {worker_type} throughput for job type {job_type!r} "
                          f"with scale factor {scale_factor}; skip_unmeasured=True leaves "
                          f"such jobs out")
    match = _BATCH_SIZE.search(job_type)
    tags: tuple[tuple[str, str], ...] = ()
    if "priority_weight" in row:
        number("priority_weight")
        number("SLO")
        tags = (("priority_weight", row["priority_weight"].strip()), ("slo", row["SLO"].strip()))
    return Job(job_id=job_id, submit_time=arrival_s, n_gpus=scale_factor,
               duration_s=total_steps / rate, total_iters=float(total_steps), model=job_type,
               batch_size=int(match.group(1)) if match else None, tags=tags)


def _read_lines(path: Path) -> list[str]:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                text = handle.read()
        else:
            text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", source=str(path)) from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"cannot read file: {exc}", source=str(path)) from None
    return text.splitlines()


def _isolated_throughputs(path: str | Path | None,
                          worker_type: str) -> dict[tuple[str, int], float]:
    """(job type, scale factor) -> isolated steps/s on ``worker_type``, from Gavel's JSON."""
    if path is None:
        package, *parts = _PACKAGED_THROUGHPUTS
        ref = resources.files(package).joinpath(*parts)
        if not ref.is_file():
            raise InputError("no packaged Gavel throughput table; pass throughputs_path",
                             field="throughputs_path")
        raw_bytes = ref.read_bytes()
        source = "/".join(_PACKAGED_THROUGHPUTS)
    else:
        source = str(path)
        try:
            raw_bytes = Path(path).read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read throughputs: {exc}", source=source) from None
    try:
        if raw_bytes[:2] == b"\x1f\x8b":
            raw_bytes = gzip.decompress(raw_bytes)
        table = json.loads(raw_bytes)
    except (OSError, EOFError, ValueError) as exc:
        raise InputError(f"not a Gavel throughput table: {exc}", source=source) from None
    if not isinstance(table, dict) or not isinstance(table.get(worker_type), dict):
        known = sorted(table) if isinstance(table, dict) else []
        raise InputError(f"no worker type {worker_type!r}; the table has: {', '.join(known)}",
                         source=source, field="worker_type")
    rates: dict[tuple[str, int], float] = {}
    for key, entry in table[worker_type].items():
        match = _KEY.match(key)
        isolated = entry.get("null") if isinstance(entry, dict) else None
        if match is None or not isinstance(isolated, (int, float)) or isolated <= 0:
            raise InputError(f"bad entry {key!r} under {worker_type!r}", source=source,
                             field=worker_type)
        rates[(match.group(1), int(match.group(2)))] = float(isolated)
    return rates
