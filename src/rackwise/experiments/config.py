"""The experiment file: a grid of runs written as YAML.

An experiment names the axes of a grid; every combination is one run (a
*cell*). Example::

    name: delay
    perf: network
    seeds: [0, 1]
    loads: [1.0, 2.0]                 # arrival-rate factors (see below)
    baseline: fifo                    # the policy label tables compare against
    policies:
      - fifo
      - {label: fifo-ff, policy: fifo, params: {placement: first-fit}}
      - {policy: marl, optional: true}   # skipped, with the reason, if not installed
    workloads:
      - {label: philly, trace: philly_2017, start_s: 4055952, first_n: 1000}
    clusters:
      - {label: normal, nodes: 16, gpus_per_node: 8, nodes_per_rack: 4}
      - {label: congested, spec: clusters/congested.yaml}
    claims:                           # optional; see `rackwise.experiments.claims`
      - {paper: Dally, statement: lower avg JCT, policy: fifo-ff, baseline: fifo}

A load of ``x`` divides every gap between submissions by ``x``: the same jobs
arrive ``x`` times as fast (1 = as recorded). Relative paths (cluster specs,
trace files, column mappings) are read from the experiment file's folder.
Unknown keys, names and values raise `InputError`/`UnknownNameError` naming
the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rackwise.errors import InputError, UnknownNameError, parse_error, suggest
from rackwise.experiments.claims import Claim
from rackwise.run import PERF_MODELS, ClusterConfig, WorkloadConfig


class PolicyEntry(BaseModel):
    """One policy of the grid: a registered name, its parameters and a label for tables."""

    model_config = ConfigDict(extra="forbid")
    policy: str
    label: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    # An optional policy that is not registered is skipped instead of refused.
    optional: bool = False

    @model_validator(mode="after")
    def _default_label(self) -> PolicyEntry:
        if not self.label:
            self.label = self.policy
        return self


class WorkloadEntry(WorkloadConfig):
    """A workload of the grid: `WorkloadConfig` plus a label.

    Oversized jobs are dropped by default here, since one grid may hold
    clusters of several sizes.
    """

    label: str = ""
    skip_oversized: bool = True

    @model_validator(mode="after")
    def _default_label(self) -> WorkloadEntry:
        if not self.label:
            self.label = self.trace or (self.file.stem if self.file else "workload")
        return self

    def run_config(self) -> WorkloadConfig:
        return WorkloadConfig(**self.model_dump(exclude={"label"}))


class ClusterEntry(ClusterConfig):
    """A cluster of the grid: `ClusterConfig` plus a label."""

    label: str = ""

    @model_validator(mode="after")
    def _default_label(self) -> ClusterEntry:
        if not self.label:
            self.label = (self.spec.stem if self.spec is not None
                          else f"{self.nodes}x{self.gpus_per_node}-{self.gpu_type}")
        return self

    def run_config(self) -> ClusterConfig:
        return ClusterConfig(**self.model_dump(exclude={"label"}))


class Experiment(BaseModel):
    """A grid: policies x workloads x clusters x loads x seeds."""

    model_config = ConfigDict(extra="forbid")
    name: str = "experiment"
    description: str = ""
    policies: list[PolicyEntry] = Field(min_length=1)
    workloads: list[WorkloadEntry] = Field(min_length=1)
    clusters: list[ClusterEntry] = Field(default_factory=lambda: [ClusterEntry()], min_length=1)
    loads: list[float] = Field(default_factory=lambda: [1.0], min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    perf: str = "network"
    perf_params: dict[str, Any] = Field(default_factory=dict)
    baseline: str | None = None  # a policy label that tables compare against
    claims: list[Claim] = Field(default_factory=list)  # see `rackwise.experiments.claims`

    @field_validator("policies", mode="before")
    @classmethod
    def _names_to_entries(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"policy": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("loads")
    @classmethod
    def _positive_loads(cls, value: list[float]) -> list[float]:
        for load in value:
            if not load > 0:
                raise ValueError(f"every load must be > 0, got {load}")
        return value

    @model_validator(mode="after")
    def _unique_labels(self) -> Experiment:
        for axis in ("policies", "workloads", "clusters"):
            labels = [entry.label for entry in getattr(self, axis)]
            twice = sorted({label for label in labels if labels.count(label) > 1})
            if twice:
                raise ValueError(f"{axis}: label '{twice[0]}' is used twice; give each a label")
        if any(entry.load != 1.0 for entry in self.workloads):
            raise ValueError("set the load with the top-level 'loads' axis, not per workload")
        for axis in ("loads", "seeds"):
            values = getattr(self, axis)
            if len(set(values)) != len(values):
                raise ValueError(f"{axis}: repeated values {values}")
        labels = [p.label for p in self.policies]
        if self.baseline is not None and self.baseline not in labels:
            raise ValueError(f"baseline '{self.baseline}' is not one of the policy labels")
        for index, claim in enumerate(self.claims):
            for side in ("policy", "baseline"):
                if getattr(claim, side) not in labels:
                    raise ValueError(f"claims.{index}.{side}: '{getattr(claim, side)}' is not "
                                     f"one of the policy labels")
            grid: list[tuple[str, list[Any], list[Any]]] = [
                ("workloads", claim.workloads or [], [w.label for w in self.workloads]),
                ("clusters", claim.clusters or [], [c.label for c in self.clusters]),
                ("loads", claim.loads or [], self.loads)]
            for axis, chosen, known in grid:
                unknown = [value for value in chosen if value not in known]
                if unknown:
                    raise ValueError(f"claims.{index}.{axis}: {unknown[0]!r} is not in the grid")
        return self


def _resolve(path: Path | None, folder: Path) -> Path | None:
    if path is None or path.is_absolute():
        return path
    return folder / path


def parse_experiment(data: Any, source: str, folder: Path) -> Experiment:
    """Validate ``data`` (a parsed YAML mapping) as an experiment.

    Args:
        data: The mapping.
        source: File name used in error messages.
        folder: Folder that relative paths are read from.

    Raises:
        InputError: naming ``source`` and the offending field.
        UnknownNameError: an unknown performance model or trace.
    """
    if not isinstance(data, dict):
        raise InputError("expected a mapping at the top level", source=source)
    try:
        experiment = Experiment.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or None
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        raise InputError(message, source=source, field=field) from None
    for entry in experiment.workloads:
        entry.file = _resolve(entry.file, folder)
        entry.mapping = _resolve(entry.mapping, folder)
    for index, cluster in enumerate(experiment.clusters):
        cluster.spec = _resolve(cluster.spec, folder)
        if cluster.spec is not None and not cluster.spec.is_file():
            raise InputError(f"no such cluster spec file '{cluster.spec}'", source=source,
                             field=f"clusters.{index}.spec")
    _check_names(experiment, source)
    return experiment


def _check_names(experiment: Experiment, source: str) -> None:
    from rackwise import traces

    if experiment.perf not in PERF_MODELS:
        raise UnknownNameError(
            f"{source}, field 'perf': unknown performance model '{experiment.perf}'."
            f"{suggest(experiment.perf, list(PERF_MODELS))} Known: {', '.join(PERF_MODELS)}")
    known = traces.names()
    for index, entry in enumerate(experiment.workloads):
        if (entry.trace is None) == (entry.file is None):
            raise InputError("give either 'trace' or 'file'", source=source,
                             field=f"workloads.{index}")
        if entry.trace is not None and entry.trace not in known:
            raise UnknownNameError(
                f"{source}, field 'workloads.{index}.trace': unknown trace '{entry.trace}'."
                f"{suggest(entry.trace, list(known))} Known: {', '.join(known)}")


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment YAML file.

    Raises:
        InputError: the file is missing or malformed, or a key or value is wrong.
        UnknownNameError: an unknown performance model or trace.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("no such experiment file", source=str(path))
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {str(exc).splitlines()[0]}", source=str(path)) from None
    except yaml.YAMLError as exc:
        raise parse_error(exc, str(path)) from None
    experiment = parse_experiment(data, str(path), path.parent)
    if "name" not in data:
        experiment.name = path.stem
    return experiment
