"""A rackwise `Topology` for the GPU nodes of a Slurm cluster.

Racks are the leaf switches of Slurm's tree topology (``topology.conf``, read
back through ``scontrol show topology``); nodes under no leaf switch share
one extra rack, and without a topology plugin all nodes form one rack.
GPU counts and types come from each node's gres. A rackwise cluster spec
can be given instead, when it lists the same nodes in the same order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rackwise.backends.slurm_cli import SlurmCli, SlurmCommandError, gpu_count, gpu_type
from rackwise.cluster.topology import Links, Node, Topology
from rackwise.errors import InputError


def natural_key(name: str) -> tuple[object, ...]:
    """Sort key that puts node2 before node10."""
    return tuple(int(part) if part.isdigit() else part
                 for part in re.split(r"(\d+)", name))


def partition_nodes(raw_nodes: Sequence[Mapping[str, Any]], partition: str | None) -> list[dict[str, Any]]:
    """Nodes with at least one GPU, in ``partition`` if given, in natural order."""
    nodes = []
    for node in raw_nodes:
        if partition is not None and partition not in (node.get("partitions") or []):
            continue
        if gpu_count(str(node.get("gres") or "")) > 0:
            nodes.append(dict(node))
    return sorted(nodes, key=lambda n: natural_key(str(n["name"])))


def leaf_switches(cli: SlurmCli) -> list[list[str]]:
    """Node names under each leaf switch (``Level=0``), in switch order."""
    try:
        text = cli.run(["scontrol", "show", "topology"])
    except SlurmCommandError:
        return []
    racks: list[list[str]] = []
    for line in text.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if fields.get("Level") == "0" and fields.get("Nodes"):
            racks.append(cli.hostnames(fields["Nodes"]))
    return racks


def discover(cli: SlurmCli, partition: str | None = None, default_gpu_type: str = "v100",
             links: Links | None = None) -> tuple[Topology, tuple[str, ...]]:
    """Build the topology of a partition's GPU nodes.

    Returns:
        The topology and the Slurm name of each of its nodes, by node id.

    Raises:
        InputError: when the partition has no node with GPUs.
    """
    nodes = partition_nodes(cli.nodes(), partition)
    if not nodes:
        where = f"partition '{partition}'" if partition else "the cluster"
        raise InputError(f"{where} has no node with gres gpu", field="partition")
    names = [str(n["name"]) for n in nodes]
    by_name = {str(n["name"]): n for n in nodes}
    racks: list[list[str]] = []
    placed: set[str] = set()
    for switch in leaf_switches(cli):
        rack = [name for name in switch if name in by_name and name not in placed]
        placed.update(rack)
        if rack:
            racks.append(rack)
    rest = [name for name in names if name not in placed]
    if rest:
        racks.append(rest)
    built: list[Node] = []
    ordered: list[str] = []
    for rack_id, rack in enumerate(racks):
        for name in sorted(rack, key=natural_key):
            gres = str(by_name[name].get("gres") or "")
            first = built[-1].first_gpu + built[-1].n_gpus if built else 0
            built.append(Node(len(built), rack_id, gpu_type(gres) or default_gpu_type,
                              gpu_count(gres), first))
            ordered.append(name)
    topology = Topology(tuple(built), links or Links(), name=f"slurm-{partition or 'all'}")
    return topology, tuple(ordered)


def match_spec(topology: Topology, cli: SlurmCli, partition: str | None) -> tuple[str, ...]:
    """Slurm node names for a rackwise cluster spec's nodes (natural order, one to one).

    Raises:
        InputError: when the counts of nodes or GPUs differ.
    """
    nodes = partition_nodes(cli.nodes(), partition)
    if len(nodes) != topology.n_nodes:
        raise InputError(f"the cluster spec has {topology.n_nodes} nodes but Slurm has "
                         f"{len(nodes)} GPU nodes", field="cluster")
    for spec_node, node in zip(topology.nodes, nodes):
        count = gpu_count(str(node.get("gres") or ""))
        if count != spec_node.n_gpus:
            raise InputError(f"node {node['name']} has {count} GPUs in Slurm but "
                             f"{spec_node.n_gpus} in the cluster spec", field="cluster")
    return tuple(str(n["name"]) for n in nodes)
