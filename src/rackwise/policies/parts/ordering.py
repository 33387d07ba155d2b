"""Turning an order of jobs into starts and preemptions.

Ordering policies (FIFO, SJF, SRTF, Tiresias, ...) differ only in the order
they rank jobs in and whether they preempt; the two functions here do the
rest for all of them, with any placement strategy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from rackwise.cluster.view import ClusterView
from rackwise.policies.base import Decisions, Start
from rackwise.policies.parts.placement import Placement
from rackwise.workload.state import JobState, Status


def start_in_order(view: ClusterView, ordered: Iterable[JobState], place: Placement,
                   rng: np.random.Generator, *, backfill: bool) -> list[Start]:
    """Start pending jobs in the given order while they can be placed.

    With ``backfill=False`` the first job that cannot be placed blocks all
    behind it (strict order); with ``backfill=True`` later jobs that fit may
    start (without a reservation for the blocked one).
    """
    free = view.tentative()
    starts: list[Start] = []
    for state in ordered:
        if free.n_free == 0:
            break
        if state.job.n_gpus > free.n_free:
            if backfill:
                continue
            break
        gpus = place(free, state.job.n_gpus, rng)
        if gpus is None:
            if backfill:
                continue
            break
        free.take(gpus)
        starts.append(Start(state.job_id, gpus))
    return starts


def preempt_to_order(view: ClusterView, ordered: Sequence[JobState], place: Placement,
                     rng: np.random.Generator) -> Decisions:
    """Run the highest-ranked jobs that fit, preempting lower-ranked running ones.

    ``ordered`` ranks all active jobs (pending and running), best first. The
    target set is the greedy prefix by GPU count, without head-of-line
    blocking (a smaller later job may run). Running jobs outside the target
    keep their GPUs unless a target job cannot be placed without them; then
    the lowest-ranked of them are preempted first, one at a time.
    """
    capacity = view.topology.n_gpus
    target: list[JobState] = []
    for state in ordered:
        if state.job.n_gpus <= capacity:
            target.append(state)
            capacity -= state.job.n_gpus
            if capacity == 0:
                break
    in_target = {state.job_id for state in target}
    victims = [s for s in reversed(ordered) if s.status is Status.RUNNING and s.job_id not in in_target]
    free = view.tentative()
    starts: list[Start] = []
    preempted: list[str] = []
    for state in target:
        if state.status is Status.RUNNING:
            continue
        gpus = place(free, state.job.n_gpus, rng)
        while gpus is None and victims:
            victim = victims.pop(0)
            free.give(victim.gpu_ids)
            preempted.append(victim.job_id)
            gpus = place(free, state.job.n_gpus, rng)
        if gpus is None:
            continue
        free.take(gpus)
        starts.append(Start(state.job_id, gpus))
    return Decisions(start=tuple(starts), preempt=tuple(preempted))
