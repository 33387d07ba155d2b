"""`AsrptParameters`: the parameters ``asrpt`` and ``combined`` share (docs/policies/asrpt.md).

A module of its own, as `parts.hadar_parameters` is: a policy class
inherits these fields, and a dataclass compiled into an extension module
(the optional compiled build, ``setup.py``) could not be inherited by one
that is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(kw_only=True)
class AsrptParameters:
    """A-SRPT's parameters (docs/policies/asrpt.md explains each choice).

    Args:
        predictor: "survival" (the Kaplan-Meier distribution of the sizes
            of the last ``survival_window`` jobs of its class, virtual
            cluster and GPU count, finished or not; `parts.class_sizes`),
            "forest" (random forest, needs the ``ml`` extra), "median"
            (cold-start rules only), "oracle" (true iterations) or
            "class-oracle" (the median true size of the jobs of its class
            that have arrived so far: the best any predictor can do from
            what the shipped traces carry).
        survival_window: Jobs per class the "survival" predictor counts.
        survival_refresh: The "survival" predictor works a class's distribution
            out again once arrivals and finishes in the class reach this share
            of its jobs counted (at least one; 0: after each). A speed dial
            for sweeps: 0.1 takes 0.64-0.76x the CPU time on the full traces
            and moves the published ratios by up to 0.026 (docs/policies/asrpt.md).
        gate: "arrival" (a job may run once it arrives) or "vm_completion"
            (only once the virtual machine has finished it; never preempts).
        preempt: Preempt running jobs the virtual machine ranks lower.
        strict_order: No backfilling: a job that cannot start blocks later ones.
        placement: "graph" (communication-aware partitioner) or any name in
            ``parts.placement.PLACEMENTS`` (an ablation).
        epsilon: A job displaces a running one only if its remaining virtual
            time is below ``(1 - epsilon)`` of the victim's.
        min_run_s: A job runs at least this long before it can be preempted.
        tick_s: Re-plan at multiples of this while jobs wait (preempt on).
        overrun_factor: A job that reaches its predicted iterations gets
            ``ceil((1 + overrun_factor) * done)`` as its new prediction.
        refit_every: Refit the forest after this many more finished jobs,
        refit_growth: or this share of all finished jobs, if more.
        min_train_rows: Finished jobs needed before the forest is used.
        n_estimators: Trees in the forest.
        train_window: Fit the forest on at most this many of the latest
            finished jobs (fewer: cheaper fits, a shorter memory).
        predict_target: "duration" learns run time on the job's ideal
            placement (iterations x tau*), "iterations" learns iterations.
        default_prediction: Prediction when nothing has finished yet, in
            the target's unit (seconds or iterations).
        repredict_waiting: After a refit, predict again for jobs not yet started.
        use_history: Learn from the run's job log (jobs finished before it
            began, when the run has one: ``history_jobs`` of the workload)
            before the first arrival, as a live cluster's scheduler would.
        kl_passes: Refinement passes of the graph partitioner.
        oracle_error: With ``predictor="oracle"``, the spread of its errors: each
            job's true iterations times ``exp(oracle_error * z)``, z a
            standard normal drawn per job from the run's seed (0: exact).
            A dial for how good predictions must be to pay off.
        rank: What orders jobs: from the job's predicted size distribution
            conditioned on the service it has attained (a lower bound on
            its size), "gittins" its Gittins rank or "expected" its
            expected remaining work; or "vm", the virtual machine's
            remaining work on point predictions; the first two in the machine's
            unit (g / G of a second on the ideal placement).
            `parts.size_distribution` explains both.
    """

    predictor: Literal["forest", "median", "survival", "oracle", "class-oracle"] = "survival"
    survival_window: int = 200
    survival_refresh: float = 0.0
    gate: Literal["arrival", "vm_completion"] = "arrival"
    preempt: bool = True
    strict_order: bool = False
    placement: str = "graph"
    epsilon: float = 0.1
    min_run_s: float = 60.0
    tick_s: float = 60.0
    overrun_factor: float = 0.5
    refit_every: int = 50
    refit_growth: float = 0.1
    min_train_rows: int = 20
    n_estimators: int = 100
    train_window: int = 5_000
    predict_target: Literal["duration", "iterations"] = "duration"
    default_prediction: float = 1_000.0
    repredict_waiting: bool = True
    use_history: bool = True
    kl_passes: int = 10
    oracle_error: float = 0.0
    rank: Literal["vm", "gittins", "expected"] = "gittins"
