"""A small simulated run snapshotted mid-way, for the forecast tests (imported by module name)."""

from __future__ import annotations

from rackwise.cluster.topology import uniform_cluster
from rackwise.engine.snapshot import ClusterSnapshot
from rackwise.forecast.from_sim import ForecastTap, snapshot_of
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job


def busy_jobs(n: int = 40) -> list[Job]:
    return [Job(f"j{i:02d}", submit_time=60.0 * i, n_gpus=1 + (i * 7) % 8,
                duration_s=600.0 + 97.0 * ((i * 13) % 17), group=("a", "b")[i % 2])
            for i in range(n)]


def take(policy: str = "fifo", at_s: float = 2_400.0, predictions: str = "history") -> ClusterSnapshot:
    tap = ForecastTap([at_s], lambda sim, t: snapshot_of(sim, taken_at_s=t,
                                                         predictions=predictions))  # type: ignore[arg-type]
    sim = Simulator(uniform_cluster(2, 8, 2), busy_jobs(), make_policy(policy), observers=[tap])
    sim.run()
    return tap.taken[0].snapshot
