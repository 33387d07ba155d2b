"""Network-sensitive delay scheduling: the ``dally`` policy.

rackwise's implementation of the published design described in
shared/papers/network_sensitive_delay.md. Only the design's outline is
published; the levels, classes, timer values, preemption guards and tuner
rules here are our reconstruction, each exposed as a parameter with its
default, and should not be read as the published algorithm.

On top of the delay-scheduling engine (`rackwise.policies.consolidation`)
each job gets a sensitivity class from its slowdown when spread, and the
class sets its timers and its right to evict less sensitive jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rackwise.cluster.allocation import TentativeAllocation
from rackwise.cluster.view import ClusterView
from rackwise.policies.consolidation import DelayScheduler, WaitState
from rackwise.policies.delay_tuner import TimerTuner
from rackwise.policies.parts.locality import (
    SigmaEstimator, cheapest_clearing, main_gpu_type, place_in_domain)
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

_RANK = {"low": 0, "med": 1, "high": 2}


@dataclass(kw_only=True)
class Dally(DelayScheduler):
    """Network-sensitive delay scheduling with preemption and auto-tuned timers.

    rackwise's implementation of the published design (see module docstring);
    every default below is a rackwise choice, not a published value.

    Args:
        timer_low_s, timer_med_s, timer_high_s: Seconds a job of the class waits
            at L0 and then at L1 before relaxing one level.
        med_threshold, high_threshold: σ at L2 (slowdown against the tightest
            placement) from which a job is ``med`` or ``high``.
        fallback_l1_frac: When the perf model's rates carry no information,
            σ(L2) is ``job.comm_sensitivity`` and σ(L1) this fraction of it.
        preempt: Evict less sensitive running jobs for a ``high`` job whose timer ran out.
        preempt_med: Also let ``med`` jobs evict ``low`` ones.
        min_run_s: A victim must have run this long since its last start.
        max_preemptions: A job is preempted at most this many times.
        autotune: Adjust the med/high timers every epoch (see ``delay_tuner``).
        tune_every_s, tune_every_starts: An epoch ends after this much time or
            this many starts, whichever comes first.
        tune_step: Multiplicative step γ of each update.
        tune_hindsight_frac: β: "gave up too early" if a slot came within β·T.
        tune_util_high: Utilisation below which a growing queue shortens timers.
        max_timer_s: Upper bound of any tuned timer.
        seed_timer_s: Value a zero timer is re-seeded to when jobs gave up.
        default_duration_s: Duration estimate of a class before any job of it finished.
    """

    name: ClassVar[str] = "dally"
    preempts: ClassVar[bool] = True
    timer_low_s: tuple[float, float] = (0.0, 0.0)
    timer_med_s: tuple[float, float] = (300.0, 300.0)
    timer_high_s: tuple[float, float] = (1_800.0, 1_800.0)
    med_threshold: float = 0.2
    high_threshold: float = 0.5
    fallback_l1_frac: float = 0.5
    preempt: bool = True
    preempt_med: bool = False
    min_run_s: float = 600.0
    max_preemptions: int = 2
    autotune: bool = True
    tune_every_s: float = 3_600.0
    tune_every_starts: int = 50
    tune_step: float = 0.25
    tune_hindsight_frac: float = 0.5
    tune_util_high: float = 0.9
    max_timer_s: float = 14_400.0
    seed_timer_s: float = 60.0
    default_duration_s: float = 1_144.0

    def timer_table(self) -> dict[str, tuple[float, float]]:
        return {"low": self.timer_low_s, "med": self.timer_med_s, "high": self.timer_high_s}

    def preemption_on(self) -> bool:
        return self.preempt

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.sigmas_ = SigmaEstimator(main_gpu_type(view.topology), self.fallback_l1_frac)
        self.sigma_of_: dict[str, float] = {}
        if self.autotune:
            rule = {"step": self.tune_step, "hindsight_frac": self.tune_hindsight_frac,
                    "util_high": self.tune_util_high, "max_timer_s": self.max_timer_s,
                    "seed_timer_s": self.seed_timer_s}
            self.tuner_ = TimerTuner(
                classes=("med", "high"), every_s=self.tune_every_s,
                every_starts=self.tune_every_starts, default_duration_s=self.default_duration_s,
                n_gpus=view.topology.n_gpus, rule=rule)
            self.timer_log_ = self.tuner_.log

    def sigma(self, view: ClusterView, job: Job) -> tuple[float, float, float]:
        """σ at L0, L1 and L2 for the job, from the perf model or its comm_sensitivity."""
        return self.sigmas_.sigma(view.perf, view.topology, view.running, job)

    def classify(self, view: ClusterView, job: Job) -> str:
        sigma = self.sigma(view, job)
        self.sigma_of_[job.job_id] = sigma[2]
        cls = ("low" if sigma[2] < self.med_threshold else
               "med" if sigma[2] < self.high_threshold else "high")
        if self.tuner_ is not None:
            self.tuner_.note_sigma(cls, sigma)
        return cls

    def on_completion(self, job: Job, now: float) -> None:
        super().on_completion(job, now)
        self.sigma_of_.pop(job.job_id, None)

    def try_preempt(self, view: ClusterView, free: TentativeAllocation, state: JobState,
                    wait: WaitState, now: float, victims: list[str]) -> tuple[int, ...] | None:
        rank = _RANK[wait.cls]
        if not (rank == 2 or (rank == 1 and self.preempt_med)):
            return None
        level, n_gpus = wait.allowed, state.job.n_gpus
        holders = [
            (job_id, other.gpu_ids, (len(other.gpu_ids) * view.perf.restart_overhead_s(other.job),
                                     1, self.sigma_of_.get(job_id, 0.0)))
            for job_id, other in sorted(view.running.items())
            if job_id not in victims and self._may_evict(view, other, rank, now)]
        best = cheapest_clearing(free, level, n_gpus, holders)
        if best is None:
            return None
        for job_id in best[1]:
            free.give(view.running[job_id].gpu_ids)
            victims.append(job_id)
        return place_in_domain(free, n_gpus, level, best[2])

    def _may_evict(self, view: ClusterView, other: JobState, rank: int, now: float) -> bool:
        # a run of at least min_run_s also covers "not itself started by a recent preemption"
        return (_RANK[self.class_of(view, other.job)] < rank
                and now - other.run_start >= self.min_run_s
                and other.n_preemptions < self.max_preemptions
                and other.finish_eta() - now > view.perf.restart_overhead_s(other.job))

