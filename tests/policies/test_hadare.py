"""HadarE: forking jobs onto idle nodes (papers/hadar.md §6, H5-H7) and the engine's copies."""

from __future__ import annotations

import numpy as np
import pytest

from rackwise.policies.hadar import Hadar
from rackwise.policies.hadare import HadarE, merge_models
from rackwise.sim.engine import Simulator, simulate

from .hetero_support import TablePerf, cluster, job

A_AND_B = cluster(("v100", 1, 1), ("k80", 1, 1))
H5_PERF = {("m", "v100"): 10.0, ("m", "k80"): 2.5}


def test_h5_forked_job_finishes_sooner() -> None:
    hadar = simulate(A_AND_B, [job("J", "m", 9000)], Hadar(), perf=TablePerf(H5_PERF))
    assert hadar.records[0].finish_time == pytest.approx(900.0)
    free_sync = HadarE(restart_s=0.0, default_model_bytes=0.0, copy_efficiency=1.0)
    forked = simulate(A_AND_B, [job("J", "m", 9000)], free_sync, perf=TablePerf(H5_PERF))
    assert forked.records[0].finish_time == pytest.approx(720.0)  # 9000 / (10 + 2.5)


def test_an_extra_copy_counts_its_statistical_efficiency_the_first_copy_in_full() -> None:
    policy = HadarE(restart_s=0.0, default_model_bytes=0.0)  # copy_efficiency 0.8 by default
    forked = simulate(A_AND_B, [job("J", "m", 9000)], policy, perf=TablePerf(H5_PERF))
    assert forked.records[0].finish_time == pytest.approx(9000 / (10 + 0.8 * 2.5))
    useless = HadarE(restart_s=0.0, default_model_bytes=0.0, copy_efficiency=0.0)
    alone = simulate(A_AND_B, [job("J", "m", 9000)], useless, perf=TablePerf(H5_PERF))
    assert alone.records[0].finish_time == pytest.approx(900.0)  # as Hadar without copies


def test_copy_efficiency_outside_zero_to_one_is_refused() -> None:
    from rackwise.errors import InputError

    with pytest.raises(InputError, match="copy_efficiency"):
        HadarE(copy_efficiency=1.5)


def test_h5_sync_cost_is_charged_as_a_share_of_each_round() -> None:
    # 10 s of every 360 s round syncs: rate 12.5 * 350/360, so 9000 steps take 740.571 s
    # (the digest's 740 s charges the last, partial round's sync in full instead).
    policy = HadarE(restart_s=10.0, default_model_bytes=0.0, copy_efficiency=1.0)
    result = simulate(A_AND_B, [job("J", "m", 9000)], policy, perf=TablePerf(H5_PERF))
    assert result.records[0].finish_time == pytest.approx(9000 * 360 / (12.5 * 350))


def test_h6_forking_fills_the_idle_node() -> None:
    jobs = [job("J", "m", 9000)]
    for policy, busy_frac in ((Hadar(), 0.5), (HadarE(restart_s=0.0, default_model_bytes=0.0), 1.0)):
        result = simulate(A_AND_B, jobs, policy, perf=TablePerf(H5_PERF))
        record = result.records[0]
        assert record.gpu_s / (2 * record.finish_time) == pytest.approx(busy_frac)


def test_h7_model_averaging_weights_by_steps() -> None:
    merged = merge_models(np.array([[1.0], [3.0]]), np.array([300.0, 100.0]))
    assert merged == pytest.approx([1.5])
    merged = merge_models(np.array([[1.0], [3.0], [9.0]]), np.array([300.0, 100.0, 0.0]))
    assert merged == pytest.approx([1.5])


def test_sync_overhead_from_model_bytes_and_bandwidth() -> None:
    policy = HadarE(sync_bandwidth_gbps=10.0, restart_s=10.0)
    j = job("J", "ResNet-50 (batch size 64)", 100)
    assert policy.fork_overhead_frac(j) == pytest.approx((2 * 100e6 * 8 / 10e9 + 10.0) / 360.0)
    assert policy.fork_overhead_frac(job("K", "x", 100, model_bytes=5e9)) == pytest.approx(18 / 360)


class CopyChecker:
    """After every step: copies hold whole GPU blocks, one node each, no two on one node."""

    def __init__(self) -> None:
        self.max_copies = 1

    def __call__(self, sim: Simulator) -> None:
        topology = sim.topology
        held = sum(len(s.gpu_ids) for s in sim.running.values())
        assert held == topology.n_gpus - sim.allocation.n_free
        for state in sim.running.values():
            n = state.job.n_gpus
            assert len(state.gpu_ids) == n * state.copies
            self.max_copies = max(self.max_copies, state.copies)
            if state.copies > 1:
                nodes = [{topology.gpu_node[g] for g in state.gpu_ids[c * n:(c + 1) * n]}
                         for c in range(state.copies)]
                extra = nodes[1:]
                assert all(len(copy) == 1 for copy in extra)
                flat = [node for copy in nodes for node in copy]
                assert len(flat) == len(set(flat))


def _trace() -> tuple:  # type: ignore[type-arg]
    topology = cluster(("v100", 2, 4), ("p100", 1, 4), ("k80", 2, 2))
    table = {("r50", "v100"): 3.0, ("r50", "p100"): 2.0, ("r50", "k80"): 1.0,
             ("lm", "v100"): 2.0, ("lm", "p100"): 1.8, ("lm", "k80"): 1.5}
    jobs = [job(f"j{i}", "r50" if i % 2 else "lm", 3000 + 700 * i, n_gpus=(1, 2, 4)[i % 3],
                submit=500.0 * i) for i in range(9)]
    return topology, table, jobs


def test_copies_fit_free_gpus_and_work_is_conserved() -> None:
    topology, table, jobs = _trace()
    checker = CopyChecker()
    result = simulate(topology, jobs, HadarE(), perf=TablePerf(table, restart_s=5.0),
                      observers=[checker])
    assert checker.max_copies > 1  # the trace leaves room to fork
    assert sorted(r.job_id for r in result.records) == sorted(j.job_id for j in jobs)
    assert all(r.total_iters == j.total_iters for r, j in
               zip(sorted(result.records, key=lambda r: r.job_id), sorted(jobs, key=lambda j: j.job_id)))
    # GPU-seconds held by jobs (copies included) equal the busy-GPU area of the timeline.
    tl = result.timeline
    area = sum(busy * (t1 - t0) for t0, t1, busy in zip(tl.time, tl.time[1:], tl.busy_gpus))
    assert sum(r.gpu_s for r in result.records) == pytest.approx(area, rel=1e-9)


def test_hadare_is_deterministic_and_not_slower_in_total() -> None:
    topology, table, jobs = _trace()
    runs = [simulate(topology, jobs, p, perf=TablePerf(table, restart_s=5.0))
            for p in (HadarE(), HadarE(), Hadar())]
    assert runs[0].records == runs[1].records
    makespan = [max(r.finish_time for r in run.records) for run in runs]
    assert makespan[0] <= makespan[2]


def test_engine_rejects_wrong_gpu_count_for_copies() -> None:
    from rackwise.errors import InvalidDecisionError
    from rackwise.policies.base import BasePolicy, Decisions, Start

    class BadFork(BasePolicy):
        name = "bad-fork"

        def schedule(self, view, now):  # type: ignore[no-untyped-def]
            if view.pending:
                return Decisions(start=(Start("J", (0,), copies=2),))
            return Decisions()

    with pytest.raises(InvalidDecisionError, match="2 copies"):
        simulate(A_AND_B, [job("J", "m", 10)], BadFork(), perf=TablePerf(H5_PERF))


def test_a_job_wider_than_a_node_forks_across_nodes_no_other_copy_uses() -> None:
    # Four 2-GPU nodes and a 4-GPU job: no single node holds a copy of it.
    topology = cluster(("v100", 4, 2))
    jobs = [job("W", "m", 36_000, n_gpus=4)]
    perf = {("m", "v100"): 10.0}
    free_sync = {"restart_s": 0.0, "default_model_bytes": 0.0, "copy_efficiency": 1.0}
    narrow = simulate(topology, jobs, HadarE(wide_copies=False, **free_sync), perf=TablePerf(perf))
    assert narrow.records[0].finish_time == pytest.approx(3600.0)  # one copy
    wide = simulate(topology, jobs, HadarE(**free_sync), perf=TablePerf(perf))
    assert wide.records[0].finish_time == pytest.approx(1800.0)  # two copies, two nodes each
    assert wide.records[0].gpu_s == pytest.approx(8 * 1800.0)


def test_a_wide_copy_takes_only_nodes_the_job_leaves_free() -> None:
    # Three 4-GPU nodes, a 6-GPU job: the primary takes 4 + 2 GPUs, which leaves 2 + 4
    # free, but the 2 sit on a node the primary uses, so there is no copy.
    topology = cluster(("v100", 3, 4))
    free_sync = {"restart_s": 0.0, "default_model_bytes": 0.0, "copy_efficiency": 1.0}
    result = simulate(topology, [job("W", "m", 36_000, n_gpus=6)], HadarE(**free_sync),
                      perf=TablePerf({("m", "v100"): 10.0}))
    assert result.records[0].finish_time == pytest.approx(3600.0)
