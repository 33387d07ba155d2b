"""Which running jobs have run past their predicted iterations, without reading every job each event.

A running job's progress grows linearly between the changes an engine
makes to its state (a start, a stop, a new rate), and each such change
bumps `JobState.version` or hands over a new state object. So the instant
a job can first reach its prediction is known in advance: `OverrunWatch`
keeps those instants in a heap, and at each event works out the progress
only of the jobs whose instant has come, and finds their instants anew only
for the jobs whose state or prediction changed since the last event: those
the engine names (`ClusterView.running_changes_since`), or, where it names
none, those a comparison of every running state with the last event's finds.

The instants are lower bounds, early by a margin far above floating-point
rounding, so a job is read at, or a little before, the first event at which
reading it would find an overrun: the same jobs overrun, at the same
events, with the same progress as reading every job at every event.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Mapping
from operator import attrgetter

from mypy_extensions import mypyc_attr

from rackwise.workload.state import JobState, state_of

_VERSION = attrgetter("version")
_ITERS_SLACK = 1e-9  # of the prediction: far above the rounding of the progress arithmetic
_TIME_SLACK = 1e-7  # of the instant: likewise, for the rounding of the time arithmetic

# A heap entry: (earliest instant, tie-break, job id, state, its version, prediction when computed).
_Due = tuple[float, int, str, JobState, int, float]


def iters_done_at(state: JobState, now: float) -> float:
    """`JobState.iters_at` for a running job, inlined (the same arithmetic, hence the same bits)."""
    done = state.iters_done
    productive = now - max(state.last_update, state.busy_until)
    if productive > 0.0:
        done = min(state.job.total_iters, done + productive * state.rate_iters_per_s)
    return done


def is_overrun(state: JobState, estimate: float, now: float) -> bool:
    """The running job has done its predicted iterations by ``now`` and is not finished."""
    done = iters_done_at(state, now)
    return done >= estimate and done < state.job.total_iters


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class OverrunWatch:
    """The running jobs that have reached their predicted iterations, event by event.

    Tell it of every change to a prediction (`estimate_changed`); then
    `overruns` at each event gives the running jobs whose progress has
    reached their prediction while they still have iterations left.
    """

    def __init__(self) -> None:
        self._due: list[_Due] = []
        self._tie = itertools.count()
        self._seen: set[tuple[str, JobState, int]] = set()  # running jobs as last read
        self._states: list[JobState] = []  # the same, as lists, to see at once that nothing changed
        self._versions: list[int] = []
        self._changed: set[str] = set()  # jobs whose prediction changed since

    def estimate_changed(self, job_id: str) -> None:
        """The job's prediction is no longer the one it was watched with."""
        self._changed.add(job_id)

    def overruns(self, running: Mapping[str, JobState], estimates: Mapping[str, float],
                 now: float, restated: Iterable[str] | None = None) -> list[JobState]:
        """The running jobs whose progress at ``now`` has reached ``estimates[job_id]``, unfinished.

        ``restated``: every job whose running state changed since the last call
        (more do no harm), as `ClusterView.running_changes_since` names them;
        None: every running job is compared with the last call's.
        """
        if restated is not None:
            # The comparison below stays sound: versions only grow, so a state it
            # last saw before these changes still differs from the current one.
            for job_id in restated:
                state = state_of(running, job_id)
                if state is not None:
                    self._watch(job_id, state, state.version, estimates[job_id])
        else:
            states = [*running.values()]
            versions = [*map(_VERSION, states)]
            if states != self._states or versions != self._versions:  # compared by identity, in C
                seen = set(zip(running, states, versions))
                for job_id, state, version in seen - self._seen:
                    self._watch(job_id, state, version, estimates[job_id])
                self._seen, self._states, self._versions = seen, states, versions
        for job_id in self._changed:
            changed = state_of(running, job_id)
            if changed is not None:
                self._watch(job_id, changed, changed.version, estimates[job_id])
        self._changed.clear()

        due, out, again = self._due, [], []
        while due and due[0][0] <= now:
            entry = heapq.heappop(due)
            _, _, job_id, state, version, estimate = entry
            if state_of(running, job_id) is not state or state.version != version or estimates[job_id] != estimate:
                continue  # outdated: the change that outdated it pushed a new entry
            if is_overrun(state, estimate, now):
                out.append(state)  # its prediction grows, and `estimate_changed` watches it anew
            else:
                again.append(entry)  # within the margin: read again at the next event
        for entry in again:
            heapq.heappush(due, entry)
        return out

    def _watch(self, job_id: str, state: JobState, version: int, estimate: float) -> None:
        """Push the earliest instant at which the job, as it runs now, may reach ``estimate``."""
        if estimate >= state.job.total_iters:
            return  # it finishes first; `is_overrun` could never hold
        need = estimate - state.iters_done - _ITERS_SLACK * abs(estimate)
        rate = state.rate_iters_per_s
        if need <= 0.0:
            at = -math.inf  # it may have reached it already
        elif rate > 0.0:
            base = max(state.last_update, state.busy_until)
            at = base + need / rate * (1.0 - _TIME_SLACK) - _TIME_SLACK * abs(base)
            if math.isnan(at):
                at = -math.inf
        else:
            return  # makes no progress until its state changes
        heapq.heappush(self._due, (at, next(self._tie), job_id, state, version, estimate))
