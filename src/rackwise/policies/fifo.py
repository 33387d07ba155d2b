"""FIFO: jobs start in arrival order (baselines.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rackwise.engine.view import ClusterView
from rackwise.frozen import unfrozen_builder
from rackwise.policies.base import NOTHING, BasePolicy, Decisions
from rackwise.policies.parts.ordering import start_in_order
from rackwise.policies.parts.placement import get_placement

# `Decisions(...)`, made at every step that starts a job.
_build_decisions = unfrozen_builder(Decisions)


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

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        if not view.pending or (view.n_free == 0 and view.sliced_gpu_for(1) is None):
            return NOTHING
        place = get_placement(self.placement)
        starts = start_in_order(view, view.pending.values(), place, self.rng_, backfill=self.backfill)
        return _build_decisions(tuple(starts)) if starts else NOTHING


@dataclass(kw_only=True)
class FifoBackfill(Fifo):
    """FIFO with backfilling (``fifo`` with ``backfill=True``)."""

    name: ClassVar[str] = "fifo-backfill"
    backfill: bool = True
