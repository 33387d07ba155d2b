"""The delay-timer auto-tuner used by ``dally``: a per-class feedback controller.

rackwise's implementation of the published design (shared/papers/
network_sensitive_delay.md §3.3). The published signals and update rule are
not available; what is here is our reconstruction, and each constant is a
parameter of the ``dally`` policy.

Over an epoch the tuner collects, per sensitivity class and level:
hindsight times of jobs that gave up on a level (how long until a slot at
that level did appear), waits of jobs that won the level, the gain a won
wait buys, the queue trend and the GPU utilisation. At the end of the epoch
`tune_timer` moves each timer up or down by a bounded factor.

`ClassProfile` is what the policy knows of each class (σ of its jobs, L0
durations of the finished ones); the tuner's gain and the break-even
initial timers (`break_even_timer`) are both read from it.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mypy_extensions import mypyc_attr

from rackwise.frozen import pickled_by_constructor
from rackwise.policies.parts.locality import L0, L1

if TYPE_CHECKING:
    from rackwise.engine.view import ClusterView


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class TimerUpdate:
    """One change the tuner made to a timer (a row of ``timer_log_``)."""

    time: float
    cls: str
    level: int
    old_s: float
    new_s: float
    reason: str

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return pickled_by_constructor(self)


def break_even_timer(gain_s: float, *, kappa: float = 0.5, max_timer_s: float = 14_400.0) -> float:
    """Seconds worth waiting for a level: ``kappa`` x the slowdown it avoids, in [0, max_timer_s].

    ``gain_s`` is (σ(ℓ+1) − σ(ℓ)) x D: what a job of the class loses by
    taking the next looser level instead. Waiting longer than a fraction of
    that cannot pay back, so the timer is that fraction (digest §3.1).
    """
    return min(max(kappa * gain_s, 0.0), max_timer_s)


def tune_timer(timer_s: float, *, hindsight_s: Sequence[float], won_wait_s: Sequence[float],
               gain_s: float, queue_trend: int, utilisation: float, step: float = 0.25,
               hindsight_frac: float = 0.5, util_high: float = 0.9,
               max_timer_s: float = 14_400.0, seed_timer_s: float = 60.0,
               relaxed_loss_s: Sequence[float] = (), loss_kappa: float = 0.5,
               ) -> tuple[float, str | None]:
    """One epoch's update of one timer: the new value and why (None: no rule fired).

    Rules, first match wins: jobs that gave up the level and finished lost
    more running looser than ``timer_s`` (their mean measured loss) -> up to
    ``loss_kappa`` x that loss at once, and at least one step longer; jobs
    gave up just too early (a slot came within ``hindsight_frac`` of the
    timer and sooner than the gain) -> longer; won waits cost more than they
    gain -> shorter; the queue grew while GPUs sat idle -> shorter. The
    result is clamped to [0, max_timer_s]; a timer at 0 whose jobs gave up
    is re-seeded so it can grow again.
    """
    new, reason = timer_s, None
    if relaxed_loss_s and (loss := statistics.fmean(relaxed_loss_s)) > timer_s:
        new, reason = max(timer_s * (1.0 + step), loss_kappa * loss), "relaxing-lost-more"
    elif hindsight_s and (h := statistics.median(hindsight_s)) <= hindsight_frac * timer_s and h < gain_s:
        new, reason = timer_s * (1.0 + step), "gave-up-too-early"
    elif won_wait_s and statistics.fmean(won_wait_s) > gain_s:
        new, reason = timer_s * (1.0 - step), "wait-costs-more-than-gain"
    elif queue_trend > 0 and utilisation < util_high:
        new, reason = timer_s * (1.0 - step), "queue-grows-with-idle-gpus"
    new = min(max(new, 0.0), max_timer_s)
    if new == 0.0 and hindsight_s:
        new, reason = seed_timer_s, reason or "reseed"
    return new, reason


def _median(sorted_values: list[float]) -> float:
    n = len(sorted_values)
    mid = n // 2
    return sorted_values[mid] if n % 2 else (sorted_values[mid - 1] + sorted_values[mid]) / 2.0


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class ClassProfile:
    """Per sensitivity class: σ at each level of every job seen, L0 durations of finished ones.

    Values are kept sorted, so a median costs O(1) however many jobs came
    by (the break-even timers read it at every pass while they track it).

    Args:
        classes: The classes profiled; notes about any other are ignored.
        default_duration_s: D of a class before any job of it finished.
    """

    def __init__(self, classes: tuple[str, ...], default_duration_s: float) -> None:
        self.classes = classes
        self.default_duration_s = default_duration_s
        self.sigmas: dict[str, tuple[list[float], list[float], list[float]]] = {
            c: ([], [], []) for c in classes}
        self.durations: dict[str, list[float]] = {c: [] for c in classes}

    def note_sigma(self, cls: str, sigma: tuple[float, float, float]) -> None:
        levels = self.sigmas.get(cls)
        if levels is not None:
            for values, value in zip(levels, sigma, strict=True):
                bisect.insort(values, value)

    def note_finish(self, cls: str, duration_s: float) -> None:
        if cls in self.durations:
            bisect.insort(self.durations[cls], duration_s)

    def seen(self, cls: str) -> bool:
        """Whether a job of the class has been classified (its σ is known)."""
        levels = self.sigmas.get(cls)
        return levels is not None and bool(levels[0])

    def duration_s(self, cls: str) -> float:
        """D: median L0 duration of the class's finished jobs, else the default."""
        durations = self.durations[cls]
        return _median(durations) if durations else self.default_duration_s

    def penalty(self, cls: str, level: int) -> float:
        """Median σ(ℓ+1) − median σ(ℓ) of the class: what taking the next looser level costs."""
        levels = self.sigmas.get(cls)
        if not levels or not levels[0]:
            return 0.0
        return _median(levels[level + 1]) - _median(levels[level])

    def gain_s(self, cls: str, level: int) -> float:
        """Slowdown one job of the class avoids by waiting at ``level``, in seconds."""
        return self.penalty(cls, level) * self.duration_s(cls)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class RunningMean:
    """The mean of a growing series, as `statistics.fmean` of the whole series gives it, bit for
    bit, at a cost that does not grow with it: the exact partial sums that `math.fsum` keeps
    (Shewchuk 1997) are carried from one value to the next (finite values only)."""

    __slots__ = ("n", "partials")

    def __init__(self) -> None:
        self.n = 0
        self.partials: list[float] = []  # non-overlapping, smallest first; they sum exactly to the total

    def add(self, value: float) -> None:
        partials = self.partials
        kept = 0
        for partial in partials:
            if abs(value) < abs(partial):
                value, partial = partial, value
            high = value + partial
            low = partial - (high - value)
            if low:
                partials[kept] = low
                kept += 1
            value = high
        partials[kept:] = [value]
        self.n += 1

    def mean(self) -> float:
        """The mean so far (NaN before the first value)."""
        return math.fsum(self.partials) / self.n if self.n else math.nan


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class TimerTuner:
    """Run state of the auto-tuner: epoch signals and the log of updates.

    Args:
        classes: The classes whose timers it tunes (``low`` is never tuned).
        every_s: Epoch length in simulated seconds.
        every_starts: An epoch also ends after this many job starts.
        default_duration_s: Duration estimate of a class before any job of it finished.
        n_gpus: Cluster size, for utilisation.
        rule: Keyword arguments passed on to `tune_timer`.
        profile: The class profile to read gains from (shared with the policy);
            a new one over ``classes`` if None.
    """

    def __init__(self, *, classes: tuple[str, ...], every_s: float, every_starts: int,
                 default_duration_s: float, n_gpus: int, rule: dict[str, float],
                 profile: ClassProfile | None = None) -> None:
        self.classes = classes
        self.every_s = every_s
        self.every_starts = every_starts
        self.n_gpus = n_gpus
        self.rule = rule
        self.log: list[TimerUpdate] = []
        self.profile = profile if profile is not None else ClassProfile(classes, default_duration_s)
        self.n_epochs = 0  # epochs ended so far
        # (relaxed_at, class) of jobs that gave up, by (n_gpus, level), until a slot appears;
        # each list in the order they gave up, so also by time
        self.watchers: dict[tuple[int, int], list[tuple[float, str]]] = {}
        # measured losses of finished jobs that gave up each (class, level), over the run
        self.losses: dict[tuple[str, int], RunningMean] = {
            (c, level): RunningMean() for c in classes for level in (L0, L1)}
        self.epoch_start: float | None = None
        self.queue_at_start = 0
        self.last_time: float | None = None
        self.busy_gpus = 0
        self._new_epoch()

    def _new_epoch(self) -> None:
        self.n_starts = 0
        self.busy_gpu_s = 0.0
        keys = [(c, level) for c in self.classes for level in (L0, L1)]
        self.hindsight: dict[tuple[str, int], list[float]] = {k: [] for k in keys}
        self.won: dict[tuple[str, int], list[float]] = {k: [] for k in keys}
        self.epoch_losses: dict[tuple[str, int], list[float]] = {k: [] for k in keys}

    # ------------------------------------------------------------------ signals
    def tuned(self, cls: str) -> bool:
        return cls in self.classes

    def note_sigma(self, cls: str, sigma: tuple[float, float, float]) -> None:
        self.profile.note_sigma(cls, sigma)

    def note_finish(self, cls: str, duration_s: float) -> None:
        self.profile.note_finish(cls, duration_s)

    def note_relaxed_loss(self, cls: str, level: int, loss_s: float) -> None:
        """A job that gave up ``level`` finished; running looser cost it ``loss_s`` seconds."""
        if cls in self.classes:
            self.losses[(cls, level)].add(loss_s)
            self.epoch_losses[(cls, level)].append(loss_s)

    def note_relax(self, cls: str, level: int, n_gpus: int, now: float) -> None:
        if cls in self.classes:
            self.watchers.setdefault((n_gpus, level), []).append((now, cls))

    def note_start(self, cls: str, level: int | None, wait_s: float) -> None:
        """A job started; ``level`` is set when it won the level it waited for."""
        self.n_starts += 1
        if level is not None and wait_s > 0.0 and cls in self.classes:
            self.won[(cls, level)].append(wait_s)

    def observe(self, view: ClusterView, now: float) -> None:
        """Called at the start of every pass: utilisation and hindsight slots."""
        if self.epoch_start is None:
            self.epoch_start, self.queue_at_start = now, len(view.pending)
        if self.last_time is not None:
            self.busy_gpu_s += self.busy_gpus * (now - self.last_time)
        self.last_time = now
        if not self.watchers:
            return
        cap = float(self.rule.get("max_timer_s", 14_400.0))
        n_free = view.n_free
        probe = view.tentative()
        most_in_a_rack: int | None = None  # worked out once asked
        for key, waiting in list(self.watchers.items()):
            n_gpus, level = key
            if now <= waiting[0][0]:
                continue  # all gave up at this very instant (or later)
            if n_gpus > n_free:
                found = False  # no node or rack has more free GPUs than the cluster
            elif level == L0:
                found = probe.tightest_node(n_gpus) is not None
            else:
                if most_in_a_rack is None:
                    most_in_a_rack = probe.most_free_in_a_rack()
                found = most_in_a_rack >= n_gpus
            if not found and now - waiting[0][0] < cap:
                continue
            # A slot ends every wait begun before now, the cap the oldest ones: either way the
            # first waits in the list, as it is in time order.
            ended = 0
            while ended < len(waiting) and now > (since := waiting[ended][0]) and (found or now - since >= cap):
                self.hindsight[(waiting[ended][1], level)].append(min(now - since, cap))
                ended += 1
            if ended == len(waiting):
                del self.watchers[key]
            else:
                self.watchers[key] = waiting[ended:]

    def after_pass(self, busy_gpus: int) -> None:
        self.busy_gpus = busy_gpus

    # ------------------------------------------------------------------ epochs
    def due(self, now: float) -> bool:
        return self.epoch_start is not None and (
            now >= self.epoch_start + self.every_s or self.n_starts >= self.every_starts)

    def next_epoch_at(self) -> float | None:
        return None if self.epoch_start is None else self.epoch_start + self.every_s

    def gain_s(self, cls: str, level: int) -> float:
        """Slowdown one job of the class avoids by waiting at ``level``, in seconds: the
        profile's estimate, or the mean measured loss of the jobs that gave it up if larger."""
        losses = self.losses[(cls, level)]
        measured = losses.mean() if losses.n else 0.0
        return max(self.profile.gain_s(cls, level), measured)

    def tune(self, now: float, timers: dict[str, list[float]], queue_len: int) -> None:
        """End the epoch: update the timers in place and log each change."""
        assert self.epoch_start is not None
        elapsed = now - self.epoch_start
        utilisation = (self.busy_gpu_s / (self.n_gpus * elapsed) if elapsed > 0
                       else self.busy_gpus / self.n_gpus)
        trend = queue_len - self.queue_at_start
        for cls in self.classes:
            for level in (L0, L1):
                old = timers[cls][level]
                new, reason = tune_timer(
                    old, hindsight_s=self.hindsight[(cls, level)], won_wait_s=self.won[(cls, level)],
                    gain_s=self.gain_s(cls, level), queue_trend=trend, utilisation=utilisation,
                    relaxed_loss_s=self.epoch_losses[(cls, level)], **self.rule)
                if reason is not None:
                    timers[cls][level] = new
                    self.log.append(TimerUpdate(now, cls, level, old, new, reason))
        self.epoch_start, self.queue_at_start = now, queue_len
        self.n_epochs += 1
        self._new_epoch()
