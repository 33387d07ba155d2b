"""Pieces shared by heterogeneity-aware policies (Gavel, Hadar, HadarE).

- `TypeThroughputs`: how fast each job would run on each GPU type, asked of
  the performance model through the view with a representative consolidated
  placement on that type, and cached per job and type.
- `TypePlacer`: which free GPUs of one type each job of a round gets (one
  node if any fits, else the fewest nodes).
- `TypeMask`: the free GPUs of one type only, for any placement strategy.
- `RoundClock`: when a round-based policy's next round is due.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np
from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import FreeGpus, TentativeAllocation
from rackwise.cluster.topology import Topology
from rackwise.engine.view import ClusterView
from rackwise.workload.state import JobState


def nodes_by_type(topology: Topology) -> dict[str, tuple[int, ...]]:
    """Node ids of each GPU type, ascending; types in sorted order."""
    out: dict[str, list[int]] = {t: [] for t in topology.gpu_types}
    for node in topology.nodes:
        out[node.gpu_type].append(node.node_id)
    return {t: tuple(ids) for t, ids in out.items()}


def capacity_by_type(topology: Topology) -> dict[str, int]:
    """GPUs of each GPU type."""
    out = dict.fromkeys(topology.gpu_types, 0)
    for node in topology.nodes:
        out[node.gpu_type] += node.n_gpus
    return out


def representative_gpus(topology: Topology, node_ids: Sequence[int],
                        n_gpus: int) -> tuple[int, ...] | None:
    """A consolidated placement of ``n_gpus`` GPUs on the given nodes (ignoring who holds them).

    The smallest single node that holds them all, else the largest nodes
    first. None if the nodes hold fewer than ``n_gpus`` GPUs.
    """
    nodes = [topology.nodes[n] for n in node_ids]
    fitting = [n for n in nodes if n.n_gpus >= n_gpus]
    if fitting:
        node = min(fitting, key=lambda n: (n.n_gpus, n.node_id))
        return tuple(node.gpu_ids[:n_gpus])
    chosen: list[int] = []
    for node in sorted(nodes, key=lambda n: (-n.n_gpus, n.node_id)):
        chosen.extend(node.gpu_ids[:n_gpus - len(chosen)])
        if len(chosen) == n_gpus:
            return tuple(chosen)
    return None


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class TypeThroughputs:
    """Iterations per second of whole jobs on each GPU type, asked once per job and type.

    ``rate[j]`` is the rate of the job with all its GPUs of type j, placed as
    compactly as the topology allows; 0 where type j has too few GPUs. With
    ``extrapolate=True`` such a type instead gets the job's rate on all the
    GPUs of that type, unscaled (a stand-in for "the job's rate were all its
    tasks of this type", needed when a job mixes types).

    The cache is keyed by job id, not model: a model's rate can depend on the
    job (e.g. `IdealPerf` replays each job's own trace speed).
    """

    def __init__(self, topology: Topology, *, extrapolate: bool = False) -> None:
        self.topology = topology
        self.types: tuple[str, ...] = topology.gpu_types
        self.nodes = nodes_by_type(topology)
        self.capacity = np.array([sum(topology.nodes[n].n_gpus for n in self.nodes[t])
                                  for t in self.types], dtype=float)
        index = {gpu_type: j for j, gpu_type in enumerate(self.types)}
        self.type_of_gpu = [index[topology.nodes[node].gpu_type] for node in topology.gpu_node]  # by GPU id
        self.extrapolate = extrapolate
        self._cache: dict[str, np.ndarray] = {}
        self._placements: dict[tuple[str, int], tuple[int, ...] | None] = {}

    def of(self, view: ClusterView, state: JobState) -> np.ndarray:
        """Rates of one job on each type (in ``self.types`` order); do not modify."""
        cached = self._cache.get(state.job_id)
        if cached is not None:
            return cached
        job = state.job
        rates = np.zeros(len(self.types))
        for j, gpu_type in enumerate(self.types):
            cap = int(self.capacity[j])
            n = job.n_gpus if cap >= job.n_gpus or not self.extrapolate else cap
            gpus = self._placement(gpu_type, n)
            if gpus is None or n == 0:
                continue
            rates[j] = view.perf.rate(job, gpus, view.running)
        rates[~np.isfinite(rates)] = 0.0
        self._cache[state.job_id] = rates
        return rates

    def _placement(self, gpu_type: str, n_gpus: int) -> tuple[int, ...] | None:
        # Depends on the type and size only; asked for every job, so kept.
        key = (gpu_type, n_gpus)
        if key not in self._placements:
            self._placements[key] = representative_gpus(self.topology, self.nodes[gpu_type], n_gpus)
        return self._placements[key]

    def matrix(self, view: ClusterView, states: Sequence[JobState]) -> np.ndarray:
        """A jobs x types matrix of rates."""
        if not states:
            return np.zeros((0, len(self.types)))
        cached = self._cache.get
        rows = [row if (row := cached(s.job_id)) is not None else self.of(view, s) for s in states]
        # one copy of the rows, in C (vstack reshapes each row first)
        return np.concatenate(rows).reshape(len(states), len(self.types))

    def forget(self, job_id: str) -> None:
        self._cache.pop(job_id, None)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class TypePlacer:
    """Places jobs one after another on the free GPUs of one type each, over a tentative allocation.

    A job gets the tightest single node of its type that fits, else the
    nodes with the most free GPUs first (fewest nodes). The free nodes of
    each type are kept in buckets by free count, so a placement costs time
    in the GPUs per node, not in the nodes of the type: a Gavel round at
    10,000 GPUs places thousands of jobs. A type's buckets are built when it
    is first placed on (most rounds of a loaded cluster start few jobs).
    """

    def __init__(self, free: TentativeAllocation, nodes: Mapping[str, tuple[int, ...]]) -> None:
        self.free = free
        self._nodes = nodes
        self._buckets: dict[str, list[list[int]]] = {}  # type -> node ids by free count, each sorted
        self._count: dict[int, int] = {}  # node -> its free count in the buckets
        self._total: dict[str, int] = {}  # type -> its free GPUs

    def _buckets_of(self, gpu_type: str) -> list[list[int]]:
        buckets = self._buckets.get(gpu_type)
        if buckets is None:
            ids = self._nodes[gpu_type]
            nodes = self.free.topology.nodes
            buckets = self._buckets[gpu_type] = [[] for _ in range(
                max((nodes[node].n_gpus for node in ids), default=0) + 1)]
            total = 0
            for node in ids:  # ascending, so every bucket starts sorted
                count = self._count[node] = self.free.free_in_node(node)
                buckets[count].append(node)
                total += count
            self._total[gpu_type] = total
        return buckets

    def place(self, gpu_type: str, n_gpus: int) -> tuple[int, ...] | None:
        """``n_gpus`` free GPUs of ``gpu_type`` (not yet taken), or None if it has fewer free."""
        buckets = self._buckets_of(gpu_type)
        if self._total[gpu_type] < n_gpus:
            return None
        for count in range(max(n_gpus, 1), len(buckets)):
            if buckets[count]:
                return tuple(self.free.free_gpu_ids(buckets[count][0])[:n_gpus])
        chosen: list[int] = []
        for count in range(len(buckets) - 1, 0, -1):
            for node in buckets[count]:
                chosen.extend(self.free.free_gpu_ids(node)[:n_gpus - len(chosen)])
                if len(chosen) == n_gpus:
                    return tuple(chosen)
        return tuple(chosen)

    def take(self, gpus: Sequence[int]) -> None:
        """Take ``gpus`` from the allocation and move their nodes to their new buckets."""
        free = self.free
        free.take(gpus)
        gpu_node, nodes = free.topology.gpu_node, free.topology.nodes
        for node in {gpu_node[gpu] for gpu in gpus}:
            gpu_type = nodes[node].gpu_type
            buckets = self._buckets.get(gpu_type)
            if buckets is None:
                continue  # built from the allocation, this take included, when first placed on
            old = self._count[node]
            new = self._count[node] = free.free_in_node(node)
            del buckets[old][bisect.bisect_left(buckets[old], node)]
            bisect.insort(buckets[new], node)
            self._total[gpu_type] += new - old


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class TypeMask:
    """A `FreeGpus` that sees only the given nodes (one GPU type's); others look full.

    Lets any placement strategy (e.g. `parts.locality.best_placement`) choose
    among the GPUs of one type, on the live allocation or a tentative overlay.
    Cost per question is proportional to the nodes of the type, not the cluster.
    """

    def __init__(self, free: FreeGpus, node_ids: Iterable[int]) -> None:
        self.topology = free.topology
        self._free = free
        self._nodes = tuple(sorted(node_ids))
        self._member = frozenset(self._nodes)
        self._rack_nodes = [tuple(n for n in nodes if n in self._member)
                            for nodes in self.topology.rack_nodes]

    @property
    def n_free(self) -> int:
        return sum(self._free.free_in_node(n) for n in self._nodes)

    def free_in_node(self, node_id: int) -> int:
        return self._free.free_in_node(node_id) if node_id in self._member else 0

    def free_in_rack(self, rack_id: int) -> int:
        return sum(self._free.free_in_node(n) for n in self._rack_nodes[rack_id])

    def free_gpu_ids(self, node_id: int) -> list[int]:
        return self._free.free_gpu_ids(node_id) if node_id in self._member else []

    def free_counts(self) -> list[int]:
        counts = self._free.free_counts()
        return [count if n in self._member else 0 for n, count in enumerate(counts)]

    def free_nodes(self) -> list[tuple[int, int]]:
        return [(n, c) for n in self._nodes if (c := self._free.free_in_node(n)) > 0]

    def tightest_node(self, n_gpus: int) -> int | None:
        counted = [(c, n) for n in self._nodes if (c := self._free.free_in_node(n)) >= max(n_gpus, 1)]
        return min(counted)[1] if counted else None

    def lowest_node_with(self, count: int) -> int | None:
        nodes = self._nodes if count > 0 else range(self.topology.n_nodes)  # others look full
        return next((n for n in nodes if self.free_in_node(n) == count), None)


_SUBMIT_ORDER = attrgetter("job.submit_time", "job_id")


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class RoundClock:
    """Tracks a round-based policy's rounds between engine calls.

    A round is due when ``round_s`` has passed since the last one, or when
    jobs wait and nothing runs (an idle cluster need not wait for a round).
    """

    round_s: float
    next_round: float = field(default=-np.inf)

    def due(self, view: ClusterView, now: float) -> bool:
        if now >= self.next_round - 1e-9:
            return True
        return bool(view.pending) and not view.running

    def start_round(self, now: float) -> None:
        self.next_round = now + self.round_s

    def wake_at(self, view: ClusterView, now: float) -> float | None:
        """The next round's time if jobs are active (the engine's own rounds stop when idle)."""
        if (view.pending or view.running) and self.next_round > now:
            return self.next_round
        return None

    def begin(self, view: ClusterView, now: float) -> list[JobState] | None:
        """Start a round if one is due: every active job, by submit time; else None."""
        if not self.due(view, now):
            return None
        self.start_round(now)
        return sorted([*view.pending.values(), *view.running.values()], key=_SUBMIT_ORDER)
