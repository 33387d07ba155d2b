"""rackwise.testing.busy_cluster: the large busy state one decision is timed on."""

from __future__ import annotations

from collections import Counter

import pytest

from rackwise.testing.busy_cluster import busy_cluster


@pytest.mark.parametrize("n_running", [300, 500])
def test_asked_for_a_count_the_busy_gpus_are_held_by_about_that_many_jobs(n_running: int) -> None:
    state = busy_cluster("fifo", n_nodes=250, n_pending=400, busy_frac=0.9, n_running=n_running)
    view = state.view
    busy = view.topology.n_gpus - view.n_free
    assert state.n_running == len(view.running)
    assert abs(len(view.running) - n_running) <= n_running // 20
    assert abs(busy - int(0.9 * view.topology.n_gpus)) <= 8
    assert len(view.pending) == 400
    # No GPU is given twice, and no job both runs and waits.
    holders = Counter(gpu for job in view.running.values() for gpu in job.gpu_ids)
    assert len(holders) == busy and max(holders.values()) == 1
    assert not view.running.keys() & view.pending.keys()
    assert state.now > max(job.job.submit_time for job in [*view.running.values(), *view.pending.values()])


def test_without_a_count_the_trace_s_first_jobs_fill_the_cluster_in_order() -> None:
    state = busy_cluster("fifo", n_nodes=250, n_pending=400, busy_frac=0.9)
    view = state.view
    last_running = max(job.job.submit_time for job in view.running.values())
    assert all(job.job.submit_time >= last_running for job in view.pending.values())
    assert len(view.pending) == 400
    assert view.topology.n_gpus - view.n_free >= int(0.9 * view.topology.n_gpus)
