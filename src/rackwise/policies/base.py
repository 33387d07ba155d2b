"""The policy contract: read a `ClusterView`, answer with `Decisions`.

An engine (the simulator or a real backend) calls ``schedule(view, now)``
after every batch of events at one instant, applies the decisions it gets
back, and rejects an invalid one with `InvalidDecisionError`.

A policy is a dataclass of its parameters. Run state lives in attributes
ending in ``_``, set only in ``reset`` (so ``dataclasses.replace`` gives a
fresh, unstarted copy). Capability flags on the class tell engines and the
conformance checks what to expect.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from rackwise.cluster.view import ClusterView
from rackwise.workload.job import Job


@dataclass(frozen=True, slots=True)
class Start:
    """Run a pending job on exactly these GPUs (its requested count of them).

    ``copies > 1`` forks the job: ``gpu_ids`` then holds ``copies`` blocks of
    ``n_gpus`` GPUs, one block per copy, and the copies train at once and
    share one progress counter (see `rackwise.perf.base.forked_rate`).

    ``beside`` names a running job whose GPUs this one shares (space
    sharing): ``gpu_ids`` are then exactly that job's GPUs, and both run at
    the paired speed the performance model measures (`SharedGpus`). A GPU
    is never shared by more than two jobs; only the simulator runs pairs.
    """

    job_id: str
    gpu_ids: tuple[int, ...]
    copies: int = 1
    beside: str | None = None


@dataclass(frozen=True, slots=True)
class Decisions:
    """What a policy wants done now.

    Attributes:
        start: Jobs to start (or resume) and where.
        preempt: Running jobs to stop and put back in the queue. A job both
            preempted and started in one decision is migrated.
        wake_at: Ask to be called again at this time even if nothing happens.
        unplaced: Pending jobs the policy chose not to start, with a reason
            (for logs and forecasts; the engine does not act on it).
    """

    start: tuple[Start, ...] = ()
    preempt: tuple[str, ...] = ()
    wake_at: float | None = None
    unplaced: Mapping[str, str] = field(default_factory=dict)


NOTHING = Decisions()


@runtime_checkable
class Policy(Protocol):
    """The one interface every engine knows."""

    name: ClassVar[str]

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None: ...

    def schedule(self, view: ClusterView, now: float) -> Decisions: ...

    def on_arrival(self, job: Job, now: float) -> None: ...

    def on_completion(self, job: Job, now: float) -> None: ...


@dataclass(kw_only=True)
class BasePolicy:
    """No-op hooks and capability flags; subclasses implement ``schedule``.

    Class attributes:
        name: Registry key.
        preempts: The policy may return preemptions.
        needs_oracle: The policy reads true job durations/iterations, which a
            real cluster does not know in advance.
        round_s: If set, the engine calls ``schedule`` at least every round_s
            seconds while jobs are active (round-based policies).
    """

    name: ClassVar[str] = "base"
    preempts: ClassVar[bool] = False
    needs_oracle: ClassVar[bool] = False
    round_s: ClassVar[float | None] = None

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


class PolicyWrapper:
    """Stands in for a policy and passes every hook through to it.

    Subclasses watch or change what ``schedule`` returns (a forecast notes
    each start, a test checks the view is left alone). The engine reads
    ``name``, ``round_s`` and ``fork_overhead_frac`` off the wrapper as it
    would off the policy.
    """

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.round_s = getattr(inner, "round_s", None)
        self.fork_overhead_frac = getattr(inner, "fork_overhead_frac", None)

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        self.inner.reset(view, rng)

    def on_arrival(self, job: Job, now: float) -> None:
        self.inner.on_arrival(job, now)

    def on_completion(self, job: Job, now: float) -> None:
        self.inner.on_completion(job, now)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return self.inner.schedule(view, now)
