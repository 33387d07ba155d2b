"""Trace readers, one module per format; each returns a `Workload`.

Besides ``csv`` (any CSV through a column mapping) and ``gavel``, the
presets read public traces and cluster exports as they come: ``philly``
(Philly's ``cluster_job_log``; ``philly-json`` is the same reader),
``pai`` (Alibaba PAI 2020's ``pai_task_table``), ``helios`` (a Helios
``cluster_log.csv``), ``sacct`` (``sacct --parsable2`` output) and
``k8s-pods`` (``kubectl get pods -o json``).

Imported lazily, so ``import rackwise.workload`` does not pull in pandas.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rackwise.errors import InputError, UnknownNameError, suggest

if TYPE_CHECKING:
    from rackwise.workload.readers.csv import ColumnMapping, read_csv
    from rackwise.workload.readers.gavel import read_gavel
    from rackwise.workload.readers.philly_json import read_philly_json
    from rackwise.workload.workload import Workload

_EXPORTS = {
    "ColumnMapping": "rackwise.workload.readers.csv",
    "read_csv": "rackwise.workload.readers.csv",
    "read_gavel": "rackwise.workload.readers.gavel",
    "read_philly_json": "rackwise.workload.readers.philly_json",
}

# format -> "module:function"; each function takes (path, *, strict).
_PRESETS = {
    "philly-json": "rackwise.workload.readers.philly_json:read_philly_json",
    "philly": "rackwise.workload.readers.philly_json:read_philly_json",
    "pai": "rackwise.workload.readers.pai:read_pai",
    "helios": "rackwise.workload.readers.helios:read_helios",
    "sacct": "rackwise.workload.readers.sacct:read_sacct",
    "k8s-pods": "rackwise.workload.readers.k8s_pods:read_k8s_pods",
}

FORMATS = ("csv", "gavel", *_PRESETS)
_WITH_SHARES = ("csv", "pai")  # formats whose GPU requests may be parts of one GPU

__all__ = ["FORMATS", "ColumnMapping", "read", "read_csv", "read_gavel", "read_philly_json"]


def read(path: str | Path, trace_format: str = "csv", *,
         mapping: ColumnMapping | str | Path | None = None, time_unit: str = "s",
         strict: bool = False, gpu_shares: bool = False) -> Workload:
    """Read a trace file in one of `FORMATS`.

    Args:
        path: The trace file.
        trace_format: ``csv`` (through ``mapping``), ``gavel``, or a preset:
            ``philly`` (or ``philly-json``), ``pai``, ``helios``, ``sacct``,
            ``k8s-pods``.
        mapping: For ``csv``: a `ColumnMapping`, or a YAML file holding one.
        time_unit: For ``csv``: unit of the time columns.
        strict: Refuse the file at the first row its mapping's (or preset's)
            filters would skip.
        gpu_shares: Read a request for part of one GPU as a fractional job
            (``csv``: the mapping's ``fractional_gpus: share``; ``pai``: a
            one-instance task below 100% of a GPU) instead of rounding it up.
    """
    if gpu_shares and trace_format not in _WITH_SHARES:
        raise InputError(f"{trace_format} traces ask for whole GPUs; GPU shares are read from "
                         f"{' and '.join(_WITH_SHARES)} traces", field="gpu_shares")
    if trace_format == "csv":
        from rackwise.workload.readers.csv import ColumnMapping, read_csv

        if mapping is not None and not isinstance(mapping, ColumnMapping):
            mapping = ColumnMapping.from_yaml(mapping)
        if gpu_shares:
            mapping = (mapping or ColumnMapping()).model_copy(update={"fractional_gpus": "share"})
        return read_csv(path, mapping, time_unit=time_unit, strict=strict)
    if trace_format not in FORMATS:
        raise UnknownNameError(f"unknown trace format {trace_format!r}."
                               f"{suggest(trace_format, FORMATS)} Known: {', '.join(FORMATS)}")
    if mapping is not None:
        raise InputError(f"a column mapping applies to csv files, not {trace_format}",
                         field="mapping")
    if trace_format == "gavel":
        from rackwise.workload.readers.gavel import read_gavel

        return read_gavel(path)
    module_name, _, function = _PRESETS[trace_format].partition(":")
    reader: Callable[..., Workload] = getattr(importlib.import_module(module_name), function)
    if gpu_shares:
        return reader(path, strict=strict, gpu_shares=True)
    return reader(path, strict=strict)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
