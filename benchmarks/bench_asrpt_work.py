"""Where A-SRPT's per-event work goes, counted: what a cheaper decision could skip.

Runs ``asrpt`` (its defaults: survival predictions, Gittins rank) on the
first N jobs of philly_2017 on 512 GPUs, ideal performance model, seed 0,
with counters wrapped around its internals, and prints:

* decisions that rank the running jobs, and running jobs ranked per decision;
* the share of those rankings whose key is below the best waiting job's key
  (such a job is kept whatever its exact rank: no decision needs its rank);
* the share an exact bound could skip: the job's key when last ranked is an
  upper bound while its class's distribution is unchanged and its attained
  service stays in the same stretch between two samples (the Gittins rank
  falls there), so it could go unranked while that bound, plus 1e-9, is below
  the best waiting key;
* class distributions worked out again (Kaplan-Meier), by what made the
  last one stale (a job of the class arriving or finishing), the ranks
  worked out from a distribution and the rank bounds (the rest were read
  off a line or kept), and the rank envelopes built
  (`parts.size_distribution`) with their lines;
* decisions, and those "with nothing new": no job arrived or finished
  since a decision that started and preempted nothing (the policy's
  ``tick_s`` wake-ups, mostly). Only the preemption pass can act in them,
  so they bound what skipping such wake-ups could save: their count, how
  many did act, and their share of the CPU time spent deciding; and those
  that did nothing, by why: the greedy prefix kept no waiting job (so the
  pass had nothing to try), no running job outside it was a victim (keyed
  past the first kept waiting job's bar and run ``min_run_s``), or the
  victims tried made no room.

Two variants that are not rackwise's, each changing decisions, measure what
fewer class distributions would save:

* ``--km-on-finish``: a class's distribution goes stale only when one of
  its jobs finishes, not when one arrives (an arrival adds a lower bound of
  0, which alone leaves the estimate as it was, but the window also drops
  its oldest job and the running jobs' lower bounds are read again);
* ``--refresh-s S``: a stale distribution is worked out again only once S
  seconds have passed since it last was (or when the class has none).

``records_sha256`` is the same hash as ``bench_policies.py speed``'s: the
counters change no decision. CPU seconds include the counters' own cost.

    python benchmarks/bench_asrpt_work.py [--first-n 10000] [--no-counters] [--km-on-finish | --refresh-s 300]
"""

from __future__ import annotations

import argparse
import bisect
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from bench_policies import records_sha256, simulator_for
from provenance import provenance

import rackwise
from rackwise.engine.contract import Decisions
from rackwise.engine.view import ClusterView
from rackwise.policies.parts import class_sizes, predicted_srpt, size_distribution
from rackwise.policies.parts.size_distribution import SizeDistribution
from rackwise.workload.job import Job
from rackwise.workload.state import JobState, Status

MARGIN = 1e-9  # far above the few roundings by which a rank may miss its definition
_NONE = object()  # a class without a distribution kept


def _count(counts: Counter[str]) -> None:
    """Wrap the methods whose calls are counted (the counts go to ``counts``)."""
    stale_because: dict[Hashable, str] = {}
    bounds: dict[str, tuple[float, object, float, float]] = {}  # key, distribution, attained, stretch end
    best_waiting: list[float] = [float("inf")]

    arrive, finish = class_sizes.ClassSizes.arrive, class_sizes.ClassSizes.finish
    distribution, build = class_sizes.ClassSizes.distribution, size_distribution._Envelope._build_envelope
    ranked, kaplan_meier = predicted_srpt.PredictedSrpt._ranked, class_sizes.kaplan_meier
    decide = predicted_srpt.PredictedSrpt._schedule
    line, rank_bound = SizeDistribution.gittins_line, SizeDistribution.rank_bound
    on_arrival, on_completion = predicted_srpt.PredictedSrpt.on_arrival, predicted_srpt.PredictedSrpt.on_completion
    preempt_pass = predicted_srpt.PredictedSrpt._preempt_to_vm_order
    asking: list[Hashable] = [None]
    idle = [False]  # no arrival or finish since a decision that did nothing
    passed: list[str] = []  # what the decision's preemption pass had to try

    def counted_arrive(self: class_sizes.ClassSizes, job_id: str, job_class: Hashable) -> None:
        if job_class in self._cached:
            stale_because[job_class] = "an arrival"
        arrive(self, job_id, job_class)

    def counted_finish(self: class_sizes.ClassSizes, job_id: str, job_class: Hashable, size: float) -> None:
        if job_class in self._cached and job_id in self._members.get(job_class, ()):
            stale_because[job_class] = "a finish"
        finish(self, job_id, job_class, size)

    def counted_distribution(self: class_sizes.ClassSizes, job_class: Hashable,
                             attained: Callable[[str], float]) -> SizeDistribution | None:
        asking[0] = job_class
        return distribution(self, job_class, attained)

    def counted_kaplan_meier(*args: Any, **kwargs: Any) -> SizeDistribution | None:
        counts["distributions worked out, after " + stale_because.pop(asking[0], "none before")] += 1
        return kaplan_meier(*args, **kwargs)

    def counted_line(self: SizeDistribution, attained: float) -> tuple[float, size_distribution.RankLine | None]:
        counts["ranks worked out from a distribution"] += 1
        return line(self, attained)

    def counted_bound(self: SizeDistribution, attained: float) -> float:
        counts["rank bounds worked out"] += 1
        return rank_bound(self, attained)

    def counted_build(self: size_distribution._Envelope) -> list[float]:
        counts["envelopes built"] += 1
        counts["envelope lines read"] += len(self._values) - self._k  # the tail past the stretch
        return build(self)

    def counted_ranked(self: predicted_srpt.PredictedSrpt, states: Iterable[JobState],
                       now: float, below: float | None = None
                       ) -> tuple[list[tuple[predicted_srpt.Key, JobState]], list[JobState]]:
        out, under = ranked(self, states, now, below)
        if not under and (not out or out[0][1].status is not Status.RUNNING):
            best_waiting[0] = out[0][0][0] if out else float("inf")  # `_schedule` ranks the waiting first
            return out, under
        counts["decisions ranking running jobs"] += 1
        # Those under the best waiting key have no key: their rank bound stands in.
        keyed = [(None, state) for state in under] + [(key[0], state) for key, state in out]
        for known_key, state in keyed:
            counts["running jobs ranked"] += 1
            # As `_ranked` works them out (its cache keeps neither for a job read off a line).
            rank = self._ranks[state.job_id]
            attained = state.iters_at(now) * rank.unit
            dist = self._survival_distribution(state.job) or rank.own
            key = (rank_bound(dist, attained) / rank.unit * rank.vm_s_per_iter if known_key is None
                   else known_key)  # uncounted: `_ranked` did not ask for it
            counts["below the best waiting key"] += known_key is None or key < best_waiting[0]
            bound = bounds.get(state.job_id)
            if (bound is not None and bound[1] is dist and bound[2] <= attained < bound[3]
                    and bound[0] * (1 + MARGIN) < best_waiting[0]):
                counts["skippable by an exact bound"] += 1
                continue
            values = dist.values
            k = bisect.bisect_right(values, attained)
            end = float(values[k]) if k < len(values) else attained  # past the last sample the rank grows
            bounds[state.job_id] = (key, dist, attained, end)
        return out, under

    def counted_preempt_pass(self: predicted_srpt.PredictedSrpt, view: ClusterView,
                             desired: list[tuple[predicted_srpt.Key, JobState]],
                             waiting: list[tuple[predicted_srpt.Key, JobState]],
                             lowest_first: Callable[[], Iterable[tuple[predicted_srpt.Key, JobState]]],
                             free: Any, now: float) -> Any:
        if not waiting:
            passed.append("no waiting job kept")
        else:
            # The first kept waiting job has the lowest bar: a victim of any is one of its.
            bar = waiting[0][0][0] / (1.0 - self._params.epsilon)
            kept = {key[3] for key, _ in desired}
            victims = any(key[0] > bar and key[3] not in kept and now - state.run_start >= self._params.min_run_s
                          for key, state in lowest_first())
            passed.append("victims made no room" if victims else "no victim")
        return preempt_pass(self, view, desired, waiting, lowest_first, free, now)

    def counted_on_arrival(self: predicted_srpt.PredictedSrpt, job: Job) -> None:
        idle[0] = False
        on_arrival(self, job)

    def counted_on_completion(self: predicted_srpt.PredictedSrpt, job: Job, now: float) -> None:
        idle[0] = False
        on_completion(self, job, now)

    def counted_decide(self: predicted_srpt.PredictedSrpt, view: ClusterView, now: float) -> Decisions:
        nothing_new = idle[0]
        passed.clear()
        started = time.process_time()
        decisions = decide(self, view, now)
        spent = time.process_time() - started
        acted = bool(decisions.start or decisions.preempt)
        counts["decisions"] += 1
        counts["decisions with nothing new"] += nothing_new
        counts["decisions with nothing new that acted"] += nothing_new and acted
        counts["CPU us deciding"] += round(1e6 * spent)
        counts["CPU us deciding with nothing new"] += round(1e6 * spent) if nothing_new else 0
        if nothing_new and not acted:
            counts["with nothing new, did nothing: " + (passed[0] if passed else "no pass")] += 1
        idle[0] = not acted
        return decisions

    predicted_srpt.PredictedSrpt.on_arrival = counted_on_arrival  # type: ignore[method-assign]
    predicted_srpt.PredictedSrpt.on_completion = counted_on_completion  # type: ignore[method-assign]
    predicted_srpt.PredictedSrpt._schedule = counted_decide  # type: ignore[method-assign]
    predicted_srpt.PredictedSrpt._preempt_to_vm_order = counted_preempt_pass  # type: ignore[method-assign]
    class_sizes.ClassSizes.arrive = counted_arrive  # type: ignore[method-assign]
    class_sizes.ClassSizes.finish = counted_finish  # type: ignore[method-assign]
    class_sizes.ClassSizes.distribution = counted_distribution  # type: ignore[method-assign]
    class_sizes.kaplan_meier = counted_kaplan_meier
    size_distribution._Envelope._build_envelope = counted_build  # type: ignore[method-assign]
    SizeDistribution.gittins_line = counted_line  # type: ignore[method-assign]
    SizeDistribution.rank_bound = counted_bound  # type: ignore[method-assign]
    predicted_srpt.PredictedSrpt._ranked = counted_ranked  # type: ignore[method-assign]


def _stale_on_finish_only() -> None:
    """The variant: an arrival joins its class's window without making its distribution stale."""
    joining = class_sizes.ClassSizes.arrive

    def arrive(self: class_sizes.ClassSizes, job_id: str, job_class: Hashable) -> None:
        cached, changes = self._cached.get(job_class, _NONE), self._changes.get(job_class, 0)
        joining(self, job_id, job_class)
        if cached is not _NONE:  # as it was: not stale
            self._cached[job_class] = cached  # type: ignore[assignment]
        self._changes[job_class] = changes

    class_sizes.ClassSizes.arrive = arrive  # type: ignore[method-assign]


def _refresh_every(refresh_s: float) -> None:
    """The variant: a stale distribution is kept until ``refresh_s`` after it was worked out."""
    stale: set[Hashable] = set()
    worked_out_at: dict[Hashable, float] = {}
    clock = [0.0]  # the decision's time
    arrive, finish = class_sizes.ClassSizes.arrive, class_sizes.ClassSizes.finish
    distribution, schedule = class_sizes.ClassSizes.distribution, predicted_srpt.PredictedSrpt.schedule

    def keeping(change: Callable[..., None]) -> Callable[..., None]:
        def changed(self: class_sizes.ClassSizes, job_id: str, job_class: Hashable, *size: float) -> None:
            had = job_class in self._cached
            kept = self._cached.get(job_class)
            change(self, job_id, job_class, *size)
            if had and job_class not in self._cached:
                self._cached[job_class] = kept
                stale.add(job_class)
        return changed

    def refreshed(self: class_sizes.ClassSizes, job_class: Hashable,
                  attained: Callable[[str], float]) -> SizeDistribution | None:
        if job_class in stale and (self._cached[job_class] is None
                                   or clock[0] - worked_out_at[job_class] >= refresh_s):
            del self._cached[job_class]
            stale.discard(job_class)
        if job_class not in self._cached:
            worked_out_at[job_class] = clock[0]
        return distribution(self, job_class, attained)

    def timed(self: predicted_srpt.PredictedSrpt, view: ClusterView, at: float) -> Decisions:
        clock[0] = at
        return schedule(self, view, at)

    class_sizes.ClassSizes.arrive = keeping(arrive)  # type: ignore[method-assign]
    class_sizes.ClassSizes.finish = keeping(finish)  # type: ignore[method-assign]
    class_sizes.ClassSizes.distribution = refreshed  # type: ignore[method-assign]
    predicted_srpt.PredictedSrpt.schedule = timed  # type: ignore[method-assign, assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-n", type=int, default=10_000)
    parser.add_argument("--km-on-finish", action="store_true",
                        help="the variant whose class distributions go stale only on finishes")
    parser.add_argument("--refresh-s", type=float, default=None,
                        help="the variant whose stale class distributions wait this long")
    parser.add_argument("--no-counters", action="store_true", help="time the run alone")
    args = parser.parse_args()
    if rackwise.is_compiled():
        parser.error("its counters replace the policy's internals' methods, which the compiled build "
                     "calls directly: run it on the plain-Python build")
    counts: Counter[str] = Counter()
    if args.km_on_finish:
        _stale_on_finish_only()
    if args.refresh_s is not None:
        _refresh_every(args.refresh_s)
    if not args.no_counters:
        _count(counts)
    build = simulator_for("asrpt", "philly_2017", args.first_n)
    print(provenance())
    started = time.process_time()  # as `bench_policies.py speed` times its run
    result = build().run()
    cpu_s = time.process_time() - started
    digest = records_sha256(result)
    avg_jct_h = sum(r.jct_s for r in result.records) / len(result.records) / 3600
    print(f"jobs {len(result.records)}, steps {result.n_steps}, CPU s {cpu_s:.2f}, "
          f"avg JCT h {avg_jct_h:.3f}, records_sha256 {digest}")
    ranked = counts["running jobs ranked"]
    for name, value in counts.items():
        share = f" ({100 * value / ranked:.1f}% of running jobs ranked)" if name in (
            "below the best waiting key", "skippable by an exact bound") and ranked else ""
        if name in ("decisions with nothing new", "CPU us deciding with nothing new"):
            whole = counts["decisions" if name.startswith("decisions") else "CPU us deciding"]
            share = f" ({100 * value / whole:.1f}%)" if whole else ""
        print(f"{name}: {value}{share}")
    if counts["decisions ranking running jobs"]:
        print(f"running jobs per decision: {ranked / counts['decisions ranking running jobs']:.1f}")


if __name__ == "__main__":
    main()
