"""The simulator's log of running jobs that changed (`ClusterView.running_changes_since`).

Whatever a policy shown every decision would see change among the running
jobs (a new state object or a new `JobState.version`), the log names.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.cluster.topology import Topology, uniform_cluster
from rackwise.engine.view import ClusterView
from rackwise.perf.model import NetworkPerf
from rackwise.policies.base import BasePolicy, Decisions
from rackwise.policies.registry import policy_class
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job
from strategies import clusters_and_workloads


def _watched(name: str) -> type[BasePolicy]:
    """Policy ``name``, checking at each decision that the log names every running state that changed."""
    base: Any = policy_class(name)

    class Watched(base):  # type: ignore[misc, valid-type]
        def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
            super().reset(view, rng)
            self.mark_: tuple[int, int] | None = None
            self.last_: dict[str, tuple[object, int]] = {}
            self.logs_read_ = 0

        def schedule(self, view: ClusterView, now: float) -> Decisions:
            current = {job_id: (state, state.version) for job_id, state in view.running.items()}
            log = view.running_changes_since(self.mark_)
            if self.mark_ is not None:
                assert log is not None  # shown every decision of one view
                changed = {job_id for job_id, (state, version) in current.items()
                           if self.last_.get(job_id, (None, -1))[0] is not state
                           or self.last_[job_id][1] != version}
                assert changed <= set(log), f"at {now}: {sorted(changed - set(log))} changed unnamed"
                self.logs_read_ += 1
            mark = self.mark_ = view.change_mark
            assert view.running_changes_since((mark[0], mark[1] - 2)) is None  # a decision missed
            assert view.running_changes_since((mark[0] + 1, mark[1] - 1)) is None  # another view
            self.last_ = current
            return super().schedule(view, now)  # type: ignore[no-any-return]

    return Watched


@pytest.mark.parametrize("name", ["tiresias", "hadare", "asrpt"])
@settings(max_examples=25, deadline=None)
@given(case=clusters_and_workloads(max_jobs=15), seed=st.integers(0, 2**32 - 1))
def test_the_log_names_every_running_state_that_changed(name: str, case: tuple[Topology, list[Job]],
                                                         seed: int) -> None:
    """Under the network model, whose starts and finishes re-rate their neighbours;
    with preemptions (tiresias, asrpt) and forked copies (hadare)."""
    topology, jobs = case
    policy = _watched(name)()
    Simulator(topology, jobs, policy, perf=NetworkPerf(), seed=seed).run()
    assert policy.logs_read_ > 0 or len(jobs) == 1  # type: ignore[attr-defined]


def test_the_log_starts_again_after_each_decision() -> None:
    """a and b start together; at a's finish the log names their starts and first rates, and a's
    stop; at b's, b's new rate once alone (set after the decision at a's finish) and its stop."""
    topology = uniform_cluster(1, gpus_per_node=2)
    jobs = [Job("a", 0.0, 1, 10.0, model="resnet50"), Job("b", 0.0, 1, 100.0, model="resnet50")]
    logs: list[list[str] | None] = []

    class Logging(policy_class("fifo")):  # type: ignore[misc]
        def schedule(self, view: ClusterView, now: float) -> Decisions:
            mark = getattr(self, "mark_", None)
            log = view.running_changes_since(mark)
            logs.append(None if log is None else sorted(log))
            self.mark_ = view.change_mark
            return super().schedule(view, now)  # type: ignore[no-any-return]

    Simulator(topology, jobs, Logging(), perf=NetworkPerf(), seed=0).run()
    assert logs[0] is None  # no decision before the first
    assert logs == [None, ["a", "a", "a", "b", "b"], ["b", "b"]]
