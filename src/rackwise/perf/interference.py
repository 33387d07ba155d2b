"""Slowdown of jobs that share a node.

The measured table gives, for pairs of single-GPU job types sharing the same
GPU, each one's rate beside the other. The fraction it loses,
``1 - paired / alone``, is the pair's measured slowdown. Where the table has
no pair (a model it does not cover, a pair that did not fit, a GPU type it
lacks) a fitted multiplicative model stands in:

    slowdown(a, b) ~ row(a) * column(b) / mean

``row(a)`` is how much a loses on average beside anything, ``column(b)`` how
much b takes on average from anything, both over the measured pairs of that
GPU type (V100's for a type the table lacks), and an unknown model counts as
average.

In rackwise, jobs on one node hold different GPUs and contend only for what
the node shares (PCIe, host memory, CPU, NIC), so a neighbour weighs
``scale * slowdown * (its GPUs on the node / node GPUs)``; neighbours
multiply. ``scale = 1`` treats a neighbour filling the node like one sharing
the job's own GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rackwise.perf.throughput import ThroughputTable


@dataclass(frozen=True, slots=True)
class _Fit:
    row: dict[str, float]
    column: dict[str, float]
    mean: float


def _fit(pairs: dict[tuple[str, str], tuple[float, float]],
         alone: dict[tuple[str, int], float]) -> _Fit:
    rows: dict[str, list[float]] = {}
    columns: dict[str, list[float]] = {}
    for (a, b), (own, _) in pairs.items():
        isolated = alone.get((a, 1), 0.0)
        if isolated <= 0:
            continue
        loss = min(max(1.0 - own / isolated, 0.0), 1.0)
        rows.setdefault(a, []).append(loss)
        columns.setdefault(b, []).append(loss)
    every = [x for values in rows.values() for x in values]
    mean = sum(every) / len(every) if every else 0.0
    return _Fit({k: sum(v) / len(v) for k, v in rows.items()},
                {k: sum(v) / len(v) for k, v in columns.items()}, mean)


@dataclass
class Interference:
    """Pairwise slowdowns from the table, with a fitted fallback.

    Args:
        table: The throughput table whose pair entries are used.
        scale: Weight of a whole-node neighbour relative to GPU sharing.
    """

    table: ThroughputTable
    scale: float = 0.25
    _fits: dict[str, _Fit] = field(default_factory=dict, repr=False)
    _cache: dict[tuple[str, str, str], float] = field(default_factory=dict, repr=False)

    def measured_slowdown(self, a: str, b: str, gpu_type: str) -> float | None:
        """The table's slowdown of ``a`` beside ``b`` on one GPU, or None if unmeasured."""
        paired = self.table.pairs.get(gpu_type, {}).get((a, b))
        alone = self.table.isolated.get(gpu_type, {}).get((a, 1), 0.0)
        if paired is None or alone <= 0:
            return None
        return min(max(1.0 - paired[0] / alone, 0.0), 1.0)

    def fitted_slowdown(self, a: str, b: str, gpu_type: str) -> float:
        """The multiplicative fit's slowdown of ``a`` beside ``b``."""
        fit = self._fit_for(gpu_type)
        if fit.mean <= 0:
            return 0.0
        row = fit.row.get(a, fit.mean)
        column = fit.column.get(b, fit.mean)
        return min(row * column / fit.mean, 1.0)

    def slowdown(self, a: str, b: str, gpu_type: str) -> float:
        """Fraction of its speed ``a`` loses sharing GPUs with ``b`` (measured, else fitted)."""
        key = (a, b, gpu_type)
        found = self._cache.get(key)
        if found is None:
            measured = self.measured_slowdown(a, b, gpu_type)
            found = measured if measured is not None else self.fitted_slowdown(a, b, gpu_type)
            self._cache[key] = found
        return found

    def neighbour_factor(self, a: str, b: str, gpu_type: str, b_gpus: int, node_gpus: int) -> float:
        """Speed factor (<= 1) of ``a`` due to ``b`` holding ``b_gpus`` of the node's GPUs."""
        return 1.0 - self.scale * self.slowdown(a, b, gpu_type) * b_gpus / node_gpus

    def _fit_for(self, gpu_type: str) -> _Fit:
        fit = self._fits.get(gpu_type)
        if fit is None:
            source = gpu_type if gpu_type in self.table.pairs else "v100"
            fit = _fit(self.table.pairs.get(source, {}), self.table.isolated.get(source, {}))
            self._fits[gpu_type] = fit
        return fit
