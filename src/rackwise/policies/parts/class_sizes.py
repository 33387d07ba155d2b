"""The sizes of recent jobs of a class, finished or not: a Kaplan-Meier estimate.

A predictor that learns only from finished jobs is biased short under load:
the long jobs of a class are the ones still running. `ClassSizes` keeps the
last jobs to arrive in each class (virtual cluster and GPU count, what any
trace carries) and counts the unfinished ones too, as lower bounds on their
size (the service they have attained so far). The Kaplan-Meier estimator
turns such censored sizes into a distribution (Kaplan and Meier 1958), which
`SizeDistribution` then conditions on a job's own attained service.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable

import numpy as np
from mypy_extensions import mypyc_attr

from rackwise.policies.parts.size_distribution import SizeDistribution


def kaplan_meier(values: np.ndarray, finished: np.ndarray, *, beyond_factor: float) -> SizeDistribution | None:
    """The Kaplan-Meier distribution of sizes, of which the unfinished ones are lower bounds.

    The mass left past the largest lower bound (jobs outliving every finished
    one) is put at ``1 + beyond_factor`` times it. None when nothing finished.
    """
    if not finished.any():
        return None
    # At equal values a finish comes before a lower bound, as the estimator's convention has it.
    order = np.lexsort((~finished, values))
    x, done = values[order], finished[order]
    at_risk = len(x) - np.arange(len(x))
    survival = np.cumprod(np.where(done, 1.0 - 1.0 / at_risk, 1.0))
    mass = np.concatenate(([1.0], survival[:-1])) - survival
    sizes, weights = x[done], mass[done]
    if survival[-1] > 0:  # the largest is unfinished: its mass goes past it
        sizes = np.append(sizes, (1.0 + beyond_factor) * float(x[-1]))
        weights = np.append(weights, float(survival[-1]))
    return SizeDistribution(sizes, weights, beyond_factor=beyond_factor)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class ClassSizes:
    """The last ``window`` jobs of each class, and their Kaplan-Meier size distribution.

    Sizes are in whatever unit the caller gives (the predictor's target
    unit). A class's distribution is worked out again only once arrivals
    and finishes in the class reach ``refresh_share`` of its jobs (at least
    one; 0: after each), or at its first finish; in between, its unfinished
    jobs keep the lower bounds they had then. Each new distribution costs
    its users new ranks: a busy class worked out less often saves those, at
    the price of staler sizes.
    """

    def __init__(self, window: int, beyond_factor: float, refresh_share: float = 0.0) -> None:
        self._window = window
        self._beyond_factor = beyond_factor
        self._refresh_share = refresh_share
        self._members: dict[Hashable, deque[str]] = {}
        self._sizes: dict[str, float] = {}  # finished jobs only
        self._cached: dict[Hashable, SizeDistribution | None] = {}
        self._changes: dict[Hashable, int] = {}  # arrivals and finishes since it was worked out

    def arrive(self, job_id: str, job_class: Hashable) -> None:
        """A job of the class arrived; its size is known once it finishes."""
        members = self._members.setdefault(job_class, deque())
        members.append(job_id)
        if len(members) > self._window:
            self._sizes.pop(members.popleft(), None)
        self._changed(job_class, len(members))

    def finish(self, job_id: str, job_class: Hashable, size: float) -> None:
        """A job of the class finished with this size."""
        members = self._members.get(job_class, ())
        if job_id in members:
            self._sizes[job_id] = size
            self._changed(job_class, len(members))

    def _changed(self, job_class: Hashable, n_members: int) -> None:
        changes = self._changes[job_class] = self._changes.get(job_class, 0) + 1
        if changes >= self._refresh_share * n_members or self._cached.get(job_class) is None:
            self._changes[job_class] = 0
            self._cached.pop(job_class, None)

    def distribution(self, job_class: Hashable,
                     attained: Callable[[str], float]) -> SizeDistribution | None:
        """The class's size distribution (None until one of its jobs finished).

        ``attained`` gives an unfinished job's service so far, its lower bound.
        """
        if job_class not in self._cached:
            sizes = self._sizes
            values: list[float] = []
            finished: list[bool] = []
            for job_id in self._members.get(job_class, ()):
                size = sizes.get(job_id)
                finished.append(size is not None)
                values.append(attained(job_id) if size is None else size)
            self._cached[job_class] = kaplan_meier(np.array(values, dtype=np.float64),
                                                   np.array(finished, dtype=bool),
                                                   beyond_factor=self._beyond_factor)
        return self._cached[job_class]
