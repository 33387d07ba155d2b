"""SRTF: shortest remaining time first, preemptive (baselines.md, the oracle beside Tiresias)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.policies.base import BasePolicy, Decisions
from rackwise.policies.parts.ordering import RankedQueue, by_width, preempt_ranked
from rackwise.policies.parts.placement import get_placement
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

NOTHING = Decisions()


def remaining_s(state: JobState, now: float) -> float:
    """Remaining iterations over the job's reference rate (total_iters / duration_s)."""
    job = state.job
    if job.total_iters <= 0.0 or job.duration_s <= 0.0:
        return 0.0
    return state.remaining_iters(now) * job.duration_s / job.total_iters


@dataclass(kw_only=True)
class Srtf(BasePolicy):
    """Preemptive shortest remaining time first (an oracle: it reads true job lengths).

    Every active job is ranked by its remaining time at its reference speed
    (ties: earlier submission, then job id); the best-ranked jobs that fit run,
    without head-of-line blocking, and a running job is preempted only when a
    better-ranked job cannot be placed otherwise (`preempt_to_order`).
    Remaining times only shrink while jobs run and do not change while they
    wait, so the order changes only at arrivals and completions: the policy
    needs no timers.

    Args:
        placement: A placement strategy name (see ``rackwise policies``).
    """

    name: ClassVar[str] = "srtf"
    preempts: ClassVar[bool] = True
    needs_oracle: ClassVar[bool] = True
    placement: str = "consolidated"

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.queue_ = RankedQueue()  # pending jobs, keyed by remaining time when they entered
        self.changed_ = False
        self.arrived_: list[str] = []

    def on_arrival(self, job: Job, now: float) -> None:
        self.queue_.add(job.job_id, job.n_gpus, (job.duration_s, job.submit_time, job.job_id))
        self.arrived_.append(job.job_id)
        self.changed_ = True

    def on_completion(self, job: Job, now: float) -> None:
        self.changed_ = True

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        # A restarted driver announces jobs it finds already running: they are not queued.
        for job_id in self.arrived_:
            if job_id in view.running:
                self.queue_.discard(job_id)
        self.arrived_ = []
        # Nothing arrived or finished: the last decision still stands.
        if not self.changed_ or not view.pending:
            return NOTHING
        self.changed_ = False
        ranked = sorted(
            (remaining_s(state, now), state.job.submit_time, job_id, state.job.n_gpus)
            for job_id, state in view.running.items()
        )
        keys = [(rem_s, submit_time, job_id) for rem_s, submit_time, job_id, _ in ranked]
        decisions = preempt_ranked(view, keys, [n_gpus for *_, n_gpus in ranked], self.queue_,
                                   by_width(get_placement(self.placement), self.rng_))
        for job_id in decisions.preempt:
            state = view.running[job_id]
            self.queue_.add(job_id, state.job.n_gpus,
                            (remaining_s(state, now), state.job.submit_time, job_id))
        for start in decisions.start:
            self.queue_.discard(start.job_id)
        return decisions
