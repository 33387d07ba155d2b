"""Tiresias-L: 2D-LAS over discretised attained service (baselines.md, A.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.policies.base import BasePolicy, Decisions
from rackwise.policies.parts.las_queues import LasQueues
from rackwise.policies.parts.ordering import by_width
from rackwise.policies.parts.placement import get_placement
from rackwise.workload.job import Job


@dataclass(kw_only=True)
class Tiresias(BasePolicy):
    """Multi-level feedback queues over attained service, in GPU-seconds.

    Queue i (0 = Q1, the highest) holds jobs whose service since they last
    entered Q1 lies in ``[limit[i-1], limit[i])``. A job enters Q1 on arrival
    and moves down one queue the instant its service reaches its queue's
    limit. Queues have strict priority; within one, jobs run in the order
    they entered it (then by submit time, then job id). The best-ranked jobs
    that fit run, with no head-of-line blocking, and lower-ranked running
    jobs are preempted when a better-ranked one cannot be placed otherwise
    (`preempt_to_order`).

    Promotion against starvation follows the reference simulator: only a
    pending job outside Q1 that has run since it last entered Q1 is
    promoted, once its waiting time reaches ``promote_knob`` times its run
    time (wall seconds) since then. Waiting counts from its first start
    after entering Q1, so time queued before that first start does not
    count. A promoted job joins the back of Q1 with service and run time
    reset, i.e. a full Q1 quantum. A job preempted when already eligible is
    promoted at the next event.

    Within a queue, running jobs rank ahead of pending ones (the reference
    simulator moves pending jobs behind running ones at every event), so a
    job is preempted only by one from a higher queue. Without that rule a
    demoted job would be preempted by every earlier entrant of its new queue
    and the cluster would churn; ``running_first=False`` keeps the pure
    entry order for comparison.

    The policy asks to be woken at a demotion only when a pending job would
    then rank ahead of the demoted one; any other demotion changes no
    decision, so it is applied at the next event, at its own instant and in
    the same order (the records are those of waking at every demotion).

    Args:
        queue_limits_gpu_s: Upper service limit of each queue but the last,
            strictly increasing (K = len + 1 queues; ``()`` is FIFO).
        promote_knob: PROMOTEKNOB; ``None`` turns promotion off.
        placement: A placement strategy name (see ``rackwise policies``).
        running_first: Rank running jobs ahead of pending ones in a queue.
    """

    name: ClassVar[str] = "tiresias"
    preempts: ClassVar[bool] = True
    queue_limits_gpu_s: tuple[float, ...] = (3_600.0,)
    promote_knob: float | None = 8.0
    placement: str = "consolidated"
    running_first: bool = True

    def queue_of(self, job_id: str) -> int | None:
        """The priority queue the job is in (0 is the highest), None if it has none."""
        return self.queues_.queue_of.get(job_id)

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        limits = tuple(float(limit) for limit in self.queue_limits_gpu_s)
        if any(not upper > lower for lower, upper in zip((0.0, *limits), limits)):
            raise InputError(f"must be positive and strictly increasing, got {limits}",
                             field="queue_limits_gpu_s")
        if self.promote_knob is not None and not self.promote_knob >= 0.0:
            raise InputError(f"must be >= 0 or None, got {self.promote_knob}", field="promote_knob")
        # Its `place` is where a started job goes: a policy that orders by Tiresias may
        # place by its own rule.
        self.queues_ = LasQueues(limits, self.promote_knob, self.running_first,
                                 by_width(get_placement(self.placement), self.rng_))

    def on_arrival(self, job: Job, now: float) -> None:
        self.queues_.arrive(job)

    def on_completion(self, job: Job, now: float) -> None:
        self.queues_.finish(job.job_id)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return self.queues_.decide(view, now)
