"""Tests for rackwise.policies.consolidation: consolidate-strict and philly-relax.

Worked case T8 of shared/papers/baselines.md §B.7: two 8-GPU servers in one
rack with 6 and 4 GPUs free. The policy lays the cluster out itself at t=0
(a 1 s filler makes best-fit leave that pattern), so the 8-GPU job arrives
at t=1 and every expected time is shifted by 1 s.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.delay_helpers import HIGH, LOW, MED, Run, SpanPerf, job
from rackwise.cluster.allocation import TentativeAllocation
from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.policies import delay
from rackwise.policies.consolidation import ConsolidateStrict, PhillyRelax
from rackwise.policies.delay import Dally
from rackwise.policies.parts import delay_scheduling
from rackwise.policies.parts.delay_scheduling import DelayParameters, DelayScheduling, WaitState
from rackwise.policies.parts.locality import L2, placement_level
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job
from rackwise.workload.state import JobState
from strategies import clusters_and_workloads

PAIR = uniform_cluster(2, gpus_per_node=8, nodes_per_rack=2)  # n0: GPUs 0-7, n1: 8-15


def _t8(p3_duration_s: float = 1000.0, sens: float = LOW, extra: tuple = ()) -> list:
    """p1 (4) on n0 until 2000, p3 (2) on n1; free at t=1: n0 4 (GPUs 4-7), n1 6 (10-15)."""
    return [job("p1", 0, 4, 2000), job("p2", 0, 4, 1), job("p3", 0, 2, p3_duration_s),
            job("J", 1, 8, 100, sens), *extra]


def test_philly_relax_skips_then_accepts_rack_level() -> None:
    """T8: J cannot get a node, waits W1 = 300 s, then takes 6 + 2 GPUs."""
    run = Run(PAIR, _t8(), PhillyRelax())
    assert run.start("J") == (301.0, (10, 11, 12, 13, 14, 15, 4, 5))
    assert run.records["J"].n_nodes == 2


def test_philly_relax_takes_a_node_that_frees_before_the_timeout() -> None:
    """T8, second half: p3 ends at t=100, n1 is whole again, J starts there at L0."""
    run = Run(PAIR, _t8(p3_duration_s=100.0), PhillyRelax())
    assert run.start("J") == (100.0, tuple(range(8, 16)))


@pytest.mark.parametrize("sens", [LOW, HIGH])
def test_philly_relax_ignores_sensitivity(sens: float) -> None:
    """The same 300 s for every job, where dally would start the low job at once."""
    assert Run(PAIR, _t8(sens=sens), PhillyRelax()).start("J")[0] == 301.0
    assert Run(PAIR, _t8(sens=sens), PhillyRelax(timeout_s=60.0)).start("J")[0] == 61.0


def test_consolidate_strict_waits_for_a_whole_node_without_blocking_others() -> None:
    """J waits until p3 leaves n1 at t=1000; K (2 GPUs) behind it starts at once."""
    run = Run(PAIR, _t8(extra=(job("K", 2, 2, 50),)), ConsolidateStrict())
    assert run.start("J") == (1000.0, tuple(range(8, 16)))
    assert run.start("K") == (2.0, (4, 5))


def test_consolidate_strict_keeps_rack_jobs_in_one_rack() -> None:
    """A 6-GPU job on racks of two 4-GPU nodes waits for a rack, never spans two."""
    cluster = uniform_cluster(4, gpus_per_node=4, nodes_per_rack=2)
    jobs = [job("a", 0, 3, 500), job("b", 0, 3, 800), job("c", 0, 3, 900), job("d", 0, 3, 1000),
            job("J", 1, 6, 100)]
    run = Run(cluster, jobs, ConsolidateStrict())
    # rack 0 (a, b) is whole again at t=800; rack 1 (c, d) only at 1000
    assert run.start("J")[0] == 800.0
    assert run.records["J"].n_racks == 1 and run.records["J"].n_nodes == 2


def test_las_ordering_is_available_to_the_baselines() -> None:
    for cls in (ConsolidateStrict, PhillyRelax):
        policy = make_policy(cls.name, ordering="las")
        assert isinstance(policy, cls) and policy.ordering == "las"
    with pytest.raises(InputError):
        make_policy("philly-relax", ordering="random")


def test_baselines_are_parameterisations_of_the_shared_engine() -> None:
    for policy in (ConsolidateStrict(), PhillyRelax(), Dally()):
        sim = Simulator(uniform_cluster(2, gpus_per_node=4, nodes_per_rack=2), [], policy)
        sim.start()
        assert isinstance(policy.delay, DelayScheduling)
    assert not ConsolidateStrict.preempts and not PhillyRelax.preempts and Dally.preempts
    assert PhillyRelax(timeout_s=42.0).timer_table() == {"all": (42.0, 42.0)}
    assert replace(PhillyRelax(), timeout_s=5.0).timeout_s == 5.0


def test_spread_is_fifo_with_first_fit() -> None:
    """The `spread` baseline needs no class: J starts at t=1 on the lowest free GPU ids."""
    run = Run(PAIR, _t8(), make_policy("fifo", placement="first-fit"))
    assert run.start("J") == (1.0, (4, 5, 6, 7, 10, 11, 12, 13))


@settings(max_examples=40)
@given(clusters_and_workloads(max_jobs=20))
def test_every_job_finishes_and_strict_never_spreads_a_job_that_fits_a_node(drawn) -> None:
    topology, jobs = drawn
    models = ("lm", "bert", "cnn")
    jobs = [j.with_changes(model=models[i % 3]) for i, j in enumerate(jobs)]
    perf = {"lm": (0.7, 1.5), "bert": (0.25, 0.4)}
    for policy in (ConsolidateStrict(), PhillyRelax(), Dally(tune_every_s=900.0)):
        run = Run(topology, jobs, policy, SpanPerf(perf))  # Run checks every job finished
        if isinstance(policy, ConsolidateStrict):
            for j in jobs:
                if j.n_gpus <= topology.max_gpus_per_node:
                    # the placement it finished on is its only one: no preemption here
                    assert run.records[j.job_id].n_nodes == 1
                    assert all(placement_level(topology, g) == 0 for _, g in run.placements[j.job_id])


def test_a_timer_that_runs_out_on_a_full_cluster_still_relaxes_the_job() -> None:
    """Two one-node racks, full from t=0; J (3 GPUs) waits from t=1. Its timers run out at 31
    and 61 while nothing is free, so once y and z end, with 1 + 2 GPUs free on the two nodes, it is
    already allowed to span racks and starts at once."""
    racks = uniform_cluster(2, gpus_per_node=4, nodes_per_rack=1)
    jobs = [job("x", 0.0, 3, 2000), job("y", 0.1, 1, 500), job("z", 0.2, 2, 500),
            job("w", 0.3, 2, 2000), job("J", 1.0, 3, 100)]
    run = Run(racks, jobs, PhillyRelax(timeout_s=30.0))
    assert run.start("J") == (500.2, (4, 5, 3))  # when z, the later of y and z, ends


_CONTENDED = st.lists(st.tuples(st.integers(0, 300), st.sampled_from([1, 2, 3, 4, 6, 8]),
                                 st.integers(20, 3000)), min_size=2, max_size=30)


@settings(max_examples=80, deadline=None)
@given(_CONTENDED)
def test_relaxing_from_the_timers_heap_decides_as_walking_the_queue(drawn) -> None:
    """Once a pass runs out of GPUs, philly-relax reads the jobs whose timers ran out from its
    heap instead of walking the rest of the queue: every start, placement and finish is the same."""
    topology = uniform_cluster(4, gpus_per_node=4, nodes_per_rack=2)
    jobs = [job(f"j{i}", submit, n_gpus, duration) for i, (submit, n_gpus, duration) in enumerate(drawn)]
    for policy in (PhillyRelax(timeout_s=30.0), PhillyRelax(timeout_s=0.0),
                   PhillyRelax(timeout_s=45.0, reserve_after_s=60.0)):
        fast = Run(topology, jobs, replace(policy))
        with mock.patch.object(DelayScheduling, "_expired_from_heap", return_value=False):
            walked = Run(topology, jobs, replace(policy))
        assert fast.records == walked.records
        assert fast.placements == walked.placements


def test_a_waiting_job_the_cluster_drops_leaves_the_queue() -> None:
    """A live cluster cancels a waiting job (reported as a completion), or drops one unannounced.

    The queue is kept between passes, so each way out must take the job's wait
    with it; a job dropped unannounced is noticed as the queue is read, and the
    next pass forgets it. The job behind them still gets the node.
    """
    import numpy as np

    from rackwise.cluster.allocation import Allocation
    from rackwise.engine.view import ClusterView
    from rackwise.perf.base import IdealPerf
    from rackwise.workload.state import JobState

    node = uniform_cluster(1, gpus_per_node=8, nodes_per_rack=1)
    allocation = Allocation(node)
    allocation.allocate("other", range(8))
    a, b, c = job("a", 0, 8, 100), job("b", 1, 8, 100), job("c", 2, 8, 100)
    pending = {j.job_id: JobState(j) for j in (a, b)}
    view = ClusterView(node, allocation, pending, {}, IdealPerf())
    policy = ConsolidateStrict()
    policy.reset(view, np.random.default_rng(0))
    for j in (a, b):
        policy.on_arrival(j, 2.0)
    assert policy.schedule(view, 2.0).start == ()  # the node is busy
    assert set(policy.delay.waits) == {"a", "b"}

    del pending["a"]  # cancelled: the live driver reports it as done
    policy.on_completion(a, 3.0)
    assert policy.schedule(view, 3.0).start == ()
    assert set(policy.delay.waits) == {"b"}

    del pending["b"]  # gone without a word, and c never announced
    pending["c"] = JobState(c)
    allocation.release(range(8))
    first = policy.schedule(view, 4.0).start
    starts = first or policy.schedule(view, 4.0).start
    assert [s.job_id for s in starts] == ["c"]
    assert set(policy.delay.waits) == set()


@pytest.mark.parametrize("n_new", [1, 2])
def test_a_wide_waiting_job_dropped_unannounced_leaves_the_queue_though_no_pass_reads_it(
        n_new: int) -> None:
    """Half the node stays busy, so no pass reads the 8-GPU job; it goes unannounced as one
    or two jobs too wide to start arrive, then one more. Each of them gets a wait, and once
    waits outnumber pending jobs the dropped one is forgotten."""
    import numpy as np

    from rackwise.cluster.allocation import Allocation
    from rackwise.engine.view import ClusterView
    from rackwise.perf.base import IdealPerf

    node = uniform_cluster(1, gpus_per_node=8, nodes_per_rack=1)
    allocation = Allocation(node)
    allocation.allocate("other", range(4))
    wide = job("wide", 0, 8, 100)
    pending = {"wide": JobState(wide)}
    policy = ConsolidateStrict()
    view = ClusterView(node, allocation, pending, {}, IdealPerf())
    policy.reset(view, np.random.default_rng(0))
    policy.on_arrival(wide, 1.0)
    assert policy.schedule(view, 1.0).start == ()
    assert set(policy.delay.waits) == {"wide"}
    del pending["wide"]
    arrivals = [job(f"new{i}", 2, 6, 100) for i in range(n_new)]
    for arrival in arrivals:
        pending[arrival.job_id] = JobState(arrival)
        policy.on_arrival(arrival, 2.0)
    assert policy.schedule(view, 2.0).start == ()
    assert set(pending) <= set(policy.delay.waits)  # each arrival has its wait
    later = job("later", 3, 6, 100)
    pending["later"] = JobState(later)
    policy.on_arrival(later, 3.0)
    assert policy.schedule(view, 3.0).start == ()
    assert set(pending) <= set(policy.delay.waits)
    assert policy.schedule(view, 4.0).start == ()  # waits outnumber pending jobs: "wide" goes
    assert set(policy.delay.waits) == set(pending)


@given(st.lists(st.booleans(), max_size=30), st.permutations(range(30)), st.integers(0, 3))
def test_the_jobs_without_a_wait_are_found_wherever_they_are_in_the_queue(
        waited: list[bool], order: list[int], n_gone: int) -> None:
    """New jobs are looked for from the queue's end; any place in it, or waits whose jobs left
    unannounced (a stale queue), give the same jobs as the set difference."""
    delay = DelayScheduling(DelayParameters(), {"all": (30.0, 30.0)})
    ids = [f"j{i:02d}" for i in order[:len(waited)]]
    pending = MappingProxyType({job_id: JobState(Job(job_id, 0.0, 1, 10.0)) for job_id in ids})
    waits = {job_id: WaitState(0, 0, 0.0, "all") for job_id, has in zip(ids, waited) if has}
    gone = {f"gone{i}": WaitState(0, 0, 0.0, "all") for i in range(n_gone)}
    delay._waits.update(waits | gone)
    delay._stale = bool(gone)  # as a pass that met them would have noted
    assert delay.unwaited(pending) == sorted(pending.keys() - waits.keys())


_POLICIES = (
    PhillyRelax(timeout_s=30.0), PhillyRelax(timeout_s=0.0), ConsolidateStrict(),
    Dally(), Dally(autotune=False, preempt=False), Dally(initial_timers="break-even", tune_every_s=600.0),
    Dally(timer_med_s=(30.0, 60.0), timer_high_s=(120.0, 0.0), min_run_s=0.0, max_preemptions=5),
    Dally(reconsolidate=True, own_penalty_timers=False, timer_high_s=(60.0, 60.0)),
    Dally(timer_high_s=(30.0, math.inf), min_run_s=0.0), Dally(ordering="las", min_run_s=0.0),
)


@settings(max_examples=60, deadline=None)
@given(_CONTENDED, st.lists(st.sampled_from([LOW, MED, HIGH]), min_size=30, max_size=30))
def test_walking_the_buckets_decides_as_walking_the_queue(drawn, sensitivities) -> None:
    """A FIFO pass reads only the jobs that may fit or whose timers ran out, from the buckets
    of GPU count and level, dally's clearings after the pass read only the jobs below L2 that
    fit the GPUs left, and its evictions reuse the clearings they worked out; every start,
    placement, preemption and finish is the same as with passes over the whole queue and each
    clearing worked out anew, for each delay-scheduling policy."""
    topology = uniform_cluster(4, gpus_per_node=4, nodes_per_rack=2)
    jobs = [job(f"j{i}", submit, n_gpus, duration, sensitivities[i])
            for i, (submit, n_gpus, duration) in enumerate(drawn)]
    for policy in _POLICIES:
        fast = Run(topology, jobs, replace(policy))
        with (mock.patch.object(DelayScheduling, "_indexed", return_value=False),
              mock.patch.object(DelayScheduling, "waiting_below_l2_that_fit", _every_wait_below_l2),
              mock.patch.object(delay, "_Clearings", _NoClearings)):
            walked = Run(topology, jobs, replace(policy))
        assert fast.records == walked.records
        assert fast.placements == walked.placements


def _every_wait_below_l2(self: DelayScheduling, view: ClusterView, free: TentativeAllocation,
                         now: float) -> Iterator[str]:
    """Every job still waiting below L2, from the whole queue, until no GPU is left: a
    job too large for the free GPUs is left for `Dally._evict` to turn down."""
    for job_id in self.waiting_in_order(view, now):
        if free.n_free == 0:
            return
        if self.waits[job_id].allowed < L2:
            yield job_id


class _Forgetful(dict):  # type: ignore[type-arg]
    def __setitem__(self, key: object, value: object) -> None:
        pass


@dataclass
class _NoClearings:
    """`delay._Clearings` that remembers nothing: every eviction works its clearing out anew."""

    holders: dict = field(default_factory=_Forgetful)  # type: ignore[type-arg]
    best: dict = field(default_factory=_Forgetful)  # type: ignore[type-arg]
    candidates: dict = field(default_factory=_Forgetful)  # type: ignore[type-arg]
    moves: dict = field(default_factory=_Forgetful)  # type: ignore[type-arg]


_BURSTS = st.lists(st.tuples(st.sampled_from([0, 0, 0, 10, 40, 400]), st.sampled_from([1, 2, 3, 4, 6, 8]),
                             st.integers(20, 3000), st.sampled_from([LOW, MED, HIGH])),
                   min_size=10, max_size=60)


@settings(max_examples=40, deadline=None)
@given(_BURSTS, st.sampled_from([0, 8]))
def test_the_buckets_hold_exactly_the_waiting_jobs_after_every_decision(drawn, one_by_one) -> None:
    """Bursts of arrivals and of timers running out together, filed and moved one by one or
    (``one_by_one`` 0) all at once: after each decision, each bucket holds, in FIFO order, the
    waiting jobs of its GPU count and allowed level, the queue (where one is kept) all of them,
    and the timers' heap the timer of each waiting job that has one."""
    topology = uniform_cluster(4, gpus_per_node=4, nodes_per_rack=2)
    jobs = [job(f"j{i:02d}", submit, n_gpus, duration, sens)
            for i, (submit, n_gpus, duration, sens) in enumerate(drawn)]

    def check(sim: Simulator) -> None:
        delay_state = sim.policy.delay
        waits, keys = delay_state.waits, delay_state._fifo_key
        expected: dict[tuple[int, int], list] = {}
        for job_id, wait in waits.items():
            n_gpus = (sim.pending.get(job_id) or sim.running[job_id]).job.n_gpus
            expected.setdefault((n_gpus, wait.allowed), []).append(keys[job_id])
        found = {where: bucket for where, bucket in delay_state._buckets.items() if bucket}
        assert found == {where: sorted(bucket) for where, bucket in expected.items()}
        timers = {(delay_state._deadline(wait), job_id) for job_id, wait in waits.items()}
        current = {entry for entry in delay_state._deadlines if delay_state._is_current(*entry)}
        assert current == {timer for timer in timers if timer[0] < math.inf}
        if delay_state._queue is not None:  # kept where passes walk the whole queue
            assert delay_state._queue == sorted(keys[job_id] for job_id in waits)

    with mock.patch.object(delay_scheduling, "_ONE_BY_ONE", one_by_one):
        for policy in (PhillyRelax(timeout_s=30.0), PhillyRelax(timeout_s=30.0, reserve_after_s=20.0),
                       Dally(timer_med_s=(30.0, 30.0), timer_high_s=(10.0, 40.0)),
                       Dally(timer_med_s=(30.0, 300.0), timer_high_s=(10.0, 400.0), tune_every_s=60.0,
                             tune_every_starts=3)):  # timers moved while jobs wait on them
            Simulator(topology, jobs, replace(policy), observers=[check]).run()
