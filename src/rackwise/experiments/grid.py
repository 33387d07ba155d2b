"""Expanding an experiment into cells: one run per policy x workload x cluster x load x seed.

A cell's *key* is a hash of what decides its result (policy and
parameters, workload filters, cluster, load, seed, performance model) and
of the bytes of any file it reads, never of labels or absolute paths: the
same run gets the same key in any checkout, and editing a cluster spec
invalidates the cells that used it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from rackwise.errors import InputError, MissingExtraError, RackwiseError, UnknownNameError
from rackwise.experiments.config import Experiment
from rackwise.run import ClusterConfig, RunConfig, WorkloadConfig


@dataclass(frozen=True)
class Cell:
    """One run of a grid, with the labels its row is shown under."""

    experiment: str
    policy_label: str
    workload_label: str
    cluster_label: str
    config: RunConfig
    skip_reason: str | None = None  # set when the policy cannot run here
    baseline: str | None = None  # the experiment's baseline label, for reports
    key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", cell_key(self.config))

    @property
    def load(self) -> float:
        return self.config.workload.load

    def columns(self) -> dict[str, Any]:
        """The configuration columns of this cell's row."""
        workload = self.config.workload
        return {
            "experiment": self.experiment,
            "policy": self.policy_label,
            "policy_name": self.config.policy,
            "policy_params": json.dumps(self.config.policy_params, sort_keys=True),
            "workload": self.workload_label,
            "trace": workload.trace or (workload.file.name if workload.file else ""),
            "cluster": self.cluster_label,
            "load": workload.load,
            "seed": self.config.seed,
            "perf": self.config.perf,
            "key": self.key,
            "baseline": self.baseline or "",
        }


@cache
def file_digest(path: Path) -> str:
    """A short content hash of a file a config names (cached per process)."""
    try:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return f"missing:{path.name}"


def cell_identity(config: RunConfig) -> dict[str, Any]:
    """What decides a run's result, as JSON-ready data with files replaced by their digests."""
    data = config.model_dump(mode="json")
    for section, names in (("workload", ("file", "mapping")), ("cluster", ("spec",))):
        for name in names:
            value = getattr(getattr(config, section), name)
            if value is not None:
                data[section][name] = file_digest(Path(value).resolve())
    return data


def cell_key(config: RunConfig) -> str:
    """A stable 16-hex-digit hash of `cell_identity`."""
    text = json.dumps(cell_identity(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def policy_skip_reasons(experiment: Experiment, source: str) -> dict[str, str]:
    """Policy label -> why it cannot run on this installation; runnable policies are absent.

    A registered policy whose extra is missing is skipped; an unregistered
    one is skipped only if marked ``optional``.

    Raises:
        UnknownNameError: an unregistered policy not marked optional.
        InputError: a parameter a policy does not take or of the wrong type.
    """
    from rackwise.policies.registry import make_policy

    reasons: dict[str, str] = {}
    for index, entry in enumerate(experiment.policies):
        try:
            make_policy(entry.policy, **entry.params)
        except UnknownNameError as exc:
            if not entry.optional:
                raise UnknownNameError(f"{source}, field 'policies.{index}.policy': {exc}") from None
            reasons[entry.label] = f"policy '{entry.policy}' is not installed"
        except MissingExtraError as exc:
            reasons[entry.label] = str(exc)
        except InputError as exc:
            raise InputError(str(exc), source=source, field=f"policies.{index}.params") from None
        except ImportError as exc:  # a policy module whose dependency is absent
            reasons[entry.label] = f"cannot import policy '{entry.policy}': {exc}"
    return reasons


def expand(experiment: Experiment, skip_reasons: dict[str, str] | None = None) -> list[Cell]:
    """Every cell, in a fixed order: workload, cluster, load, policy, seed (innermost)."""
    skip_reasons = skip_reasons or {}
    cells = []
    for workload in experiment.workloads:
        for cluster in experiment.clusters:
            for load in experiment.loads:
                for policy in experiment.policies:
                    for seed in experiment.seeds:
                        config = RunConfig(
                            workload=WorkloadConfig(**{**workload.run_config().model_dump(),
                                                       "load": load}),
                            cluster=cluster.run_config(), policy=policy.policy,
                            policy_params=dict(policy.params), perf=experiment.perf,
                            perf_params=dict(experiment.perf_params), seed=seed)
                        cells.append(Cell(experiment.name, policy.label, workload.label,
                                          cluster.label, config, skip_reasons.get(policy.label),
                                          baseline=experiment.baseline))
    return cells


def check_inputs(experiment: Experiment, source: str) -> None:
    """Build every cluster and read every workload once, so bad input fails before any run.

    Raises:
        InputError: naming ``source`` and the workload or cluster at fault.
    """
    from rackwise.run import build_cluster, load_workload

    clusters = []
    for index, cluster in enumerate(experiment.clusters):
        try:
            clusters.append(build_cluster(ClusterConfig(**cluster.run_config().model_dump())))
        except RackwiseError as exc:
            raise InputError(str(exc), source=source, field=f"clusters.{index}") from None
    for index, entry in enumerate(experiment.workloads):
        try:
            workload = load_workload(entry.run_config())
            for topology in clusters:
                kept = workload.drop_oversized(topology.n_gpus) if entry.skip_oversized else workload
                kept.check_fits(topology)
                if not len(kept):
                    raise InputError(f"no jobs left on cluster '{topology.name}'")
        except RackwiseError as exc:
            raise InputError(str(exc), source=source, field=f"workloads.{index}") from None


def plan(experiment: Experiment, source: str) -> list[Cell]:
    """Check an experiment's names and inputs, then expand it; nothing runs or is written.

    Raises:
        InputError, UnknownNameError: naming ``source`` and the field at fault.
    """
    reasons = policy_skip_reasons(experiment, source)
    check_inputs(experiment, source)
    return expand(experiment, reasons)
