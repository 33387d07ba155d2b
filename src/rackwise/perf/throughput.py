"""Measured training throughput per (job type, GPU type), and how to add GPU types.

The shipped table (``perf/data/gavel_throughputs.json.gz``, MIT, from
Gavel, Narayanan et al., OSDI'20) gives steps per second of a whole job of
``scale`` GPUs for 26 job types on V100, P100 and K80, with every GPU of the
job in one server ("consolidated") and spread over servers
("unconsolidated"), alone and sharing GPUs pairwise with another job.

A GPU type the table lacks gets its throughput from V100's times a speed-up
factor (`PerfConfig.gpu_speedup_vs_v100`), or from a table of its own in
the same format merged with `ThroughputTable.merged`.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from rackwise.errors import InputError

_KEY = re.compile(r"^\('(.+)', (\d+)\)$")
UNCONSOLIDATED = "_unconsolidated"


def parse_key(key: str) -> tuple[str, int]:
    """``"('ResNet-50 (batch size 64)', 4)"`` -> ``('ResNet-50 (batch size 64)', 4)``."""
    match = _KEY.match(key)
    if match is None:
        raise InputError(f"throughput key {key!r} is not of the form \"('<job type>', <scale>)\"")
    return match.group(1), int(match.group(2))


@dataclass(frozen=True)
class ThroughputTable:
    """Steps/s per GPU type and job type, consolidated and unconsolidated.

    Attributes:
        isolated: ``{gpu_type: {(job_type, scale): steps_per_s}}``, consolidated.
        unconsolidated: The same for GPUs spread over servers.
        pairs: ``{gpu_type: {(job_a, job_b): (steps_a, steps_b)}}`` at scale 1,
            only where both rates are positive (zero means it did not fit).
    """

    isolated: dict[str, dict[tuple[str, int], float]]
    unconsolidated: dict[str, dict[tuple[str, int], float]]
    pairs: dict[str, dict[tuple[str, str], tuple[float, float]]]

    @classmethod
    def from_mapping(cls, data: dict[str, Any], source: str = "throughput table") -> ThroughputTable:
        """Build from the JSON layout of the shipped file (see the module docstring)."""
        isolated: dict[str, dict[tuple[str, int], float]] = {}
        spread: dict[str, dict[tuple[str, int], float]] = {}
        pairs: dict[str, dict[tuple[str, str], tuple[float, float]]] = {}
        for raw_type, rows in data.items():
            if not isinstance(rows, dict):
                raise InputError("expected a mapping of job types", source=source, field=raw_type)
            gpu_type = raw_type.lower()
            target = spread if gpu_type.endswith(UNCONSOLIDATED) else isolated
            gpu_type = gpu_type.removesuffix(UNCONSOLIDATED)
            table = target.setdefault(gpu_type, {})
            for key, row in rows.items():
                job_type, scale = parse_key(key)
                try:
                    table[(job_type, scale)] = float(row["null"])
                except (KeyError, TypeError, ValueError):
                    raise InputError("missing or bad 'null' throughput", source=source,
                                     field=f"{raw_type}.{key}") from None
                if target is isolated and scale == 1:
                    found = pairs.setdefault(gpu_type, {})
                    for other_key, rates in row.items():
                        if other_key == "null":
                            continue
                        other, _ = parse_key(other_key)
                        own, theirs = float(rates[0]), float(rates[1])
                        if own > 0 and theirs > 0:
                            found[(job_type, other)] = (own, theirs)
        return cls(isolated, spread, pairs)

    @classmethod
    def from_file(cls, path: str | Path) -> ThroughputTable:
        """Read a ``.json`` or ``.json.gz`` table in the shipped layout."""
        path = Path(path)
        if not path.is_file():
            raise InputError("no such throughput table", source=str(path))
        opener = gzip.open if path.suffix == ".gz" else open
        try:
            with opener(path, "rt") as handle:
                data = json.load(handle)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read: {exc}", source=str(path)) from None
        if not isinstance(data, dict):
            raise InputError("expected a mapping of GPU types at the top level", source=str(path))
        return cls.from_mapping(data, str(path))

    def merged(self, other: ThroughputTable) -> ThroughputTable:
        """This table with ``other``'s GPU types added (``other`` wins on a clash)."""
        return ThroughputTable({**self.isolated, **other.isolated},
                               {**self.unconsolidated, **other.unconsolidated},
                               {**self.pairs, **other.pairs})

    # ------------------------------------------------------------------ queries
    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted(self.isolated))

    @property
    def job_types(self) -> tuple[str, ...]:
        """Job types in the table, in first-seen order."""
        seen: dict[str, None] = {}
        for table in self.isolated.values():
            for job_type, _ in table:
                seen[job_type] = None
        return tuple(seen)

    def scales(self, job_type: str, gpu_type: str = "v100") -> tuple[int, ...]:
        return tuple(sorted(s for (j, s) in self.isolated.get(gpu_type, {}) if j == job_type))

    def measured(self, job_type: str, scale: int, gpu_type: str, *,
                 consolidated: bool = True) -> float | None:
        """The table's own entry, or None if it has none."""
        table = self.isolated if consolidated else self.unconsolidated
        return table.get(gpu_type, {}).get((job_type, scale))

    def speedup_vs_v100(self, gpu_type: str, extra: dict[str, float] | None = None) -> float:
        """How much faster ``gpu_type`` trains than V100.

        ``extra`` (the config's factors) wins; otherwise, for a measured type,
        the geometric mean of its single-GPU ratios to V100 over the table.
        """
        if extra and gpu_type in extra:
            return extra[gpu_type]
        if gpu_type == "v100":
            return 1.0
        return _geomean_ratio(self, gpu_type)

    def consolidated(self, job_type: str, n_gpus: int, gpu_type: str,
                     extra_speedups: dict[str, float] | None = None) -> float:
        """Steps/s of ``job_type`` on ``n_gpus`` GPUs of one server (or as close as it gets).

        The table's entry when it has one. Otherwise, linear in the GPU count
        from the largest positive entry at a smaller scale (a zero entry means
        the run did not fit). A GPU type the table lacks scales V100's figure.

        Raises:
            InputError: the GPU type is neither in the table nor given a speed-up.
        """
        table = self.isolated.get(gpu_type)
        if table is None:
            if not extra_speedups or gpu_type not in extra_speedups:
                raise InputError(
                    f"GPU type '{gpu_type}' is not in the throughput table "
                    f"({', '.join(self.gpu_types)}); give it a speed-up over v100 "
                    f"(PerfConfig.gpu_speedup_vs_v100) or a table of its own", field="gpu_type")
            return extra_speedups[gpu_type] * self.consolidated(job_type, n_gpus, "v100")
        exact = table.get((job_type, n_gpus))
        if exact is not None and exact > 0:
            return exact
        for scale in sorted((s for (j, s) in table if j == job_type and s < n_gpus), reverse=True):
            value = table[(job_type, scale)]
            if value > 0:
                return value * n_gpus / scale
        if gpu_type != "v100" and "v100" in self.isolated:
            # Not even one GPU of this type fits the job: borrow V100's shape.
            return self.speedup_vs_v100(gpu_type) * self.consolidated(job_type, n_gpus, "v100")
        raise InputError(f"no positive throughput for '{job_type}' on {gpu_type}", field="model")


def _geomean_ratio(table: ThroughputTable, gpu_type: str) -> float:
    ratios = []
    base = table.isolated.get("v100", {})
    for key, value in table.isolated.get(gpu_type, {}).items():
        if key[1] == 1 and value > 0 and base.get(key, 0.0) > 0:
            ratios.append(math.log(value / base[key]))
    if not ratios:
        raise InputError(f"cannot relate GPU type '{gpu_type}' to v100: no common entries",
                         field="gpu_type")
    return math.exp(sum(ratios) / len(ratios))


@lru_cache(maxsize=1)
def default_table() -> ThroughputTable:
    """The shipped measured table (read once per process)."""
    data = resources.files("rackwise.perf").joinpath("data/gavel_throughputs.json.gz")
    with data.open("rb") as raw, gzip.open(raw, "rt") as handle:
        return ThroughputTable.from_mapping(json.load(handle), "gavel_throughputs.json.gz")
