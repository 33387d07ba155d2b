"""Which GPU is held by which job, with O(1) free-GPU counts per node and rack.

`Allocation` is the live state, owned and changed only by an engine.
`TentativeAllocation` is a cheap overlay a policy uses to try out several
starts and preemptions in one decision without touching the live state.
Both answer the read-only `FreeGpus` protocol that placement strategies use.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable, Iterator
from typing import Protocol

from rackwise.cluster.topology import Topology


class FreeGpus(Protocol):
    """Read-only questions about free GPUs (what placement strategies ask)."""

    topology: Topology

    @property
    def n_free(self) -> int: ...

    def free_in_node(self, node_id: int) -> int: ...

    def free_in_rack(self, rack_id: int) -> int: ...

    def free_gpu_ids(self, node_id: int) -> list[int]: ...

    def tightest_node(self, n_gpus: int) -> int | None:
        """A node with the fewest free GPUs that still has ``n_gpus`` free, or None."""
        ...


class Allocation:
    """The live GPU ownership table of one cluster.

    Invariants (checked by tests): every GPU has at most one owner; for every
    node and rack, free + allocated equals capacity.
    """

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.owner: list[str | None] = [None] * topology.n_gpus
        self.node_free: list[int] = [node.n_gpus for node in topology.nodes]
        self.rack_free: list[int] = list(topology.rack_capacity)
        self._free_ids: list[list[int]] = [list(node.gpu_ids) for node in topology.nodes]
        self._n_free = topology.n_gpus
        # nodes bucketed by free count; dicts keep insertion order, so the
        # pick within a bucket is deterministic.
        self._by_free: list[dict[int, None]] = [{} for _ in range(topology.max_gpus_per_node + 1)]
        for node in topology.nodes:
            self._by_free[node.n_gpus][node.node_id] = None

    # ------------------------------------------------------------------ queries
    @property
    def n_free(self) -> int:
        return self._n_free

    def free_in_node(self, node_id: int) -> int:
        return self.node_free[node_id]

    def free_in_rack(self, rack_id: int) -> int:
        return self.rack_free[rack_id]

    def free_gpu_ids(self, node_id: int) -> list[int]:
        """Free GPU ids of a node, ascending (a copy)."""
        return list(self._free_ids[node_id])

    def tightest_node(self, n_gpus: int) -> int | None:
        for count in range(max(n_gpus, 1), len(self._by_free)):
            bucket = self._by_free[count]
            if bucket:
                return next(iter(bucket))
        return None

    def nodes_with_free(self, count: int) -> Iterator[int]:
        """Nodes with exactly ``count`` free GPUs."""
        if 0 <= count < len(self._by_free):
            yield from self._by_free[count]

    # ---------------------------------------------------------------- mutations
    def allocate(self, job_id: str, gpu_ids: Iterable[int]) -> None:
        """Give GPUs to a job. The caller has checked that they are free."""
        topology = self.topology
        for gpu in gpu_ids:
            self.owner[gpu] = job_id
            node = topology.gpu_node[gpu]
            self._free_ids[node].remove(gpu)
            self._move(node, -1)

    def release(self, gpu_ids: Iterable[int]) -> None:
        topology = self.topology
        for gpu in gpu_ids:
            self.owner[gpu] = None
            node = topology.gpu_node[gpu]
            insort(self._free_ids[node], gpu)
            self._move(node, +1)

    def _move(self, node: int, delta: int) -> None:
        before = self.node_free[node]
        del self._by_free[before][node]
        self._by_free[before + delta][node] = None
        self.node_free[node] = before + delta
        self.rack_free[self.topology.nodes[node].rack_id] += delta
        self._n_free += delta


class TentativeAllocation:
    """An overlay on an `Allocation`: take and give back GPUs without changing it.

    Cost is proportional to the GPUs touched, not to the cluster size.
    """

    def __init__(self, base: Allocation) -> None:
        self.topology = base.topology
        self._base = base
        self._taken: set[int] = set()
        self._given: set[int] = set()
        self._node_delta: dict[int, int] = {}
        self._rack_delta: dict[int, int] = {}
        self._n_free = base.n_free

    @property
    def n_free(self) -> int:
        return self._n_free

    def free_in_node(self, node_id: int) -> int:
        return self._base.node_free[node_id] + self._node_delta.get(node_id, 0)

    def free_in_rack(self, rack_id: int) -> int:
        return self._base.rack_free[rack_id] + self._rack_delta.get(rack_id, 0)

    def is_free(self, gpu_id: int) -> bool:
        if gpu_id in self._taken:
            return False
        return gpu_id in self._given or self._base.owner[gpu_id] is None

    def free_gpu_ids(self, node_id: int) -> list[int]:
        ids = self._base._free_ids[node_id]
        if node_id not in self._node_delta:
            return list(ids)
        taken, given = self._taken, self._given
        ids = [g for g in ids if g not in taken]
        if given:
            node = self.topology.nodes[node_id]
            ids.extend(g for g in node.gpu_ids if g in given)
            ids.sort()
        return ids

    def tightest_node(self, n_gpus: int) -> int | None:
        best: int | None = None
        best_free = self.topology.max_gpus_per_node + 1
        for node in self._node_delta:
            free = self.free_in_node(node)
            if n_gpus <= free < best_free or (free == best_free and best is not None and node < best):
                best, best_free = node, free
        by_free = self._base._by_free
        for count in range(max(n_gpus, 1), min(best_free, len(by_free))):
            for node in by_free[count]:
                if node not in self._node_delta:
                    return node
        return best

    def take(self, gpu_ids: Iterable[int]) -> None:
        """Mark free GPUs as used in this overlay."""
        taken, given, owner = self._taken, self._given, self._base.owner
        per_node: dict[int, int] = {}
        gpu_node = self.topology.gpu_node
        for gpu in gpu_ids:
            if gpu in given:
                given.discard(gpu)
            elif gpu in taken or owner[gpu] is not None:
                raise ValueError(f"GPU {gpu} is not free")
            else:
                taken.add(gpu)
            node = gpu_node[gpu]
            per_node[node] = per_node.get(node, 0) + 1
        self._shift(per_node, -1)

    def give(self, gpu_ids: Iterable[int]) -> None:
        """Mark used GPUs as free in this overlay (a tentative preemption)."""
        taken, given, owner = self._taken, self._given, self._base.owner
        per_node: dict[int, int] = {}
        gpu_node = self.topology.gpu_node
        for gpu in gpu_ids:
            if gpu in taken:
                taken.discard(gpu)
            elif gpu in given or owner[gpu] is None:
                raise ValueError(f"GPU {gpu} is already free")
            else:
                given.add(gpu)
            node = gpu_node[gpu]
            per_node[node] = per_node.get(node, 0) + 1
        self._shift(per_node, +1)

    def _shift(self, per_node: dict[int, int], sign: int) -> None:
        # One update per node touched, not per GPU: jobs span few nodes.
        nodes = self.topology.nodes
        node_delta, rack_delta = self._node_delta, self._rack_delta
        for node, count in per_node.items():
            delta = sign * count
            node_delta[node] = node_delta.get(node, 0) + delta
            rack = nodes[node].rack_id
            rack_delta[rack] = rack_delta.get(rack, 0) + delta
            self._n_free += delta
