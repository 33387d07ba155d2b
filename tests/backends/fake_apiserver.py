"""A small Kubernetes API server on loopback, for testing the Kubernetes backend.

It speaks the subset of the core/v1 API the backend uses, as JSON over
HTTP: list nodes (with ``labelSelector``), list pods in all namespaces or
one (with ``fieldSelector`` and ``labelSelector``), bind a pod, delete a
pod; and, for a dry run of the opt-in live test, list and create
namespaces and create pods. The official ``kubernetes`` client talks to it
unchanged.

Time-based behaviour is applied lazily on every request, so no background
thread mutates the store: a pod annotated ``fake.rackwise.io/run-s``
succeeds that many seconds after it was bound; a deleted pod terminates
after ``delete_grace_s``; a pod labelled ``fake.rackwise.io/recreate``
comes back as a new pending pod once deleted (what a Job controller does).

Like the real API server, binding does not check capacity. The fake
records every over-commitment in ``violations`` so tests can assert there
were none, and answers a binding with a ``Status`` object, not a Binding.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

GPU = "nvidia.com/gpu"
RUN_S = "fake.rackwise.io/run-s"
RECREATE = "fake.rackwise.io/recreate"
ACTIVE_PHASES = ("Pending", "Running")

_POD_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)(/binding)?$")
_NS_PODS_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_FIELDS = {
    "spec.schedulerName": lambda p: p["spec"].get("schedulerName", "default-scheduler"),
    "spec.nodeName": lambda p: p["spec"].get("nodeName", ""),
    "status.phase": lambda p: p["status"].get("phase", ""),
    "metadata.name": lambda p: p["metadata"]["name"],
    "metadata.namespace": lambda p: p["metadata"]["namespace"],
}


def stamp(wall: float) -> str:
    """RFC 3339 in whole seconds, as the API server writes timestamps."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SelectorError(ValueError):
    """A selector the fake (like the real server) cannot evaluate."""


def _terms(selector: str) -> list[tuple[str, str, str]]:
    terms = []
    for raw in filter(None, (part.strip() for part in selector.split(","))):
        for op in ("!=", "==", "="):
            if op in raw:
                key, value = raw.split(op, 1)
                terms.append((key.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            terms.append((raw.lstrip("!"), "absent" if raw.startswith("!") else "exists", ""))
    return terms


def field_match(obj: dict[str, Any], selector: str) -> bool:
    for key, op, value in _terms(selector):
        if key not in _FIELDS or op in ("exists", "absent"):
            raise SelectorError(f'"{key}" is not a known field selector')
        actual = _FIELDS[key](obj)
        if (actual == value) != (op == "="):
            return False
    return True


def label_match(obj: dict[str, Any], selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for key, op, value in _terms(selector):
        if (op == "exists" and key not in labels) or (op == "absent" and key in labels):
            return False
        if (op == "=" and labels.get(key) != value) or (op == "!=" and labels.get(key) == value):
            return False
    return True


class FakeApiServer:
    """An in-memory API server on 127.0.0.1; use as a context manager.

    Attributes:
        url: ``http://127.0.0.1:PORT``.
        bindings: ``(namespace, pod, node)`` in the order they were accepted.
        deletions: ``(namespace, pod)`` in the order they were asked for.
        violations: One line per binding that over-committed a node's GPUs.
        refuse: Pods ``(namespace, name)`` whose binding is answered 500.
        requests: Every request as ``(method, path)``.
    """

    def __init__(self, *, delete_grace_s: float = 0.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.delete_grace_s = delete_grace_s
        self.clock = clock
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.bindings: list[tuple[str, str, str]] = []
        self.deletions: list[tuple[str, str]] = []
        self.violations: list[str] = []
        self.refuse: set[tuple[str, str]] = set()
        self.requests: list[tuple[str, str]] = []
        self.namespaces: set[str] = {"default"}
        self.lock = threading.RLock()
        self._version = itertools.count(1)
        self._uid = itertools.count(1)
        self._bound_at: dict[tuple[str, str], float] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # ------------------------------------------------------------ lifecycle
    def start(self) -> FakeApiServer:
        handler = type("Handler", (_Handler,), {"api": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -------------------------------------------------------------- objects
    def add_node(self, name: str, gpus: int, *, zone: str | None = None,
                 product: str | None = None, ready: bool = True, unschedulable: bool = False,
                 labels: dict[str, str] | None = None) -> None:
        all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
        if zone is not None:
            all_labels["topology.kubernetes.io/zone"] = zone
        if product is not None:
            all_labels["nvidia.com/gpu.product"] = product
        with self.lock:
            self.nodes[name] = {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": all_labels, "uid": f"node-{next(self._uid)}",
                             "resourceVersion": str(next(self._version))},
                "spec": {"unschedulable": True} if unschedulable else {},
                "status": {"allocatable": {"cpu": "32", GPU: str(gpus)},
                           "capacity": {"cpu": "32", GPU: str(gpus)},
                           "conditions": [{"type": "Ready",
                                           "status": "True" if ready else "False"}]},
            }

    def add_pod(self, name: str, gpus: int, *, namespace: str = "default",
                scheduler: str = "rackwise", job: str | None = None, size: int | None = None,
                node: str | None = None, phase: str | None = None, created: float | None = None,
                run_s: float | None = None, recreate: bool = False,
                labels: dict[str, str] | None = None,
                annotations: dict[str, str] | None = None) -> dict[str, Any]:
        """Create a pod asking for ``gpus`` GPUs; bound to ``node`` if given."""
        all_labels = dict(labels or {})
        all_annotations = dict(annotations or {})
        if job is not None:
            all_labels["rackwise.io/job"] = job
        if size is not None:
            all_annotations["rackwise.io/job-size"] = str(size)
        if run_s is not None:
            all_annotations[RUN_S] = str(run_s)
        if recreate:
            all_labels[RECREATE] = "true"
        resources = {"limits": {GPU: str(gpus)}} if gpus else {}
        spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [
            {"name": "main", "image": "trainer", "resources": resources}]}
        if node is not None:
            spec["nodeName"] = node
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": all_labels,
                         "annotations": all_annotations, "uid": f"pod-{next(self._uid)}",
                         "creationTimestamp": stamp(self.clock() if created is None else created)},
            "spec": spec,
            "status": {"phase": phase or ("Running" if node else "Pending")},
        }
        with self.lock:
            if (namespace, name) in self.pods:
                raise ValueError(f"pod {namespace}/{name} exists")
            pod["metadata"]["resourceVersion"] = str(next(self._version))
            self.pods[(namespace, name)] = pod
            if node is not None:
                self._bound_at[(namespace, name)] = self.clock()
                self._check_capacity(node)
        return pod

    def set_phase(self, name: str, phase: str, namespace: str = "default") -> None:
        with self.lock:
            self.pods[(namespace, name)]["status"]["phase"] = phase

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        with self.lock:
            self._tick()
            return self.pods.get((namespace, name))

    def node_of(self, name: str, namespace: str = "default") -> str | None:
        pod = self.pod(name, namespace)
        return None if pod is None else pod["spec"].get("nodeName")

    def gpus_in_use(self) -> dict[str, int]:
        """GPUs asked for by active pods bound to each node."""
        with self.lock:
            self._tick()
            used = dict.fromkeys(self.nodes, 0)
            for pod in self.pods.values():
                node = pod["spec"].get("nodeName")
                if node in used and pod["status"]["phase"] in ACTIVE_PHASES:
                    used[node] += _gpus(pod)
            return used

    # -------------------------------------------------------------- behaviour
    def _tick(self) -> None:
        now = self.clock()
        for key, pod in list(self.pods.items()):
            deleted = pod["metadata"].get("deletionTimestamp")
            if deleted is not None:
                if now >= pod["metadata"]["_deleted_at"] + self.delete_grace_s:
                    del self.pods[key]
                    self._bound_at.pop(key, None)
                    if (pod["metadata"].get("labels") or {}).get(RECREATE):
                        self._recreate(pod)
                continue
            run_s = (pod["metadata"].get("annotations") or {}).get(RUN_S)
            bound = self._bound_at.get(key)
            if (run_s is not None and bound is not None and pod["status"]["phase"] == "Running"
                    and now >= bound + float(run_s)):
                pod["status"]["phase"] = "Succeeded"

    def _recreate(self, old: dict[str, Any]) -> None:
        meta = old["metadata"]
        base, _, count = meta["name"].partition("-r")
        name = f"{base}-r{int(count or 0) + 1}"
        annotations = dict((meta.get("annotations") or {}).items())
        fresh = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": meta["namespace"],
                         "labels": dict(meta.get("labels") or {}), "annotations": annotations,
                         "uid": f"pod-{next(self._uid)}", "creationTimestamp": stamp(self.clock()),
                         "resourceVersion": str(next(self._version))},
            "spec": {k: v for k, v in old["spec"].items() if k != "nodeName"},
            "status": {"phase": "Pending"},
        }
        self.pods[(meta["namespace"], name)] = fresh

    def _check_capacity(self, node: str) -> None:
        allocatable = int(self.nodes[node]["status"]["allocatable"].get(GPU, "0"))
        used = sum(_gpus(p) for p in self.pods.values()
                   if p["spec"].get("nodeName") == node and p["status"]["phase"] in ACTIVE_PHASES)
        if used > allocatable:
            self.violations.append(f"{node}: {used} GPUs bound, {allocatable} allocatable")

    def _bind(self, namespace: str, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        pod = self.pods.get((namespace, name))
        target = (body.get("target") or {}).get("name")
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return 404, _status(404, "NotFound", f'pods "{name}" not found')
        if (body.get("metadata") or {}).get("name") != name:
            return 400, _status(400, "BadRequest", "binding name does not match the pod")
        if (namespace, name) in self.refuse:
            return 500, _status(500, "InternalError", f"refusing to bind {name} (test)")
        if pod["spec"].get("nodeName"):
            return 409, _status(409, "Conflict",
                                f"pod {name} is already assigned to node \"{pod['spec']['nodeName']}\"")
        if target not in self.nodes:
            return 404, _status(404, "NotFound", f'nodes "{target}" not found')
        pod["spec"]["nodeName"] = target
        pod["status"]["phase"] = "Running"  # the kubelet's part, done at once
        pod["metadata"]["resourceVersion"] = str(next(self._version))
        self._bound_at[(namespace, name)] = self.clock()
        self.bindings.append((namespace, name, target))
        self._check_capacity(target)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                     "status": "Success", "code": 201}

    def _create_pod(self, namespace: str, pod: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        meta = pod.setdefault("metadata", {})
        name = meta.get("name", "")
        if namespace not in self.namespaces:
            return 404, _status(404, "NotFound", f'namespaces "{namespace}" not found')
        if (namespace, name) in self.pods:
            return 409, _status(409, "AlreadyExists", f'pods "{name}" already exists')
        meta.update(namespace=namespace, uid=f"pod-{next(self._uid)}",
                    creationTimestamp=stamp(self.clock()),
                    resourceVersion=str(next(self._version)))
        pod.setdefault("spec", {}).setdefault("schedulerName", "default-scheduler")
        pod["status"] = {"phase": "Pending"}
        self.pods[(namespace, name)] = pod
        return 201, _public(pod)

    def _delete(self, namespace: str, name: str) -> tuple[int, dict[str, Any]]:
        pod = self.pods.get((namespace, name))
        if pod is None:
            return 404, _status(404, "NotFound", f'pods "{name}" not found')
        self.deletions.append((namespace, name))
        if not pod["metadata"].get("deletionTimestamp"):
            now = self.clock()
            pod["metadata"]["deletionTimestamp"] = stamp(now)
            pod["metadata"]["_deleted_at"] = now
        self._tick()
        return 200, _public(pod)

    def handle(self, method: str, raw_path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        url = urlsplit(raw_path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        path = url.path
        with self.lock:
            self.requests.append((method, path))
            self._tick()
            try:
                if method == "GET" and path == "/api/v1/nodes":
                    items = [n for n in self.nodes.values()
                             if label_match(n, query.get("labelSelector", ""))]
                    return 200, self._list("NodeList", items)
                namespaced = _NS_PODS_PATH.match(path)
                if method == "GET" and (path == "/api/v1/pods" or namespaced):
                    items = [p for p in self.pods.values()
                             if (not namespaced or p["metadata"]["namespace"] == namespaced[1])
                             and field_match(p, query.get("fieldSelector", ""))
                             and label_match(p, query.get("labelSelector", ""))]
                    return 200, self._list("PodList", items)
            except SelectorError as exc:
                return 400, _status(400, "BadRequest", str(exc))
            if namespaced and method == "POST":
                return self._create_pod(namespaced[1], json.loads(body or b"{}"))
            if path == "/api/v1/namespaces" and method == "GET":
                return 200, self._list("NamespaceList", [
                    {"metadata": {"name": name}} for name in sorted(self.namespaces)])
            if path == "/api/v1/namespaces" and method == "POST":
                name = json.loads(body or b"{}").get("metadata", {}).get("name", "")
                self.namespaces.add(name)
                return 201, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            gone = re.match(r"^/api/v1/namespaces/([^/]+)$", path)
            if gone and method == "DELETE" and gone[1] in self.namespaces:
                self.namespaces.discard(gone[1])
                for key in [k for k in self.pods if k[0] == gone[1]]:
                    del self.pods[key]
                return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
            one = _POD_PATH.match(path)
            if one and method == "POST" and one[3]:
                return self._bind(one[1], one[2], json.loads(body or b"{}"))
            if one and method == "DELETE" and not one[3]:
                return self._delete(one[1], one[2])
            if one and method == "GET" and not one[3]:
                pod = self.pods.get((one[1], one[2]))
                return (200, _public(pod)) if pod else (404, _status(404, "NotFound", "not found"))
        return 404, _status(404, "NotFound", f"the fake does not serve {method} {path}")

    def _list(self, kind: str, items: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": kind,
                "metadata": {"resourceVersion": str(next(self._version))},
                "items": [_public(item) for item in items]}


def _public(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep-enough copy without the fake's private bookkeeping keys."""
    meta = {k: v for k, v in obj["metadata"].items() if not k.startswith("_")}
    return json.loads(json.dumps({**obj, "metadata": meta}))


def _gpus(pod: dict[str, Any]) -> int:
    return sum(int((c.get("resources") or {}).get("limits", {}).get(GPU, "0"))
               for c in pod["spec"].get("containers") or [])


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class _Handler(BaseHTTPRequestHandler):
    api: FakeApiServer
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        code, payload = self.api.handle(self.command, self.path, body)
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass
