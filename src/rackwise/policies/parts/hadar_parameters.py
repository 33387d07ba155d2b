"""`HadarParameters`: the parameters ``hadar`` and ``hadare`` share.

A module of its own: a policy class inherits these fields, and a dataclass
compiled into an extension module (the optional compiled build, see
``setup.py``) could not be inherited by one that is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rackwise.errors import InputError


@dataclass(kw_only=True)
class HadarParameters:
    """Hadar's parameters.

    Args:
        round_s: Slot length (the digest's default is Gavel's 360 s).
        progress_model: ``bottleneck`` or ``additive`` rate of a mixed-type job.
        spread_factor: Rate multiplier when a job spans more nodes than it must.
        horizon_slots: Slots whose prices are tracked one by one; the last
            stands for all later slots ([R]).
        max_wait_slots: How many slots past its earliest possible finish a
            plan may aim for (the temporal choice, [R]).
        utility_gamma1, utility_gamma2, utility_gamma3_factor: The sigmoid
            utility ``g1 / (1 + exp(g2 * (d - g3)))``, d in slots since
            arrival, g3 = factor x the job's fewest possible slots. g1 and g2
            are positive: a utility that falls after the knee.
        order: Who is planned first. ``longest_then_density``: the jobs that
            bound the total time (see ``longest_share``) in order of remaining
            time, then the rest by ``utility_density``; ``utility_density``:
            highest utility per GPU-slot first (short jobs first);
            ``arrival``: oldest first.
        backfill: Give GPUs no plan uses to waiting jobs, in planning order,
            ignoring prices ([R]; on by default: a job needing a whole node
            can be priced out even on an empty cluster, and would starve).
        longest_share: Under ``longest_then_density``, a job goes first if
            its remaining time on its fastest type is at least this share of
            the longest such time among active jobs. The longest job bounds
            the total time (it cannot finish before now plus that time), so
            it takes the fastest GPUs before short jobs fill them; everything
            else goes shortest first, for the average JCT ([R]).
    """

    round_s: float = 360.0
    progress_model: Literal["bottleneck", "additive"] = "bottleneck"
    spread_factor: float = 0.8
    horizon_slots: int = 4
    max_wait_slots: int = 2
    utility_gamma1: float = 1.0
    utility_gamma2: float = 1.0
    utility_gamma3_factor: float = 1.5
    order: Literal["longest_then_density", "utility_density", "arrival"] = "longest_then_density"
    backfill: bool = True
    longest_share: float = 0.95

    def __post_init__(self) -> None:
        for name in ("utility_gamma1", "utility_gamma2"):
            if not getattr(self, name) > 0.0:
                raise InputError(f"must be positive, got {getattr(self, name)}", field=name)
        if not 0.0 < self.longest_share <= 1.0:
            raise InputError(f"must be in (0, 1], got {self.longest_share}", field="longest_share")
