"""The MARL policy's parts (see ``docs/policies/marl.md``).

`features` turns the cluster and the agents' queues into observations,
`inference` runs the trained actor in numpy and `pair_terms` the learned
co-location slowdown model, `placement` picks GPUs around the server an
agent chose, `anchors` holds the fixed placement rules the agents are
measured against, and `checkpoint` saves and loads trained weights (one
ships in ``data/``). These need no torch. `encoder` (the hierarchical GNN,
GPU -> server -> rack -> datacenter, with the actor and critic) and
`interference` (the slowdown model's network and its training) need the
``rl`` extra, as does training, in `rackwise.rl`.

Importing this package imports no torch; the modules that need it say so
with `MissingExtraError` (`require`).
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
            f"'{module}' is not installed; training the MARL scheduler needs the rl extra: {INSTALL_HINT}"
        ) from None
