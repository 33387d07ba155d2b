"""Every registered policy against the policy contract (after scikit-learn's check_estimator).

Checks are plain functions of a policy name; each (name, check) pair is its
own test case, so a policy added to the registry later is checked with no
edit here. Capabilities come from the class (``needs_extra``), never from
a list of names.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable

import numpy as np
import pytest

from rackwise.cluster.topology import uniform_cluster
from rackwise.errors import MissingExtraError
from rackwise.metrics.records import JobRecord
from rackwise.policies.base import BasePolicy, Decisions, PolicyWrapper
from rackwise.policies.registry import all_policies, make_policy, policy_class
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job

CLUSTER = uniform_cluster(4, 4, 2)  # 16 GPUs, 2 racks


def random_trace(seed: int = 7, n_jobs: int = 40) -> list[Job]:
    """Poisson-ish arrivals; mostly narrow jobs, some wider than a node."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(60.0, n_jobs)
    widths = rng.choice([1, 1, 1, 2, 4, 8], n_jobs)
    durations = rng.lognormal(np.log(600.0), 1.0, n_jobs)
    submit = np.cumsum(gaps) - gaps[0]
    return [Job(f"j{i:02d}", float(submit[i]), int(widths[i]), float(max(durations[i], 1.0)))
            for i in range(n_jobs)]


TRACE = random_trace()
TINY = [Job("a", 0.0, 1, 50.0), Job("b", 0.0, 4, 30.0), Job("c", 5.0, 16, 20.0),
        Job("d", 10.0, 2, 10.0)]


def load(name: str) -> BasePolicy:
    """The default policy for a name, or a skip naming the missing extra."""
    try:
        cls = policy_class(name)
    except MissingExtraError as exc:
        pytest.skip(f"policy '{name}' needs an optional extra: {exc}")
    extra = getattr(cls, "needs_extra", None)
    try:
        return make_policy(name)
    except (MissingExtraError, ImportError) as exc:
        if extra is None:
            raise
        pytest.skip(f"policy '{name}' needs the '{extra}' extra: {exc}")


def records(policy: BasePolicy, jobs: list[Job] = TRACE, seed: int = 0) -> list[JobRecord]:
    try:
        result = Simulator(CLUSTER, jobs, policy, seed=seed).run()
    except (MissingExtraError, ImportError) as exc:
        if getattr(policy, "needs_extra", None) is None:
            raise
        pytest.skip(f"policy '{policy.name}' needs the '{policy.needs_extra}' extra: {exc}")  # type: ignore[attr-defined]
    return sorted(result.records, key=lambda r: r.job_id)


def params(policy: BasePolicy) -> dict[str, object]:
    return {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy) if f.init}


# ----------------------------------------------------------------------------- checks
def check_default_constructible(name: str) -> None:
    policy = load(name)
    assert isinstance(policy, BasePolicy), f"'{name}' must subclass BasePolicy"
    assert type(policy).name == name, f"'{name}' class calls itself '{type(policy).name}'"
    assert dataclasses.is_dataclass(policy), f"'{name}' must be a dataclass of its parameters"
    repr(policy)


def check_params_round_trip(name: str) -> None:
    policy = load(name)
    values = params(policy)
    copy = dataclasses.replace(policy)
    assert type(copy) is type(policy) and params(copy) == values, \
        f"'{name}': dataclasses.replace changed a parameter; does __post_init__ alter fields?"
    rebuilt = make_policy(name, **values)
    assert params(rebuilt) == values, f"'{name}': make_policy(name, **params) changed a parameter"


def check_no_run_state_before_reset(name: str) -> None:
    policy = load(name)
    early = sorted(attr for attr in vars(policy) if attr.endswith("_") and not attr.startswith("__"))
    assert not early, f"'{name}' sets run state {early} before reset; build it in reset()"
    fresh = dataclasses.replace(policy)
    assert not [a for a in vars(fresh) if a.endswith("_") and not a.startswith("__")]


class _ViewGuard(PolicyWrapper):
    """Wraps a policy and fails if a ``schedule`` call changes what it was shown."""

    def __init__(self, inner: BasePolicy) -> None:
        super().__init__(inner)
        self.n_calls = 0

    @staticmethod
    def snapshot(view) -> tuple:  # type: ignore[no-untyped-def]
        def state(s):  # type: ignore[no-untyped-def]
            return (s.status, s.gpu_ids, s.iters_done, s.rate_iters_per_s, s.last_update,
                    s.attained_gpu_s, s.n_preemptions, s.version)
        return (list(view.pending), list(view.running),
                [view.owner_of(g) for g in range(view.topology.n_gpus)], view.n_free,
                [state(s) for s in view.pending.values()], [state(s) for s in view.running.values()])

    def schedule(self, view, now) -> Decisions:  # type: ignore[no-untyped-def]
        before = self.snapshot(view)
        decisions = self.inner.schedule(view, now)
        assert self.snapshot(view) == before, \
            f"'{self.name}' changed the view at t={now}; policies must only read it"
        self.n_calls += 1
        return decisions


def check_view_unchanged(name: str) -> None:
    guard = _ViewGuard(load(name))
    Simulator(CLUSTER, TRACE, guard, seed=0).run()  # type: ignore[arg-type]
    assert guard.n_calls > 0


def check_same_seed_same_records(name: str) -> None:
    first = records(load(name), seed=3)
    second = records(load(name), seed=3)
    assert first == second, f"'{name}': two runs with seed 3 differ; sort ids before iterating sets"


def check_reset_makes_it_fresh(name: str) -> None:
    policy = load(name)
    first = records(policy, seed=5)
    second = records(policy, seed=5)
    assert first == second, f"'{name}': a second run of the same object differs; reset() must rebuild all run state"


def check_pickles_mid_run(name: str) -> None:
    policy = load(name)
    sim = Simulator(CLUSTER, TRACE, policy, seed=0)
    sim.start()
    for _ in range(12):
        sim.step()
    restored = pickle.loads(pickle.dumps(policy))
    assert type(restored) is type(policy) and params(restored) == params(policy)
    assert sorted(vars(restored)) == sorted(vars(policy)), f"'{name}' lost run state in pickling"


def check_finishes_tiny_trace(name: str) -> None:
    done = records(load(name), jobs=TINY)
    assert [r.job_id for r in done] == ["a", "b", "c", "d"], f"'{name}' left jobs unfinished"
    for record in done:
        assert record.finish_time >= record.first_start >= record.submit_time
        assert record.run_time_s > 0.0 and record.gpu_s > 0.0


def check_adopts_a_running_cluster(name: str) -> None:
    """A fresh policy takes over mid-run, as after a restart of `rackwise serve`.

    It is reset on a view that already holds running and pending jobs, told
    of each of them as an arrival (what a driver loop that finds them does),
    and must then finish the trace with valid decisions only.
    """
    sim = Simulator(CLUSTER, TRACE, load(name), seed=0)
    sim.start()
    # Round-based policies start jobs only at their first round: step until some run.
    while sim.step() and not (sim.running and len(sim.records) >= 3):
        pass
    assert sim.running, "the trace should keep the cluster busy at this point"
    sim.hand_over(load(name), np.random.default_rng(2))
    while sim.step():
        pass
    assert len(sim.records) == len(TRACE), f"'{name}' lost jobs after taking over"


PolicyCheck = Callable[[str], None]
POLICY_CHECKS: list[PolicyCheck] = [
    check_default_constructible,
    check_params_round_trip,
    check_no_run_state_before_reset,
    check_view_unchanged,
    check_same_seed_same_records,
    check_reset_makes_it_fresh,
    check_pickles_mid_run,
    check_finishes_tiny_trace,
    check_adopts_a_running_cluster,
]


@pytest.mark.parametrize("check", POLICY_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", sorted(all_policies()))
def test_policy_conforms(name: str, check: PolicyCheck) -> None:
    check(name)


def test_known_policies_are_checked() -> None:
    names = set(all_policies())
    assert {"fifo", "sjf", "srtf", "tiresias"} <= names
