"""Training: MAPPO (shared actor, centralised critic) on the multi-agent decision process.

One update: roll out ``episodes_per_update`` episodes (fresh workload windows),
merge every agent's decisions into one time-ordered trajectory per episode
(the team reward of a decision point goes to its last decision), compute GAE
advantages with the centralised critic, then run clipped-PPO epochs over
minibatches. Before PPO, the actor is warm-started by behaviour cloning of an
interference-aware greedy rule (`greedy_action`), and the interference model
is fitted first and frozen. Everything is seeded: one seed, one run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from rackwise.cluster.topology import Topology, uniform_cluster
from rackwise.perf.model import NetworkPerf
from rackwise.policies.parts.marl import require
from rackwise.policies.parts.marl.anchors import greedy_action
from rackwise.policies.parts.marl.checkpoint import Checkpoint, ModelConfig, save
from rackwise.policies.parts.marl.encoder import ActorCritic, stack_obs, topology_index
from rackwise.policies.parts.marl.interference import Predictor, fit_interference, sample_colocations
from rackwise.rl.core import CoreConfig, SchedulingCore
from rackwise.rl.curves import write_curves
from rackwise.rl.episodes import sample_episode

torch = require("torch")


@dataclass
class TrainConfig:
    """Hyper-parameters of one training run (defaults: the shipped checkpoint's)."""

    n_agents: int = 4
    n_nodes: int = 16
    gpus_per_node: int = 8
    nodes_per_rack: int = 4
    sources: tuple[str, ...] = ("philly_2017", "synthetic:philly_2017", "itp_2021",
                                "synthetic:itp_2021")
    n_jobs: int = 200
    load: float = 0.9
    updates: int = 40
    episodes_per_update: int = 4
    eval_every: int = 5
    eval_episodes: int = 4
    actor_lr: float = 1e-4
    critic_lr: float = 1e-3
    clip: float = 0.2
    epochs: int = 4
    minibatch: int = 256
    gamma: float = 0.99
    lam: float = 0.95
    entropy_coef: float = 0.003
    value_coef: float = 0.5
    max_grad_norm: float = 0.5
    reward_scale: float = 0.02
    shaping_coef: float = 0.5
    bc_episodes: int = 8
    bc_epochs: int = 30
    interference_samples: int = 6000
    interference_epochs: int = 15
    hidden: int = 32
    seed: int = 0


@dataclass
class Decision:
    obs: dict[str, np.ndarray]
    action: int
    logp: float = 0.0
    value: float = 0.0
    reward: float = 0.0


@dataclass
class Episode:
    decisions: list[Decision] = field(default_factory=list)
    return_: float = 0.0  # scaled, shaped: what PPO maximises
    avg_jct_s: float = 0.0
    conflicts: int = 0


def run_episode(model: ActorCritic | None, core: SchedulingCore, index: tuple[Any, Any], *,
                mode: str, generator: Any = None, reward_scale: float = 1.0) -> Episode:
    """Play one episode: ``mode`` is "sample" (training), "greedy" (argmax) or "teacher"."""
    episode = Episode()
    core.advance()
    while not (core.done or core.truncated):
        agents = core.deciders()
        observations = [core.observe(k) for k in agents]
        if mode == "teacher" or model is None:
            actions = [greedy_action(o) for o in observations]
            logps = values = [0.0] * len(agents)
        else:
            with torch.no_grad():
                batch = stack_obs(observations)
                logits, _ = model.logits(batch, *index)
                dist = torch.distributions.Categorical(logits=logits)
                if mode == "sample":
                    picked = torch.multinomial(dist.probs, 1, generator=generator).squeeze(-1)
                else:
                    picked = logits.argmax(-1)
                logps = dist.log_prob(picked).tolist()
                values = model.value(batch, *index).tolist()
                actions = picked.tolist()
        info = core.apply(dict(zip(agents, actions)))
        for obs, action, logp, value in zip(observations, actions, logps, values):
            episode.decisions.append(Decision(obs, action, logp, value))
        reward = -(info.cost_s + info.shaping_s) / 3600.0 * reward_scale
        episode.decisions[-1].reward += reward
        episode.return_ += reward
        episode.conflicts += info.conflicts
    records = core.sim.records
    episode.avg_jct_s = float(np.mean([r.jct_s for r in records])) if records else 0.0
    return episode


def advantages(episode: Episode, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """GAE over the merged trajectory; the value after the last decision is 0 (the episode ended)."""
    rewards = np.asarray([d.reward for d in episode.decisions])
    values = np.asarray([d.value for d in episode.decisions] + [0.0])
    adv = np.zeros(len(rewards))
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        delta = rewards[t] + gamma * values[t + 1] - values[t]
        running = delta + gamma * lam * running
        adv[t] = running
    return adv, adv + values[:-1]


def _param_groups(model: ActorCritic, cfg: TrainConfig) -> list[dict[str, Any]]:
    critic = list(model.critic_encoder.parameters()) + list(model.value_head.parameters())
    critic_ids = {id(p) for p in critic}
    actor = [p for p in model.parameters() if id(p) not in critic_ids]
    return [{"params": actor, "lr": cfg.actor_lr}, {"params": critic, "lr": cfg.critic_lr}]


def ppo_update(model: ActorCritic, optimiser: Any, episodes: list[Episode], index: tuple[Any, Any],
               cfg: TrainConfig, generator: Any) -> dict[str, float]:
    """Clipped PPO epochs over every decision of ``episodes``; returns loss statistics."""
    decisions = [d for e in episodes for d in e.decisions]
    adv_parts, ret_parts = zip(*(advantages(e, cfg.gamma, cfg.lam) for e in episodes))
    adv = torch.as_tensor(np.concatenate(adv_parts), dtype=torch.float32)
    returns = torch.as_tensor(np.concatenate(ret_parts), dtype=torch.float32)
    values_old = torch.as_tensor([d.value for d in decisions], dtype=torch.float32)
    explained = 1.0 - float(torch.var(returns - values_old) / torch.var(returns).clamp(min=1e-8))
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    obs = stack_obs([d.obs for d in decisions])
    actions = torch.as_tensor([d.action for d in decisions])
    logp_old = torch.as_tensor([d.logp for d in decisions], dtype=torch.float32)
    stats = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "n": 0.0}
    for _ in range(cfg.epochs):
        order = torch.randperm(len(decisions), generator=generator)
        for start in range(0, len(decisions), cfg.minibatch):
            rows = order[start:start + cfg.minibatch]
            batch = {k: v[rows] for k, v in obs.items()}
            logits, _ = model.logits(batch, *index)
            dist = torch.distributions.Categorical(logits=logits)
            ratio = torch.exp(dist.log_prob(actions[rows]) - logp_old[rows])
            a = adv[rows]
            policy_loss = -torch.min(ratio * a, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * a).mean()
            value_loss = (model.value(batch, *index) - returns[rows]).pow(2).mean()
            entropy = dist.entropy().mean()
            loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimiser.step()
            stats["policy_loss"] += policy_loss.item()
            stats["value_loss"] += value_loss.item()
            stats["entropy"] += entropy.item()
            stats["n"] += 1
    n = max(stats.pop("n"), 1.0)
    out = {k: v / n for k, v in stats.items()}
    out["explained_variance"] = explained
    return out


def behaviour_clone(model: ActorCritic, optimiser: Any, episodes: list[Episode],
                    index: tuple[Any, Any], cfg: TrainConfig, generator: Any) -> float:
    """Cross-entropy of the actor on the teacher's decisions; returns the last epoch's mean loss."""
    decisions = [d for e in episodes for d in e.decisions]
    obs = stack_obs([d.obs for d in decisions])
    actions = torch.as_tensor([d.action for d in decisions])
    last = 0.0
    for _ in range(cfg.bc_epochs):
        total, n = 0.0, 0
        order = torch.randperm(len(decisions), generator=generator)
        for start in range(0, len(decisions), cfg.minibatch):
            rows = order[start:start + cfg.minibatch]
            logits, _ = model.logits({k: v[rows] for k, v in obs.items()}, *index)
            loss = torch.nn.functional.cross_entropy(logits, actions[rows])
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimiser.step()
            total, n = total + loss.item(), n + 1
        last = total / max(n, 1)
    return last


class Trainer:
    """Everything a training run holds: cluster, networks, optimiser, generators."""

    def __init__(self, cfg: TrainConfig, *, predictor: Predictor | None = None,
                 workload: Callable[[np.random.Generator], list[Any]] | None = None,
                 topology: Topology | None = None, perf_factory: Callable[[], Any] = NetworkPerf) -> None:
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.topology = topology if topology is not None else uniform_cluster(
            cfg.n_nodes, cfg.gpus_per_node, cfg.nodes_per_rack)
        self.index = topology_index(self.topology)
        self.rng = np.random.default_rng(cfg.seed)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        if predictor is None:
            samples = sample_colocations(cfg.interference_samples, np.random.default_rng(cfg.seed),
                                         server_gpus=cfg.gpus_per_node)
            predictor = Predictor(fit_interference(samples, epochs=cfg.interference_epochs, seed=cfg.seed))
        self.predictor = predictor
        self.workload = workload if workload is not None else (
            lambda rng: sample_episode(cfg.sources, rng, n_jobs=cfg.n_jobs, load=cfg.load,
                                       cluster_gpus=self.topology.n_gpus))
        self.perf_factory = perf_factory
        self.model = ActorCritic(cfg.n_agents, cfg.hidden)
        self.optimiser = torch.optim.Adam(_param_groups(self.model, cfg))
        self.core_config = CoreConfig(cfg.n_agents, cfg.shaping_coef)

    def core(self, jobs: list[Any], seed: int) -> SchedulingCore:
        return SchedulingCore(self.topology, jobs, perf=self.perf_factory(), seed=seed,
                              config=self.core_config, predictor=self.predictor)

    def episodes(self, n: int, mode: str) -> list[Episode]:
        out = []
        for _ in range(n):
            jobs = self.workload(self.rng)
            seed = int(self.rng.integers(0, 2**31 - 1))
            out.append(run_episode(self.model, self.core(jobs, seed), self.index, mode=mode,
                                   generator=self.generator, reward_scale=self.cfg.reward_scale))
        return out

    def evaluate(self, scenarios: list[tuple[list[Any], int]], mode: str = "greedy") -> float:
        """Mean (scaled, shaped) return over fixed (jobs, seed) scenarios."""
        return float(np.mean([run_episode(self.model, self.core(jobs, seed), self.index, mode=mode,
                                          reward_scale=self.cfg.reward_scale).return_
                              for jobs, seed in scenarios]))

    def checkpoint(self, summary: dict[str, Any]) -> Checkpoint:
        cfg = self.cfg
        config = ModelConfig(n_agents=cfg.n_agents, hidden=cfg.hidden, shaping_coef=cfg.shaping_coef,
                             training={**asdict(cfg), **summary})
        return Checkpoint(config, self.model, self.predictor)


def untrained(checkpoint: Checkpoint) -> Checkpoint:
    """``checkpoint``'s network freshly initialised: its configuration, seed and interference
    model, no cloning and no update (what training is measured against)."""
    known = {f.name for f in fields(TrainConfig)}
    settings = {k: v for k, v in checkpoint.config.training.items() if k in known}
    if "sources" in settings:
        settings["sources"] = tuple(settings["sources"])
    trainer = Trainer(TrainConfig(**settings), predictor=checkpoint.predictor)
    return trainer.checkpoint({"untrained": True})


def train(cfg: TrainConfig, out_dir: str | Path, log: Callable[[str], None] = print) -> Checkpoint:
    """A full run: interference model, warm start, PPO; writes the checkpoint and curves."""
    torch.set_num_threads(1)  # small tensors: threads only add contention and nondeterminism
    started = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(cfg)
    log(f"interference model fitted in {time.perf_counter() - started:.0f} s")
    rows: list[dict[str, Any]] = []
    # fixed scenarios (own generator, training split) for a curve free of window-to-window noise
    eval_rng = np.random.default_rng(cfg.seed + 10_000)
    scenarios = [(trainer.workload(eval_rng), int(eval_rng.integers(0, 2**31 - 1)))
                 for _ in range(cfg.eval_episodes)]

    def evaluate(row: dict[str, Any]) -> None:
        if cfg.eval_episodes > 0:
            row["eval_return"] = trainer.evaluate(scenarios)
            log(f"  greedy return on {cfg.eval_episodes} fixed windows: {row['eval_return']:.3f}")

    if cfg.bc_episodes > 0:
        teacher = trainer.episodes(cfg.bc_episodes, "teacher")
        loss = behaviour_clone(trainer.model, trainer.optimiser, teacher, trainer.index, cfg,
                               trainer.generator)
        rows.append({"update": 0, "phase": "teacher", "mean_return": float(np.mean([e.return_ for e in teacher])),
                     "avg_jct_h": float(np.mean([e.avg_jct_s for e in teacher])) / 3600,
                     "bc_loss": loss, "wall_s": time.perf_counter() - started})
        log(f"warm start: {sum(len(e.decisions) for e in teacher)} teacher decisions, loss {loss:.3f}")
    initial = {"update": 0, "phase": "initial", "wall_s": time.perf_counter() - started}
    evaluate(initial)
    rows.append(initial)
    for update in range(1, cfg.updates + 1):
        batch = trainer.episodes(cfg.episodes_per_update, "sample")
        stats = ppo_update(trainer.model, trainer.optimiser, batch, trainer.index, cfg, trainer.generator)
        row = {"update": update, "phase": "ppo", "mean_return": float(np.mean([e.return_ for e in batch])),
               "avg_jct_h": float(np.mean([e.avg_jct_s for e in batch])) / 3600,
               "conflicts": float(np.mean([e.conflicts for e in batch])), **stats,
               "wall_s": time.perf_counter() - started}
        if update % cfg.eval_every == 0 or update == cfg.updates:
            evaluate(row)
        rows.append(row)
        log(f"update {update}/{cfg.updates}: return {row['mean_return']:.2f}, avg JCT "
            f"{row['avg_jct_h']:.2f} h, entropy {stats['entropy']:.3f}, "
            f"explained variance {stats['explained_variance']:.2f}, {row['wall_s']:.0f} s")
    write_curves(rows, out / "training_curve")
    evals = [r["eval_return"] for r in rows if "eval_return" in r]
    summary = {"wall_s": time.perf_counter() - started,
               "first_return": evals[0] if evals else rows[0].get("mean_return", 0.0),
               "last_return": evals[-1] if evals else rows[-1].get("mean_return", 0.0)}
    checkpoint = trainer.checkpoint(summary)
    save(out / "marl", checkpoint)
    return checkpoint
