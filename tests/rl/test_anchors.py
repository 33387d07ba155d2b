"""Fixed anchor rules (the placement baselines) and the ``marl`` policy's ``placement`` parameter."""

from __future__ import annotations

import numpy as np
import pytest

from rackwise.cluster.allocation import Allocation
from rackwise.cluster.topology import uniform_cluster
from rackwise.errors import UnknownNameError
from rackwise.policies.parts.marl.anchors import ANCHOR_RULES, anchor_action, greedy_action
from rackwise.policies.parts.marl.features import GraphIndex, Placed, observation
from rackwise.workload.job import Job


def _observe(n_gpus: int) -> dict[str, np.ndarray]:
    """Two racks of two 4-GPU servers; server 0 has 1 free GPU, server 1 has 2, servers 2-3 are empty."""
    topology = uniform_cluster(4, 4, 2)
    allocation = Allocation(topology)
    allocation.allocate("a", (0, 1, 2))
    allocation.allocate("b", (4, 5))
    placed = [Placed(Job("a", 0.0, 3, 100.0), (0, 1, 2)), Placed(Job("b", 0.0, 2, 100.0), (4, 5))]
    head = Job("h", 0.0, n_gpus, 100.0)
    return observation(allocation, placed, [[head]], 0, now=0.0, clock=0.0,
                       index=GraphIndex.of(topology), predictor=None, wait_allowed=False)


@pytest.mark.parametrize(("n_gpus", "expected"), [
    (1, {"first-fit": 0, "spread": 2, "consolidated": 0}),
    (2, {"first-fit": 1, "spread": 2, "consolidated": 1}),
    (3, {"first-fit": 2, "spread": 2, "consolidated": 2}),
])
def test_rules_pick_their_server(n_gpus: int, expected: dict[str, int]) -> None:
    obs = _observe(n_gpus)
    rng = np.random.default_rng(0)
    assert {rule: anchor_action(rule, obs, rng) for rule in expected} == expected


def test_consolidated_keeps_a_wide_job_in_one_rack() -> None:
    # 6 GPUs: no server holds it; rack 1 (servers 2-3) does, rack 0 does not
    obs = _observe(6)
    assert anchor_action("consolidated", obs, np.random.default_rng(0)) in (2, 3)
    assert obs["candidate"][anchor_action("consolidated", obs, np.random.default_rng(0)), 3] == 0.0


def test_greedy_breaks_consolidation_ties_by_predicted_interference() -> None:
    cand = np.zeros((4, 6), dtype=np.float32)
    cand[:, 0] = 1.0
    cand[:, 1] = [0.5, 0.5, 0.75, 0.25]  # free fraction left: server 3 is the tightest
    cand[:, 4] = [0.8, 0.0, 0.0, 0.8]  # the job would slow down on servers 0 and 3
    obs = {"candidate": cand, "server": np.zeros((4, 1)), "mask": np.asarray([1, 1, 1, 0, 0], dtype=np.int8)}
    # server 3 is not allowed: of the equally tight servers 0 and 1, the one without interference
    assert greedy_action(obs) == 1
    assert anchor_action("consolidated", obs, np.random.default_rng(0)) == 0
    obs["mask"][3] = 1  # the tightest fit comes before interference
    assert greedy_action(obs) == 3


def test_random_stays_in_the_mask_and_every_rule_waits_when_nothing_is_allowed() -> None:
    obs = _observe(1)
    allowed = set(np.flatnonzero(obs["mask"][:-1]).tolist())
    rng = np.random.default_rng(3)
    picks = {anchor_action("random", obs, rng) for _ in range(50)}
    assert picks <= allowed and len(picks) > 1
    closed = {"candidate": np.zeros((2, 6), dtype=np.float32), "mask": np.asarray([0, 0, 1], dtype=np.int8)}
    assert {anchor_action(rule, closed, rng) for rule in ANCHOR_RULES} == {2}


def test_unknown_rule_is_named() -> None:
    with pytest.raises(UnknownNameError, match="spread"):
        anchor_action("sprad", _observe(1), np.random.default_rng(0))


torch = pytest.importorskip("torch", reason="needs the rl extra: pip install 'rackwise[rl]'")

from rackwise.policies.registry import make_policy  # noqa: E402
from rackwise.sim.engine import simulate  # noqa: E402

from .helpers import Crowded  # noqa: E402


def test_marl_runs_each_rule_under_the_same_agents() -> None:
    cluster = uniform_cluster(4, 4, 2)
    jobs = [Job(f"j{i}", float(i), 1, 400.0, group=f"vc{i % 3}") for i in range(4)]
    jct = {}
    for rule in ("learned", "first-fit", "spread"):
        done = simulate(cluster, jobs, make_policy("marl", placement=rule), perf=Crowded(), seed=0)
        assert len(done.records) == len(jobs)
        jct[rule] = sum(r.jct_s for r in done.records)
    # packing puts all four on one server, which this model slows; spreading gives each its own
    assert jct["spread"] == pytest.approx(4 * 400.0)
    assert jct["first-fit"] > 1.5 * jct["spread"]
    with pytest.raises(UnknownNameError, match="first-fit"):
        make_policy("marl", placement="frist-fit")


def test_fewest_gpus_order_starts_the_narrow_jobs_first() -> None:
    cluster = uniform_cluster(1, 4, 1)
    widths = {"a": 4, "b": 4, "c": 1, "d": 2}
    jobs = [Job(name, float(i), w, 100.0, group="vc") for i, (name, w) in enumerate(widths.items())]
    starts = {}
    for order in ("fifo", "fewest-gpus"):
        done = simulate(cluster, jobs, make_policy("marl", order=order), seed=0)
        starts[order] = {r.job_id: r.first_start for r in done.records}
    assert starts["fifo"] == {"a": 0.0, "b": 100.0, "c": 200.0, "d": 200.0}
    assert starts["fewest-gpus"] == {"a": 0.0, "c": 100.0, "d": 100.0, "b": 200.0}
    with pytest.raises(UnknownNameError, match="fewest-gpus"):
        make_policy("marl", order="fewest")
