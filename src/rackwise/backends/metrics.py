"""Prometheus metrics of the serve loop, named after Kueue's where one fits.

Needs the ``serve`` extra (``prometheus-client``). Every exporter has its own
registry, so several can live in one process (tests). Waits are measured on
the workload clock, which is real time unless a replay speeds it up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rackwise.backends.base import Outcome, ServeHealth, Snapshot
from rackwise.errors import MissingExtraError
from rackwise.policies.base import Decisions

_WAIT_BUCKETS_S = (1, 10, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 259200, 604800)
_LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise MissingExtraError(
            "metrics need prometheus-client: pip install 'rackwise[serve]'") from None
    return prometheus_client


class ServeMetrics:
    """Gauges, counters and histograms of one serve loop; a `RoundObserver`.

    Exported (all prefixed ``rackwise_``): ``pending_workloads``,
    ``admitted_active_workloads``, ``gpus_allocated``, ``gpus_unavailable``,
    ``gpus_total``, ``admitted_workloads_total``, ``preempted_workloads_total``,
    ``finished_workloads_total``, ``backend_errors_total{action}``,
    ``admission_attempt_duration_seconds`` (decision latency of
    ``policy.schedule``) and ``admission_wait_time_seconds`` (queueing before
    each start); and the loop's health (`ServeHealth`): ``last_successful_poll_timestamp_seconds``,
    ``controller_errors_consecutive``, ``controller_outages_recovered``,
    ``serve_restarts_recovered`` and ``jobs_adopted``.
    """

    def __init__(self) -> None:
        client = _client()
        self.registry = client.CollectorRegistry()
        gauge, counter, histogram = client.Gauge, client.Counter, client.Histogram
        reg = self.registry
        self.pending = gauge("rackwise_pending_workloads", "Jobs waiting for GPUs.", registry=reg)
        self.active = gauge("rackwise_admitted_active_workloads", "Jobs holding GPUs.", registry=reg)
        self.gpus_allocated = gauge("rackwise_gpus_allocated", "GPUs held by managed jobs.",
                                    registry=reg)
        self.gpus_unavailable = gauge("rackwise_gpus_unavailable",
                                      "GPUs on nodes that are down or held by other jobs.",
                                      registry=reg)
        self.gpus_total = gauge("rackwise_gpus_total", "GPUs in the cluster.", registry=reg)
        self.admitted = counter("rackwise_admitted_workloads", "Jobs started or resumed.",
                                registry=reg)
        self.preempted = counter("rackwise_preempted_workloads", "Jobs preempted.", registry=reg)
        self.finished = counter("rackwise_finished_workloads", "Jobs finished.", registry=reg)
        self.errors = counter("rackwise_backend_errors", "Decisions the cluster manager refused.",
                              ["action"], registry=reg)
        self.latency = histogram("rackwise_admission_attempt_duration_seconds",
                                 "Wall time of one policy decision.",
                                 buckets=_LATENCY_BUCKETS_S, registry=reg)
        self.wait = histogram("rackwise_admission_wait_time_seconds",
                              "Queueing time before a start, on the workload clock.",
                              buckets=_WAIT_BUCKETS_S, registry=reg)
        self.last_poll = gauge("rackwise_last_successful_poll_timestamp_seconds",
                               "Unix time of the last read the cluster answered.", registry=reg)
        self.errors_now = gauge("rackwise_controller_errors_consecutive",
                                "Reads of the cluster failed since the last one that answered.",
                                registry=reg)
        self.outages = gauge("rackwise_controller_outages_recovered",
                             "Spells of failed reads the cluster came back from.", registry=reg)
        self.restarts = gauge("rackwise_serve_restarts_recovered",
                              "Starts of this serve that went on from its state file.", registry=reg)
        self.adopted = gauge("rackwise_jobs_adopted",
                             "Running jobs found on the cluster that this serve did not start.",
                             registry=reg)
        self._seen_finished: set[str] = set()
        self._server: Any = None
        self._thread: Any = None

    def observe_round(self, snapshot: Snapshot, latency_s: float, decisions: Decisions,
                      outcomes: Sequence[Outcome]) -> None:
        view = snapshot.view
        self.latency.observe(latency_s)
        held = sum(len(s.gpu_ids) for s in view.running.values())
        self.gpus_total.set(view.topology.n_gpus)
        self.gpus_allocated.set(held)
        self.gpus_unavailable.set(view.topology.n_gpus - view.n_free - held)
        started = {o.job_id for o in outcomes if o.action == "start" and o.ok}
        preempted = {o.job_id for o in outcomes if o.action == "preempt" and o.ok}
        self.pending.set(len(view.pending) - len(started - preempted) + len(preempted - started))
        self.active.set(len(view.running) + len(started - preempted) - len(preempted - started))
        for outcome in outcomes:
            if not outcome.ok:
                self.errors.labels(action=outcome.action).inc()
            elif outcome.action == "preempt":
                self.preempted.inc()
            else:
                self.admitted.inc()
                state = view.pending.get(outcome.job_id) or view.running.get(outcome.job_id)
                if state is not None:
                    self.wait.observe(max(0.0, snapshot.now - state.queued_since))
        new = set(snapshot.finished) - self._seen_finished
        self.finished.inc(len(new))
        self._seen_finished |= new

    def observe_health(self, health: ServeHealth) -> None:
        self.last_poll.set(health.last_poll_wall)
        self.errors_now.set(health.consecutive_errors)
        self.outages.set(health.outages_recovered)
        self.restarts.set(health.restarts_recovered)
        self.adopted.set(health.jobs_adopted)

    def start_http(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``addr:port`` (port 0: any free one); return the port."""
        client = _client()
        self._server, self._thread = client.start_http_server(port, addr=addr, registry=self.registry)
        return int(self._server.server_address[1])

    def close(self) -> None:
        """Stop the HTTP server, if one runs."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = self._thread = None
