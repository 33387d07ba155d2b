"""NetworkPerf prices mixed-parallel jobs on their worker mapping (issue 6, A-SRPT).

Worker ``v`` of the job graph runs on ``gpu_ids[v]``; a mapping that keeps the
heavy edges inside a server must run faster than one that cuts them, while
data-parallel and one-GPU jobs keep the numbers they had before the change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_helpers import placed, prepared

from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import Links, uniform_cluster
from rackwise.engine.view import ClusterView
from rackwise.perf.comm import mapped_comm_s
from rackwise.perf.config import PerfConfig
from rackwise.perf.graph_placement import place_graph, placement_cost
from rackwise.perf.job_graph import build_job_graph
from rackwise.perf.model import NetworkPerf
from rackwise.policies.asrpt import AsrptOracle
from rackwise.policies.base import BasePolicy, Decisions, Start
from rackwise.sim.engine import simulate
from rackwise.workload.job import Job, Parallelism
from rackwise.workload.state import JobState

ACT = 1024 * 1600 * 2.0  # GPT-2 XL: one micro-batch's activations, bytes
R50 = "ResNet-50 (batch size 64)"
QUIET = PerfConfig(interference_scale=0.0)


def test_a_two_stage_pipeline_over_two_servers_by_hand() -> None:
    topology = uniform_cluster(2, 4, 2)  # one rack of two 4-GPU servers; NVLink 1200, NIC 100 Gb/s
    perf = NetworkPerf(QUIET, assign_models=False)
    (job,) = prepared(perf, topology, Job("p", 0, 2, 1.0, model="GPT-2 XL",
                                           parallelism=Parallelism(pipeline=2)))
    stage_bytes = 8 * ACT  # mu S_act / t, sent both ways (activations, their gradients)
    across = stage_bytes * 8 / 100e9 + 2 * 3e-6  # two hops at the rack's latency
    inside = stage_bytes * 8 / 1200e9 + 2 * 1e-6  # the partitioner's mapping: one server
    b = perf.iteration_breakdown(job, (0, 4), {})
    compute = 6 * 1.542e9 * 4096 / (125e12 * 0.35)  # FLOP-estimated, per GPU
    assert b.compute_s == pytest.approx(compute * (1 + 1 / 8))  # (p-1)/m pipeline bubble
    assert b.comm_s == pytest.approx(across)
    assert b.consolidated_comm_s == pytest.approx(inside)
    assert b.comm_extra_s == pytest.approx(across - inside)
    assert b.iteration_s == pytest.approx(compute * (1 + 1 / 8) + across)
    # the engine's path gives the same rate and charges the same communication
    running = {"p": placed(job, (0, 4))}
    assert perf.rates(running, ["p"])["p"] == pytest.approx(1 / b.iteration_s)
    assert perf.comm_per_iter_s("p") == pytest.approx((across, across - inside))


def test_a_tensor_ring_cut_twice_or_four_times_by_hand() -> None:
    topology = uniform_cluster(2, 4, 2)
    perf = NetworkPerf(QUIET, assign_models=False)
    (job,) = prepared(perf, topology, Job("t", 0, 4, 1.0, model="GPT-2 XL",
                                           parallelism=Parallelism(tensor=4)))
    edge = 4 * 48 * 8 * 2 * (3 / 4) * ACT  # bytes per tensor-ring edge, 4 (L/p) mu 2(t-1)/t S_act
    latency = 6 * 3e-6  # 2(t-1) hops through the rack switch
    # blocks of two: the ring leaves each server once and comes back once
    blocks = perf.iteration_breakdown(job, (0, 1, 4, 5), {})
    assert blocks.comm_s == pytest.approx(edge * 8 / 100e9 + latency)
    # alternating: every ring edge crosses, each NIC carries the ring twice each way
    alternating = perf.iteration_breakdown(job, (0, 4, 1, 5), {})
    assert alternating.comm_s == pytest.approx(2 * edge * 8 / 100e9 + latency)
    # one server: the whole ring over NVLink, as the data-parallel ring formula says
    one = perf.iteration_breakdown(job, (0, 1, 2, 3), {})
    assert one.comm_s == pytest.approx(2 * 3 / 4 * (edge / (2 * 3 / 4)) * 8 / 1200e9 + 6 * 1e-6)
    assert one.comm_s == pytest.approx(blocks.consolidated_comm_s)


def test_the_partitioner_s_mapping_beats_an_interleaved_one_on_the_same_gpus() -> None:
    topology = uniform_cluster(2, 4, 2)
    perf = NetworkPerf(QUIET, assign_models=False)
    (job,) = prepared(perf, topology, Job("j", 0, 8, 1.0, model="GPT-2 XL",
                                           parallelism=Parallelism(tensor=4, pipeline=2)))
    placed = place_graph(Allocation(topology), build_job_graph(job))
    assert placed is not None
    good = placed.gpu_ids
    bad = (0, 4, 1, 5, 2, 6, 3, 7)  # each tensor group split across the two servers
    assert sorted(good) == sorted(bad)
    fast = perf.iteration_breakdown(job, good, {})
    slow = perf.iteration_breakdown(job, bad, {})
    assert fast.compute_s == slow.compute_s
    assert fast.comm_s < slow.comm_s / 10  # tensor traffic over NVLink, not the NIC
    assert fast.comm_extra_s == 0.0 and slow.comm_extra_s > 0.0
    assert perf.rate(job, good, {}) > perf.rate(job, bad, {})
    # the model prices exactly placement_cost's traffic (one definition of it)
    phases = placement_cost(build_job_graph(job), bad, topology).phases
    assert slow.comm_s == pytest.approx(mapped_comm_s(
        [(p.hops, p.level, p.gpu_bytes, p.nic_bytes, p.rack_bytes) for p in phases],
        topology.links, (1e-6, 3e-6, 1e-5)))


@dataclass(kw_only=True)
class _Pinned(BasePolicy):
    """Starts every pending job on one fixed, ordered GPU tuple (a deliberately bad mapping)."""

    name: ClassVar[str] = "pinned-test"
    gpu_ids: tuple[int, ...] = ()

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return Decisions(start=tuple(Start(s.job_id, self.gpu_ids) for s in view.pending.values()))


def test_in_a_simulation_graph_placement_finishes_sooner_than_an_interleaved_mapping() -> None:
    topology = uniform_cluster(2, 4, 2)
    job = Job("j", 0.0, 8, 3600.0, model="GPT-2 XL", parallelism=Parallelism(tensor=4, pipeline=2))
    graph = simulate(topology, [job], AsrptOracle(), perf=NetworkPerf(QUIET), seed=0)
    pinned = simulate(topology, [job], _Pinned(gpu_ids=(0, 4, 1, 5, 2, 6, 3, 7)),
                      perf=NetworkPerf(QUIET), seed=0)
    (fast,), (slow,) = graph.records, pinned.records  # both on all 8 GPUs of the cluster
    # the trace duration is the job's time on the partitioner's mapping of an empty cluster
    assert fast.jct_s == pytest.approx(3600.0)
    assert slow.jct_s > 1.5 * fast.jct_s
    assert fast.comm_extra_s == 0.0 < slow.comm_extra_s
    assert fast.comm_s < slow.comm_s


def test_mixed_jobs_across_racks_share_the_uplink_and_recover() -> None:
    # two racks of one 4-GPU server; 50 Gb/s uplinks, slower than the 100 Gb/s spine
    topology = uniform_cluster(2, 4, 1, links=Links(rack_uplink_gbps=50.0))
    perf = NetworkPerf(QUIET, assign_models=False)
    par = Parallelism(tensor=2, pipeline=2)
    a, b = prepared(perf, topology, Job("a", 0, 4, 1.0, model="GPT-2 XL", parallelism=par),
                     Job("b", 0, 4, 1.0, model="GPT-2 XL", parallelism=par))
    # a stage per rack: tensor pairs inside servers, the pipeline crosses racks
    running = {"a": placed(a, (0, 1, 4, 5))}
    alone = perf.rates(running, ["a"])["a"]
    stage_bytes = 8 * ACT / 2  # mu S_act / t, per pipeline edge; two edges leave each rack
    tensor_bytes = 4 * 24 * 8 * 2 * (1 / 2) * ACT
    solo = perf.iteration_breakdown(a, (0, 1, 4, 5), {})
    expected = (tensor_bytes * 8 / 1200e9 + 2 * 1e-6       # tensor pairs over NVLink
                + 2 * stage_bytes * 8 / 50e9 + 2 * 1e-5)    # the pipeline through the uplink
    assert solo.comm_s == pytest.approx(expected)
    assert solo.bandwidth_gbps == 50.0 and solo.bottleneck == "rack-uplink"
    assert alone == pytest.approx(1 / solo.iteration_s)
    running["b"] = placed(b, (2, 3, 6, 7))
    both = perf.rates(running, ["b"])
    assert set(both) == {"a", "b"}
    shared = perf.iteration_breakdown(a, running["a"].gpu_ids, running)
    assert shared.bandwidth_gbps == 25.0
    assert shared.comm_s == pytest.approx(expected + 2 * stage_bytes * 8 * (1 / 25e9 - 1 / 50e9))
    assert both["a"] == pytest.approx(1 / shared.iteration_s) and both["a"] < alone
    assert perf.comm_per_iter_s("a")[0] == pytest.approx(shared.comm_s)
    # a fresh model without the live index agrees
    fresh = NetworkPerf(QUIET, assign_models=False)
    prepared(fresh, topology, a, b)
    assert fresh.rate(a, running["a"].gpu_ids, running) == pytest.approx(both["a"])
    del running["b"]
    assert perf.rates(running, ["b"]) == {"a": pytest.approx(alone)}


def test_data_parallel_and_one_gpu_rates_are_unchanged() -> None:
    # Figures computed with the model before it learned about worker mappings.
    topology = uniform_cluster(4, 8, 2, links=Links(rack_uplink_gbps=50.0))
    perf = NetworkPerf()
    jobs = prepared(perf, topology,
                     Job("a", 0, 8, 100.0, model=R50), Job("b", 0, 16, 100.0, model="GPT-2 XL"),
                     Job("c", 0, 4, 100.0, model="BERT-Large", parallelism=Parallelism(data=4)),
                     Job("d", 0, 1, 100.0, model="A3C"),
                     Job("e", 0, 2, 100.0, model="Transformer (batch size 64)"))
    a, b, c, d, e = jobs
    assert [j.total_iters for j in jobs] == pytest.approx(
        [1730.3172756892168, 75.25084827271225, 505.56979015386946, 717.5767179667987,
         1587.6496488983057], rel=1e-12)
    assert perf.rate(a, tuple(range(8)), {}) == pytest.approx(17.303172756892167, rel=1e-12)
    assert perf.rate(a, (0, 1, 2, 3, 8, 9, 10, 11), {}) == pytest.approx(14.09200904433389, rel=1e-12)
    assert perf.rate(a, (0, 1, 2, 3, 16, 17, 18, 19), {}) == pytest.approx(11.710122584563491, rel=1e-12)
    assert perf.rate(b, tuple(range(4)) + tuple(range(16, 28)), {}) == pytest.approx(
        0.5581295640566705, rel=1e-12)
    assert perf.rate(c, (0, 8, 16, 24), {}) == pytest.approx(2.8228601993810356, rel=1e-12)
    assert perf.rate(e, (5, 30), {}) == pytest.approx(10.537682976987627, rel=1e-12)
    running = {"a": placed(a, (0, 1, 2, 3, 16, 17, 18, 19)),
               "b": placed(b, tuple(range(4, 8)) + tuple(range(20, 32))),
               "c": placed(c, (8, 9, 24, 25)), "d": placed(d, (10,))}
    rates = perf.rates(running, list(running))
    before = {"a": (6.877763550031662, (0.086156, 0.08494733333333333)),
              "b": (0.268938167112971, (2.7759, 2.31321)),
              "c": (1.4314713079364534, (0.48966, 0.482854)),
              "d": (6.9870289356641555, (0.0, 0.0))}
    for job_id, (rate, comm) in before.items():
        assert rates[job_id] == pytest.approx(rate, rel=1e-12)
        assert perf.comm_per_iter_s(job_id) == pytest.approx(comm, rel=1e-12)


def _partitioned_step_s(job: Job, topology) -> float:  # type: ignore[no-untyped-def]
    """Seconds per step of ``job`` alone where the partitioner maps it on an empty ``topology``."""
    perf = NetworkPerf()
    perf.bind(topology)
    best = place_graph(Allocation(topology), build_job_graph(job, job.parallelism))
    assert best is not None
    return perf.iteration_breakdown(job, best.gpu_ids, {}).iteration_s


@pytest.mark.parametrize("par", [Parallelism(tensor=8), Parallelism(pipeline=8),
                                 Parallelism(data=2, tensor=2, pipeline=2), Parallelism(pipeline=3)],
                         ids=str)
def test_a_mixed_job_s_sensitivity_is_one_server_against_two_of_a_rack(par: Parallelism) -> None:
    n = par.n_gpus
    (job,) = prepared(NetworkPerf(), uniform_cluster(4, 8, 4),
                      Job("m", 0, n, 3600.0, model="GPT-2 XL", parallelism=par))
    one = _partitioned_step_s(job, uniform_cluster(1, n, 1))
    two = _partitioned_step_s(job, uniform_cluster(2, -(-n // 2), 2))
    assert 0.0 <= job.comm_sensitivity < 1.0
    assert job.comm_sensitivity == pytest.approx(1.0 - one / two, rel=1e-9, abs=1e-12)


def test_tensor_parallel_traffic_makes_a_job_more_sensitive_than_data_parallel() -> None:
    topology = uniform_cluster(4, 8, 4)
    tensor, data = prepared(NetworkPerf(), topology,
                            Job("t", 0, 8, 3600.0, model="GPT-2 XL", parallelism=Parallelism(tensor=8)),
                            Job("d", 0, 8, 3600.0, model="GPT-2 XL"))
    # one server against two: the tensor ring's activations cross the NIC every layer,
    # the data-parallel ring only its gradients once a step
    assert tensor.comm_sensitivity > data.comm_sensitivity > 0.0


MIXED_SPLITS = [None, Parallelism(tensor=2), Parallelism(pipeline=2), Parallelism(data=2, tensor=2),
                Parallelism(tensor=2, pipeline=2), Parallelism(tensor=4), Parallelism(data=2, pipeline=2)]
MIXED_MODELS = ["BERT-Large", "GPT-2 XL", "ResNet-18 (batch size 16)", "LM (batch size 5)"]


@st.composite
def mixed_start_stop_sequences(draw: st.DrawFn) -> list[tuple[str, str, Parallelism | None, tuple[int, ...]]]:
    """Starts and stops of data- and mixed-parallel jobs on 2 racks x 2 nodes x 4 GPUs."""
    free = list(range(16))
    running: dict[str, tuple[int, ...]] = {}
    steps: list[tuple[str, str, Parallelism | None, tuple[int, ...]]] = []
    for index in range(draw(st.integers(1, 20))):
        if running and (not free or draw(st.booleans())):
            job_id = draw(st.sampled_from(sorted(running)))
            free.extend(running.pop(job_id))
            steps.append((job_id, "", None, ()))
            continue
        par = draw(st.sampled_from(MIXED_SPLITS))
        n = draw(st.integers(1, 4)) if par is None else par.n_gpus
        if n > len(free):
            continue
        gpus = tuple(draw(st.permutations(sorted(free)))[:n])
        for gpu in gpus:
            free.remove(gpu)
        job_id = f"j{index}"
        running[job_id] = gpus
        # the job graph knows transformer shapes; data-parallel jobs take any model
        models = MIXED_MODELS if par is None else MIXED_MODELS[:2]
        steps.append((job_id, draw(st.sampled_from(models)), par, gpus))
    return steps


@settings(max_examples=60, deadline=None)
@given(mixed_start_stop_sequences())
def test_incremental_rates_and_communication_match_a_fresh_model(
        steps: list[tuple[str, str, Parallelism | None, tuple[int, ...]]]) -> None:
    topology = uniform_cluster(4, 4, 2, links=Links(rack_uplink_gbps=60.0))

    def bound() -> NetworkPerf:
        perf = NetworkPerf(PerfConfig(interference_scale=1.0), assign_models=False)
        perf.bind(topology)
        return perf

    perf = bound()
    running: dict[str, JobState] = {}
    rates: dict[str, float] = {}
    comm: dict[str, tuple[float, float]] = {}
    for job_id, model, par, gpus in steps:
        if gpus:
            running[job_id] = placed(Job(job_id, 0.0, len(gpus), 1.0, model=model, parallelism=par), gpus)
        else:
            del running[job_id]
            rates.pop(job_id)
        new = perf.rates(running, [job_id])
        rates.update(new)
        comm.update((other_id, perf.comm_per_iter_s(other_id)) for other_id in new)
        fresh = bound()
        for other_id, state in running.items():
            step = fresh.iteration_breakdown(state.job, state.gpu_ids, running)
            assert rates[other_id] == pytest.approx(step.throughput_iters_per_s, rel=1e-9)
            assert comm[other_id][0] == pytest.approx(step.comm_s, rel=1e-9, abs=1e-15)
            assert comm[other_id][1] == pytest.approx(step.comm_extra_s, rel=1e-9, abs=1e-15)
