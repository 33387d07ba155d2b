"""Policies that break the engine contract on purpose, shared by the engine and backend tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rackwise.engine.view import ClusterView
from rackwise.policies.base import BasePolicy, Decisions, Start


@dataclass(kw_only=True)
class DoubleStarter(BasePolicy):
    """Starts the first pending job twice in one decision, on different free GPUs."""

    name: ClassVar[str] = "double-starter"

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        if not view.pending:
            return Decisions()
        state = next(iter(view.pending.values()))
        free = [g for g in range(view.topology.n_gpus) if view.owner_of(g) is None]
        n = state.n_gpus
        return Decisions(start=(Start(state.job_id, tuple(free[:n])), Start(state.job_id, tuple(free[n:2 * n]))))
