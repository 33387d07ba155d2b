"""Delay scheduling with one class for every job: ``consolidate-strict`` and ``philly-relax``.

The simplest parameterisations of the delay-scheduling engine
(`parts.delay_scheduling`): every job waits by the same timers, and nothing
is preempted. ``dally`` (`rackwise.policies.delay`) adds sensitivity
classes, preemption and auto-tuned timers. The ``spread`` baseline of
network_sensitive_delay.md §5 needs no class: it is
``make_policy("fifo", placement="first-fit")``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.policies.base import BasePolicy, Decisions
from rackwise.policies.parts.delay_parameters import DelayParameters
from rackwise.policies.parts.delay_scheduling import DelayScheduling
from rackwise.workload.job import Job


@dataclass(kw_only=True)
class OneClassDelay(DelayParameters, BasePolicy):
    """Delay scheduling in which every job waits by ``timer_table()["all"]``.

    Args:
        ordering: ``"fifo"`` or ``"las"`` (least attained service first).
        reserve_after_s: See `DelayParameters`; ``None`` (the default) never reserves.
    """

    def timer_table(self) -> dict[str, tuple[float, float]]:
        """Seconds every job waits at L0 and at L1 before relaxing."""
        raise NotImplementedError

    @property
    def delay(self) -> DelayScheduling:
        """The run's delay state: timers and waiting jobs."""
        return self.delay_

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.delay_ = DelayScheduling(self, self.timer_table())

    def on_arrival(self, job: Job, now: float) -> None:
        self.delay_.on_arrival(job)

    def on_completion(self, job: Job, now: float) -> None:
        self.delay_.on_completion(job)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return self.delay_.schedule(view, now)


@dataclass(kw_only=True)
class ConsolidateStrict(OneClassDelay):
    """Wait as long as it takes for the tightest level a job's size can reach.

    A job that fits a node only ever runs on one node; one that fits a rack
    only in one rack. Jobs that cannot start are skipped, so smaller jobs
    behind them go ahead (no head-of-line blocking).

    Args:
        ordering: ``"fifo"`` or ``"las"`` (least attained service first).
        reserve_after_s: See `DelayParameters`; ``None`` (the default) never reserves.
    """

    name: ClassVar[str] = "consolidate-strict"

    def timer_table(self) -> dict[str, tuple[float, float]]:
        return {"all": (math.inf, math.inf)}


@dataclass(kw_only=True)
class PhillyRelax(OneClassDelay):
    """One fixed locality timeout for every job, blind to sensitivity.

    A job waits ``timeout_s`` for its target level, then ``timeout_s`` more
    at each looser level, as a cluster scheduler that trades locality for
    queueing the same way for every job would.

    Args:
        timeout_s: Seconds of waiting per level before relaxing.
        ordering: ``"fifo"`` or ``"las"``.
        reserve_after_s: See `DelayParameters`.
    """

    name: ClassVar[str] = "philly-relax"
    timeout_s: float = 300.0

    def timer_table(self) -> dict[str, tuple[float, float]]:
        return {"all": (self.timeout_s, self.timeout_s)}
