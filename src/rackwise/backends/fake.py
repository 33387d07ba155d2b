"""A backend over the in-process simulator, so the driver loop runs without a cluster.

The simulator keeps its own event heap, job tables and transitions; the
policy it is built with only relays, and the loop's decisions are applied
through the simulator's own checks and transitions, so the fake cannot
drift from `rackwise.sim.engine.simulate`. The clock moves only when the
loop waits: to the next event, or to the loop's deadline if that is sooner.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from rackwise.backends.base import INF, Outcome, Snapshot
from rackwise.cluster.topology import Topology
from rackwise.engine.view import ClusterView
from rackwise.metrics.records import JobRecord
from rackwise.perf.base import PerfModel
from rackwise.policies.base import NOTHING, BasePolicy, Decisions
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job


@dataclass(kw_only=True)
class _Relay(BasePolicy):
    """Stands in for the real policy inside the simulator: the loop decides instead."""

    name: ClassVar[str] = "relay"

    def schedule(self, view: ClusterView, now: float) -> Decisions:
        return NOTHING


class FakeBackend:
    """Replays a workload on a simulated cluster, driven by `serve`.

    Args:
        topology: The simulated cluster.
        jobs: The workload.
        perf: Performance model (default: trace speeds).
        seed: Seeds the performance model as ``simulate(..., seed=seed)`` does.
    """

    name: ClassVar[str] = "fake"

    def __init__(self, topology: Topology, jobs: Iterable[Job], *,
                 perf: PerfModel | None = None, seed: int = 0) -> None:
        self.sim = Simulator(topology, jobs, _Relay(), perf=perf, seed=seed)
        self.node_names = tuple(f"n{node.node_id}" for node in topology.nodes)
        self.sim.start()
        self.sim.step()  # the first arrival: where the simulator first asks a policy

    @property
    def topology(self) -> Topology:
        return self.sim.topology

    def observe(self) -> Snapshot:
        sim = self.sim
        return Snapshot(now=sim.now, view=sim.view, finished=dict(sim.finished),
                        n_waiting=sim.n_waiting, next_arrival=sim.next_arrival_time)

    def apply(self, decisions: Decisions, snapshot: Snapshot) -> list[Outcome]:
        sim = self.sim
        topology = sim.topology
        # The simulator's own transitions and checks, at the current instant.
        sim.apply(Decisions(start=decisions.start, preempt=decisions.preempt))
        outcomes = [Outcome("preempt", job_id, True) for job_id in decisions.preempt]
        for start in decisions.start:
            nodes = sorted({topology.gpu_node[g] for g in start.gpu_ids})
            outcomes.append(Outcome("start", start.job_id, True,
                                    nodes=tuple(self.node_names[n] for n in nodes)))
        return outcomes

    def wait(self, deadline: float) -> bool:
        sim = self.sim
        if sim.peek() <= deadline:
            return sim.step()
        if deadline == INF:
            return False
        sim.advance_to(deadline)
        return True

    def records(self) -> list[JobRecord]:
        return list(self.sim.records)
