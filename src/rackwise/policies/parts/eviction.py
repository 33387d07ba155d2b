"""Which running jobs a more sensitive waiting job may evict, and what each would lose.

Dally (`rackwise.policies.delay`) clears a node or rack for a waiting job by
evicting less sensitive running jobs. A job may be evicted only by one of a
higher sensitivity class, once it has run ``min_run_s`` since its last start
(which also covers a job just restarted by an eviction) and been preempted
fewer than ``max_preemptions`` times; without the pay-back test, only while
it would still run longer than its restart takes. Its cost is the
GPU-seconds its restart loses, then one victim, then its σ at L2: the order
`locality.cheapest_clearing` compares clearings in.

The list is built once per rank each time the free GPUs or the victims
change, from every running job: compiled, that loop stays native.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final

from rackwise.engine.view import ClusterView
from rackwise.policies.parts.delay_scheduling import DelayScheduling
from rackwise.policies.parts.locality import Cost, GpuIds

CLASS_RANK: Final = {"low": 0, "med": 1, "high": 2}  # sensitivity classes, least sensitive first


def evictable_holders(view: ClusterView, delay: DelayScheduling, rank: int, now: float,
                      excluded: Collection[str], sigma_of: Mapping[str, float], *, min_run_s: float,
                      max_preemptions: int, payback: bool) -> list[tuple[str, GpuIds, Cost]]:
    """``(job_id, gpu_ids, cost)`` of each running job, by id, that a job of class ``rank`` may
    evict, ``excluded`` (victims already chosen) left out; ``sigma_of`` is each job's σ at L2."""
    perf = view.perf
    holders: list[tuple[str, GpuIds, Cost]] = []
    for job_id, other in sorted(view.running.items()):
        if job_id in excluded or CLASS_RANK[delay.class_of(view, other.job)] >= rank:
            continue
        if now - other.run_start < min_run_s or other.n_preemptions >= max_preemptions:
            continue
        restart_s = perf.restart_overhead_s(other.job)
        # the pay-back test prices restarts itself, and reads no remaining work
        if not payback and not other.finish_eta() - now > restart_s:
            continue
        holders.append((job_id, other.gpu_ids, (len(other.gpu_ids) * restart_s, 1, sigma_of.get(job_id, 0.0))))
    return holders
