"""`RunningIndex`: which running placements share each node and each rack uplink.

It keeps every placement's pace (its slowest node's interference factor),
each uplink's share and each rack-crossing placement's bandwidth (the least
of its links') current as jobs start and stop, and names the jobs whose pace
or bandwidth may have moved, so only those are re-rated.
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from rackwise.perf.breakdown import INF
from rackwise.perf.placed import Placed
from rackwise.perf.views import Weights


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Affected:
    """The placements one re-rating may move, each once, in the order first named.

    A list and a mark on each placement (`Placed.listed`), not a dict by job
    id: compiled, an append and a compared mark are native, where each
    insertion into a dict hashes and probes.
    """

    __slots__ = ("listing", "placements")

    def __init__(self, listing: int) -> None:
        self.listing = listing  # this re-rating's number, > 0
        self.placements: list[Placed] = []

    def add(self, placed: Placed) -> None:
        if placed.listed != self.listing:
            placed.listed = self.listing
            self.placements.append(placed)

    def holds(self, placed: Placed) -> bool:
        return placed.listed == self.listing

    def drop(self, placed: Placed) -> None:
        """Leave ``placed`` out (it stays in `placements`, to be skipped)."""
        placed.listed = 0


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class RunningIndex:
    """Running placements by node and by crossed rack uplink, with their factors and shares."""

    __slots__ = ("cluster_gbps", "forked", "n_listings", "node_jobs", "node_size", "placed", "rack_cross",
                 "scale", "share", "uplink_gbps", "weights")

    def __init__(self, node_size: tuple[int, ...], uplink_gbps: tuple[float, ...], cluster_gbps: float,
                 weights: Weights, scale: float) -> None:
        self.node_size = node_size
        self.uplink_gbps = uplink_gbps
        self.cluster_gbps = cluster_gbps
        self.weights = weights
        self.scale = scale
        self.placed: dict[str, Placed] = {}
        # Lists in the order the jobs came, not dicts by id: these are scanned at every start
        # and stop, and compiled, a list is walked natively where a dict's items are not.
        # Per node: (placement, its GPUs there, the node's position in its node_factors,
        # or -1 for a placement on one node).
        self.node_jobs: list[list[tuple[Placed, int, int]]] = [[] for _ in node_size]
        self.rack_cross: list[list[Placed]] = [[] for _ in uplink_gbps]
        self.share = [INF] * len(uplink_gbps)  # uplink Gb/s per crossing job
        self.forked: dict[str, Placed] = {}  # running jobs forked into copies
        self.n_listings = 0  # re-ratings begun (`affected`)

    def affected(self) -> Affected:
        """A new, empty list of the placements a re-rating may move."""
        self.n_listings += 1
        return Affected(self.n_listings)

    def add(self, placed: Placed, affected: Affected) -> None:
        """Add a running placement; update its neighbours' factors and its uplinks' shares.

        Jobs whose pace or uplink bandwidth may have moved are added to ``affected``.
        Interference weights lie in [0, 1] (``interference_scale`` and slowdowns
        both do), so an arrival only lowers its neighbours' node factors and a
        departure (`remove`) only raises them: a spread job's pace needs a
        scan of its nodes only when its slowest node speeds up.
        """
        job_id = placed.job_id
        self.placed[job_id] = placed
        if placed.copies is not None:
            self.forked[job_id] = placed
        nodes = placed.nodes
        factors = [1.0] * len(nodes)
        if self.scale > 0:
            row = placed.coeff = self.weights.row(placed.model, placed.gpu_type)
            model_id = placed.model_id = self.weights.ids[placed.model]
            partner = placed.partner
            for i, node in enumerate(nodes):
                size = self.node_size[node]
                share = placed.node_gpus[i] / size
                factor = 1.0
                for other, other_gpus, j in self.node_jobs[node]:
                    if partner is not None and other.job_id == partner:
                        other.partner = job_id
                        continue
                    factor *= 1.0 - row[other.model_id] * other_gpus / size
                    theirs = other.coeff[model_id]
                    if not theirs:
                        continue
                    # A newcomer only lowers factors: the pace moves iff this node is now the slowest.
                    if j < 0:  # its only node: the node's factor is its pace
                        value = other.factor * (1.0 - theirs * share)
                    else:
                        others = other.node_factors
                        value = others[j] = others[j] * (1.0 - theirs * share)
                    if value < other.factor:
                        other.factor = value
                        affected.add(other)
                factors[i] = factor
        if len(nodes) == 1:
            placed.factor = factors[0]
            self.node_jobs[nodes[0]].append((placed, placed.node_gpus[0], -1))
        else:
            placed.node_factors = factors
            placed.factor = _least(factors)
            for i, node in enumerate(nodes):
                self.node_jobs[node].append((placed, placed.node_gpus[i], i))
        if placed.crosses:
            cluster_gbps = self.cluster_gbps
            placed.bandwidth = placed.base_gbps  # lowered to its racks' least share below
            for rack in placed.racks:
                crossing = self.rack_cross[rack]
                crossing.append(placed)
                share = self.share[rack] = self.uplink_gbps[rack] / len(crossing)
                if share < cluster_gbps:
                    # The share fell: only jobs faster than the new share slow down, to it.
                    for other in crossing:
                        if other.bandwidth > share:
                            other.bandwidth = share
                            affected.add(other)

    def remove(self, placed: Placed, affected: Affected) -> None:
        """Remove a placement; jobs whose pace or uplink bandwidth may have moved go to ``affected``."""
        job_id = placed.job_id
        del self.placed[job_id]
        if job_id in self.forked:  # compiled, `pop(key, None)` is a generic method call
            del self.forked[job_id]
        partner = placed.partner
        for i, node in enumerate(placed.nodes):
            neighbours = self.node_jobs[node]
            neighbours.pop(_entry_position(neighbours, placed))  # compiled, `pop` is native where `del` is not
            if self.scale <= 0 or not neighbours:
                continue
            share = placed.node_gpus[i] / self.node_size[node]
            alone = len(neighbours) == 1
            model_id = placed.model_id
            for other, _, j in neighbours:
                if partner is not None and other.job_id == partner:
                    other.partner = None  # runs on alone: the engine drops its pair factor
                    continue
                if alone:
                    value = 1.0  # alone again: exactly 1, no rounding left over
                else:
                    theirs = other.coeff[model_id]
                    if not theirs:
                        continue
                    value = (other.factor if j < 0 else other.node_factors[j]) / (1.0 - theirs * share)
                # A leaver only raises factors: the pace moves iff this node was the slowest.
                if j < 0:  # its only node: the node's factor is its pace
                    if value == other.factor:
                        continue
                    other.factor = value
                else:
                    factors = other.node_factors
                    old = factors[j]
                    factors[j] = value
                    if old != other.factor or value == old:
                        continue
                    pace = _least(factors)
                    if pace == old:
                        continue
                    other.factor = pace
                affected.add(other)
        if placed.crosses:
            cluster_gbps = self.cluster_gbps
            for rack in placed.racks:
                crossing = self.rack_cross[rack]
                crossing.pop(_position(crossing, placed))
                old = self.share[rack]
                self.share[rack] = self.uplink_gbps[rack] / len(crossing) if crossing else INF
                if old < cluster_gbps:
                    # The share rose. A job's bandwidth is at most ``old``; one below it is
                    # held by another link and keeps it. The rest take their new least.
                    shares = self.share
                    for other in crossing:
                        if other.bandwidth >= old:
                            least = other.base_gbps
                            for other_rack in other.racks:  # a loop, not `min(map(...))`: compiled, it stays native
                                rack_share = shares[other_rack]
                                if rack_share < least:
                                    least = rack_share
                            other.bandwidth = least
                            affected.add(other)


def _least(values: list[float]) -> float:
    """``min(values)`` of a non-empty list, the same float: compiled, a loop stays native
    where ``min`` is a generic call on the builtins module."""
    least = values[0]
    for value in values:
        if value < least:
            least = value
    return least


def _position(placements: list[Placed], placed: Placed) -> int:
    """Where ``placed`` stands in ``placements`` (it is there), found by identity: `list.remove`
    compares each placement before it for equality, a generic call apiece."""
    for i, other in enumerate(placements):
        if other is placed:
            return i
    raise KeyError(placed.job_id)


def _entry_position(entries: list[tuple[Placed, int, int]], placed: Placed) -> int:
    """Where ``placed``'s entry stands in a node's entries (it is there)."""
    for i, entry in enumerate(entries):
        if entry[0] is placed:
            return i
    raise KeyError(placed.job_id)
