"""Every registered policy against the policy contract (`rackwise.testing.check_policy`).

Each (policy, check) pair is its own test case, so a policy added to the
registry later is checked with no edit here. A policy whose optional extra
is not installed is skipped, naming the extra. Deliberately broken toy
policies show that each check catches what it is meant to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from rackwise.engine.view import ClusterView
from rackwise.errors import MissingExtraError
from rackwise.policies.base import BasePolicy, Decisions, Start
from rackwise.policies.fifo import Fifo
from rackwise.policies.registry import all_policies
from rackwise.testing import POLICY_CHECKS, PolicyCheckError, check_policy
from rackwise.testing.policy_checks import PolicyCheck, subject_of


@pytest.mark.parametrize("check", POLICY_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", sorted(all_policies()))
def test_policy_conforms(name: str, check: PolicyCheck) -> None:
    try:
        check(subject_of(name))
    except MissingExtraError as exc:
        pytest.skip(f"policy '{name}' needs an optional extra: {exc}")


def test_known_policies_are_checked() -> None:
    assert {"fifo", "sjf", "srtf", "tiresias", "dally", "hadar", "asrpt", "marl"} <= set(all_policies())


# ------------------------------------------------------------- broken policies
@dataclass(kw_only=True)
class EagerState(Fifo):
    """Builds run state at construction."""

    name: ClassVar[str] = "eager-state"

    def __post_init__(self) -> None:
        self.queue_: list[str] = []


@dataclass(kw_only=True)
class ViewWriter(Fifo):
    """Marks the first pending job as preempted once, in the view it was shown."""

    name: ClassVar[str] = "view-writer"

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        for state in view.pending.values():
            state.n_preemptions += 1
            break
        return super().schedule(view, now)


@dataclass(kw_only=True)
class SecretPreempter(Fifo):
    """Preempts every running job once, without declaring it."""

    name: ClassVar[str] = "secret-preempter"

    def reset(self, view: ClusterView, rng: object) -> None:  # type: ignore[override]
        super().reset(view, rng)  # type: ignore[arg-type]
        self.preempted_: set[str] = set()

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        victims = tuple(j for j in sorted(view.running) if j not in self.preempted_)
        if victims:
            self.preempted_.update(victims)
            return Decisions(preempt=victims, wake_at=now + 1.0)
        return super().schedule(view, now)


@dataclass(kw_only=True)
class Forgetful(Fifo):
    """Keeps a counter across runs (reset does not rebuild it), and lets it change its order."""

    name: ClassVar[str] = "forgetful"
    runs: ClassVar[list[int]] = [0]

    def reset(self, view: ClusterView, rng: object) -> None:  # type: ignore[override]
        super().reset(view, rng)  # type: ignore[arg-type]
        Forgetful.runs[0] += 1

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        if Forgetful.runs[0] % 2 == 0 or not view.pending:
            return super().schedule(view, now)
        state = list(view.pending.values())[-1]  # odd runs start the newest job first
        free = [g for g in range(view.topology.n_gpus) if view.owner_of(g) is None]
        if len(free) >= state.n_gpus:
            return Decisions(start=(Start(state.job_id, tuple(free[:state.n_gpus])),))
        return super().schedule(view, now)


@dataclass(kw_only=True)
class Unpicklable(Fifo):
    """Holds a lambda in its run state."""

    name: ClassVar[str] = "unpicklable"

    def reset(self, view: ClusterView, rng: object) -> None:  # type: ignore[override]
        super().reset(view, rng)  # type: ignore[arg-type]
        self.key_ = lambda job_id: job_id


class NotADataclass(BasePolicy):
    name: ClassVar[str] = "not-a-dataclass"

    def __init__(self) -> None:
        pass

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return Decisions()


@pytest.mark.parametrize(("policy", "rule"), [
    (NotADataclass, "must be a dataclass"),
    (EagerState, "sets run state"),
    (ViewWriter, "changed the view"),
    (SecretPreempter, "do not declare preempts"),
    (Forgetful, "differ"),
    (Unpicklable, "does not pickle mid-run"),
])
def test_each_broken_policy_is_caught_by_its_check(policy: type, rule: str) -> None:
    with pytest.raises(PolicyCheckError, match=rule):
        check_policy(policy)


def test_a_sound_policy_passes_every_check_as_class_instance_and_name() -> None:
    check_policy(Fifo)
    check_policy(Fifo())
    check_policy("fifo")
