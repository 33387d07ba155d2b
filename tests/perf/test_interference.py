"""Interference of jobs sharing a node: measured pairs, the fitted fallback, the model."""

from __future__ import annotations

import numpy as np
import pytest

from rackwise.cluster.topology import uniform_cluster
from rackwise.perf.config import PerfConfig
from rackwise.perf.interference import Interference
from rackwise.perf.model import NetworkPerf
from rackwise.perf.throughput import default_table
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

TABLE = default_table()
R18_16 = "ResNet-18 (batch size 16)"
R18_256 = "ResNet-18 (batch size 256)"


def test_measured_pair_slowdown_by_hand() -> None:
    # table: alone 32.353384 steps/s, beside ResNet-18 bs256 24.454648 steps/s
    model = Interference(TABLE)
    expected = 1.0 - 24.45464779058787 / 32.353384328946916
    assert model.measured_slowdown(R18_16, R18_256, "v100") == pytest.approx(expected)
    assert model.slowdown(R18_16, R18_256, "v100") == pytest.approx(expected)


def test_fitted_fallback_for_unmeasured_pairs() -> None:
    model = Interference(TABLE)
    assert model.measured_slowdown("GPT-2 XL", R18_16, "v100") is None
    fitted = model.slowdown("GPT-2 XL", "BERT-Large", "v100")
    # both unknown: the average slowdown over all measured pairs
    losses = [1 - own / TABLE.isolated["v100"][(a, 1)]
              for (a, _), (own, _) in TABLE.pairs["v100"].items()]
    assert fitted == pytest.approx(sum(max(0.0, x) for x in losses) / len(losses))
    # a GPU type without pairs borrows V100's fit
    assert model.slowdown("GPT-2 XL", "BERT-Large", "h100") == pytest.approx(fitted)
    assert 0.0 <= model.fitted_slowdown(R18_256, R18_16, "k80") <= 1.0


def test_neighbour_factor() -> None:
    model = Interference(TABLE, scale=0.5)
    s = model.slowdown(R18_16, R18_256, "v100")
    assert model.neighbour_factor(R18_16, R18_256, "v100", 2, 8) == pytest.approx(1 - 0.5 * s * 2 / 8)


def _state(job: Job, gpu_ids: tuple[int, ...]) -> JobState:
    state = JobState(job)
    state.gpu_ids = gpu_ids
    return state


def test_co_located_jobs_slow_each_other_and_recover() -> None:
    topology = uniform_cluster(2, 8, 2)
    perf = NetworkPerf(PerfConfig(interference_scale=1.0), assign_models=False)
    a, b, c = perf.prepare([Job("a", 0, 1, 1.0, model=R18_16), Job("b", 0, 1, 1.0, model=R18_256),
                            Job("c", 0, 1, 1.0, model=R18_16)], topology, np.random.default_rng(0))
    alone = TABLE.measured(R18_16, 1, "v100")
    running = {"a": _state(a, (0,))}
    assert perf.rates(running, ["a"]) == {"a": pytest.approx(alone)}
    running["b"] = _state(b, (1,))
    running["c"] = _state(c, (8,))  # the other node: a bystander
    rates = perf.rates(running, ["b", "c"])
    s = Interference(TABLE).slowdown(R18_16, R18_256, "v100")
    assert rates["a"] == pytest.approx(alone * (1 - s / 8))  # one of 8 GPUs taken by b
    assert rates["c"] == pytest.approx(alone)
    # the what-if question agrees with the engine's answer
    assert perf.rate(a, (0,), running) == pytest.approx(rates["a"])
    del running["b"]
    rates = perf.rates(running, ["b"])
    assert rates == {"a": alone}  # exactly back, and c was not asked about


def test_scale_zero_turns_interference_off() -> None:
    topology = uniform_cluster(1, 8, 1)
    perf = NetworkPerf(PerfConfig(interference_scale=0.0), assign_models=False)
    a, b = perf.prepare([Job("a", 0, 1, 1.0, model=R18_16), Job("b", 0, 1, 1.0, model=R18_256)],
                        topology, np.random.default_rng(0))
    running = {"a": _state(a, (0,)), "b": _state(b, (1,))}
    rates = perf.rates(running, ["a", "b"])
    assert rates["a"] == pytest.approx(TABLE.measured(R18_16, 1, "v100"))
