"""Forward simulation from a snapshot: when will each job start and finish.

The simulator resumes from the snapshot's instant with every running job
where it is and the policy in force, either the live one (unpickled from
the snapshot, so it goes on exactly as it would have) or a fresh one told
of every job, as a restarted serve loop would. Jobs run for their predicted
durations; known arrivals arrive, and nothing else does unless drawn from
an arrival model.
"""

from __future__ import annotations

import math
import pickle
import time as wallclock
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rackwise.engine.seeding import policy_rng
from rackwise.engine.snapshot import ClusterSnapshot, copy_state
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError, InvalidDecisionError
from rackwise.perf.base import PerfModel
from rackwise.policies.base import Decisions, Policy, PolicyWrapper
from rackwise.sim.engine import MAX_IDLE_STEPS, Simulator
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

INF = float("inf")
OVERRUN_FRAC = 0.5  # a job past its prediction is given this share of its run so far again


@dataclass(frozen=True, slots=True)
class JobForecast:
    """What the forward run predicts for one job.

    Attributes:
        job_id: The job.
        status: ``"running"``, ``"pending"`` or ``"arriving"`` at the snapshot.
        n_gpus: GPUs it asks for.
        submit_time: When it was (or will be) submitted, seconds.
        start_s: Predicted next start (running jobs: the start of their
            current run); None if it never starts in the forward run.
        finish_s: Predicted finish, or None.
        gpu_ids: GPUs it is expected to get (or holds).
        nodes: Names of the nodes those GPUs are on.
    """

    job_id: str
    status: str
    n_gpus: int
    submit_time: float
    start_s: float | None
    finish_s: float | None
    gpu_ids: tuple[int, ...]
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Forecast:
    """A point forecast: one forward run on predicted durations."""

    taken_at_s: float
    policy: str
    jobs: tuple[JobForecast, ...]
    n_steps: int
    wall_time_s: float


class _StartLog(PolicyWrapper):
    """Stands in for the policy in the forward run and notes each job's first start."""

    def __init__(self, inner: Policy) -> None:
        super().__init__(inner)
        self.starts: dict[str, tuple[float, tuple[int, ...]]] = {}

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        decisions = self.inner.schedule(view, now)
        starts = self.starts
        for start in decisions.start:
            if start.job_id not in starts:
                starts[start.job_id] = (now, start.gpu_ids)
        return decisions


def scaled(job: Job, duration_s: float) -> Job:
    """The job with ``duration_s`` of work at trace speed (itself when unchanged)."""
    if duration_s == job.duration_s:
        return job
    return job.with_changes(duration_s=duration_s,
                            total_iters=job.total_iters * (duration_s / job.duration_s))


def done_s(state: JobState, now: float) -> float:
    """Work a job has done by ``now``, in seconds at trace speed."""
    job = state.job
    return state.iters_at(now) * (job.duration_s / job.total_iters) if job.total_iters > 0 else 0.0


def running_total_s(predicted_s: float, elapsed_s: float) -> float:
    """A running job's predicted total: the prediction, or more once it has been overrun."""
    if predicted_s > elapsed_s:
        return predicted_s
    return elapsed_s * (1.0 + OVERRUN_FRAC) if elapsed_s > 0 else predicted_s


def make_policy_for(snapshot: ClusterSnapshot, fresh: bool) -> tuple[Policy, bool]:
    """The policy to run forward, and whether it is live (already knows every job)."""
    from rackwise.policies.registry import make_policy

    if snapshot.policy_state is not None and not fresh:
        try:
            policy = pickle.loads(snapshot.policy_state)
        except Exception as exc:  # any unpickling failure means the same: unusable state
            raise InputError(f"cannot restore the policy state: {exc}", field="policy.state") from None
        if getattr(policy, "name", None) != snapshot.policy_name:
            raise InputError(f"policy state is of '{getattr(policy, 'name', '?')}', not "
                             f"'{snapshot.policy_name}'", field="policy.state")
        return policy, True
    return make_policy(snapshot.policy_name, **dict(snapshot.policy_params)), False


def make_perf_for(snapshot: ClusterSnapshot) -> PerfModel:
    from rackwise.run import make_perf

    return make_perf(snapshot.perf_name, dict(snapshot.perf_params))


def forward(snapshot: ClusterSnapshot, *, seed: int = 0,
            durations_s: Mapping[str, float] | None = None, extra_arrivals: Sequence[Job] = (),
            fresh_policy: bool = False, perf: PerfModel | None = None,
            policy_copy: Any = None) -> Forecast:
    """Simulate forward from ``snapshot`` until nothing more can happen.

    Args:
        snapshot: Where to start.
        seed: Seeds a fresh policy's generator (a live one carries its own).
        durations_s: Total run time of each job at trace speed, overriding
            the snapshot's predictions (uncertainty runs pass samples here).
        extra_arrivals: Jobs drawn from an arrival model, after ``taken_at_s``.
        fresh_policy: Ignore the live policy state and start a new policy.
        perf: Performance model (default: the one the snapshot names).
        policy_copy: A ready policy object to use instead (it is consumed).

    Returns:
        The forecast for every running, pending and arriving job, ordered
        by predicted start (never-starting jobs last), then id.
    """
    run = _simulate(snapshot, seed, durations_s, extra_arrivals, fresh_policy, perf, policy_copy)
    return Forecast(snapshot.taken_at_s, snapshot.policy_name,
                    _rows(snapshot, run.sim, run.log, run.running, run.pending, run.arrivals),
                    run.sim.n_steps, wallclock.perf_counter() - run.started)


def start_finish_s(snapshot: ClusterSnapshot, *, seed: int = 0,
                   durations_s: Mapping[str, float] | None = None,
                   extra_arrivals: Sequence[Job] = (), fresh_policy: bool = False) -> np.ndarray:
    """`forward`'s start and finish times alone, in `forecast_ids` order (inf: none).

    One row per job, columns (start, finish): what a band sample needs,
    without the per-job records a point forecast prints.
    """
    run = _simulate(snapshot, seed, durations_s, extra_arrivals, fresh_policy, None, None)
    finished, starts = run.sim.finished, run.log.starts
    times = np.full((len(run.running) + len(run.pending) + len(snapshot.arrivals), 2), INF)
    row = 0
    for state in run.running:
        job_id = state.job_id
        times[row, 0] = state.run_start
        if job_id in finished:
            times[row, 1] = finished[job_id].finish_time
        row += 1
    for job_id in (*(state.job_id for state in run.pending), *(job.job_id for job in snapshot.arrivals)):
        if job_id in starts:
            times[row, 0] = starts[job_id][0]
        if job_id in finished:
            times[row, 1] = finished[job_id].finish_time
        row += 1
    return times


def forecast_ids(snapshot: ClusterSnapshot) -> list[str]:
    """The snapshot's jobs in the row order of `start_finish_s`: running, pending, arriving."""
    return [*(state.job_id for state in (*snapshot.running, *snapshot.pending)),
            *(job.job_id for job in snapshot.arrivals)]


@dataclass
class _Run:
    """A finished forward run and the job states it started from."""

    sim: Simulator
    log: _StartLog
    running: list[JobState]
    pending: list[JobState]
    arrivals: list[Job]
    started: float


def _simulate(snapshot: ClusterSnapshot, seed: int, durations_s: Mapping[str, float] | None,
              extra_arrivals: Sequence[Job], fresh_policy: bool, perf: PerfModel | None,
              policy_copy: Any) -> _Run:
    if policy_copy is None and (fresh_policy or snapshot.policy_state is None):
        # A fresh policy hears of every job it finds, running or pending, as an
        # arrival: what a restarted driver loop does (`rackwise.backends.base.serve`).
        try:
            return _run(snapshot, seed, durations_s, extra_arrivals, True, perf, None)
        except (KeyError, InvalidDecisionError) as error:
            raise InputError(f"policy '{snapshot.policy_name}' cannot start from a cluster "
                             f"with jobs already running ({error}); use a snapshot with its "
                             f"live state", field="policy") from None
    return _run(snapshot, seed, durations_s, extra_arrivals, fresh_policy, perf, policy_copy)


def _run(snapshot: ClusterSnapshot, seed: int, durations_s: Mapping[str, float] | None,
         extra_arrivals: Sequence[Job], fresh_policy: bool, perf: PerfModel | None,
         policy_copy: Any) -> _Run:
    started = wallclock.perf_counter()
    now = snapshot.taken_at_s
    predicted = dict(snapshot.predicted_duration_s)
    if durations_s is not None:
        predicted.update(durations_s)
    running: list[JobState] = []
    for original in snapshot.running:
        state = copy_state(original)
        total = running_total_s(predicted[state.job_id], done_s(state, now))
        if total != state.job.duration_s:
            state.swap_job(scaled(state.job, total))
        running.append(state)
    pending: list[JobState] = []
    for original in snapshot.pending:
        state = copy_state(original)
        state.swap_job(scaled(state.job, predicted[state.job_id]))
        pending.append(state)
    arrivals = [scaled(job, predicted.get(job.job_id, job.duration_s)) for job in snapshot.arrivals]
    arrivals.extend(extra_arrivals)

    if policy_copy is not None:
        inner, live = policy_copy, True
    else:
        inner, live = make_policy_for(snapshot, fresh_policy)
    log = _StartLog(inner)
    sim = Simulator.resume(
        snapshot.topology, now=now, running=running, pending=pending, policy=log,
        perf=perf if perf is not None else make_perf_for(snapshot), seed=seed, arrivals=arrivals,
        held_gpus=dict(snapshot.held_gpus), timers=snapshot.timers if live else (),
        next_round_s=snapshot.next_round_s if live else None,
        decide_now=not (live and snapshot.decided), node_order=snapshot.node_order,
        completion_order=snapshot.completion_order)
    if not live:
        inner.reset(sim.view, policy_rng(seed))
        for state in (*running, *pending):
            inner.on_arrival(state.job, now)
    _drive(sim)
    return _Run(sim, log, running, pending, arrivals, started)


def _drive(sim: Simulator) -> None:
    """Step until nothing is left, or until the policy idles with jobs it will never start."""
    idle_steps = 0
    while sim.step():
        if sim.running or not sim.pending or sim.n_waiting:
            idle_steps = 0
        else:
            idle_steps += 1
            if idle_steps >= MAX_IDLE_STEPS:
                return


def _rows(snapshot: ClusterSnapshot, sim: Simulator, log: _StartLog, running: list[JobState],
          pending: list[JobState], arrivals: list[Job]) -> tuple[JobForecast, ...]:
    names = snapshot.names_of_nodes()
    topology = snapshot.topology

    def nodes_of(gpu_ids: tuple[int, ...]) -> tuple[str, ...]:
        return tuple(names[n] for n in sorted({topology.gpu_node[g] for g in gpu_ids}))

    finished = sim.finished
    rows: list[JobForecast] = []
    for status, states in (("running", running), ("pending", pending)):
        for state in states:
            job = state.job
            finish = finished[job.job_id].finish_time if job.job_id in finished else None
            if status == "running":
                start: float | None = state.run_start
                gpus = state.gpu_ids if job.job_id not in log.starts else log.starts[job.job_id][1]
            else:
                start, gpus = log.starts.get(job.job_id, (None, ()))
            rows.append(JobForecast(job.job_id, status, job.n_gpus, job.submit_time, start,
                                    finish, gpus, nodes_of(gpus)))
    for job in arrivals:
        finish_state = finished.get(job.job_id)
        start, gpus = log.starts.get(job.job_id, (None, ()))
        rows.append(JobForecast(job.job_id, "arriving", job.n_gpus, job.submit_time, start,
                                finish_state.finish_time if finish_state else None, gpus,
                                nodes_of(gpus)))
    rows.sort(key=lambda r: (r.start_s if r.start_s is not None else INF, r.job_id))
    return tuple(rows)


def hours(seconds: float | None) -> float:
    """Seconds as hours (NaN for None), for tables."""
    return math.nan if seconds is None else seconds / 3600.0
