"""FIFO: jobs start in arrival order (baselines.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.frozen import unfrozen_builder
from rackwise.policies.base import NOTHING, BasePolicy, Decisions
from rackwise.policies.parts.ordering import RankedQueue, start_in_order, start_ranked
from rackwise.policies.parts.placement import get_placement
from rackwise.workload.job import Job

# `Decisions(...)`, made at every step that starts a job.
_build_decisions = unfrozen_builder(Decisions)

# Pending jobs past which a backfilling pass walks an index rather than the queue (kept
# down to the lower figure): scanning a short queue costs less than keeping an index.
_LONG_QUEUE, _SHORT_QUEUE = 256, 64


@dataclass(kw_only=True)
class Fifo(BasePolicy):
    """First in, first out, never preempting.

    Args:
        placement: A placement strategy name (see ``rackwise policies``).
        backfill: Let later jobs that fit start while the head job waits
            (no reservation, so a large head job can wait long).

    Fractional jobs share GPUs, packed by `fractional_gpu`.
    """

    name: ClassVar[str] = "fifo"
    fractional_gpus: ClassVar[bool] = True
    placement: str = "consolidated"
    backfill: bool = False

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        # While a backfilling queue is long: its whole-GPU jobs by width, in arrival order,
        # so that a pass visits only the jobs that fit (`start_ranked`), and its shares.
        self.queue_: RankedQueue | None = None
        self.fractional_: set[str] = set()
        self.n_queued_ = 0
        self.ended_: set[str] = set()  # completions told since the last decision, while indexed

    def on_completion(self, job: Job, now: float) -> None:
        if self.queue_ is not None:
            self.ended_.add(job.job_id)

    def on_arrival(self, job: Job, now: float) -> None:
        if self.queue_ is None:
            return
        if job.job_id in self.ended_:
            # Told again (a live cluster moved it on its own): its place is the view's, so
            # the index is built again from the view.
            self.queue_ = None
        else:
            self._enqueue(job)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        if self.ended_:
            self.ended_.clear()
        if not view.pending or (view.n_free == 0 and view.sliced_gpu_for(1) is None):
            return NOTHING
        place = get_placement(self.placement)
        queue = self._backfill_queue(view) if self.backfill else None
        if queue is None or self.fractional_:  # shares go where `fractional_gpu` puts them
            starts = start_in_order(view, view.queued(), place, self.rng_, backfill=self.backfill)
        else:
            starts = start_ranked(view, queue, place, self.rng_, backfill=True)
        if queue is not None:
            for start in starts:
                queue.discard(start.job_id)
                self.fractional_.discard(start.job_id)
        return _build_decisions(tuple(starts)) if starts else NOTHING

    def _backfill_queue(self, view: ClusterView) -> RankedQueue | None:
        """The index of the pending jobs while the queue is long; None while a plain pass is cheaper.

        Kept from when the queue grows past `_LONG_QUEUE` until it falls under
        `_SHORT_QUEUE`, and built again from the view should it ever hold
        other jobs than the pending ones (a resumed run announces its running
        jobs too).
        """
        n_pending = len(view.pending)
        queue = self.queue_
        if queue is not None and n_pending < _SHORT_QUEUE:
            queue = self.queue_ = None
            self.fractional_ = set()
        elif (queue is None and n_pending > _LONG_QUEUE) or (
                queue is not None and len(queue) + len(self.fractional_) != n_pending):
            queue = self.queue_ = RankedQueue()
            self.fractional_ = set()
            for state in view.pending.values():
                self._enqueue(state.job)
        return queue

    def _enqueue(self, job: Job) -> None:
        assert self.queue_ is not None
        if job.gpu_share < 1.0:
            self.fractional_.add(job.job_id)
        else:
            self.queue_.add(job.job_id, job.n_gpus, (self.n_queued_, job.job_id))
        self.n_queued_ += 1


@dataclass(kw_only=True)
class FifoBackfill(Fifo):
    """FIFO with backfilling (``fifo`` with ``backfill=True``)."""

    name: ClassVar[str] = "fifo-backfill"
    backfill: bool = True
