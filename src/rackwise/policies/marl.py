"""MARL placement: several learned scheduler agents sharing one cluster.

rackwise's implementation of the published design of multi-agent graph RL
scheduling (shared/papers/marl_gnn.md; docs/policies/marl.md). Only the
design's outline is published; the features, network, reward and training
here are rackwise's reconstruction.

Jobs go to ``n_agents`` FIFO queues by a stable hash of their group. At
every scheduling call the agents, in an order shuffled by the run's
generator, place their queue heads one at a time while they fit: each picks
an anchor server with the trained actor (argmax over the feasible servers),
and `rackwise.policies.parts.marl.placement` picks the GPUs. ``placement``
swaps the actor for a fixed anchor rule (`rackwise.policies.parts.marl.anchors`):
the placement heuristics the design is measured against, under the very same
per-agent FIFO order. An agent whose head does not fit
waits (no backfilling within an agent). With ``order="las"`` Tiresias
decides which jobs run and which are preempted, and each job it starts is
placed by its own agent. A run reads the checkpoint's numpy weights and
needs no torch; training one (`rackwise.rl`) needs the ``rl`` extra.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from rackwise.cluster.allocation import TentativeAllocation
from rackwise.engine.contract import Capabilities
from rackwise.engine.view import ClusterView
from rackwise.errors import UnknownNameError, suggest
from rackwise.policies.base import NOTHING, BasePolicy, Decisions, Start
from rackwise.policies.parts.marl.anchors import ANCHOR_RULES, NEEDS_PREDICTOR, anchor_action
from rackwise.policies.tiresias import Tiresias
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

ORDERS: tuple[str, ...] = ("fifo", "fewest-gpus", "las")


@dataclass
class _LasDecision:
    """One scheduling call under ``order="las"``: what the placements inside it share."""

    view: ClusterView
    now: float
    started: dict[str, Any] = field(default_factory=dict)  # job id -> `Placed`, in start order
    queues: list[list[Job]] | None = None  # pending jobs per agent in Tiresias' order, once asked
    asked: list[int] = field(default_factory=list)  # GPUs each of those queues asks for


@dataclass(kw_only=True)
class Marl(BasePolicy):
    """Multi-agent graph-RL placement with a hierarchical GNN.

    Args:
        checkpoint: Path (stem, ``.pt``, ``.npz`` or ``.json``) of a checkpoint from
            ``rackwise train-marl``; None: the one shipped with rackwise.
        threads: Threads numpy's BLAS (the actor) may use: 1 is fastest for
            one small decision, and a BLAS thread left waiting burns a core.
        placement: ``"learned"`` (the trained actor) or a fixed anchor rule of
            `ANCHOR_RULES` (``first-fit``, ``spread``, ``consolidated``,
            ``greedy`` with the checkpoint's interference model, ``random``):
            the paper's placement baselines under the same agents and order.
        order: How each agent orders its queue: ``"fifo"`` (arrival order, the
            design's default) or ``"fewest-gpus"`` (narrowest job first, then
            arrival order: known at submission, so no oracle); neither
            preempts. ``"las"``: least attained service first with
            preemption, as `Tiresias` at its defaults decides, every job it
            starts placed by its agent.
    """

    name: ClassVar[str] = "marl"
    checkpoint: str | None = None
    threads: int = 1
    placement: str = "learned"
    order: str = "fifo"

    def __post_init__(self) -> None:
        if self.placement != "learned" and self.placement not in ANCHOR_RULES:
            known = ("learned", *ANCHOR_RULES)
            raise UnknownNameError(f"unknown placement '{self.placement}' for marl; known: "
                                   f"{', '.join(known)}.{suggest(self.placement, known)}")
        if self.order not in ORDERS:
            raise UnknownNameError(f"unknown order '{self.order}' for marl; known: "
                                   f"{', '.join(ORDERS)}.{suggest(self.order, ORDERS)}")

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        from threadpoolctl import threadpool_limits

        from rackwise.policies.parts.marl.features import GraphIndex
        from rackwise.policies.parts.marl.inference import CachedActor
        from rackwise.policies.parts.marl.tracking import TrackedCluster

        threadpool_limits(self.threads, user_api="blas")
        self.checkpoint_ = _cached(self.checkpoint)
        self.n_agents_ = self.checkpoint_.config.n_agents
        self.index_ = GraphIndex.of(view.topology)
        self.actor_ = CachedActor(self.checkpoint_.actor, view.topology)
        self.tracked_ = TrackedCluster(self.index_)
        self.queues_: list[list[Job]] = [[] for _ in range(self.n_agents_)]
        self.asked_ = [0] * self.n_agents_  # GPUs asked for by each queue's jobs
        if self.order == "las":
            self.las_ = Tiresias()
            self.las_.reset(view, rng)
            self.las_.queues_.place = self._place_started
            self.agent_of_: dict[str, int] = {}
            self.deciding_: _LasDecision | None = None

    @property
    def capabilities(self) -> Capabilities:
        return replace(super().capabilities, preempts=self.order == "las")

    def on_arrival(self, job: Job, now: float) -> None:
        from rackwise.policies.parts.marl.features import agent_of

        agent = agent_of(job, self.n_agents_)
        if self.order == "las":
            self.agent_of_[job.job_id] = agent
            self.las_.on_arrival(job, now)
            return
        queue = self.queues_[agent]
        self.asked_[agent] += job.n_gpus
        if self.order == "fewest-gpus":
            # after every queued job at most as wide: arrival order within a width
            bisect.insort_right(queue, job, key=lambda queued: queued.n_gpus)
        else:
            queue.append(job)

    def on_completion(self, job: Job, now: float) -> None:
        if self.order == "las":
            self.las_.on_completion(job, now)
            self.agent_of_.pop(job.job_id, None)

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        if self.order == "las":
            self.deciding_ = _LasDecision(view, now)
            try:
                return self.las_.schedule(view, now)
            finally:
                self.deciding_ = None  # a view is no state to keep
        if view.n_free == 0 or not any(self.queues_):
            return NOTHING
        from rackwise.policies.parts.marl.features import Placed
        from rackwise.policies.parts.marl.placement import place_anchored

        free = view.tentative()
        tracked = self.tracked_
        placed: list[Placed] | None = None  # the running jobs, once a head fits
        starts: list[Start] = []
        order = self.rng_.permutation(self.n_agents_).tolist()
        moved = True
        while moved:
            moved = False
            for agent in order:
                queue = self.queues_[agent]
                # a driver that adopts a running cluster announces running jobs as arrivals too
                while queue and queue[0].job_id not in view.pending:
                    self.asked_[agent] -= queue.pop(0).n_gpus
                if not queue or queue[0].n_gpus > free.n_free:
                    continue
                head = queue[0]
                if placed is None:
                    tracked.sync(view.running, free, view.start_mark)  # before any start: free is the view's
                    placed = list(tracked.known.values())
                server = self.decide(free, placed, agent, now, tracked.on_server, tracked.graph,
                                     self.asked_)
                gpus = place_anchored(free, head.n_gpus, server) if server is not None else None
                if gpus is None:
                    continue
                free.take(gpus)
                placed.append(Placed(head, gpus))
                tracked.add(placed[-1], free)  # residents and features kept up to date as jobs start
                starts.append(Start(head.job_id, gpus))
                self.asked_[agent] -= queue.pop(0).n_gpus
                moved = True
        return Decisions(start=tuple(starts)) if starts else NOTHING

    def _place_started(self, free: TentativeAllocation, state: JobState) -> tuple[int, ...] | None:
        """Where the job Tiresias starts goes: its agent's anchor (``order="las"``).

        The agent sees the cluster as it stands in this decision: without the
        jobs preempted so far (their GPUs are free again) and with the jobs
        started so far, and the pending jobs per agent in Tiresias' order, this
        job first in its own agent's queue.
        """
        from rackwise.policies.parts.marl.features import Placed
        from rackwise.policies.parts.marl.placement import place_anchored

        decision = self.deciding_
        assert decision is not None
        holding = {job_id: running for job_id, running in decision.view.running.items()
                   if not free.is_free(running.gpu_ids[0])}
        holding.update(decision.started)
        tracked = self.tracked_
        tracked.sync(holding, free)
        if decision.queues is None:  # Tiresias' keys do not move within a call: sorted once
            key_of = self.las_.queues_.key_of
            decision.queues = [[] for _ in range(self.n_agents_)]
            for job_id, pending in decision.view.pending.items():
                decision.queues[self.agent_of_[job_id]].append(pending.job)
            for queue in decision.queues:
                queue.sort(key=lambda queued: key_of[queued.job_id])
            decision.asked = [sum(queued.n_gpus for queued in queue) for queue in decision.queues]
        job = state.job
        agent = self.agent_of_[job.job_id]
        rest = [queued for queued in decision.queues[agent] if queued is not job]
        self.queues_ = [*decision.queues[:agent], [job, *rest], *decision.queues[agent + 1:]]
        self.asked_ = decision.asked
        server = self.decide(free, list(tracked.known.values()), agent, decision.now, tracked.on_server,
                             tracked.graph, self.asked_)
        gpus = place_anchored(free, job.n_gpus, server) if server is not None else None
        if gpus is not None:
            decision.started[job.job_id] = Placed(job, gpus)
            decision.queues[agent] = rest
            decision.asked[agent] -= job.n_gpus
        return gpus

    def decide(self, free: Any, placed: list[Any], agent: int, now: float,
               on_server: list[Any] | None = None, graph: Any = None,
               asked: list[int] | None = None) -> int | None:
        """The agent's anchor server for its queue head (argmax of the actor, or the fixed
        rule of ``placement``), or None to wait.

        ``on_server``: the residents of ``placed`` per server, ``graph``: their
        `GraphFeatures`, and ``asked``: the GPUs each queue asks for, if the caller keeps them.
        """
        from rackwise.policies.parts.marl.features import observation

        learned = self.placement == "learned"
        if learned and len(anchors := self._feasible_anchors(free, agent)) <= 1:
            # The actor's logits are -inf wherever the mask forbids, so its argmax is known
            # without an observation: the one anchor, or "wait" if there is none. Most
            # decisions on a busy cluster are so.
            return int(anchors[0]) if len(anchors) else None
        # only the actor and the greedy rule read the interference model's columns
        predictor = self.checkpoint_.pair_terms if learned or self.placement in NEEDS_PREDICTOR else None
        obs = observation(free, placed, self.queues_, agent, now=now, clock=0.0, index=self.index_,
                          predictor=predictor, wait_allowed=False, on_server=on_server, graph=graph,
                          asked=asked)
        if not learned:
            action = anchor_action(self.placement, obs, self.rng_)
        else:
            logits = self.actor_.logits(obs)
            # Kernels differ in the last bits between CPUs (AVX2, AVX-512, none): compare logits on a
            # coarser grid, first server first on a tie, so the choice is the same on every machine.
            action = int(np.round(logits * 256.0).argmax())
        return action if action < free.topology.n_nodes else None

    def _feasible_anchors(self, free: Any, agent: int) -> np.ndarray:
        """The servers that may anchor the agent's queue head now (the mask's servers)."""
        from rackwise.policies.parts.marl.placement import feasible_mask

        queue = self.queues_[agent]
        if not queue:
            return np.zeros(0, dtype=int)
        return feasible_mask(free, queue[0].n_gpus, self.index_.server_size).nonzero()[0]


_LOADED: dict[str | None, Any] = {}


def _cached(path: str | None) -> Any:
    """Each checkpoint is read once per process (runs and sweeps reset policies often)."""
    if path not in _LOADED:
        from rackwise.policies.parts.marl.checkpoint import load_weights

        _LOADED[path] = load_weights(path)
    return _LOADED[path]
