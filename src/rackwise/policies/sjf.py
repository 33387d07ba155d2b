"""SJF: shortest job first by trace duration, never preempting (baselines.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.policies.base import BasePolicy, Decisions
from rackwise.policies.parts.ordering import RankedQueue, start_ranked
from rackwise.policies.parts.placement import get_placement
from rackwise.workload.job import Job

NOTHING = Decisions()


@dataclass(kw_only=True)
class Sjf(BasePolicy):
    """Non-preemptive shortest job first, ranked by the trace's duration (an oracle).

    Ties go to the earlier submission, then the smaller job id.

    Args:
        placement: A placement strategy name (see ``rackwise policies``).
        backfill: Let a longer job start when the shorter ones ahead of it
            cannot be placed. On by default: without it one wide short job
            that waits for GPUs idles the whole cluster behind it, which is
            rarely what anyone wants from SJF. There is no reservation, so
            a wide job can wait long under a stream of narrow ones.
    """

    name: ClassVar[str] = "sjf"
    needs_oracle: ClassVar[bool] = True
    placement: str = "consolidated"
    backfill: bool = True

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.queue_ = RankedQueue()
        self.arrived_: list[str] = []

    def on_arrival(self, job: Job, now: float) -> None:
        self.queue_.add(job.job_id, job.n_gpus, (job.duration_s, job.submit_time, job.job_id))
        self.arrived_.append(job.job_id)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        # A restarted driver announces jobs it finds already running: they are not queued.
        adopted = [job_id for job_id in self.arrived_ if job_id in view.running]
        for job_id in adopted:
            self.queue_.discard(job_id)
        self.arrived_ = []
        if view.n_free == 0 or not view.pending:
            return NOTHING
        place = get_placement(self.placement)
        starts = start_ranked(view, self.queue_, place, self.rng_, backfill=self.backfill)
        for start in starts:
            self.queue_.discard(start.job_id)
        return Decisions(start=tuple(starts)) if starts else NOTHING
