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

A mixed-parallel job (tensor or pipeline degree above 1) is priced on its
worker mapping instead: `perf.graph_placement.placement_cost`
reads the job graph on the ordered GPUs and gives, per kind of traffic
(tensor ring, pipeline, data ring), the per-direction bytes of the busiest
GPU inside its server, the busiest server NIC and the busiest rack uplink.
The kinds run one after another; inside one, every link works at once, so
the busiest link sets its pace (`mapped_comm_s`):

    t_comm = sum_k max(gpu_k / B_node, nic_k / B_rack, rack_k / B_cross) + hops_k * latency(level_k)

with ``B_rack = min(intra-node, NIC)`` and ``B_cross`` the cross-rack path
(``min(intra-node, NIC, cross-rack)``, lowered by the job's uplink share).
A single ring laid out in blocks gives back the formula above.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

from rackwise.cluster.topology import Links, Topology

PhaseLoads = tuple[int, int, float, float, float]  # hops, level, gpu, NIC and rack bytes


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


def phase_link_s(gpu_bytes: float, nic_bytes: float, links: Links) -> float:
    """Seconds the in-server and NIC loads of one phase take (the busier link sets the pace)."""
    gpu_s = gpu_bytes * 8.0 / (links.intra_node_gbps * 1e9)
    nic_s = nic_bytes * 8.0 / (level_bandwidth_gbps(links, Level.RACK) * 1e9)
    return max(gpu_s, nic_s)


def mapped_comm_s(phases: Iterable[PhaseLoads], links: Links, latencies: tuple[float, float, float],
                  cross_gbps: float | None = None) -> float:
    """Seconds per step of a mapped job's traffic, all of it a stall (before overlap).

    Args:
        phases: ``(hops, level, gpu_bytes, nic_bytes, rack_bytes)`` per kind of
            traffic, as `graph_placement.PhaseTraffic` holds them.
        links: The cluster's links.
        latencies: Per-hop latency inside a node, a rack, across racks.
        cross_gbps: Bandwidth of the cross-rack path for this job (default:
            uncongested, ``level_bandwidth_gbps(links, Level.CLUSTER)``).
    """
    if cross_gbps is None:
        cross_gbps = level_bandwidth_gbps(links, Level.CLUSTER)
    total = 0.0
    for hops, level, gpu_bytes, nic_bytes, rack_bytes in phases:
        link_s = phase_link_s(gpu_bytes, nic_bytes, links)
        cross_s = rack_bytes * 8.0 / (cross_gbps * 1e9) if rack_bytes > 0 else 0.0
        total += max(cross_s, link_s) + hops * latencies[level]
    return total
