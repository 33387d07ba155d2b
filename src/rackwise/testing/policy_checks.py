"""The policy contract as runnable checks (after scikit-learn's ``check_estimator``).

``check_policy(MyPolicy)`` runs every check on small generated workloads in
the simulator and raises `PolicyCheckError` naming the first broken rule:

- it is a dataclass of its parameters, built with defaults, rebuilt from them;
- it keeps no run state before ``reset`` (attributes ending in ``_``);
- ``schedule`` only reads the view;
- the same seed gives the same records, and a second run of the same object too;
- it pickles mid-run (sweeps and forecasts copy policies);
- it finishes every job of a small trace, including one as wide as the cluster,
  with every decision valid (the engine checks each one whole);
- a fresh copy takes over a running cluster, as after a driver's restart;
- its `Capabilities` are honest: one that does not declare ``preempts``
  never preempts, and only a forking policy starts copies.

A policy that needs an optional extra raises `MissingExtraError` when the
extra is missing, as it would in a run.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.contract import Decisions, Policy
from rackwise.engine.view import ClusterView
from rackwise.metrics.records import JobRecord
from rackwise.policies.base import PolicyWrapper
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job

CLUSTER = uniform_cluster(4, 4, 2)  # 16 GPUs on 4 nodes in 2 racks


class PolicyCheckError(AssertionError):
    """A policy broke a rule of the contract; the message names the check and the rule."""


def random_trace(seed: int = 7, n_jobs: int = 40) -> list[Job]:
    """Poisson-like arrivals of mostly narrow jobs, some wider than a node."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(60.0, n_jobs)
    widths = rng.choice([1, 1, 1, 2, 4, 8], n_jobs)
    durations = rng.lognormal(np.log(600.0), 1.0, n_jobs)
    submit = np.cumsum(gaps) - gaps[0]
    return [Job(f"j{i:02d}", float(submit[i]), int(widths[i]), float(max(durations[i], 1.0)))
            for i in range(n_jobs)]


TRACE = random_trace()
TINY = [Job("a", 0.0, 1, 50.0), Job("b", 0.0, 4, 30.0), Job("c", 5.0, 16, 20.0), Job("d", 10.0, 2, 10.0)]


@dataclass(frozen=True)
class Subject:
    """The policy under test: its name and how to build it from parameters."""

    name: str
    build: Callable[..., Policy]

    def fresh(self) -> Policy:
        return self.build()


def _params(policy: Policy) -> dict[str, Any]:
    return {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy)  # type: ignore[arg-type]
            if f.init}


def _run_state(policy: Policy) -> list[str]:
    return sorted(a for a in vars(policy) if a.endswith("_") and not a.startswith("__"))


def _records(policy: Policy, jobs: Sequence[Job] = TRACE, seed: int = 0) -> list[JobRecord]:
    result = Simulator(CLUSTER, jobs, policy, seed=seed).run()
    return sorted(result.records, key=lambda r: r.job_id)


def _fail(subject: Subject, rule: str) -> PolicyCheckError:
    return PolicyCheckError(f"policy '{subject.name}': {rule}")


# ----------------------------------------------------------------------------- checks
def check_is_a_dataclass_of_its_parameters(subject: Subject) -> None:
    policy = subject.fresh()
    if "__dataclass_fields__" not in vars(type(policy)):  # decorated itself, not only its base
        raise _fail(subject, "must be a dataclass of its parameters (decorate the class with @dataclass)")
    if not isinstance(policy, Policy):
        raise _fail(subject, "does not have the Policy interface (reset, schedule, hooks, capabilities)")
    values = _params(policy)
    copy = dataclasses.replace(policy)  # type: ignore[type-var]
    if type(copy) is not type(policy) or _params(copy) != values:
        raise _fail(subject, "dataclasses.replace changed a parameter; does __post_init__ alter fields?")
    if _params(subject.build(**values)) != values:
        raise _fail(subject, "building it from its own parameters changed a parameter")
    repr(policy)


def check_no_run_state_before_reset(subject: Subject) -> None:
    early = _run_state(subject.fresh())
    if early:
        raise _fail(subject, f"sets run state {early} before reset; build it in reset()")


class _Watch(PolicyWrapper):
    """Fails if ``schedule`` changes what it was shown; keeps every decision."""

    def __init__(self, inner: Policy) -> None:
        super().__init__(inner)
        self.decisions: list[Decisions] = []
        self.changed_at: float | None = None

    @staticmethod
    def _seen(view: ClusterView) -> tuple[object, ...]:
        def state(s: Any) -> tuple[object, ...]:
            return (s.status, s.gpu_ids, s.iters_done, s.rate_iters_per_s, s.last_update,
                    s.attained_gpu_s, s.n_preemptions, s.version)
        return (list(view.pending), list(view.running),
                [view.owner_of(g) for g in range(view.topology.n_gpus)], view.n_free,
                [state(s) for s in view.pending.values()], [state(s) for s in view.running.values()])

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        before = self._seen(view)
        decisions = self.inner.schedule(view, now)
        if self.changed_at is None and self._seen(view) != before:
            self.changed_at = now
        self.decisions.append(decisions)
        return decisions


def check_only_reads_the_view(subject: Subject) -> None:
    watch = _Watch(subject.fresh())
    Simulator(CLUSTER, TRACE, watch, seed=0).run()
    if watch.changed_at is not None:
        raise _fail(subject, f"changed the view at t={watch.changed_at}; a policy must only read it")


def check_capabilities_are_honest(subject: Subject) -> None:
    watch = _Watch(subject.fresh())
    Simulator(CLUSTER, TRACE, watch, seed=0).run()
    capabilities = watch.capabilities
    if not capabilities.preempts and any(d.preempt for d in watch.decisions):
        raise _fail(subject, "preempted a job but its capabilities do not declare preempts")
    if not capabilities.forks and any(s.copies > 1 for d in watch.decisions for s in d.start):
        raise _fail(subject, "started a job as copies but its capabilities do not declare forks")
    if not capabilities.shares_gpus and any(s.beside is not None for d in watch.decisions for s in d.start):
        raise _fail(subject, "shared GPUs but its capabilities do not declare shares_gpus")


def check_same_seed_same_records(subject: Subject) -> None:
    if _records(subject.fresh(), seed=3) != _records(subject.fresh(), seed=3):
        raise _fail(subject, "two runs with seed 3 differ; sort ids before iterating sets")


def check_reset_makes_it_fresh(subject: Subject) -> None:
    policy = subject.fresh()
    if _records(policy, seed=5) != _records(policy, seed=5):
        raise _fail(subject, "a second run of the same object differs; reset() must rebuild all run state")


def check_pickles_mid_run(subject: Subject) -> None:
    policy = subject.fresh()
    sim = Simulator(CLUSTER, TRACE, policy, seed=0)
    sim.start()
    for _ in range(12):
        sim.step()
    try:
        restored = pickle.loads(pickle.dumps(policy))
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise _fail(subject, f"does not pickle mid-run: {exc}") from None
    if type(restored) is not type(policy) or sorted(vars(restored)) != sorted(vars(policy)):
        raise _fail(subject, "lost run state in pickling")


def check_finishes_every_job(subject: Subject) -> None:
    done = _records(subject.fresh(), jobs=TINY)
    if [r.job_id for r in done] != [j.job_id for j in TINY]:
        raise _fail(subject, "left jobs of a four-job trace unfinished")
    for record in done:
        if not (record.finish_time >= record.first_start >= record.submit_time and record.gpu_s > 0.0):
            raise _fail(subject, f"job {record.job_id} has impossible times {record}")


def check_adopts_a_running_cluster(subject: Subject) -> None:
    sim = Simulator(CLUSTER, TRACE, subject.fresh(), seed=0)
    sim.start()
    # Round-based policies start jobs only at their first round: step until some run.
    while sim.step() and not (sim.running and len(sim.records) >= 3):
        pass
    sim.hand_over(subject.fresh(), np.random.default_rng(2))
    while sim.step():
        pass
    if len(sim.records) != len(TRACE):
        raise _fail(subject, "lost jobs after a fresh copy took over a running cluster")


PolicyCheck = Callable[[Subject], None]
POLICY_CHECKS: tuple[PolicyCheck, ...] = (
    check_is_a_dataclass_of_its_parameters,
    check_no_run_state_before_reset,
    check_only_reads_the_view,
    check_capabilities_are_honest,
    check_same_seed_same_records,
    check_reset_makes_it_fresh,
    check_pickles_mid_run,
    check_finishes_every_job,
    check_adopts_a_running_cluster,
)


def subject_of(policy: type | Policy | str) -> Subject:
    """A registered name, a policy class, or an instance (whose parameters are kept)."""
    if isinstance(policy, str):
        from rackwise.policies.registry import make_policy

        name = policy
        return Subject(name, lambda **params: make_policy(name, **params))
    if isinstance(policy, type):
        cls = policy
        return Subject(getattr(cls, "name", cls.__name__), cls)
    instance = policy
    return Subject(instance.name, lambda **params: dataclasses.replace(instance, **params))  # type: ignore[type-var]


def check_policy(policy: type | Policy | str, checks: Sequence[PolicyCheck] = POLICY_CHECKS) -> None:
    """Run the policy contract on ``policy``; raise `PolicyCheckError` at the first broken rule.

    Args:
        policy: A policy class (built with its defaults), an instance (its
            parameters are kept), or a registered name.
        checks: Which checks to run (default: all of `POLICY_CHECKS`).
    """
    subject = subject_of(policy)
    for check in checks:
        check(subject)
