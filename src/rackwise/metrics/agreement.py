"""How closely two runs of the same jobs agree: a real cluster's records against a simulation's.

`compare_records` pairs the two record sets by job id and reports per-job
JCT differences, the average JCT and makespan of each, and how alike the
order is in which the jobs first started (Kendall's tau-b, and the share of
job pairs started in the same order).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class RecordLike(Protocol):
    """What the comparison reads of a record (`rackwise.metrics.records.JobRecord` has it)."""

    @property
    def job_id(self) -> str: ...
    @property
    def submit_time(self) -> float: ...
    @property
    def first_start(self) -> float: ...
    @property
    def finish_time(self) -> float: ...
    @property
    def jct_s(self) -> float: ...


@dataclass(frozen=True, slots=True)
class JobDifference:
    """One job in both runs. Differences are real minus simulated."""

    job_id: str
    real_start_s: float
    sim_start_s: float
    real_jct_s: float
    sim_jct_s: float

    @property
    def jct_diff_s(self) -> float:
        return self.real_jct_s - self.sim_jct_s

    @property
    def jct_rel(self) -> float:
        """The difference as a share of the simulated JCT."""
        return self.jct_diff_s / self.sim_jct_s if self.sim_jct_s else math.inf

    @property
    def start_diff_s(self) -> float:
        return self.real_start_s - self.sim_start_s


@dataclass(frozen=True, slots=True)
class Agreement:
    """Two runs of the same jobs side by side, over the jobs both finished.

    Attributes:
        jobs: Per-job figures, in the real run's start order.
        only_real, only_sim: Job ids that finished in one run only (left out of the figures).
        avg_jct_real_s, avg_jct_sim_s: Mean JCT of each run.
        makespan_real_s, makespan_sim_s: Last finish minus first submission, each run.
        kendall_tau: Kendall's tau-b between the two runs' first-start times (1: same order).
        same_order_share: Of the job pairs whose starts are distinct in both runs,
            the share started in the same order.
        n_pairs: How many pairs that share counts.
    """

    jobs: tuple[JobDifference, ...]
    only_real: tuple[str, ...]
    only_sim: tuple[str, ...]
    avg_jct_real_s: float
    avg_jct_sim_s: float
    makespan_real_s: float
    makespan_sim_s: float
    kendall_tau: float
    same_order_share: float
    n_pairs: int

    @property
    def avg_jct_rel(self) -> float:
        """(real - simulated) / simulated average JCT."""
        return (self.avg_jct_real_s - self.avg_jct_sim_s) / self.avg_jct_sim_s

    @property
    def makespan_rel(self) -> float:
        return (self.makespan_real_s - self.makespan_sim_s) / self.makespan_sim_s

    @property
    def mean_abs_jct_diff_s(self) -> float:
        return float(np.mean([abs(j.jct_diff_s) for j in self.jobs]))


def compare_records(real: Iterable[RecordLike], simulated: Iterable[RecordLike]) -> Agreement:
    """Compare two record sets of the same jobs (see `Agreement`).

    Raises:
        ValueError: a job id twice in one set, or fewer than two jobs in common.
    """
    by_real, by_sim = _by_id(real, "real"), _by_id(simulated, "simulated")
    common = sorted(set(by_real) & set(by_sim), key=lambda j: (by_real[j].first_start, j))
    if len(common) < 2:
        raise ValueError(f"the two record sets have {len(common)} job(s) in common; need at least 2")
    jobs = tuple(JobDifference(j, by_real[j].first_start, by_sim[j].first_start,
                               by_real[j].jct_s, by_sim[j].jct_s) for j in common)
    real_starts = np.array([j.real_start_s for j in jobs])
    sim_starts = np.array([j.sim_start_s for j in jobs])
    same, n_pairs = same_order(real_starts, sim_starts)
    return Agreement(
        jobs=jobs,
        only_real=tuple(sorted(set(by_real) - set(by_sim))),
        only_sim=tuple(sorted(set(by_sim) - set(by_real))),
        avg_jct_real_s=float(np.mean([j.real_jct_s for j in jobs])),
        avg_jct_sim_s=float(np.mean([j.sim_jct_s for j in jobs])),
        makespan_real_s=_makespan([by_real[j] for j in common]),
        makespan_sim_s=_makespan([by_sim[j] for j in common]),
        kendall_tau=kendall_tau(real_starts, sim_starts),
        same_order_share=same, n_pairs=n_pairs)


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b of two equally long samples (nan when either is constant)."""
    from scipy.stats import kendalltau  # scipy is slow to import; only when asked

    return float(kendalltau(a, b).statistic)


def same_order(a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """Share of index pairs ordered alike by ``a`` and ``b``, over pairs tied in neither; and their count.

    Quadratic in the length: meant for windows of up to a few thousand jobs.
    """
    upper = np.triu_indices(len(a), k=1)
    sign_a = np.sign(a[:, None] - a[None, :])[upper]
    sign_b = np.sign(b[:, None] - b[None, :])[upper]
    counted = (sign_a != 0) & (sign_b != 0)
    n_pairs = int(counted.sum())
    if not n_pairs:
        return math.nan, 0
    return float((sign_a[counted] == sign_b[counted]).sum() / n_pairs), n_pairs


def _by_id(records: Iterable[RecordLike], which: str) -> dict[str, RecordLike]:
    out: dict[str, RecordLike] = {}
    for record in records:
        if record.job_id in out:
            raise ValueError(f"job {record.job_id} appears twice in the {which} records")
        out[record.job_id] = record
    return out


def _makespan(records: list[RecordLike]) -> float:
    return max(r.finish_time for r in records) - min(r.submit_time for r in records)
