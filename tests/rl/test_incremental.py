"""Features kept up to date between decisions equal those worked out from scratch, bit for bit; the actor's
logits match the network's to float32 rounding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the rl extra: pip install 'rackwise[rl]'")

from rackwise.cluster.allocation import Allocation  # noqa: E402
from rackwise.cluster.topology import Node, Topology, uniform_cluster  # noqa: E402
from rackwise.perf.base import IdealPerf  # noqa: E402
from rackwise.policies.marl import Marl  # noqa: E402
from rackwise.policies.parts.marl.checkpoint import load  # noqa: E402
from rackwise.policies.parts.marl.encoder import stack_obs, topology_index  # noqa: E402
from rackwise.policies.parts.marl.features import (  # noqa: E402
    MODELS,
    GraphFeatures,
    GraphIndex,
    Placed,
    candidates,
    graph_features,
    observation,
    residents,
)
from rackwise.policies.parts.marl.inference import ActorLayers, CachedActor  # noqa: E402
from rackwise.policies.parts.marl.placement import feasible_servers_one, place_anchored  # noqa: E402
from rackwise.policies.parts.marl.tracking import TrackedCluster  # noqa: E402
from rackwise.policies.parts.placement import random_gpus  # noqa: E402
from rackwise.sim.engine import simulate  # noqa: E402
from rackwise.workload.job import Job  # noqa: E402

CLUSTER = uniform_cluster(256, 4, 4)  # 64 racks x 4 servers x 4 GPUs: a start recomputes a few of them
WIDTHS = (1, 1, 2, 3, 4, 6, 8, 12, 16)


def _job(i: int, rng: np.random.Generator) -> Job:
    model = MODELS[int(rng.integers(len(MODELS)))] if rng.random() < 0.9 else None
    return Job(f"j{i}", 0.0, int(rng.choice(WIDTHS)), 10.0, model=model)


def _start(alloc: Allocation, job: Job, rng: np.random.Generator) -> Placed | None:
    gpus = random_gpus(alloc, job.n_gpus, rng)  # scattered: jobs across servers and racks too
    if gpus is None:
        return None
    alloc.allocate(job.job_id, gpus)
    return Placed(job, gpus)


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), key


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graph_features_after_starts_equal_a_rebuild(seed: int) -> None:
    rng = np.random.default_rng(seed)
    index = GraphIndex.of(CLUSTER)
    alloc = Allocation(CLUSTER)
    placed = [p for i in range(20) if (p := _start(alloc, _job(i, rng), rng)) is not None]
    graph = GraphFeatures(alloc, placed, index)
    _same(graph.arrays(), graph_features(alloc, placed, index))
    n_added = 0
    for i in range(20, 300):
        item = _start(alloc, _job(i, rng), rng)
        if item is None:
            continue
        placed.append(item)
        graph.add(item, alloc)
        n_added += 1
        _same(graph.arrays(), graph_features(alloc, placed, index))
    assert n_added > 10 and alloc.n_free < CLUSTER.n_gpus // 4


def test_graph_features_of_an_idle_cluster() -> None:
    alloc = Allocation(CLUSTER)
    features = graph_features(alloc, [], GraphIndex.of(CLUSTER))
    assert not features["gpu"].any() and np.all(features["server"][:, 0] == 1.0)
    assert np.all(features["rack"][:, 2] == 1.0)


@pytest.fixture
def one_thread():  # type: ignore[no-untyped-def]
    """torch and numpy's BLAS on one thread, as the policy runs them by default."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1, user_api="blas"):
        yield
    torch.set_num_threads(before)


def _grid_action(logits: np.ndarray) -> int:
    """`Marl.decide`'s choice: the argmax on the 1/256 grid."""
    return int(np.round(logits * 256.0).argmax())


def _assert_like_the_network(logits: np.ndarray, model: object, obs: dict[str, np.ndarray],
                             topology: object) -> None:
    """The numpy logits are the network's, to float32 rounding: -inf at the same places."""
    with torch.no_grad():
        full, _ = model.logits(stack_obs([obs]), *topology_index(topology))  # type: ignore[attr-defined]
    expected = full[0].numpy()
    finite = np.isfinite(expected)
    assert np.array_equal(np.isfinite(logits), finite)
    assert np.all(logits[~finite] == -np.inf)
    np.testing.assert_allclose(logits[finite], expected[finite], rtol=0, atol=2e-5)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.usefixtures("one_thread")
def test_cached_actor_equals_the_network_and_a_fresh_actor(seed: int) -> None:
    """Jobs start and finish between observations; the logits kept up to date match the torch
    network's and those of an actor that sees the observation first, and choose as they do."""
    rng = np.random.default_rng(seed)
    checkpoint = load(None)
    model = checkpoint.actor_critic
    n_agents = checkpoint.config.n_agents
    index = GraphIndex.of(CLUSTER)
    actor = CachedActor(ActorLayers.of(_arrays(model)), CLUSTER)
    alloc = Allocation(CLUSTER)
    placed: list[Placed] = []
    n_compared = n_choices = 0
    for i in range(300):
        if placed and rng.random() < 0.25:  # a job finishes
            done = placed.pop(int(rng.integers(len(placed))))
            alloc.release(done.gpu_ids)
        elif (item := _start(alloc, _job(i, rng), rng)) is not None:
            placed.append(item)
        head = Job(f"h{i}", 0.0, int(rng.choice(WIDTHS[:6])), 10.0, model=MODELS[i % len(MODELS)])
        queues: list[list[Job]] = [[] for _ in range(n_agents)]
        queues[i % n_agents].append(head)
        obs = observation(alloc, placed, queues, i % n_agents, now=0.0, clock=0.0, index=index,
                          predictor=None, wait_allowed=False)
        kept = actor.logits(obs)
        _assert_like_the_network(kept, model, obs, CLUSTER)
        fresh = CachedActor(ActorLayers.of(_arrays(model)), CLUSTER).logits(obs)
        np.testing.assert_allclose(kept, fresh, rtol=0, atol=2e-6)
        assert _grid_action(kept) == _grid_action(fresh)
        n_compared += 1
        n_choices += int(np.isfinite(kept[:-1]).sum() > 1)
    assert n_compared == 300 and n_choices > 100  # most observations leave the actor a real choice


@pytest.mark.usefixtures("one_thread")
def test_actor_on_racks_out_of_order() -> None:
    """Servers of one rack need not be neighbours, nor have as many GPUs as each other."""
    nodes, first = [], 0
    for node_id, (rack, n_gpus) in enumerate([(0, 4), (1, 2), (0, 8), (2, 4), (1, 4), (0, 2)]):
        nodes.append(Node(node_id, rack, "V100", n_gpus, first))
        first += n_gpus
    topology = Topology(tuple(nodes))
    checkpoint = load(None)
    rng = np.random.default_rng(3)
    alloc = Allocation(topology)
    placed = [p for i in range(4) if (p := _start(alloc, Job(f"j{i}", 0.0, 2, 10.0, model=MODELS[i]), rng))]
    queues: list[list[Job]] = [[] for _ in range(checkpoint.config.n_agents)]
    queues[0].append(Job("h", 0.0, 2, 10.0, model=MODELS[0]))
    obs = observation(alloc, placed, queues, 0, now=0.0, clock=0.0, index=GraphIndex.of(topology),
                      predictor=None, wait_allowed=False)
    _assert_like_the_network(CachedActor(ActorLayers.of(_arrays(checkpoint.actor_critic)), topology).logits(obs),
                             checkpoint.actor_critic, obs, topology)


def _candidates_one_by_one(free: Allocation, job: Job, index: GraphIndex) -> tuple[np.ndarray, np.ndarray]:
    """The candidate features of `candidates` (no predictor), every anchor placed in turn."""
    n_servers = CLUSTER.n_nodes
    feats = np.zeros((n_servers, 6), dtype=np.float32)
    mask = np.zeros(n_servers, dtype=bool)
    min_servers = max(1, -(-job.n_gpus // CLUSTER.max_gpus_per_node))
    for s in range(n_servers):
        ids = place_anchored(free, job.n_gpus, s)
        if not feasible_servers_one(free, job.n_gpus, s) or ids is None:
            continue
        mask[s] = True
        used = np.unique(index.gpu_server[np.asarray(ids)])
        feats[s, 0] = 1.0
        feats[s, 1] = (free.free_in_node(s) - sum(1 for g in ids if index.gpu_server[g] == s)) \
            / index.server_size[s]
        feats[s, 2] = min(len(used) / min_servers, 4.0) / 4.0
        feats[s, 3] = float(len(np.unique(index.server_rack[used])) > 1)
    return feats, mask


@pytest.mark.parametrize("seed", [0, 1])
def test_candidates_equal_placing_each_anchor(seed: int) -> None:
    rng = np.random.default_rng(seed)
    index = GraphIndex.of(CLUSTER)
    alloc = Allocation(CLUSTER)
    n_checked = 0
    for i in range(120):
        _start(alloc, _job(i, rng), rng)
        if i % 10:
            continue
        for width in (1, 3, 4, 6, 16, 40):
            job = Job(f"h{i}-{width}", 0.0, width, 10.0)
            feats, mask = candidates(alloc, job, [[] for _ in range(CLUSTER.n_nodes)], index, None)
            want_feats, want_mask = _candidates_one_by_one(alloc, job, index)
            assert np.array_equal(mask, want_mask) and np.array_equal(feats, want_feats)
            n_checked += int(mask.any())
    assert n_checked > 30


@dataclass
class _Running:
    job: Job
    gpu_ids: tuple[int, ...]


@pytest.mark.parametrize("marked", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tracked_cluster_equals_a_rebuild_at_every_call(seed: int, marked: bool) -> None:
    """Jobs finish and start between calls, and start within them (tentatively). ``marked``:
    each sync is given the view's start mark, which counts every start; a call after which
    only the jobs it added started takes the path that skips the check."""
    rng = np.random.default_rng(seed)
    index = GraphIndex.of(CLUSTER)
    alloc = Allocation(CLUSTER)
    running: dict[str, _Running] = {}
    tracked = TrackedCluster(index)
    n_job = n_starts = 0
    unknown_starts = {False: 0, True: 0}  # syncs by whether a start unknown to the tracker came before
    for _ in range(60):
        for job_id in [j for j in running if rng.random() < 0.2]:  # finish between calls
            alloc.release(running.pop(job_id).gpu_ids)
        unknown = False
        for _ in range(int(rng.integers(0, 3))):  # started behind the tracker's back
            n_job += 1
            if (item := _start(alloc, _job(n_job, rng), rng)) is not None:
                running[item.job.job_id] = _Running(item.job, item.gpu_ids)
                n_starts += 1
                unknown = True
        unknown_starts[unknown] += 1
        tracked.sync(running, alloc, (7, n_starts) if marked else None)
        for _ in range(int(rng.integers(0, 4))):  # started within this call
            n_job += 1
            if (item := _start(alloc, _job(n_job, rng), rng)) is not None:
                tracked.add(item, alloc)
                running[item.job.job_id] = _Running(item.job, item.gpu_ids)
                n_starts += 1
        _same_as_rebuilt(tracked, running, alloc)
    assert n_job > 60 and unknown_starts[False] > 10 and unknown_starts[True] > 10


def _same_as_rebuilt(tracked: TrackedCluster, running: dict[str, _Running], alloc: Allocation) -> None:
    placed = [Placed(r.job, r.gpu_ids) for r in running.values()]
    assert list(tracked.known) == list(running)
    assert tracked.graph is not None
    _same(tracked.graph.arrays(), graph_features(alloc, placed, tracked.index))
    rebuilt = residents(placed, tracked.index)
    assert [[(p.job.job_id, share) for p, share in row] for row in tracked.on_server] == \
        [[(p.job.job_id, share) for p, share in row] for row in rebuilt]


def test_tracked_cluster_rebuilds_when_a_job_comes_before_known_ones() -> None:
    rng = np.random.default_rng(0)
    alloc = Allocation(CLUSTER)
    items = [item for i in range(30) if (item := _start(alloc, _job(i, rng), rng)) is not None]
    tracked = TrackedCluster(GraphIndex.of(CLUSTER))
    tracked.sync({p.job.job_id: _Running(p.job, p.gpu_ids) for p in items[1:]}, alloc)
    running = {p.job.job_id: _Running(p.job, p.gpu_ids) for p in items}  # items[0] is now first
    tracked.sync(running, alloc)
    _same_as_rebuilt(tracked, running, alloc)


@pytest.mark.parametrize(("which", "elsewhere"), [(3, True), (-1, True), (3, False)])
def test_tracked_cluster_follows_a_job_that_ran_again(which: int, elsewhere: bool) -> None:
    """No job is new by id, but one stopped and started again (now last in start order):
    on other GPUs, or on the same ones (the same tuple)."""
    rng = np.random.default_rng(1)
    alloc = Allocation(CLUSTER)
    items = [item for i in range(30) if (item := _start(alloc, _job(i, rng), rng)) is not None]
    running = {p.job.job_id: _Running(p.job, p.gpu_ids) for p in items}
    tracked = TrackedCluster(GraphIndex.of(CLUSTER))
    tracked.sync(running, alloc)
    again = items[which]
    alloc.release(again.gpu_ids)
    del running[again.job.job_id]
    gpus = again.gpu_ids
    if elsewhere:
        restarted = _start(alloc, again.job, rng)
        assert restarted is not None and restarted.gpu_ids != gpus
        gpus = restarted.gpu_ids
    else:
        alloc.allocate(again.job.job_id, gpus)
    running[again.job.job_id] = _Running(again.job, gpus)
    tracked.sync(running, alloc)
    _same_as_rebuilt(tracked, running, alloc)
    assert tracked.known[again.job.job_id].gpu_ids == gpus


def test_tracked_cluster_follows_two_jobs_on_the_same_gpus_changing_places() -> None:
    # Partners sharing their GPUs (the same tuple) that swap places in start order: only
    # the order tells the new state from the old.
    rng = np.random.default_rng(2)
    alloc = Allocation(CLUSTER)
    items = [item for i in range(10) if (item := _start(alloc, _job(i, rng), rng)) is not None]
    partner = _Running(_job(99, rng), items[0].gpu_ids)
    running = {items[0].job.job_id: _Running(items[0].job, items[0].gpu_ids), "j99": partner}
    running.update((p.job.job_id, _Running(p.job, p.gpu_ids)) for p in items[1:])
    tracked = TrackedCluster(GraphIndex.of(CLUSTER))
    tracked.sync(running, alloc)
    swapped = {"j99": partner, **running}
    tracked.sync(swapped, alloc)
    _same_as_rebuilt(tracked, swapped, alloc)


class _CheckedMarl(Marl):
    """Checks after every call that the GPUs asked for per queue match the queues."""

    n_checked = 0

    def schedule(self, view, now):  # type: ignore[no-untyped-def]
        decisions = super().schedule(view, now)
        assert self.asked_ == [sum(job.n_gpus for job in queue) for queue in self.queues_]
        _CheckedMarl.n_checked += any(self.queues_)
        return decisions


def test_gpus_asked_per_queue_follow_the_queues() -> None:
    rng = np.random.default_rng(0)
    jobs = [Job(f"j{i}", 5.0 * i, int(rng.choice(WIDTHS[:7])), 200.0 + 10 * i, group=f"g{i % 5}")
            for i in range(80)]
    result = simulate(uniform_cluster(8, 4, 4), jobs, _CheckedMarl(), perf=IdealPerf(), seed=0)
    assert len(result.records) == len(jobs) and _CheckedMarl.n_checked > 10


def _arrays(model: Any) -> dict[str, np.ndarray]:
    return {name: value.numpy() for name, value in model.state_dict().items()}
