"""Communication time of one training step on a placement.

A data-parallel step ends with a ring all-reduce of the gradients. Over n
workers each one sends and receives ``2(n-1)/n`` times the gradient bytes,
in ``2(n-1)`` hops, so the ring runs at the pace of its slowest link:

    t_comm = 2(n-1)/n * S / B_bottleneck + 2(n-1) * latency

The bottleneck is the slowest level the placement spans: the intra-node
link (NVLink or PCIe) when all GPUs share a node, the node's NIC to its
top-of-rack switch when it spans nodes of one rack, and the cross-rack path
when it spans racks. A rack's uplink is shared equally by every job whose
ring leaves that rack, so a cross-rack job gets at most ``uplink / k`` from
each rack it spans; congestion can only lower its bandwidth.
"""

from __future__ import annotations

from enum import IntEnum

from rackwise.cluster.topology import Links, Topology


class Level(IntEnum):
    """How far a placement spreads (the paper digest's L0, L1, L2)."""

    NODE = 0
    RACK = 1
    CLUSTER = 2


LINK_NAMES = {None: "none", Level.NODE: "intra-node", Level.RACK: "intra-rack",
              Level.CLUSTER: "cross-rack"}
UPLINK = "rack-uplink"


def level_of(n_nodes: int, n_racks: int) -> Level:
    if n_racks > 1:
        return Level.CLUSTER
    return Level.RACK if n_nodes > 1 else Level.NODE


def ring_allreduce_s(n_workers: int, nbytes: float, bandwidth_gbps: float,
                     latency_s: float = 0.0) -> float:
    """Seconds for a ring all-reduce of ``nbytes`` over ``n_workers`` (0 for one worker)."""
    if n_workers <= 1 or nbytes <= 0:
        return 0.0
    steps = 2 * (n_workers - 1)
    return steps / n_workers * nbytes * 8.0 / (bandwidth_gbps * 1e9) + steps * latency_s


def level_bandwidth_gbps(links: Links, level: Level) -> float:
    """Bandwidth of the slowest link a placement at ``level`` crosses, uncongested."""
    if level is Level.NODE:
        return links.intra_node_gbps
    if level is Level.RACK:
        return min(links.intra_node_gbps, links.intra_rack_gbps)
    return min(links.intra_node_gbps, links.intra_rack_gbps, links.cross_rack_gbps)


def uplink_capacity_gbps(topology: Topology, rack_id: int) -> float:
    """Capacity of one rack's uplink (default: its nodes' NICs added up, 1:1)."""
    links = topology.links
    if links.rack_uplink_gbps is not None:
        return links.rack_uplink_gbps
    return len(topology.rack_nodes[rack_id]) * links.intra_rack_gbps


def congested_gbps(base_gbps: float, uplink_gbps: float, n_sharing: int) -> float:
    """Bandwidth of a cross-rack ring through an uplink shared by ``n_sharing`` jobs."""
    return min(base_gbps, uplink_gbps / max(1, n_sharing))


def consolidated_level(topology: Topology, n_gpus: int) -> Level:
    """The tightest level any placement of ``n_gpus`` can reach on this cluster."""
    return tightest_level(n_gpus, topology.max_gpus_per_node, max(topology.rack_capacity))


def tightest_level(n_gpus: int, max_node_gpus: int, max_rack_gpus: int) -> Level:
    if n_gpus <= max_node_gpus:
        return Level.NODE
    if n_gpus <= max_rack_gpus:
        return Level.RACK
    return Level.CLUSTER


def latency_s(level: Level, node_s: float, rack_s: float, cluster_s: float) -> float:
    return (node_s, rack_s, cluster_s)[int(level)]


def pipeline_bubble_frac(stages: int, microbatches: int) -> float:
    """Idle share a synchronous pipeline adds to compute: (p-1)/m (GPipe)."""
    return (stages - 1) / microbatches if stages > 1 else 0.0
