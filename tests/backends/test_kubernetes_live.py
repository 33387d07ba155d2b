"""Opt-in: one scheduling round on a real Kubernetes cluster.

Runs only when ``KUBECONFIG`` is set. It lists the nodes, creates one
1-GPU pod in a dedicated namespace (``RACKWISE_TEST_NAMESPACE``, default
``rackwise-test``; created if missing and then removed) under a scheduler
name of its own, so a deployed rackwise leaves it alone, runs one round of
FIFO and checks that the pod was bound to a GPU node. Everything it creates
is deleted at the end. The identity in the kubeconfig needs the rights in
``deploy/kubernetes/rbac.yaml`` plus create/delete on pods and namespaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
import warnings
from typing import Any

import pytest

from rackwise.engine.seeding import policy_rng

pytestmark = pytest.mark.skipif(not os.environ.get("KUBECONFIG"),
                                reason="set KUBECONFIG to run against a real cluster")


def _json(response: Any) -> Any:
    try:
        return json.loads(response.data)
    finally:
        response.release_conn()


def test_one_round_binds_a_gpu_pod_on_a_real_cluster() -> None:
    pytest.importorskip("kubernetes")
    import urllib3
    from kubernetes import client

    from rackwise.backends.kubernetes import KubernetesBackend
    from rackwise.backends.kubernetes_api import KubeApi
    from rackwise.backends.kubernetes_objects import node_gpus
    from rackwise.policies.registry import make_policy

    with warnings.catch_warnings():
        # Test clusters often use self-signed certificates with verification off.
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
        api = KubeApi()
        core = client.CoreV1Api(api.api_client)
        namespace = os.environ.get("RACKWISE_TEST_NAMESPACE", "rackwise-test")
        scheduler = f"rackwise-test-{uuid.uuid4().hex[:8]}"
        pod_name = f"{scheduler}-probe"
        created_namespace = False
        try:
            nodes = api.nodes()
            assert nodes and all(n["metadata"].get("name") for n in nodes)
            if not any(node_gpus(n) for n in nodes):
                pytest.skip("the cluster has no node with allocatable nvidia.com/gpu")
            existing = {n["metadata"]["name"] for n in _json(
                core.list_namespace(_preload_content=False))["items"]}
            if namespace not in existing:
                core.create_namespace({"metadata": {"name": namespace}}, _preload_content=False)
                created_namespace = True
            core.create_namespaced_pod(namespace, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod_name, "labels": {"rackwise.io/job": "probe"}},
                "spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                         "containers": [{"name": "main",
                                         "image": os.environ.get("RACKWISE_TEST_IMAGE",
                                                                 "busybox:1.36"),
                                         "command": ["sleep", "5"],
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            }, _preload_content=False)
            backend = KubernetesBackend(api=api, scheduler_name=scheduler, namespace=namespace)
            job_id = f"{namespace}/probe"
            deadline = time.monotonic() + 30
            snapshot = backend.observe()
            while job_id not in snapshot.view.pending and time.monotonic() < deadline:
                time.sleep(0.5)
                snapshot = backend.observe()
            assert job_id in snapshot.view.pending
            if snapshot.view.n_free == 0:
                pytest.skip("no GPU is free on the cluster")
            policy = make_policy("fifo")
            policy.reset(snapshot.view, policy_rng(0))
            outcomes = backend.apply(policy.schedule(snapshot.view, snapshot.now), snapshot)
            assert [(o.job_id, o.ok) for o in outcomes] == [(job_id, True)], outcomes
            pod = _json(core.read_namespaced_pod(pod_name, namespace, _preload_content=False))
            assert pod["spec"]["nodeName"] in backend.node_names
            assert pod["spec"]["nodeName"] == outcomes[0].nodes[0]
        finally:
            with contextlib.suppress(Exception):  # never created, or already gone
                api.delete(namespace, pod_name)
            if created_namespace:
                core.delete_namespace(namespace, _preload_content=False)
            api.close()
