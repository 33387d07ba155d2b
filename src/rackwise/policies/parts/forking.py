"""Forking jobs into copies on idle GPUs (HadarE, papers/hadar.md §3.7).

Each copy is a full training process of the job on its own GPUs; all copies
of a job train at once, and at every sync (a round boundary) their models
are averaged, weighted by the steps each made (`merge_models`). In the
simulator a forked job makes its first copy's rate plus ``copy_efficiency``
of each extra copy's, less the share of each round spent averaging
(`fork_overhead_frac`; see `rackwise.perf.base.forked_rate`).

``hadare`` forks after Hadar's plan, ``combined`` after A-SRPT's order and
its own placement; both take `ForkParameters` (`parts.fork_parameters`:
fields only, listed among each policy's bases, so they are set flat:
``-p copy_efficiency=1``) and place copies with `add_copies`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from mypy_extensions import mypyc_attr

from rackwise.policies.parts.fork_parameters import ForkParameters
from rackwise.policies.parts.hadar_planning import Layout, Take
from rackwise.policies.parts.primal_dual import PriceBook
from rackwise.workload.job import Job

Tiers = tuple[tuple[int, ...], ...]  # a job's usable GPU types grouped by equal rate, fastest first

# Checkpoint sizes of the model families in the Gavel table (digest §3.7), bytes.
MODEL_BYTES: dict[str, float] = {
    "resnet-50": 100e6, "resnet-18": 45e6, "transformer": 200e6, "lm": 100e6, "lstm": 100e6,
}


def model_bytes(job: Job, default_bytes: float) -> float:
    """The job's model size: its own field, else the family's table entry, else the default."""
    if job.model_bytes > 0:
        return job.model_bytes
    name = (job.model or "").lower()
    for prefix, size in MODEL_BYTES.items():
        if name.startswith(prefix):
            return size
    return default_bytes


def fork_overhead_frac(job: Job, params: ForkParameters, sync_every_s: float) -> float:
    """Share of a forked job's wall time spent averaging its copies, one sync every ``sync_every_s``."""
    sync_s = 2.0 * model_bytes(job, params.default_model_bytes) * 8.0 / (params.sync_bandwidth_gbps * 1e9)
    return min(1.0, (sync_s + params.restart_s) / sync_every_s)


def merge_models(params: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Average copies' parameters (one row each) weighted by the steps each made this round.

    A copy that made no steps adds nothing. This is what the tracker does at
    a round boundary; the simulator needs only its cost, but the rule is
    kept here, tested, for a real backend.
    """
    total = float(steps.sum())
    if total <= 0:
        mean: np.ndarray = params.mean(axis=0)
        return mean
    weighted: np.ndarray = (steps[:, None] * params).sum(axis=0) / total
    return weighted


def widest_of_type(node_gpus: Sequence[int], node_type: Sequence[int]) -> dict[int, int]:
    """GPU type index -> GPUs of its largest node."""
    widest: dict[int, int] = {}
    for n_gpus, t in zip(node_gpus, node_type):
        widest[t] = max(widest.get(t, 0), n_gpus)
    return widest


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(init=False, slots=True)
class Forkable:
    """A job that may take copies: its id, GPU count, usable types (`Tiers`), and whether a copy may spread.

    ``spread``: a copy that fits no node may take the fewest nodes of one
    type, whatever the job's width and its other copies (GPUs left
    scattered by placements that spread jobs, which HadarE's consolidated
    plans do not leave).
    """

    job_id: str
    n_gpus: int
    tiers: Tiers
    spread: bool

    def __init__(self, job_id: str, n_gpus: int, tiers: Tiers, spread: bool = False) -> None:
        # Made for every running job each round: an __init__ of its own compiles (see `Option`).
        self.job_id = job_id
        self.n_gpus = n_gpus
        self.tiers = tiers
        self.spread = spread


def add_copies(book: PriceBook, jobs: Sequence[Forkable], layouts: dict[str, Layout],
               params: ForkParameters, cap: int, widest: Mapping[int, int], *,
               node_rack: Sequence[int] | None = None) -> None:
    """One more copy of each job per pass, in ``jobs``' order, while any fits; ``book`` holds the load.

    A copy holds the job's full GPU count on one node with that many free
    (the fastest type first, then the emptiest node, then the lowest id), or
    with ``wide_copies`` and a job wider than every node of its types, the
    fewest nodes of one type that no other copy of it uses; with
    ``Forkable.spread``, the fewest nodes of one type whatever its width
    (of one rack, given each node's rack in ``node_rack``).
    """
    forkable = [job for job in jobs if job.job_id in layouts]
    # The nodes each job's copies hold, kept as copies are added.
    used = {job.job_id: {node for take in layouts[job.job_id] for node, _ in take} for job in forkable}
    while forkable:
        # A job that gets no copy in a pass never will (nodes only fill up): drop it.
        forkable = [job for job in forkable
                    if _fork(book, job, layouts, used[job.job_id], params, cap, widest, node_rack)]


def _fork(book: PriceBook, job: Forkable, layouts: dict[str, Layout], used: set[int],
          params: ForkParameters, cap: int, widest: Mapping[int, int],
          node_rack: Sequence[int] | None) -> bool:
    """Add one copy of the job on the best node left, if any; whether one was added.

    ``used``: the nodes the job's copies hold, updated here.
    """
    layout = layouts[job.job_id]
    n = job.n_gpus
    if len(layout) >= cap:
        return False
    node = _copy_node(book, job.tiers, n, used)
    if node is not None:
        copy: Take = ((node, n),)
    elif job.spread or (params.wide_copies and n > max((widest[t] for tier in job.tiers for t in tier),
                                                    default=0)):
        spread_copy = (_copy_nodes(book, job.tiers, n, set(), node_rack) if job.spread
                       else _copy_nodes(book, job.tiers, n, used))
        if spread_copy is None:
            return False
        copy = spread_copy
    else:
        return False
    for node, k in copy:
        book.take(0, node, k)
        used.add(node)
    layouts[job.job_id] = (*layout, copy)
    return True


def _copy_nodes(book: PriceBook, tiers: Tiers, n_gpus: int, used: set[int],
                node_rack: Sequence[int] | None = None) -> Take | None:
    """A copy across nodes of one type (fastest first), emptiest nodes first, none in ``used``.

    With ``node_rack``, the nodes of one rack: the first rack to fill it that way.
    """
    for types in tiers:
        takes: dict[int, list[tuple[int, int]]] = {}
        needs: dict[int, int] = {}
        for node, free in book.most_free_first(0, types):
            if node in used:
                continue
            rack = node_rack[node] if node_rack is not None else 0
            take = takes.setdefault(rack, [])
            need = needs.setdefault(rack, n_gpus)
            k = min(free, need)
            take.append((node, k))
            needs[rack] = need - k
            if need == k:
                return tuple(sorted(take))
    return None


def _copy_node(book: PriceBook, tiers: Tiers, n_gpus: int, used: set[int]) -> int | None:
    """The fastest type first, then the emptiest node, then the lowest id; None if none fits."""
    for types in tiers:
        node = book.emptiest_node(0, types, n_gpus, used)
        if node is not None:
            return node
    return None
