"""A large, busy cluster built directly, to time or pin one scheduling decision at scale.

The state is what an engine would hold mid-run: jobs from the start of
philly_2017 (none over 64 GPUs) fill the cluster to ``busy_frac`` as if they
had started when they were submitted, the next ``n_pending`` wait, and the
policy's hooks have seen every one of them. Asked for a number of running
jobs, the filling passes over jobs too narrow or too wide for it (they
wait, in order). Building it does not step a simulator, so its cost does
not grow with the trace's history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rackwise import traces
from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.contract import Decisions, Policy
from rackwise.engine.view import ClusterView
from rackwise.perf.base import IdealPerf
from rackwise.policies.parts.placement import consolidated
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job
from rackwise.workload.state import JobState, Status


@dataclass
class BusyCluster:
    """A policy and the view it decides from, at ``now``."""

    policy: Policy
    view: ClusterView
    now: float
    n_running: int

    def decide(self) -> Decisions:
        """The policy's decision on this state (call it once: it changes the policy's state)."""
        return self.policy.schedule(self.view, self.now)


def busy_cluster(policy_name: str, *, n_nodes: int = 1_250, n_pending: int = 5_000,
                 busy_frac: float = 0.9, n_running: int | None = None,
                 params: Mapping[str, Any] | None = None) -> BusyCluster:
    """``n_nodes`` nodes of 8 GPUs (16 to a rack), ``busy_frac`` of the GPUs busy, ``n_pending`` waiting.

    ``n_running``: about this many jobs hold the busy GPUs (None: the trace's
    jobs in order, as many as fit). ``params`` are the policy's parameters
    (its defaults if None).
    """
    topology = uniform_cluster(n_nodes, 8, 16)
    # Most of philly_2017's jobs take one GPU: a few wide running jobs need a longer stretch.
    n_pool = 4 * n_pending + (20_000 if n_running is None else 80_000)
    pool = [j for j in traces.load("philly_2017", first_n=n_pool) if j.n_gpus <= 64]
    policy = make_policy(policy_name, **(params or {}))
    sim = Simulator(topology, [], policy, perf=IdealPerf(), seed=0)
    sim.start()
    target_busy = int(busy_frac * topology.n_gpus)
    if n_running is None:
        running, waiting = _fill_in_order(sim, pool, target_busy)
    else:
        running, waiting = _fill_with_count(sim, pool, target_busy, n_running)
    waiting = waiting[:n_pending]
    # The pool's last arrival, or the state's where the pool reaches far past it.
    last = pool if n_running is None else [*(state.job for state in running), *waiting]
    now = max(job.submit_time for job in last) + 1.0
    sim.advance_to(now)
    for job in waiting:
        sim.pending[job.job_id] = JobState(job)
    for state in sorted([*running, *sim.pending.values()], key=lambda s: s.job.submit_time):
        policy.on_arrival(state.job, state.job.submit_time)
    return BusyCluster(policy, sim.view, now, len(running))


def _fill_in_order(sim: Simulator, pool: list[Job], target_busy: int) -> tuple[list[JobState], list[Job]]:
    """Start the pool's jobs in order until ``target_busy`` GPUs are busy: (running, the jobs after them)."""
    rng = np.random.default_rng(0)
    running: list[JobState] = []
    for i, job in enumerate(pool):
        if sim.topology.n_gpus - sim.allocation.n_free >= target_busy:
            return running, pool[i:]
        gpus = consolidated(sim.allocation, job.n_gpus, rng)
        if gpus is None:  # full as it can be: the jobs after this one wait
            return running, pool[i + 1:]
        running.append(_run(sim, job, gpus))
    return running, []


def _fill_with_count(sim: Simulator, pool: list[Job], target_busy: int,
                     n_running: int) -> tuple[list[JobState], list[Job]]:
    """Start about ``n_running`` of the pool's jobs on about ``target_busy`` GPUs: (running, the rest in order).

    A job starts only if its width is within a factor of two of the GPUs still to
    fill per job still to start, so that the mean tracks what is left of both.
    """
    rng = np.random.default_rng(0)
    running: list[JobState] = []
    left: list[Job] = []
    for i, job in enumerate(pool):
        to_fill = target_busy - (sim.topology.n_gpus - sim.allocation.n_free)
        to_start = n_running - len(running)
        if to_fill <= 0 or to_start <= 0:
            return running, left + pool[i:]
        if not to_fill <= 2 * job.n_gpus * to_start <= 4 * to_fill:
            left.append(job)
            continue
        gpus = consolidated(sim.allocation, job.n_gpus, rng)
        if gpus is None:
            left.append(job)
            continue
        running.append(_run(sim, job, gpus))
    return running, left


def _run(sim: Simulator, job: Job, gpus: tuple[int, ...]) -> JobState:
    """``job`` running on ``gpus`` since it was submitted."""
    state = JobState(job)
    sim.allocation.allocate(job.job_id, gpus)
    state.status, state.gpu_ids = Status.RUNNING, gpus
    state.run_start = state.first_start = state.last_update = job.submit_time
    state.rate_iters_per_s = job.total_iters / job.duration_s
    state.n_nodes, state.n_racks = sim.topology.spread(gpus)
    sim.running[job.job_id] = state
    return state
