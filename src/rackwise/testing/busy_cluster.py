"""A large, busy cluster built directly, to time or pin one scheduling decision at scale.

The state is what an engine would hold mid-run: jobs from the start of
philly_2017 (none over 64 GPUs) fill the cluster to ``busy_frac`` as if they
had started when they were submitted, the next ``n_pending`` wait, and the
policy's hooks have seen every one of them. Building it does not step a
simulator, so its cost does not grow with the trace's history.
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
                 busy_frac: float = 0.9, params: Mapping[str, Any] | None = None) -> BusyCluster:
    """``n_nodes`` nodes of 8 GPUs (16 to a rack), ``busy_frac`` of the GPUs busy, ``n_pending`` waiting.

    ``params`` are the policy's parameters (its defaults if None).
    """
    topology = uniform_cluster(n_nodes, 8, 16)
    pool = [j for j in traces.load("philly_2017", first_n=4 * n_pending + 20_000) if j.n_gpus <= 64]
    policy = make_policy(policy_name, **(params or {}))
    sim = Simulator(topology, [], policy, perf=IdealPerf(), seed=0)
    rng = np.random.default_rng(0)
    sim.start()
    now = max(j.submit_time for j in pool) + 1.0
    sim.advance_to(now)
    jobs = iter(pool)
    target_busy = int(busy_frac * topology.n_gpus)
    running = []
    # Fill the cluster first, as if these jobs had started at their submit time.
    while topology.n_gpus - sim.allocation.n_free < target_busy:
        job = next(jobs)
        gpus = consolidated(sim.allocation, job.n_gpus, rng)
        if gpus is None:
            break
        state = JobState(job)
        sim.allocation.allocate(job.job_id, gpus)
        state.status, state.gpu_ids = Status.RUNNING, gpus
        state.run_start = state.first_start = state.last_update = job.submit_time
        state.rate_iters_per_s = job.total_iters / job.duration_s
        state.n_nodes, state.n_racks = topology.spread(gpus)
        sim.running[job.job_id] = state
        running.append(state)
    for _ in range(n_pending):
        job = next(jobs)
        sim.pending[job.job_id] = JobState(job)
    for state in sorted([*running, *sim.pending.values()], key=lambda s: s.job.submit_time):
        policy.on_arrival(state.job, state.job.submit_time)
    return BusyCluster(policy, sim.view, now, len(running))
