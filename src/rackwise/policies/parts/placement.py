"""Placement strategies: which free GPUs a job of n GPUs gets.

Each strategy is a pure function ``(free, n_gpus, rng) -> gpu ids | None``
over the read-only `FreeGpus` protocol, so any policy can reuse any of them
on the live allocation or on a tentative overlay. ``None`` means "does not
fit now"; the caller decides whether to wait.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from rackwise.cluster.allocation import FreeGpus, FreeSlices, slices_of
from rackwise.errors import UnknownNameError, suggest

Placement = Callable[[FreeGpus, int, np.random.Generator], "tuple[int, ...] | None"]


def gpus_from(free: FreeGpus, nodes: Iterable[int], n_gpus: int) -> tuple[int, ...]:
    """Take the lowest free GPU ids from the given nodes, in order, until n_gpus."""
    chosen: list[int] = []
    for node in nodes:
        need = n_gpus - len(chosen)
        if need <= 0:
            break
        chosen.extend(free.free_gpu_ids(node)[:need])
    return tuple(chosen)


def fewest_nodes(free: FreeGpus, nodes: Iterable[int], n_gpus: int) -> list[int] | None:
    """The fewest nodes among ``nodes`` that hold n_gpus free GPUs.

    Largest nodes first; the last one is the tightest node that covers the
    remainder, so a partial node is as full as possible.
    """
    free_in_node = free.free_in_node
    return fewest_of([(-count, n) for n in nodes if (count := free_in_node(n)) > 0], n_gpus)


def fewest_of(counted: list[tuple[int, int]], n_gpus: int) -> list[int] | None:
    """`fewest_nodes` over (-free count, node) pairs of nodes with free GPUs (sorted here, in place)."""
    # (-count, node) sorts largest first, then by node id, without a key function (hot path).
    counted.sort()
    chosen: list[int] = []
    need = n_gpus
    for index, (minus_count, node) in enumerate(counted):
        if -minus_count >= need:
            # the tightest of the remaining nodes that still covers `need`
            tight = min((-c, n) for c, n in counted[index:] if -c >= need)
            chosen.append(tight[1])
            return chosen
        chosen.append(node)
        need += minus_count
    return None


def consolidated(free: FreeGpus, n_gpus: int, rng: np.random.Generator) -> tuple[int, ...] | None:
    """Keep a job close: one node if any fits (the tightest), else one rack
    (the rack needing fewest nodes), else the fewest nodes anywhere.

    Staying inside one rack wins over spanning racks even when spanning
    would use fewer nodes, because the rack uplink is the slowest link.
    """
    if n_gpus > free.n_free:
        return None
    node = free.tightest_node(n_gpus)  # None also for a job larger than every node
    if node is not None:
        return tuple(free.free_gpu_ids(node)[:n_gpus])
    topology = free.topology
    counts: list[int] | None = None  # read once, when a rack first qualifies
    best: list[int] | None = None
    fewest_possible = -(-n_gpus // topology.max_gpus_per_node)
    for rack, rack_nodes in enumerate(topology.rack_nodes):
        if free.free_in_rack(rack) < n_gpus:
            continue
        if counts is None:
            counts = free.free_counts()
        nodes = fewest_of([(-counts[n], n) for n in rack_nodes if counts[n] > 0], n_gpus)
        if nodes is not None and (best is None or len(nodes) < len(best)):
            best = nodes
            if len(best) == fewest_possible:  # no later rack can do better
                break
    if best is None:
        best = fewest_of([(-count, n) for n, count in free.free_nodes()], n_gpus)
    return None if best is None else gpus_from(free, best, n_gpus)


def first_fit(free: FreeGpus, n_gpus: int, rng: np.random.Generator) -> tuple[int, ...] | None:
    """The lowest-numbered free GPUs, in node order, wherever they are."""
    if n_gpus > free.n_free:
        return None
    return gpus_from(free, _nodes_with_free_gpus(free), n_gpus)


def _nodes_with_free_gpus(free: FreeGpus) -> Iterator[int]:
    """The nodes with a free GPU, lowest id first, read lazily.

    A generator function, not a generator expression: the compiled build
    makes a generator expression a whole list.
    """
    for node in range(free.topology.n_nodes):
        if free.free_in_node(node) > 0:
            yield node


def best_fit(free: FreeGpus, n_gpus: int, rng: np.random.Generator) -> tuple[int, ...] | None:
    """The node left with the fewest free GPUs; if none fits alone, the fullest nodes first."""
    if n_gpus > free.n_free:
        return None
    node = free.tightest_node(n_gpus)
    if node is not None:
        return tuple(free.free_gpu_ids(node)[:n_gpus])
    topology = free.topology
    counted = sorted(
        (free.free_in_node(n), n) for n in range(topology.n_nodes) if free.free_in_node(n) > 0
    )
    return gpus_from(free, (n for _, n in counted), n_gpus)


def random_gpus(free: FreeGpus, n_gpus: int, rng: np.random.Generator) -> tuple[int, ...] | None:
    """Uniformly random free GPUs (from the run's seeded generator)."""
    if n_gpus > free.n_free:
        return None
    pool = [g for n in range(free.topology.n_nodes) for g in free.free_gpu_ids(n)]
    picks = rng.choice(len(pool), size=n_gpus, replace=False)
    return tuple(sorted(pool[int(i)] for i in picks))


def fractional_gpu(free: FreeSlices, share: float) -> int | None:
    """Where a fractional job's share goes: the split GPU it fills best, else a fresh GPU
    on the tightest node (so whole nodes stay whole for multi-GPU jobs), else None."""
    gpu = free.sliced_gpu_for(slices_of(share))
    if gpu is not None:
        return gpu
    node = free.tightest_node(1)
    return None if node is None else free.free_gpu_ids(node)[0]


PLACEMENTS: dict[str, Placement] = {
    "consolidated": consolidated,
    "first-fit": first_fit,
    "best-fit": best_fit,
    "random": random_gpus,
}


def get_placement(name: str) -> Placement:
    """The placement strategy registered under ``name``."""
    try:
        return PLACEMENTS[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown placement '{name}'; known: {', '.join(PLACEMENTS)}.{suggest(name, list(PLACEMENTS))}"
        ) from None
