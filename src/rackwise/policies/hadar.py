"""Hadar: task-level heterogeneity-aware online primal-dual scheduling (papers/hadar.md).

rackwise's implementation of the published design; the papers' bodies were
not available, so the algorithm is the digest's reconstruction and every
open choice is a parameter (`parts.hadar_parameters.HadarParameters`). Every
``round_s`` seconds all active jobs are re-planned (§3.4b), one after the
other: first the jobs that bound the total time (the longest remaining),
then the rest by utility per GPU-slot, short jobs first (``order``). GPU
prices start at their floor, each job takes the plan (which GPUs now,
possibly of several types, and in which future slots) that maximises its
utility minus the priced GPUs, and is run now only if that payoff is
positive and the plan uses the current slot. Taken GPUs become dearer for
the jobs after it. The planning is `parts.hadar_planning`'s, shared with ``hadare``.

Throughput of a job whose tasks sit on different GPU types: the planner
assumes the ``progress_model`` rule (``bottleneck``: the slowest type's
job rate times ``spread_factor``; ``additive``: each task adds its type's
per-task share). In simulation the performance model decides the real rate.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.policies.base import BasePolicy, Capabilities, Decisions
from rackwise.policies.parts.hadar_parameters import HadarParameters
from rackwise.policies.parts.hadar_planning import HadarPlanner
from rackwise.workload.job import Job


@dataclass(kw_only=True)
class Hadar(HadarParameters, BasePolicy):
    """Per-round primal-dual planning with task-level placement across GPU types.

    Parameters: see `HadarParameters`. After ``reset``, ``planner`` holds the run's plans.
    """

    name: ClassVar[str] = "hadar"
    preempts: ClassVar[bool] = True
    needs_oracle: ClassVar[bool] = True  # plans with each job's true iterations (total and remaining)

    @property
    def capabilities(self) -> Capabilities:
        return replace(super().capabilities, round_s=self.round_s)

    @property
    def planner(self) -> HadarPlanner:
        """The run's planning state."""
        return self.planner_

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.planner_ = HadarPlanner(self, view)

    def on_completion(self, job: Job, now: float) -> None:
        self.planner_.forget(job.job_id)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return self.planner_.schedule(view, now)
