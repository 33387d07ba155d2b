"""Grouping runs: one group per policy (and per any other setting that varies).

Runs of one policy that differ only in their seed are repeats of one
experiment, and their figures are averaged. When a sweep also varies
something else (cluster size, a policy parameter, the trace), each
combination is its own group, labelled by what differs, so that runs of
different experiments are never averaged together.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rackwise.errors import InputError, suggest
from rackwise.report.load import Run

# Settings that never define an experiment: which policy is the group's name,
# and the seed is what repeats vary.
_NOT_A_VARIANT = ("policy", "seed")


@dataclass(frozen=True)
class Group:
    """Runs of one policy under one setting, sorted by seed.

    Attributes:
        policy: The policy name.
        variant: ``(setting, value)`` pairs, for settings that vary across the report.
        runs: The repeats, one per seed.
    """

    policy: str
    variant: tuple[tuple[str, str], ...]
    runs: tuple[Run, ...]

    @property
    def label(self) -> str:
        if not self.variant:
            return self.policy
        return f"{self.policy} ({', '.join(f'{k}={v}' for k, v in self.variant)})"

    @property
    def seeds(self) -> list[int]:
        return [run.seed for run in self.runs]


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted keys to JSON-encoded leaf values: ``{"cluster.nodes": "8", ...}``."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = json.dumps(value, sort_keys=True, default=str)
    return flat


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Group ``runs`` by policy and varying settings; groups sorted by setting, then policy.

    Raises:
        InputError: when two runs share a configuration and a seed (likely a
            stale copy; the message names both folders).
    """
    # A sweep's runs are told apart by the experiment's labels, not by raw settings.
    flat = [flatten(run.labels if run.labels is not None else run.config) for run in runs]
    keys = sorted({k for f in flat for k in f} - set(_NOT_A_VARIANT))
    # A setting splits groups only if it differs between runs of one policy;
    # one that differs only from policy to policy (its parameters) is part of
    # what the policy is.
    varying = [k for k in keys if any(
        len({f.get(k) for run, f in zip(runs, flat) if run.policy == policy}) > 1
        for policy in {run.policy for run in runs})]
    kept = _informative(varying, [(run.policy, f) for run, f in zip(runs, flat)])
    names = _short_names(kept)
    buckets: dict[tuple[str, tuple[tuple[str, str], ...]], list[Run]] = {}
    for run, f in zip(runs, flat):
        variant = tuple((names[k], _show(f.get(k))) for k in kept)
        buckets.setdefault((run.policy, variant), []).append(run)
    groups = []
    for (policy, variant), members in sorted(buckets.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        members.sort(key=lambda r: (r.seed, r.name))
        for a, b in itertools.pairwise(members):
            if a.seed == b.seed:
                raise InputError(f"two runs with the same configuration and seed {a.seed}: "
                                 f"'{a.name}' and '{b.name}'; remove one", source=b.name)
        groups.append(Group(policy, variant, tuple(members)))
    return groups


def _informative(keys: Sequence[str], runs: Sequence[tuple[str, dict[str, str]]]) -> list[str]:
    """The varying settings needed to tell groups apart, dropping those that follow others.

    A sweep over traces also varies each trace's start time; naming the trace
    says it all. Settings with text values are tried first, being the more
    readable names.
    """
    def readable_first(key: str) -> tuple[bool, str]:
        return (not all(f.get(key, '""').startswith('"') for _, f in runs), key)

    kept: list[str] = []
    n_blocks = len({policy for policy, _ in runs})
    for key in sorted(keys, key=readable_first):
        blocks = len({(policy, *(f.get(k) for k in [*kept, key])) for policy, f in runs})
        if blocks > n_blocks:
            kept.append(key)
            n_blocks = blocks
    return sorted(kept)


def _short_names(keys: Sequence[str]) -> dict[str, str]:
    # "workload.trace" reads as "trace" when no other kept setting ends alike.
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (tail if last.count(tail) == 1 else k) for k, tail in zip(keys, last)}


def _show(encoded: str | None) -> str:
    if encoded is None:
        return "unset"
    value = json.loads(encoded)
    return value if isinstance(value, str) else json.dumps(value)


def choose_baseline(groups: Iterable[Group], requested: str | None) -> str:
    """The baseline policy: the one asked for, else the sweep's, else fifo when present, else the first.

    Raises:
        InputError: when ``requested`` names no policy in the report.
    """
    policies = sorted({g.policy for g in groups})
    ordered = [g.policy for g in groups]
    if requested is not None:
        if requested not in policies:
            raise InputError(f"no runs of policy '{requested}' to compare against."
                             f"{suggest(requested, policies)} Present: {', '.join(policies)}",
                             field="--baseline")
        return requested
    named = {(run.labels or {}).get("baseline") for group in groups for run in group.runs}
    if len(named) == 1 and (sweep := named.pop()) in policies:
        return str(sweep)
    return "fifo" if "fifo" in policies else ordered[0]


def baseline_of(group: Group, groups: Iterable[Group], baseline: str) -> Group | None:
    """The baseline policy's group under the same setting as ``group``, if any."""
    for other in groups:
        if other.policy == baseline and other.variant == group.variant:
            return other
    return None
