"""FIFO with backfill: the index of a long queue starts exactly the jobs a pass over the queue would."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.hooks import notify
from rackwise.metrics.records import JobRecord
from rackwise.policies import fifo
from rackwise.policies.fifo import Fifo, FifoBackfill
from rackwise.sim.engine import Simulator, simulate
from rackwise.workload.job import Job


@st.composite
def _jobs(draw: st.DrawFn) -> list[Job]:
    """Bursts of whole-GPU jobs of 1-8 GPUs on an 8-GPU cluster, and some shares of one GPU."""
    jobs = []
    submit = 0.0
    for index in range(draw(st.integers(1, 40))):
        submit += draw(st.sampled_from([0.0, 0.0, 5.0, 50.0]))
        duration = float(draw(st.integers(1, 400)))
        if draw(st.integers(0, 9)) == 0:
            share = draw(st.sampled_from([0.25, 0.5, 0.75]))
            jobs.append(Job(f"j{index:02d}", submit, 1, duration, gpu_share=share))
        else:
            jobs.append(Job(f"j{index:02d}", submit, draw(st.integers(1, 8)), duration))
    return jobs


def _records(jobs: list[Job], long: float, short: float, monkeypatch: pytest.MonkeyPatch) -> list[JobRecord]:
    monkeypatch.setattr(fifo, "_LONG_QUEUE", long)
    monkeypatch.setattr(fifo, "_SHORT_QUEUE", short)
    return simulate(uniform_cluster(2, gpus_per_node=4), jobs, FifoBackfill(), seed=3).records


@settings(max_examples=60, deadline=None)
@given(_jobs(), st.sampled_from([(0, 0), (3, 1), (6, 2)]))
def test_the_index_starts_what_a_pass_over_the_queue_starts(
        jobs: list[Job], thresholds: tuple[int, int]) -> None:
    # monkeypatch by hand: hypothesis runs the body many times in one test
    with pytest.MonkeyPatch.context() as patch:
        scanned = _records(jobs, math.inf, math.inf, patch)
        indexed = _records(jobs, *thresholds, patch)
    assert indexed == scanned


def test_a_long_queue_is_indexed_and_a_short_one_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fifo, "_LONG_QUEUE", 3)
    monkeypatch.setattr(fifo, "_SHORT_QUEUE", 2)
    jobs = [Job("head", 0.0, 7, 100.0), *(Job(f"w{i}", 1.0, 8, 10.0) for i in range(4)),
            Job("narrow", 2.0, 1, 10.0)]
    sim = Simulator(uniform_cluster(2, gpus_per_node=4), jobs, FifoBackfill())
    sim.start()
    policy = sim.policy
    assert isinstance(policy, Fifo)
    sim.step()  # head starts
    assert policy.queue_ is None
    sim.step()  # four wide jobs wait: the queue is long
    assert policy.queue_ is not None and len(policy.queue_) == 4
    sim.step()  # the narrow one starts on the last free GPU, found through the index
    assert "narrow" in sim.running
    assert len(policy.queue_) == len(sim.pending) == 4
    while sim.step():
        pass
    assert policy.queue_ is None  # dropped once the queue emptied
    assert len(sim.records) == len(jobs)


def test_a_fresh_policy_told_of_running_jobs_queues_only_the_pending_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fifo, "_LONG_QUEUE", 0)
    monkeypatch.setattr(fifo, "_SHORT_QUEUE", 0)
    jobs = [Job("a", 0.0, 4, 100.0), Job("b", 0.0, 8, 50.0), Job("c", 1.0, 2, 10.0), Job("d", 1.0, 4, 10.0)]
    reference = {r.job_id: r.first_start for r in simulate(uniform_cluster(2, gpus_per_node=4), jobs,
                                                            FifoBackfill()).records}
    sim = Simulator(uniform_cluster(2, gpus_per_node=4), jobs, FifoBackfill())
    sim.start()
    sim.step()
    sim.step()
    handed = FifoBackfill()
    sim.hand_over(handed, np.random.default_rng(0))  # announces a, c and d running, and b waiting
    while sim.step():
        pass
    assert {r.job_id: r.first_start for r in sim.records} == reference
    assert handed.queue_ is not None and len(handed.queue_) == 0


@pytest.mark.parametrize("told", ["again", "running"])
def test_the_index_keeps_the_views_order_when_an_engine_tells_of_a_job_again(
        told: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A live driver tells of a job the cluster moved as a completion and an arrival; the
    waiting job keeps its place in the queue, ahead of a wider one behind it."""
    monkeypatch.setattr(fifo, "_LONG_QUEUE", 0)
    monkeypatch.setattr(fifo, "_SHORT_QUEUE", 0)
    jobs = [Job("a", 0.0, 8, 100.0), Job("b", 1.0, 4, 10.0), Job("c", 2.0, 8, 10.0), Job("d", 3.0, 4, 10.0),
            Job("e", 4.0, 8, 10.0)]
    cluster = uniform_cluster(2, gpus_per_node=4)
    reference = {r.job_id: r.first_start for r in simulate(cluster, jobs, FifoBackfill()).records}
    assert reference == {"a": 0.0, "b": 100.0, "d": 100.0, "c": 110.0, "e": 120.0}
    sim = Simulator(cluster, jobs, FifoBackfill())
    sim.start()
    for _ in range(4):
        sim.step()
    if told == "again":
        notify(sim.policy, [jobs[1]], [jobs[1]], sim.now)
    else:  # an arrival for a job that runs: the index no longer matches the queue
        sim.policy.on_arrival(jobs[0], sim.now)
    while sim.step():
        pass
    assert {r.job_id: r.first_start for r in sim.records} == reference
