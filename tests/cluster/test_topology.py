"""Tests for rackwise.cluster.topology: building clusters and reading spec files."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given

from rackwise.cluster.topology import ClusterSpec, Links, Node, Topology, load_cluster, uniform_cluster
from rackwise.errors import InputError
from strategies import cluster_specs, topologies


def _mixed_spec() -> ClusterSpec:
    return ClusterSpec.model_validate({
        "name": "mixed",
        "nodes_per_rack": 2,
        "node_groups": [
            {"count": 3, "gpus_per_node": 4, "gpu_type": " V100 "},
            {"count": 2, "gpus_per_node": 2, "gpu_type": "p100", "nodes_per_rack": 1},
        ],
    })


# --------------------------------------------------------------------------- building


def test_each_group_is_racked_on_its_own() -> None:
    """Racks fill up to nodes_per_rack, and a new group starts a new rack."""
    topology = _mixed_spec().build()
    assert topology.n_nodes == 5
    assert topology.n_racks == 4
    assert topology.rack_nodes == ((0, 1), (2,), (3,), (4,))
    assert [node.rack_id for node in topology.nodes] == [0, 0, 1, 2, 3]
    assert topology.rack_capacity == (8, 4, 2, 2)


def test_gpus_are_numbered_contiguously_per_node() -> None:
    """Node k's GPUs follow node k-1's; gpu_node maps each GPU back to its node."""
    topology = _mixed_spec().build()
    assert [tuple(node.gpu_ids) for node in topology.nodes] == [
        (0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13), (14, 15)]
    assert topology.n_gpus == 16
    assert topology.gpu_node == (0,) * 4 + (1,) * 4 + (2,) * 4 + (3,) * 2 + (4,) * 2
    assert topology.max_gpus_per_node == 4


def test_gpu_types_are_normalised_and_listed_once() -> None:
    """GPU type names are stripped and lower-cased; gpu_types is sorted and unique."""
    topology = _mixed_spec().build()
    assert topology.gpu_types == ("p100", "v100")
    assert topology.gpu_type_of(0) == "v100"
    assert topology.gpu_type_of(13) == "p100"
    assert topology.rack_of_gpu(13) == 2
    assert topology.rack_of_gpu(9) == 1
    assert topology.describe() == "mixed: 4 racks, 5 nodes, 16 GPUs (4 p100, 12 v100)"


@pytest.mark.parametrize(("gpu_ids", "expected"), [
    ((), (0, 0)),
    ((0,), (1, 1)),
    ((0, 1, 2, 3), (1, 1)),
    ((3, 4), (2, 1)),
    ((0, 8, 12), (3, 3)),
    ([15, 14, 13, 12], (2, 2)),
])
def test_spread_counts_nodes_and_racks(gpu_ids: tuple[int, ...], expected: tuple[int, int]) -> None:
    """spread() counts the distinct nodes and racks a set of GPUs touches."""
    assert _mixed_spec().build().spread(gpu_ids) == expected


def test_links_come_from_the_spec_and_default_otherwise() -> None:
    """Given link bandwidths override the defaults, the others keep them."""
    spec = ClusterSpec.model_validate({
        "node_groups": [{"count": 1, "gpus_per_node": 1}],
        "links": {"cross_rack_gbps": 25},
    })
    links = spec.build().links
    assert links.cross_rack_gbps == 25.0
    assert links.intra_rack_gbps == Links().intra_rack_gbps
    assert links.rack_uplink_gbps is None


def test_topology_refuses_misnumbered_nodes() -> None:
    """Nodes out of order, GPU gaps and rack gaps are refused."""
    with pytest.raises(ValueError, match="numbered"):
        Topology((Node(1, 0, "v100", 2, 0),))
    with pytest.raises(ValueError, match="contiguous"):
        Topology((Node(0, 0, "v100", 2, 0), Node(1, 0, "v100", 2, 3)))
    with pytest.raises(ValueError, match="racks"):
        Topology((Node(0, 0, "v100", 2, 0), Node(1, 2, "v100", 2, 2)))


@given(cluster_specs())
def test_built_spec_is_consistent(spec: ClusterSpec) -> None:
    """Any valid spec builds racks of at most nodes_per_rack nodes of one group each."""
    topology = spec.build()
    expected_racks = sum(math.ceil(g.count / (g.nodes_per_rack or spec.nodes_per_rack))
                         for g in spec.node_groups)
    assert topology.n_racks == expected_racks
    assert topology.n_nodes == sum(g.count for g in spec.node_groups)
    assert topology.n_gpus == sum(g.count * g.gpus_per_node for g in spec.node_groups)
    for rack, nodes in enumerate(topology.rack_nodes):
        assert list(nodes) == list(range(nodes[0], nodes[-1] + 1))
        assert len({(topology.nodes[n].gpu_type, topology.nodes[n].n_gpus) for n in nodes}) == 1
        assert topology.rack_capacity[rack] == sum(topology.nodes[n].n_gpus for n in nodes)


@given(topologies())
def test_lookup_tables_agree_with_nodes(topology: Topology) -> None:
    """gpu_node, rack_nodes and rack_capacity agree with the nodes they were built from."""
    for node in topology.nodes:
        for gpu in node.gpu_ids:
            assert topology.gpu_node[gpu] == node.node_id
            assert topology.rack_of_gpu(gpu) == node.rack_id
        assert node.node_id in topology.rack_nodes[node.rack_id]
    assert sum(topology.rack_capacity) == topology.n_gpus
    assert topology.spread(tuple(range(topology.n_gpus))) == (topology.n_nodes, topology.n_racks)


# ------------------------------------------------------------------------ uniform_cluster


def test_uniform_cluster_racks_the_nodes() -> None:
    """10 nodes in racks of 4 make racks of 4, 4 and 2 nodes."""
    topology = uniform_cluster(10, gpus_per_node=4, nodes_per_rack=4, gpu_type="a100")
    assert topology.name == "10x4-a100"
    assert [len(nodes) for nodes in topology.rack_nodes] == [4, 4, 2]
    assert topology.rack_capacity == (16, 16, 8)
    assert topology.gpu_types == ("a100",)


def test_uniform_cluster_keeps_given_links_and_name() -> None:
    """Explicit links and name replace the defaults."""
    links = Links(cross_rack_gbps=10.0)
    topology = uniform_cluster(2, links=links, name="tiny")
    assert topology.links == links
    assert topology.name == "tiny"


@pytest.mark.parametrize(("kwargs", "flag"), [
    ({"n_nodes": 0}, "nodes"),
    ({"n_nodes": 2, "gpus_per_node": -1}, "gpus-per-node"),
    ({"n_nodes": 2, "nodes_per_rack": 0}, "nodes-per-rack"),
])
def test_uniform_cluster_rejects_non_positive_flags(kwargs: dict[str, int], flag: str) -> None:
    """A zero or negative flag raises InputError naming the flag."""
    with pytest.raises(InputError, match=f"field '{flag}'") as info:
        uniform_cluster(**kwargs)
    assert info.value.field == flag


# ------------------------------------------------------------------------------ spec files

YAML_SPEC = """\
name: from-yaml
nodes_per_rack: 2
node_groups:
  - {count: 3, gpus_per_node: 4, gpu_type: v100}
  - {count: 1, gpus_per_node: 8, gpu_type: k80}
links: {cross_rack_gbps: 25}
"""

TOML_SPEC = """\
name = "from-toml"
nodes_per_rack = 2

[[node_groups]]
count = 3
gpus_per_node = 4
gpu_type = "v100"

[[node_groups]]
count = 1
gpus_per_node = 8
gpu_type = "k80"

[links]
cross_rack_gbps = 25
"""


@pytest.mark.parametrize(("filename", "text"), [
    ("cluster.yaml", YAML_SPEC), ("cluster.yml", YAML_SPEC), ("cluster.toml", TOML_SPEC)])
def test_load_cluster_reads_yaml_and_toml(tmp_path: Path, filename: str, text: str) -> None:
    """The same cluster written in YAML or TOML loads to the same layout."""
    path = tmp_path / filename
    path.write_text(text)
    topology = load_cluster(path)
    assert topology.name in {"from-yaml", "from-toml"}
    assert topology.rack_nodes == ((0, 1), (2,), (3,))
    assert topology.rack_capacity == (8, 4, 8)
    assert topology.gpu_type_of(12) == "k80"
    assert topology.links.cross_rack_gbps == 25.0


def test_load_cluster_missing_file(tmp_path: Path) -> None:
    """A path that is not a file is an InputError naming the path."""
    path = tmp_path / "nope.yaml"
    with pytest.raises(InputError, match="no such cluster spec file") as info:
        load_cluster(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(("filename", "text"), [
    ("bad.yaml", "node_groups: [\n"),
    ("bad.toml", "node_groups = \n"),
])
def test_load_cluster_unparsable(tmp_path: Path, filename: str, text: str) -> None:
    """A file its parser rejects is an InputError naming the file."""
    path = tmp_path / filename
    path.write_text(text)
    with pytest.raises(InputError, match="cannot parse") as info:
        load_cluster(path)
    assert str(info.value).startswith(str(path))


@pytest.mark.parametrize("text", ["- 1\n- 2\n", "", "just a string\n"])
def test_load_cluster_needs_a_mapping(tmp_path: Path, text: str) -> None:
    """A list, an empty file or a scalar at the top level is refused."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match="expected a mapping"):
        load_cluster(path)


@pytest.mark.parametrize(("text", "field"), [
    ("node_groups: [{count: 1, gpus_per_node: 2, colour: red}]\n", "node_groups.0.colour"),
    ("node_groups: [{count: -2, gpus_per_node: 2}]\n", "node_groups.0.count"),
    ("node_groups: [{count: 1, gpus_per_node: 2}, {count: 1, gpus_per_node: 0}]\n",
     "node_groups.1.gpus_per_node"),
    ("node_groups: [{count: 1, gpus_per_node: 2}]\nracks: 3\n", "racks"),
    ("node_groups: [{count: 1, gpus_per_node: 2}]\nlinks: {cross_rack_gbps: -1}\n",
     "links.cross_rack_gbps"),
    ("node_groups: []\n", "node_groups"),
    ("name: x\n", "node_groups"),
])
def test_load_cluster_names_the_bad_field(tmp_path: Path, text: str, field: str) -> None:
    """Unknown fields, negative counts and missing groups name the file and the field."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_cluster(path)
    assert info.value.field == field
    assert info.value.source == str(path)
    assert str(info.value).startswith(f"{path}, field '{field}': ")


def test_load_cluster_toml_bad_field(tmp_path: Path) -> None:
    """Field errors in TOML files are reported the same way."""
    path = tmp_path / "c.toml"
    path.write_text("[[node_groups]]\ncount = -1\ngpus_per_node = 4\n")
    with pytest.raises(InputError, match=r"field 'node_groups\.0\.count'"):
        load_cluster(path)


def test_load_cluster_not_text(tmp_path: Path) -> None:
    """A file that is not UTF-8 text is an InputError naming the file, not a decode error."""
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xff\xfe\x00node_groups")
    with pytest.raises(InputError, match="cannot read") as info:
        load_cluster(path)
    assert info.value.source == str(path)


def test_load_cluster_suffix_is_case_insensitive(tmp_path: Path) -> None:
    """A .TOML file is read as TOML."""
    path = tmp_path / "CLUSTER.TOML"
    path.write_text(TOML_SPEC)
    assert load_cluster(path).name == "from-toml"
