"""Read the Philly trace's ``cluster_job_log`` (msr-fiddle/philly-traces).

The file is a JSON list of jobs, each with ``jobid``, ``user``, ``vc``,
``status``, ``submitted_time`` (``"YYYY-MM-DD HH:MM:SS"``) and
``attempts``: a list of ``{start_time, end_time, detail: [{ip, gpus}]}``.

How a job becomes a `Job`:
- ``n_gpus``: the GPUs of the first attempt, summed over its servers
  (later attempts of a job ran at the same size in the published trace).
- ``duration_s``: the sum of all attempts' ``end_time - start_time``: the
  time the job held GPUs, without the gaps between attempts, which were
  spent waiting, not working.
- ``submit_time``: seconds after the earliest submission among kept jobs.
- ``group``: ``vc``; ``user``: ``user``; ``tags``: the final ``status``.

Jobs the log cannot turn into a run are left out and counted in
``Workload.n_skipped`` (and logged): no attempts, an attempt without a
start or end time (a logging gap, or still running when the log was cut),
no GPUs in the first attempt, or an attempt that ends before it starts or
a total run time of zero.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from rackwise.errors import InputError
from rackwise.workload.job import Job
from rackwise.workload.readers.json_file import read_json
from rackwise.workload.workload import Workload

_log = logging.getLogger(__name__)
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def read_philly_json(path: str | Path, *, strict: bool = False) -> Workload:
    """Read a Philly ``cluster_job_log`` file (``*.gz`` is decompressed).

    Args:
        path: The file.
        strict: Refuse the file at the first job that would be left out.

    Returns:
        Jobs sorted by submission (ties keep file order); ``lines`` are 0
        (JSON records have no line of their own); ``n_skipped`` and
        ``skipped_by_reason`` count the jobs left out.

    Raises:
        InputError: a malformed record, naming its index, ``jobid`` and key.
    """
    source = str(path)
    records = _load(Path(path))
    kept: list[tuple[datetime, int, dict[str, Any], int, float]] = []
    skipped: Counter[str] = Counter()
    for index, record in enumerate(records):
        where = _Where(source, index, record)
        if where.get("jobid") in (None, ""):
            raise where.error("jobid", "empty job id")
        submitted = where.time(where.get("submitted_time"), "submitted_time")
        if submitted is None:
            raise where.error("submitted_time", "missing submission time")
        attempts = where.get("attempts")
        if not isinstance(attempts, list):
            raise where.error("attempts", f"expected a list, got {type(attempts).__name__}")
        run = _run(where, attempts)
        if isinstance(run, str):
            if strict:
                raise where.error("attempts", f"job left out: {run} (--strict refuses such jobs)")
            skipped[run] += 1
            continue
        kept.append((submitted, index, record, *run))
    if not kept:
        raise InputError(f"no usable job among {len(records)} records "
                         f"({_describe(skipped) or 'empty list'})", source=source)
    if skipped:
        _log.info("%s: left out %d of %d jobs (%s)", source, sum(skipped.values()),
                  len(records), _describe(skipped))
    kept.sort(key=lambda item: (item[0], item[1]))
    origin = kept[0][0]
    seen: dict[str, int] = {}
    jobs = []
    for submitted, index, record, n_gpus, duration_s in kept:
        job_id = str(record["jobid"])
        if job_id in seen:
            raise _Where(source, index, record).error(
                "jobid", f"duplicate job id (first at index {seen[job_id]})")
        seen[job_id] = index
        status = record.get("status")
        jobs.append(Job(
            job_id=job_id, submit_time=(submitted - origin).total_seconds(), n_gpus=n_gpus,
            duration_s=duration_s, group=_optional_text(record.get("vc")),
            user=_optional_text(record.get("user")),
            tags=(("status", str(status)),) if status is not None else ()))
    name = Path(path).name.removesuffix(".gz").removesuffix(".json")
    return Workload(jobs=tuple(jobs), name=name, source=source,
                    n_gpus_field="attempts[0].detail.gpus", n_skipped=sum(skipped.values()),
                    skipped_by_reason=tuple((reason.replace(" ", "_"), count)
                                            for reason, count in sorted(skipped.items())))


def _run(where: _Where, attempts: list[Any]) -> tuple[int, float] | str:
    """(GPUs, seconds held) of one job, or the reason it is left out."""
    if not attempts:
        return "no attempts"
    total_s = 0.0
    for number, attempt in enumerate(attempts):
        key = f"attempts[{number}]"
        if not isinstance(attempt, dict):
            raise where.error(key, "expected an object")
        start = where.time(attempt.get("start_time"), f"{key}.start_time")
        end = where.time(attempt.get("end_time"), f"{key}.end_time")
        if start is None or end is None:
            return "attempt without start or end time"
        if end < start:
            return "attempt ending before it starts"
        total_s += (end - start).total_seconds()
    detail = attempts[0].get("detail")
    if not isinstance(detail, list):
        raise where.error("attempts[0].detail", "expected a list of servers")
    n_gpus = 0
    for server_no, server in enumerate(detail):
        gpus = server.get("gpus") if isinstance(server, dict) else None
        if not isinstance(gpus, list):
            raise where.error(f"attempts[0].detail[{server_no}].gpus", "expected a list of GPUs")
        n_gpus += len(gpus)
    if n_gpus == 0:
        return "no GPUs in first attempt"
    if total_s <= 0.0:
        return "zero run time"
    return n_gpus, total_s


class _Where:
    """Builds errors that name the record (index and jobid) and the key."""

    def __init__(self, source: str, index: int, record: Any) -> None:
        if not isinstance(record, dict):
            raise InputError(f"job #{index}: expected an object, got {type(record).__name__}",
                             source=source)
        self.source = source
        self.index = index
        self.record = record

    def get(self, key: str) -> Any:
        if key not in self.record:
            raise self.error(key, "missing key")
        return self.record[key]

    def error(self, key: str, message: str) -> InputError:
        job_id = self.record.get("jobid", "?")
        return InputError(f"job #{self.index} ({job_id}): {message}", source=self.source,
                          field=key)

    def time(self, value: Any, key: str) -> datetime | None:
        if value is None or value == "None" or value == "":
            return None
        if not isinstance(value, str):
            raise self.error(key, f"expected a date string, got {value!r}")
        try:
            return datetime.strptime(value, _TIME_FORMAT)
        except ValueError:
            raise self.error(key, f"not a date like 2017-10-07 01:12:09: {value!r}") from None


def _load(path: Path) -> list[Any]:
    records = read_json(path, "a JSON list of jobs")
    if not isinstance(records, list):
        raise InputError(f"expected a JSON list of jobs, got {type(records).__name__}",
                         source=str(path))
    return records


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _describe(skipped: Counter[str]) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in sorted(skipped.items()))
