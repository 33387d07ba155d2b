"""Forecasts inside ``rackwise serve``: GET /forecast, and Prometheus gauges.

`ForecastService` is a round observer of the serve loop. At most every
``every_s`` wall seconds it snapshots what the loop observed (before the
round's decisions are applied) and forecasts under a fresh copy of the
policy in force; the serve loop's own policy object is never touched. The
latest forecast is served as JSON on ``GET /forecast`` (the same document
``rackwise forecast --json`` prints) from a small HTTP server of its own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rackwise.backends.base import Outcome, Snapshot
from rackwise.engine.snapshot import from_view
from rackwise.errors import RackwiseError
from rackwise.forecast.forward import forward
from rackwise.forecast.output import forecast_dict
from rackwise.policies.base import Decisions


class ForecastService:
    """Keeps the latest forecast of a serve loop and publishes it.

    Args:
        policy_name, policy_params: The policy to forecast under.
        every_s: Wall seconds between forecasts.
        node_names: The backend's node names.
        registry: A prometheus-client registry to add gauges to (None: no gauges).
    """

    def __init__(self, policy_name: str, policy_params: Mapping[str, Any], *, every_s: float = 30.0,
                 node_names: Sequence[str] = (), registry: Any = None) -> None:
        self.policy_name = policy_name
        self.policy_params = dict(policy_params)
        self.every_s = every_s
        self.node_names = tuple(node_names)
        self.latest: dict[str, Any] | None = None
        self.error: str | None = None
        self._made_wall: float | None = None
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._wait = self._age = None
        if registry is not None:
            import prometheus_client as client

            self._wait = client.Gauge("rackwise_forecast_wait_seconds",
                                      "Predicted wait until start of each pending job.",
                                      ["job_id"], registry=registry)
            self._age = client.Gauge("rackwise_forecast_age_seconds",
                                     "Wall seconds since the latest forecast.", registry=registry)
            self._age.set_function(lambda: time.time() - self._made_wall if self._made_wall else -1.0)

    def observe_round(self, snapshot: Snapshot, latency_s: float, decisions: Decisions,
                      outcomes: Sequence[Outcome]) -> None:
        wall = time.time()
        if self._made_wall is not None and wall - self._made_wall < self.every_s:
            return
        self.update(snapshot, wall)

    def update(self, snapshot: Snapshot, wall: float) -> None:
        """Forecast from an observed snapshot now (an error is kept, not raised)."""
        try:
            snap = from_view(snapshot.view, snapshot.now, source="serve",
                             policy_name=self.policy_name, policy_params=self.policy_params,
                             node_names=self.node_names, taken_wall_s=wall)
            data = forecast_dict(snap, forward(snap))
        except RackwiseError as exc:
            self.error = str(exc)
            return
        with self._lock:
            self.latest, self.error, self._made_wall = data, None, wall
        if self._wait is not None:
            self._wait.clear()
            for job in data["jobs"]:
                if job["status"] == "pending" and job["wait_s"] is not None:
                    self._wait.labels(job_id=job["job_id"]).set(job["wait_s"])

    def document(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) of GET /forecast."""
        with self._lock:
            if self.latest is None:
                return 503, {"error": self.error or "no forecast yet"}
            return 200, {**self.latest, "age_s": time.time() - (self._made_wall or 0.0)}

    def start_http(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve GET /forecast on ``addr:port`` (0: any free port); return the port."""
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = service.document() if self.path.split("?")[0] == "/forecast" \
                    else (404, {"error": "only /forecast is served here"})
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

        self._server = ThreadingHTTPServer((addr, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return int(self._server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._server = self._thread = None
