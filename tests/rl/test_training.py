"""A short MAPPO run improves the return on a fixed tiny scenario; checkpoints round-trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the rl extra: pip install 'rackwise[rl]'")

from rackwise.cluster.topology import uniform_cluster  # noqa: E402
from rackwise.policies.parts.marl.checkpoint import load, load_weights, save  # noqa: E402
from rackwise.rl.curves import write_curves  # noqa: E402
from rackwise.rl.mappo import TrainConfig, Trainer, ppo_update  # noqa: E402

from .helpers import Crowded, steady_jobs  # noqa: E402

# Two servers of 4 GPUs; one-GPU jobs overlap in pairs, and a job runs at half speed
# beside another on its server: spreading them is clearly better than piling them up.
CLUSTER = uniform_cluster(2, 4, 2)
JOBS = steady_jobs(12, gap_s=60.0, duration_s=100.0, groups=("a", "b"))
SCENARIOS = [(JOBS, seed) for seed in range(4)]


def _trainer() -> Trainer:
    torch.set_num_threads(1)
    cfg = TrainConfig(n_agents=2, episodes_per_update=6, minibatch=64, actor_lr=3e-3,
                      critic_lr=3e-3, entropy_coef=0.0, shaping_coef=0.0, reward_scale=1.0,
                      interference_samples=300, interference_epochs=1, seed=0)
    return Trainer(cfg, workload=lambda rng: JOBS, topology=CLUSTER,
                   perf_factory=lambda: Crowded(penalty=1.0))


def _sampled_return(trainer: Trainer) -> float:
    """Mean return of the stochastic policy over fixed scenarios and a fixed sampling seed."""
    from rackwise.rl.mappo import run_episode

    generator = torch.Generator().manual_seed(123)
    return float(np.mean([
        run_episode(trainer.model, trainer.core(jobs, seed), trainer.index, mode="sample",
                    generator=generator).return_ for jobs, seed in SCENARIOS for _ in range(3)]))


def test_short_training_improves_the_return() -> None:
    trainer = _trainer()
    before = _sampled_return(trainer)
    for _ in range(12):
        ppo_update(trainer.model, trainer.optimiser, trainer.episodes(6, "sample"), trainer.index,
                   trainer.cfg, trainer.generator)
    after = _sampled_return(trainer)
    # returns are negative job-hours; the spread schedule costs about 12 x 100 s
    print(f"return before {before:.4f}, after {after:.4f}")
    assert after > before + 0.1 * abs(before), (before, after)
    assert trainer.evaluate(SCENARIOS) >= before


def test_checkpoint_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    trainer = _trainer()
    _weights, config = save(tmp_path / "ck", trainer.checkpoint({"note": "test"}))
    assert json.loads(config.read_text())["n_agents"] == 2
    loaded = load(tmp_path / "ck")
    for (name, a), (_, b) in zip(trainer.model.state_dict().items(),
                                 loaded.actor_critic.state_dict().items()):
        assert torch.equal(a, b), name
    assert loaded.config.training["note"] == "test"
    arrays = load_weights(tmp_path / "ck")  # what a run reads, without torch
    assert arrays.config == loaded.config
    for name, tensor in trainer.model.state_dict().items():
        np.testing.assert_array_equal(arrays.actor_critic[name], tensor.numpy(), err_msg=name)


def test_curves_are_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rows = [{"update": i, "phase": "ppo", "mean_return": -float(10 - i), "avg_jct_h": 1.0}
            for i in range(1, 4)]
    write_curves(rows, tmp_path / "curve")
    lines = (tmp_path / "curve.csv").read_text().splitlines()
    assert lines[0].startswith("update,phase") and len(lines) == 4
    assert (tmp_path / "curve.png").stat().st_size > 1000
