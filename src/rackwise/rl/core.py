"""The simulator as a multi-agent decision process (what both environments wrap).

K agents each own a FIFO queue (jobs go to agents by a stable hash of their
group, `agent_of`) and share the whole cluster. A *decision point* is an
instant at which some agent's queue head fits: every such agent picks an
anchor server (or waits, if allowed). Agents act simultaneously on one
observation; their picks are committed in a shuffled order (the episode's
generator), and an agent whose pick was taken by an earlier one is a
*conflict*: it is asked again at the same instant with a fresh view.

Reward (a team reward, the same for every agent), per decision point:
``-(integral of jobs in the system over time until the next decision point)
/ 3600 - shaping``. Summed over an episode the first term is exactly
``-sum(JCT) / 3600`` (the objective: average JCT). ``shaping`` is
``shaping_coef * (predicted extra seconds of interference) / 3600`` of each
placement: the interference model's log-slowdown of the placed job times its
ideal duration, plus the increase it causes each neighbour times that
neighbour's remaining ideal time. It gives an immediate signal for a cost
the first term charges only later; ``shaping_coef = 0`` turns it off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rackwise.cluster.topology import Topology
from rackwise.perf.base import PerfModel
from rackwise.policies.base import NOTHING, BasePolicy, Decisions, Start
from rackwise.policies.parts.marl.features import GraphIndex, Placed, agent_of, model_index, observation, residents
from rackwise.policies.parts.marl.placement import place_anchored
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job


@dataclass(frozen=True)
class CoreConfig:
    """Parameters of the decision process.

    Attributes:
        n_agents: Scheduler agents sharing the cluster.
        shaping_coef: Weight of the interference-model shaping term (0: off).
        allow_wait: Agents may wait although their head fits (only while a
            job runs, so a completion will ask them again).
        max_decisions_per_job: Episode truncated after this many decisions per job.
    """

    n_agents: int = 4
    shaping_coef: float = 0.5
    allow_wait: bool = False
    max_decisions_per_job: int = 20


class _Bridge(BasePolicy):
    """The policy the simulator sees: it decides nothing and hands arrivals to the queues."""

    name = "rl-env"

    def __init__(self, core: SchedulingCore) -> None:
        self.core = core

    def schedule(self, view: object, now: float) -> Decisions:
        return NOTHING

    def on_arrival(self, job: Job, now: float) -> None:
        self.core.queues[agent_of(job, self.core.config.n_agents)].append(job)


@dataclass
class StepInfo:
    cost_s: float = 0.0  # job-seconds spent in the system since the last decision point
    shaping_s: float = 0.0
    conflicts: int = 0
    invalid: int = 0
    placed: list[str] = field(default_factory=list)


class SchedulingCore:
    """One episode: a simulator, K agent queues, and the decision-point loop."""

    def __init__(self, topology: Topology, jobs: Sequence[Job], *, perf: PerfModel,
                 seed: int, config: CoreConfig, predictor: object | None = None) -> None:
        self.topology = topology
        self.config = config
        self.predictor = predictor
        self.queues: list[list[Job]] = [[] for _ in range(config.n_agents)]
        self.sim = Simulator(topology, jobs, _Bridge(self), perf=perf, seed=seed)
        self.sim.start()
        self.rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(3)[2])
        self.index = GraphIndex.of(topology)
        self.waited: set[int] = set()
        self.masks: dict[int, np.ndarray] = {}
        self.n_decisions = 0
        self.done = False
        self.truncated = False

    # ----------------------------------------------------------------- queries
    @property
    def n_actions(self) -> int:
        return self.topology.n_nodes + 1

    def deciders(self) -> list[int]:
        """Agents whose queue head fits now and who have not waited at this instant."""
        free = self.sim.allocation
        return [k for k, queue in enumerate(self.queues)
                if queue and k not in self.waited and queue[0].n_gpus <= free.n_free]

    def placed(self) -> list[Placed]:
        out = []
        for state in self.sim.running.values():
            job = state.job
            left = state.remaining_iters(self.sim.now) / job.total_iters if job.total_iters > 0 else 0.0
            out.append(Placed(job, state.gpu_ids, left * job.duration_s))
        return out

    def observe(self, agent: int) -> dict[str, np.ndarray]:
        """The agent's observation (`rackwise.policies.parts.marl.features.observation`)."""
        sim = self.sim
        span = max(sim.jobs[-1].submit_time, 1.0) if sim.jobs else 1.0
        obs = observation(sim.allocation, self.placed(), self.queues, agent, now=sim.now,
                          clock=sim.now / span, index=self.index, predictor=self.predictor,
                          wait_allowed=self.config.allow_wait and bool(sim.running),
                          deciding=agent in self.deciders())
        self.masks[agent] = obs["mask"]
        return obs

    # ----------------------------------------------------------------- actions
    def apply(self, actions: dict[int, int]) -> StepInfo:
        """Commit the agents' picks in a shuffled order, then move to the next decision point."""
        info = StepInfo()
        deciding = set(self.deciders())
        n_servers = self.topology.n_nodes
        for agent in self.rng.permutation(sorted(actions)).tolist():
            if agent not in deciding:
                continue
            action = int(actions[agent])
            mask = self.masks.get(agent)
            allowed = mask is not None and 0 <= action < len(mask) and bool(mask[action])
            if not allowed:
                info.invalid += 1
            if action == n_servers or not allowed:
                self.waited.add(agent)
                continue
            head = self.queues[agent][0]
            gpus = place_anchored(self.sim.allocation, head.n_gpus, action)
            if gpus is None:
                info.conflicts += 1  # taken by an agent committed earlier: asked again
                continue
            if self.config.shaping_coef > 0 and self.predictor is not None:
                info.shaping_s += self.config.shaping_coef * self._predicted_extra_s(head, action)
            # Agents decide between engine steps, at the same instant: `apply` puts their
            # starts through the engine's usual checks.
            self.sim.apply(Decisions(start=(Start(head.job_id, gpus),)))
            self.queues[agent].pop(0)
            info.placed.append(head.job_id)
        self.n_decisions += len(actions)
        info.cost_s += self.advance()
        return info

    def advance(self) -> float:
        """Step the simulator until a decision point or the end; job-seconds accrued meanwhile."""
        sim = self.sim
        cost = 0.0
        limit = self.config.max_decisions_per_job * max(1, len(sim.jobs))
        while True:
            if len(sim.finished) == len(sim.jobs):
                self.done = True
                return cost
            if self.n_decisions >= limit:
                self.truncated = True
                return cost
            if self.deciders():
                return cost
            in_system = len(sim.pending) + len(sim.running)
            before = sim.now
            if not sim.step():
                self.waited.clear()  # nothing left to happen: ask the waiting agents again
                continue
            cost += (sim.now - before) * in_system
            self.waited.clear()

    def _predicted_extra_s(self, head: Job, server: int) -> float:
        """Interference seconds the model predicts placing ``head`` at ``server`` adds."""
        pred: Any = self.predictor  # an interference Predictor (torch is optional here)
        on_server = residents(self.placed(), self.index)[server]
        if not on_server:
            return 0.0
        size = float(self.index.server_size[server])
        head_share = min(head.n_gpus, size) / size
        a = model_index(head.model)
        others = [model_index(item.job.model) for item, _ in on_server]
        shares = [share for _, share in on_server]
        own = pred.pair_terms([a] * len(others), others, shares).sum()
        theirs = pred.pair_terms(others, [a] * len(others), [head_share] * len(others))
        return float(own * head.duration_s + sum(
            t * item.remaining_s for t, (item, _) in zip(theirs.tolist(), on_server)))
