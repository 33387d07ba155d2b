"""The running jobs' residents and graph features, carried from one scheduling call to the next.

Between two calls a few jobs finish and the ones started last call begin to
run; rebuilding `residents` and `GraphFeatures` from every running job at
each call costs far more. `TrackedCluster.sync` takes out the jobs that left
and adds the new ones in the view's start order, so what it holds equals a
rebuild from ``view.running`` (the same per-server resident order included,
which fixes the order in which interference terms are summed). Whenever it
could not be sure of that, it rebuilds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rackwise.cluster.allocation import FreeGpus
from rackwise.policies.parts.marl.features import GraphFeatures, GraphIndex, Placed, add_resident, residents


class TrackedCluster:
    """Jobs holding GPUs, their residents per server and their `GraphFeatures`."""

    def __init__(self, index: GraphIndex) -> None:
        self.index = index
        self.known: dict[str, Placed] = {}  # by job id, in start order
        self.on_server: list[list[tuple[Placed, float]]] = []
        self.graph: GraphFeatures | None = None

    def sync(self, running: Mapping[str, Any], free: FreeGpus) -> None:
        """Match ``running`` (job id -> state with ``job`` and ``gpu_ids``, in start order) and ``free``."""
        known = self.known
        gone = [job_id for job_id, item in known.items()
                if (state := running.get(job_id)) is None
                or (state.gpu_ids is not item.gpu_ids and tuple(state.gpu_ids) != item.gpu_ids)]
        moved = set(gone)
        new = [job_id for job_id in running if job_id not in known or job_id in moved]
        if self.graph is None or not self._appended(running, new) or not self._remove(gone, free):
            self._rebuild(running, free)
            return
        for job_id in new:
            state = running[job_id]
            self.add(Placed(state.job, tuple(state.gpu_ids)), free)
        self.graph.refresh_free(free)

    def add(self, item: Placed, free: FreeGpus) -> None:
        """A job that has just taken its GPUs (``free`` no longer has them)."""
        assert self.graph is not None
        self.known[item.job.job_id] = item
        add_resident(self.on_server, item, self.index)
        self.graph.add(item, free)

    def _appended(self, running: Mapping[str, Any], new: list[str]) -> bool:
        """Whether every new job comes after every job kept (so appending keeps the start order)."""
        if not new:
            return True
        first_new = new[0]
        seen_new = False
        fresh = set(new)
        for job_id in running:
            if job_id == first_new:
                seen_new = True
            elif seen_new and job_id not in fresh:
                return False
        return True

    def _remove(self, gone: list[str], free: FreeGpus) -> bool:
        """Take out the jobs ``gone``; False where a rebuild is needed (GPUs another job shares)."""
        assert self.graph is not None
        for job_id in gone:
            item = self.known.pop(job_id)
            servers = {int(self.index.gpu_server[g]) for g in item.gpu_ids}
            for s in servers:
                self.on_server[s] = [entry for entry in self.on_server[s] if entry[0] is not item]
            if not self.graph.remove(item, free):
                return False
        return True

    def _rebuild(self, running: Mapping[str, Any], free: FreeGpus) -> None:
        self.known = {job_id: Placed(state.job, tuple(state.gpu_ids)) for job_id, state in running.items()}
        placed = list(self.known.values())
        self.on_server = residents(placed, self.index)
        self.graph = GraphFeatures(free, placed, self.index)
