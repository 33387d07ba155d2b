"""Watching for overruns by due time finds what reading every running job at every event finds."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.policies.parts.overrun_watch import OverrunWatch, is_overrun, iters_done_at
from rackwise.workload.job import Job
from rackwise.workload.state import JobState, Status


def _running(job_id: str, total: int, rate: float, now: float, done: float) -> JobState:
    state = JobState(Job(job_id, 0.0, 1, float(total)))
    state.status = Status.RUNNING
    state.iters_done = min(done, float(total))
    state.rate_iters_per_s = rate
    state.last_update = state.busy_until = state.run_start = now
    return state


_EVENT = st.tuples(st.floats(0.0, 50.0), st.sampled_from(["tick", "rerate", "restate", "stop", "guess"]),
                   st.integers(0, 5), st.floats(0.0, 30.0), st.booleans())


@settings(max_examples=150)
@given(st.lists(st.tuples(st.integers(1, 400), st.floats(0.0, 12.0), st.floats(0.5, 300.0)),
                min_size=1, max_size=6),
       st.lists(_EVENT, max_size=40))
def test_the_same_jobs_overrun_at_the_same_events_as_reading_all(
        jobs: list[tuple[int, float, float]], events: list[tuple[float, str, int, float, bool]]) -> None:
    """Told what changed (an engine's log, on the events that draw it) or comparing every state."""
    now = 0.0
    running = {f"j{i}": _running(f"j{i}", total, rate, now, 0.0) for i, (total, rate, _) in enumerate(jobs)}
    estimates = {f"j{i}": guess for i, (_, _, guess) in enumerate(jobs)}
    watch = OverrunWatch()
    log = [*running]  # the jobs whose running state changed since the last event: all started
    for step, kind, which, amount, told in events:
        now += step
        job_id = f"j{which}"
        state = running.get(job_id)
        if state is not None and kind == "rerate":  # what an engine does: progress, new rate, version
            state.advance(now)
            state.rate_iters_per_s = amount
            state.version += 1
            log.append(job_id)
        elif state is not None and kind == "restate":  # a driver's fresh state object, same progress
            running[job_id] = _running(job_id, int(state.job.total_iters), amount, now,
                                       iters_done_at(state, now))
            log.append(job_id)
        elif kind == "stop":
            running.pop(job_id, None)
            log.append(job_id)
        elif state is not None and kind == "guess":
            estimates[job_id] = amount
            watch.estimate_changed(job_id)
        expected = {j for j, s in running.items() if is_overrun(s, estimates[j], now)}
        found = watch.overruns(running, estimates, now, log if told else None)
        log = []
        assert {s.job_id for s in found} == expected
        for s in found:  # the policy's answer: a larger prediction
            done = iters_done_at(s, now)
            estimates[s.job_id] = float(max(math.ceil(1.5 * done), math.floor(done) + 1))
            watch.estimate_changed(s.job_id)
