"""Job graphs and the communication-minimising partitioner (a_srpt.md §2.3, §3.1, TC3-TC5)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import topologies

from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import uniform_cluster
from rackwise.perf.graph_placement import (
    _refine,
    choose_servers,
    place_graph,
    placement_cost,
)
from rackwise.perf.job_graph import (
    ModelShape,
    build_job_graph,
    edge_bytes,
    graph_kind,
    job_parallelism,
    mixed_parallel_graph,
    model_shape,
)
from rackwise.policies.parts.placement import first_fit
from rackwise.workload.job import Job, Parallelism

GB = 1e9


def _toy_graph() -> object:
    # TC3 toy weights: w_T = 10, w_D = 4, w_P = 1 GB.
    return mixed_parallel_graph(Parallelism(2, 2, 2), tp_bytes=10 * GB, pp_bytes=1 * GB,
                                dp_bytes=4 * GB)


def test_a_2x2x2_graph_has_four_edges_of_each_kind() -> None:
    graph = _toy_graph()
    kinds = [kind for *_, kind in graph.edges]
    assert (kinds.count("tp"), kinds.count("pp"), kinds.count("dp")) == (4, 4, 4)
    assert graph.coords(graph.vertex(1, 0, 1)) == (1, 0, 1)
    assert graph.total_bytes == 4 * (10 + 1 + 4) * GB


def test_rings_of_three_close_and_pairs_share_one_edge() -> None:
    graph = mixed_parallel_graph(Parallelism(data=3), tp_bytes=0, pp_bytes=0, dp_bytes=1.0)
    assert sorted((u, v) for u, v, *_ in graph.edges) == [(0, 1), (0, 2), (1, 2)]


def test_tc4_gpt2_like_edge_weights() -> None:
    shape = ModelShape("gpt2-like", 1.5e9, n_layers=48, hidden=1600, seq_len=1024)
    tp, pp, dp = edge_bytes(shape, Parallelism(2, 2, 2))
    # S_act = 1 * 1024 * 1600 * 2 = 3.2768 MB
    assert tp == pytest.approx(4 * 24 * 8 * 1 * 3.2768e6)  # 2.52 GB
    assert pp == pytest.approx(8 * 3.2768e6 / 2)  # 13.1 MB
    assert dp == pytest.approx(1 * 1.5e9 / 4 * 2)  # 0.75 GB


def test_model_shapes_come_from_the_catalogue_and_the_job() -> None:
    gpt = model_shape(Job("g", 0.0, 8, 1.0, model="GPT-2 XL"))
    assert (gpt.n_layers, gpt.hidden, gpt.seq_len) == (48, 1600, 1024)
    assert gpt.n_params == 1.542e9 and gpt.gradient_bytes_per_param == 2.0
    resnet = model_shape(Job("r", 0.0, 8, 1.0, model="ResNet-50 (batch size 64)"))
    assert resnet.n_params == 25.6e6 and resnet.gradient_bytes_per_param == 4.0
    # the job's own gradient bytes win; unknown names get the default shape
    odd = model_shape(Job("o", 0.0, 8, 1.0, model="mystery", gradient_bytes=2e9))
    assert odd.n_params == 1e9 and (odd.n_layers, odd.hidden) == (24, 1024)


def test_jobs_without_a_usable_config_are_data_parallel_over_their_gpus() -> None:
    plain = Job("a", 0.0, 4, 10.0, gradient_bytes=100e6)
    wrong = Job("b", 0.0, 4, 10.0, parallelism=Parallelism(2, 2, 2))
    assert job_parallelism(plain) == Parallelism(data=4)
    assert job_parallelism(wrong) == Parallelism(data=4)
    graph = build_job_graph(plain)
    # ring of 4: each edge carries 2*3/4 of the 100 MB gradient
    assert [w for _, _, w, _ in graph.edges] == pytest.approx([150e6] * 4)


def test_a_job_s_graph_follows_from_its_kind_alone() -> None:
    job = Job("a", 0.0, 8, 10.0, model="GPT-2 XL", parallelism=Parallelism(2, 2, 2), gradient_bytes=3e9)
    graph = build_job_graph(job)
    # every other field changed: the same kind, the same graph
    other = Job("b", 5.0, 8, 99.0, total_iters=7.0, group="vc", user="u", model="GPT-2 XL",
                batch_size=512, parallelism=Parallelism(2, 2, 2), comm_sensitivity=0.9,
                gradient_bytes=3e9, model_bytes=1e10, tags=(("k", "v"),))
    assert graph_kind(other) == graph_kind(job) and build_job_graph(other) == graph
    # each field of the kind changed: another graph
    for changed in (job.with_changes(model="ResNet-50 (batch size 64)"), job.with_changes(gradient_bytes=1e9),
                    job.with_changes(n_gpus=16, parallelism=None), job.with_changes(parallelism=Parallelism(8))):
        assert graph_kind(changed) != graph_kind(job) and build_job_graph(changed) != graph


def test_tc3_stage_per_server_is_chosen_with_its_iteration_time() -> None:
    topology = uniform_cluster(2, 4, 8)
    graph = _toy_graph()
    placed = place_graph(Allocation(topology), graph)
    assert placed is not None and placed.n_servers == 2
    assert placed.cut_bytes == 4 * GB
    stages = {graph.coords(v)[1] for v in range(8) if placed.gpu_ids[v] < 4}
    assert len(stages) == 1  # one whole pipeline stage per server
    assert 1.0 + placed.comm_time_s(topology.links) == pytest.approx(1 + 4 / 12.5 + 14 / 150)
    replica = placement_cost(graph, tuple(range(8)), topology)  # replica 0 on server 0
    assert replica.cut_bytes == 16 * GB
    assert 1.0 + replica.comm_time_s(topology.links) == pytest.approx(1 + 16 / 12.5 + 11 / 150)


def test_tc5_server_choice() -> None:
    topology = uniform_cluster(3, 8, 8)
    free = Allocation(topology)
    free.allocate("x", range(5))  # A: 3 free
    free.allocate("y", range(8, 10))  # B: 6 free, C: 8 free
    assert choose_servers(free, 5) == [(1, 5)]
    assert choose_servers(free, 8) == [(2, 8)]
    assert choose_servers(free, 10) == [(2, 8), (1, 2)]
    assert choose_servers(free, 18) is None


def test_a_two_stage_pipeline_stays_on_one_server_when_it_fits() -> None:
    topology = uniform_cluster(2, 4, 8)
    free = Allocation(topology)
    free.allocate("x", [0, 1, 2])  # node 0: 1 free; node 1: 4 free
    job = Job("p", 0.0, 2, 10.0, model="GPT-2 XL", parallelism=Parallelism(pipeline=2))
    graph = build_job_graph(job)
    assert first_fit(free, 2, np.random.default_rng(0)) == (3, 4)  # naive: split
    placed = place_graph(free, graph)
    assert placed is not None
    assert placed.n_servers == 1 and placed.cut_bytes == 0.0
    assert set(placed.gpu_ids) <= {4, 5, 6, 7}


def test_a_pipeline_over_two_servers_cuts_only_one_stage_boundary() -> None:
    topology = uniform_cluster(2, 4, 8)
    free = Allocation(topology)
    free.allocate("x", [0, 1, 4, 5])
    graph = mixed_parallel_graph(Parallelism(pipeline=4), tp_bytes=0, pp_bytes=1.0, dp_bytes=0)
    placed = place_graph(free, graph)
    assert placed is not None and placed.cut_bytes == 1.0


def test_tensor_groups_stay_whole_when_free_counts_allow() -> None:
    topology = uniform_cluster(3, 4, 8)
    free = Allocation(topology)
    free.allocate("x", [0, 4])  # free 3, 3, 4: in pairs 2, 2, 4, so 4 + 2 + 2
    graph = mixed_parallel_graph(Parallelism(data=4, tensor=2), tp_bytes=10.0, pp_bytes=0,
                                 dp_bytes=1.0)
    placed = place_graph(free, graph)
    assert placed is not None
    tp_cut = [(u, v) for u, v, _, kind in graph.edges
              if kind == "tp" and topology.gpu_node[placed.gpu_ids[u]]
              != topology.gpu_node[placed.gpu_ids[v]]]
    assert tp_cut == []
    assert placed.n_servers == 3
    # replicas split 2 + 1 + 1: each of the two data-parallel rings is cut three times
    assert placed.cut_bytes == 6.0


def test_refinement_repairs_an_alternating_split_of_a_path() -> None:
    adj = [{1: 1.0}, {0: 1.0, 2: 1.0}, {1: 1.0, 3: 1.0}, {2: 1.0}]
    part = [0, 1, 0, 1]  # cut 3
    _refine(adj, part, passes=10)
    cut = sum(1 for u, n in enumerate(adj) for v in n if u < v and part[u] != part[v])
    assert cut == 1 and sorted(part) == [0, 0, 1, 1]


@given(topologies(), st.data())
def test_placements_use_distinct_free_gpus_and_one_server_when_possible(topology, data) -> None:
    free = Allocation(topology)
    taken = data.draw(st.sets(st.integers(0, topology.n_gpus - 1)))
    free.allocate("x", sorted(taken))
    n = data.draw(st.integers(1, topology.n_gpus))
    graph = mixed_parallel_graph(Parallelism(data=n), tp_bytes=0, pp_bytes=0, dp_bytes=1.0)
    placed = place_graph(free, graph)
    if n > free.n_free:
        assert placed is None
        return
    assert placed is not None
    assert len(set(placed.gpu_ids)) == n
    assert all(free.owner[g] is None for g in placed.gpu_ids)
    if any(free.free_in_node(node) >= n for node in range(topology.n_nodes)):
        assert placed.n_servers == 1 and placed.cut_bytes == 0.0


def test_placement_cost_gives_each_kind_s_load_per_direction() -> None:
    topology = uniform_cluster(2, 4, 8)
    graph = _toy_graph()
    # stage 0 (vertices 0, 1, 4, 5) on server 0, stage 1 on server 1
    placed = placement_cost(graph, (0, 1, 4, 5, 2, 3, 6, 7), topology)
    by_kind = {p.kind: p for p in placed.phases}
    # pairs send their bytes both ways: a GPU's or a server's load is its edges' sum
    tp, pp, dp = by_kind["tp"], by_kind["pp"], by_kind["dp"]
    assert (tp.level, tp.hops, tp.gpu_bytes, tp.nic_bytes) == (0, 2, 10 * GB, 0.0)
    assert (pp.level, pp.hops, pp.gpu_bytes, pp.nic_bytes, pp.rack_bytes) == (1, 2, 0.0, 4 * GB, 0.0)
    assert (dp.level, dp.gpu_bytes, dp.nic_bytes) == (0, 4 * GB, 0.0)


def test_a_ring_of_four_leaving_a_server_once_loads_its_nic_with_one_edge() -> None:
    graph = mixed_parallel_graph(Parallelism(data=4), tp_bytes=0, pp_bytes=0, dp_bytes=1.0)
    two_racks = uniform_cluster(2, 4, 1)
    (blocks,) = placement_cost(graph, (0, 1, 4, 5), two_racks).phases
    # a one-way ring: out of the server once, back in once
    assert (blocks.level, blocks.hops, blocks.gpu_bytes, blocks.nic_bytes, blocks.rack_bytes) == (
        2, 6, 0.5, 1.0, 1.0)
    (alternating,) = placement_cost(graph, (0, 4, 1, 5), two_racks).phases
    assert (alternating.gpu_bytes, alternating.nic_bytes, alternating.rack_bytes) == (0.0, 2.0, 2.0)
