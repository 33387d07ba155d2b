"""Read a Kubernetes pod list exported as JSON (``kubectl get pods -o json``).

The file is a ``List`` (or ``PodList``) object whose ``items`` are pods.

How a pod becomes a `Job`:
- ``job_id``: ``namespace/name``; ``group``: the namespace.
- ``submit_time``: ``metadata.creationTimestamp``, in seconds after the
  earliest kept creation.
- ``duration_s``: the last ``finishedAt`` of its containers' ``terminated``
  states minus ``status.startTime``.
- ``n_gpus``: the ``nvidia.com/gpu`` limit (or, without one, request) of
  its containers, summed; an init container that asks for more counts
  instead (init containers run one at a time, before the others).
- tags: the pod's ``phase``.

Skipped and counted, in this order: pods asking for no GPU
(``zero_gpus``), pods never started (``not_started``: no ``startTime``),
pods with a container not terminated (``not_finished``: still running,
or the export was taken before it ended), and pods that ran for 0 s
(``zero_duration``). ``strict`` refuses the file at the first such pod.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from rackwise.errors import InputError
from rackwise.workload.job import Job
from rackwise.workload.readers.json_file import read_json
from rackwise.workload.workload import Workload

GPU_RESOURCE = "nvidia.com/gpu"
_REASONS = ("zero_gpus", "not_started", "not_finished", "zero_duration")


def read_k8s_pods(path: str | Path, *, strict: bool = False) -> Workload:
    """Read a pod list (``*.gz`` is decompressed); see the module docstring.

    Returns:
        Jobs sorted by creation (ties keep file order); ``lines`` are 0
        (a pod has no line of its own) and ``skipped_by_reason`` counts
        the pods left out.

    Raises:
        InputError: a malformed pod, naming its index, name and key.
    """
    source = str(path)
    pods = _load(Path(path))
    kept: list[tuple[float, int, Job]] = []
    skipped: Counter[str] = Counter()
    seen: dict[str, int] = {}
    for index, pod in enumerate(pods):
        where = _Where(source, index, pod)
        job, reason = _job(where)
        if reason is not None:
            if strict:
                raise where.error(reason, f"pod skipped as {reason} (--strict refuses such pods)")
            skipped[reason] += 1
            continue
        assert job is not None
        if job.job_id in seen:
            raise where.error("metadata.name", f"duplicate pod (first at items[{seen[job.job_id]}])")
        seen[job.job_id] = index
        kept.append((job.submit_time, index, job))
    counts = {reason: skipped[reason] for reason in _REASONS}
    if not kept:
        detail = ", ".join(f"{reason} {n}" for reason, n in counts.items() if n)
        raise InputError(f"no pod left to simulate among {len(pods)} ({detail or 'empty list'})",
                         source=source)
    kept.sort(key=lambda item: (item[0], item[1]))
    origin = kept[0][0]
    jobs = tuple(job.with_changes(submit_time=submit - origin) for submit, _, job in kept)
    name = Path(path).name.removesuffix(".gz").removesuffix(".json")
    return Workload(jobs=jobs, name=name, source=source, n_gpus_field=f"resources.{GPU_RESOURCE}",
                    n_skipped=sum(counts.values()), skipped_by_reason=tuple(counts.items()))


def _job(where: _Where) -> tuple[Job | None, str | None]:
    """The pod's job (submit time still in epoch seconds), or the reason it is left out."""
    metadata = where.mapping(where.pod, "metadata")
    name = where.text(metadata, "metadata.name")
    namespace = metadata.get("namespace") or "default"
    created = where.time(metadata.get("creationTimestamp"), "metadata.creationTimestamp")
    if created is None:
        raise where.error("metadata.creationTimestamp", "missing creation time")
    spec = where.mapping(where.pod, "spec")
    n_gpus = max(sum(_gpus_each(where, spec, "containers")),
                 max(_gpus_each(where, spec, "initContainers"), default=0))
    if n_gpus == 0:
        return None, "zero_gpus"
    status = where.pod.get("status") or {}
    if not isinstance(status, dict):
        raise where.error("status", "expected an object")
    started = where.time(status.get("startTime"), "status.startTime")
    if started is None:
        return None, "not_started"
    finished = _finished(where, status)
    if finished is None:
        return None, "not_finished"
    duration_s = (finished - started).total_seconds()
    if duration_s <= 0:
        return None, "zero_duration"
    phase = status.get("phase")
    return Job(job_id=f"{namespace}/{name}", submit_time=created.timestamp(), n_gpus=n_gpus,
               duration_s=duration_s, group=str(namespace),
               tags=(("phase", str(phase)),) if phase else ()), None


def _gpus_each(where: _Where, spec: dict[str, Any], key: str) -> list[int]:
    containers = spec.get(key) or []
    if not isinstance(containers, list):
        raise where.error(f"spec.{key}", "expected a list of containers")
    counts = []
    for number, container in enumerate(containers):
        at = f"spec.{key}[{number}].resources"
        resources = (container.get("resources") or {}) if isinstance(container, dict) else None
        if not isinstance(resources, dict):
            raise where.error(at, "expected an object")
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        if GPU_RESOURCE in limits:
            value, field = limits[GPU_RESOURCE], f"{at}.limits.{GPU_RESOURCE}"
        else:
            value, field = requests.get(GPU_RESOURCE, 0), f"{at}.requests.{GPU_RESOURCE}"
        counts.append(where.whole(value, field))
    return counts


def _finished(where: _Where, status: dict[str, Any]) -> datetime | None:
    """When the last container terminated; None while one has not."""
    statuses = status.get("containerStatuses") or []
    if not isinstance(statuses, list):
        raise where.error("status.containerStatuses", "expected a list")
    last = None
    for number, container in enumerate(statuses):
        state = container.get("state") if isinstance(container, dict) else None
        terminated = state.get("terminated") if isinstance(state, dict) else None
        if not isinstance(terminated, dict):
            return None
        end = where.time(terminated.get("finishedAt"),
                         f"status.containerStatuses[{number}].state.terminated.finishedAt")
        if end is None:
            return None
        last = end if last is None else max(last, end)
    return last


class _Where:
    """Builds errors that name the pod (index and name) and the key."""

    def __init__(self, source: str, index: int, pod: Any) -> None:
        if not isinstance(pod, dict):
            raise InputError(f"items[{index}]: expected a pod object, got {type(pod).__name__}",
                             source=source)
        self.source = source
        self.index = index
        self.pod = pod

    def error(self, key: str, message: str) -> InputError:
        metadata = self.pod.get("metadata")
        name = metadata.get("name", "?") if isinstance(metadata, dict) else "?"
        return InputError(f"items[{self.index}] ({name}): {message}", source=self.source,
                          field=key)

    def mapping(self, parent: dict[str, Any], key: str) -> dict[str, Any]:
        value = parent.get(key)
        if not isinstance(value, dict):
            raise self.error(key, "missing object" if value is None else "expected an object")
        return value

    def text(self, parent: dict[str, Any], key: str) -> str:
        value = parent.get(key.rsplit(".", 1)[-1])
        if not isinstance(value, str) or not value:
            raise self.error(key, "missing name")
        return value

    def whole(self, value: Any, key: str) -> int:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise self.error(key, f"not a GPU count: {value!r}") from None
        if number < 0 or number != int(number):
            raise self.error(key, f"not a whole GPU count: {value!r}")
        return int(number)

    def time(self, value: Any, key: str) -> datetime | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise self.error(key, f"expected a time string, got {value!r}")
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise self.error(key, f"not a time like 2024-03-01T10:00:00Z: {value!r}") from None
        if parsed.tzinfo is None:
            raise self.error(key, f"time without a zone: {value!r}")
        return parsed


def _load(path: Path) -> list[Any]:
    data = read_json(path, "a JSON pod list")
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise InputError("expected a pod list: an object with an 'items' list "
                         "(kubectl get pods -o json)", source=str(path), field="items")
    return items
