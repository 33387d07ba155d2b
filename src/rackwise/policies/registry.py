"""Every policy by name, as a ``"module:Class"`` string imported only when asked for.

Importing this module imports no policy, so listing names never pulls in a
solver or torch. Third-party packages add policies through the
``rackwise.policies`` entry-point group.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from rackwise.errors import InputError, MissingExtraError, UnknownNameError, suggest
from rackwise.policies.base import BasePolicy

POLICIES: dict[str, str] = {
    "fifo": "rackwise.policies.fifo:Fifo",
    "fifo-backfill": "rackwise.policies.fifo:FifoBackfill",
    "gavel": "rackwise.policies.gavel:Gavel",
    "hadar": "rackwise.policies.hadar:Hadar",
    "hadare": "rackwise.policies.hadare:HadarE",
    "dally": "rackwise.policies.delay:Dally",
    "consolidate-strict": "rackwise.policies.consolidation:ConsolidateStrict",
    "philly-relax": "rackwise.policies.consolidation:PhillyRelax",
    "sjf": "rackwise.policies.sjf:Sjf",
    "srtf": "rackwise.policies.srtf:Srtf",
    "tiresias": "rackwise.policies.tiresias:Tiresias",
    "asrpt": "rackwise.policies.asrpt:Asrpt",
    "asrpt-oracle": "rackwise.policies.asrpt:AsrptOracle",
    "combined": "rackwise.policies.combined:Combined",
    "marl": "rackwise.policies.marl:Marl",
}


def all_policies() -> dict[str, str]:
    """Built-in policies plus those registered by other packages; duplicates are refused."""
    found = dict(POLICIES)
    for entry in entry_points(group="rackwise.policies"):
        if entry.name in found and found[entry.name] != entry.value:
            raise UnknownNameError(
                f"policy name '{entry.name}' is registered twice ({found[entry.name]} and {entry.value})")
        found[entry.name] = entry.value
    return found


def policy_class(name: str) -> type[BasePolicy]:
    """The class registered under ``name``.

    Raises:
        UnknownNameError: with the known names and a close match.
        MissingExtraError: when the policy needs an optional extra.
    """
    known = all_policies()
    if name not in known:
        raise UnknownNameError(
            f"unknown policy '{name}'.{suggest(name, list(known))} Known: {', '.join(sorted(known))}")
    module_name, _, attr = known[name].partition(":")
    module = importlib.import_module(module_name)
    cls: type[BasePolicy] = getattr(module, attr)
    if cls.name != name:
        raise UnknownNameError(f"policy registered as '{name}' calls itself '{cls.name}'")
    return cls


def make_policy(name: str, **params: Any) -> BasePolicy:
    """Build a policy from its name and parameters, validating the parameters.

    Raises:
        InputError: naming the parameter that is unknown or of the wrong type.
    """
    cls = policy_class(name)
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(cls).validate_python(params)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or None
        raise InputError(f"policy '{name}': {error['msg']}", field=field) from None


__all__ = ["POLICIES", "MissingExtraError", "all_policies", "make_policy", "policy_class"]
