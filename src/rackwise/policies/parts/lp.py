"""Linear programs over an allocation matrix X (jobs x GPU types), solved with HiGHS.

``X[m, j]`` is the share of wall-clock time job m should spend on GPU type
j. Every program here keeps Gavel's base constraints (gavel.md §3.0)::

    0 <= X[m, j] <= 1, and X[m, j] = 0 where job m cannot run on type j
    sum_j X[m, j] <= 1                    for every job m
    sum_m n_gpus[m] * X[m, j] <= N[j]     for every type j

Matrices are built sparse, so a round with thousands of jobs stays fast.
Each solver returns X as a dense (jobs x types) array or raises `LPError`.

Space sharing (gavel.md §3.1) adds a row ``Y[p, j]`` per candidate pair of
jobs ``(a, b)`` sharing GPUs of type j: it counts against both jobs' time,
takes the GPUs of one job, and gives each member ``factor`` of its rate
alone (`Pairs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rackwise.errors import RackwiseError


class LPError(RackwiseError):
    """The solver failed or reported the program infeasible or unbounded."""


def _sparse() -> Any:
    # Imported on first use: scipy takes about a second to import, and most
    # commands never solve an LP.
    from scipy import sparse

    return sparse


def _solve(c: np.ndarray, a_ub: Any, b_ub: np.ndarray, ub: np.ndarray, method: str = "highs") -> np.ndarray:
    """Minimise c @ x subject to a_ub @ x <= b_ub and 0 <= x <= ub, with HiGHS.

    ``method`` is ``highs`` (HiGHS chooses, the dual simplex here) or
    ``highs-ipm`` (interior point), as scipy's ``linprog`` names them. HiGHS is
    called through highspy with the options ``linprog`` passes, at half
    ``linprog``'s cost per solve (it checks every option and reads back every
    column's dual); highspy is pinned to the HiGHS that scipy 1.17 bundles,
    so the answers are ``linprog``'s there bit for bit.
    """
    import highspy

    a = a_ub.tocsc()
    n_cols, n_rows = len(c), len(b_ub)
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = n_cols, n_rows
    matrix = model.a_matrix_
    matrix.format_ = highspy.MatrixFormat.kColwise
    matrix.num_col_, matrix.num_row_ = n_cols, n_rows
    matrix.start_, matrix.index_, matrix.value_ = a.indptr, a.indices, a.data
    model.col_cost_, model.col_lower_, model.col_upper_ = c, np.zeros(n_cols), ub
    model.row_lower_, model.row_upper_ = np.full(n_rows, -np.inf), b_ub
    highs = highspy.Highs()
    try:
        highs.setOptionValue("output_flag", False)
        highs.setOptionValue("solver", {"highs": "choose", "highs-ipm": "ipm"}[method])
        highs.passModel(model)
        highs.run()
        status = highs.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise LPError(f"HiGHS: {highs.modelStatusToString(status)}")
        return np.array(highs.getSolution().col_value)
    finally:
        # A `Highs` refers to itself through its callbacks: left so, the solver and its
        # copy of the program wait for the cyclic collector, which a simulation runs
        # rarely (`long_lived_objects`). Cut, they are freed when this returns.
        highs.callbacks.clear()


# Tests replace this to force a failure; policies call the solver only through it.
SOLVE: Callable[..., np.ndarray] = _solve


@dataclass(frozen=True)
class Pairs:
    """Candidate pairs of jobs that may share GPUs: the rows of Y.

    Attributes:
        members: (pairs x 2) job indices; both jobs ask for the same GPU count.
        factors: (pairs x 2 x types) share of its own rate each member keeps
            beside the other on each type (0 where the pair may not run there).
    """

    members: np.ndarray
    factors: np.ndarray

    def __len__(self) -> int:
        return len(self.members)

    def columns(self, n_jobs: int, n_gpus: np.ndarray) -> tuple[Any, np.ndarray]:
        """Y's columns of the base rows (each member's time, then capacity), and Y's bounds."""
        sparse = _sparse()
        n_pairs, _, n_types = self.factors.shape
        cols = np.arange(n_pairs * n_types)
        pair_of = cols // n_types
        time = sparse.csr_matrix((np.ones(2 * len(cols)), (
            np.concatenate([self.members[pair_of, 0], self.members[pair_of, 1]]),
            np.concatenate([cols, cols]))), shape=(n_jobs, len(cols)))
        cap = sparse.csr_matrix((n_gpus[self.members[pair_of, 0]].astype(float),
                                 (cols % n_types, cols)), shape=(n_types, len(cols)))
        ub = (self.factors > 0).all(axis=1).astype(float).ravel()
        return sparse.vstack([time, cap], format="csr"), ub

    def gains(self, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per member: ``coef`` of its job times its factor, each (pairs x types)."""
        return (coef[self.members[:, 0]] * self.factors[:, 0],
                coef[self.members[:, 1]] * self.factors[:, 1])


def _base(rates: np.ndarray, n_gpus: np.ndarray, capacity: np.ndarray,
          pairs: Pairs | None = None) -> tuple[Any, np.ndarray, np.ndarray]:
    """Base constraint rows (row sums, then capacity) and the upper bounds of X (then Y)."""
    sparse = _sparse()
    n_jobs, n_types = rates.shape
    n_x = n_jobs * n_types
    # Built as CSR arrays: row m holds X[m, :] with 1s, row n_jobs + j holds X[:, j] with n_gpus.
    by_type = np.arange(n_x, dtype=np.int32).reshape(n_jobs, n_types).T.ravel()
    a_ub = sparse.csr_matrix(
        (np.concatenate([np.ones(n_x), np.tile(n_gpus.astype(float), n_types)]),
         np.concatenate([np.arange(n_x, dtype=np.int32), by_type]),
         np.concatenate([np.arange(0, n_x + 1, n_types, dtype=np.int32),
                         n_x + n_jobs * np.arange(1, n_types + 1, dtype=np.int32)])),
        shape=(n_jobs + n_types, n_x))
    b_ub = np.concatenate([np.ones(n_jobs), capacity.astype(float)])
    ub = (rates > 0).astype(float).ravel()
    if pairs is not None and len(pairs):
        a_pairs, ub_pairs = pairs.columns(n_jobs, n_gpus)
        a_ub = sparse.hstack([a_ub, a_pairs], format="csr")
        ub = np.concatenate([ub, ub_pairs])
    return a_ub, b_ub, ub


def _objective_rows(coef: np.ndarray, active: np.ndarray, n_cols: int, pairs: Pairs | None = None) -> Any:
    """Rows ``-sum_j coef[m, j] X[m, j]`` for the active jobs, over ``n_cols`` columns (X, then Y).

    With ``pairs``, each member's row also counts its gain in every pair row.
    """
    sparse = _sparse()
    n_jobs, n_types = coef.shape
    idx = np.flatnonzero(active)
    data = [-coef[idx].ravel()]
    rows = [np.repeat(np.arange(len(idx)), n_types)]
    columns = [(idx[:, None] * n_types + np.arange(n_types)).ravel()]
    if pairs is not None and len(pairs):
        row_of = np.full(n_jobs, -1)
        row_of[idx] = np.arange(len(idx))
        cols = n_jobs * n_types + np.arange(len(pairs) * n_types).reshape(len(pairs), n_types)
        for side, gain in enumerate(pairs.gains(coef)):
            member_row = row_of[pairs.members[:, side]]
            keep = member_row >= 0
            data.append(-gain[keep].ravel())
            rows.append(np.repeat(member_row[keep], n_types))
            columns.append(cols[keep].ravel())
    block = sparse.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(columns))),
                              shape=(len(idx), n_cols))
    block.sort_indices()
    return block


def _with_column(a: Any, value: float) -> Any:
    """``a`` with one more column, last, holding ``value`` in every row (0: no entries)."""
    sparse = _sparse()
    n_rows, n_cols = a.shape
    if value == 0.0:
        return sparse.csr_matrix((a.data, a.indices, a.indptr), shape=(n_rows, n_cols + 1))
    ends = a.indptr[1:]
    return sparse.csr_matrix((np.insert(a.data, ends, value), np.insert(a.indices, ends, n_cols),
                              a.indptr + np.arange(n_rows + 1)), shape=(n_rows, n_cols + 1))


def _level_lp(coef: np.ndarray, offset: np.ndarray | None, rates: np.ndarray, n_gpus: np.ndarray,
              capacity: np.ndarray, pairs: Pairs | None = None, *, for_level: bool = False
              ) -> tuple[np.ndarray, Any, Any, np.ndarray, np.ndarray, float]:
    """Maximise ``t = min_m (sum_j coef[m, j] X[m, j] - offset[m])`` over the active jobs.

    Returns (flat X then Y, objective rows, base rows, base bounds, upper bounds, t).
    With ``for_level`` only t is wanted: HiGHS' interior-point method finds it
    several times faster than the simplex on large rounds (0.5 s against 4.8 s
    at 7,000 jobs), and the X it returns may be another optimum.
    """
    sparse = _sparse()
    active = np.asarray((coef > 0).any(axis=1) & (rates > 0).any(axis=1))
    a_base, b_base, ub = _base(rates, n_gpus, capacity, pairs)
    objective = _objective_rows(coef, active, a_base.shape[1], pairs)
    # Epigraph rows ``t - sum_j coef[m, j] X[m, j] <= -offset[m]``, then the base rows; t is last.
    a_ub = sparse.vstack([_with_column(objective, 1.0), _with_column(a_base, 0.0)], format="csr")
    # The LP's t is the level plus ``shift`` so that X = 0, t = 0 is feasible (t is >= 0).
    rhs = np.zeros(objective.shape[0]) if offset is None else -offset[active]
    shift = max(0.0, -float(rhs.min())) if len(rhs) else 0.0
    b_ub = np.concatenate([rhs + shift, b_base])
    c = np.zeros(len(ub) + 1)
    c[-1] = -1.0
    x = SOLVE(c, a_ub, b_ub, np.append(ub, np.inf), *(("highs-ipm",) if for_level else ()))
    return x[:-1], objective, a_base, b_base, ub, float(x[-1]) - shift


def max_min(coef: np.ndarray, rates: np.ndarray, n_gpus: np.ndarray, capacity: np.ndarray, *,
            second_stage: bool = True, tolerance: float = 1e-6) -> np.ndarray:
    """Maximise ``min_m sum_j coef[m, j] X[m, j]`` over the jobs that can run somewhere.

    With ``second_stage`` a second LP keeps every job at the optimal minimum
    (within ``tolerance``, relative) and maximises the sum of the same
    quantity, so surplus capacity is not left to the solver's whim.
    """
    return max_min_shared(coef, rates, n_gpus, capacity, None, second_stage=second_stage,
                          tolerance=tolerance)[0]


def max_min_shared(coef: np.ndarray, rates: np.ndarray, n_gpus: np.ndarray, capacity: np.ndarray,
                   pairs: Pairs | None, *, second_stage: bool = True, tolerance: float = 1e-6
                   ) -> tuple[np.ndarray, np.ndarray]:
    """`max_min` with pair rows: each job's quantity adds its gains in the pairs; returns (X, Y)."""
    sparse = _sparse()
    n_jobs, n_types = coef.shape
    n_pairs = len(pairs) if pairs is not None else 0
    none = np.zeros((n_jobs, n_types)), np.zeros((n_pairs, n_types))
    if n_jobs == 0 or not ((coef > 0).any(axis=1) & (rates > 0).any(axis=1)).any():
        return none
    x, objective, a_base, b_base, ub, level = _level_lp(coef, None, rates, n_gpus, capacity, pairs,
                                                        for_level=second_stage)
    if second_stage and level <= 0:  # X is the answer after all: the simplex's, as without the level
        x, *_, level = _level_lp(coef, None, rates, n_gpus, capacity, pairs)
    elif second_stage:
        # Fix t at (just under) the optimum; maximise the total instead.
        a_ub2 = sparse.vstack([objective, a_base], format="csr")
        b_ub2 = np.concatenate([np.full(objective.shape[0], -level * (1.0 - tolerance)), b_base])
        total = coef.ravel()
        if n_pairs:
            gain_a, gain_b = pairs.gains(coef)  # type: ignore[union-attr]
            total = np.concatenate([total, (gain_a + gain_b).ravel()])
        x = SOLVE(-total / float(coef.max()), a_ub2, b_ub2, ub)
    x = _clip(x)
    return x[:n_jobs * n_types].reshape(n_jobs, n_types), x[n_jobs * n_types:].reshape(n_pairs, n_types)


def min_makespan(rates: np.ndarray, remaining: np.ndarray, n_gpus: np.ndarray,
                 capacity: np.ndarray, *, second_stage: bool = True) -> tuple[np.ndarray, float]:
    """Minimise ``max_m remaining[m] / sum_j rates[m, j] X[m, j]``; returns (X, makespan_s).

    Solved exactly as ``max z`` subject to ``sum_j rates X >= remaining * z``
    (makespan = 1/z), with each row scaled so z is of order one.
    """
    n_jobs, n_types = rates.shape
    runnable = (rates > 0).any(axis=1) & (remaining > 0)
    if not runnable.any():
        return np.zeros((n_jobs, n_types)), 0.0
    scale_s = float(np.max(remaining[runnable] / rates[runnable].max(axis=1)))
    coef = np.zeros_like(rates, dtype=float)
    coef[runnable] = rates[runnable] * scale_s / remaining[runnable, None]
    x = max_min(coef, rates, n_gpus, capacity, second_stage=second_stage)
    z = float(np.min((coef[runnable] * x[runnable]).sum(axis=1)))
    return x, (scale_s / z if z > 0 else float("inf"))


def max_throughput(rates: np.ndarray, n_gpus: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Maximise the total rate ``sum_m sum_j rates[m, j] X[m, j]``."""
    n_jobs, n_types = rates.shape
    if n_jobs == 0:
        return np.zeros((0, n_types))
    a_ub, b_ub, ub = _base(rates, n_gpus, capacity)
    top = float(rates.max())
    if top <= 0:
        return np.zeros((n_jobs, n_types))
    x = SOLVE(-rates.ravel() / top, a_ub, b_ub, ub)
    return _clip(x.reshape(n_jobs, n_types))


def isolated_share(n_gpus: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """X^iso: 1/M of every type divided among the job's GPUs, rows scaled to sum <= 1."""
    n_jobs = len(n_gpus)
    x = (capacity[None, :] / max(n_jobs, 1)) / n_gpus[:, None].astype(float)
    sums = x.sum(axis=1, keepdims=True)
    shares: np.ndarray = np.where(sums > 1.0, x / np.maximum(sums, 1e-300), x)
    return shares


def finish_time_fairness(rates: np.ndarray, remaining: np.ndarray, age_s: np.ndarray,
                         isolated_s: np.ndarray, n_gpus: np.ndarray, capacity: np.ndarray, *,
                         rel_tol: float = 1e-3, max_steps: int = 50) -> tuple[np.ndarray, float]:
    """Minimise ``max_m rho_m`` (Themis finish-time fairness, gavel.md §3.2); returns (X, max rho).

    ``rho_m = (age_s + remaining / thr(X)) / (isolated_s + remaining / thr(X_iso))``, a
    ratio of affine functions of X, so this is a generalised fractional program. Each
    step (the Dinkelbach-type method of Crouzeix, Ferland and Schaible) solves one LP:
    minimise the largest rho_m linearised around the current X; the new X is kept if its
    largest rho is lower. Once a step gains less than ``rel_tol``, one more LP checks that
    no X has every ``rho_m <= (1 - rel_tol) * bound``; if one has, the steps go on from it.
    As with bisection on the bound, the answer is within ``rel_tol`` of the optimum (and
    is the largest rho the returned X attains), but usually after two to four LPs where
    bisection took about ten. ``max_steps`` only guards the loop. Raises `LPError` if an
    LP fails.
    """
    n_jobs, n_types = rates.shape
    x_iso = np.where(rates > 0, isolated_share(n_gpus, capacity), 0.0)
    thr_iso = (rates * x_iso).sum(axis=1)
    runnable = (rates > 0).any(axis=1) & (thr_iso > 0) & (remaining > 0)
    if not runnable.any():
        return np.zeros((n_jobs, n_types)), 0.0
    problem = _FinishTimeLPs(rates, remaining, age_s, isolated_s, n_gpus, capacity, runnable, thr_iso)
    best, bound = x_iso, problem.worst(x_iso)  # X_iso is feasible: start from what it attains
    for _ in range(max_steps):
        x = problem.step(best)
        value = problem.worst(x)
        converging = value < bound * (1.0 - rel_tol)
        if value < bound:
            best, bound = x, value
        if converging:
            continue  # another step is cheaper than a check
        found = problem.feasible(bound * (1.0 - rel_tol))
        if found is None:
            break  # no X is ``rel_tol`` better than ``best``
        best, bound = found, problem.worst(found)
    return best, bound


class _FinishTimeLPs:
    """The LPs of `finish_time_fairness` for one instance (runnable jobs only count)."""

    def __init__(self, rates: np.ndarray, remaining: np.ndarray, age_s: np.ndarray,
                 isolated_s: np.ndarray, n_gpus: np.ndarray, capacity: np.ndarray,
                 runnable: np.ndarray, thr_iso: np.ndarray) -> None:
        self.rates, self.n_gpus, self.capacity, self.runnable = rates, n_gpus, capacity, runnable
        self.rates_r = rates[runnable]
        self.remaining_r, self.age_r = remaining[runnable], age_s[runnable]
        self.denom = isolated_s[runnable] + self.remaining_r / thr_iso[runnable]

    def _thr(self, x: np.ndarray) -> np.ndarray:
        thr: np.ndarray = (self.rates_r * x[self.runnable]).sum(axis=1)
        return thr

    def worst(self, x: np.ndarray) -> float:
        """The largest rho_m that X attains."""
        thr = self._thr(x)
        return float(np.max((self.age_r + self.remaining_r / np.maximum(thr, 1e-300)) / self.denom))

    def _lp(self, coef_r: np.ndarray, offset_r: np.ndarray | None) -> tuple[np.ndarray, float]:
        coef = np.zeros_like(self.rates, dtype=float)
        coef[self.runnable] = coef_r
        offset = None
        if offset_r is not None:
            offset = np.zeros(len(self.rates))
            offset[self.runnable] = offset_r
        x, *_, level = _level_lp(coef, offset, self.rates, self.n_gpus, self.capacity)
        return _clip(x.reshape(self.rates.shape)), level

    def step(self, x_now: np.ndarray) -> np.ndarray:
        """X minimising the largest rho_m linearised around X_now (where it is r = worst(X_now)).

        ``rho_m(X) <= r - t`` is ``g_m * thr_m(X) - remaining_m >= t * denom_m * thr_m(X)``,
        with ``g_m = r * denom_m - age_m``; replacing thr_m(X) by thr_m(X_now) on the right
        makes it linear, and the LP maximises t.
        """
        r = self.worst(x_now)
        scale = self.denom * self._thr(x_now)
        gain = (r * self.denom - self.age_r) / scale
        return self._lp(self.rates_r * gain[:, None], self.remaining_r / scale)[0]

    def feasible(self, r: float) -> np.ndarray | None:
        """An X with every ``rho_m <= r``, or None if there is none.

        ``rho_m <= r`` is ``thr_m(X) * (r * denom_m - age_m) / remaining_m >= 1``: the
        max-min LP of the left-hand sides tells.
        """
        slack = r * self.denom - self.age_r
        if np.any(slack <= 0):
            return None  # rho_m > age_m / denom_m whatever X is
        x, level = self._lp(self.rates_r * (slack / self.remaining_r)[:, None], None)
        return x if level >= 1.0 - 1e-9 else None


def _clip(x: np.ndarray) -> np.ndarray:
    clipped: np.ndarray = np.clip(x, 0.0, 1.0)
    return clipped
