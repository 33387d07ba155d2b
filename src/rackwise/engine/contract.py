"""What a policy and an engine promise each other.

An engine (the simulator or a live backend's driver loop) shows a policy a
`ClusterView`, asks ``schedule(view, now)`` for `Decisions`, checks them
whole (`rackwise.engine.checks.check_decisions`) and carries them out. The
policy says up front, in its `Capabilities`, what it will ask for (rounds,
preemptions, forked jobs, shared GPUs) and what it needs (true durations,
an optional extra), so an engine never probes it attribute by attribute.

A running job's state changes only with a new `JobState.version` or a new
state object. An engine may also name the jobs it changed between two
decisions (`ClusterView.running_changes_since`), sparing a policy that keeps
something per running job a look at every one of them. The simulator does;
a live backend shows a new view per snapshot and names none, and a policy
then compares the states it is shown with those it kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.workload.job import Job


@dataclass(frozen=True, slots=True)
class Capabilities:
    """A policy's side of the contract, read by engines and by `rackwise.testing.check_policy`.

    Attributes:
        preempts: The policy may return preemptions.
        needs_oracle: It reads true job durations or iterations, which a
            real cluster does not know in advance.
        needs_extra: The optional install it needs (``"ml"``, ``"rl"``), if any.
        round_s: If set, the engine calls ``schedule`` at least every
            ``round_s`` seconds while jobs are active (round-based policies).
        forks: It may start a job as several copies (``Start.copies > 1``).
        fork_overhead: The share of a forked job's time its copies spend
            keeping in step (None: no overhead).
        copy_efficiency: The progress an extra copy adds, as a share of its
            own rate: averaging copies' models is worth less than one model
            training on all their samples (1: every copy counts fully).
        shares_gpus: It may start a job beside another on the same GPUs
            (``Start.beside``).
        fractional_gpus: It can run fractional jobs (``Job.gpu_share < 1``),
            each started on one GPU that it splits with other such jobs.
    """

    preempts: bool = False
    needs_oracle: bool = False
    needs_extra: str | None = None
    round_s: float | None = None
    forks: bool = False
    fork_overhead: Callable[[Job], float] | None = None
    copy_efficiency: float = 1.0
    shares_gpus: bool = False
    fractional_gpus: bool = False


@dataclass(frozen=True, slots=True)
class Start:
    """Run a pending job on exactly these GPUs (its requested count of them).

    ``copies > 1`` forks the job: ``gpu_ids`` then holds ``copies`` blocks of
    ``n_gpus`` GPUs, one block per copy, and the copies train at once and
    share one progress counter (see `rackwise.perf.base.forked_rate`).

    ``beside`` names a running job whose GPUs this one shares (space
    sharing): ``gpu_ids`` are then exactly that job's GPUs, and both run at
    the paired speed the performance model measures (`SharedGpus`). A GPU
    is never shared by more than two jobs; only the simulator runs pairs.

    A fractional job (``Job.gpu_share < 1``) is started on one GPU, free or
    already split among fractional jobs with room for its share.
    """

    job_id: str
    gpu_ids: tuple[int, ...]
    copies: int = 1
    beside: str | None = None


@dataclass(frozen=True, slots=True)
class Decisions:
    """What a policy wants done now.

    Attributes:
        start: Jobs to start (or resume) and where.
        preempt: Running jobs to stop and put back in the queue. A job both
            preempted and started in one decision is migrated.
        wake_at: Ask to be called again at this time even if nothing happens.
        unplaced: Pending jobs the policy chose not to start, with a reason
            (for logs and forecasts; the engine does not act on it).
    """

    start: tuple[Start, ...] = ()
    preempt: tuple[str, ...] = ()
    wake_at: float | None = None
    unplaced: Mapping[str, str] = field(default_factory=dict)


NOTHING = Decisions()


@runtime_checkable
class Policy(Protocol):
    """The one interface every engine knows."""

    @property
    def name(self) -> str:
        """The policy's registry key."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What the policy may ask of an engine, and what it needs from it."""
        ...

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None: ...

    def schedule(self, view: ClusterView, now: float) -> Decisions: ...

    def on_arrival(self, job: Job, now: float) -> None: ...

    def on_completion(self, job: Job, now: float) -> None: ...

    def on_history(self, jobs: Sequence[Job]) -> None:
        """Jobs that finished before the run began, with their true sizes (the cluster's log).

        Called once, after ``reset`` and before the first arrival, when the
        run has such a log; policies that learn from history train on it.
        """
        ...
