"""`DelayParameters`: what every delay-scheduling policy takes.

A module of its own, as `parts.hadar_parameters` is: policy classes
inherit these fields, and a dataclass compiled into an extension module
(the optional compiled build, ``setup.py``) could not be inherited by one
that is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(kw_only=True)
class DelayParameters:
    """What every delay-scheduling policy takes.

    Args:
        ordering: ``"fifo"`` (submit time) or ``"las"`` (least attained service first).
        reserve_after_s: Once a job has waited this long at its target level,
            hold the node (or rack) with the most free GPUs for it; ``None``
            never reserves. Whether to reserve is left open by the design.
    """

    ordering: Literal["fifo", "las"] = "fifo"
    reserve_after_s: float | None = None
