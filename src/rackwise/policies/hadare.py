"""HadarE: Hadar plus job forking onto idle nodes (papers/hadar.md §3.7).

rackwise's implementation of the published design. After Hadar has placed
every job's primary copy for the round, nodes with GPUs left over receive
extra copies of running jobs: each copy is a full training process of the
job on its own node, all copies of a job train at once, and at every round
boundary their models are averaged (weighted by the steps each made).

The forking itself, its parameters and its cost model are
`parts.forking`'s (``combined`` forks the same way): a forked job makes its
first copy's rate plus ``copy_efficiency`` of each extra copy's, less the
share of each round spent averaging, ``(2 x model bytes / bandwidth +
restart) / round``. Every copy holds the job's full GPU count, so a copy
fits only a node with that many free GPUs ([R]; the digest also allows
smaller copies), except that a job wider than every node may take whole
nodes its other copies do not use (``wide_copies``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.policies.base import BasePolicy, Capabilities, Decisions
from rackwise.policies.parts.fork_parameters import ForkParameters, check_fork_parameters
from rackwise.policies.parts.forking import (
    MODEL_BYTES,
    Forkable,
    add_copies,
    fork_overhead_frac,
    merge_models,
    model_bytes,
    widest_of_type,
)
from rackwise.policies.parts.hadar_parameters import HadarParameters
from rackwise.policies.parts.hadar_planning import HadarPlanner, Layout
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

__all__ = ["MODEL_BYTES", "HadarE", "merge_models", "model_bytes"]


@dataclass(kw_only=True)
class HadarE(ForkParameters, HadarParameters, BasePolicy):
    """Hadar with forking: extra copies of running jobs fill nodes left idle.

    Takes all of Hadar's parameters (`HadarParameters`) and the forking
    ones (`parts.fork_parameters.ForkParameters`: ``max_copies``,
    ``sync_bandwidth_gbps``, ``restart_s``, ``default_model_bytes``,
    ``copy_efficiency``, ``wide_copies``); copies are averaged every ``round_s``.
    """

    name: ClassVar[str] = "hadare"
    preempts: ClassVar[bool] = True
    needs_oracle: ClassVar[bool] = True  # Hadar's plans use each job's true iterations

    def __post_init__(self) -> None:
        super().__post_init__()
        check_fork_parameters(self)

    @property
    def capabilities(self) -> Capabilities:
        return replace(super().capabilities, round_s=self.round_s, forks=True,
                       fork_overhead=self.fork_overhead_frac, copy_efficiency=self.copy_efficiency)

    @property
    def planner(self) -> HadarPlanner:
        """The run's planning state."""
        return self.planner_

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.planner_ = HadarPlanner(self, view, add_copies=self._add_copies)
        self._widest_of_type = widest_of_type([n.n_gpus for n in view.topology.nodes],
                                              self.planner_.node_type)

    def on_completion(self, job: Job, now: float) -> None:
        self.planner_.forget(job.job_id)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return self.planner_.schedule(view, now)

    def fork_overhead_frac(self, job: Job) -> float:
        """Share of a forked job's wall time spent averaging its copies (once a round)."""
        return fork_overhead_frac(job, self, self.round_s)

    def _add_copies(self, view: ClusterView, active: list[JobState],
                    layouts: dict[str, Layout]) -> None:
        """The planner's `AddCopies`: one more copy of each running job per pass, in planning order."""
        book = self.planner_.used_book(layouts)
        cap = self.max_copies if self.max_copies is not None else view.topology.n_nodes
        jobs = [Forkable(s.job_id, s.job.n_gpus, self.planner_.job_types(s.job_id).tiers)
                for s in active if s.job_id in layouts]
        add_copies(book, jobs, layouts, self, cap, self._widest_of_type)
