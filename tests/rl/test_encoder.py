"""The hierarchical GNN: shapes, permutation invariance, masks, size-agnostic weights."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the rl extra: pip install 'rackwise[rl]'")

from rackwise.cluster.topology import uniform_cluster  # noqa: E402
from rackwise.policies.parts.marl.encoder import ActorCritic, stack_obs, topology_index  # noqa: E402
from rackwise.policies.parts.marl.features import GraphIndex, Placed, observation  # noqa: E402
from rackwise.workload.job import Job  # noqa: E402

CLUSTER = uniform_cluster(8, 4, 4)  # 2 racks x 4 servers x 4 GPUs


def _observation(cluster=CLUSTER, n_agents: int = 2):  # type: ignore[no-untyped-def]
    from rackwise.cluster.allocation import Allocation

    alloc = Allocation(cluster)
    placed = []
    for i, (gpus, model) in enumerate([((0, 1), "ResNet-50 (batch size 64)"), ((5,), "A3C"),
                                       ((9, 10, 11), "LM (batch size 20)"), ((20,), None)]):
        job = Job(f"r{i}", 0.0, len(gpus), 10.0, model=model)
        alloc.allocate(job.job_id, gpus)
        placed.append(Placed(job, gpus))
    head = Job("head", 0.0, 2, 10.0, model="Transformer (batch size 32)")
    queues = [[head], []]
    return observation(alloc, placed, queues, 0, now=0.0, clock=0.0, index=GraphIndex.of(cluster),
                       predictor=None, wait_allowed=False)


def _model(seed: int = 0) -> ActorCritic:
    torch.manual_seed(seed)
    return ActorCritic(n_agents=2).eval()


def test_output_shapes() -> None:
    model = _model()
    obs = stack_obs([_observation(), _observation()])
    index = topology_index(CLUSTER)
    z = model.actor_encoder(obs, *index)
    assert z["gpu"].shape == (2, 32, 32) and z["server"].shape == (2, 8, 32)
    assert z["rack"].shape == (2, 2, 32) and z["dc"].shape == (2, 32)
    logits, _ = model.logits(obs, *index)
    assert logits.shape == (2, 9)
    assert model.value(obs, *index).shape == (2,)


def _permute_servers(obs: dict[str, np.ndarray], perm: list[int]) -> dict[str, np.ndarray]:
    """Relabel servers: new server i is old server perm[i] (GPUs move with their server)."""
    gpus = np.concatenate([np.arange(4 * s, 4 * s + 4) for s in perm])
    out = dict(obs)
    out["gpu"] = obs["gpu"][gpus]
    out["server"] = obs["server"][perm]
    out["candidate"] = obs["candidate"][perm]
    out["mask"] = np.concatenate([obs["mask"][:-1][perm], obs["mask"][-1:]])
    return out


def test_permuting_servers_within_a_rack_permutes_embeddings_only() -> None:
    model = _model()
    index = topology_index(CLUSTER)
    obs = _observation()
    perm = [2, 0, 3, 1, 4, 5, 6, 7]  # a shuffle inside rack 0
    with torch.no_grad():
        base = model.actor_encoder(stack_obs([obs]), *index)
        moved = model.actor_encoder(stack_obs([_permute_servers(obs, perm)]), *index)
        logits, _ = model.logits(stack_obs([obs]), *index)
        logits_moved, _ = model.logits(stack_obs([_permute_servers(obs, perm)]), *index)
        value = model.value(stack_obs([obs]), *index)
        value_moved = model.value(stack_obs([_permute_servers(obs, perm)]), *index)
    assert torch.allclose(moved["server"][0], base["server"][0][perm], atol=1e-5)
    assert torch.allclose(moved["rack"], base["rack"], atol=1e-5)
    assert torch.allclose(moved["dc"], base["dc"], atol=1e-5)
    assert torch.allclose(value_moved, value, atol=1e-5)
    finite = torch.isfinite(logits[0])
    assert torch.allclose(logits_moved[0][:-1][finite[:-1][perm]],
                          logits[0][:-1][perm][finite[:-1][perm]], atol=1e-5)
    # a different server state must change the pooled embedding (the test can fail)
    other = dict(obs)
    other["server"] = obs["server"].copy()
    other["server"][0, 0] = 0.0
    with torch.no_grad():
        assert not torch.allclose(model.actor_encoder(stack_obs([other]), *index)["dc"], base["dc"])


def test_masked_actions_get_zero_probability() -> None:
    model = _model()
    obs = _observation()
    with torch.no_grad():
        logits, _ = model.logits(stack_obs([obs]), *topology_index(CLUSTER))
    probs = torch.softmax(logits[0], -1)
    mask = torch.as_tensor(obs["mask"]).bool()
    assert torch.all(probs[~mask] == 0.0)
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-6)
    assert not mask[-1], "waiting is masked while the head fits"


def test_same_weights_run_on_another_topology() -> None:
    model = _model()
    other = uniform_cluster(12, 8, 3)
    from rackwise.cluster.allocation import Allocation

    obs = observation(Allocation(other), [], [[Job("h", 0.0, 8, 1.0)], []], 0, now=0.0, clock=0.0,
                      index=GraphIndex.of(other), predictor=None, wait_allowed=False)
    with torch.no_grad():
        logits, _ = model.logits(stack_obs([obs]), *topology_index(other))
    assert logits.shape == (1, 13) and torch.isfinite(logits[0, :12]).all()
