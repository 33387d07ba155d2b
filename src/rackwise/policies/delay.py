"""Network-sensitive delay scheduling: the ``dally`` policy.

rackwise's implementation of the published design described in
shared/papers/network_sensitive_delay.md. Only the design's outline is
published; the levels, classes, timer values, preemption guards and tuner
rules here are our reconstruction, each exposed as a parameter with its
default, and should not be read as the published algorithm.

On top of the delay-scheduling engine (`parts.delay_scheduling`) each job
gets a sensitivity class from its slowdown when spread, and the
class sets its timers and its right to evict less sensitive jobs; a job's
own spread penalty scales its class's timers, and an eviction moves its
victims onto free GPUs at once and must pay back. Options:
timers from the break-even rule (wait at most a fraction of what the tighter
level saves) instead of a fixed table, and re-consolidation (running jobs
move to a tighter slot when one opens and the move pays back; digest §3.2
Variant B).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, NamedTuple

import numpy as np

from rackwise.cluster.allocation import TentativeAllocation
from rackwise.engine.view import ClusterView
from rackwise.policies.base import BasePolicy, Decisions, Start
from rackwise.policies.delay_tuner import ClassProfile, TimerTuner, TimerUpdate, break_even_timer
from rackwise.policies.parts.delay_parameters import DelayParameters
from rackwise.policies.parts.delay_scheduling import DelayScheduling, WaitState
from rackwise.policies.parts.locality import (
    L0,
    L1,
    L2,
    Cost,
    SigmaEstimator,
    best_placement,
    cheapest_clearing,
    clearing_candidates,
    domain_gpu_ids,
    main_gpu_type,
    place_in_domain,
    placement_level,
    target_level,
)
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

_RANK = {"low": 0, "med": 1, "high": 2}
_TIMED = ("med", "high")  # classes whose timers wait; ``low`` never waits (digest §3.1)
# After a migration its old GPUs are free, but only the next pass can give them
# to a waiting job: ask for that pass right away rather than at the next event.
_REPASS_S = 1e-3


@dataclass(slots=True)
class _Clearings:
    """Within one decision, what `Dally._evict` worked out for the same free GPUs and victims:
    the running jobs each rank may evict, and per (rank, level, GPU count) the cheapest
    clearing and what carrying it out would cost (`_ClearingMoves`)."""

    holders: dict[int, list[tuple[str, tuple[int, ...], Cost]]] = field(default_factory=dict)
    candidates: dict[tuple[int, int], dict[int, list[tuple[Cost, int, str]]]] = field(default_factory=dict)
    best: dict[tuple[int, int, int], tuple[Cost, tuple[str, ...], int] | None] = field(default_factory=dict)
    moves: dict[tuple[int, int, int], _ClearingMoves] = field(default_factory=dict)


class _ClearingMoves(NamedTuple):
    """What carrying a clearing out would take: the requester's GPUs (None: no room even then),
    each victim's new GPUs, and the GPU-seconds the victims lose (restarts, slower placements)."""

    gpus: tuple[int, ...] | None
    victims_to: tuple[tuple[int, ...], ...]
    cost_gpu_s: float


@dataclass(frozen=True, slots=True)
class Migration:
    """One re-consolidation (a row of ``Dally.migrations``): a running job moved to a tighter level."""

    time: float
    job_id: str
    from_level: int
    to_level: int
    gain_s: float  # remaining iterations x the iteration time saved
    restart_s: float  # what the move costs the job


@dataclass(kw_only=True)
class Dally(DelayParameters, BasePolicy):
    """Network-sensitive delay scheduling with preemption and auto-tuned timers.

    rackwise's implementation of the published design (see module docstring);
    every default below is a rackwise choice, not a published value.

    Args:
        timer_low_s, timer_med_s, timer_high_s: Seconds a job of the class waits
            at L0 and then at L1 before relaxing one level (with
            ``initial_timers="break-even"``, the med/high values hold only
            until a job of the class has been seen). Med and high jobs never
            relax by default: on a congested network a relaxed multi-hour job
            loses more than any wait saves (the timer sweep in
            experiments/delay.yaml).
        initial_timers: ``"table"`` (default): the ``timer_*_s`` values.
            ``"break-even"``: once a med/high job has been classified, its
            class waits T(ℓ) = κ (σ(ℓ+1) − σ(ℓ)) D at level ℓ, σ the class's
            median slowdowns and D its median L0 duration (of finished jobs,
            else ``default_duration_s``), clamped to [0, ``max_timer_s``]; the
            timers track those medians until the tuner takes the class over
            at its next epoch end. Table is the default because break-even,
            whose D comes from the short jobs that finish first, measured
            worse (docs/policies/delay.md).
        break_even_kappa: κ, the share of the slowdown a job may spend waiting.
        med_threshold, high_threshold: σ at L2 (slowdown against the tightest
            placement) from which a job is ``med`` or ``high``.
        fallback_l1_frac: When the perf model's rates carry no information,
            σ(L2) is ``job.comm_sensitivity`` and σ(L1) this fraction of it.
        own_penalty_timers: Scale each job's class timer at a level by its own
            spread penalty there (σ(ℓ+1) − σ(ℓ)) over its class's median one, so a
            heavily network-bound job waits longer than its class and a barely
            bound one less (bounded by ``max_timer_s``).
        no_wait_penalty: A job whose own penalty for the next looser level is
            below this does not wait for the tighter one at all.
        preempt: Evict less sensitive running jobs for a ``high`` job whose timer
            ran out and, with ``preempt_payback``, after each pass for every
            waiting ``high`` job, on the GPUs the pass left free.
        preempt_payback: Evict only victims that restart at once on GPUs left
            free elsewhere, and only when the pay-back test holds: the job's
            spread penalty x its expected work (the larger of its run time so
            far and its class's median duration) x its GPUs exceeds the
            victims' restart time plus their own slowdown on their new GPUs x
            their expected remaining work (their run time so far), x their GPUs.
            Off: the older rule, which lets victims wait in the queue and reads
            their remaining work (an oracle).
        preempt_med: Also let ``med`` jobs evict ``low`` ones.
        min_run_s: A victim must have run this long since its last start.
        max_preemptions: A job is preempted at most this many times.
        autotune: Adjust the med/high timers every epoch (see ``delay_tuner``),
            among other signals from what relaxing cost the jobs that did it
            once they finish. A timer at "never" that a rule shortens drops to
            ``max_timer_s`` first; from a short start the first relaxed
            multi-hour jobs already cost more than the tuner later recovers.
        tune_every_s, tune_every_starts: An epoch ends after this much time or
            this many starts, whichever comes first.
        tune_step: Multiplicative step γ of each update.
        tune_hindsight_frac: β: "gave up too early" if a slot came within β·T.
        tune_util_high: Utilisation below which a growing queue shortens timers.
        max_timer_s: Upper bound of any tuned, break-even or own-penalty timer
            (a week: the tuner must be able to learn that a class should wait for
            hours; at 4 h it could not).
        seed_timer_s: Value a zero timer is re-seeded to when jobs gave up.
        default_duration_s: Duration estimate of a class before any job of it
            finished (1,144 s, the Philly trace's median).
        reconsolidate: Move a running job to a tighter level when a slot opens there
            and remaining iterations x the iteration time saved exceed its
            restart cost. A move is a preemption plus a start in one decision,
            counts as a preemption, and needs the ``min_run_s`` and
            ``max_preemptions`` guards a victim needs; levels only tighten.
            Each move is logged in ``migrations``.
        ordering, reserve_after_s: See `DelayParameters`.
    """

    name: ClassVar[str] = "dally"
    preempts: ClassVar[bool] = True
    timer_low_s: tuple[float, float] = (0.0, 0.0)
    timer_med_s: tuple[float, float] = (math.inf, math.inf)
    timer_high_s: tuple[float, float] = (math.inf, math.inf)
    initial_timers: Literal["break-even", "table"] = "table"
    break_even_kappa: float = 0.5
    med_threshold: float = 0.2
    high_threshold: float = 0.5
    fallback_l1_frac: float = 0.5
    own_penalty_timers: bool = True
    no_wait_penalty: float = 0.1
    preempt: bool = True
    preempt_payback: bool = True
    preempt_med: bool = False
    min_run_s: float = 600.0
    max_preemptions: int = 2
    autotune: bool = True
    tune_every_s: float = 3_600.0
    tune_every_starts: int = 50
    tune_step: float = 0.25
    tune_hindsight_frac: float = 0.5
    tune_util_high: float = 0.9
    max_timer_s: float = 604_800.0
    seed_timer_s: float = 60.0
    default_duration_s: float = 1_144.0
    reconsolidate: bool = False

    def timer_table(self) -> dict[str, tuple[float, float]]:
        """Seconds a job of each class waits at L0 and at L1 before relaxing, as configured."""
        return {"low": self.timer_low_s, "med": self.timer_med_s, "high": self.timer_high_s}

    @property
    def delay(self) -> DelayScheduling:
        """The run's delay state: current timers and waiting jobs."""
        return self.delay_

    @property
    def timer_log(self) -> Sequence[TimerUpdate]:
        """Every change the tuner made to a timer, in order (empty without ``autotune``)."""
        return self.tuner_.log if self.tuner_ is not None else []

    @property
    def migrations(self) -> Sequence[Migration]:
        """Every re-consolidation move, in order."""
        return self.migrations_

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.sigmas_ = SigmaEstimator(main_gpu_type(view.topology), self.fallback_l1_frac)
        self.sigma_of_: dict[str, float] = {}
        self.profile_ = ClassProfile(_TIMED, self.default_duration_s)
        # classes whose timers follow the break-even rule (until the tuner takes them over)
        self.break_even_ = set(_TIMED) if self.initial_timers == "break-even" else set()
        self.profile_moved_ = False
        self.migrations_: list[Migration] = []
        # per running job: its class, σ, target level and the level it runs at (for the tuner)
        self.ran_at_: dict[str, tuple[str, tuple[float, float, float], int, int]] = {}
        self.tuner_: TimerTuner | None = None
        if self.autotune:
            rule = {"step": self.tune_step, "hindsight_frac": self.tune_hindsight_frac,
                    "util_high": self.tune_util_high, "max_timer_s": self.max_timer_s,
                    "seed_timer_s": self.seed_timer_s, "loss_kappa": self.break_even_kappa}
            self.tuner_ = TimerTuner(
                classes=_TIMED, every_s=self.tune_every_s,
                every_starts=self.tune_every_starts, default_duration_s=self.default_duration_s,
                n_gpus=view.topology.n_gpus, rule=rule, profile=self.profile_)
        self.delay_ = DelayScheduling(self, self.timer_table(), classify=self.classify,
                                      evict=self._evict if self.preempt else None,
                                      tuner=self.tuner_,
                                      scale=self._own_scale if self.own_penalty_timers else None,
                                      max_timer_s=self.max_timer_s)

    def sigma(self, view: ClusterView, job: Job) -> tuple[float, float, float]:
        """σ at L0, L1 and L2 for the job, from the perf model or its comm_sensitivity."""
        return self.sigmas_.sigma(view.perf, view.topology, view.running, job)

    def classify(self, view: ClusterView, job: Job) -> str:
        """``low``, ``med`` or ``high``, from σ at L2; noted in the class profile."""
        sigma = self.sigma(view, job)
        self.sigma_of_[job.job_id] = sigma[2]
        cls = ("low" if sigma[2] < self.med_threshold else
               "med" if sigma[2] < self.high_threshold else "high")
        self.profile_.note_sigma(cls, sigma)
        self.profile_moved_ = True
        return cls

    def _own_scale(self, view: ClusterView, job: Job, cls: str) -> tuple[float, float]:
        """The job's own spread penalty at L0 and L1 over its class's median one (0: no wait)."""
        if cls not in _TIMED:
            return 1.0, 1.0
        sigma = self.sigma(view, job)
        factors = []
        for level in (L0, L1):
            own = sigma[level + 1] - sigma[level]
            typical = self.profile_.penalty(cls, level)
            factors.append(0.0 if own < self.no_wait_penalty else
                           own / typical if typical > 0.0 else 1.0)
        return factors[0], factors[1]

    def on_arrival(self, job: Job, now: float) -> None:
        self.delay_.on_arrival(job)

    def on_completion(self, job: Job, now: float) -> None:
        cls = self.delay_.on_completion(job)  # tells the tuner, which shares the profile
        if self.tuner_ is None and cls is not None:
            self.profile_.note_finish(cls, job.duration_s)
        ran = self.ran_at_.pop(job.job_id, None)
        if self.tuner_ is not None and ran is not None:
            # what giving up each level cost it, now that its L0 duration is known
            ran_cls, sigma, target, level = ran
            for given_up in range(target, level):
                loss_s = job.duration_s * (sigma[level] - sigma[given_up])
                self.tuner_.note_relaxed_loss(ran_cls, given_up, loss_s)
        self.profile_moved_ = True
        self.sigma_of_.pop(job.job_id, None)

    # ------------------------------------------------------------------ pass
    def schedule(self, view: ClusterView, now: float) -> Decisions:
        tuner = self.tuner_
        epochs = tuner.n_epochs if tuner is not None else 0
        if self.break_even_:
            # classify new arrivals first, so their timers are already break-even ones
            for job_id in self.delay_.unwaited(view.pending):
                self.delay_.class_of(view, view.pending[job_id].job)
            if self.profile_moved_:
                self.profile_moved_ = False
                self._set_break_even_timers()
        decisions = self.delay_.schedule(view, now)
        if tuner is not None and tuner.n_epochs > epochs:
            # an epoch ended: from here the tuner moves the timers of every class it has seen
            self.break_even_ -= {c for c in _TIMED if self.profile_.seen(c)}
        if self.preempt and self.preempt_payback:
            decisions = self._compact(view, now, decisions)
        if self.reconsolidate:
            decisions = self._reconsolidate(view, now, decisions)
        if tuner is not None:
            self._note_levels(view, decisions)
        return decisions

    def _note_levels(self, view: ClusterView, decided: Decisions) -> None:
        """Remember the level each started job runs at, and the tightest it could have had."""
        topology = view.topology
        for start in decided.start:
            job = (view.pending[start.job_id] if start.job_id in view.pending
                   else view.running[start.job_id]).job
            if job.n_gpus <= 1:
                continue
            cls = self.delay_.class_of(view, job)
            self.ran_at_[job.job_id] = (cls, self.sigma(view, job), target_level(topology, job.n_gpus),
                                        placement_level(topology, start.gpu_ids))

    def _left_free(self, view: ClusterView, decided: Decisions) -> TentativeAllocation:
        """GPUs the pass left free, reserved ones excluded."""
        free = view.tentative()
        for job_id in decided.preempt:
            free.give(view.running[job_id].gpu_ids)
        for start in decided.start:
            free.take(start.gpu_ids)
        for wait in self.delay_.waits.values() if self.reserve_after_s is not None else ():
            if wait.reserved is not None:  # set only by reservations
                free.take([g for g in domain_gpu_ids(view.topology, wait.target, wait.reserved)
                           if free.is_free(g)])
        return free

    def _compact(self, view: ClusterView, now: float, decided: Decisions) -> Decisions:
        """After the pass, clear a slot at its allowed level for waiting sensitive jobs, in
        queue order, by moving less sensitive running jobs onto GPUs the pass left free.

        Only GPUs nobody in the queue took are used, so no job is passed over;
        each clearing must pass the pay-back test (`_evict_if_it_pays`).
        """
        free = self._left_free(view, decided)
        if free.n_free == 0:
            return decided
        victims: list[str] = list(decided.preempt)
        restarts: list[Start] = []
        starts: list[Start] = []
        memo = _Clearings()
        # A job at L2 has nothing to clear (any free GPUs would do), and one larger than the
        # free GPUs cannot move its victims (`_victims_could_move`): neither is read.
        for job_id in self.delay_.waiting_below_l2_that_fit(view, free, now):
            wait = self.delay_.waits[job_id]
            state = view.pending[job_id]
            gpus = self._evict(view, free, state, wait, now, victims, restarts, memo)
            if gpus is None:
                continue
            memo = _Clearings()  # GPUs and victims changed
            free.take(gpus)
            starts.append(Start(job_id, gpus))
            self.delay_.started_outside(job_id)
        if not starts:
            return decided
        return Decisions(start=decided.start + tuple(starts) + tuple(restarts),
                         preempt=tuple(victims), wake_at=decided.wake_at,
                         unplaced=decided.unplaced)

    def _set_break_even_timers(self) -> None:
        """Break-even timers for the classes that follow them and have a profile."""
        self.delay_.set_timers({
            cls: [break_even_timer(self.profile_.gain_s(cls, level),
                                   kappa=self.break_even_kappa, max_timer_s=self.max_timer_s)
                  for level in (L0, L1)]
            for cls in sorted(self.break_even_) if self.profile_.seen(cls)})

    def _reconsolidate(self, view: ClusterView, now: float, decided: Decisions) -> Decisions:
        """Add to ``decided`` the moves of running jobs to tighter slots that pay back.

        Only GPUs the pass left free (and no reserved ones) are used, so a
        waiting job always goes before a move. Jobs that gain the most move
        first; a job may reuse its own GPUs in its new placement.
        """
        free = self._left_free(view, decided)
        if free.n_free == 0:
            return decided
        evicted = set(decided.preempt)
        wake_at = decided.wake_at if decided.wake_at is not None else math.inf
        ranked: list[tuple[tuple[float, str], JobState]] = []
        for job_id, state in sorted(view.running.items()):
            # a victim's guards against thrashing; as levels only tighten, a job moves at most twice
            if job_id in evicted or state.copies != 1 or state.n_preemptions >= self.max_preemptions:
                continue
            found = self._move(view, free, state, now)
            if found is None:
                continue
            ready_at = state.run_start + self.min_run_s  # also lets a restore finish first
            if now < ready_at:
                wake_at = min(wake_at, ready_at)  # no event may come then: ask to look again
                continue
            ranked.append(((-found[0].gain_s, job_id), state))
        moves: list[Start] = []
        for _, state in sorted(ranked):
            found = self._move(view, free, state, now)  # earlier moves changed what is free
            if found is None:
                continue
            migration, gpus = found
            free.give(state.gpu_ids)
            free.take(gpus)
            moves.append(Start(state.job_id, gpus))
            self.migrations_.append(migration)
        if moves and len(view.pending) + len(decided.preempt) > len(decided.start):
            wake_at = min(wake_at, now + _REPASS_S)  # someone waits: offer it the GPUs just left
        return Decisions(start=decided.start + tuple(moves),
                         preempt=decided.preempt + tuple(m.job_id for m in moves),
                         wake_at=wake_at if wake_at < math.inf else None, unplaced=decided.unplaced)

    def _evict(self, view: ClusterView, free: TentativeAllocation, state: JobState,
               wait: WaitState, now: float, victims: list[str],
               restarts: list[Start], memo: _Clearings | None = None) -> tuple[int, ...] | None:
        """The engine's `Evict`: the cheapest less sensitive jobs to clear a slot at the allowed level.

        ``memo``: clearings already worked out on these free GPUs and victims, kept by the caller
        for as long as neither changes.
        """
        rank = _RANK[wait.cls]
        if not (rank == 2 or (rank == 1 and self.preempt_med)):
            return None
        level, n_gpus = wait.allowed, state.job.n_gpus
        if self.preempt_payback and not self._victims_could_move(free, n_gpus):
            return None
        if memo is None:
            memo = _Clearings()
        key = (rank, level, n_gpus)
        if key in memo.best:
            best = memo.best[key]
        else:
            holders = memo.holders.get(rank)
            if holders is None:
                holders = memo.holders[rank] = [
                    (job_id, other.gpu_ids,
                     (len(other.gpu_ids) * view.perf.restart_overhead_s(other.job),
                      1, self.sigma_of_.get(job_id, 0.0)))
                    for job_id, other in sorted(view.running.items())
                    if job_id not in victims and self._may_evict(view, other, rank, now)]
            candidates = memo.candidates.get((rank, level))
            if candidates is None:
                candidates = memo.candidates[rank, level] = clearing_candidates(view.topology, level, holders)
            best = memo.best[key] = cheapest_clearing(free, level, n_gpus, candidates)
        if best is None:
            return None
        if not self.preempt_payback:
            for job_id in best[1]:
                free.give(view.running[job_id].gpu_ids)
                victims.append(job_id)
            return place_in_domain(free, n_gpus, level, best[2])
        moves = memo.moves.get(key)
        if moves is None:
            moves = memo.moves[key] = self._clearing_moves(view, free, best[1], best[2], level,
                                                           n_gpus, now)
        return self._evict_if_it_pays(view, free, state, wait, now, best[1], moves, victims, restarts)

    @staticmethod
    def _victims_could_move(free: TentativeAllocation, n_gpus: int) -> bool:
        """Whether the victims of any clearing for ``n_gpus`` GPUs could all be placed elsewhere.

        Victims free as many GPUs as they need again (a job holds exactly its
        GPU count here: no copies, no shared GPUs), and the requester takes
        ``n_gpus`` of the freed ones, so they fit only if ``n_gpus`` GPUs are
        free now. If not, every clearing fails the pay-back test (a victim
        left waiting costs infinitely much), which this answers at once.
        """
        return free.n_free >= n_gpus

    def _clearing_moves(self, view: ClusterView, free: TentativeAllocation, chosen: tuple[str, ...],
                        domain: int, level: int, n_gpus: int, now: float) -> _ClearingMoves:
        """What clearing ``domain`` for ``n_gpus`` GPUs by moving ``chosen`` elsewhere would take
        and cost, tried on ``free`` and undone: the same for every requester of that size."""
        held = [view.running[job_id].gpu_ids for job_id in chosen]
        for gpu_ids in held:
            free.give(gpu_ids)
        gpus = place_in_domain(free, n_gpus, level, domain)
        taken: list[tuple[int, ...]] = []
        cost_gpu_s = 0.0
        if gpus is not None:
            free.take(gpus)
            taken.append(gpus)
            for job_id in chosen:
                other = view.running[job_id]
                to = best_placement(free, other.n_gpus, L2)
                if to is None:  # it would wait in the queue: a cost this test cannot bound
                    cost_gpu_s = math.inf
                    break
                free.take(to)
                taken.append(to)
                rate_old, rate_new = view.rate_on(other, other.gpu_ids), view.rate_on(other, to)
                slowdown = max(0.0, rate_old / rate_new - 1.0) if rate_new > 0.0 else math.inf
                # expected remaining work: its run so far (no oracle on what is left)
                cost_gpu_s += other.n_gpus * (view.perf.restart_overhead_s(other.job)
                                              + slowdown * other.executed_time_s(now))
        for gpu_ids in reversed(taken):
            free.give(gpu_ids)
        for gpu_ids in held:
            free.take(gpu_ids)
        return _ClearingMoves(gpus, tuple(taken[1:]), cost_gpu_s)

    def _evict_if_it_pays(self, view: ClusterView, free: TentativeAllocation, state: JobState,
                          wait: WaitState, now: float, chosen: tuple[str, ...], moves: _ClearingMoves,
                          victims: list[str], restarts: list[Start]) -> tuple[int, ...] | None:
        """Carry out the clearing ``moves`` of ``chosen`` for ``state`` if the pay-back test holds.

        ``free`` is left as it was unless the eviction goes ahead.
        """
        sigma = self.sigma(view, state.job)
        work_s = max(state.executed_time_s(now), self.profile_.duration_s(wait.cls))
        level, n_gpus = wait.allowed, state.job.n_gpus
        gain_gpu_s = n_gpus * (sigma[level + 1] - sigma[level]) * work_s
        if moves.gpus is None or not gain_gpu_s > moves.cost_gpu_s:
            return None
        for job_id in chosen:
            free.give(view.running[job_id].gpu_ids)
        for gpu_ids in moves.victims_to:
            free.take(gpu_ids)
        victims.extend(chosen)
        restarts.extend(Start(job_id, to) for job_id, to in zip(chosen, moves.victims_to, strict=True))
        return moves.gpus  # the engine takes the requester's GPUs itself

    def _move(self, view: ClusterView, free: TentativeAllocation, state: JobState,
              now: float) -> tuple[Migration, tuple[int, ...]] | None:
        """A tighter placement for the job on ``free`` (its own GPUs count), if it pays back.

        Returns None unless remaining iterations x the iteration time saved
        exceed the job's restart cost.
        """
        level = placement_level(view.topology, state.gpu_ids)
        if level == L0:
            return None
        free.give(state.gpu_ids)
        gpus = best_placement(free, state.n_gpus, level - 1)
        free.take(state.gpu_ids)
        if gpus is None:
            return None
        rate_now, rate_new = view.rate_on(state, state.gpu_ids), view.rate_on(state, gpus)
        if not rate_new > rate_now > 0.0:
            return None
        gain_s = state.remaining_iters(now) * (1.0 / rate_now - 1.0 / rate_new)
        restart_s = view.perf.restart_overhead_s(state.job)
        if gain_s <= restart_s:
            return None
        to_level = placement_level(view.topology, gpus)
        return Migration(now, state.job_id, level, to_level, gain_s, restart_s), gpus

    def _may_evict(self, view: ClusterView, other: JobState, rank: int, now: float) -> bool:
        # a run of at least min_run_s also covers "not itself started by a recent preemption"
        return (_RANK[self.delay_.class_of(view, other.job)] < rank
                and now - other.run_start >= self.min_run_s
                and other.n_preemptions < self.max_preemptions
                and (self.preempt_payback  # the pay-back test reads no remaining work
                     or other.finish_eta() - now > view.perf.restart_overhead_s(other.job)))

