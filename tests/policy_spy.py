"""`Spy`: a policy wrapper that keeps every decision it passes on, with its instant."""

from __future__ import annotations

from rackwise.engine.view import ClusterView
from rackwise.policies.base import Decisions, Policy, PolicyWrapper


class Spy(PolicyWrapper):
    """Passes calls through to a policy and keeps every decision it returned."""

    def __init__(self, inner: Policy) -> None:
        super().__init__(inner)
        self.decisions: list[tuple[float, Decisions]] = []

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        decisions = self.inner.schedule(view, now)
        self.decisions.append((now, decisions))
        return decisions
