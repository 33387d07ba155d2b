"""The seam between engines and performance models.

An engine asks a `PerfModel` two things: the rate (iterations per second)
of each running job whose rate may have changed after a start, stop or
preemption, and how long a restarted job spends restoring its checkpoint.
Policies may ask the same model "what if" questions through the view.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import numpy as np
from mypy_extensions import mypyc_attr

from rackwise.cluster.topology import Topology
from rackwise.frozen import pickled_by_constructor
from rackwise.workload.job import Job

if TYPE_CHECKING:
    from rackwise.workload.state import JobState


class PerfModel(Protocol):
    """How fast jobs run where they are placed."""

    def prepare(self, jobs: Sequence[Job], topology: Topology,
                rng: np.random.Generator) -> list[Job]:
        """Fill in what the model needs (model names, iterations); called once per run."""
        ...

    def rate(self, job: Job, gpu_ids: tuple[int, ...],
             running: Mapping[str, JobState]) -> float:
        """Iterations per second ``job`` would make on ``gpu_ids`` beside ``running``."""
        ...

    def rates(self, running: Mapping[str, JobState], changed: Collection[str]) -> dict[str, float]:
        """New rates of running jobs after the jobs in ``changed`` started or stopped.

        Must include every running job in ``changed``; may include others
        whose rate changed (sharing a node or an uplink). The engine re-rates
        the jobs in the dict's order, which breaks ties between finishes at
        one instant: it must follow from the inputs alone (``changed`` comes
        sorted), never from the iteration order of a set.
        """
        ...

    def restart_overhead_s(self, job: Job) -> float:
        """Seconds a preempted job spends restoring before it makes progress again."""
        ...


NO_COMM: Final = (0.0, 0.0)  # the communication figures of a job that communicates nothing


class CommAccounting(Protocol):
    """Optional extra of a `PerfModel`: communication time per iteration.

    An engine that finds ``comm_per_iter`` on its model reads a job's entry
    right after each new rate from ``rates`` (no entry: `NO_COMM`) and
    charges ``iterations x`` the figures to the job until its rate changes
    again. Models without it (`IdealPerf`) report no communication.
    """

    @property
    def comm_per_iter(self) -> dict[str, tuple[float, float]]:
        """Per running job, (communication seconds, of which beyond a fully consolidated placement)
        per iteration at its current rate: the model's own table, kept current by ``rates``."""
        ...


class SharedGpus(Protocol):
    """Optional extra of a `PerfModel`: the pace of two jobs sharing the same GPUs.

    An engine that runs a pair (`rackwise.policies.base.Start` with
    ``beside``) multiplies each job's rate by its factor; a model without
    this method cannot price pairs, and engines refuse them.
    """

    def sharing_factor(self, job: Job, partner: Job, gpu_type: str) -> float:
        """Share of its own speed (in (0, 1]) ``job`` keeps beside ``partner`` on its GPUs."""
        ...


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True)
class IdealPerf:
    """Every job runs at its trace speed on any placement; no interference.

    With it, a job's run time equals its trace duration (plus a fixed
    checkpoint/restore cost per preemption): the model the classic trace
    simulators use.
    """

    checkpoint_restore_s: float = 30.0

    def prepare(self, jobs: Sequence[Job], topology: Topology,
                rng: np.random.Generator) -> list[Job]:
        return list(jobs)

    def rate(self, job: Job, gpu_ids: tuple[int, ...],
             running: Mapping[str, JobState]) -> float:
        return job.total_iters / job.duration_s if job.duration_s > 0 else float("inf")

    def rates(self, running: Mapping[str, JobState], changed: Collection[str]) -> dict[str, float]:
        out: dict[str, float] = {}
        for job_id in changed:
            state = running.get(job_id)
            if state is not None:
                out[job_id] = self.rate(state.job, state.gpu_ids, running)
        return out

    def restart_overhead_s(self, job: Job) -> float:
        return self.checkpoint_restore_s

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return pickled_by_constructor(self)


def forked_rate(perf: PerfModel, state: JobState, running: Mapping[str, JobState],
                sync_overhead_frac: float, copy_efficiency: float = 1.0) -> float:
    """Iterations per second of a job forked into ``state.copies`` copies.

    Copy c runs on ``state.gpu_ids[c*n : (c+1)*n]`` (n = the job's GPU count).
    The first copy's rate counts fully and each extra copy's ``copy_efficiency``
    of its own (a statistical efficiency, in [0, 1]); the time spent averaging
    their models (``sync_overhead_frac`` of wall time, in [0, 1]) makes no
    progress: ``rate = (r_0 + copy_efficiency * sum_{c>0} r_c) * (1 - sync_overhead_frac)``.
    """
    job = state.job
    n = job.n_gpus
    rates = [perf.rate(job, state.gpu_ids[c * n:(c + 1) * n], running) for c in range(state.copies)]
    total = rates[0] + min(max(copy_efficiency, 0.0), 1.0) * sum(rates[1:])
    return total * (1.0 - min(max(sync_overhead_frac, 0.0), 1.0))
