"""The Kubernetes backend against an in-repo API server on loopback (fake_apiserver.py).

The backend talks to the fake through the official ``kubernetes`` client,
so these tests cover the real requests: selectors, bindings, deletions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

pytest.importorskip("kubernetes")

from fake_apiserver import FakeApiServer

from rackwise.backends.base import Outcome, Snapshot, serve
from rackwise.backends.kubernetes import KubernetesBackend
from rackwise.backends.kubernetes_api import KubeApi, KubeApiError
from rackwise.engine.seeding import policy_rng
from rackwise.engine.view import ClusterView
from rackwise.policies.base import BasePolicy, Decisions, Start
from rackwise.policies.registry import make_policy

POLL_S = 0.02


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def make_backend(apiserver: FakeApiServer) -> Iterator[Callable[..., KubernetesBackend]]:
    made: list[KubernetesBackend] = []

    def make(**kwargs: Any) -> KubernetesBackend:
        backend = KubernetesBackend(api=KubeApi(host=apiserver.url, timeout_s=5),
                                    poll_s=POLL_S, **kwargs)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def one_round(backend: KubernetesBackend, policy: BasePolicy) -> tuple[Snapshot, list[Outcome]]:
    """Observe, decide and apply once, as one turn of `serve` does."""
    snapshot = backend.observe()
    policy.reset(snapshot.view, policy_rng(0))
    decisions = policy.schedule(snapshot.view, snapshot.now)
    return snapshot, backend.apply(decisions, snapshot)


def bound_pods(server: FakeApiServer) -> list[str]:
    return [name for _, name, _ in server.bindings]


def test_views_count_gpus_of_other_pods_and_leave_out_cordoned_nodes(
        apiserver: FakeApiServer, make_backend: Callable[..., KubernetesBackend]) -> None:
    apiserver.add_node("n1", 4, zone="r1")
    apiserver.add_node("n2", 4, zone="r1")
    apiserver.add_node("n3", 4, zone="r2", unschedulable=True)
    apiserver.add_node("cpu", 0)
    apiserver.add_pod("web", 3, scheduler="default-scheduler", node="n1")
    apiserver.add_pod("old", 2, scheduler="default-scheduler", node="n2", phase="Succeeded")
    backend = make_backend()
    assert backend.node_names == ("n1", "n2", "n3")
    view = backend.observe().view
    assert [view.free_in_node(n) for n in range(3)] == [1, 4, 0]  # finished pods hold nothing
    assert view.owner_of(0) == "!pod:default/web" and view.owner_of(8) == "!down:n3"


def test_pods_are_bound_to_a_node_with_enough_gpus(
        apiserver: FakeApiServer, make_backend: Callable[..., KubernetesBackend]) -> None:
    apiserver.add_node("n1", 4)
    apiserver.add_node("n2", 4)
    apiserver.add_pod("web", 3, scheduler="default-scheduler", node="n1")
    apiserver.add_pod("train-0", 2, job="train", size=1)
    apiserver.add_pod("other", 2, scheduler="default-scheduler")  # not rackwise's: left alone
    backend = make_backend()
    _, outcomes = one_round(backend, make_policy("fifo"))
    assert outcomes == [Outcome("start", "default/train", True, nodes=("n2",))]
    assert apiserver.bindings == [("default", "train-0", "n2")]
    assert apiserver.node_of("other") is None
    running = backend.observe().view.running["default/train"]
    assert len(running.gpu_ids) == 2 and {backend.topology.gpu_node[g] for g in running.gpu_ids} == {1}


def test_a_gang_whose_pods_cannot_all_fit_is_not_bound_at_all(
        apiserver: FakeApiServer, make_backend: Callable[..., KubernetesBackend]) -> None:
    apiserver.add_node("n1", 4)
    apiserver.add_node("n2", 4)
    apiserver.add_pod("web", 2, scheduler="default-scheduler", node="n2")
    apiserver.add_pod("gang-0", 3, job="gang", size=2)
    apiserver.add_pod("gang-1", 3, job="gang", size=2)
    backend = make_backend()
    snapshot = backend.observe()
    assert snapshot.view.pending["default/gang"].job.n_gpus == 6 and snapshot.view.n_free == 6
    # Six free GPUs, four and two: a policy may pick them, but pods of three cannot use them.
    free = snapshot.view.free_gpu_ids(0) + snapshot.view.free_gpu_ids(1)
    [outcome] = backend.apply(Decisions(start=(Start("default/gang", tuple(free)),)), snapshot)
    assert not outcome.ok and "no pod was bound" in outcome.detail
    assert apiserver.bindings == []
    assert "default/gang" in backend.observe().view.pending  # still there for the next round


def test_pods_that_do_not_fill_the_chosen_counts_use_other_free_gpus_of_those_nodes(
        apiserver: FakeApiServer, make_backend: Callable[..., KubernetesBackend]) -> None:
    apiserver.add_node("n1", 4)
    apiserver.add_node("n2", 4)
    apiserver.add_node("n3", 4)
    apiserver.add_pod("first", 2, node="n1")
    apiserver.add_pod("gang-0", 2, job="gang", size=2)
    apiserver.add_pod("gang-1", 2, job="gang", size=2)
    backend = make_backend()
    snapshot = backend.observe()
    # Three GPUs on n2 and one on n3 cannot hold two pods of two; n2's fourth GPU can.
    gpus = tuple(snapshot.view.free_gpu_ids(1)[:3] + snapshot.view.free_gpu_ids(2)[:1])
    [outcome] = backend.apply(Decisions(start=(Start("default/gang", gpus),)), snapshot)
    assert outcome.ok and outcome.nodes == ("n2",)
    assert sorted(apiserver.bindings) == [("default", "gang-0", "n2"), ("default", "gang-1", "n2")]
    assert apiserver.violations == []
    view = backend.observe().view
    assert [view.free_in_node(n) for n in range(3)] == [2, 0, 4]


def test_a_refused_binding_unbinds_the_rest_of_the_gang(
        apiserver: FakeApiServer, make_backend: Callable[..., KubernetesBackend]) -> None:
    apiserver.add_node("n1", 8)
    apiserver.add_pod("gang-0", 4, job="gang", size=2)
    apiserver.add_pod("gang-1", 4, job="gang", size=2)
    apiserver.refuse.add(("default", "gang-1"))
    backend = make_backend()
    _, [outcome] = one_round(backend, make_policy("fifo"))
    assert not outcome.ok and "refusing to bind gang-1" in outcome.detail
    assert bound_pods(apiserver) == ["gang-0"] and apiserver.deletions == [("default", "gang-0")]
    assert apiserver.pod("gang-0") is None  # gone: no half-placed gang is left running
    snapshot = backend.observe()
    assert snapshot.n_waiting == 1 and not snapshot.view.pending and not snapshot.view.running


def test_a_job_waits_until_all_its_pods_exist(
        apiserver: FakeApiServer, make_backend: Callable[..., KubernetesBackend]) -> None:
    apiserver.add_node("n1", 8)
    apiserver.add_pod("gang-0", 2, job="gang", size=3)
    apiserver.add_pod("gang-1", 2, job="gang", size=3)
    backend = make_backend()
    snapshot, outcomes = one_round(backend, make_policy("fifo"))
    assert not snapshot.view.pending and snapshot.n_waiting == 1 and not snapshot.idle
    assert outcomes == [] and apiserver.bindings == []
    apiserver.add_pod("gang-2", 2, job="gang", size=3)
    snapshot, outcomes = one_round(backend, make_policy("fifo"))
    assert snapshot.view.pending["default/gang"].job.n_gpus == 6
    assert [o.ok for o in outcomes] == [True]
    assert sorted(bound_pods(apiserver)) == ["gang-0", "gang-1", "gang-2"]


def test_fifo_order_reaches_the_cluster(
        apiserver: FakeApiServer, make_backend: Callable[..., KubernetesBackend]) -> None:
    apiserver.add_node("n1", 4)
    apiserver.add_node("n2", 4)
    t = time.time() - 30
    apiserver.add_pod("big-0", 4, job="big", size=2, created=t + 2, run_s=0.2)
    apiserver.add_pod("big-1", 4, job="big", size=2, created=t + 2, run_s=0.2)
    apiserver.add_pod("first", 4, created=t, run_s=0.2)
    apiserver.add_pod("small", 2, created=t + 5, run_s=0.2)  # fits beside "first", but waits
    backend = make_backend()
    snapshot, outcomes = one_round(backend, make_policy("fifo"))
    assert list(snapshot.view.pending) == ["default/first", "default/big", "default/small"]
    assert [o.job_id for o in outcomes] == ["default/first"]
    result = serve(backend, make_policy("fifo"), poll_s=POLL_S)
    assert result.stopped_idle
    assert bound_pods(apiserver) == ["first", "big-0", "big-1", "small"]
    assert [r.job_id for r in result.records] == ["default/first", "default/big", "default/small"]
    assert apiserver.violations == []


class CapacityProbe:
    """A round observer that checks the API server's books after every round."""

    def __init__(self, server: FakeApiServer, capacity: dict[str, int]) -> None:
        self.server, self.capacity, self.rounds = server, capacity, 0
        self.over: list[str] = []

    def observe_round(self, snapshot: Snapshot, latency_s: float, decisions: Decisions,
                      outcomes: Sequence[Outcome]) -> None:
        self.rounds += 1
        for node, used in self.server.gpus_in_use().items():
            if used > self.capacity[node]:
                self.over.append(f"round {self.rounds}: {node} {used}/{self.capacity[node]}")


@pytest.mark.parametrize("name", ["fifo-backfill", "tiresias"])
def test_no_node_is_over_committed_across_rounds(
        name: str, apiserver: FakeApiServer, make_backend: Callable[..., KubernetesBackend]) -> None:
    capacity = {"n1": 4, "n2": 4, "n3": 8}
    for node, gpus in capacity.items():
        apiserver.add_node(node, gpus, zone="r1" if node != "n3" else "r2")
    apiserver.add_pod("web", 1, scheduler="default-scheduler", node="n1")
    shapes = [(1, 2), (2, 2), (1, 4), (2, 4), (1, 1), (3, 1), (1, 8), (2, 1), (1, 3), (4, 2)]
    for index, (n_pods, gpus) in enumerate(shapes):
        for pod in range(n_pods):
            apiserver.add_pod(f"j{index}-{pod}", gpus, job=f"j{index}", size=n_pods,
                              run_s=0.05 + 0.03 * (index % 4), recreate=True)
    probe = CapacityProbe(apiserver, capacity)
    backend = make_backend()
    result = serve(backend, make_policy(name), poll_s=POLL_S, observers=[probe],
                   should_stop=lambda: probe.rounds > 2000)
    assert result.stopped_idle
    assert sorted(r.job_id for r in result.records) == sorted(f"default/j{i}" for i in range(10))
    assert probe.over == [] and apiserver.violations == []
    assert probe.rounds > 3


@dataclass(kw_only=True)
class HighFirst(BasePolicy):
    """Starts in queue order; a job named ``*high`` preempts every other job it needs."""

    name: ClassVar[str] = "high-first"
    preempts: ClassVar[bool] = True

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        scratch = view.tentative()
        starts, preempt = [], []
        for state in view.pending.values():
            if state.job_id.endswith("high") and scratch.n_free < state.n_gpus:
                for victim in view.running.values():
                    if not victim.job_id.endswith("high"):
                        preempt.append(victim.job_id)
                        scratch.give(victim.gpu_ids)
            free = [g for n in range(view.topology.n_nodes) for g in scratch.free_gpu_ids(n)]
            if len(free) >= state.n_gpus:
                starts.append(Start(state.job_id, tuple(free[:state.n_gpus])))
                scratch.take(free[:state.n_gpus])
        return Decisions(start=tuple(starts), preempt=tuple(preempt))


def test_preemption_deletes_the_pods_and_the_recreated_job_runs_again(
        make_backend: Callable[..., KubernetesBackend]) -> None:
    with FakeApiServer(delete_grace_s=0.6) as server:
        server.add_node("n1", 4)
        server.add_pod("low-0", 4, job="low", size=1, run_s=1.0, recreate=True)
        backend = KubernetesBackend(api=KubeApi(host=server.url, timeout_s=5), poll_s=POLL_S)
        try:
            policy = HighFirst()
            snapshot = backend.observe()
            policy.reset(snapshot.view, policy_rng(0))
            assert [o.ok for o in backend.apply(policy.schedule(snapshot.view, 0.0), snapshot)] \
                == [True]
            server.add_pod("high-0", 4, job="high", size=1, run_s=0.2)
            snapshot = backend.observe()
            outcomes = backend.apply(policy.schedule(snapshot.view, snapshot.now), snapshot)
            assert [(o.action, o.job_id, o.ok) for o in outcomes] == [
                ("preempt", "default/low", True), ("start", "default/high", False)]
            assert "preempted job to terminate" in outcomes[1].detail
            assert server.deletions == [("default", "low-0")]
            # While the deleted pod terminates, the victim keeps its GPUs in the view.
            view = backend.observe().view
            assert view.running["default/low"].n_preemptions == 1 and view.n_free == 0
            result = serve(backend, policy, poll_s=POLL_S)
        finally:
            backend.close()
        assert result.stopped_idle and server.violations == []
        assert bound_pods(server) == ["low-0", "high-0", "low-0-r1"]
        records = {r.job_id: r for r in result.records}
        assert records["default/low"].n_preemptions == 1
        assert records["default/high"].n_preemptions == 0
        assert records["default/high"].finish_time < records["default/low"].finish_time


def test_serve_finishes_pods_created_over_time(
        apiserver: FakeApiServer, make_backend: Callable[..., KubernetesBackend]) -> None:
    """A small replay: the test submits pods on schedule and completes them after their run."""
    apiserver.add_node("n1", 4, zone="r1")
    apiserver.add_node("n2", 4, zone="r2")
    # (submit after s, pods, GPUs per pod, run s)
    trace = [(0.0, 1, 2, 0.15), (0.05, 2, 2, 0.1), (0.1, 1, 4, 0.2), (0.2, 2, 4, 0.1),
             (0.25, 1, 1, 0.05), (0.4, 3, 1, 0.1), (0.5, 1, 3, 0.1), (0.6, 1, 2, 0.05)]
    start = time.monotonic()
    submitted: list[int] = []
    bound_at: dict[str, float] = {}

    def submit_and_complete() -> None:
        elapsed = time.monotonic() - start
        for index, (at, n_pods, gpus, _) in enumerate(trace):
            if at <= elapsed and index not in submitted:
                submitted.append(index)
                for pod in range(n_pods):
                    apiserver.add_pod(f"r{index}-{pod}", gpus, job=f"r{index}", size=n_pods)
        for _, name, _ in apiserver.bindings:
            bound_at.setdefault(name, elapsed)
            run_s = trace[int(name[1:].split("-")[0])][3]
            pod = apiserver.pod(name)
            if pod is not None and pod["status"]["phase"] == "Running" \
                    and elapsed >= bound_at[name] + run_s:
                apiserver.set_phase(name, "Succeeded")

    def sleep(seconds: float) -> None:
        time.sleep(seconds)
        submit_and_complete()

    submit_and_complete()
    backend = make_backend(sleep=sleep)
    deadline = time.monotonic() + 30
    result = serve(backend, make_policy("fifo"), poll_s=POLL_S, exit_when_idle=False,
                   should_stop=lambda: len(backend.records()) == len(trace)
                   or time.monotonic() > deadline)
    assert sorted(r.job_id for r in result.records) == sorted(f"default/r{i}" for i in range(8))
    for record in result.records:
        assert record.first_start >= record.submit_time - 1.0  # creation stamps are whole seconds
        assert record.finish_time > record.first_start
    assert apiserver.violations == []
    gangs = {name.split("-")[0] for name in bound_pods(apiserver)}
    assert len(bound_pods(apiserver)) == sum(n for _, n, _, _ in trace) and len(gangs) == 8


def test_an_unreachable_api_server_is_a_backend_error() -> None:
    with FakeApiServer() as server:
        url = server.url
    api = KubeApi(host=url, timeout_s=1)
    try:
        with pytest.raises(KubeApiError, match="cannot list nodes"):
            api.nodes()
    finally:
        api.close()


class Crash(BaseException):
    """Stands in for a SIGKILL of serve: nothing below it catches it."""


def test_a_serve_killed_between_the_bindings_of_a_gang_is_recovered_by_the_next() -> None:
    """The first serve dies after binding one pod of a two-pod gang. A new serve, with a
    new backend (nothing remembered), finds the gang half bound, deletes the bound pod so
    its controller recreates it, and places the gang whole; no node is over-committed and
    every job finishes once."""
    with FakeApiServer(delete_grace_s=0.1) as server:
        server.add_node("n1", 4)
        server.add_node("n2", 4)
        for index in range(2):
            server.add_pod(f"g-{index}", 2, job="g", size=2, run_s=0.3, recreate=True)
        server.add_pod("s-0", 4, job="s", size=1, run_s=0.3)
        first = KubernetesBackend(api=KubeApi(host=server.url, timeout_s=5), poll_s=POLL_S)
        bind = first.api.bind

        def bind_then_die(namespace: str, name: str, node: str) -> None:
            if server.bindings:
                raise Crash
            bind(namespace, name, node)

        first.api.bind = bind_then_die  # type: ignore[method-assign]
        try:
            with pytest.raises(Crash):
                serve(first, make_policy("fifo"), poll_s=POLL_S)
        finally:
            first.close()
        assert bound_pods(server) == ["g-0"]
        second = KubernetesBackend(api=KubeApi(host=server.url, timeout_s=5), poll_s=POLL_S)
        deadline = time.monotonic() + 30
        try:
            result = serve(second, make_policy("fifo"), poll_s=POLL_S,
                           should_stop=lambda: time.monotonic() > deadline)
        finally:
            second.close()
        assert result.stopped_idle and server.violations == []
        assert server.deletions == [("default", "g-0")]
        assert sorted(bound_pods(server)) == ["g-0", "g-0-r1", "g-1", "s-0"]
        records = {r.job_id: r for r in result.records}
        assert sorted(records) == ["default/g", "default/s"]
        assert records["default/g"].n_preemptions == 1
