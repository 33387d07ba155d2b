"""Which GPU is held by which job, with O(1) free-GPU counts per node and rack.

`Allocation` is the live state, owned and changed only by an engine.
`TentativeAllocation` is a cheap overlay a policy uses to try out several
starts and preemptions in one decision without touching the live state.
Both answer the read-only `FreeGpus` protocol that placement strategies use.

A fractional job (a share of one GPU) holds slices of a GPU: thousandths,
so that shares add up exactly. A GPU split among fractional jobs is owned
by `SLICED` in the ownership table, so whole-GPU placements never see it
as free, and its tenants and free slices are kept beside the table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence, Set
from typing import Protocol

from mypy_extensions import mypyc_attr

from rackwise.cluster.topology import Topology
from rackwise.sorted_ints import index_of, insert

SLICES_PER_GPU = 1000
SLICED = "~sliced"  # the owner of a GPU split among fractional jobs


def slices_of(share: float) -> int:
    """Slices (thousandths of a GPU) a job's share takes: rounded up, at least one."""
    return min(SLICES_PER_GPU, max(1, math.ceil(share * SLICES_PER_GPU - 1e-9)))


class FreeGpus(Protocol):
    """Read-only questions about free GPUs (what placement strategies ask)."""

    topology: Topology

    @property
    def n_free(self) -> int: ...

    def free_in_node(self, node_id: int) -> int: ...

    def free_in_rack(self, rack_id: int) -> int: ...

    def free_gpu_ids(self, node_id: int) -> list[int]: ...

    def free_counts(self) -> list[int]:
        """Free GPUs of every node, indexed by node id (a copy)."""
        ...

    def free_nodes(self) -> list[tuple[int, int]]:
        """(node, free GPUs) of every node with a free GPU, in no set order."""
        ...

    def tightest_node(self, n_gpus: int) -> int | None:
        """A node with the fewest free GPUs that still has ``n_gpus`` free, or None."""
        ...

    def lowest_node_with(self, count: int) -> int | None:
        """The lowest-id node with exactly ``count`` free GPUs, or None."""
        ...


class FreeSlices(FreeGpus, Protocol):
    """`FreeGpus`, and where a fractional job fits among the GPUs split so far."""

    def sliced_gpu_for(self, slices: int) -> int | None:
        """The split GPU with the fewest free slices that still has ``slices`` free, or None."""
        ...


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
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
        # the lowest node id of a bucket, for the buckets asked since they last lost it
        self._lowest: dict[int, int | None] = {}
        # `_recount`'s: the call that last met each node (a set per call, without the set).
        self._met = [0] * topology.n_nodes
        self._n_recounts = 0
        self.tenants: dict[int, dict[str, int]] = {}  # split GPU -> {fractional job: slices}
        self.room: dict[int, int] = {}  # split GPU -> its free slices

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

    def free_counts(self) -> list[int]:
        return list(self.node_free)

    def free_nodes(self) -> list[tuple[int, int]]:
        # From the buckets: on a busy cluster, far fewer than all nodes.
        return [(node, count) for count in range(1, len(self._by_free))
                for node in self._by_free[count]]

    def tightest_node(self, n_gpus: int) -> int | None:
        for count in range(max(n_gpus, 1), len(self._by_free)):
            bucket = self._by_free[count]
            if bucket:
                return next(iter(bucket))
        return None

    def lowest_node_with(self, count: int) -> int | None:
        if not 0 <= count < len(self._by_free):
            return None
        if count not in self._lowest:
            bucket = self._by_free[count]
            self._lowest[count] = min(bucket) if bucket else None
        return self._lowest[count]

    def sliced_gpu_for(self, slices: int) -> int | None:
        return _best_fit(self.room.items(), slices)

    def node_order(self) -> tuple[int, ...]:
        """Every node, as the free-count buckets hold them (placements break ties by it)."""
        return tuple(node for bucket in self._by_free for node in bucket)

    def set_node_order(self, node_order: Iterable[int]) -> None:
        """Put every node back in its bucket in this order (what `node_order` gave)."""
        for bucket in self._by_free:
            bucket.clear()
        self._lowest.clear()
        for node in node_order:
            self._by_free[self.node_free[node]][node] = None

    def rerank(self, nodes: Set[int], rank: Sequence[int]) -> None:
        """Move ``nodes`` within their buckets to where ``rank`` (lowest first) puts them.

        The other nodes of each bucket must stand in ``rank``'s order already:
        then every bucket ends as `set_node_order` of all nodes by rank leaves it.
        """
        moving: dict[int, list[int]] = {}
        for node in nodes:
            moving.setdefault(self.node_free[node], []).append(node)
        for count, here in moving.items():
            bucket = self._by_free[count]
            here.sort(key=rank.__getitem__)
            # Most often the nodes moved outrank the rest (a job started last): they go last.
            in_order = True
            for node in reversed(bucket):
                if node not in nodes:
                    in_order = rank[node] < rank[here[0]]
                    break
            if in_order:
                for node in here:
                    del bucket[node]
                    bucket[node] = None
            else:
                ranked = sorted(bucket, key=rank.__getitem__)
                bucket.clear()
                for node in ranked:
                    bucket[node] = None

    def nodes_with_free(self, count: int) -> Iterator[int]:
        """Nodes with exactly ``count`` free GPUs."""
        if 0 <= count < len(self._by_free):
            yield from self._by_free[count]

    # ---------------------------------------------------------------- mutations
    def hand_over(self, gpu_ids: Iterable[int], job_id: str) -> None:
        """Make ``job_id`` the owner of held GPUs (a shared GPU's partner stays on alone)."""
        owner = self.owner
        for gpu in gpu_ids:
            owner[gpu] = job_id

    def allocate(self, job_id: str, gpu_ids: Iterable[int]) -> None:
        """Give GPUs to a job. The caller has checked that they are free."""
        gpu_ids = tuple(gpu_ids)  # read twice
        owner, gpu_node, free_ids = self.owner, self.topology.gpu_node, self._free_ids
        for gpu in gpu_ids:
            owner[gpu] = job_id
            free_ids[gpu_node[gpu]].remove(gpu)
        self._recount(gpu_ids)

    def allocate_slices(self, job_id: str, gpu: int, slices: int) -> None:
        """Give ``slices`` of one GPU to a fractional job: a free GPU is split first."""
        if self.owner[gpu] is None:
            self.allocate(SLICED, (gpu,))
            self.tenants[gpu] = {}
            self.room[gpu] = SLICES_PER_GPU
        elif self.room.get(gpu, 0) < slices:
            raise ValueError(f"GPU {gpu} has no {slices} free slices")
        self.tenants[gpu][job_id] = slices
        self.room[gpu] -= slices

    def release_slices(self, job_id: str, gpu: int) -> None:
        """Take a fractional job's slices back; a GPU left with no tenant is free again."""
        tenants = self.tenants[gpu]
        self.room[gpu] += tenants.pop(job_id)
        if not tenants:
            del self.tenants[gpu], self.room[gpu]
            self.release((gpu,))

    def release(self, gpu_ids: Iterable[int]) -> None:
        gpu_ids = tuple(gpu_ids)  # read twice
        owner, gpu_node, free_ids = self.owner, self.topology.gpu_node, self._free_ids
        for gpu in gpu_ids:
            owner[gpu] = None
            insert(free_ids[gpu_node[gpu]], gpu)
        self._recount(gpu_ids)

    def _recount(self, gpu_ids: tuple[int, ...]) -> None:
        # One bucket move per node touched, in first-touch order (ties depend on it).
        gpu_node, met = self.topology.gpu_node, self._met
        self._n_recounts = call = self._n_recounts + 1
        nodes: list[int] = []
        for gpu in gpu_ids:
            node = gpu_node[gpu]
            if met[node] != call:
                met[node] = call
                nodes.append(node)
        node_free, by_free, free_ids = self.node_free, self._by_free, self._free_ids
        node_rack, rack_free, lowest = self.topology.node_rack, self.rack_free, self._lowest
        for node in nodes:
            before, after = node_free[node], len(free_ids[node])
            del by_free[before][node]
            by_free[after][node] = None
            if lowest and lowest.get(before) == node:
                del lowest[before]
            if after in lowest and ((known := lowest[after]) is None or node < known):
                lowest[after] = node
            node_free[node] = after
            rack = node_rack[node]
            rack_free[rack] = rack_free[rack] + after - before  # spelt out: `+=` on an item adds boxed ints
            self._n_free += after - before


def _best_fit(rooms: Iterable[tuple[int, int]], slices: int) -> int | None:
    """The GPU with the least room that still holds ``slices`` (the lowest id among equals)."""
    best: tuple[int, int] | None = None
    for gpu, room in rooms:
        if room >= slices and (best is None or (room, gpu) < best):
            best = (room, gpu)
    return None if best is None else best[1]


_BUCKET_TOUCHED_FROM = 32  # touched nodes beyond which an overlay buckets them by free count


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class TentativeAllocation:
    """An overlay on an `Allocation`: take and give back GPUs without changing it.

    The overlay keeps its own sorted free-id list for each node it touched
    and reads every other node from the base, so its cost is proportional
    to the nodes touched, not to the cluster size.
    """

    def __init__(self, base: Allocation) -> None:
        self.topology = base.topology
        self._base = base
        self._ids: dict[int, list[int]] = {}  # touched node -> its free GPU ids here
        # Touched nodes by free count here (each list by node id), once there are many.
        self._touched_at: list[list[int]] | None = None
        self._rack_delta: dict[int, int] = {}
        self._n_free = base.n_free
        self._room: dict[int, int] = {}  # split GPUs whose free slices differ from the base's

    @property
    def n_free(self) -> int:
        return self._n_free

    def free_in_node(self, node_id: int) -> int:
        ids = self._ids.get(node_id)
        return self._base.node_free[node_id] if ids is None else len(ids)

    def free_in_rack(self, rack_id: int) -> int:
        return self._base.rack_free[rack_id] + self._rack_delta.get(rack_id, 0)

    def most_free_in_a_rack(self) -> int:
        """The most free GPUs of any one rack."""
        delta = self._rack_delta
        if not delta:
            return max(self._base.rack_free)
        return max(free + delta.get(rack, 0) for rack, free in enumerate(self._base.rack_free))

    def is_free(self, gpu_id: int) -> bool:
        ids = self._ids.get(self.topology.gpu_node[gpu_id])
        return self._base.owner[gpu_id] is None if ids is None else gpu_id in ids

    def free_gpu_ids(self, node_id: int) -> list[int]:
        ids = self._ids.get(node_id)
        return list(self._base._free_ids[node_id] if ids is None else ids)

    def free_counts(self) -> list[int]:
        counts = list(self._base.node_free)
        for node, ids in self._ids.items():
            counts[node] = len(ids)
        return counts

    def free_nodes(self) -> list[tuple[int, int]]:
        touched = self._ids
        found = [(node, count) for node, count in self._base.free_nodes() if node not in touched]
        found += [(node, len(ids)) for node, ids in touched.items() if ids]
        return found

    def tightest_node(self, n_gpus: int) -> int | None:
        # At an equal count, a touched node (the lowest id) goes before the base's order.
        touched, by_free = self._ids, self._base._by_free
        best: int | None = None
        best_free = len(by_free)
        if self._touched_at is None:
            for node, ids in touched.items():
                free = len(ids)
                if n_gpus <= free < best_free or (free == best_free and best is not None
                                                  and node < best):
                    best, best_free = node, free
        else:
            for count in range(max(n_gpus, 1), best_free):
                if self._touched_at[count]:
                    best, best_free = self._touched_at[count][0], count
                    break
        for count in range(max(n_gpus, 1), best_free):
            for node in by_free[count]:
                if node not in touched:
                    return node
        return best

    def lowest_node_with(self, count: int) -> int | None:
        if not 0 <= count < len(self._base._by_free):
            return None
        base_lowest = self._base.lowest_node_with(count)
        if base_lowest is None or base_lowest not in self._ids:
            best = base_lowest  # the lowest of the base's bucket is untouched, so lowest of the rest
        else:  # the base's nodes with that count, less those this overlay changed (in C)
            untouched = self._base._by_free[count].keys() - self._ids.keys()
            best = min(untouched) if untouched else None
        if self._touched_at is not None:
            nodes = self._touched_at[count]
            touched = nodes[0] if nodes else None
        else:
            touched = min((node for node, ids in self._ids.items() if len(ids) == count), default=None)
        if best is None or (touched is not None and touched < best):
            return touched
        return best

    def sliced_gpu_for(self, slices: int) -> int | None:
        rooms = {**self._base.room, **self._room}
        return _best_fit(rooms.items(), slices)

    def take_slices(self, gpu: int, slices: int) -> None:
        """Mark slices of a GPU as used in this overlay (a free GPU is split first)."""
        room = self._room.get(gpu, self._base.room.get(gpu))
        if room is None:
            self.take((gpu,))
            room = SLICES_PER_GPU
        if room < slices:
            raise ValueError(f"GPU {gpu} has no {slices} free slices")
        self._room[gpu] = room - slices

    def take(self, gpu_ids: Iterable[int]) -> None:
        """Mark free GPUs as used in this overlay."""
        self._change(gpu_ids, -1)

    def give(self, gpu_ids: Iterable[int]) -> None:
        """Mark used GPUs as free in this overlay (a tentative preemption)."""
        self._change(gpu_ids, +1)

    def _change(self, gpu_ids: Iterable[int], sign: int) -> None:
        # A node's free count moves once for each run of its GPUs (a job's GPUs come
        # node by node), not once per GPU: the buckets and rack counts end the same.
        gpu_node, touched = self.topology.gpu_node, self._ids
        node, before = -1, 0
        ids: list[int] = []
        n_changed = 0
        try:
            for gpu in gpu_ids:
                if gpu_node[gpu] != node:
                    if node >= 0:
                        self._moved(node, before, len(ids))
                    node = gpu_node[gpu]
                    found = touched.get(node)
                    ids = self._touch(node) if found is None else found
                    before = len(ids)
                position = index_of(ids, gpu)
                present = position < len(ids) and ids[position] == gpu
                if sign < 0:
                    if not present:
                        raise ValueError(f"GPU {gpu} is not free")
                    del ids[position]
                else:
                    if present:
                        raise ValueError(f"GPU {gpu} is already free")
                    ids.insert(position, gpu)
                n_changed += 1
        finally:  # what changed before a refused GPU stays counted
            if node >= 0:
                self._moved(node, before, len(ids))
            self._n_free += sign * n_changed

    def _moved(self, node: int, before: int, after: int) -> None:
        """The node's free GPUs here went from ``before`` to ``after``: its bucket and rack follow."""
        if self._touched_at is not None and before != after:
            self._rebucket(node, before, after)
        rack = self.topology.node_rack[node]
        self._rack_delta[rack] = self._rack_delta.get(rack, 0) + after - before

    def _touch(self, node: int) -> list[int]:
        """The overlay's own free-id list of a node, copied from the base."""
        ids = self._ids[node] = list(self._base._free_ids[node])
        if self._touched_at is not None:
            insert(self._touched_at[len(ids)], node)
        elif len(self._ids) > _BUCKET_TOUCHED_FROM:
            # Many nodes touched (a large cluster, a big decision): from here on keep
            # them by free count, so `tightest_node` need not scan them all.
            self._touched_at = [[] for _ in self._base._by_free]
            for touched, free_ids in sorted(self._ids.items()):
                self._touched_at[len(free_ids)].append(touched)
        return ids

    def _rebucket(self, node: int, before: int, after: int) -> None:
        nodes = self._touched_at[before]  # type: ignore[index]
        del nodes[index_of(nodes, node)]
        insert(self._touched_at[after], node)  # type: ignore[index]
