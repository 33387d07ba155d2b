"""A-SRPT: prediction-assisted online scheduling of mixed-parallel training jobs.

rackwise's implementation of the published design (Luo, Liu, Lee, Shroff,
arXiv 2501.05563); every choice the abstract leaves open is a named
parameter (`parts.asrpt_parameters.AsrptParameters`), explained in
docs/policies/asrpt.md. In short:

1. each job is a graph of GPU workers and the bytes they exchange, placed
   so heavy edges stay inside a server (`rackwise.perf.graph_placement`);
2. each job's size is predicted from the recent sizes of its class (virtual
   cluster and GPU count), counting the class's running jobs as lower bounds
   (`parts.class_sizes`; a random forest, `parts.predictor`, is the option);
3. the cluster is mapped to one virtual machine of capacity G GPUs running
   preemptive SRPT on predicted work (each job ranked by the Gittins rank of
   its predicted size given the service it has had), and the machine's order
   decides which jobs run and which are preempted (`parts.predicted_srpt`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from rackwise.cluster.allocation import Allocation, TentativeAllocation
from rackwise.engine.view import ClusterView
from rackwise.perf.graph_placement import GraphPlacement
from rackwise.perf.job_graph import GraphKind, JobGraph, graph_kind
from rackwise.policies.base import BasePolicy, Capabilities, Decisions
from rackwise.policies.parts.asrpt_parameters import AsrptParameters
from rackwise.policies.parts.predicted_srpt import (
    PredictedSrpt,
    asrpt_placement,
    check_asrpt_parameters,
    predictor_capabilities,
)
from rackwise.workload.job import Job


@dataclass(kw_only=True)
class Asrpt(AsrptParameters, BasePolicy):
    """Virtual single-machine SRPT on predicted work, with graph placement.

    Parameters: see `AsrptParameters`. After ``reset``, ``srpt`` holds the
    run's predictions, virtual machine and logs.
    """

    name: ClassVar[str] = "asrpt"
    preempts: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_asrpt_parameters(self)

    @property
    def srpt(self) -> PredictedSrpt:
        """The run's ordering state: predictions, virtual machine, prediction and placement logs."""
        return self.srpt_

    @property
    def capabilities(self) -> Capabilities:
        return predictor_capabilities(self, super().capabilities)

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.srpt_ = PredictedSrpt(self, self._place, view, rng)
        self.ideal_placements_: dict[GraphKind, GraphPlacement | None] = {}

    def on_arrival(self, job: Job, now: float) -> None:
        self.srpt_.on_arrival(job)

    def on_completion(self, job: Job, now: float) -> None:
        self.srpt_.on_completion(job, now)

    def on_history(self, jobs: Sequence[Job]) -> None:
        self.srpt_.on_history(jobs)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return self.srpt_.schedule(view, now)

    def _place(self, view: ClusterView, free: Allocation | TentativeAllocation, job: Job,
               graph: JobGraph, now: float, *, ideal: bool) -> GraphPlacement | None:
        if not (ideal and self.placement == "graph"):
            return asrpt_placement(free, job, graph, self, self.rng_)
        # The partitioner on the empty cluster: its answer follows from the job's graph alone.
        kind = graph_kind(job)
        if kind not in self.ideal_placements_:
            self.ideal_placements_[kind] = asrpt_placement(free, job, graph, self, self.rng_)
        return self.ideal_placements_[kind]


@dataclass(kw_only=True)
class AsrptOracle(Asrpt):
    """A-SRPT told every job's true iterations (``asrpt`` with ``predictor="oracle"``)."""

    name: ClassVar[str] = "asrpt-oracle"
    needs_oracle: ClassVar[bool] = True

    predictor: Literal["forest", "median", "survival", "oracle", "class-oracle"] = "oracle"
    rank: Literal["vm", "gittins", "expected"] = "vm"  # exact sizes need no distribution
