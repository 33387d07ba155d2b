"""NetworkPerf: hand-computed steps, congestion, properties and whole simulations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from model_helpers import placed, prepared

from rackwise.cluster.topology import Links, Node, Topology, uniform_cluster
from rackwise.perf.base import IdealPerf
from rackwise.perf.catalogue import CATALOGUE
from rackwise.perf.config import PerfConfig
from rackwise.perf.model import NetworkPerf
from rackwise.perf.throughput import default_table
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import simulate
from rackwise.workload.job import Job, Parallelism
from rackwise.workload.state import JobState

TABLE = default_table()
R50 = "ResNet-50 (batch size 64)"


def test_spread_over_two_nodes_by_hand() -> None:
    topology = uniform_cluster(2, 8, 2)  # NVLink 1200 Gb/s, NIC 100 Gb/s
    perf = NetworkPerf(assign_models=False)
    (job,) = prepared(perf, topology, Job("a", 0, 8, 1.0, model=R50))
    grad_bits = 25.6e6 * 4 * 8
    inside = 14 / 8 * grad_bits / 1200e9 + 14 * 1e-6  # the all-reduce inside one server
    compute = 1 / 17.303172756892167 - inside
    across = 14 / 8 * grad_bits / 100e9 + 14 * 3e-6
    b = perf.iteration_breakdown(job, (0, 1, 2, 3, 8, 9, 10, 11), {})
    assert b.compute_s == pytest.approx(compute)
    assert b.comm_s == pytest.approx(across)
    assert b.iteration_s == pytest.approx(compute + across)
    assert b.bottleneck == "intra-rack" and b.bandwidth_gbps == 100.0 and b.level == 1
    assert b.consolidated_iteration_s == pytest.approx(1 / 17.303172756892167)
    assert b.comm_extra_s == pytest.approx(across - inside)
    assert b.slowdown > 1.0


def test_single_gpu_has_no_communication() -> None:
    topology = uniform_cluster(1, 8, 1)
    perf = NetworkPerf(assign_models=False)
    (job,) = prepared(perf, topology, Job("a", 0, 1, 1.0, model="A3C"))
    b = perf.iteration_breakdown(job, (3,), {})
    assert b.comm_s == 0.0 and b.bottleneck == "none"
    assert b.throughput_iters_per_s == pytest.approx(TABLE.measured("A3C", 1, "v100"))


def test_flop_estimated_model_by_hand() -> None:
    topology = uniform_cluster(1, 8, 1)
    cfg = PerfConfig(interference_scale=0.0)
    perf = NetworkPerf(cfg, assign_models=False)
    (job,) = prepared(perf, topology, Job("a", 0, 1, 1.0, model="BERT-Large"))
    # 6 x 340e6 params x 4096 tokens / (125 TFLOP/s x 0.35)
    assert perf.rate(job, (0,), {}) == pytest.approx(125e12 * 0.35 / (6 * 340e6 * 4096))


def test_mixed_gpu_types_run_at_the_slowest() -> None:
    nodes = (Node(0, 0, "v100", 4, 0), Node(1, 0, "k80", 4, 4))
    topology = Topology(nodes)
    perf = NetworkPerf(assign_models=False)
    (job,) = prepared(perf, topology, Job("a", 0, 2, 1.0, model=R50))
    mixed = perf.iteration_breakdown(job, (0, 4), {})
    k80 = perf.iteration_breakdown(job, (4, 5), {})
    assert mixed.compute_s == pytest.approx(k80.compute_s)


def test_tensor_and_pipeline_costs() -> None:
    topology = uniform_cluster(2, 8, 2)
    cfg = PerfConfig(interference_scale=0.0)
    perf = NetworkPerf(cfg, assign_models=False)
    plain, split = prepared(
        perf, topology, Job("p", 0, 8, 1.0, model="GPT-2 XL"),
        Job("s", 0, 8, 1.0, model="GPT-2 XL", parallelism=Parallelism(data=2, tensor=2, pipeline=2)))
    gpus = tuple(range(8))
    flat = perf.iteration_breakdown(plain, gpus, {})
    both = perf.iteration_breakdown(split, gpus, {})
    assert both.compute_s == pytest.approx(flat.compute_s * (1 + 1 / 8))  # (p-1)/m bubble
    # The traffic is the job graph's (perf/job_graph.py) on these GPUs, all in one
    # node: each pair (tensor pair, stage pair, replica pair) sends its edge's bytes both
    # ways over NVLink, one kind after the other. S_act = 1 x 1024 x 1600 x 2 B.
    act = 1024 * 1600 * 2.0
    tensor = 4 * (48 / 2) * 8 * 2 * (1 / 2) * act      # 4 (L/p) mu 2(t-1)/t S_act
    stages = 8 * act / 2                                # mu S_act / t
    replicas = 2 * (1 / 2) * CATALOGUE["GPT-2 XL"].gradient_bytes / 4  # 2(d-1)/d S / (p t)
    expected = sum(nbytes * 8 / 1200e9 + 2 * 1e-6 for nbytes in (tensor, stages, replicas))
    assert both.comm_s == pytest.approx(expected)
    assert both.comm_extra_s == 0.0  # the partitioner's consolidated mapping is this one


def test_congestion_shares_the_uplink_and_recovers() -> None:
    # two racks of one 8-GPU node; 50 Gb/s uplinks, slower than the 100 Gb/s spine
    topology = uniform_cluster(2, 8, 1, links=Links(rack_uplink_gbps=50.0))
    perf = NetworkPerf(PerfConfig(interference_scale=0.0), assign_models=False)
    a, b = prepared(perf, topology, Job("a", 0, 8, 1.0, model=R50), Job("b", 0, 8, 1.0, model=R50))
    running = {"a": placed(a, (0, 1, 2, 3, 8, 9, 10, 11))}
    alone = perf.rates(running, ["a"])["a"]
    assert perf.iteration_breakdown(a, running["a"].gpu_ids, {}).bandwidth_gbps == 50.0
    running["b"] = placed(b, (4, 5, 6, 7, 12, 13, 14, 15))
    both = perf.rates(running, ["b"])
    assert set(both) == {"a", "b"}
    shared = perf.iteration_breakdown(a, running["a"].gpu_ids, running)
    assert shared.bandwidth_gbps == 25.0 and shared.bottleneck == "rack-uplink"
    assert both["a"] == pytest.approx(1 / shared.iteration_s)
    assert both["a"] < alone
    del running["b"]
    assert perf.rates(running, ["b"]) == {"a": pytest.approx(alone)}


def test_an_uncongested_uplink_leaves_bystanders_alone() -> None:
    topology = uniform_cluster(2, 8, 1)  # default uplink 100 Gb/s, as fast as the spine
    perf = NetworkPerf(PerfConfig(interference_scale=0.0), assign_models=False)
    a, b = prepared(perf, topology, Job("a", 0, 2, 1.0, model=R50), Job("b", 0, 2, 1.0, model=R50))
    running = {"a": placed(a, (0, 8))}
    perf.rates(running, ["a"])
    running["b"] = placed(b, (1, 9))
    # two jobs share 100 Gb/s: 50 each, below the spine: both slow down
    assert set(perf.rates(running, ["b"])) == {"a", "b"}


def test_what_if_without_the_index_matches_the_index() -> None:
    topology = uniform_cluster(2, 8, 1, links=Links(rack_uplink_gbps=50.0))
    jobs = prepared(NetworkPerf(), topology, Job("a", 0, 8, 1.0, model=R50),
                     Job("b", 0, 8, 1.0, model=R50), Job("c", 0, 1, 1.0, model="A3C"))
    running = {"a": placed(jobs[0], (0, 1, 2, 3, 8, 9, 10, 11)),
               "b": placed(jobs[1], (4, 5, 6, 12, 13, 14, 15, 7))}
    live = NetworkPerf()
    live.prepare(jobs, topology, np.random.default_rng(0))
    live.rates(running, ["a", "b"])
    fresh = NetworkPerf()
    fresh.prepare(jobs, topology, np.random.default_rng(0))
    assert fresh.rate(jobs[2], (8,), running) == pytest.approx(live.rate(jobs[2], (8,), running))
    assert fresh.rate(jobs[0], running["a"].gpu_ids, running) == pytest.approx(
        live.rates(running, ["a"])["a"])


MODELS = st.sampled_from(sorted(n for n, s in CATALOGUE.items() if s.distributed))


@st.composite
def spread_cases(draw: st.DrawFn) -> tuple[Topology, str, tuple[int, ...], tuple[int, ...]]:
    """A uniform cluster, a model, a drawn placement and the tightest one of the same size."""
    racks = draw(st.integers(1, 3))
    per_rack = draw(st.integers(1, 4))
    per_node = draw(st.integers(1, 8))
    gpu_type = draw(st.sampled_from(("v100", "p100", "k80", "a100")))
    links = Links(intra_node_gbps=draw(st.sampled_from((126.0, 1200.0))),
                  intra_rack_gbps=draw(st.sampled_from((25.0, 100.0, 200.0))),
                  cross_rack_gbps=draw(st.sampled_from((10.0, 50.0, 100.0))))
    topology = uniform_cluster(racks * per_rack, per_node, per_rack, gpu_type, links)
    n = draw(st.integers(1, topology.n_gpus))
    drawn = tuple(draw(st.permutations(range(topology.n_gpus)))[:n])
    return topology, draw(MODELS), drawn, tuple(range(n))  # low ids fill node 0 first


@given(spread_cases())
def test_more_spread_is_never_faster_than_consolidated(
        case: tuple[Topology, str, tuple[int, ...], tuple[int, ...]]) -> None:
    topology, model, drawn, tight = case
    perf = NetworkPerf(assign_models=False)
    (job,) = prepared(perf, topology, Job("j", 0, len(drawn), 1.0, model=model))
    assert perf.rate(job, drawn, {}) <= perf.rate(job, tight, {}) * (1 + 1e-12)


@given(st.integers(1, 6), st.floats(10.0, 400.0))
def test_congestion_never_raises_a_rate(n_others: int, uplink_gbps: float) -> None:
    topology = uniform_cluster(2, 8, 1, links=Links(rack_uplink_gbps=uplink_gbps))
    perf = NetworkPerf(PerfConfig(interference_scale=0.0), assign_models=False)
    jobs = prepared(perf, topology, *[Job(str(i), 0, 2, 1.0, model=R50) for i in range(n_others + 1)])
    running: dict[str, JobState] = {}
    last = None
    for i, job in enumerate(jobs):
        running[job.job_id] = placed(job, (i, 8 + i))
        rate = perf.rates(running, [job.job_id]).get("0", last)
        if last is not None:
            assert rate is not None and rate <= last
        last = rate
        assert perf.iteration_breakdown(jobs[0], (0, 8), running).bandwidth_gbps <= 100.0


# ----------------------------------------------------------------- whole runs
def _records(topology: Topology, jobs: list[Job], perf: object, seed: int = 0) -> list:  # type: ignore[type-arg]
    return sorted(simulate(topology, jobs, make_policy("fifo"), perf=perf, seed=seed).records,
                  key=lambda r: r.job_id)


def test_a_trace_runs_to_the_end_under_fifo() -> None:
    topology = uniform_cluster(4, 4, 2)
    jobs = [Job(f"j{i}", 10.0 * i, n, 600.0 + 50 * i) for i, n in enumerate([1, 2, 4, 8, 1, 3, 16, 2, 1, 4])]
    records = _records(topology, jobs, NetworkPerf())
    assert len(records) == len(jobs)
    assert all(r.model is not None for r in records)
    assert all(r.comm_s >= r.comm_extra_s >= 0.0 for r in records)
    assert all(r.comm_s == 0.0 for r in records if r.n_gpus == 1)
    # same seed, same everything; the assignment shows in the records
    assert _records(topology, jobs, NetworkPerf()) == records


def test_a_job_over_two_racks_takes_longer_than_in_one_node() -> None:
    job = Job("j", 0.0, 8, 100.0, total_iters=5000.0, model="LM (batch size 20)")
    one_node = uniform_cluster(1, 8, 1)
    two_racks = uniform_cluster(2, 4, 1)
    (packed,) = _records(one_node, [job], NetworkPerf())
    (spread,) = _records(two_racks, [job], NetworkPerf())
    assert spread.n_racks == 2 and packed.n_nodes == 1
    rate = TABLE.measured("LM (batch size 20)", 8, "v100")
    assert rate is not None
    assert packed.run_time_s == pytest.approx(5000.0 / rate)
    assert spread.run_time_s > 2 * packed.run_time_s
    # communication accounting: iterations x the per-step figures of the breakdown
    perf = NetworkPerf()
    (prepared,) = perf.prepare([job], two_racks, np.random.default_rng(0))
    b = perf.iteration_breakdown(prepared, tuple(range(8)), {})
    assert spread.comm_s == pytest.approx(5000.0 * b.comm_s)
    assert spread.comm_extra_s == pytest.approx(5000.0 * b.comm_extra_s)
    assert packed.comm_extra_s == 0.0 and packed.comm_s > 0.0


def test_ideal_perf_reports_no_communication() -> None:
    topology = uniform_cluster(2, 4, 1)
    records = _records(topology, [Job("j", 0.0, 8, 100.0)], IdealPerf())
    assert records[0].comm_s == 0.0 and records[0].comm_extra_s == 0.0
    assert records[0].run_time_s == pytest.approx(100.0)


@st.composite
def start_stop_sequences(draw: st.DrawFn, n_gpus: int = 16) -> list[tuple[str, int, tuple[int, ...]]]:
    """Starts and stops of jobs of 1-4 GPUs, anywhere on a cluster of ``n_gpus`` GPUs."""
    free = list(range(n_gpus))
    running: dict[str, tuple[int, ...]] = {}
    steps: list[tuple[str, int, tuple[int, ...]]] = []
    for index in range(draw(st.integers(1, 25))):
        if running and (not free or draw(st.booleans())):
            job_id = draw(st.sampled_from(sorted(running)))
            free.extend(running.pop(job_id))
            steps.append((job_id, 0, ()))
            continue
        n = draw(st.integers(1, min(4, len(free))))
        gpus = tuple(draw(st.permutations(sorted(free)))[:n])
        for gpu in gpus:
            free.remove(gpu)
        job_id = f"j{index}"
        running[job_id] = gpus
        steps.append((job_id, draw(st.integers(0, len(MIXED) - 1)), gpus))
    return steps


MIXED = ["ResNet-18 (batch size 16)", "LM (batch size 5)", "BERT-Large", "A3C", "CycleGAN",
         "Transformer (batch size 64)"]


@given(start_stop_sequences())
def test_incremental_rates_match_a_fresh_model(steps: list[tuple[str, int, tuple[int, ...]]]) -> None:
    # 2 racks x 2 nodes x 4 GPUs
    _check_incremental_rates(uniform_cluster(4, 4, 2, links=Links(rack_uplink_gbps=60.0)), steps)


@given(start_stop_sequences(n_gpus=12))
def test_incremental_rates_match_a_fresh_model_over_three_racks(
        steps: list[tuple[str, int, tuple[int, ...]]]) -> None:
    # 3 racks x 2 nodes x 2 GPUs: jobs cross different pairs of racks, so a job's
    # bandwidth can be held by a rack other than the one whose share moved.
    _check_incremental_rates(uniform_cluster(6, 2, 2, links=Links(rack_uplink_gbps=60.0)), steps)


def _check_incremental_rates(topology: Topology, steps: list[tuple[str, int, tuple[int, ...]]]) -> None:
    perf = NetworkPerf(PerfConfig(interference_scale=1.0), assign_models=False)
    perf.bind(topology)
    running: dict[str, JobState] = {}
    known: dict[str, float] = {}
    for job_id, model, gpus in steps:
        if gpus:
            job = Job(job_id, 0.0, len(gpus), 1.0, model=MIXED[model])
            running[job_id] = placed(job, gpus)
        else:
            del running[job_id]
            known.pop(job_id)
        new = perf.rates(running, [job_id])
        assert (job_id in new) == bool(gpus)
        known.update(new)
        fresh = NetworkPerf(PerfConfig(interference_scale=1.0), assign_models=False)
        fresh.bind(topology)
        for other_id, state in running.items():
            expected = fresh.rate(state.job, state.gpu_ids, running)
            assert known[other_id] == pytest.approx(expected, rel=1e-9)


def test_a_spread_job_follows_its_slowest_node_only() -> None:
    # "s" spans nodes 0 and 1; neighbours come and go on both. Its rate is cached
    # as its slowest node's factor: a change on the other node must not move it,
    # and a leaver on the slowest node must hand the pace to the next slowest.
    topology = uniform_cluster(2, 4, 2)
    config = PerfConfig(interference_scale=1.0)
    perf = NetworkPerf(config, assign_models=False)
    perf.bind(topology)
    jobs = {"s": Job("s", 0, 2, 1.0, model=R50),
            "x": Job("x", 0, 2, 1.0, model="CycleGAN"),  # heavy neighbour on node 0
            "y": Job("y", 0, 1, 1.0, model="A3C"),  # light neighbour on node 1
            "z": Job("z", 0, 1, 1.0, model="LM (batch size 5)")}
    gpus = {"s": (0, 4), "x": (1, 2), "y": (5,), "z": (6,)}
    running: dict[str, JobState] = {}

    def change(job_id: str, start: bool) -> dict[str, float]:
        if start:
            running[job_id] = placed(jobs[job_id], gpus[job_id])
        else:
            del running[job_id]
        new = perf.rates(running, [job_id])
        fresh = NetworkPerf(config, assign_models=False)
        fresh.bind(topology)
        for other_id, state in running.items():
            expected = fresh.rate(state.job, state.gpu_ids, running)
            assert perf.rates(running, [other_id])[other_id] == pytest.approx(expected, rel=1e-12)
            assert perf.comm_per_iter_s(other_id) == pytest.approx(
                (fresh.iteration_breakdown(state.job, state.gpu_ids, running).comm_s,
                 fresh.iteration_breakdown(state.job, state.gpu_ids, running).comm_extra_s))
        return new

    change("s", True)
    assert "s" in change("x", True)  # node 0 is now the slowest
    assert "s" not in change("y", True)  # node 1 stays faster than node 0
    assert "s" not in change("z", True)
    assert "s" not in change("z", False)
    assert "s" in change("x", False)  # alone on node 0 again: node 1 sets the pace
    assert "s" in change("y", False)
    alone = NetworkPerf(config, assign_models=False)
    alone.bind(topology)
    # every neighbour gone: exactly the rate alone, no rounding left over
    assert perf.rates(running, ["s"]) == {"s": alone.rate(jobs["s"], gpus["s"], {})}


@given(st.lists(st.floats(allow_nan=True), min_size=1))
def test_the_index_takes_the_least_factor_as_min_does(values: list[float]) -> None:
    from rackwise.perf.running_index import _least

    # repr tells -0.0 from 0.0 and shows NaN: the same float `min` keeps (the first of equals)
    assert repr(_least(values)) == repr(min(values))
