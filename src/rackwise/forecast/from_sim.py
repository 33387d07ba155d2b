"""Snapshots of a running simulation, and simulations that forecast along the way.

`snapshot_of` turns the simulator's state between two events into the same
record a backend produces, live policy included. `ForecastTap` is a
simulator observer that takes snapshots at chosen instants and remembers
what then really happened to each job, for ``simulate --forecast-at``
and for accuracy studies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rackwise.engine.snapshot import (
    DEFAULT_ERROR_CORRELATION,
    ClusterSnapshot,
    copy_state,
    pickle_policy,
    validate,
)
from rackwise.forecast.durations import fit_durations
from rackwise.perf.base import IdealPerf
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job

Predictions = Literal["exact", "history"]


def policy_params(policy: object) -> dict[str, Any]:
    """A dataclass policy's parameters (its init fields)."""
    if not dataclasses.is_dataclass(policy):
        return {}
    return {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy) if f.init}


def snapshot_of(sim: Simulator, *, taken_at_s: float | None = None,
                predictions: Predictions = "history", use_forest: bool | None = None,
                seed: int = 0, arrivals: Iterable[Job] = (),
                fit_correlation: bool = False) -> ClusterSnapshot:
    """The simulator's state at ``taken_at_s`` (default: its clock), between events.

    Args:
        sim: A simulator between two steps.
        taken_at_s: An instant at or after ``sim.now`` and before its next event.
        predictions: ``"exact"``: every job's true duration (for checks);
            ``"history"``: predicted from the jobs finished so far.
        use_forest: Passed to `fit_durations`.
        seed: Seeds the duration predictor's forest.
        arrivals: Jobs the forecast may know will arrive.
        fit_correlation: Set the band's ``error_correlation`` from the history
            (`durations.error_correlation`) instead of the default 0.5, which
            covered actual starts better on both shipped traces (docs/forecast.md).
    """
    now = sim.now if taken_at_s is None else taken_at_s
    running = tuple(copy_state(s) for s in sim.running.values())
    pending = tuple(copy_state(s) for s in sim.pending.values())
    arrivals = tuple(arrivals)
    targets = [s.job for s in (*running, *pending)] + list(arrivals)
    if predictions == "exact":
        predicted = {job.job_id: job.duration_s for job in targets}
        error: dict[str, tuple[float, ...]] = {}
        correlation = DEFAULT_ERROR_CORRELATION  # no error to share
    else:
        history = sorted(sim.finished.values(), key=lambda s: (s.finish_time, s.job_id))
        fitted = fit_durations([s.job for s in history], targets, use_forest=use_forest, seed=seed)
        predicted, error = fitted.predicted_s, fitted.duration_error
        correlation = fitted.error_correlation if fit_correlation else DEFAULT_ERROR_CORRELATION
    owner = sim.allocation.owner
    held: dict[str, list[int]] = {}
    for gpu, name in enumerate(owner):
        if name is not None and name.startswith("!"):
            held.setdefault(name, []).append(gpu)
    perf = sim.perf
    perf_name, perf_params = (("ideal", dataclasses.asdict(perf)) if isinstance(perf, IdealPerf)
                              else ("network", {}))
    policy = getattr(sim.policy, "inner", sim.policy)
    snapshot = ClusterSnapshot(
        taken_at_s=float(now), topology=sim.topology, running=running, pending=pending,
        predicted_duration_s=predicted, held_gpus={k: tuple(v) for k, v in held.items()},
        arrivals=arrivals, duration_error=error, error_correlation=correlation,
        policy_name=policy.name,
        policy_params=policy_params(policy), policy_state=pickle_policy(policy), decided=True,
        timers=tuple(t for t in sim.timers() if t > now), next_round_s=sim.next_round_at(),
        perf_name=perf_name,
        perf_params=perf_params, source="simulation",
        node_order=sim.allocation.node_order(), completion_order=sim.completion_order(),
        **recent_arrivals(sim.submitted, now))
    validate(snapshot)
    return snapshot


def recent_arrivals(submitted: Sequence[Job], now: float, window_s: float = 86_400.0,
                    max_shapes: int = 2_000) -> dict[str, Any]:
    """Submission rate over the last ``window_s`` and the shapes of those jobs."""
    recent = [job for job in submitted if job.submit_time > now - window_s][-max_shapes:]
    span = min(window_s, now - submitted[0].submit_time) if submitted else 0.0
    return {"arrival_rate_per_s": len(recent) / span if span > 0 else 0.0,
            "arrival_shapes": tuple((job.n_gpus, job.duration_s) for job in recent)}


@dataclass
class Taken:
    """One snapshot taken during a run, and what happened to its jobs afterwards."""

    snapshot: ClusterSnapshot
    # job id -> (actual next start, actual finish); filled in as the run goes on
    actual_start: dict[str, float] = field(default_factory=dict)
    actual_finish: dict[str, float] = field(default_factory=dict)
    watching: dict[str, int] = field(default_factory=dict)  # started before: n_preemptions at T


class ForecastTap:
    """A simulator observer that snapshots the run at given instants.

    The state at instant T is the state after the last event at or before
    T; the tap takes it then, so the policy's state is exactly what it was.

    Args:
        at_s: Instants to take snapshots at.
        make: Builds the snapshot, as ``make(sim, t)``.
    """

    def __init__(self, at_s: Sequence[float],
                 make: Callable[[Simulator, float], ClusterSnapshot]) -> None:
        self.due = sorted(at_s)
        self.make = make
        self.taken: list[Taken] = []

    def __call__(self, sim: Simulator) -> None:
        for taken in self.taken:  # the few jobs that had run before and wait again
            for job_id, n_preempt in list(taken.watching.items()):
                state = sim.running.get(job_id)
                if state is not None and state.n_preemptions == n_preempt:
                    taken.actual_start[job_id] = state.run_start
                    del taken.watching[job_id]
        if not self.due:
            return
        upcoming = sim.peek()
        while self.due and sim.now <= self.due[0] < upcoming:
            at = self.due.pop(0)
            snapshot = self.make(sim, at)
            taken = Taken(snapshot)
            for state in snapshot.pending:
                if state.first_start is not None:
                    taken.watching[state.job_id] = state.n_preemptions
            self.taken.append(taken)
        while self.due and self.due[0] < sim.now:  # before the first event: nothing to see
            self.due.pop(0)

    def finish(self, sim: Simulator) -> None:
        """Fill in actual first starts and finishes once the run is over."""
        finished = sim.finished
        for taken in self.taken:
            for state in (*taken.snapshot.running, *taken.snapshot.pending):
                done = finished.get(state.job_id)
                if done is None:
                    continue
                taken.actual_finish[state.job_id] = done.finish_time  # type: ignore[assignment]
                if state.first_start is None and done.first_start is not None:
                    taken.actual_start[state.job_id] = done.first_start
