"""The order in which an engine tells a policy what happened at one instant.

Completions first (they free GPUs), each in the order it happened, then
arrivals in submit order; then, once, ``schedule``. The simulator and the
live driver both deliver events through `notify`.
"""

from __future__ import annotations

from collections.abc import Iterable

from rackwise.engine.contract import Policy
from rackwise.workload.job import Job


def notify(policy: Policy, completed: Iterable[Job], arrived: Iterable[Job], now: float) -> None:
    """Call ``on_completion`` for every completed job, then ``on_arrival`` for every arrival."""
    for job in completed:
        policy.on_completion(job, now)
    for job in arrived:
        policy.on_arrival(job, now)
