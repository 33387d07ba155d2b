"""Candidate pairs of jobs to share GPUs (space sharing, gavel.md §3.1).

Two jobs on the same GPUs each run at a share of their speed alone; the
performance model knows it from measured pair throughputs (`SharedGpus`).
A pair is worth considering only when the two shares add up to more than
one, i.e. the GPUs do more work shared than given to either job alone.

Every pair of jobs is a row of the LP, so all pairs would make the LP grow
with the square of the queue. Each job is offered at most ``partners``
partners instead: jobs of the same GPU count whose models pair best with
its own, oldest first (a rackwise choice, exposed as a parameter).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.policies.parts.lp import Pairs
from rackwise.workload.state import JobState


def check_model(view: ClusterView, policy: str) -> None:
    """Fail clearly if the performance model cannot price two jobs on one GPU."""
    if getattr(view.perf, "sharing_factor", None) is None:
        raise InputError(f"policy '{policy}' shares GPUs, but performance model "
                         f"{type(view.perf).__name__} has no paired throughputs; use the "
                         f"network model (--perf network)", field="space_sharing")


def candidate_pairs(view: ClusterView, active: Sequence[JobState], rates: np.ndarray,
                    types: Sequence[str], *, max_gpus: int, partners: int) -> Pairs:
    """Pairs of ``active`` jobs (by index) worth sharing GPUs, with each member's factors.

    Only jobs of at most ``max_gpus`` GPUs pair, and only with jobs of the same
    count; a pair may run on a type where both jobs can and their factors add
    up to more than one.
    """
    factor_of = view.perf.sharing_factor  # type: ignore[attr-defined]
    cache: dict[tuple[str, str], np.ndarray] = {}

    def factors(a: JobState, b: JobState) -> np.ndarray:
        key = (a.job.model or "", b.job.model or "")
        found = cache.get(key)
        if found is None:
            found = cache[key] = np.array([factor_of(a.job, b.job, t) for t in types])
        return found

    groups: dict[tuple[int, str], list[int]] = {}  # (GPUs, model) -> job indices, oldest first
    for i, state in enumerate(active):
        if state.job.n_gpus <= max_gpus and (rates[i] > 0).any():
            groups.setdefault((state.job.n_gpus, state.job.model or ""), []).append(i)
    members: dict[tuple[int, int], np.ndarray] = {}
    for (n_gpus, _), indices in groups.items():
        first = active[indices[0]]
        # Partner groups by how much a pair of their models gains, best first.
        ranked = []
        for (n_other, model), others in groups.items():
            if n_other != n_gpus:
                continue
            f_ab, f_ba = factors(first, active[others[0]]), factors(active[others[0]], first)
            gain = float(np.max(f_ab + f_ba))
            if gain > 1.0:
                ranked.append((-gain, model, others))
        ranked.sort(key=lambda item: (item[0], item[1]))
        for a in indices:
            offered = 0
            for _, _, others in ranked:
                for b in others:
                    if offered >= partners:
                        break
                    if b == a:
                        continue
                    offered += 1
                    key = (a, b) if a < b else (b, a)
                    if key not in members:
                        lo, hi = active[key[0]], active[key[1]]
                        both = (rates[key[0]] > 0) & (rates[key[1]] > 0)
                        f_lo, f_hi = factors(lo, hi), factors(hi, lo)
                        useful = both & (f_lo + f_hi > 1.0)
                        members[key] = np.stack([np.where(useful, f_lo, 0.0),
                                                 np.where(useful, f_hi, 0.0)])
    keys = sorted(members)
    if not keys:
        return Pairs(np.zeros((0, 2), dtype=int), np.zeros((0, 2, len(types))))
    return Pairs(np.array(keys, dtype=int), np.stack([members[k] for k in keys]))
