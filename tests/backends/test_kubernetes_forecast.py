"""A forecast of a live Kubernetes cluster: the backend's snapshot through the same forward run.

The cluster is the in-repo API server on loopback (fake_apiserver.py),
read through the official client, as `rackwise forecast --backend
kubernetes` reads a real one.
"""

from __future__ import annotations

import pytest

pytest.importorskip("kubernetes")

from fake_apiserver import FakeApiServer

from rackwise.backends.base import snapshot_of_backend
from rackwise.backends.kubernetes import KubernetesBackend
from rackwise.backends.kubernetes_api import KubeApi
from rackwise.backends.kubernetes_objects import DURATION_KEY
from rackwise.engine.snapshot import from_json, to_json
from rackwise.forecast.forward import forward


def test_the_queue_of_a_kubernetes_cluster_is_forecast() -> None:
    with FakeApiServer() as server:
        server.add_node("n1", 4, zone="r1")
        server.add_node("n2", 4, zone="r1")
        server.add_pod("a", 4, node="n1", annotations={DURATION_KEY: "3600"})
        server.add_pod("b", 4, annotations={DURATION_KEY: "600"}, created=server.clock() - 20)
        server.add_pod("c", 2, annotations={DURATION_KEY: "600"}, created=server.clock() - 10)
        backend = KubernetesBackend(api=KubeApi(host=server.url, timeout_s=5), poll_s=0.02)
        try:
            snapshot = from_json(to_json(snapshot_of_backend(backend)))  # the file path, too
        finally:
            backend.close()
    assert snapshot.source == "kubernetes" and snapshot.taken_wall_s is not None
    assert [s.job_id for s in snapshot.running] == ["default/a"]
    assert [s.job_id for s in snapshot.pending] == ["default/b", "default/c"]
    rows = {row.job_id: row for row in forward(snapshot).jobs}
    now = snapshot.taken_at_s
    # FIFO: b takes the free node at once; c, behind it, waits for b's 600 s on that node.
    assert (rows["default/b"].start_s, rows["default/b"].nodes) == (now, ("n2",))
    assert rows["default/b"].finish_s == pytest.approx(now + 600.0)
    assert rows["default/c"].start_s == pytest.approx(now + 600.0)
    assert rows["default/c"].nodes == ("n2",)
    assert rows["default/a"].status == "running" and rows["default/a"].nodes == ("n1",)
