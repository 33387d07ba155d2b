"""The running jobs' residents and graph features, carried from one scheduling call to the next.

Between two calls a few jobs finish and the ones started last call begin to
run; rebuilding `residents` and `GraphFeatures` from every running job at
each call costs far more. `TrackedCluster.sync` takes out the jobs that left,
adds the new ones in the view's start order, and checks that it now holds the
view's jobs in that order on their GPUs, so what it holds equals a rebuild
from ``view.running`` (the same per-server resident order included, which
fixes the order in which interference terms are summed). Where the check
fails (a job that ran again, or one started before a job kept), it rebuilds.
Given the view's start mark, it skips the check when no job started but
those it was told of: the check reads every running job, at nearly every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from rackwise.cluster.allocation import FreeGpus
from rackwise.policies.parts.marl.features import GraphFeatures, GraphIndex, Placed, add_resident, residents

_GPU_IDS = attrgetter("gpu_ids")


class TrackedCluster:
    """Jobs holding GPUs, their residents per server and their `GraphFeatures`."""

    def __init__(self, index: GraphIndex) -> None:
        self.index = index
        self._gpu_server: list[int] = index.gpu_server.tolist()  # a list: read a GPU at a time
        self.known: dict[str, Placed] = {}  # by job id, in start order
        self.on_server: list[list[tuple[Placed, float]]] = []
        self.graph: GraphFeatures | None = None
        self._mark: tuple[int, int] | None = None  # the view's start mark that shows no start unknown here

    def sync(self, running: Mapping[str, Any], free: FreeGpus, mark: tuple[int, int] | None = None) -> None:
        """Match ``running`` (job id -> state with ``job`` and ``gpu_ids``, in start order) and ``free``.

        ``mark``: the view's `ClusterView.start_mark`, when ``running`` is the view's. If no
        job started since the last sync but those `add` was told of, the running jobs are
        the known ones less those that left, in the same order on the same GPUs: no check
        over every running job is needed.
        """
        known = self.known
        if mark is not None and mark == self._mark and self.graph is not None:
            # Free GPUs changed only as the known starts and the departures took and gave them,
            # and the rows of their servers were written then: no row needs reading again.
            if len(known) == len(running) or self._remove(self._gone(running), free):
                return
        elif self.graph is not None and self._remove(self._gone(running), free):
            if new := running.keys() - known.keys():
                for job_id in [job_id for job_id in running if job_id in new]:
                    state = running[job_id]
                    self.add(Placed(state.job, tuple(state.gpu_ids)), free)
            # The same jobs in the same order on the same GPUs, compared in bulk (loops in C).
            if list(known) == list(running) and list(map(_GPU_IDS, known.values())) == list(
                    map(tuple, map(_GPU_IDS, running.values()))):
                self.graph.refresh_free(free)
                self._mark = mark
                return
        self._rebuild(running, free)
        self._mark = mark

    def add(self, item: Placed, free: FreeGpus) -> None:
        """A job that has just taken its GPUs (``free`` no longer has them)."""
        assert self.graph is not None
        self.known[item.job.job_id] = item
        add_resident(self.on_server, item, self.index)
        self.graph.add(item, free)
        if self._mark is not None:  # the engine will start it: one more start the mark will count
            self._mark = (self._mark[0], self._mark[1] + 1)

    def _gone(self, running: Mapping[str, Any]) -> list[str]:
        """The known jobs no longer running (in id order: taking them out in any order ends alike)."""
        return sorted(self.known.keys() - running.keys())

    def _remove(self, gone: list[str], free: FreeGpus) -> bool:
        """Take out the jobs ``gone``; False where a rebuild is needed (GPUs another job shares)."""
        assert self.graph is not None
        gpu_server = self._gpu_server
        for job_id in gone:
            item = self.known.pop(job_id)
            servers = {gpu_server[g] for g in item.gpu_ids}
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
