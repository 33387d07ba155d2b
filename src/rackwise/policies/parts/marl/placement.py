"""From an agent's server choice to GPU ids: the placement rule under the action.

An agent picks an *anchor* server; the rule then picks GPUs: the anchor's
lowest free ids first, then the fewest nodes of the anchor's rack, then the
fewest nodes anywhere. Anchors are "clean" when they hold the whole job (or a
whole node's worth of a job wider than a node); only when no clean anchor
exists may a job be spread from any server with a free GPU, so a job that
fits is never blocked by the rule. Pure functions over `FreeGpus`.
"""

from __future__ import annotations

import numpy as np

from rackwise.cluster.allocation import FreeGpus
from rackwise.policies.parts.placement import fewest_nodes, fewest_of, gpus_from


def feasible_mask(free: FreeGpus, n_gpus: int, server_size: np.ndarray,
                  counts: np.ndarray | None = None) -> np.ndarray:
    """Per server, whether it may anchor a job of ``n_gpus`` GPUs now (``server_size``: GPUs per
    server; ``counts``: ``free.free_counts()`` as an array, if the caller has it)."""
    if n_gpus > free.n_free:
        return np.zeros(len(server_size), dtype=bool)
    if counts is None:
        counts = np.asarray(free.free_counts())
    clean = counts >= np.minimum(n_gpus, server_size)  # as `_clean`, for every server at once
    return clean if clean.any() else counts > 0


def place_anchored(free: FreeGpus, n_gpus: int, server: int) -> tuple[int, ...] | None:
    """GPU ids for a job of ``n_gpus`` anchored at ``server``, or None if the anchor is not allowed."""
    if not 0 <= server < free.topology.n_nodes or not feasible_servers_one(free, n_gpus, server):
        return None
    return anchored_gpus(free, n_gpus, server)


def anchored_gpus(free: FreeGpus, n_gpus: int, server: int) -> tuple[int, ...] | None:
    """`place_anchored` for an anchor already known to be allowed (`feasible_mask`)."""
    topology = free.topology
    own = free.free_gpu_ids(server)[:n_gpus]
    need = n_gpus - len(own)
    if need == 0:
        return tuple(own)
    rack = topology.nodes[server].rack_id
    others = [n for n in topology.rack_nodes[rack] if n != server]
    if sum(free.free_in_node(n) for n in others) >= need:
        nodes = fewest_nodes(free, others, need)
    else:  # only nodes with a free GPU count: on a busy cluster, far fewer than all
        nodes = fewest_of([(-count, n) for n, count in free.free_nodes() if n != server], need)
    if nodes is None:
        return None
    return tuple(own) + gpus_from(free, nodes, need)


def feasible_servers_one(free: FreeGpus, n_gpus: int, server: int) -> bool:
    """`feasible_mask` for one server (O(1) when the server is clean)."""
    if n_gpus > free.n_free:
        return False
    if _clean(free, n_gpus, server):
        return True
    if free.free_in_node(server) == 0:
        return False
    return not any(_clean(free, n_gpus, n) for n in range(free.topology.n_nodes))


def _clean(free: FreeGpus, n_gpus: int, server: int) -> bool:
    return free.free_in_node(server) >= min(n_gpus, free.topology.nodes[server].n_gpus)
