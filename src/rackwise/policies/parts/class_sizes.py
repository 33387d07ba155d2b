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

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable, Hashable

from mypy_extensions import mypyc_attr

from rackwise.policies.parts.size_distribution import SizeDistribution


def kaplan_meier(finished: list[float], lower_bounds: list[float], *,
                 beyond_factor: float) -> SizeDistribution | None:
    """The Kaplan-Meier distribution of the ``finished`` sizes and the unfinished jobs' ``lower_bounds``.

    Both lists come smallest first. The mass left past the largest value
    (jobs outliving every finished one) is put at ``1 + beyond_factor``
    times it. None when nothing finished.
    """
    if not finished:
        return None
    sizes: list[float] = []
    weights: list[float] = []
    at_risk = len(finished) + len(lower_bounds)
    survival = 1.0
    j, n_bounds = 0, len(lower_bounds)
    for size in finished:
        # At equal values a finish comes before a lower bound, as the estimator's convention has it.
        while j < n_bounds and lower_bounds[j] < size:
            j += 1
            at_risk -= 1
        after = survival * (1.0 - 1.0 / at_risk)
        mass = survival - after
        if mass > 0.0:
            sizes.append(size)
            weights.append(mass)
        survival = after
        at_risk -= 1
    if survival > 0.0:  # the largest is unfinished: its mass goes past it
        largest = lower_bounds[-1] if n_bounds and lower_bounds[-1] > finished[-1] else finished[-1]
        sizes.append((1.0 + beyond_factor) * largest)
        weights.append(survival)
    return SizeDistribution(sizes, weights, beyond_factor=beyond_factor, assume_sorted=True)


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
        # Per class, the sizes of its finished members, smallest first, and its unfinished
        # members in arrival order: a distribution reads no finished member again.
        self._finished: dict[Hashable, list[float]] = {}
        self._unfinished: dict[Hashable, dict[str, None]] = {}
        self._cached: dict[Hashable, SizeDistribution | None] = {}
        self._changes: dict[Hashable, int] = {}  # arrivals and finishes since it was worked out

    def arrive(self, job_id: str, job_class: Hashable) -> None:
        """A job of the class arrived; its size is known once it finishes."""
        members = self._members.setdefault(job_class, deque())
        unfinished = self._unfinished.setdefault(job_class, {})
        members.append(job_id)
        unfinished[job_id] = None
        if len(members) > self._window:
            left = members.popleft()
            size = self._sizes.pop(left, None)
            if size is None:
                del unfinished[left]
            else:
                finished = self._finished[job_class]
                del finished[bisect_left(finished, size)]
        self._changed(job_class, len(members))

    def finish(self, job_id: str, job_class: Hashable, size: float) -> None:
        """A job of the class finished with this size."""
        unfinished = self._unfinished.get(job_class)
        if unfinished is not None and job_id in unfinished:
            del unfinished[job_id]
            self._sizes[job_id] = size
            insort(self._finished.setdefault(job_class, []), size)
            self._changed(job_class, len(self._members[job_class]))

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
            finished = self._finished.get(job_class, [])
            lower_bounds = [attained(job_id) for job_id in self._unfinished[job_class]] if finished else []
            lower_bounds.sort()
            self._cached[job_class] = kaplan_meier(finished, lower_bounds, beyond_factor=self._beyond_factor)
        return self._cached[job_class]
