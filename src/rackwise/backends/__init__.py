"""Engines that run the policy loop against a cluster manager (see `base.serve`).

`fake.FakeBackend` replays the simulator in process; `slurm.SlurmBackend`
drives a Slurm cluster. Importing this package imports neither.
"""

from __future__ import annotations

from rackwise.backends.base import (
    Backend,
    BackendError,
    DecisionRecord,
    Outcome,
    ServeResult,
    ServeStuckError,
    Snapshot,
    serve,
)
from rackwise.engine.checks import check_decisions

__all__ = ["Backend", "BackendError", "DecisionRecord", "Outcome", "ServeResult",
           "ServeStuckError", "Snapshot", "check_decisions", "serve"]
