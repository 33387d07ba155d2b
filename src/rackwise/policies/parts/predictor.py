"""Predicting how many iterations a job will run, from what is known at submission.

Most training jobs recur (the same user reruns the same configuration), so
the history of finished jobs is the best guide. `IterationPredictor` keeps
that history, turns each submitted job into a feature row (model, group,
user, name template, GPUs, parallel degrees, and the medians of earlier
finished jobs that share its recurrence key, group, user or model), and fits
a random forest on ``log1p(iterations)`` of finished jobs only, so nothing
leaks from the future. Until the forest exists, or for a job whose
recurrence key has no finished job yet, cold-start rules answer instead.

The predictor is unit-blind: it learns whatever positive amount of work it
is given (iterations, or seconds at a reference speed) and answers in it.
scikit-learn is imported only when a forest is fitted (the ``ml`` extra).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

import numpy as np

from rackwise.errors import MissingExtraError
from rackwise.perf.job_graph import job_parallelism
from rackwise.policies.parts.size_distribution import SizeDistribution
from rackwise.workload.job import Job

INSTALL_HINT = "pip install 'rackwise[ml]'"
NAME_TAGS = ("name", "job_name")  # a job's name, if the trace kept it
DECLARED_TAGS = ("max_iters", "declared_iters")  # a user-declared iteration limit


def require_sklearn() -> None:
    """Raise `MissingExtraError` unless scikit-learn can be imported."""
    import importlib.util

    if importlib.util.find_spec("sklearn") is None:
        raise MissingExtraError(f"the random-forest predictor needs scikit-learn: {INSTALL_HINT}")


@dataclass(frozen=True, slots=True)
class PredictionRecord:
    """One job's predicted and actual iterations, and which rule predicted it."""

    job_id: str
    predicted_iters: float
    actual_iters: float
    source: str


def prediction_accuracy(log: Sequence[PredictionRecord]) -> dict[str, float]:
    """Error figures of a prediction log: size and direction.

    Mean absolute error (iterations), mean absolute percentage error, the
    share within 20%, the median of predicted over actual (below 1: the
    typical job is predicted too short) and the share predicted too short.
    Jobs with zero actual iterations are left out of the relative figures.
    """
    if not log:
        return {"n_jobs": 0, "mae_iters": math.nan, "mape_pct": math.nan,
                "within_20pct_frac": math.nan, "median_ratio": math.nan, "under_frac": math.nan}
    errors = [abs(r.predicted_iters - r.actual_iters) for r in log]
    ratios = [r.predicted_iters / r.actual_iters for r in log if r.actual_iters > 0]
    relative = [abs(ratio - 1.0) for ratio in ratios]
    return {
        "n_jobs": len(log),
        "mae_iters": sum(errors) / len(errors),
        "mape_pct": 100.0 * sum(relative) / len(relative) if relative else math.nan,
        "within_20pct_frac": sum(e <= 0.2 for e in relative) / len(relative) if relative else math.nan,
        "median_ratio": median(ratios) if ratios else math.nan,
        "under_frac": sum(ratio < 1.0 for ratio in ratios) / len(ratios) if ratios else math.nan,
    }


def _tag(job: Job, names: tuple[str, ...]) -> str | None:
    for key, value in job.tags:
        if key in names:
            return value
    return None


def name_template(job: Job) -> str:
    """The job's name with digit runs replaced by '#' ("exp-12-run3" -> "exp-#-run#")."""
    return re.sub(r"\d+", "#", _tag(job, NAME_TAGS) or "")


def declared_iters(job: Job) -> float | None:
    """An iteration limit the user declared in the job's tags, if any."""
    text = _tag(job, DECLARED_TAGS)
    try:
        return float(text) if text else None
    except ValueError:
        return None


def recurrence_key(job: Job) -> tuple[str, ...]:
    """Jobs with the same key are taken to be reruns of one another."""
    return (name_template(job), job.user or "", job.group or "", job.model or "", str(job.n_gpus))


@dataclass(frozen=True, slots=True)
class JobFeatures:
    """What the predictor knew of a job when it was submitted."""

    row: tuple[float, ...]
    key: tuple[str, ...]
    model: str | None
    group: str | None
    user: str | None
    declared_iters: float | None


@dataclass
class IterationPredictor:
    """Random forest over submission-time features, with cold-start rules.

    Args:
        use_forest: False keeps to the cold-start rules (an ablation).
        min_train_rows: Finished jobs needed before the first fit.
        refit_every: Refit after this many more finished jobs ...
        refit_growth: ... or this share of all the jobs learnt from so far, if
            more: refits thin out as history grows, so a long trace costs a
            number of fits that grows with the log of its length, not linearly.
        max_train_rows: Fit on at most this many of the latest finished jobs.
        history_window: Finished jobs remembered per key, group, user, model.
        default_iters: The last cold-start answer, when nothing has finished.
        forest_params: Keyword arguments for ``RandomForestRegressor``.
        random_state: Seed of the forest.
    """

    use_forest: bool = True
    min_train_rows: int = 20
    refit_every: int = 50
    refit_growth: float = 0.1
    max_train_rows: int = 5_000
    history_window: int = 20
    default_iters: float = 1_000.0
    forest_params: Mapping[str, Any] = field(default_factory=dict)
    random_state: int = 0

    def __post_init__(self) -> None:
        self._codes: dict[str, dict[str, int]] = {"model": {}, "group": {}, "user": {}, "name": {}}
        self._history: dict[tuple[str, object], deque[float]] = {}
        # log1p(iterations) of every finished job, in finishing order: its readers (the
        # median, a distribution) sort it themselves, so keeping it sorted cost a shift per finish.
        self._all_log: list[float] = []
        self._rows: deque[tuple[tuple[float, ...], float]] = deque(maxlen=self.max_train_rows)
        self._since_fit = 0
        self._forest: Any = None
        self._flat: FlatForest | None = None  # the forest's trees as arrays, built on first use
        self._answers: dict[tuple[float, ...], float] = {}  # this forest's, by row
        self._fit_rows: list[tuple[tuple[float, ...], float]] = []
        self._fit_targets: Any = None  # the sizes the forest was fitted on, for its distributions
        self._leaf_weights: Any = None  # sparse: tree leaf -> its training samples, 1/leaf size each
        self._n_fits = 0
        self._cold_start_dists: dict[tuple[tuple[str, object] | None, float], SizeDistribution] = {}

    @property
    def fitted(self) -> bool:
        """Whether a forest has been fitted (until then, the cold-start rules answer)."""
        return self._forest is not None

    @property
    def n_fits(self) -> int:
        """How many times the forest has been fitted."""
        return self._n_fits

    # ------------------------------------------------------------------ features
    def _code(self, kind: str, value: str | None) -> float:
        if not value:
            return -1.0
        table = self._codes[kind]
        return float(table.setdefault(value, len(table)))

    def _median_log(self, kind: str, value: object) -> float:
        values = self._history.get((kind, value))
        return median(values) if values else -1.0

    def features(self, job: Job, *, with_row: bool = True) -> JobFeatures:
        """The job's feature row, from the history of jobs finished so far.

        ``with_row=False`` leaves the row empty (only the cold-start rules' fields are
        filled): for a predictor whose forest is off, which reads no row.
        """
        key = recurrence_key(job)
        declared = declared_iters(job)
        if not with_row:
            return JobFeatures((), key, job.model, job.group, job.user, declared)
        par = job_parallelism(job)
        key_values = self._history.get(("key", key))
        row = (
            self._code("model", job.model), self._code("group", job.group),
            self._code("user", job.user), self._code("name", name_template(job)),
            float(job.n_gpus), float(par.data), float(par.tensor), float(par.pipeline),
            float(job.batch_size or -1), math.log1p(declared) if declared else -1.0,
            self._median_log("key", key), float(len(key_values or ())),
            key_values[-1] if key_values else -1.0,
            self._median_log("group", job.group), self._median_log("user", job.user),
            self._median_log("model", job.model),
        )
        return JobFeatures(row, key, job.model, job.group, job.user, declared)

    # ------------------------------------------------------------------ predict
    def cold_start(self, features: JobFeatures) -> tuple[float, str]:
        """Declared limit, else same-model median, same-group median, global median, default."""
        if features.declared_iters:
            return features.declared_iters, "declared"
        for kind, value in (("model", features.model), ("group", features.group)):
            if value and self._history.get((kind, value)):
                return math.expm1(self._median_log(kind, value)), f"{kind}-median"
        if self._all_log:
            return math.expm1(median(self._all_log)), "global-median"
        return self.default_iters, "default"

    def _cold_start_population(self, features: JobFeatures) -> tuple[str, object] | None:
        """Which finished jobs the cold-start rule takes its median of (None: no population)."""
        if not features.declared_iters:
            for kind, value in (("model", features.model), ("group", features.group)):
                if value and self._history.get((kind, value)):
                    return kind, value
            if self._all_log:
                return "all", None
        return None

    def cold_start_samples(self, features: JobFeatures) -> list[float]:
        """The finished jobs' sizes the cold-start rule took its median of (none: its answer)."""
        population = self._cold_start_population(features)
        if population is None:
            return [self.cold_start(features)[0]]
        logs = self._all_log if population[0] == "all" else self._history[population]
        return [math.expm1(y) for y in logs]

    def _cold_start_distribution(self, features: JobFeatures, beyond_factor: float) -> SizeDistribution:
        """The cold-start population as a distribution, shared by every job it answers for
        until the next job finishes."""
        if features.declared_iters:  # the job's own figure, no population
            return SizeDistribution(self.cold_start_samples(features), beyond_factor=beyond_factor)
        key = (self._cold_start_population(features), beyond_factor)  # None: the default answer
        if key not in self._cold_start_dists:
            self._cold_start_dists[key] = SizeDistribution(self.cold_start_samples(features),
                                                           beyond_factor=beyond_factor)
        return self._cold_start_dists[key]

    def distributions(self, features: Sequence[JobFeatures], *,
                      beyond_factor: float = 0.5) -> list[SizeDistribution]:
        """Each job's size as a distribution, from the same rule `predict` answers with.

        The forest's is a quantile-regression forest's (Meinshausen 2006):
        every sample it was fitted on, weighted by the share of each tree's
        leaf it shares with the job, summed over trees. The cold-start
        rules' is the population their median is taken of.
        """
        answers = [source for _, source in self.predict(features)]
        out = []
        for f, source in zip(features, answers):
            if source == "forest":
                weights = self._forest_weights(f.row)
                out.append(SizeDistribution(self._fit_targets, weights, beyond_factor=beyond_factor))
            else:
                out.append(self._cold_start_distribution(f, beyond_factor))
        return out

    def _forest_weights(self, row: tuple[float, ...]) -> Any:
        if self._flat is None:
            self._flat = FlatForest(self._forest)
        flat = self._flat
        if self._leaf_weights is None:
            from scipy.sparse import csr_matrix

            train = self._flat.leaves([r for r, _ in self._fit_rows])
            n, n_trees = train.shape
            sizes = np.bincount(train.ravel(), minlength=len(flat.left))
            nodes = train.ravel()
            samples = np.repeat(np.arange(n), n_trees)
            self._leaf_weights = csr_matrix((1.0 / sizes[nodes], (nodes, samples)),
                                            shape=(len(flat.left), n))
        leaves = flat.leaves([row])[0]
        return np.asarray(self._leaf_weights[leaves].sum(axis=0)).ravel()

    def predict(self, features: Sequence[JobFeatures]) -> list[tuple[float, str]]:
        """Predicted iterations and the rule that gave them, for each job."""
        answers: list[tuple[float, str] | None] = [None] * len(features)
        forest_rows = []
        if self._forest is not None:
            for i, f in enumerate(features):
                if self._history.get(("key", f.key)):
                    forest_rows.append(i)
        if forest_rows:
            for i, y in zip(forest_rows, self._forest_predict([features[i].row for i in forest_rows])):
                answers[i] = (max(1.0, math.expm1(float(y))), "forest")
        return [a if a is not None else self.cold_start(f) for a, f in zip(answers, features)]

    def _forest_predict(self, rows: list[tuple[float, ...]]) -> list[float]:
        """The forest's mean over its trees, as ``RandomForestRegressor.predict`` gives it.

        Reruns of a job often arrive with the same feature row, so each
        forest remembers its answers (it answers a row the same every time).
        """
        if self._flat is None:
            self._flat = FlatForest(self._forest)
        answers = self._answers
        new = list(dict.fromkeys(row for row in rows if row not in answers))
        if new:
            answers.update(zip(new, self._flat.predict(new)))
        return [answers[row] for row in rows]

    # ---------------------------------------------------------------- learning
    def adopt_forest(self, forest: Any) -> None:
        """Predict with a forest fitted elsewhere, on `JobFeatures.row` rows and log1p targets."""
        self._forest, self._flat, self._answers = forest, None, {}

    def observe_history(self, finished: Sequence[tuple[JobFeatures, float]]) -> None:
        """Learn from a log of finished jobs at once, in order, and fit the forest once."""
        for features, actual_iters in finished:
            self._remember(features, actual_iters)
        if self.use_forest and len(self._rows) >= self.min_train_rows:
            self._fit()

    def observe(self, features: JobFeatures, actual_iters: float) -> bool:
        """Learn from a finished job; returns True when the forest was refitted."""
        self._remember(features, actual_iters)
        due = self._forest is None or self._since_fit >= max(
            self.refit_every, self.refit_growth * len(self._all_log))
        if self.use_forest and len(self._rows) >= self.min_train_rows and due:
            self._fit()
            return True
        return False

    def _remember(self, features: JobFeatures, actual_iters: float) -> None:
        y = math.log1p(max(actual_iters, 0.0))
        self._cold_start_dists.clear()
        self._rows.append((features.row, y))
        self._all_log.append(y)
        for kind, value in (("key", features.key), ("group", features.group),
                            ("user", features.user), ("model", features.model)):
            if not value:
                continue
            history = self._history.setdefault((kind, value), deque(maxlen=self.history_window))
            history.append(y)
        self._since_fit += 1

    def _fit(self) -> None:
        require_sklearn()
        from sklearn.ensemble import RandomForestRegressor

        x = np.array([row for row, _ in self._rows])
        y = np.array([target for _, target in self._rows])
        params = {"n_estimators": 100, **self.forest_params, "random_state": self.random_state}
        self._forest, self._flat = RandomForestRegressor(**params).fit(x, y), None
        self._answers = {}
        self._fit_rows = list(self._rows)
        self._fit_targets, self._leaf_weights = np.expm1(y), None
        self._since_fit = 0
        self._n_fits += 1


class FlatForest:
    """A fitted forest's trees as flat arrays, walked together: one step per level for all trees.

    Asking each tree (``tree_.predict``) in turn costs a call, a validation
    and a thread-pool dispatch per tree; an arrival needs one row, so that
    overhead is nearly all of it. Here every tree descends at once. The
    comparisons are the trees' own (the row as float32, against float64
    thresholds) and the trees' leaf values are summed in tree order, as
    ``RandomForestRegressor.predict`` sums them, so the answers are the same
    to the last bit.
    """

    def __init__(self, forest: Any) -> None:
        trees = [estimator.tree_ for estimator in forest.estimators_]
        offsets = np.cumsum([0] + [tree.node_count for tree in trees])
        left = np.concatenate([tree.children_left for tree in trees])
        right = np.concatenate([tree.children_right for tree in trees])
        node_ids = np.arange(len(left))
        leaf = left < 0
        shift = np.repeat(offsets[:-1], [tree.node_count for tree in trees])
        # A leaf points at itself, so that descending past it stays put.
        self.left = np.where(leaf, node_ids, left + shift)
        self.right = np.where(leaf, node_ids, right + shift)
        self.feature = np.where(leaf, 0, np.concatenate([tree.feature for tree in trees]))
        self.threshold = np.concatenate([tree.threshold for tree in trees])
        self.value = np.concatenate([tree.value[:, 0, 0] for tree in trees])
        self.roots = offsets[:-1]
        self.depth = max(tree.max_depth for tree in trees)

    def leaves(self, rows: Sequence[tuple[float, ...]]) -> Any:
        """The leaf each row reaches in each tree: node ids, one row per row, one column per tree."""
        n_rows, n_trees = len(rows), len(self.roots)
        if n_rows == 0:
            return np.empty((0, n_trees), dtype=self.roots.dtype)
        x = np.asarray(rows, dtype=np.float32).astype(np.float64)
        flat_x = x.ravel()
        row_start = np.repeat(np.arange(n_rows) * x.shape[1], n_trees)
        node = np.tile(self.roots, n_rows)  # row-major: all trees of row 0, then of row 1, ...
        for _ in range(self.depth):
            go_left = flat_x[row_start + self.feature[node]] <= self.threshold[node]
            child = np.where(go_left, self.left[node], self.right[node])
            # Only a leaf is its own child: once every walk is at one, the rest are no-ops.
            if (child == node).all():
                break
            node = child
        return node.reshape(n_rows, n_trees)

    def predict(self, rows: list[tuple[float, ...]]) -> list[float]:
        """The mean leaf value over the trees, for each row."""
        node = self.leaves(rows)
        # cumsum adds in tree order, one tree at a time, as the forest's own mean does.
        total = np.cumsum(self.value[node], axis=1)[:, -1]
        return [float(v) for v in total / len(self.roots)]
