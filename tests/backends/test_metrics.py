"""The Prometheus exporter of the serve loop, scraped over HTTP on 127.0.0.1."""

from __future__ import annotations

import urllib.request

import pytest

from rackwise.backends.base import serve
from rackwise.backends.fake import FakeBackend
from rackwise.cluster.topology import uniform_cluster
from rackwise.policies.registry import make_policy
from rackwise.workload.job import Job

pytest.importorskip("prometheus_client")

from rackwise.backends.metrics import ServeMetrics


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def test_metrics_endpoint_reports_the_loop() -> None:
    jobs = [Job("a", 0.0, 4, 100.0), Job("b", 1.0, 4, 50.0), Job("c", 2.0, 2, 10.0)]
    metrics = ServeMetrics()
    port = metrics.start_http(0)
    try:
        seen: list[tuple[float, float]] = []

        class Probe:
            def observe_round(self, *args: object) -> None:
                values = scrape(port)
                seen.append((values["rackwise_pending_workloads"], values["rackwise_gpus_allocated"]))

        serve(FakeBackend(uniform_cluster(1, 4, 1), jobs), make_policy("fifo"), poll_s=None,
              observers=[metrics, Probe()])
        values = scrape(port)
    finally:
        metrics.close()
    assert values["rackwise_admitted_workloads_total"] == 3
    assert values["rackwise_finished_workloads_total"] == 3
    assert values["rackwise_preempted_workloads_total"] == 0
    assert values["rackwise_gpus_total"] == 4
    assert values["rackwise_controller_errors_consecutive"] == 0
    assert values["rackwise_last_successful_poll_timestamp_seconds"] > 0
    assert values["rackwise_controller_outages_recovered"] == 0
    assert values["rackwise_pending_workloads"] == 0
    assert values["rackwise_admission_attempt_duration_seconds_count"] == len(seen)
    # b waited from t=1 until a finished at t=100; c from t=2 until b finished at t=150.
    assert values["rackwise_admission_wait_time_seconds_sum"] == pytest.approx(99 + 148)
    assert (2.0, 4.0) in seen  # at t=2: b and c queued behind a, 4 GPUs busy
