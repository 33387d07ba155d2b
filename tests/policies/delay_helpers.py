"""Shared pieces of the delay-scheduling tests: a span-sensitive perf stub and a run helper."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from rackwise.cluster.topology import Topology
from rackwise.metrics.records import JobRecord
from rackwise.perf.base import IdealPerf, PerfModel
from rackwise.policies.base import Policy
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job
from rackwise.workload.state import JobState


class SpanPerf:
    """Rates fall with a placement's span: ``base / (1 + σ)``, σ per model and level.

    ``sigma_by_model[model] = (σ at one rack, σ across racks)``; other models
    run at trace speed anywhere. ``restore_by_model`` sets the checkpoint
    restore time per model (default ``restore_s``).
    """

    def __init__(self, sigma_by_model: Mapping[str, tuple[float, float]], restore_s: float = 30.0,
                 restore_by_model: Mapping[str, float] | None = None) -> None:
        self.sigma_by_model = dict(sigma_by_model)
        self.restore_s = restore_s
        self.restore_by_model = dict(restore_by_model or {})
        self.topology: Topology | None = None
        self.n_rate_calls = 0

    def prepare(self, jobs: Sequence[Job], topology: Topology,
                rng: np.random.Generator) -> list[Job]:
        self.topology = topology
        return list(jobs)

    def rate(self, job: Job, gpu_ids: tuple[int, ...], running: Mapping[str, JobState]) -> float:
        assert self.topology is not None
        self.n_rate_calls += 1
        n_nodes, n_racks = self.topology.spread(gpu_ids)
        rack_sigma, cross_sigma = self.sigma_by_model.get(job.model or "", (0.0, 0.0))
        sigma = 0.0 if n_nodes <= 1 else (rack_sigma if n_racks <= 1 else cross_sigma)
        return job.total_iters / job.duration_s / (1.0 + sigma)

    def rates(self, running: Mapping[str, JobState], changed: Collection[str]) -> dict[str, float]:
        return {j: self.rate(running[j].job, running[j].gpu_ids, running)
                for j in changed if j in running}

    def restart_overhead_s(self, job: Job) -> float:
        return self.restore_by_model.get(job.model or "", self.restore_s)


HIGH, MED, LOW = 0.9, 0.3, 0.0  # comm_sensitivity giving each class under IdealPerf


def job(job_id: str, submit: float, n_gpus: int, duration_s: float, sens: float = LOW,
        model: str | None = None) -> Job:
    return Job(job_id, submit, n_gpus, duration_s, comm_sensitivity=sens, model=model)


class Run:
    """A finished simulation: records by job id and every placement each job got."""

    def __init__(self, topology: Topology, jobs: list[Job], policy: Policy,
                 perf: PerfModel | None = None) -> None:
        self.placements: dict[str, list[tuple[float, tuple[int, ...]]]] = {}

        def watch(sim: Simulator) -> None:
            for job_id in sorted(sim.running):
                state = sim.running[job_id]
                runs = self.placements.setdefault(job_id, [])
                if not runs or runs[-1][0] != state.run_start:
                    runs.append((state.run_start, state.gpu_ids))

        self.sim = Simulator(topology, jobs, policy, perf=perf or IdealPerf(), observers=[watch])
        result = self.sim.run()
        self.records: dict[str, JobRecord] = {r.job_id: r for r in result.records}
        assert len(self.records) == len(jobs)  # every job finished

    def start(self, job_id: str) -> tuple[float, tuple[int, ...]]:
        """(time, GPUs) of the job's first start."""
        return self.placements[job_id][0]


# The configuration these tests were written for: fixed 300 s / 1,800 s timers for
# med / high jobs, the tuner on, victims sent back to the queue, class timers as they are.
EARLIER_DALLY: dict[str, object] = {
    "timer_med_s": (300.0, 300.0), "timer_high_s": (1_800.0, 1_800.0), "autotune": True,
    "preempt_payback": False, "own_penalty_timers": False}


def earlier_dally(**params: object) -> Policy:
    """`Dally` in the `EARLIER_DALLY` configuration, with ``params`` on top."""
    from rackwise.policies.delay import Dally

    return Dally(**{**EARLIER_DALLY, **params})  # type: ignore[arg-type]
