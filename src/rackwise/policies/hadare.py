"""HadarE: Hadar plus job forking onto idle nodes (papers/hadar.md §3.7).

rackwise's implementation of the published design. After Hadar has placed
every job's primary copy for the round, nodes with GPUs left over receive
extra copies of running jobs: each copy is a full training process of the
job on its own node, all copies of a job train at once, and at every round
boundary their models are averaged (weighted by the steps each made).

In the simulator a forked job makes its first copy's rate plus
``copy_efficiency`` of each extra copy's, less the share of each round spent
averaging: ``(2 x model bytes / bandwidth + restart) / round``
(`fork_overhead_frac`; both are in its capabilities for the engine, see
`rackwise.perf.base.forked_rate`). Averaging the models of copies that each
saw part of the samples is worth less than one model that saw them all, and
how much less is not public for HadarE (its abstract reports no loss of
model quality); the default 0.8 is the sensitivity value of
shared/papers/hadar.md §3.7, and ``copy_efficiency=1`` is the abstract's
reading. Every copy holds the job's full GPU count, so a copy fits only a
node with that many free GPUs ([R]; the digest also allows smaller copies),
except that a job wider than every node may take whole nodes its other
copies do not use (``wide_copies``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.policies.base import BasePolicy, Capabilities, Decisions
from rackwise.policies.parts.hadar_planning import (
    HadarParameters,
    HadarPlanner,
    Layout,
    Take,
    used_book,
)
from rackwise.policies.parts.primal_dual import PriceBook
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

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


@dataclass(kw_only=True)
class HadarE(HadarParameters, BasePolicy):
    """Hadar with forking: extra copies of running jobs fill nodes left idle.

    Args:
        max_copies: Most copies of one job (None: the number of nodes).
        sync_bandwidth_gbps: Bandwidth for averaging copies (digest: 10).
        restart_s: Seconds each sync costs beyond the transfer (digest: 10).
        default_model_bytes: Model size when neither job nor table knows it.
        copy_efficiency: Progress an extra copy adds, as a share of its own
            rate (the module docstring says where 0.8 comes from).
        wide_copies: Let a job wider than any node of its types fork too: its
            copy takes the fewest nodes of one type that no other copy of it
            uses ([R]; the digest confines a copy to one node, which such a
            job never fits, so it would never fork).
        (All of Hadar's parameters, `HadarParameters`, apply too.)
    """

    name: ClassVar[str] = "hadare"
    preempts: ClassVar[bool] = True
    needs_oracle: ClassVar[bool] = True  # Hadar's plans use each job's true iterations
    max_copies: int | None = None
    sync_bandwidth_gbps: float = 10.0
    restart_s: float = 10.0
    default_model_bytes: float = 100e6
    copy_efficiency: float = 0.8
    wide_copies: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.copy_efficiency <= 1.0:
            raise InputError(f"must be in [0, 1], got {self.copy_efficiency}",
                             field="copy_efficiency")

    @property
    def capabilities(self) -> Capabilities:
        return replace(super().capabilities, round_s=self.round_s, forks=True,
                       fork_overhead=self.fork_overhead_frac, copy_efficiency=self.copy_efficiency)

    @property
    def planner(self) -> HadarPlanner:
        """The run's planning state."""
        return self.planner_

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.planner_ = HadarPlanner(self, view, add_copies=self._add_copies)
        self._widest_of_type: dict[int, int] = {}  # GPU type index -> GPUs of its largest node
        for node, t in zip(view.topology.nodes, self.planner_.node_type):
            self._widest_of_type[t] = max(self._widest_of_type.get(t, 0), node.n_gpus)

    def on_completion(self, job: Job, now: float) -> None:
        self.planner_.forget(job.job_id)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return self.planner_.schedule(view, now)

    def fork_overhead_frac(self, job: Job) -> float:
        """Share of a forked job's wall time spent averaging its copies."""
        sync_s = 2.0 * model_bytes(job, self.default_model_bytes) * 8.0 / (self.sync_bandwidth_gbps * 1e9)
        return min(1.0, (sync_s + self.restart_s) / self.round_s)

    def _add_copies(self, view: ClusterView, active: list[JobState],
                    layouts: dict[str, Layout]) -> None:
        """The planner's `AddCopies`: one more copy of each running job per pass, in planning order."""
        book = used_book(view, layouts, self.planner_.node_type)
        cap = self.max_copies if self.max_copies is not None else view.topology.n_nodes
        forkable = [s for s in active if s.job_id in layouts]
        while forkable:
            # A job that gets no copy in a pass never will (nodes only fill up): drop it.
            forkable = [s for s in forkable if self._fork(book, s, cap, layouts)]

    def _fork(self, book: PriceBook, state: JobState, cap: int, layouts: dict[str, Layout]) -> bool:
        """Add one copy of the job on the best node left, if any; whether one was added."""
        layout = layouts[state.job_id]
        n = state.job.n_gpus
        if len(layout) >= cap:
            return False
        used = {node for take in layout for node, _ in take}
        tiers = self.planner_.job_types(state.job_id).tiers
        node = self._copy_node(book, tiers, n, used)
        if node is not None:
            copy: Take = ((node, n),)
        elif self.wide_copies and n > self._widest_node(tiers):
            spread = self._copy_nodes(book, tiers, n, used)
            if spread is None:
                return False
            copy = spread
        else:
            return False
        for node, k in copy:
            book.take(0, node, k)
        layouts[state.job_id] = (*layout, copy)
        return True

    def _widest_node(self, tiers: tuple[tuple[int, ...], ...]) -> int:
        """GPUs of the largest node of the job's usable types."""
        return max((self._widest_of_type[t] for tier in tiers for t in tier), default=0)

    def _copy_nodes(self, book: PriceBook, tiers: tuple[tuple[int, ...], ...], n_gpus: int,
                    used: set[int]) -> Take | None:
        """A copy across nodes of one type (fastest first), emptiest nodes first, none in ``used``."""
        for types in tiers:
            take: list[tuple[int, int]] = []
            need = n_gpus
            for node, free in book.most_free_first(0, types):
                if node in used:
                    continue
                k = min(free, need)
                take.append((node, k))
                need -= k
                if need == 0:
                    return tuple(sorted(take))
        return None

    def _copy_node(self, book: PriceBook, tiers: tuple[tuple[int, ...], ...], n_gpus: int,
                   used: set[int]) -> int | None:
        """The fastest type first, then the emptiest node, then the lowest id; None if none fits.

        ``tiers``: the job's usable types grouped by equal rate, fastest first (`JobTypes`).
        """
        for types in tiers:
            for node, free in book.most_free_first(0, types):
                if free < n_gpus:
                    break
                if node not in used:
                    return node
        return None
