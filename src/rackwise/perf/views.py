"""Views of running jobs the hot path reads: interference weights, node neighbours, uplink sharing."""

from __future__ import annotations

from collections.abc import Mapping

from mypy_extensions import mypyc_attr

from rackwise.perf.interference import Interference
from rackwise.perf.placed import Placed


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Weights:
    """Interference weights ``scale x slowdown(a, b, GPU type)`` as dense rows.

    ``row(a, gpu_type)[ids[b]]`` is the weight of neighbour model ``b`` on
    ``a``. Every row covers every model seen so far (a new model extends
    them all), so the neighbour scans on the hot path index a list.
    """

    __slots__ = ("_interference", "_models", "_rows", "_scale", "ids")

    def __init__(self, interference: Interference, scale: float) -> None:
        self._interference = interference
        self._scale = scale
        self.ids: dict[str, int] = {}
        self._models: list[str] = []
        self._rows: dict[tuple[str, str], list[float]] = {}

    def id_of(self, model: str) -> int:
        found = self.ids.get(model)
        if found is None:
            found = self.ids[model] = len(self._models)
            self._models.append(model)
            for (a, gpu_type), row in self._rows.items():
                row.append(self._weight(a, model, gpu_type))
        return found

    def row(self, model: str, gpu_type: str) -> list[float]:
        found = self._rows.get((model, gpu_type))
        if found is None:
            self.id_of(model)
            found = self._rows[(model, gpu_type)] = [
                self._weight(model, other, gpu_type) for other in self._models]
        return found

    def _weight(self, model: str, other: str, gpu_type: str) -> float:
        return self._scale * self._interference.slowdown(model, other, gpu_type)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Neighbours:
    """Per node, the (placement, GPUs there) of other running jobs, skipping one job."""

    __slots__ = ("_nodes", "_running", "_skip")

    def __init__(self, nodes: list[list[tuple[Placed, int, int]]], running: Mapping[str, object],
                 skip: str) -> None:
        self._nodes = nodes
        self._running = running
        self._skip = skip

    def __getitem__(self, node: int) -> list[tuple[Placed, int, int]]:
        running, skip = self._running, self._skip
        return [entry for entry in self._nodes[node] if entry[0].job_id != skip and entry[0].job_id in running]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Sharing:
    """Jobs crossing each rack uplink, counting one more job and no stale entries."""

    __slots__ = ("_racks", "_running", "_skip")

    def __init__(self, racks: list[list[Placed]], running: Mapping[str, object], skip: str) -> None:
        self._racks = racks
        self._running = running
        self._skip = skip

    def __getitem__(self, rack: int) -> int:
        running, skip = self._running, self._skip
        return 1 + sum(1 for other in self._racks[rack] if other.job_id != skip and other.job_id in running)
