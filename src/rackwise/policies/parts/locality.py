"""Consolidation levels and placements that stay within a level.

A placement's level is the highest boundary its GPUs cross: ``L0`` one node,
``L1`` one rack (several nodes), ``L2`` the whole cluster (several racks).
Delay-scheduling policies ask for the best placement no looser than the
level a job is currently allowed, and estimate how much a job slows down
when it is spread, from representative placements put to the perf model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import FreeGpus
from rackwise.cluster.topology import Topology
from rackwise.policies.parts.placement import fewest_nodes, gpus_from
from rackwise.workload.job import Job

if TYPE_CHECKING:
    from rackwise.perf.base import PerfModel
    from rackwise.workload.state import JobState

L0, L1, L2 = 0, 1, 2
LEVEL_NAMES = ("node", "rack", "cluster")

GpuIds = tuple[int, ...]


def placement_level(topology: Topology, gpu_ids: GpuIds | list[int]) -> int:
    """L0 if the GPUs share a node, L1 if they share a rack, else L2."""
    n_nodes, n_racks = topology.spread(gpu_ids)
    return L0 if n_nodes <= 1 else (L1 if n_racks <= 1 else L2)


def target_level(topology: Topology, n_gpus: int) -> int:
    """The tightest level any placement of ``n_gpus`` can reach on an empty cluster."""
    if n_gpus <= topology.max_gpus_per_node:
        return L0
    return L1 if n_gpus <= max(topology.rack_capacity) else L2


def _tightest_node(free: FreeGpus, n_gpus: int) -> int | None:
    """The node left with the fewest free GPUs after taking n_gpus; lowest id on ties."""
    probe = free.tightest_node(n_gpus)
    if probe is None:
        return None
    # `tightest_node` gives the best count but not the lowest id among equals.
    return free.lowest_node_with(free.free_in_node(probe))


def best_placement(free: FreeGpus, n_gpus: int, max_level: int) -> GpuIds | None:
    """The best placement no looser than ``max_level``, or None if there is none now.

    Preference: the tightest level first; within a level the fewest nodes,
    then the least leftover (best fit: fewest free GPUs left in the node or
    rack), then the lowest node id.
    """
    if n_gpus > free.n_free:
        return None
    node = _tightest_node(free, n_gpus)  # None also for a job larger than every node
    if node is not None:
        return tuple(free.free_gpu_ids(node)[:n_gpus])
    topology = free.topology
    if max_level <= L0:
        return None
    best_key: tuple[int, int, int] | None = None
    best_nodes: list[int] = []
    for rack, rack_nodes in enumerate(topology.rack_nodes):
        leftover = free.free_in_rack(rack) - n_gpus
        if leftover < 0:
            continue
        nodes = fewest_nodes(free, rack_nodes, n_gpus)
        if nodes is None:  # pragma: no cover - the rack holds enough free GPUs
            continue
        key = (len(nodes), leftover, min(nodes))
        if best_key is None or key < best_key:
            best_key, best_nodes = key, nodes
    if best_key is not None:
        return gpus_from(free, best_nodes, n_gpus)
    if max_level <= L1:
        return None
    nodes = fewest_nodes(free, range(topology.n_nodes), n_gpus)
    return None if nodes is None else gpus_from(free, nodes, n_gpus)


def place_in_domain(free: FreeGpus, n_gpus: int, level: int, domain: int) -> GpuIds | None:
    """Fewest-node placement inside one node (``level`` L0) or one rack (L1)."""
    if level == L0:
        ids = free.free_gpu_ids(domain)
        return tuple(ids[:n_gpus]) if len(ids) >= n_gpus else None
    nodes = fewest_nodes(free, free.topology.rack_nodes[domain], n_gpus)
    return None if nodes is None else gpus_from(free, nodes, n_gpus)


def domain_free(free: FreeGpus, level: int, domain: int) -> int:
    """Free GPUs in a node (L0) or a rack (L1)."""
    return free.free_in_node(domain) if level == L0 else free.free_in_rack(domain)


def domain_gpu_ids(topology: Topology, level: int, domain: int) -> list[int]:
    """Every GPU id of a node (L0) or a rack (L1)."""
    if level == L0:
        return list(topology.nodes[domain].gpu_ids)
    return [g for n in topology.rack_nodes[domain] for g in topology.nodes[n].gpu_ids]


# --------------------------------------------------------------------------- sensitivity


def main_gpu_type(topology: Topology) -> str:
    """The GPU type with the most GPUs (name order on ties): where sensitivity is measured."""
    counts: dict[str, int] = {}
    for node in topology.nodes:
        counts[node.gpu_type] = counts.get(node.gpu_type, 0) + node.n_gpus
    return min(counts, key=lambda t: (-counts[t], t))


def representative_placements(topology: Topology, n_gpus: int,
                              gpu_type: str) -> tuple[GpuIds, GpuIds, GpuIds] | None:
    """Three what-if placements of n_gpus GPUs of one type: tightest, rack-wide, cross-rack.

    The tightest is the first n GPUs of one node (else of one rack, else of
    the cluster). The rack-wide one puts half the GPUs on each half of one
    rack's nodes, the cross-rack one half in each of two racks. Where the
    cluster has no such layout (one node per rack, one rack) the looser
    placement falls back to the tighter one. None: too few GPUs of the type.
    """
    nodes = topology.nodes
    racks = [[n for n in rn if nodes[n].gpu_type == gpu_type] for rn in topology.rack_nodes]
    racks = [r for r in racks if r]

    def fill(node_ids: list[int], k: int) -> GpuIds | None:
        ids = [g for n in node_ids for g in nodes[n].gpu_ids][:k]
        return tuple(ids) if len(ids) == k else None

    everywhere = [n for r in racks for n in r]
    tight = next((fill([n], n_gpus) for n in everywhere if nodes[n].n_gpus >= n_gpus), None)
    if tight is None:
        tight = next((p for r in racks if (p := fill(r, n_gpus)) is not None), None)
    if tight is None:
        tight = fill(everywhere, n_gpus)
        if tight is None:
            return None
    first, second = (n_gpus + 1) // 2, n_gpus // 2
    rack_wide = tight
    for r in racks:
        half = len(r) // 2
        a, b = fill(r[:half], first), fill(r[half:], second)
        if len(r) >= 2 and a is not None and b is not None:
            rack_wide = a + b
            break
    cross = rack_wide
    for i, ra in enumerate(racks):
        a = fill(ra, first)
        b = next((p for rb in racks[i + 1:] if (p := fill(rb, second)) is not None), None)
        if a is not None and b is not None:
            cross = a + b
            break
    return tight, rack_wide, cross


def sensitivity(perf: PerfModel, job: Job, placements: tuple[GpuIds, GpuIds, GpuIds],
                running: Mapping[str, JobState]) -> tuple[float, float, float] | None:
    """σ at L0, L1, L2: iteration time against the tightest placement, minus 1.

    Returns None when the model's rates say nothing (all equal, or not
    finite and positive), so the caller can fall back on another source.
    """
    rates = [perf.rate(job, gpus, running) for gpus in placements]
    if any(not (math.isfinite(r) and r > 0.0) for r in rates) or rates[0] == rates[1] == rates[2]:
        return None
    sigma_rack = max(0.0, rates[0] / rates[1] - 1.0)
    return 0.0, sigma_rack, max(sigma_rack, rates[0] / rates[2] - 1.0)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class SigmaEstimator:
    """σ per job, cached per (model, GPU count, GPU type); run state of a policy.

    Args:
        gpu_type: The type the representative placements are built from.
        fallback_l1_frac: When rates carry no information, σ(L2) is the job's
            ``comm_sensitivity`` and σ(L1) this fraction of it.
    """

    def __init__(self, gpu_type: str, fallback_l1_frac: float) -> None:
        self.gpu_type = gpu_type
        self.fallback_l1_frac = fallback_l1_frac
        self.cache: dict[tuple[str, int, str], tuple[float, float, float] | None] = {}
        # representative placements per GPU count, for the topology they were built on
        self._placements: dict[int, tuple[GpuIds, GpuIds, GpuIds] | None] = {}
        self._placements_of: Topology | None = None

    def placements(self, topology: Topology, n_gpus: int) -> tuple[GpuIds, GpuIds, GpuIds] | None:
        """`representative_placements` of ``n_gpus`` GPUs, worked out once per count."""
        if topology is not self._placements_of:
            self._placements, self._placements_of = {}, topology
        if n_gpus not in self._placements:
            self._placements[n_gpus] = representative_placements(topology, n_gpus, self.gpu_type)
        return self._placements[n_gpus]

    def sigma(self, perf: PerfModel, topology: Topology, running: Mapping[str, JobState],
              job: Job) -> tuple[float, float, float]:
        if job.n_gpus <= 1:
            return 0.0, 0.0, 0.0  # a single GPU never talks over a network
        key = (job.model or "", job.n_gpus, self.gpu_type)
        if job.model is not None and key in self.cache:
            found = self.cache[key]
        else:
            reps = self.placements(topology, job.n_gpus)
            found = None if reps is None else sensitivity(perf, job, reps, running)
            if job.model is not None:  # without a model name, rates may differ job by job
                self.cache[key] = found
        if found is None:
            return 0.0, self.fallback_l1_frac * job.comm_sensitivity, job.comm_sensitivity
        return found


# --------------------------------------------------------------------------- clearing

Cost = tuple[float, int, float]  # (lost GPU-seconds, number of victims, their summed σ)


def clearing_candidates(topology: Topology, level: int,
                        holders: list[tuple[str, GpuIds, Cost]]) -> dict[int, list[tuple[Cost, int, str]]]:
    """Per node (``level`` L0) or rack (L1), ``(cost, GPUs held there, job_id)`` of each holder in it.

    ``holders`` are ``(job_id, gpu_ids, cost)`` of the running jobs that may be evicted.
    """
    gpu_node, nodes = topology.gpu_node, topology.nodes
    held: dict[int, list[tuple[Cost, int, str]]] = {}
    for job_id, gpu_ids, cost in holders:
        per_domain: dict[int, int] = {}
        for g in gpu_ids:
            node = gpu_node[g]
            domain = node if level == L0 else nodes[node].rack_id
            per_domain[domain] = per_domain.get(domain, 0) + 1
        for domain, count in per_domain.items():
            held.setdefault(domain, []).append((cost, count, job_id))
    return held


def cheapest_clearing(free: FreeGpus, level: int, n_gpus: int,
                      held: dict[int, list[tuple[Cost, int, str]]]) -> tuple[Cost, tuple[str, ...], int] | None:
    """The node (``level`` L0) or rack (L1) where n_gpus GPUs can be freed at least cost.

    ``held`` is `clearing_candidates` of the running jobs that may be
    evicted. Returns (total cost, victims, domain id), or None if no
    domain can be cleared; ties go to the lower cost tuple, then domain id.
    """
    topology = free.topology
    sizes = topology.rack_capacity if level != L0 else None
    # Domains by a lower bound on their cover's GPU-seconds, so that once a cover is found,
    # the domains that cannot beat it are passed over without their knapsack.
    bounded = []
    for domain, candidates in held.items():
        need = n_gpus - domain_free(free, level, domain)
        size = topology.nodes[domain].n_gpus if sizes is None else sizes[domain]
        if need <= 0 or size < n_gpus:
            continue
        bound = _least_lost(candidates, need)
        if bound is not None:
            bounded.append((bound, domain, need))
    bounded.sort()
    best: tuple[Cost, tuple[str, ...], int] | None = None
    for bound, domain, need in bounded:
        # (1 - 1e-9): the bound adds in another order, so its last bits may differ
        if best is not None and bound * (1.0 - 1e-9) > best[0][0]:
            break
        cover = cheapest_cover(held[domain], need)
        if cover is not None and (best is None or (*cover, domain) < best):
            best = (cover[0], cover[1], domain)
    return best


def _least_lost(candidates: list[tuple[Cost, int, str]], need: int) -> float | None:
    """A lower bound on the GPU-seconds lost by any victim set freeing ``need`` GPUs (None: none
    can): victims taken by least loss per GPU, the last in part (the fractional knapsack)."""
    lost = 0.0
    for cost, freed, _ in sorted(candidates, key=lambda c: c[0][0] / c[1]):
        if freed >= need:
            return lost + cost[0] * need / freed
        lost += cost[0]
        need -= freed
    return None


def cheapest_cover(candidates: list[tuple[Cost, int, str]],
                   need: int) -> tuple[Cost, tuple[str, ...]] | None:
    """The victim set freeing at least ``need`` GPUs at the least cost, or None.

    ``candidates`` are ``(cost, gpus_freed, job_id)``; costs are tuples
    (lost GPU-seconds, number of victims, summed sensitivity) compared in that
    order, then the victims' ids. A 0/1 knapsack over freed GPUs, capped at need.
    """
    best: dict[int, tuple[Cost, tuple[str, ...]]] = {0: ((0.0, 0, 0.0), ())}
    for (lost, count, sigma), freed, job_id in candidates:
        for got, (total, ids) in list(best.items()):
            k = min(need, got + freed)
            option = (total[0] + lost, total[1] + count, total[2] + sigma)
            held = best.get(k)
            # (cost, victims) compared as one tuple, the victims built only when they decide
            if held is None or option < held[0] or (option == held[0] and (*ids, job_id) < held[1]):
                best[k] = (option, (*ids, job_id))
    return best.get(need)
