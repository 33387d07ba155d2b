"""Reading Kubernetes nodes and pods as rackwise sees them (pure functions, JSON in).

Nodes become a `Topology`: GPUs from ``status.allocatable`` of the GPU
resource, racks from a topology label, GPU types from a product label.
Pods become gangs: the pods of one job share the ``rackwise.io/job`` label
and the job has ``rackwise.io/job-size`` pods; a pod without the label is a
job of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rackwise.backends.slurm_topology import natural_key
from rackwise.cluster.topology import Links, Node, Topology
from rackwise.errors import InputError

GPU_RESOURCE = "nvidia.com/gpu"
JOB_LABEL = "rackwise.io/job"
SIZE_KEY = "rackwise.io/job-size"
DURATION_KEY = "rackwise.io/duration-s"
ACTIVE_PHASES = frozenset({"Pending", "Running", "Unknown"})
# rackwise's GPU types, looked for in product labels such as "Tesla-V100-SXM2-16GB".
KNOWN_GPU_TYPES = ("h100", "a100", "v100", "p100", "k80")


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return meta(obj).get("labels") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def pod_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name)."""
    return str(meta(pod).get("namespace") or "default"), str(meta(pod).get("name"))


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def node_name(pod: Mapping[str, Any]) -> str | None:
    return (pod.get("spec") or {}).get("nodeName") or None


def terminating(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def parse_time(value: Any) -> float | None:
    """Unix seconds of an RFC 3339 timestamp (``2024-05-01T12:00:00Z``), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def quantity(value: Any) -> int:
    """A whole-number resource quantity (``"4"``); anything else counts as 0."""
    try:
        return max(0, int(float(str(value))))
    except ValueError:
        return 0


def pod_gpus(pod: Mapping[str, Any], resource: str = GPU_RESOURCE) -> int:
    """GPUs a pod holds while it runs: its containers' sum, or its largest init container."""

    def asked(container: Mapping[str, Any]) -> int:
        resources = container.get("resources") or {}
        return max(quantity((resources.get("limits") or {}).get(resource, 0)),
                   quantity((resources.get("requests") or {}).get(resource, 0)))

    spec = pod.get("spec") or {}
    main = sum(asked(c) for c in spec.get("containers") or [])
    init = max((asked(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def gpu_type(product: str | None, default: str) -> str:
    """rackwise's GPU type for a product label; ``default`` when none is recognised."""
    lowered = (product or "").lower()
    return next((known for known in KNOWN_GPU_TYPES if known in lowered), default)


def node_unusable(node: Mapping[str, Any] | None) -> str | None:
    """Why no new pod may go to this node (missing, cordoned, not Ready), or None."""
    if node is None:
        return "gone"
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned"
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return None if condition.get("status") == "True" else "not Ready"
    return "not Ready"


def node_gpus(node: Mapping[str, Any], resource: str = GPU_RESOURCE) -> int:
    return quantity(((node.get("status") or {}).get("allocatable") or {}).get(resource, 0))


def discover(nodes: Iterable[Mapping[str, Any]], *, rack_label: str, gpu_type_label: str,
             default_gpu_type: str = "v100", resource: str = GPU_RESOURCE,
             links: Links | None = None) -> tuple[Topology, tuple[str, ...]]:
    """A topology of the nodes with allocatable GPUs.

    Racks are the distinct values of ``rack_label`` in natural order; nodes
    without it share one last rack. Nodes are in natural name order within
    a rack.

    Returns:
        The topology and the Kubernetes name of each of its nodes, by node id.

    Raises:
        InputError: when no node has allocatable GPUs.
    """
    racks: dict[str | None, list[Mapping[str, Any]]] = {}
    for node in nodes:
        if node_gpus(node, resource) > 0:
            racks.setdefault(labels_of(node).get(rack_label), []).append(node)
    if not racks:
        raise InputError(f"no node has allocatable {resource}", field="nodes")
    named = sorted((r for r in racks if r is not None), key=natural_key)
    order: list[str | None] = [*named, None] if None in racks else list(named)
    built: list[Node] = []
    names: list[str] = []
    for rack_id, rack in enumerate(order):
        for node in sorted(racks[rack], key=lambda n: natural_key(str(meta(n).get("name")))):
            first = built[-1].first_gpu + built[-1].n_gpus if built else 0
            kind = gpu_type(labels_of(node).get(gpu_type_label), default_gpu_type)
            built.append(Node(len(built), rack_id, kind, node_gpus(node, resource), first))
            names.append(str(meta(node).get("name")))
    return Topology(tuple(built), links or Links(), name="kubernetes"), tuple(names)


@dataclass
class Gang:
    """The pods of one rackwise job, as listed this round.

    Attributes:
        job_id: ``namespace/job`` (the label's value, or the pod's name).
        size: Pods the job must have before it may start.
        pods: Every pod of the job, active or not.
    """

    job_id: str
    namespace: str
    size: int
    pods: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def active(self) -> list[Mapping[str, Any]]:
        """Pods that are pending or running and not being deleted."""
        return [p for p in self.pods if phase(p) in ACTIVE_PHASES and not terminating(p)]

    def annotation(self, key: str) -> str | None:
        for pod in self.pods:
            value = annotations_of(pod).get(key, labels_of(pod).get(key))
            if value is not None:
                return str(value)
        return None


def group(pods: Iterable[Mapping[str, Any]]) -> dict[str, Gang]:
    """Pods grouped into jobs by ``rackwise.io/job``, each gang's pods in name order."""
    gangs: dict[str, Gang] = {}
    for pod in sorted(pods, key=pod_key):
        namespace, name = pod_key(pod)
        job_id = f"{namespace}/{labels_of(pod).get(JOB_LABEL) or name}"
        gang = gangs.get(job_id)
        if gang is None:
            gang = gangs[job_id] = Gang(job_id, namespace, 1)
        gang.pods.append(pod)
    for gang in gangs.values():
        size = gang.annotation(SIZE_KEY)
        gang.size = max(1, quantity(size)) if size is not None else 1
    return gangs


def pack(requests: Sequence[int], capacity: Mapping[str, int]) -> list[str] | None:
    """A node for each pod so that no node gets more GPUs than its capacity, or None.

    First fit, largest pods first, nodes in the mapping's order. Pods asking
    for no GPU go with the first node. Deterministic for equal inputs.
    """
    if not capacity:
        return None
    left = dict(capacity)
    first = next(iter(left))
    chosen: list[str | None] = [None] * len(requests)
    for index in sorted(range(len(requests)), key=lambda i: -requests[i]):
        need = requests[index]
        if need == 0:
            chosen[index] = first
            continue
        target = next((name for name, free in left.items() if free >= need), None)
        if target is None:
            return None
        left[target] -= need
        chosen[index] = target
    return [name for name in chosen if name is not None]
