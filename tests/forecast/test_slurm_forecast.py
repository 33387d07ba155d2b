"""End to end on a real loopback Slurm cluster: the forecast made at submission vs real starts.

A ten-job window is submitted held (trace replayed at 3600x: a trace hour
per real second); the Slurm backend's snapshot is taken at once, with later
submissions as known arrivals, and forecast under FIFO. Then the serve loop
runs FIFO for real. Slurm takes about 0.7-1 s (0.7-1 trace hour) from release
to a running job, and those delays add up along the queue, so the forecast
is early by a growing margin; the order of starts must match exactly.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from slurm_cluster import LoopbackSlurm

from rackwise.backends.base import serve, snapshot_of_backend
from rackwise.backends.slurm import SlurmBackend
from rackwise.backends.slurm_cli import SlurmCli
from rackwise.backends.slurm_jobs import submit_held
from rackwise.engine.snapshot import from_json, to_json
from rackwise.forecast.forward import forward
from rackwise.policies.registry import make_policy
from rackwise.workload.job import Job

# The backend tests' fixtures (a module-scoped loopback cluster), used here as they are.
_spec = importlib.util.spec_from_file_location(
    "backend_fixtures", Path(__file__).resolve().parents[1] / "backends" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)
slurm_cluster = _fixtures.slurm_cluster
slurm = _fixtures.slurm

SCALE = 3600.0
H = 3600.0


def window() -> list[Job]:
    spec = [(0.0, 4, 3), (0.1, 8, 2), (0.2, 4, 4), (0.3, 8, 2), (0.4, 2, 3), (0.5, 16, 1),
            (0.6, 4, 2), (0.7, 8, 2)]
    return [Job(f"f{i + 1}", submit_time=t * H, n_gpus=n, duration_s=d * H)
            for i, (t, n, d) in enumerate(spec)]


def test_forecast_at_submission_against_real_starts(slurm: LoopbackSlurm, tmp_path: Path) -> None:
    cli = SlurmCli(env={"SLURM_CONF": str(slurm.conf)})
    jobs = window()
    out = tmp_path / "out"
    out.mkdir()
    submit_held(cli, jobs, time_scale=SCALE, output_dir=out)
    backend = SlurmBackend(cli=cli, poll_s=0.2)
    snapshot = from_json(to_json(snapshot_of_backend(backend)))  # the file path, too
    assert snapshot.source == "slurm" and snapshot.taken_wall_s is not None
    assert {j.job_id for j in (*snapshot.pending, *snapshot.arrivals)} | \
        {s.job_id for s in snapshot.running} == {j.job_id for j in jobs}
    predicted = {row.job_id: row for row in forward(snapshot).jobs}

    result = serve(backend, make_policy("fifo"), poll_s=None)
    actual = {r.job_id: r.first_start for r in result.records}
    assert set(actual) == set(predicted)
    errors_h = {job_id: (actual[job_id] - predicted[job_id].start_s) / H for job_id in actual}
    (tmp_path / "errors.json").write_text(json.dumps(errors_h))
    print("forecast start error (trace hours, actual - predicted):", json.dumps(errors_h))
    order_predicted = sorted(predicted, key=lambda j: (predicted[j].start_s, j))
    order_actual = sorted(actual, key=lambda j: (actual[j], j))
    assert order_predicted == order_actual
    # What the forecast does not know: the time until the loop's first round (the
    # snapshot is taken before it starts) and Slurm's start latency (about a trace
    # hour per start, adding up along the queue). Never early, never later than those.
    for rank, job_id in enumerate(order_actual, start=1):
        assert -0.25 <= errors_h[job_id] <= 2.0 + 1.5 * rank, (job_id, errors_h)
