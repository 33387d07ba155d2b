"""Space sharing: two jobs on the same GPUs, from the LP to the engine (papers/gavel.md §3.1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invariant_checker import InvariantChecker
from rackwise.engine.checks import check_decisions
from rackwise.engine.snapshot import from_json, to_json
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError, InvalidDecisionError
from rackwise.forecast.forward import forward
from rackwise.forecast.from_sim import snapshot_of
from rackwise.perf.model import NetworkPerf
from rackwise.policies.base import BasePolicy, Decisions, Start
from rackwise.policies.gavel import Gavel
from rackwise.policies.parts import lp
from rackwise.sim.engine import Simulator, simulate
from rackwise.workload.job import Job

from .hetero_support import TablePerf, cluster, job

ONE_GPU = cluster(("v100", 1, 1))


@dataclass
class PairedPerf(TablePerf):
    """`TablePerf` plus a fixed share of its speed each model keeps beside another."""

    factors: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def sharing_factor(self, job: Job, partner: Job, gpu_type: str) -> float:
        return self.factors[(job.model or "", partner.model or "")]


def paired(a: float, b: float, **rates: float) -> PairedPerf:
    """Models "a" and "b" at 1 iteration/s on V100 (unless given), keeping a and b beside each other."""
    table = {(m, "v100"): rates.get(m, 1.0) for m in ("a", "b", "c")}
    shares = {("a", "b"): a, ("b", "a"): b}
    shares.update({(x, y): 0.5 for x in "abc" for y in "abc" if (x, y) not in shares})
    return PairedPerf(table, factors=shares)


@dataclass(kw_only=True)
class Scripted(BasePolicy):
    """Starts what it is told at t=0, in order."""

    name: ClassVar[str] = "scripted"
    starts: tuple[Start, ...] = ()

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return Decisions(start=self.starts) if now == 0.0 else Decisions()


# ------------------------------------------------------------------------------ the LP


def _pairs(factor_a: float, factor_b: float) -> lp.Pairs:
    return lp.Pairs(np.array([[0, 1]]), np.array([[[factor_a], [factor_b]]]))


def test_lp_gives_the_gpu_to_a_pair_that_gains() -> None:
    """Two jobs, one GPU: alone each gets half; sharing at 0.7 each gives both 0.7."""
    rates, n_gpus, capacity = np.ones((2, 1)), np.ones(2), np.array([1.0])
    x, y = lp.max_min_shared(rates.copy(), rates, n_gpus, capacity, _pairs(0.7, 0.7))
    assert x == pytest.approx(np.zeros((2, 1)), abs=1e-6)
    assert y == pytest.approx(np.ones((1, 1)), abs=1e-6)


def test_lp_keeps_jobs_apart_when_sharing_loses() -> None:
    rates, n_gpus, capacity = np.ones((2, 1)), np.ones(2), np.array([1.0])
    x, y = lp.max_min_shared(rates.copy(), rates, n_gpus, capacity, _pairs(0.4, 0.4))
    assert x == pytest.approx(np.full((2, 1), 0.5), abs=1e-6)
    assert y == pytest.approx(np.zeros((1, 1)), abs=1e-6)


def test_lp_mixes_pair_and_solo_time_for_an_uneven_pair() -> None:
    """Factors 0.9 / 0.3: both reach t with X_b = (1 - 0.9 y... ) solved by hand below.

    Maximise t = min(x_a + 0.9 y, x_b + 0.3 y) with x_a + x_b + y <= 1: at the
    optimum x_a = 0, x_b = 0.6 y, so 0.9 y = 0.9 y and 1.6 y = 1: y = 0.625, t = 0.5625.
    """
    rates, n_gpus, capacity = np.ones((2, 1)), np.ones(2), np.array([1.0])
    x, y = lp.max_min_shared(rates.copy(), rates, n_gpus, capacity, _pairs(0.9, 0.3),
                             second_stage=False)
    level = min(x[0, 0] + 0.9 * y[0, 0], x[1, 0] + 0.3 * y[0, 0])
    assert level == pytest.approx(0.5625, abs=1e-6)
    assert y[0, 0] == pytest.approx(0.625, abs=1e-6)


def test_lp_without_pairs_is_max_min() -> None:
    rng = np.random.default_rng(3)
    rates = rng.uniform(0.5, 2.0, (6, 2))
    n_gpus, capacity = np.ones(6), np.array([2.0, 3.0])
    none = lp.Pairs(np.zeros((0, 2), dtype=int), np.zeros((0, 2, 2)))
    x, y = lp.max_min_shared(rates, rates, n_gpus, capacity, none)
    assert np.array_equal(x, lp.max_min(rates, rates, n_gpus, capacity)) and y.shape == (0, 2)


# -------------------------------------------------------------------------- the engine


def test_pair_runs_at_its_factors_and_the_survivor_keeps_the_gpus() -> None:
    """a (30 s) and b (60 s) share one GPU at 0.6: a ends at 50 s; b has 30 s left, done at 80 s."""
    owners: list[tuple[float, str | None]] = []
    policy = Scripted(starts=(Start("A", (0,)), Start("B", (0,), beside="A")))
    result = simulate(ONE_GPU, [job("A", "a", 30), job("B", "b", 60)], policy,
                      perf=paired(0.6, 0.6),
                      observers=[lambda s: owners.append((s.now, s.allocation.owner[0]))])
    finish = {r.job_id: r.finish_time for r in result.records}
    assert finish["A"] == pytest.approx(50.0) and finish["B"] == pytest.approx(80.0)
    assert owners == [(0.0, "A"), (pytest.approx(50.0), "B"), (pytest.approx(80.0), None)]
    assert result.timeline.busy_gpus[0] == 1  # one GPU busy, not two


@pytest.mark.parametrize(("starts", "message"), [
    ((Start("B", (0,), beside="A"),), "it is not running"),
    ((Start("A", (0,)), Start("B", (1,), beside="A")), "exactly [0]"),
    ((Start("A", (0,)), Start("B", (0,), beside="A"), Start("C", (0,), beside="A")),
     "only two unforked jobs"),
    ((Start("A", (0,)), Start("B", (0,), beside="B")), "it is not running"),
])
def test_invalid_pairs_are_refused(starts: tuple[Start, ...], message: str) -> None:
    jobs = [job("A", "a", 30), job("B", "b", 30), job("C", "c", 30)]
    with pytest.raises(InvalidDecisionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        simulate(cluster(("v100", 1, 2)), jobs, Scripted(starts=starts), perf=paired(0.6, 0.6))


def test_a_model_without_paired_throughputs_refuses_pairs() -> None:
    policy = Scripted(starts=(Start("A", (0,)), Start("B", (0,), beside="A")))
    with pytest.raises(InvalidDecisionError, match="no paired throughputs"):
        simulate(ONE_GPU, [job("A", "a", 30), job("B", "b", 30)], policy,
                 perf=TablePerf({("a", "v100"): 1.0, ("b", "v100"): 1.0}))


def test_real_clusters_refuse_pairs() -> None:
    sim = Simulator(ONE_GPU, [job("A", "a", 30), job("B", "b", 30)],
                    Scripted(starts=(Start("A", (0,)),)), perf=paired(0.6, 0.6))
    sim.start()
    sim.step()
    with pytest.raises(InvalidDecisionError, match="only in the simulator"):
        check_decisions(sim.view, Decisions(start=(Start("B", (0,), beside="A"),)), "x", sim.now)


def test_a_forecast_goes_on_from_a_running_pair() -> None:
    """A snapshot with a pair round-trips through JSON and forecasts what the run did."""
    jobs = [job("A", "a", 100), job("B", "b", 100)]
    policy = Gavel(space_sharing=True, round_s=50.0)
    sim = Simulator(ONE_GPU, jobs, policy, perf=paired(0.8, 0.8))
    sim.start()
    sim.step()
    snapshot = snapshot_of(sim, predictions="exact")
    finish = {f.job_id: f.finish_s for f in forward(snapshot, perf=paired(0.8, 0.8)).jobs}
    assert finish == pytest.approx({"A": 125.0, "B": 125.0})
    assert {s.job_id: s.partner for s in snapshot.running} == {"A": "B", "B": "A"}
    again = from_json(to_json(snapshot))
    assert {s.job_id: s.partner for s in again.running} == {"A": "B", "B": "A"}
    broken = to_json(snapshot)
    broken["running"][1]["partner"] = "C"
    with pytest.raises(InputError, match="partner"):
        from_json(broken)


# ---------------------------------------------------------------------------- Gavel


def test_gavel_shares_the_gpu_when_the_pair_gains() -> None:
    """Two 100 s jobs, one GPU: shared at 0.8 both end at 125 s; taking turns, the last at 200 s."""
    jobs = [job("A", "a", 100), job("B", "b", 100)]
    shared = simulate(ONE_GPU, jobs, Gavel(space_sharing=True, round_s=50.0), perf=paired(0.8, 0.8))
    assert {r.job_id: r.finish_time for r in shared.records} == pytest.approx({"A": 125, "B": 125})
    assert all(r.n_preemptions == 0 for r in shared.records)
    apart = simulate(ONE_GPU, jobs, Gavel(space_sharing=True, round_s=50.0), perf=paired(0.4, 0.4))
    assert max(r.finish_time for r in apart.records) == pytest.approx(200.0)


def test_gavel_space_sharing_needs_a_model_with_pairs_and_max_min() -> None:
    with pytest.raises(InputError, match="no paired throughputs"):
        simulate(ONE_GPU, [job("A", "a", 10)], Gavel(space_sharing=True),
                 perf=TablePerf({("a", "v100"): 1.0}))
    with pytest.raises(InputError, match="max_min_fairness"):
        Gavel(space_sharing=True, objective="min_makespan")


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.sampled_from([1, 1, 1, 2, 4]), min_size=2, max_size=14),
       gaps=st.lists(st.floats(0, 2000), min_size=14, max_size=14),
       lengths=st.lists(st.floats(60, 20_000), min_size=14, max_size=14),
       share_max_gpus=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_gavel_with_space_sharing_keeps_the_invariants(sizes: list[int], gaps: list[float],
                                                       lengths: list[float], share_max_gpus: int,
                                                       seed: int) -> None:
    """Network model, heterogeneous cluster: pairs form and dissolve, no GPU holds a third job,
    every job finishes, and the run repeats bit for bit."""
    topology = cluster(("v100", 1, 4), ("p100", 1, 2), ("k80", 2, 2))
    submit = np.cumsum(gaps[:len(sizes)])
    jobs = [Job(f"j{i}", float(submit[i]), n, lengths[i]) for i, n in enumerate(sizes)]

    def run() -> tuple[object, InvariantChecker]:
        checker = InvariantChecker()
        policy = Gavel(space_sharing=True, share_max_gpus=share_max_gpus, round_s=300.0)
        sim = Simulator(topology, jobs, policy, perf=NetworkPerf(), seed=seed, observers=[checker])
        return sim.run(), checker

    result, _ = run()
    assert sorted(r.job_id for r in result.records) == sorted(j.job_id for j in jobs)  # type: ignore[attr-defined]
    again, _ = run()
    assert again.records == result.records  # type: ignore[attr-defined]


def test_gavel_pairs_jobs_on_a_busy_window_with_the_network_model() -> None:
    """On a queue longer than the cluster, some jobs do share GPUs (the feature is not inert)."""
    topology = cluster(("v100", 1, 2), ("k80", 1, 2))
    jobs = [Job(f"j{i}", 10.0 * i, 1, 3600.0 * (1 + i % 3)) for i in range(10)]
    checker = InvariantChecker()
    Simulator(topology, jobs, Gavel(space_sharing=True), perf=NetworkPerf(),
              observers=[checker]).run()
    assert checker.shared
