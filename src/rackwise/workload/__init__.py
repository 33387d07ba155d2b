"""Jobs and workloads: the records, the trace readers and synthetic generators.

`Job` and `Workload` load eagerly; the readers (which need pandas) and the
synthetic generator load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rackwise.workload.job import Job, Parallelism
from rackwise.workload.workload import Workload

if TYPE_CHECKING:
    from rackwise.workload.readers.csv import ColumnMapping, read_csv
    from rackwise.workload.readers.gavel import read_gavel
    from rackwise.workload.readers.philly_json import read_philly_json
    from rackwise.workload.synthetic import WorkloadModel, generate

_LAZY = {
    "ColumnMapping": "rackwise.workload.readers.csv",
    "read_csv": "rackwise.workload.readers.csv",
    "read_gavel": "rackwise.workload.readers.gavel",
    "read_philly_json": "rackwise.workload.readers.philly_json",
    "WorkloadModel": "rackwise.workload.synthetic",
    "generate": "rackwise.workload.synthetic",
}

__all__ = [
    "ColumnMapping",
    "Job",
    "Parallelism",
    "Workload",
    "WorkloadModel",
    "generate",
    "read_csv",
    "read_gavel",
    "read_philly_json",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
