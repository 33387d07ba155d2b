"""Gavel: heterogeneity-aware LP policies turned into rounds (papers/gavel.md).

rackwise's implementation of the published design. An LP chooses X, the
share of time each job should spend on each GPU type (§3); a round-based
mechanism (§4) then runs, every ``round_s`` seconds, the jobs with the
highest priority ``X / share of time received`` on each type, preempting
the rest. The choices the digest leaves open are parameters ([R]):
``second_stage`` (break LAS ties by maximising the total, §7.1) and
``min_reset_interval_s`` (Gavel's 1920 s gate, §7.2).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from rackwise.cluster.view import ClusterView
from rackwise.policies.base import BasePolicy, Decisions, Start
from rackwise.policies.parts import lp
from rackwise.policies.parts.placement import consolidated
from rackwise.policies.parts.heterogeneity import RoundClock, TypeThroughputs, place_on_type
from rackwise.workload.job import Job
from rackwise.workload.state import JobState, Status

logger = logging.getLogger(__name__)

Objective = Literal["max_min_fairness", "min_makespan", "finish_time_fairness", "max_throughput"]


def priority_weight(job: Job) -> float:
    """A job's priority weight w_m: its ``priority_weight`` tag, else 1."""
    for key, value in job.tags:
        if key == "priority_weight":
            return float(value)
    return 1.0


@dataclass(kw_only=True)
class Gavel(BasePolicy):
    """Gavel's LP policies with its round-based mechanism.

    Args:
        objective: ``max_min_fairness`` (LAS), ``min_makespan``,
            ``finish_time_fairness`` (Themis-style) or ``max_throughput``.
        heterogeneity_aware: Use per-type throughputs (the ``_perf``
            variants); False gives the agnostic variants.
        round_s: Round length (Gavel: 360 s).
        min_reset_interval_s: X is recomputed after arrivals or completions
            only when this long has passed since the last recompute
            (Gavel: 1920 s; 0 recomputes at the next round).
        second_stage: After the max-min LP, maximise the total while keeping
            the minimum ([R]); False is Gavel's single LP.
        span_types: A job larger than every GPU type (which Gavel could never
            run) gets GPUs left over after each round, across types, oldest
            first (a rackwise addition; False leaves it waiting forever).
    """

    name: ClassVar[str] = "gavel"
    preempts: ClassVar[bool] = True
    objective: Objective = "max_min_fairness"
    heterogeneity_aware: bool = True
    round_s: float = 360.0  # type: ignore[misc]  # a parameter here, a ClassVar on the base
    min_reset_interval_s: float = 1920.0
    second_stage: bool = True
    span_types: bool = True

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.rates_ = TypeThroughputs(view.topology)
        self.clock_ = RoundClock(self.round_s)
        self.alloc_: dict[str, np.ndarray] = {}  # X row per job
        self.job_time_: dict[str, np.ndarray] = {}  # wall seconds run per type since reset
        self.deficit_: dict[str, np.ndarray] = {}
        self.last_reset_: float | None = None
        self.dirty_ = True
        self.ran_on_: dict[str, tuple[int, float]] = {}  # job -> (type, executed_s at round start)
        self.iso_time_: dict[str, float] = {}  # finish-time fairness: isolated seconds so far
        self.iso_mark_: dict[str, tuple[float, float]] = {}  # job -> (iters, thr_iso) at last solve

    def on_arrival(self, job: Job, now: float) -> None:
        self.dirty_ = True

    def on_completion(self, job: Job, now: float) -> None:
        self.dirty_ = True
        for table in (self.alloc_, self.job_time_, self.deficit_, self.ran_on_, self.iso_time_,
                      self.iso_mark_):
            table.pop(job.job_id, None)
        self.rates_.forget(job.job_id)

    # ------------------------------------------------------------------ rounds
    def schedule(self, view: ClusterView, now: float) -> Decisions:
        active = self.clock_.begin(view, now)
        if active is None:
            return Decisions(wake_at=self.clock_.wake_at(view, now))
        rates = self.rates_.matrix(view, active)
        self._account(view, now)
        if self.dirty_ and (self.last_reset_ is None
                            or now - self.last_reset_ >= self.min_reset_interval_s):
            self._recompute(active, rates, now)
        decisions = self._run_round(view, active, rates, now)
        stuck = [s.job_id for s, r in zip(active, rates) if not (r > 0).any()]
        wake = self.clock_.wake_at(view, now) if self.span_types or len(stuck) < len(active) else None
        unplaced = {job_id: "needs more GPUs than any single GPU type has" for job_id in stuck
                    if self.span_types is False}
        return Decisions(start=decisions.start, preempt=decisions.preempt, wake_at=wake,
                         unplaced=unplaced)

    def _account(self, view: ClusterView, now: float) -> None:
        """Add last round's run time to each job's counter on the type it ran on."""
        for job_id in sorted(self.ran_on_):
            type_index, mark = self.ran_on_[job_id]
            state = view.running.get(job_id) or view.pending.get(job_id)
            if state is not None and job_id in self.job_time_:
                self.job_time_[job_id][type_index] += state.executed_time_s(now) - mark
        self.ran_on_.clear()

    def _recompute(self, active: list[JobState], rates: np.ndarray, now: float) -> None:
        n_types = rates.shape[1]
        if self.last_reset_ is not None:
            elapsed = now - self.last_reset_
            for job_id in sorted(self.alloc_):
                if job_id in self.job_time_:
                    self.deficit_.setdefault(job_id, np.zeros(n_types))
                    self.deficit_[job_id] += (self.alloc_[job_id] * elapsed
                                              - (self.job_time_[job_id] - self.round_s / 2))
        try:
            x = self._solve(active, rates, now)
        except (lp.LPError, ValueError) as exc:
            logger.warning("gavel: %s LP failed at t=%.0f s (%s); keeping the previous allocation",
                           self.objective, now, exc)
            x = None
        if x is not None:
            self.alloc_ = {s.job_id: x[i] for i, s in enumerate(active)}
        for state in active:
            self.job_time_[state.job_id] = np.full(n_types, self.round_s / 2)
            self.deficit_.setdefault(state.job_id, np.zeros(n_types))
        self.last_reset_ = now
        self.dirty_ = False

    def _solve(self, active: list[JobState], rates: np.ndarray, now: float) -> np.ndarray:
        n_gpus = np.array([s.job.n_gpus for s in active], dtype=float)
        capacity = self.rates_.capacity
        if not self.heterogeneity_aware:
            # Agnostic: every usable type looks alike (LAS: rate 1; others: the job's best rate).
            best = rates.max(axis=1, keepdims=True) if self.objective != "max_min_fairness" else 1.0
            rates = np.where(rates > 0, best, 0.0)
        if self.objective == "max_throughput":
            return lp.max_throughput(rates, n_gpus, capacity)
        remaining = np.array([s.remaining_iters(now) for s in active])
        if self.objective == "min_makespan":
            return lp.min_makespan(rates, remaining, n_gpus, capacity,
                                   second_stage=self.second_stage)[0]
        if self.objective == "finish_time_fairness":
            return self._solve_ftf(active, rates, remaining, n_gpus, now)
        weights = np.array([priority_weight(s.job) for s in active])
        prop = (rates * capacity).sum(axis=1) / capacity.sum()
        coef = np.where(prop[:, None] > 0, rates * n_gpus[:, None]
                        / (weights[:, None] * np.maximum(prop[:, None], 1e-300)), 0.0)
        return lp.max_min(coef, rates, n_gpus, capacity, second_stage=self.second_stage)

    def _solve_ftf(self, active: list[JobState], rates: np.ndarray, remaining: np.ndarray,
                   n_gpus: np.ndarray, now: float) -> np.ndarray:
        capacity = self.rates_.capacity
        thr_iso = (rates * lp.isolated_share(n_gpus, capacity)).sum(axis=1)
        iso = np.zeros(len(active))
        for i, state in enumerate(active):
            iters, thr = self.iso_mark_.get(state.job_id, (0.0, 0.0))
            done = state.iters_at(now)
            if thr > 0:
                self.iso_time_[state.job_id] = self.iso_time_.get(state.job_id, 0.0) + (done - iters) / thr
            self.iso_mark_[state.job_id] = (done, float(thr_iso[i]))
            iso[i] = self.iso_time_.get(state.job_id, 0.0)
        age = np.array([now - s.job.submit_time for s in active])
        return lp.finish_time_fairness(rates, remaining, age, iso, n_gpus, capacity)[0]

    def _run_round(self, view: ClusterView, active: list[JobState], rates: np.ndarray,
                   now: float) -> Decisions:
        types = self.rates_.types
        in_x = [i for i, s in enumerate(active) if s.job_id in self.alloc_]
        free_count = self.rates_.capacity.astype(int).copy()
        chosen: dict[int, int] = {}  # index into active -> type index
        if in_x:
            x = np.vstack([self.alloc_[active[i].job_id] for i in in_x])
            times = np.vstack([self.job_time_[active[i].job_id] for i in in_x])
            deficit = np.vstack([self.deficit_[active[i].job_id] for i in in_x])
            sub_rates = rates[in_x]
            fraction = times / np.maximum(times.sum(axis=0, keepdims=True), 1e-300)
            prio = np.where(fraction > 0, x / np.maximum(fraction, 1e-300), x * 1e9)
            prio = np.where(sub_rates > 0, prio, 0.0)
            for j in self._type_order(sub_rates):
                # lexsort: last key first; negated for descending; stable, so ties keep arrival order
                for k in np.lexsort((-x[:, j], -deficit[:, j], -prio[:, j])):
                    index = in_x[k]
                    need = active[index].job.n_gpus
                    if index not in chosen and sub_rates[k, j] > 0 and free_count[j] >= need:
                        chosen[index] = j
                        free_count[j] -= need
        return self._place(view, active, chosen, types)

    def _type_order(self, rates: np.ndarray) -> list[int]:
        if self.heterogeneity_aware:
            return [int(j) for j in np.argsort(-rates.mean(axis=0), kind="stable")]
        return [int(j) for j in self.rng_.permutation(rates.shape[1])]

    def _place(self, view: ClusterView, active: list[JobState], chosen: dict[int, int],
               types: tuple[str, ...]) -> Decisions:
        topology = view.topology
        free = view.tentative()
        keep: set[str] = set()
        preempt: list[str] = []
        for index, state in enumerate(active):
            if state.status is not Status.RUNNING:
                continue
            on = {topology.gpu_type_of(g) for g in state.gpu_ids}
            j = chosen.get(index)
            if j is not None and on == {types[j]}:
                keep.add(state.job_id)  # a lease extension: no restart
            else:
                preempt.append(state.job_id)
                free.give(state.gpu_ids)
        wide = [i for i, s in enumerate(active) if self.span_types and i not in chosen
                and not (self.rates_.of(view, s) > 0).any()]
        for index in wide:  # re-placed below, after the jobs of the round
            if active[index].status is Status.RUNNING and active[index].job_id not in preempt:
                preempt.append(active[index].job_id)
                free.give(active[index].gpu_ids)
        starts: list[Start] = []
        order = sorted(chosen, key=lambda i: (-active[i].job.n_gpus, i))
        for index in order:
            state = active[index]
            j = chosen[index]
            mark = state.executed_time_s(view.now)
            self.ran_on_[state.job_id] = (j, mark)
            if state.job_id in keep:
                continue
            gpus = place_on_type(free, self.rates_.nodes[types[j]], state.job.n_gpus)
            if gpus is None:  # cannot happen: counts were checked per type
                raise AssertionError(f"gavel: no room for job {state.job_id} on {types[j]}")
            free.take(gpus)
            starts.append(Start(state.job_id, gpus))
        for index in wide:
            state = active[index]
            if state.status is Status.RUNNING and all(free.is_free(g) for g in state.gpu_ids):
                preempt.remove(state.job_id)  # its GPUs are still free: keep it running
                free.take(state.gpu_ids)
                continue
            gpus = consolidated(free, state.job.n_gpus, self.rng_)
            if gpus is not None:
                free.take(gpus)
                starts.append(Start(state.job_id, gpus))
        return Decisions(start=tuple(starts), preempt=tuple(preempt))
