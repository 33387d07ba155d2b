"""Gymnasium and PettingZoo environments on the simulator, for training your own agents.

`PlacementEnv` is one scheduler (gymnasium ``Env``); `MultiPlacementEnv`
is several schedulers sharing one cluster, each with its own job stream
(PettingZoo ``ParallelEnv``). Both wrap `SchedulingCore`; its docstring
defines decision points, conflicts and the reward.

Observation (a ``Dict`` of arrays, see `rackwise.policies.parts.marl.features`): ``gpu``,
``server``, ``rack`` (graph features), ``job`` (the queue head), ``candidate``
(per server), ``queues`` (every agent's queue summary; for a centralised
critic), ``clock`` and ``mask`` (int8, 1 = allowed). Action: ``Discrete(S + 1)``;
``s < S`` anchors the head at server ``s`` (GPUs by `rackwise.policies.parts.marl.placement`),
``S`` waits (or is the no-op of an agent with nothing to decide). A masked
action is treated as waiting and counted in ``info["invalid"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rackwise.cluster.topology import Topology, uniform_cluster
from rackwise.perf.base import PerfModel
from rackwise.policies.parts.marl import require
from rackwise.policies.parts.marl.features import (
    N_CANDIDATE_FEATURES,
    N_GPU_FEATURES,
    N_QUEUE_FEATURES,
    N_RACK_FEATURES,
    N_SERVER_FEATURES,
    job_feature_size,
)
from rackwise.rl.core import CoreConfig, SchedulingCore, StepInfo
from rackwise.rl.episodes import sample_episode
from rackwise.workload.job import Job

if TYPE_CHECKING:
    import gymnasium as gym
    import pettingzoo as pz
else:  # a one-line error naming the extra when it is missing
    gym = require("gymnasium")
    pz = require("pettingzoo")
spaces = gym.spaces

Workload = Sequence[Job] | Callable[[np.random.Generator], Sequence[Job]]
HIGH = 4.0  # every feature is clipped to [0, HIGH]


def default_topology() -> Topology:
    """16 servers x 8 GPUs in 4 racks: the training cluster."""
    return uniform_cluster(16, 8, 4)


def default_workload(n_jobs: int = 200, load: float = 0.9,
                     sources: tuple[str, ...] = ("philly_2017", "synthetic:philly_2017"),
                     cluster_gpus: int = 128) -> Callable[[np.random.Generator], list[Job]]:
    """Episodes of ``n_jobs`` from trace windows and synthetic draws (training split)."""
    def draw(rng: np.random.Generator) -> list[Job]:
        return sample_episode(sources, rng, n_jobs=n_jobs, load=load, cluster_gpus=cluster_gpus)
    return draw


def observation_space(topology: Topology, n_agents: int) -> Any:
    def box(*shape: int) -> Any:
        return spaces.Box(0.0, HIGH, shape=shape, dtype=np.float32)
    s = topology.n_nodes
    return spaces.Dict({
        "gpu": box(topology.n_gpus, N_GPU_FEATURES), "server": box(s, N_SERVER_FEATURES),
        "rack": box(topology.n_racks, N_RACK_FEATURES), "queues": box(n_agents, N_QUEUE_FEATURES),
        "clock": box(1), "job": box(job_feature_size(n_agents)),
        "candidate": box(s, N_CANDIDATE_FEATURES),
        "mask": spaces.Box(0, 1, shape=(s + 1,), dtype=np.int8),
    })


class _Episodes:
    """What both environments share: building a core per episode from a seeded generator."""

    def _setup(self, topology: Topology | None, workload: Workload | None, perf: PerfModel | None,
               config: CoreConfig, predictor: object | None) -> None:
        self.topology = topology if topology is not None else default_topology()
        self.workload = workload if workload is not None else default_workload(
            cluster_gpus=self.topology.n_gpus)
        self.perf_factory = (lambda: perf) if perf is not None else _network_perf
        self.config = config
        self.predictor = predictor
        self.core: SchedulingCore | None = None
        self._rng = np.random.default_rng()

    def _new_core(self, seed: int | None) -> SchedulingCore:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        jobs = self.workload(self._rng) if callable(self.workload) else list(self.workload)
        episode_seed = int(self._rng.integers(0, 2**31 - 1))
        core = SchedulingCore(self.topology, jobs, perf=self.perf_factory(), seed=episode_seed,
                              config=self.config, predictor=self.predictor)
        core.advance()
        return core

    @staticmethod
    def _info(core: SchedulingCore, step: StepInfo | None) -> dict[str, Any]:
        info: dict[str, Any] = {"now": core.sim.now, "deciders": core.deciders()}
        if step is not None:
            info.update(conflicts=step.conflicts, invalid=step.invalid, cost_s=step.cost_s,
                        shaping_s=step.shaping_s)
        if core.done:
            info["jct_s"] = {r.job_id: r.jct_s for r in core.sim.records}
        return info


def _network_perf() -> PerfModel:
    from rackwise.perf.model import NetworkPerf

    return NetworkPerf()


def _reward(step: StepInfo) -> float:
    return -(step.cost_s + step.shaping_s) / 3600.0


class PlacementEnv(_Episodes, gym.Env):
    """One scheduler placing the jobs of one queue (gymnasium API).

    Args:
        topology: The cluster (default: `default_topology`).
        workload: A job list, or a function of the episode's generator
            returning one (default: `default_workload`).
        perf: Performance model (default: a fresh `NetworkPerf` per episode).
        shaping_coef, allow_wait: See `CoreConfig`.
        predictor: An interference `Predictor` (candidate features and shaping), or None.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium declares it so)

    def __init__(self, topology: Topology | None = None, workload: Workload | None = None,
                 perf: PerfModel | None = None, *, shaping_coef: float = 0.5,
                 allow_wait: bool = False, predictor: object | None = None) -> None:
        self._setup(topology, workload, perf, CoreConfig(1, shaping_coef, allow_wait), predictor)
        self.observation_space = observation_space(self.topology, 1)
        self.action_space = spaces.Discrete(self.topology.n_nodes + 1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self.core = self._new_core(seed)
        return self.core.observe(0), self._info(self.core, None)

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        core = self.core
        assert core is not None, "call reset() first"
        step = core.apply({0: int(action)})
        return (core.observe(0), _reward(step), core.done, core.truncated and not core.done,
                self._info(core, step))


class MultiPlacementEnv(_Episodes, pz.ParallelEnv):
    """Several schedulers sharing one cluster, each with its own job stream (PettingZoo parallel API).

    Every agent acts at every step: those whose queue head does not fit
    (or who have nothing queued) can only take the no-op (the mask says so).
    All agents get the team reward. Arguments as `PlacementEnv`, plus ``n_agents``.
    """

    metadata: dict[str, Any] = {"render_modes": [], "name": "rackwise_placement_v0"}  # noqa: RUF012

    def __init__(self, topology: Topology | None = None, workload: Workload | None = None,
                 perf: PerfModel | None = None, *, n_agents: int = 4, shaping_coef: float = 0.5,
                 allow_wait: bool = False, predictor: object | None = None) -> None:
        self._setup(topology, workload, perf, CoreConfig(n_agents, shaping_coef, allow_wait), predictor)
        self.possible_agents = [f"scheduler_{k}" for k in range(n_agents)]
        self.agents: list[str] = []
        self._obs_space = observation_space(self.topology, n_agents)
        self._act_space = spaces.Discrete(self.topology.n_nodes + 1)

    def observation_space(self, agent: str) -> Any:
        return self._obs_space

    def action_space(self, agent: str) -> Any:
        return self._act_space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.core = self._new_core(seed)
        self.agents = list(self.possible_agents)
        info = self._info(self.core, None)
        return self._observe(), {a: dict(info) for a in self.agents}

    def step(self, actions: dict[str, int]) -> tuple[dict[str, Any], ...]:
        core = self.core
        assert core is not None, "call reset() first"
        step = core.apply({self.possible_agents.index(a): int(act) for a, act in actions.items()})
        obs = self._observe()
        reward = _reward(step)
        ended = core.done
        cut = core.truncated and not ended
        info = self._info(core, step)
        agents = list(self.agents)
        out = (obs, dict.fromkeys(agents, reward), dict.fromkeys(agents, ended),
               dict.fromkeys(agents, cut), {a: dict(info) for a in agents})
        if ended or cut:
            self.agents = []
        return out

    def state(self) -> np.ndarray:
        """Global state for a centralised critic: the graph, every queue summary and the clock."""
        assert self.core is not None, "call reset() first"
        obs = self.core.observe(0)
        return np.concatenate([obs[k].ravel() for k in ("gpu", "server", "rack", "queues", "clock")])

    def _observe(self) -> dict[str, dict[str, np.ndarray]]:
        core = self.core
        assert core is not None
        return {a: core.observe(k) for k, a in enumerate(self.possible_agents)}
