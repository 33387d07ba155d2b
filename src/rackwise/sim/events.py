"""Event kinds and the rule for events at the same instant.

The heap holds ``(time, priority, seq, kind, payload)``. ``seq`` comes from a
counter, so ties break in insertion order and payloads are never compared.
At one instant, completions come first (they free GPUs), then arrivals,
then timers and rounds; the policy is called once after all of them.
"""

from __future__ import annotations

from enum import IntEnum


class EventKind(IntEnum):
    """Also the priority at a shared instant: lower goes first."""

    COMPLETION = 0
    ARRIVAL = 1
    TIMER = 2
    ROUND = 3


# A completion's payload is its job's id; other events carry an empty one.
Event = tuple[float, int, int, EventKind, str]
NO_PAYLOAD = ""
