"""The few Kubernetes API calls the backend makes, through the official client.

Every call asks the client for the raw response (``_preload_content=False``)
and decodes the JSON itself. For bindings this is required: the API server
answers a binding with a ``Status`` object, which the client's generated
model for ``V1Binding`` fails to deserialise (a long-standing client
issue). For lists it keeps rackwise independent of the generated models,
which change between client versions, and is cheaper.

Needs the ``k8s`` extra (``pip install 'rackwise[k8s]'``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rackwise.backends.base import BackendError
from rackwise.errors import MissingExtraError

INSTALL_HINT = "pip install 'rackwise[k8s]'"


def _client() -> Any:
    try:
        from kubernetes import client
    except ImportError:
        raise MissingExtraError(
            f"the kubernetes backend needs the kubernetes client: {INSTALL_HINT}") from None
    return client


class KubeApiError(BackendError):
    """The API server refused a call or could not be reached.

    Attributes:
        status: The HTTP status, or 0 when no answer came back.
    """

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class KubeApi:
    """Lists nodes and pods, binds pods and deletes pods.

    Args:
        host: API server URL; skips every configuration file (tests, proxies).
        kubeconfig: A kubeconfig file; default: ``$KUBECONFIG`` or
            ``~/.kube/config``, or the in-cluster service account when
            running in a pod.
        context: The kubeconfig context (default: its current one).
        timeout_s: Seconds before a call is given up.
    """

    def __init__(self, *, host: str | None = None, kubeconfig: str | Path | None = None,
                 context: str | None = None, timeout_s: float = 30.0) -> None:
        client = _client()
        self._errors: tuple[type[BaseException], ...] = (client.ApiException,)
        configuration = client.Configuration()
        if host is not None:
            configuration.host = host
        else:
            _load_config(configuration, kubeconfig, context)
        self.host: str = configuration.host
        self.timeout_s = timeout_s
        self.api_client = client.ApiClient(configuration)  # for callers that need more of the API
        self._core = client.CoreV1Api(self.api_client)
        self._client = client

    def close(self) -> None:
        """Release the client's connections and thread pool."""
        self.api_client.close()

    # --------------------------------------------------------------- calls
    def nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        """Every node (matching ``label_selector``), as JSON objects."""
        kwargs = {"label_selector": label_selector} if label_selector else {}
        return self._items("list nodes", self._core.list_node, **kwargs)

    def pods(self, *, namespace: str | None = None, field_selector: str | None = None,
             label_selector: str | None = None) -> list[dict[str, Any]]:
        """Pods in ``namespace`` (default: all) matching the selectors, as JSON objects."""
        kwargs = {key: value for key, value in (("field_selector", field_selector),
                                                ("label_selector", label_selector)) if value}
        if namespace is None:
            return self._items("list pods", self._core.list_pod_for_all_namespaces, **kwargs)
        return self._items(f"list pods in {namespace}", self._core.list_namespaced_pod,
                           namespace, **kwargs)

    def bind(self, namespace: str, name: str, node: str) -> None:
        """Assign a pending pod to a node (the Binding subresource)."""
        client = self._client
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node))
        self._call(f"bind pod {namespace}/{name} to {node}",
                   self._core.create_namespaced_pod_binding, name, namespace, body)

    def delete(self, namespace: str, name: str) -> None:
        """Delete a pod (its controller, if any, creates a replacement)."""
        self._call(f"delete pod {namespace}/{name}", self._core.delete_namespaced_pod,
                   name, namespace)

    # ------------------------------------------------------------- helpers
    def _items(self, what: str, method: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        payload = self._call(what, method, *args, **kwargs)
        items = payload.get("items") if isinstance(payload, dict) else None
        if not isinstance(items, list):
            raise KubeApiError(f"cannot {what} at {self.host}: the answer has no items")
        return [item for item in items if isinstance(item, dict)]

    def _call(self, what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            response = method(*args, _preload_content=False, _request_timeout=self.timeout_s,
                              **kwargs)
        except self._errors as exc:
            status = int(getattr(exc, "status", 0) or 0)
            raise KubeApiError(f"cannot {what}: {_reason(exc)}", status) from None
        except Exception as exc:  # urllib3 and socket errors: the server is unreachable
            raise KubeApiError(f"cannot {what} at {self.host}: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
        try:
            data = response.data
        finally:
            release = getattr(response, "release_conn", None)
            if release is not None:
                release()
        try:
            return json.loads(data) if data else {}
        except ValueError:
            raise KubeApiError(f"cannot {what}: the answer is not JSON") from None


def _reason(exc: BaseException) -> str:
    """The API server's own message (from its Status body), else the HTTP reason."""
    status = getattr(exc, "status", "")
    body = getattr(exc, "body", None)
    try:
        message = json.loads(body).get("message") if body else None
    except (ValueError, AttributeError):
        message = None
    return f"{status} {message or getattr(exc, 'reason', '') or exc}".strip()


def _load_config(configuration: Any, kubeconfig: str | Path | None, context: str | None) -> None:
    from kubernetes import config as loaded

    config: Any = loaded  # the client's loaders are untyped

    in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ \
        and not os.environ.get("KUBECONFIG")
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=str(kubeconfig) if kubeconfig else None,
                                    context=context, client_configuration=configuration)
    except config.ConfigException as exc:
        where = "the in-cluster service account" if in_cluster else (
            str(kubeconfig) if kubeconfig else "$KUBECONFIG or ~/.kube/config")
        raise KubeApiError(f"cannot configure the Kubernetes client from {where}: {exc}") from None
