"""Gavel: heterogeneity-aware LP policies turned into rounds (papers/gavel.md).

rackwise's implementation of the published design. An LP chooses X, the
share of time each job should spend on each GPU type (§3); a round-based
mechanism (§4) then runs, every ``round_s`` seconds, the jobs with the
highest priority ``X / share of time received`` on each type, preempting
the rest. The choices the digest leaves open are parameters ([R]):
``second_stage`` (break LAS ties by maximising the total, §7.1) and
``min_reset_interval_s`` (Gavel's 1920 s gate, §7.2).

Objective ``fifo`` is Gavel's heterogeneity-agnostic FIFO as its simulator
runs it (``scheduler/policies/fifo.py``, ``FIFOPolicy``): each job is given
one GPU type for good, and GPUs change hands only when X is recomputed, so
a freed GPU idles until the next gated re-solve. docs/fidelity.md lists
Gavel's timing rules and how experiments/gavel-compat.yaml follows them.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

import numpy as np

from rackwise.engine.view import ClusterView
from rackwise.errors import InputError
from rackwise.policies.base import BasePolicy, Capabilities, Decisions, Start
from rackwise.policies.parts import lp, space_sharing
from rackwise.policies.parts.heterogeneity import (
    RoundClock,
    TypePlacer,
    TypeThroughputs,
)
from rackwise.policies.parts.placement import consolidated
from rackwise.workload.job import Job
from rackwise.workload.state import RUNNING, JobState

logger = logging.getLogger(__name__)

Objective = Literal["max_min_fairness", "min_makespan", "finish_time_fairness", "max_throughput",
                    "fifo"]


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
            ``finish_time_fairness`` (Themis-style), ``max_throughput``, or
            ``fifo`` (Gavel's agnostic FIFO: one GPU type per job, handed
            over only at a recompute; `gavel_fifo_types`).
        heterogeneity_aware: Use per-type throughputs (the ``_perf``
            variants); False gives the agnostic variants. ``fifo`` is
            agnostic either way.
        round_s: Round length (Gavel: 360 s).
        min_reset_interval_s: X is recomputed after arrivals or completions
            only when this long has passed since the last recompute
            (Gavel: 1920 s; 0 recomputes at the next round).
        zero_reset_opens_gate: A recompute at time 0 leaves the gate open,
            so the next change is solved at the next round (Gavel tests
            ``_last_reset_time == 0``, its value before any recompute).
        whole_steps: Run each job of a round for whole steps only, as
            Gavel's micro-tasks do: it stops once it has run
            ``floor(rate x round_s)`` steps (at most the steps left) at its
            rate on its type, and idles until the next round; when every job
            of the round has stopped, the next round starts (Gavel's
            ``_get_num_steps`` and ``Scheduler.simulate``). False: a job runs
            through the round, and rounds last ``round_s``.
        type_order: GPU type names in the order a heterogeneity-aware round
            offers their GPUs, e.g. Gavel's ``[v100, p100, k80]``
            (``_schedule_jobs_on_workers``); types the cluster lacks are
            skipped, types not named follow in the default order. None: by
            descending mean rate of the jobs in X. Agnostic variants shuffle
            the types each round either way.
        fifo_seed: Seed of the ``fifo`` objective's draws (Python's
            ``random.Random``, as Gavel's ``FIFOPolicy(seed=...)``); None
            draws one from the run's generator.
        second_stage: After the max-min LP, maximise the total while keeping
            the minimum ([R]); False is Gavel's single LP.
        span_types: A job larger than every GPU type (which Gavel could never
            run) gets GPUs left over after each round, across types, oldest
            first (a rackwise addition; False leaves it waiting forever).
        space_sharing: Let pairs of jobs share GPUs where the measured pair
            throughputs say it gains (§3.1; max-min fairness only; needs the
            network performance model).
        share_max_gpus: Largest job that may share (the table measures pairs
            of one-GPU jobs; larger equal-size pairs reuse those factors).
        share_partners: Partners offered to each job in the LP
            (`rackwise.policies.parts.space_sharing`).
    """

    name: ClassVar[str] = "gavel"
    preempts: ClassVar[bool] = True
    objective: Objective = "max_min_fairness"
    heterogeneity_aware: bool = True
    round_s: float = 360.0
    min_reset_interval_s: float = 1920.0
    zero_reset_opens_gate: bool = False
    whole_steps: bool = False
    type_order: list[str] | None = None
    fifo_seed: int | None = None
    second_stage: bool = True
    span_types: bool = True
    space_sharing: bool = False
    share_max_gpus: int = 1
    share_partners: int = 4

    def __post_init__(self) -> None:
        if self.space_sharing and self.objective != "max_min_fairness":
            raise InputError(f"space sharing works with objective max_min_fairness, not "
                             f"{self.objective}", field="space_sharing")

    @property
    def capabilities(self) -> Capabilities:
        # The makespan and finish-time-fairness LPs read each job's true remaining iterations.
        oracle = self.objective in ("min_makespan", "finish_time_fairness")
        return replace(super().capabilities, round_s=self.round_s, shares_gpus=self.space_sharing,
                       needs_oracle=oracle)

    @property
    def allocation(self) -> Mapping[str, np.ndarray]:
        """Each active job's row of X (share of time per GPU type) from the last solve."""
        return self.alloc_

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        if self.space_sharing:
            space_sharing.check_model(view, self.name)
        self.rates_ = TypeThroughputs(view.topology)
        self.clock_ = RoundClock(self.round_s)
        self.alloc_: dict[str, np.ndarray] = {}  # X row per job
        self.pair_alloc_: dict[tuple[str, str], np.ndarray] = {}  # Y row per pair sharing GPUs
        # Wall seconds run per type since reset, as lists: a round adds to one entry of each,
        # which costs far less on a float than on an array's element.
        self.pair_time_: dict[tuple[str, str], list[float]] = {}
        self.job_time_: dict[str, list[float]] = {}
        self.deficit_: dict[str, np.ndarray] = {}
        self.last_reset_: float | None = None
        self.dirty_ = True
        # (ids, their X rows, their deficit rows) as the last round stacked them: both
        # change only at a recompute, so a round over the same jobs reuses them.
        self.round_rows_: tuple[list[str], np.ndarray, np.ndarray] | None = None
        # job -> (type, executed_s at round start, its pair if it ran sharing GPUs)
        self.ran_on_: dict[str, tuple[int, float, tuple[str, str] | None]] = {}
        self.iso_time_: dict[str, float] = {}  # finish-time fairness: isolated seconds so far
        self.iso_mark_: dict[str, tuple[float, float]] = {}  # job -> (iters, thr_iso) at last solve
        self.micro_end_: dict[str, float] = {}  # whole_steps: job -> when its micro-task ends
        self.fifo_types_: dict[str, int] = {}  # fifo: job -> its GPU type, kept until a recompute
        self.arrival_seq_: dict[str, int] = {}  # fifo: job -> arrival number (Gavel's job id order)
        if self.objective == "fifo":
            seed = self.fifo_seed if self.fifo_seed is not None else int(rng.integers(2**63))
            self.fifo_rng_ = random.Random(seed)

    def on_arrival(self, job: Job, now: float) -> None:
        self.dirty_ = True
        if self.objective == "fifo":
            self.arrival_seq_.setdefault(job.job_id, len(self.arrival_seq_))

    def on_completion(self, job: Job, now: float) -> None:
        self.dirty_ = True
        for table in (self.alloc_, self.job_time_, self.deficit_, self.ran_on_, self.iso_time_,
                      self.iso_mark_, self.micro_end_):
            table.pop(job.job_id, None)
        for pair in [p for p in self.pair_alloc_ if job.job_id in p]:
            del self.pair_alloc_[pair]
            self.pair_time_.pop(pair, None)
        self.rates_.forget(job.job_id)

    # ------------------------------------------------------------------ rounds
    def schedule(self, view: ClusterView, now: float) -> Decisions:
        ended: list[str] = []
        if self.whole_steps:
            ended = sorted(job_id for job_id, end in self.micro_end_.items()
                           if end <= now + 1e-9 and job_id in view.running)
            if ended and len(ended) == len(view.running):
                self.clock_.next_round = now  # every micro-task has ended: so has the round
        active = self.clock_.begin(view, now)
        if active is None:
            for job_id in ended:  # it idles until the round ends
                del self.micro_end_[job_id]
            return Decisions(preempt=tuple(ended), wake_at=self._wake_at(view, now))
        rates = self.rates_.matrix(view, active)
        self._account(view, now)
        if self.dirty_ and self._gate_open(now):
            self._recompute(view, active, rates, now)
        runnable: np.ndarray = np.asarray((rates > 0).any(axis=1))  # on some GPU type
        decisions = self._run_round(view, active, rates, runnable, now)
        if self.whole_steps:
            self._start_micro_tasks(active, rates, now)
        stuck = [active[i].job_id for i in np.flatnonzero(~runnable)]
        wake = self._wake_at(view, now) if self.span_types or len(stuck) < len(active) else None
        unplaced = {job_id: "needs more GPUs than any single GPU type has" for job_id in stuck
                    if self.span_types is False}
        return Decisions(start=decisions.start, preempt=decisions.preempt, wake_at=wake,
                         unplaced=unplaced)

    def _wake_at(self, view: ClusterView, now: float) -> float | None:
        """The next round, or the end of a micro-task before it (whole_steps)."""
        wake = self.clock_.wake_at(view, now)
        later = [end for end in self.micro_end_.values() if end > now + 1e-9]
        if later and (wake is None or min(later) < wake):
            return min(later)
        return wake

    def _micro_task_s(self, state: JobState, rate: float, now: float) -> float:
        """Seconds of a micro-task of whole steps: ``floor(rate x round_s)``, at most those left."""
        steps = min(np.floor(rate * self.round_s), np.ceil(state.remaining_iters(now) - 1e-9))
        return float(steps / rate)

    def _start_micro_tasks(self, active: list[JobState], rates: np.ndarray, now: float) -> None:
        index = {s.job_id: i for i, s in enumerate(active)}
        self.micro_end_ = {}
        for job_id, (j, _, _) in self.ran_on_.items():
            i = index.get(job_id)
            if i is not None and rates[i, j] > 0:
                # A microsecond late, so that a job's last micro-task ends after its completion
                # (a restart's checkpoint read, however small, delays that).
                self.micro_end_[job_id] = now + self._micro_task_s(active[i], rates[i, j], now) + 1e-6

    def _gate_open(self, now: float) -> bool:
        if self.last_reset_ is None or now - self.last_reset_ >= self.min_reset_interval_s:
            return True
        return self.zero_reset_opens_gate and self.last_reset_ == 0.0

    def _account(self, view: ClusterView, now: float) -> None:
        """Add last round's run time to each job's counter on the type it ran on."""
        for job_id, (type_index, mark, pair) in self.ran_on_.items():  # each adds to its own counter
            state = view.running.get(job_id) or view.pending.get(job_id)
            if state is None:
                continue
            if pair is None:
                if job_id in self.job_time_:
                    self.job_time_[job_id][type_index] += state.executed_time_s(now) - mark
            elif job_id == pair[0] and pair in self.pair_time_:
                self.pair_time_[pair][type_index] += state.executed_time_s(now) - mark
        self.ran_on_.clear()

    def _recompute(self, view: ClusterView, active: list[JobState], rates: np.ndarray,
                   now: float) -> None:
        n_types = rates.shape[1]
        if self.last_reset_ is not None:
            elapsed = now - self.last_reset_
            ids = [job_id for job_id in self.alloc_ if job_id in self.job_time_]
            if ids:  # each job's change, row by row, in one array operation
                change = (np.array([self.alloc_[job_id] for job_id in ids]) * elapsed
                          - (np.array([self.job_time_[job_id] for job_id in ids]) - self.round_s / 2))
                for job_id, row in zip(ids, change):
                    if job_id in self.deficit_:
                        self.deficit_[job_id] += row
                    else:
                        self.deficit_[job_id] = np.zeros(n_types) + row  # 0 + change, as ever (-0.0 -> 0.0)
        try:
            x, pair_alloc = self._solve(view, active, rates, now)
        except (lp.LPError, ValueError) as exc:
            logger.warning("gavel: %s LP failed at t=%.0f s (%s); keeping the previous allocation",
                           self.objective, now, exc)
            x = None
        if x is not None:
            self.alloc_ = {s.job_id: x[i] for i, s in enumerate(active)}
            self.pair_alloc_ = pair_alloc
        for state in active:
            self.job_time_[state.job_id] = [self.round_s / 2] * n_types  # a row of its own
            if state.job_id not in self.deficit_:
                self.deficit_[state.job_id] = np.zeros(n_types)
        self.pair_time_ = {pair: [self.round_s / 2] * n_types for pair in self.pair_alloc_}
        self.last_reset_ = now
        self.round_rows_ = None
        self.dirty_ = False

    def _solve(self, view: ClusterView, active: list[JobState], rates: np.ndarray, now: float
               ) -> tuple[np.ndarray, dict[tuple[str, str], np.ndarray]]:
        """X, and the Y rows of the pairs given time (space sharing only)."""
        if not self.space_sharing:
            return self._solve_x(active, rates, now), {}
        pairs = space_sharing.candidate_pairs(view, active, rates, self.rates_.types,
                                              max_gpus=self.share_max_gpus,
                                              partners=self.share_partners)
        x, y = lp.max_min_shared(self._las_coef(active, rates), rates, self._n_gpus(active),
                                 self.rates_.capacity, pairs, second_stage=self.second_stage)
        return x, {(active[a].job_id, active[b].job_id): y[p]
                   for p, (a, b) in enumerate(pairs.members) if y[p].sum() > 1e-9}

    @staticmethod
    def _n_gpus(active: list[JobState]) -> np.ndarray:
        return np.array([s.job.n_gpus for s in active], dtype=float)

    def _las_coef(self, active: list[JobState], rates: np.ndarray) -> np.ndarray:
        """Each job's rate per type over its share of the cluster (LAS, §3.1), by its weight."""
        capacity = self.rates_.capacity
        weights = np.array([priority_weight(s.job) for s in active])
        prop = (rates * capacity).sum(axis=1) / capacity.sum()
        return np.where(prop[:, None] > 0, rates * self._n_gpus(active)[:, None]
                        / (weights[:, None] * np.maximum(prop[:, None], 1e-300)), 0.0)

    def _solve_x(self, active: list[JobState], rates: np.ndarray, now: float) -> np.ndarray:
        n_gpus = self._n_gpus(active)
        capacity = self.rates_.capacity
        if not self.heterogeneity_aware:
            # Agnostic: every usable type looks alike (LAS: rate 1; others: the job's best rate).
            best = rates.max(axis=1, keepdims=True) if self.objective != "max_min_fairness" else 1.0
            rates = np.where(rates > 0, best, 0.0)
        if self.objective == "fifo":
            return self._solve_fifo(active, rates)
        if self.objective == "max_throughput":
            return lp.max_throughput(rates, n_gpus, capacity)
        remaining = np.array([s.remaining_iters(now) for s in active])
        if self.objective == "min_makespan":
            return lp.min_makespan(rates, remaining, n_gpus, capacity,
                                   second_stage=self.second_stage)[0]
        if self.objective == "finish_time_fairness":
            return self._solve_ftf(active, rates, remaining, n_gpus, now)
        return lp.max_min(self._las_coef(active, rates), rates, n_gpus, capacity,
                          second_stage=self.second_stage)

    def _solve_fifo(self, active: list[JobState], rates: np.ndarray) -> np.ndarray:
        """X of Gavel's FIFO: a one-hot row per job given a type, zeros for the rest."""
        types = gavel_fifo_types(
            self.fifo_types_, [s.job_id for s in active],
            {s.job_id: s.job.n_gpus for s in active}, self.rates_.types,
            self.rates_.capacity.astype(int), {s.job_id: r for s, r in zip(active, rates)},
            self.arrival_seq_, self.fifo_rng_)
        self.fifo_types_ = types
        x = np.zeros_like(rates)
        for i, state in enumerate(active):
            if state.job_id in types:
                x[i, types[state.job_id]] = 1.0
        return x

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
                   runnable: np.ndarray, now: float) -> Decisions:
        types = self.rates_.types
        in_x = [i for i, s in enumerate(active) if s.job_id in self.alloc_]
        free_count = self.rates_.capacity.astype(int).tolist()
        chosen: dict[int, int] = {}  # index into active -> type index
        partner: dict[int, int] = {}  # index -> the index it shares GPUs with this round
        if in_x:
            # One row per job in X, then one per pair in Y (space sharing).
            rows: list[tuple[int, ...]] = [(i,) for i in in_x]
            # np.array stacks equal-length rows in C, where vstack reshapes each row first
            ids = [active[i].job_id for i in in_x]
            if self.round_rows_ is None or self.round_rows_[0] != ids:
                self.round_rows_ = (ids, np.array([self.alloc_[job_id] for job_id in ids], dtype=float),
                                    np.array([self.deficit_[job_id] for job_id in ids], dtype=float))
            _, x, deficit = self.round_rows_
            times = np.array([self.job_time_[job_id] for job_id in ids], dtype=float)
            runs = rates[in_x] > 0
            pairs = self._active_pairs(active)
            if pairs:
                rows += [members for members, _ in pairs]
                x = np.vstack([x, *(self.pair_alloc_[key] for _, key in pairs)])
                times = np.vstack([times, *(self.pair_time_[key] for _, key in pairs)])
                deficit = np.vstack([deficit, np.zeros((len(pairs), len(types)))])
                runs = np.vstack([runs, *((rates[a] > 0) & (rates[b] > 0) for (a, b), _ in pairs)])
            fraction = times / np.maximum(times.sum(axis=0, keepdims=True), 1e-300)
            prio = np.where(fraction > 0, x / np.maximum(fraction, 1e-300), x * 1e9)
            prio = np.where(runs, prio, 0.0)
            if self.objective == "fifo":  # Gavel's FIFO runs no job of priority 0
                runs = runs & (prio > 0)
            needs = [active[members[0]].job.n_gpus for members in rows]
            for j in self._type_order(rates, in_x):
                runs_here = runs[:, j].tolist()
                # lexsort: last key first; negated for descending; stable, so ties keep arrival order
                for k in np.lexsort((-x[:, j], -deficit[:, j], -prio[:, j])).tolist():
                    if free_count[j] == 0:
                        break  # no job fits on this type any more
                    members, need = rows[k], needs[k]
                    if runs_here[k] and free_count[j] >= need and chosen.keys().isdisjoint(members):
                        for m in members:
                            chosen[m] = j
                        if len(members) == 2:
                            partner[members[0]], partner[members[1]] = members[1], members[0]
                        free_count[j] -= need
        return self._place(view, active, chosen, partner, types, runnable)

    def _active_pairs(self, active: list[JobState]) -> list[tuple[tuple[int, int], tuple[str, str]]]:
        """Pairs given time in Y whose jobs are both active: ((index, index), key)."""
        if not self.pair_alloc_:
            return []
        index = {s.job_id: i for i, s in enumerate(active)}
        return [((index[a], index[b]), (a, b)) for a, b in self.pair_alloc_
                if a in index and b in index]

    def _type_order(self, rates: np.ndarray, rows: list[int]) -> list[int]:
        """The order in which a round offers the GPU types, by the ``rows`` of ``rates`` in X."""
        if self.heterogeneity_aware and self.objective != "fifo":
            if rates.shape[1] == 1:
                return [0]
            by_rate = [int(j) for j in np.argsort(-rates[rows].mean(axis=0), kind="stable")]
            if self.type_order is None:
                return by_rate
            index = {name: j for j, name in enumerate(self.rates_.types)}
            named = [index[name] for name in self.type_order if name in index]
            return named + [j for j in by_rate if j not in named]
        return [int(j) for j in self.rng_.permutation(rates.shape[1])]

    def _place(self, view: ClusterView, active: list[JobState], chosen: dict[int, int],
               partner: dict[int, int], types: tuple[str, ...], runnable: np.ndarray) -> Decisions:
        free = view.tentative()
        keep = self._kept(active, chosen, partner, self.rates_.type_of_gpu if len(types) > 1 else None)
        preempt: list[str] = []
        for state in active:
            if state.status is RUNNING and state.job_id not in keep:
                # A pair's GPUs come free once, and not while one of it goes on.
                if state.partner is None or (state.partner not in keep and state.partner not in preempt):
                    free.give(state.gpu_ids)
                preempt.append(state.job_id)
        wide = [int(i) for i in np.flatnonzero(~runnable) if i not in chosen] if self.span_types else []
        for index in wide:  # re-placed below, after the jobs of the round
            if active[index].status is RUNNING and active[index].job_id not in preempt:
                preempt.append(active[index].job_id)
                free.give(active[index].gpu_ids)
        starts: list[Start] = []
        placer = TypePlacer(free, self.rates_.nodes)
        order = sorted(chosen, key=lambda i: (-active[i].job.n_gpus, i))
        for index in order:
            state = active[index]
            j = chosen[index]
            other = partner.get(index)
            pair = None if other is None else tuple(sorted((state.job_id, active[other].job_id)))
            self.ran_on_[state.job_id] = (j, state.executed_time_s(view.now), pair)  # type: ignore[assignment]
            if state.job_id in keep:
                continue
            if other is not None and (active[other].job_id in keep
                                      or active[other].job_id in self.ran_on_):
                # Its partner holds (or was just given) the GPUs: share them.
                host = active[other]
                shared = host.gpu_ids if host.job_id in keep else next(
                    s.gpu_ids for s in starts if s.job_id == host.job_id)
                starts.append(Start(state.job_id, shared, beside=host.job_id))
                continue
            gpus = placer.place(types[j], state.job.n_gpus)
            if gpus is None:  # cannot happen: counts were checked per type
                raise AssertionError(f"gavel: no room for job {state.job_id} on {types[j]}")
            placer.take(gpus)
            starts.append(Start(state.job_id, gpus))
        for index in wide:
            state = active[index]
            if state.status is RUNNING and all(free.is_free(g) for g in state.gpu_ids):
                preempt.remove(state.job_id)  # its GPUs are still free: keep it running
                free.take(state.gpu_ids)
                continue
            spread = consolidated(free, state.job.n_gpus, self.rng_)
            if spread is not None:
                free.take(spread)
                starts.append(Start(state.job_id, spread))
        return Decisions(start=tuple(starts), preempt=tuple(preempt))

    @staticmethod
    def _kept(active: list[JobState], chosen: dict[int, int], partner: dict[int, int],
              type_of_gpu: list[int] | None) -> set[str]:
        """Running jobs chosen again on the type they run on, which go on without a restart.

        ``type_of_gpu`` gives each GPU's type index; None on a cluster of one type.

        A pair already sharing goes on; a job running alone goes on, and its new
        partner (if any) joins it. A job that shared with another and now runs
        alone goes on unless its old partner already does.
        """
        keep: set[str] = set()
        later: list[JobState] = []
        for index in sorted(chosen):  # in active's order: the first of a new pair is its host
            state, j = active[index], chosen[index]
            if state.status is not RUNNING or (
                    type_of_gpu is not None and any(type_of_gpu[g] != j for g in state.gpu_ids)):
                continue
            other = partner.get(index)
            new_partner = None if other is None else active[other].job_id
            if state.partner == new_partner:
                keep.add(state.job_id)
            elif state.partner is None and new_partner not in keep:
                keep.add(state.job_id)  # the host: its new partner starts beside it
            elif new_partner is None:
                later.append(state)
        keep.update(s.job_id for s in later if s.partner not in keep)
        return keep


def gavel_fifo_types(previous: Mapping[str, int], active: list[str], n_gpus: Mapping[str, int],
                     type_names: tuple[str, ...], capacity: np.ndarray,
                     rates: Mapping[str, np.ndarray], arrival: Mapping[str, int],
                     rng: random.Random) -> dict[str, int]:
    """The GPU type (index into ``type_names``) of each job, as Gavel's FIFO gives them.

    Follows ``FIFOPolicy.get_allocation`` (``scheduler/policies/fifo.py``,
    mode ``base``) step by step, its quirks included, so that the same seed
    gives the same types:

    1. Jobs of ``previous`` in arrival order: a finished one (not in
       ``active``) hands its type to the head of the queue (active jobs
       without a type, in arrival order) if the head fits in that type's
       GPUs not yet counted and runs on it; a running one keeps its type and
       counts its GPUs.
    2. The types with free GPUs, by name, form a list. Each queued job in
       turn takes the *last* type of that list (Gavel's loop variable left
       over from scanning it, not its random pick), if it runs there, even
       past the type's GPUs; when a type's count reaches exactly zero, the
       type at a random index among those with room for the job leaves the
       list. The queue stops at a job for which no listed type has room.

    Args:
        previous: Each job's type from the last call (finished jobs included).
        active: Admitted, unfinished jobs.
        n_gpus: GPUs of each active job.
        type_names: GPU type names, in index order.
        capacity: GPUs of each type.
        rates: Each active job's rate on each type (0: cannot run there).
        arrival: Each job's arrival number (Gavel's job id).
        rng: The policy's draws (Gavel: ``random.Random(seed)``).
    """
    live = set(active)
    available = {j: int(capacity[j]) for j in range(len(type_names))}
    types: dict[str, int] = dict(previous)
    queue = sorted((job for job in active if job not in previous), key=arrival.__getitem__)
    for job in sorted(previous, key=arrival.__getitem__):
        j = previous[job]
        if job in live:
            available[j] -= n_gpus[job]
            continue
        if queue and n_gpus[queue[0]] <= available[j] and rates[queue[0]][j] > 0:
            head = queue.pop(0)
            types[head] = j
            available[j] -= n_gpus[head]
        del types[job]
    listed = sorted((j for j in available if available[j] > 0), key=type_names.__getitem__)
    while queue and listed:
        job = queue.pop(0)
        need = n_gpus[job]
        room = [i for i, j in enumerate(listed) if available[j] >= need]
        j = listed[-1]
        if not room:
            break
        pick = rng.randrange(len(room))
        if rates[job][j] > 0:
            types[job] = j
            available[j] -= need
            if available[j] == 0:
                listed.pop(room[pick])
    return types
