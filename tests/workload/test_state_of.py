"""`state_of`: the look-up the compiled hot paths use instead of `Mapping.get`."""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import given
from hypothesis import strategies as st

from rackwise.workload.job import Job
from rackwise.workload.state import JobState, state_of


@given(st.sets(st.sampled_from("abcdef")), st.sampled_from("abcdefg"))
def test_it_answers_as_get_on_a_dict_and_on_a_read_only_view_of_one(held: set[str], job_id: str) -> None:
    states = {name: JobState(Job(name, 0.0, 1, 1.0)) for name in sorted(held)}
    for mapping in (states, MappingProxyType(states)):
        assert state_of(mapping, job_id) is mapping.get(job_id)
