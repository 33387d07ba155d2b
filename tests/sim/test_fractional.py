"""Fractional jobs: shares of one GPU packed up to a whole GPU, and priced when co-located."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.invariant_checker import InvariantChecker

from rackwise.cluster.allocation import SLICED, Allocation, TentativeAllocation
from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.checks import LIVE_CLUSTER, EngineSupport, check_decisions
from rackwise.errors import InputError, InvalidDecisionError
from rackwise.forecast.forward import forward
from rackwise.forecast.from_sim import snapshot_of
from rackwise.perf.model import NetworkPerf
from rackwise.policies.base import Decisions, Start
from rackwise.policies.fifo import Fifo, FifoBackfill
from rackwise.policies.tiresias import Tiresias
from rackwise.sim.engine import Simulator, simulate
from rackwise.workload.job import Job


def _share(job_id: str, submit: float, share: float, duration: float = 100.0) -> Job:
    return Job(job_id, submit, 1, duration, gpu_share=share)


def _records(topology, jobs, policy=None, **kwargs):  # type: ignore[no-untyped-def]
    result = simulate(topology, jobs, policy or Fifo(), **kwargs)
    return {r.job_id: r for r in result.records}


def test_two_halves_share_one_gpu() -> None:
    records = _records(uniform_cluster(1, gpus_per_node=1), [_share("a", 0, 0.5), _share("b", 0, 0.5)])
    assert records["a"].first_start == records["b"].first_start == 0.0
    assert records["a"].finish_time == records["b"].finish_time == 100.0
    assert records["a"].gpu_s == pytest.approx(50.0)


def test_a_six_tenths_and_a_half_do_not_share() -> None:
    records = _records(uniform_cluster(1, gpus_per_node=1), [_share("a", 0, 0.6), _share("b", 0, 0.5)])
    assert records["a"].first_start == 0.0
    assert records["b"].first_start == 100.0


def test_a_whole_gpu_job_never_lands_on_a_split_gpu() -> None:
    jobs = [_share("a", 0, 0.3), Job("b", 1, 1, 50.0), Job("c", 2, 1, 50.0)]
    records = _records(uniform_cluster(1, gpus_per_node=2), jobs)
    assert records["b"].first_start == 1.0
    assert records["c"].first_start == 51.0  # waits for b's GPU, not a's split one


def test_shares_fill_the_fullest_split_gpu_first() -> None:
    """Best fit: with 0.4 left beside a and 0.5 beside b, 0.3 goes beside a, then 0.5 beside b."""
    jobs = [_share("a", 0, 0.6), Job("x", 0, 1, 1.0), _share("b", 0.5, 0.5),
            _share("c", 2, 0.3), _share("d", 3, 0.5)]
    sim = Simulator(uniform_cluster(1, gpus_per_node=2), jobs, Fifo())
    sim.start()
    while sim.now < 3:
        sim.step()
    assert sim.running["c"].gpu_ids == sim.running["a"].gpu_ids
    assert sim.running["d"].gpu_ids == sim.running["b"].gpu_ids


def test_strict_fifo_blocks_behind_a_share_that_does_not_fit() -> None:
    jobs = [_share("a", 0, 0.7), _share("b", 1, 0.5), _share("c", 2, 0.3)]
    records = _records(uniform_cluster(1, gpus_per_node=1), jobs, Fifo())
    assert records["c"].first_start == 100.0
    backfilled = _records(uniform_cluster(1, gpus_per_node=1), jobs, FifoBackfill())
    assert backfilled["c"].first_start == 2.0


def test_backfill_passes_a_waiting_whole_job_for_a_share_on_a_split_gpu() -> None:
    # One GPU, split by "a": no GPU is free, so "w" waits; "c" still fits beside "a".
    jobs = [_share("a", 0, 0.5), Job("w", 1, 1, 10.0), _share("c", 2, 0.5)]
    backfilled = _records(uniform_cluster(1, gpus_per_node=1), jobs, FifoBackfill())
    assert backfilled["c"].first_start == 2.0
    assert backfilled["w"].first_start == 102.0  # once both shares are done
    strict = _records(uniform_cluster(1, gpus_per_node=1), jobs, Fifo())
    assert strict["c"].first_start == 110.0  # behind "w"


def test_a_policy_without_fractional_support_is_refused_in_one_line() -> None:
    with pytest.raises(InputError, match=r"policy .tiresias. cannot run fractional jobs .*job a"):
        Simulator(uniform_cluster(1, gpus_per_node=1), [_share("a", 0, 0.5)], Tiresias())


@pytest.mark.parametrize(("n_gpus", "share"), [(2, 0.5), (1, 0.0), (1, 1.5)])
def test_an_impossible_share_is_refused(n_gpus: int, share: float) -> None:
    with pytest.raises(InputError, match=r"a share must be in \(0, 1\]"):
        Simulator(uniform_cluster(1, gpus_per_node=2), [Job("a", 0, n_gpus, 10.0, gpu_share=share)],
                  Fifo())


def test_the_check_refuses_an_overfull_gpu_and_a_live_cluster() -> None:
    sim = Simulator(uniform_cluster(1, gpus_per_node=1),
                    [_share("a", 0, 0.6), _share("b", 0, 0.5)], Fifo())
    sim.start()
    sim.step()  # a starts; b waits
    assert sim.allocation.owner[0] == SLICED
    too_much = Decisions(start=(Start("b", (0,)),))
    with pytest.raises(InvalidDecisionError, match=r"GPU 0 has no room for 0\.5"):
        check_decisions(sim.view, too_much, "x", sim.now, support=EngineSupport(
            forking_refused=None, sharing_refused=None, fractions_refused=None))
    with pytest.raises(InvalidDecisionError, match="fractional job runs only in the simulator"):
        check_decisions(sim.view, too_much, "x", sim.now, support=LIVE_CLUSTER)


def test_co_located_shares_are_priced_by_the_measured_pair_slowdown() -> None:
    """Under the network model two tenants slow each other down; alone, a share runs at speed."""
    topology = uniform_cluster(1, gpus_per_node=1)
    pair = _records(topology, [_share("a", 0, 0.5), _share("b", 0, 0.5)], perf=NetworkPerf())
    alone = _records(topology, [_share("a", 0, 0.5)], perf=NetworkPerf())
    assert pair["a"].run_time_s > alone["a"].run_time_s
    assert pair["b"].run_time_s > alone["a"].run_time_s


def test_tentative_slices_do_not_touch_the_allocation() -> None:
    allocation = Allocation(uniform_cluster(1, gpus_per_node=2))
    allocation.allocate_slices("a", 0, 400)
    tentative = TentativeAllocation(allocation)
    tentative.take_slices(0, 600)
    assert tentative.sliced_gpu_for(1) is None
    tentative.take_slices(1, 100)
    assert tentative.sliced_gpu_for(900) == 1
    assert tentative.n_free == 0
    assert (allocation.room, allocation.n_free) == ({0: 600}, 1)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.7, 1.0]),
                          st.integers(1, 80)), min_size=1, max_size=30),
       st.booleans())
def test_shares_never_overfill_a_gpu_and_every_job_finishes(
        specs: list[tuple[int, float, int]], backfill: bool) -> None:
    jobs = [Job(f"j{i}", float(t), 1, float(d), gpu_share=s) for i, (t, s, d) in enumerate(specs)]
    checker = InvariantChecker()
    result = simulate(uniform_cluster(1, gpus_per_node=2), jobs, Fifo(backfill=backfill),
                      observers=[checker])
    assert len(result.records) == len(jobs)
    assert checker.n_checks > 0
    work = sum(job.gpu_seconds for job in jobs)
    assert sum(r.gpu_s for r in result.records) == pytest.approx(work)


def test_a_forecast_goes_on_from_a_split_gpu() -> None:
    """A snapshot of two halves sharing a GPU resumes with them on it: the 0.6 job waits for both."""
    jobs = [_share("a", 0, 0.5), _share("b", 0, 0.5), _share("c", 0, 0.6, duration=50.0)]
    sim = Simulator(uniform_cluster(1, gpus_per_node=1), jobs, Fifo())
    sim.start()
    sim.step()
    forecast = forward(snapshot_of(sim, predictions="exact"))
    assert {(j.job_id, j.status, j.start_s, j.finish_s) for j in forecast.jobs} == {
        ("a", "running", 0.0, 100.0), ("b", "running", 0.0, 100.0), ("c", "pending", 100.0, 150.0)}
