"""With exact durations and no further arrivals, the forecast is what the simulation then does.

For every registered policy: a run is snapshotted at an instant after its
last arrival (live policy state included), the snapshot is simulated
forward, and every job's predicted next start, GPUs and finish must equal
the continuing run's, to the last bit.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.engine.snapshot import from_json, to_json
from rackwise.errors import MissingExtraError
from rackwise.forecast.forward import forward
from rackwise.forecast.from_sim import ForecastTap, snapshot_of
from rackwise.policies.base import Decisions, PolicyWrapper
from rackwise.policies.registry import all_policies, make_policy
from rackwise.sim.engine import Simulator
from strategies import clusters_and_workloads

POLICIES = sorted(all_policies())


class _Log(PolicyWrapper):
    """Notes every start a policy decides, with its instant and GPUs."""

    def __init__(self, inner):  # type: ignore[no-untyped-def]
        super().__init__(inner)
        self.starts: list[tuple[float, str, tuple[int, ...]]] = []

    def schedule(self, view, now) -> Decisions:  # type: ignore[no-untyped-def]
        decisions = self.inner.schedule(view, now)
        self.starts.extend((now, s.job_id, s.gpu_ids) for s in decisions.start)
        return decisions


def check_exact(name: str, topology, jobs, offset_s: float, via_json: bool) -> None:  # type: ignore[no-untyped-def]
    last_submit = max(job.submit_time for job in jobs)
    at = last_submit + offset_s
    tap = ForecastTap([at], lambda sim, t: snapshot_of(sim, taken_at_s=t, predictions="exact"))
    log = _Log(make_policy(name))
    sim = Simulator(topology, jobs, log, seed=1, observers=[tap])  # type: ignore[arg-type]
    sim.run()
    if not tap.taken:
        return  # the run was over before the instant
    snapshot = tap.taken[0].snapshot
    if via_json:
        snapshot = from_json(to_json(snapshot))
    forecast = forward(snapshot)
    next_start: dict[str, tuple[float, tuple[int, ...]]] = {}
    for now, job_id, gpus in log.starts:
        if now > at and job_id not in next_start:
            next_start[job_id] = (now, gpus)
    finish = {r.job_id: r.finish_time for r in sim.records}
    pending = {s.job_id for s in snapshot.pending}
    assert {r.job_id for r in forecast.jobs} == pending | {s.job_id for s in snapshot.running}
    for row in forecast.jobs:
        assert row.finish_s == finish[row.job_id], (name, row)
        if row.job_id in pending:
            assert (row.start_s, row.gpu_ids) == next_start[row.job_id], (name, row)


@pytest.mark.parametrize("name", POLICIES)
@settings(max_examples=25)
@given(case=clusters_and_workloads(max_jobs=16), offset_s=st.sampled_from([0.0, 1.0, 333.0, 2_000.0]),
       via_json=st.booleans())
def test_forecast_equals_what_happens(name: str, case, offset_s: float, via_json: bool) -> None:  # type: ignore[no-untyped-def]
    try:
        make_policy(name)
    except MissingExtraError as exc:
        pytest.skip(f"policy '{name}' needs an optional extra: {exc}")
    topology, jobs = case
    check_exact(name, topology, jobs, offset_s, via_json)
