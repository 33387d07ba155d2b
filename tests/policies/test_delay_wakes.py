"""`DelayWakes`: combined's next wake from a heap equals reading every waiting job's timers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rackwise
from rackwise.cluster.topology import Topology, uniform_cluster
from rackwise.engine.view import ClusterView
from rackwise.perf.base import IdealPerf
from rackwise.perf.model import NetworkPerf
from rackwise.policies.combined import Combined
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job
from strategies import clusters_and_workloads

# Each test wraps the policy's `DelayWakes.next_wake`, which the compiled build's class does not allow.
pytestmark = pytest.mark.skipif(rackwise.is_compiled(), reason="wraps a method: plain-Python build only")


class Checked(Combined):
    """Combined, checking each wake against a read of every waiting job (as the policy once did)."""

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.checked_ = 0
        from_heap = self.wakes_.next_wake

        def next_wake(view: ClusterView, now: float, started: set[str]) -> float:
            wake = from_heap(view, now, started)
            assert wake == min((self._next_instant(view, job_id, now) for job_id in view.pending
                                if job_id not in started), default=math.inf), f"at {now}"
            self.checked_ += wake < math.inf
            return wake

        self.wakes_.next_wake = next_wake  # type: ignore[method-assign]

    def _next_instant(self, view: ClusterView, job_id: str, now: float) -> float:
        state = view.pending[job_id]
        wake = self.placement_.allowed(view, state, now)[1]
        if len(self.placement_.type_rates.types) > 1 and (type_at := state.queued_since + self.type_wait_s) > now:
            wake = min(wake, type_at)
        return wake


@pytest.mark.parametrize("copies", [False, True], ids=["one copy", "copies"])
@settings(max_examples=30, deadline=None)
@given(case=clusters_and_workloads(max_jobs=20), seed=st.integers(0, 2**32 - 1))
def test_the_next_wake_is_the_earliest_instant_of_a_waiting_job(copies: bool, case: tuple[Topology, list[Job]],
                                                                 seed: int) -> None:
    """Under the network model (so classes differ), every class timed, mixed GPU types drawn."""
    topology, jobs = case
    policy = Checked(copies=copies, timer_low_s=(60.0, 120.0), timer_med_s=(300.0, 600.0),
                     timer_high_s=(900.0, 1_800.0), type_wait_s=400.0, sync_s=200.0)
    Simulator(topology, jobs, policy, perf=NetworkPerf(), seed=seed).run()


def test_a_waiting_job_wakes_the_policy_when_its_timers_run_out() -> None:
    """A holds 3 GPUs of node 0 until 1000, A2 3 of node 1 until 2000 (one node per rack); H,
    sensitive, needs 2 and comes at 1: it waits 300 s for a node, 300 s for a rack, then spreads."""
    jobs = [Job("A", 0.0, 3, 1_000.0), Job("A2", 0.0, 3, 2_000.0),
            Job("H", 1.0, 2, 100.0, comm_sensitivity=0.9)]
    policy = Checked(predictor="oracle", rank="vm", copies=False, timer_high_s=(300.0, 300.0))
    result = Simulator(uniform_cluster(2, 4, 1), jobs, policy, perf=IdealPerf(), seed=0).run()
    assert next(r.first_start for r in result.records if r.job_id == "H") == 601.0
    assert policy.checked_ > 0
