"""RankedQueue: the pending-job index the ordering policies share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rackwise.policies.parts.ordering import RankedQueue

operations = st.lists(st.tuples(st.booleans(), st.integers(0, 11), st.integers(1, 4), st.integers(0, 5)),
                      max_size=60)


@given(operations)
def test_best_key_and_fewest_gpus_follow_every_add_and_discard(ops: list[tuple[bool, int, int, int]]) -> None:
    queue = RankedQueue()
    model: dict[str, tuple[int, tuple[object, ...]]] = {}
    for add, number, n_gpus, rank in ops:
        job_id = f"j{number}"
        if add:
            key = (rank, job_id)
            queue.add(job_id, n_gpus, key)
            model[job_id] = (n_gpus, key)
        else:
            queue.discard(job_id)
            model.pop(job_id, None)
        assert len(queue) == len(model)
        assert queue.best_key() == min((key for _, key in model.values()), default=None)
        assert queue.fewest_gpus() == min((n for n, _ in model.values()), default=None)
        assert all(queue.key_of(job_id) == key for job_id, (_, key) in model.items())
