"""The serve loop's forecast: GET /forecast and the Prometheus gauges."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from rackwise.backends.base import serve
from rackwise.backends.fake import FakeBackend
from rackwise.backends.metrics import ServeMetrics
from rackwise.cluster.topology import uniform_cluster
from rackwise.forecast.service import ForecastService
from rackwise.policies.registry import make_policy
from rackwise.workload.job import Job


def _get(port: int, path: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        body = json.loads(error.read())
        error.close()
        return error.code, body


def test_endpoint_and_gauges() -> None:
    jobs = [Job(f"j{i}", 0.0, 4, 100.0 * (i + 1)) for i in range(6)]  # 24 GPUs asked, 8 there
    metrics = ServeMetrics()
    service = ForecastService("fifo", {}, every_s=0.0, registry=metrics.registry)
    port = service.start_http(0)
    try:
        assert _get(port, "/forecast")[0] == 503
        backend = FakeBackend(uniform_cluster(2, 4, 2), jobs)
        service.update(backend.observe(), wall=1.0)  # the first round's view: all six queued
        status, body = _get(port, "/forecast")
        assert status == 200 and body["policy"] == "fifo"
        waits = {job["job_id"]: job["wait_s"] for job in body["jobs"]}
        assert waits["j0"] == 0.0 and waits["j2"] == 100.0 and waits["j4"] == 400.0
        text = metrics.registry.get_sample_value("rackwise_forecast_wait_seconds", {"job_id": "j4"})
        assert text == 400.0
        assert metrics.registry.get_sample_value("rackwise_forecast_age_seconds") > 0
        assert _get(port, "/other")[0] == 404
        # what the loop then does agrees with what was forecast
        result = serve(backend, make_policy("fifo"), poll_s=None, observers=[service])
        starts = {r.job_id: r.first_start for r in result.records}
        assert starts == dict(waits.items())
    finally:
        service.close()


def test_bad_state_is_kept_as_an_error() -> None:
    service = ForecastService("no-such-policy", {}, every_s=0.0)
    backend = FakeBackend(uniform_cluster(1, 4, 1), [Job("a", 0.0, 1, 10.0)])
    service.update(backend.observe(), wall=1.0)
    assert service.document()[0] == 503 and "unknown policy" in service.document()[1]["error"]
