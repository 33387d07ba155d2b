"""What neighbours and shared uplinks do to a placement's step.

`Contention` reads the index of running jobs (`rackwise.perf.running_index`):
a job's compute slows by the interference of the jobs on its nodes (the
slowest node sets the pace), and its cross-rack communication runs at its
share of each rack uplink it crosses. It also answers what-if questions for
a job not (yet) in the index, and re-rates forked jobs copy by copy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rackwise.perf.base import NO_COMM
from rackwise.perf.comm import LINK_NAMES, UPLINK
from rackwise.perf.placed import Placed
from rackwise.perf.running_index import Affected, RunningIndex
from rackwise.perf.views import Neighbours, Sharing
from rackwise.workload.state import JobState


def mapped_comm(placed: Placed, bandwidth: float) -> float:
    """Communication per step of a mapped job whose cross-rack path runs at ``bandwidth`` Gb/s."""
    comm = placed.static_comm_s
    bps = bandwidth * 1e9
    for link_s, bits in placed.cross_terms or ():
        comm += max(bits / bps, link_s)
    return comm


class Contention:
    """Prices placements against the running jobs in ``index``.

    Args:
        index: The live index of running placements by node and uplink.
        place_state: Builds the placement of a running job that is not indexed.
        comm_now: Each job's (communication, extra communication) per step,
            kept up to date for forked jobs here.
    """

    def __init__(self, index: RunningIndex, place_state: Callable[[JobState], Placed],
                 comm_now: dict[str, tuple[float, float]]) -> None:
        self._placed, self._forked = index.placed, index.forked
        self._node_jobs, self._rack_cross = index.node_jobs, index.rack_cross
        self._node_size, self._uplink_gbps = index.node_size, index.uplink_gbps
        self._weights, self._scale = index.weights, index.scale
        self._place_state = place_state
        self._comm_now = comm_now

    def what_if_context(self, job_id: str, running: Mapping[str, JobState]
                         ) -> tuple[Neighbours, Sharing]:
        """Neighbours per node and cross-rack jobs per rack, as if ``job_id`` were added.

        Uses the live index when it covers ``running`` (the engine's case),
        else builds one from ``running`` (O(running)).
        """
        if len(running) <= len(self._placed):
            return Neighbours(self._node_jobs, running, job_id), Sharing(self._rack_cross, running, job_id)
        nodes: list[list[tuple[Placed, int, int]]] = [[] for _ in self._node_jobs]
        racks: list[list[Placed]] = [[] for _ in self._rack_cross]
        for other_id, state in running.items():
            if other_id == job_id:
                continue
            other = self._placed.get(other_id)
            if other is None or other.gpu_ids != state.gpu_ids:
                other = self._place_state(state)
            spread = len(other.nodes) > 1
            for i, node in enumerate(other.nodes):
                nodes[node].append((other, other.node_gpus[i], i if spread else -1))
            if other.crosses:
                for rack in other.racks:
                    racks[rack].append(other)
        return Neighbours(nodes, running, job_id), Sharing(racks, running, job_id)

    def interference(self, placed: Placed, nodes: Neighbours | None) -> float:
        """Speed factor from neighbours: the slowest node's product of neighbour factors."""
        if self._scale <= 0:
            return 1.0
        if nodes is None:
            return placed.factor
        weights = self._weights
        row = weights.row(placed.model, placed.gpu_type)
        factor = 1.0
        for node in placed.nodes:
            size = self._node_size[node]
            node_factor = 1.0
            for other, other_gpus, _ in nodes[node]:
                node_factor *= 1.0 - row[weights.id_of(other.model)] * other_gpus / size
            factor = min(factor, node_factor)
        return factor

    def bandwidth(self, placed: Placed, sharing: Sharing | None) -> tuple[float, str]:
        base = placed.base_gbps
        label = LINK_NAMES[placed.level]
        if placed.crosses:
            for rack in placed.racks:
                n_sharing = len(self._rack_cross[rack]) if sharing is None else sharing[rack]
                share = self._uplink_gbps[rack] / max(1, n_sharing)
                if share < base:
                    base, label = share, UPLINK
        return base, label

    def step(self, placed: Placed, nodes: Neighbours | None,
              sharing: Sharing | None) -> tuple[float, float]:
        """(seconds per step, communication seconds per step)."""
        comm = placed.static_comm_s
        if placed.crosses:
            bandwidth, _ = self.bandwidth(placed, sharing)
            if placed.cross_terms is None:
                comm += placed.dyn_bits / (bandwidth * 1e9)
            else:
                comm = mapped_comm(placed, bandwidth)
        if self._scale > 0:
            return placed.compute_s / self.interference(placed, nodes) + comm, comm
        return placed.compute_s + comm, comm

    def rate_forked(self, running: Mapping[str, JobState], affected: Affected,
                     touched: list[Placed], out: dict[str, float]) -> None:
        """Re-rate the forked jobs that share a node or an uplink with ``touched``.

        A forked job's copies run at their own paces, so a change on any of its
        nodes may move its rate, not only one on its slowest. Each copy is rated
        as `rate` rates it (the engine's `forked_rate` asks the same); ``out``
        gets the sum of the copies' rates and the communication per step is
        the copies' mean, weighted by their rates. The forked jobs leave
        ``affected``.
        """
        nodes = {node for placed in touched for node in placed.nodes}
        racks = {rack for placed in touched if placed.crosses for rack in placed.racks}
        for job_id, placed in self._forked.items():
            if affected.holds(placed) or not nodes.isdisjoint(placed.nodes) or (
                    placed.crosses and not racks.isdisjoint(placed.racks)):
                affected.drop(placed)
                if job_id not in running:
                    continue
                neighbours, sharing = self.what_if_context(job_id, running)
                total = comm = extra = 0.0
                for copy in placed.copies or ():
                    if copy.ideal_rate > 0:
                        total += copy.ideal_rate
                        continue
                    step_s, copy_comm = self.step(copy, neighbours, sharing)
                    rate = 1.0 / step_s
                    total += rate
                    comm += rate * copy_comm
                    extra += rate * max(0.0, copy_comm - copy.ref_comm_s)
                out[job_id] = total
                self._comm_now[job_id] = (comm / total, extra / total) if total > 0 else NO_COMM
