"""The headline figures of a run."""

import dataclasses

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackwise.metrics.records import JobRecord, Timeline
from rackwise.metrics.summary import summarize, timeline_frame

RECORD = JobRecord(job_id="a", group=None, model=None, n_gpus=4, submit_time=0.0, first_start=0.0,
                   finish_time=7200.0, jct_s=7200.0, queueing_delay_s=0.0, run_time_s=7200.0,
                   overhead_s=0.0, gpu_s=4 * 7200.0, n_preemptions=0, n_nodes=1, n_racks=1,
                   duration_s=7200.0, total_iters=100.0)
TIMELINE = Timeline(time=[0.0, 7200.0], busy_gpus=[4, 0], n_pending=[0, 0], n_running=[1, 0])


def test_lost_gpu_hours_appear_only_when_a_failure_threw_work_away() -> None:
    assert "lost_gpu_hours" not in summarize([RECORD], TIMELINE, 8)
    failed = dataclasses.replace(RECORD, job_id="b", lost_s=1800.0)
    assert summarize([RECORD, failed], TIMELINE, 8)["lost_gpu_hours"] == pytest.approx(2.0)


@given(st.lists(st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.none(),
                          st.text(max_size=3), st.booleans()), max_size=6),
       st.sampled_from(["ints", "floats", "any"]))
def test_timeline_columns_are_the_frames_pandas_would_make_of_the_lists(values: list, kind: str) -> None:
    """The numpy shortcut for all-float and all-int columns gives pandas' own frame, dtypes included."""
    if kind == "ints":
        values = [v for v in values if type(v) is int]
    elif kind == "floats":
        values = [v for v in values if type(v) is float]
    timeline = Timeline(time=values, busy_gpus=values, n_pending=values, n_running=values)
    expected = pd.DataFrame(dict.fromkeys(("time", "busy_gpus", "n_pending", "n_running"), values))
    pd.testing.assert_frame_equal(timeline_frame(timeline), expected, check_exact=True)
