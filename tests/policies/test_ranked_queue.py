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


@given(st.lists(st.tuples(st.integers(0, 11), st.integers(1, 4), st.integers(0, 5)), max_size=30),
       st.lists(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 5)), max_size=12), max_size=4),
       st.integers(0, 5))
def test_rekey_moves_every_job_named_and_the_cursor_walks_the_new_order(
        adds: list[tuple[int, int, int]], rekeys: list[list[tuple[int, int]]], limit: int) -> None:
    queue = RankedQueue()
    model: dict[str, tuple[int, tuple[object, ...]]] = {}
    for number, n_gpus, rank in adds:
        job_id = f"j{number}"
        queue.add(job_id, n_gpus, (rank, job_id))
        model[job_id] = (n_gpus, (rank, job_id))
    for batch in rekeys:
        new = {f"j{number}": (rank, f"j{number}") for number, rank in batch if f"j{number}" in model}
        queue.rekey(new.values())
        model.update({job_id: (model[job_id][0], key) for job_id, key in new.items()})
        assert queue.best_key() == min((key for _, key in model.values()), default=None)
        assert all(queue.key_of(job_id) == key for job_id, (_, key) in model.items())
    cursor = queue.cursor()  # every job of at most `limit` GPUs, best first
    walked = []
    while (found := cursor.head(limit)) is not None:
        walked.append(found)
        cursor.advance()
    assert walked == sorted([(n, key) for n, key in model.values() if n <= limit], key=lambda item: item[1])


@given(st.dictionaries(st.integers(0, 40), st.tuples(st.integers(1, 4), st.integers(0, 5)), max_size=30),
       st.integers(0, 5))
def test_add_many_queues_as_adding_one_at_a_time_does(jobs: dict[int, tuple[int, int]], limit: int) -> None:
    items = [(f"j{number}", n_gpus, (rank, f"j{number}")) for number, (n_gpus, rank) in jobs.items()]
    one_by_one, at_once = RankedQueue(), RankedQueue()
    for job_id, n_gpus, key in items:
        one_by_one.add(job_id, n_gpus, key)
    at_once.add_many(items)

    def walked(queue: RankedQueue) -> list[tuple[int, tuple[object, ...]]]:
        cursor, seen = queue.cursor(), []
        while (found := cursor.head(limit)) is not None:
            seen.append(found)
            cursor.advance()
        return seen

    assert len(at_once) == len(one_by_one)
    assert at_once.best_key() == one_by_one.best_key()
    assert at_once.fewest_gpus() == one_by_one.fewest_gpus()
    assert walked(at_once) == walked(one_by_one)
