"""Records built by `build_record` are the `JobRecord`s the class itself makes."""

import dataclasses
import pickle

import pytest

from rackwise.frozen import unfrozen_builder
from rackwise.metrics.records import JobRecord, build_record
from rackwise.workload.job import Job

VALUES = {"job_id": "a", "group": "vc1", "model": None, "n_gpus": 4, "submit_time": 1.5,
          "first_start": 2.0, "finish_time": 7200.0, "jct_s": 7198.5, "queueing_delay_s": 0.5,
          "run_time_s": 7198.0, "overhead_s": 3.0, "gpu_s": 4 * 7198.0, "n_preemptions": 2,
          "n_nodes": 1, "n_racks": 1, "duration_s": 7000.0, "total_iters": 100.0, "comm_s": 1.25}


def test_a_built_record_is_the_record_the_class_makes() -> None:
    built = build_record(**VALUES)
    made = JobRecord(**VALUES)
    assert type(built) is JobRecord
    assert built == made and hash(built) == hash(made) and repr(built) == repr(made)
    assert dataclasses.astuple(built) == dataclasses.astuple(made)
    assert pickle.loads(pickle.dumps(built)) == made
    assert build_record(*VALUES.values()) == made  # positional, defaults filled alike


def test_a_built_record_stays_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        build_record(**VALUES).jct_s = 0.0  # type: ignore[misc]


def test_a_builder_runs_the_classes_post_init() -> None:
    build_job = unfrozen_builder(Job)
    job = build_job("j", 0.0, 2, 60.0)
    assert type(job) is Job and job == Job("j", 0.0, 2, 60.0) and job.total_iters == 60.0


def test_only_frozen_slotted_dataclasses_have_builders() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class KeywordOnly:
        x: int

    with pytest.raises(TypeError, match="not a frozen dataclass with slots"):
        unfrozen_builder(NoSlots)
    with pytest.raises(TypeError, match="positional init fields"):
        unfrozen_builder(KeywordOnly)
