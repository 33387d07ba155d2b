"""What every policy builds on: `BasePolicy`, and `PolicyWrapper` to watch one.

The contract itself (`Decisions`, `Start`, `Capabilities`, the `Policy`
protocol) lives in `rackwise.engine.contract` and is re-exported here, so a
policy file imports everything it needs from one place.

A policy is a dataclass of its parameters. Run state lives in attributes
ending in ``_``, set only in ``reset`` (so ``dataclasses.replace`` gives a
fresh, unstarted copy). Flags on the class say what it may ask for;
``capabilities`` gathers them (with any parameter, such as a round length)
into the one record engines read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rackwise.engine.contract import NOTHING, Capabilities, Decisions, Policy, Start
from rackwise.engine.view import ClusterView
from rackwise.workload.job import Job

__all__ = ["NOTHING", "BasePolicy", "Capabilities", "Decisions", "Policy", "PolicyWrapper", "Start"]


@dataclass(kw_only=True)
class BasePolicy:
    """No-op hooks and capability flags; subclasses implement ``schedule``.

    Class attributes (see `Capabilities` for their meaning):
        name: Registry key.
        preempts: The policy may return preemptions.
        needs_oracle: The policy reads true job durations or iterations.
        needs_extra: The optional install the policy needs, if any.
        fractional_gpus: The policy can run jobs that ask for a share of one GPU.
    """

    name: ClassVar[str] = "base"
    preempts: ClassVar[bool] = False
    needs_oracle: ClassVar[bool] = False
    needs_extra: ClassVar[str | None] = None
    fractional_gpus: ClassVar[bool] = False

    @property
    def capabilities(self) -> Capabilities:
        """The class flags as one record; round-based or forking policies add theirs."""
        return Capabilities(preempts=self.preempts, needs_oracle=self.needs_oracle,
                            needs_extra=self.needs_extra, fractional_gpus=self.fractional_gpus)

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        """Start a run: build run state (attributes ending in ``_``)."""
        self.rng_ = rng

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        raise NotImplementedError

    def on_arrival(self, job: Job, now: float) -> None:
        """A job entered the queue (called before ``schedule`` at the same instant)."""

    def on_completion(self, job: Job, now: float) -> None:
        """A job finished and released its GPUs (called before ``schedule``)."""

    def on_history(self, jobs: Sequence[Job]) -> None:
        """Jobs finished before the run began (ignored unless the policy learns from history)."""


class PolicyWrapper:
    """Stands in for a policy and passes every hook through to it.

    Subclasses watch or change what ``schedule`` returns (a forecast notes
    each start, a test checks the view is left alone). An engine sees the
    inner policy's name and capabilities.
    """

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        self.inner.reset(view, rng)

    def on_arrival(self, job: Job, now: float) -> None:
        self.inner.on_arrival(job, now)

    def on_completion(self, job: Job, now: float) -> None:
        self.inner.on_completion(job, now)

    def on_history(self, jobs: Sequence[Job]) -> None:
        self.inner.on_history(jobs)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return self.inner.schedule(view, now)
