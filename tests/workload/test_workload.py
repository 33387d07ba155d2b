from __future__ import annotations

from collections.abc import Sequence

import pytest

from rackwise.cluster.topology import uniform_cluster
from rackwise.errors import InputError, UnknownNameError
from rackwise.workload import Job, Workload


def _workload() -> Workload:
    jobs = (Job("a", 0.0, 1, 10.0), Job("b", 5.0, 16, 20.0), Job("c", 7.0, 4, 30.0),
            Job("d", 9.0, 32, 40.0))
    return Workload(jobs=jobs, name="w", source="trace.csv", lines=(2, 3, 5, 6),
                    n_gpus_field="num_gpus")


def test_is_a_sequence_of_jobs() -> None:
    workload = _workload()
    assert isinstance(workload, Sequence)
    assert len(workload) == 4
    assert workload[1].job_id == "b"
    assert workload[-1].job_id == "d"
    assert [job.job_id for job in workload] == ["a", "b", "c", "d"]
    assert workload.index(workload[2]) == 2


def test_slice_keeps_lines_and_provenance() -> None:
    part = _workload()[1:3]
    assert isinstance(part, Workload)
    assert [job.job_id for job in part] == ["b", "c"]
    assert part.lines == (3, 5)
    assert (part.source, part.n_gpus_field) == ("trace.csv", "num_gpus")


def test_lines_default_to_unknown() -> None:
    workload = Workload(jobs=(Job("a", 0.0, 1, 1.0), Job("b", 0.0, 1, 1.0)))
    assert workload.lines == (0, 0)


def test_lines_must_match_jobs() -> None:
    with pytest.raises(ValueError, match="2 line numbers for 1 jobs"):
        Workload(jobs=(Job("a", 0.0, 1, 1.0),), lines=(2, 3))


def test_check_fits_names_first_oversized_job() -> None:
    cluster = uniform_cluster(2, gpus_per_node=8)  # 16 GPUs: job b fits exactly, d does not
    with pytest.raises(InputError) as caught:
        _workload().check_fits(cluster)
    error = caught.value
    assert (error.source, error.line, error.field) == ("trace.csv", 6, "num_gpus")
    assert "'d'" in str(error) and "32 GPUs" in str(error) and "16" in str(error)


def test_check_fits_passes_when_all_fit() -> None:
    _workload().check_fits(uniform_cluster(4, gpus_per_node=8))


def test_check_fits_without_line_omits_it() -> None:
    workload = Workload(jobs=(Job("big", 0.0, 9, 1.0),), name="synthetic")
    with pytest.raises(InputError) as caught:
        workload.check_fits(uniform_cluster(1, gpus_per_node=8))
    assert caught.value.line is None
    assert str(caught.value).startswith("synthetic, field 'n_gpus':")


def test_drop_oversized() -> None:
    kept = _workload().drop_oversized(16)
    assert [job.job_id for job in kept] == ["a", "b", "c"]
    assert kept.lines == (2, 3, 5)
    assert _workload().drop_oversized(0).jobs == ()


def test_repr_is_short() -> None:
    text = repr(_workload())
    assert "4 jobs" in text and "Job(" not in text


def _grouped() -> Workload:
    jobs = (Job("a", 30.0, 1, 1.0, group="x"), Job("b", 10.0, 1, 1.0, group="y"),
            Job("c", 20.0, 1, 1.0, group="x"), Job("d", 40.0, 1, 1.0, group="x"))
    return Workload(jobs=jobs, source="t.csv", lines=(2, 3, 4, 5))


def test_select_filters_in_workload_order() -> None:
    workload = _grouped()
    assert [j.job_id for j in workload.select(groups="x")] == ["a", "c", "d"]
    assert [j.job_id for j in workload.select(start_s=20.0, end_s=40.0)] == ["a", "c"]
    picked = workload.select(groups=["x"], first_n=2)  # the two earliest x jobs: c (20), a (30)
    assert [j.job_id for j in picked] == ["a", "c"]
    assert picked.lines == (2, 4)
    assert workload.select() is workload
    assert len(workload.select(start_s=100.0)) == 0


def test_select_rejects_bad_filters() -> None:
    with pytest.raises(UnknownNameError, match="Did you mean 'x'"):
        _grouped().select(groups=["xx"])
    with pytest.raises(InputError) as caught:
        _grouped().select(first_n=0)
    assert caught.value.field == "first_n"
    with pytest.raises(InputError):
        _grouped().select(start_s=5.0, end_s=5.0)


def test_job_with_changes_replaces_only_the_named_fields() -> None:
    import dataclasses

    import pytest

    from rackwise.workload.job import Job

    job = Job("j", 5.0, 2, 100.0, group="vc1", tags=(("k", "v"),))
    changed = job.with_changes(duration_s=50.0, total_iters=7.0, model="resnet50")
    assert changed == dataclasses.replace(job, duration_s=50.0, total_iters=7.0, model="resnet50")
    assert type(changed) is Job and hash(changed) == hash(dataclasses.replace(changed))
    with pytest.raises(dataclasses.FrozenInstanceError):
        changed.n_gpus = 4  # type: ignore[misc]
    assert job.duration_s == 100.0  # the original is untouched
    with pytest.raises(TypeError, match="no field 'colour'"):
        job.with_changes(colour="red")
