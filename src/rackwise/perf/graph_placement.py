"""Placing a job graph on free GPUs so that heavy edges stay inside a server.

The partitioner follows rackwise's reconstruction of A-SRPT's placement
(docs/policies/asrpt.md): best-fit single server when one fits; otherwise
the fewest servers (inside one rack when a rack can hold the job), tensor
groups kept whole where the servers' free counts allow, a seed from the
better of two linear orders (stage-major or replica-major), then greedy
Kernighan-Lin swaps while the cut drops.

`placement_cost` is the one place that turns a worker mapping into traffic:
the partitioner's figures (cut, busiest NIC) and, per kind of edge, the
per-direction bytes on the busiest link of each class (`PhaseTraffic`),
which the network performance model (`perf.model.NetworkPerf`) turns into
time for mixed-parallel jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import FreeGpus
from rackwise.cluster.topology import Links, Topology
from rackwise.frozen import pickled_by_constructor
from rackwise.perf.job_graph import JobGraph, direction_share, sequential_hops

# Swap refinement is quadratic in (super-)vertices; beyond this the seed stands.
KL_MAX_VERTICES = 128


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class PhaseTraffic:
    """What one kind of edge (tp, pp or dp) puts on the busiest link of each class, per iteration.

    Loads are bytes per direction of a full-duplex link (`job_graph.direction_share`):
    a pipeline edge or a two-member ring sends its weight both ways, a
    longer ring one way round.

    Attributes:
        kind: tp, pp or dp.
        hops: Messages one after another (`job_graph.sequential_hops`).
        level: Farthest an edge of this kind reaches: 0 inside a server, 1
            between servers of a rack, 2 between racks.
        gpu_bytes: Busiest GPU's bytes to or from workers in its own server.
        nic_bytes: Busiest server's bytes to or from other servers.
        rack_bytes: Busiest rack's bytes to or from other racks.
    """

    kind: str
    hops: int
    level: int
    gpu_bytes: float
    nic_bytes: float
    rack_bytes: float

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return pickled_by_constructor(self)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class GraphPlacement:
    """Where each worker runs and what that costs in traffic per iteration.

    Attributes:
        gpu_ids: ``gpu_ids[v]`` hosts worker ``v``.
        cut_bytes: Bytes per iteration on edges between servers.
        max_out_bytes: The busiest server's NIC bytes per iteration.
        max_in_bytes: The busiest GPU's bytes per iteration inside its server.
        cross_rack_bytes: Bytes per iteration on edges between racks.
        n_servers: Servers used.
        phases: Per kind of edge present, the loads of the busiest links (`PhaseTraffic`).
    """

    gpu_ids: tuple[int, ...]
    cut_bytes: float
    max_out_bytes: float
    max_in_bytes: float
    cross_rack_bytes: float
    n_servers: int
    phases: tuple[PhaseTraffic, ...] = ()

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return pickled_by_constructor(self)

    def comm_time_s(self, links: Links, overlap_frac: float = 0.0) -> float:
        """Communication seconds per iteration: NIC time of the busiest server plus
        in-server time of the busiest GPU, minus the share overlapped with compute."""
        out_bytes_per_s = links.intra_rack_gbps * 1e9 / 8.0
        in_bytes_per_s = links.intra_node_gbps * 1e9 / 8.0
        return (1.0 - overlap_frac) * (self.max_out_bytes / out_bytes_per_s
                                       + self.max_in_bytes / in_bytes_per_s)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class PlacementRecord:
    """Where a job started and the traffic its placement costs per iteration."""

    job_id: str
    time: float
    n_servers: int
    cut_bytes: float
    comm_s_per_iter: float

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return pickled_by_constructor(self)


def placement_cost(graph: JobGraph, gpu_ids: tuple[int, ...], topology: Topology) -> GraphPlacement:
    """The traffic figures of running worker ``v`` on ``gpu_ids[v]``."""
    gpu_node = topology.gpu_node
    nodes = topology.nodes
    node_of = [gpu_node[g] for g in gpu_ids]
    par = graph.parallelism
    out: dict[int, float] = {}
    inside = [0.0] * len(gpu_ids)
    cut = cross_rack = 0.0
    # per kind: [level, per-GPU in-server, per-server out, per-rack out], per direction
    loads: dict[str, tuple[list[int], list[float], dict[int, float], dict[int, float]]] = {}
    for u, v, w, kind in graph.edges:
        load = loads.get(kind)
        if load is None:
            load = loads[kind] = ([0], [0.0] * len(gpu_ids), {}, {})
        share = w * direction_share(par, kind)
        nu, nv = node_of[u], node_of[v]
        if nu == nv:
            inside[u] += w
            inside[v] += w
            gpu = load[1]
            gpu[u] += share
            gpu[v] += share
            continue
        cut += w
        out[nu] = out.get(nu, 0.0) + w
        out[nv] = out.get(nv, 0.0) + w
        nic = load[2]
        nic[nu] = nic.get(nu, 0.0) + share
        nic[nv] = nic.get(nv, 0.0) + share
        ru, rv = nodes[nu].rack_id, nodes[nv].rack_id
        if ru != rv:
            cross_rack += w
            racks = load[3]
            racks[ru] = racks.get(ru, 0.0) + share
            racks[rv] = racks.get(rv, 0.0) + share
            load[0][0] = 2
        elif load[0][0] < 1:
            load[0][0] = 1
    phases = tuple(
        PhaseTraffic(kind, sequential_hops(par, kind), level[0], max(gpu),
                     max(nic.values(), default=0.0), max(racks.values(), default=0.0))
        for kind, (level, gpu, nic, racks) in loads.items())
    return GraphPlacement(tuple(gpu_ids), cut, max(out.values(), default=0.0),
                          max(inside, default=0.0), cross_rack, len(set(node_of)), phases)


def _prefix(free: FreeGpus, nodes: list[int] | range, n_gpus: int,
            unit: int) -> list[tuple[int, int]] | None:
    """Fewest servers among ``nodes`` (most free first, ties to lower id) holding n_gpus.

    Each server offers its free GPUs rounded down to a multiple of ``unit``;
    the last one gives only what is still needed.
    """
    offers = sorted(((free.free_in_node(n) // unit * unit, n) for n in nodes),
                    key=lambda fn: (-fn[0], fn[1]))
    chosen: list[tuple[int, int]] = []
    need = n_gpus
    for offer, node in offers:
        if offer <= 0:
            break
        take = min(offer, need)
        chosen.append((node, take))
        need -= take
        if need == 0:
            return chosen
    return None


def choose_servers(free: FreeGpus, n_gpus: int, unit: int = 1) -> list[tuple[int, int]] | None:
    """``(node, n_gpus there)`` for a job of ``n_gpus``, or None if it cannot be placed now.

    One server by best fit if any holds the job; else the fewest servers of
    one rack (the rack needing fewest, ties to the lower id); else the fewest
    servers anywhere.
    """
    if n_gpus > free.n_free:
        return None
    node = free.tightest_node(n_gpus)  # None also for a job larger than every node
    if node is not None:
        return [(node, n_gpus)]
    topology = free.topology
    best: list[tuple[int, int]] | None = None
    for rack, rack_nodes in enumerate(topology.rack_nodes):
        if free.free_in_rack(rack) < n_gpus:
            continue
        servers = _prefix(free, list(rack_nodes), n_gpus, unit)
        if servers is not None and (best is None or len(servers) < len(best)):
            best = servers
    return best if best is not None else _prefix(free, range(topology.n_nodes), n_gpus, unit)


def _super_vertices(graph: JobGraph, coarsen: bool) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """Groups of vertices moved together, and each group's (replica, stage)."""
    par = graph.parallelism
    groups: list[list[int]] = []
    coords: list[tuple[int, int]] = []
    for a in range(par.data):
        for b in range(par.pipeline):
            tensor_group = [graph.vertex(a, b, c) for c in range(par.tensor)]
            if coarsen:
                groups.append(tensor_group)
                coords.append((a, b))
            else:
                groups.extend([v] for v in tensor_group)
                coords.extend((a, b) for _ in tensor_group)
    return groups, coords


def _cut_and_max_out(adj: list[dict[int, float]], part: list[int]) -> tuple[float, float]:
    cut = 0.0
    out: dict[int, float] = {}
    for u, neighbours in enumerate(adj):
        for v, w in neighbours.items():
            if u < v and part[u] != part[v]:
                cut += w
                out[part[u]] = out.get(part[u], 0.0) + w
                out[part[v]] = out.get(part[v], 0.0) + w
    return cut, max(out.values(), default=0.0)


def _refine(adj: list[dict[int, float]], part: list[int], passes: int) -> None:
    """Greedy Kernighan-Lin: swap boundary vertices across parts while the cut drops."""
    n = len(part)
    for _ in range(passes):
        improved = False
        for u in range(n):
            pu = part[u]
            to_part: dict[int, float] = {}
            for v, w in adj[u].items():
                to_part[part[v]] = to_part.get(part[v], 0.0) + w
            if len(to_part) == 1 and pu in to_part:
                continue  # not on the boundary
            best_gain, best_v = 1e-9, -1
            for v in range(n):
                pv = part[v]
                if pv == pu or pv not in to_part:
                    continue
                v_to_pu = v_to_pv = 0.0
                for x, w in adj[v].items():
                    if part[x] == pu:
                        v_to_pu += w
                    elif part[x] == pv:
                        v_to_pv += w
                w_uv = adj[u].get(v, 0.0)
                gain = (to_part.get(pv, 0.0) - to_part.get(pu, 0.0)) + (v_to_pu - v_to_pv) - 2.0 * w_uv
                if gain > best_gain:
                    best_gain, best_v = gain, v
            if best_v >= 0:
                part[u], part[best_v] = part[best_v], pu
                improved = True
        if not improved:
            return


def partition(graph: JobGraph, capacities: list[int], *, coarsen: bool,
              kl_passes: int = 10) -> list[int]:
    """Part index of each vertex, with ``capacities[i]`` vertices in part ``i``.

    With ``coarsen`` each tensor-parallel group moves as one (every capacity
    must then be a multiple of the tensor degree).
    """
    groups, coords = _super_vertices(graph, coarsen)
    size = len(groups[0])
    slots = [c // size for c in capacities]
    index = {v: i for i, members in enumerate(groups) for v in members}
    fine = graph.adjacency()
    adj: list[dict[int, float]] = [{} for _ in groups]
    for u, neighbours in enumerate(fine):
        for v, w in neighbours.items():
            gu, gv = index[u], index[v]
            if gu != gv:
                adj[gu][gv] = adj[gu].get(gv, 0.0) + w
    stage_major = sorted(range(len(groups)), key=lambda i: (coords[i][1], coords[i][0], i))
    replica_major = sorted(range(len(groups)), key=lambda i: (coords[i][0], coords[i][1], i))
    best: list[int] | None = None
    best_cost = (float("inf"), float("inf"))
    for order in (stage_major, replica_major):
        part = [0] * len(groups)
        position = 0
        for part_id, count in enumerate(slots):
            for i in order[position:position + count]:
                part[i] = part_id
            position += count
        cost = _cut_and_max_out(adj, part)
        if cost < best_cost:
            best, best_cost = part, cost
    assert best is not None
    if len(groups) <= KL_MAX_VERTICES:
        _refine(adj, best, kl_passes)
    return [best[index[v]] for v in range(graph.n_vertices)]


def place_graph(free: FreeGpus, graph: JobGraph, *, kl_passes: int = 10) -> GraphPlacement | None:
    """Map ``graph``'s workers onto free GPUs with little traffic between servers.

    Returns None when fewer free GPUs than workers are left.
    """
    n = graph.n_vertices
    tensor = graph.parallelism.tensor
    servers = choose_servers(free, n, tensor) if tensor > 1 else None
    coarsen = servers is not None
    if servers is None:
        servers = choose_servers(free, n)
        if servers is None:
            return None
    if len(servers) == 1:
        part = [0] * n
    else:
        part = partition(graph, [count for _, count in servers], coarsen=coarsen,
                         kl_passes=kl_passes)
    pools = [free.free_gpu_ids(node)[:count] for node, count in servers]
    used = [0] * len(servers)
    gpu_ids = []
    for v in range(n):
        p = part[v]
        gpu_ids.append(pools[p][used[p]])
        used[p] += 1
    return placement_cost(graph, tuple(gpu_ids), free.topology)
