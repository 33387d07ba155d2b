"""Multi-agent reinforcement learning for job placement (the ``rl`` extra).

rackwise's implementation of the published design of multi-agent graph RL
scheduling (see ``docs/policies/marl.md``): several scheduler agents share
one cluster, a hierarchical GNN encodes GPU -> server -> rack -> datacenter,
a learned interference model shapes the reward, and MAPPO trains the agents.

Importing this package imports neither torch nor gymnasium; the modules that
need them say so with `MissingExtraError` (`require`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from rackwise.errors import MissingExtraError

INSTALL_HINT = "pip install 'rackwise[rl]'"


def require(module: str) -> ModuleType:
    """Import an optional dependency of the ``rl`` extra, or raise a one-line `MissingExtraError`."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(
            f"'{module}' is not installed; the MARL scheduler needs the rl extra: {INSTALL_HINT}"
        ) from None
