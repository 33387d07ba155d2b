"""Cluster topology as data: racks of nodes of GPUs, GPU types and link bandwidths.

GPUs are numbered 0..n_gpus-1, contiguously within each node, and nodes
0..n_nodes-1 contiguously within each rack, so "which node holds GPU g" and
"which rack holds node n" are array look-ups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rackwise.errors import InputError, parse_error


@dataclass(frozen=True, slots=True)
class Links:
    """Bandwidth per level of the topology, in gigabits per second.

    Defaults: NVLink 2.0 between the V100s of a DGX-1 class server (about
    150 GB/s per direction per GPU), 100 Gb/s Ethernet/EDR InfiniBand from a
    node to its top-of-rack switch, and a non-oversubscribed spine.
    ``rack_uplink_gbps`` is the capacity of one rack's uplink, shared by all
    jobs that cross it (``None``: nodes_per_rack x intra_rack_gbps, i.e. 1:1).
    """

    intra_node_gbps: float = 1200.0
    intra_rack_gbps: float = 100.0
    cross_rack_gbps: float = 100.0
    rack_uplink_gbps: float | None = None


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    rack_id: int
    gpu_type: str
    n_gpus: int
    first_gpu: int

    @property
    def gpu_ids(self) -> range:
        return range(self.first_gpu, self.first_gpu + self.n_gpus)


@dataclass(frozen=True)
class Topology:
    """An immutable cluster: nodes grouped in racks, with GPU types and links."""

    nodes: tuple[Node, ...]
    links: Links = field(default_factory=Links)
    name: str = "cluster"
    # Speed over a V100 of GPU types the performance catalogue does not know, as declared.
    gpu_speedups: tuple[tuple[str, float], ...] = ()
    # Derived look-up tables, filled in __post_init__.
    gpu_node: tuple[int, ...] = field(init=False, repr=False)
    gpu_rack: tuple[int, ...] = field(init=False, repr=False)
    node_rack: tuple[int, ...] = field(init=False, repr=False)
    rack_nodes: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    rack_capacity: tuple[int, ...] = field(init=False, repr=False)
    max_gpus_per_node: int = field(init=False, repr=False)
    gpu_types: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        gpu_node: list[int] = []
        racks: dict[int, list[int]] = {}
        for index, node in enumerate(self.nodes):
            if node.node_id != index or node.first_gpu != len(gpu_node):
                raise ValueError("nodes must be numbered 0..n-1 with contiguous GPU ids")
            gpu_node.extend([index] * node.n_gpus)
            racks.setdefault(node.rack_id, []).append(index)
        if sorted(racks) != list(range(len(racks))):
            raise ValueError("racks must be numbered 0..r-1")
        object.__setattr__(self, "gpu_node", tuple(gpu_node))
        object.__setattr__(self, "node_rack", tuple(node.rack_id for node in self.nodes))
        object.__setattr__(self, "gpu_rack", tuple(self.node_rack[n] for n in gpu_node))
        object.__setattr__(self, "rack_nodes", tuple(tuple(racks[r]) for r in range(len(racks))))
        object.__setattr__(
            self, "rack_capacity",
            tuple(sum(self.nodes[n].n_gpus for n in racks[r]) for r in range(len(racks))),
        )
        # Cached: placement strategies ask for these on every attempt.
        object.__setattr__(self, "max_gpus_per_node", max(node.n_gpus for node in self.nodes))
        object.__setattr__(self, "gpu_types", tuple(sorted({node.gpu_type for node in self.nodes})))

    @property
    def n_gpus(self) -> int:
        return len(self.gpu_node)

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_racks(self) -> int:
        return len(self.rack_nodes)

    def rack_of_gpu(self, gpu_id: int) -> int:
        return self.gpu_rack[gpu_id]

    def gpu_type_of(self, gpu_id: int) -> str:
        return self.nodes[self.gpu_node[gpu_id]].gpu_type

    def spread(self, gpu_ids: tuple[int, ...] | list[int]) -> tuple[int, int]:
        """(number of nodes, number of racks) a set of GPUs spans."""
        if len(gpu_ids) == 1:
            return 1, 1
        gpu_node, gpu_rack = self.gpu_node, self.gpu_rack
        return len({gpu_node[g] for g in gpu_ids}), len({gpu_rack[g] for g in gpu_ids})

    def describe(self) -> str:
        types = ", ".join(
            f"{sum(n.n_gpus for n in self.nodes if n.gpu_type == t)} {t}" for t in self.gpu_types
        )
        return f"{self.name}: {self.n_racks} racks, {self.n_nodes} nodes, {self.n_gpus} GPUs ({types})"


# --------------------------------------------------------------------------- spec files


class _LinksSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    intra_node_gbps: float = Field(default=Links().intra_node_gbps, gt=0)
    intra_rack_gbps: float = Field(default=Links().intra_rack_gbps, gt=0)
    cross_rack_gbps: float = Field(default=Links().cross_rack_gbps, gt=0)
    rack_uplink_gbps: float | None = Field(default=None, gt=0)


class _NodeGroupSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(gt=0)
    gpus_per_node: int = Field(gt=0)
    gpu_type: str = "v100"
    nodes_per_rack: int | None = Field(default=None, gt=0)

    @field_validator("gpu_type")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()


class ClusterSpec(BaseModel):
    """A cluster as written in a YAML or TOML file.

    Example::

        name: hetero-gavel
        nodes_per_rack: 8
        node_groups:
          - {count: 12, gpus_per_node: 4, gpu_type: v100}
          - {count: 12, gpus_per_node: 4, gpu_type: p100}
        links: {cross_rack_gbps: 25}
        gpu_speedup_vs_v100: {rtx6000: 1.6}   # a type the catalogue does not know

    Each node group is laid out in racks of its own (``nodes_per_rack`` of the
    group, else of the cluster), so racks are homogeneous.
    """

    model_config = ConfigDict(extra="forbid")
    name: str = "cluster"
    nodes_per_rack: int = Field(default=8, gt=0)
    node_groups: list[_NodeGroupSpec] = Field(min_length=1)
    links: _LinksSpec = Field(default_factory=_LinksSpec)
    gpu_speedup_vs_v100: dict[str, float] = Field(default_factory=dict)

    @field_validator("gpu_speedup_vs_v100")
    @classmethod
    def _positive_speedups(cls, value: dict[str, float]) -> dict[str, float]:
        for gpu_type, speedup in value.items():
            if not speedup > 0:
                raise ValueError(f"the speed-up of '{gpu_type}' must be positive, got {speedup}")
        return {gpu_type.strip().lower(): speedup for gpu_type, speedup in value.items()}

    def build(self) -> Topology:
        nodes: list[Node] = []
        rack_id = -1
        for group in self.node_groups:
            per_rack = group.nodes_per_rack or self.nodes_per_rack
            for i in range(group.count):
                if i % per_rack == 0:
                    rack_id += 1
                first = nodes[-1].first_gpu + nodes[-1].n_gpus if nodes else 0
                nodes.append(Node(len(nodes), rack_id, group.gpu_type, group.gpus_per_node, first))
        links = Links(**self.links.model_dump())
        return Topology(tuple(nodes), links, self.name, tuple(sorted(self.gpu_speedup_vs_v100.items())))


def uniform_cluster(n_nodes: int, gpus_per_node: int = 8, nodes_per_rack: int = 8,
                    gpu_type: str = "v100", links: Links | None = None,
                    name: str | None = None) -> Topology:
    """A homogeneous cluster, as built from the CLI flags."""
    for flag, value in (("nodes", n_nodes), ("gpus-per-node", gpus_per_node),
                        ("nodes-per-rack", nodes_per_rack)):
        if value <= 0:
            raise InputError(f"must be a positive integer, got {value}", field=flag)
    spec = ClusterSpec(
        name=name or f"{n_nodes}x{gpus_per_node}-{gpu_type}",
        nodes_per_rack=nodes_per_rack,
        node_groups=[_NodeGroupSpec(count=n_nodes, gpus_per_node=gpus_per_node, gpu_type=gpu_type)],
    )
    topology = spec.build()
    if links is not None:
        topology = Topology(topology.nodes, links, topology.name, topology.gpu_speedups)
    return topology


def load_cluster(path: str | Path) -> Topology:
    """Read a cluster spec from a ``.yaml``/``.yml`` or ``.toml`` file.

    Raises:
        InputError: naming the file and the offending field.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("no such cluster spec file", source=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=str(path)) from None
    data: Any
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # both parsers raise their own error types
        raise parse_error(exc, str(path)) from None
    if not isinstance(data, dict):
        raise InputError("expected a mapping at the top level", source=str(path))
    try:
        return ClusterSpec.model_validate(data).build()
    except ValidationError as exc:
        error = exc.errors()[0]
        field_path = ".".join(str(part) for part in error["loc"])
        raise InputError(error["msg"], source=str(path), field=field_path) from None
