from __future__ import annotations

import numpy as np
import pytest

from rackwise.errors import InputError
from rackwise.workload import Job
from rackwise.workload.synthetic import WorkloadModel, arrival_rate_per_s, generate


def _jobs() -> list[Job]:
    # Half the jobs 1 GPU x 100 s, a quarter 4 GPUs x 50 s, a quarter 8 GPUs x 400 s.
    shapes = [(1, 100.0, "a")] * 4 + [(4, 50.0, "a"), (4, 50.0, "b")] + [(8, 400.0, "b")] * 2
    return [Job(str(i), 0.0, n, d, group=g) for i, (n, d, g) in enumerate(shapes)]


def test_fit() -> None:
    model = WorkloadModel.fit(_jobs())
    assert model.gpu_count_shares() == {1: 0.5, 4: 0.25, 8: 0.25}
    assert model.groups == ("a", "b")
    assert model.group_shares == (5 / 8, 3 / 8)
    # (4*100 + 2*200 + 2*3200) / 8 = 900 GPU-seconds per job
    assert model.mean_gpu_seconds == pytest.approx(900.0)
    assert arrival_rate_per_s(model, load=0.5, cluster_gpus=18) == pytest.approx(0.01)


def test_fit_rejects_no_jobs() -> None:
    with pytest.raises(InputError):
        WorkloadModel.fit([])


def test_same_seed_same_jobs() -> None:
    model = WorkloadModel.fit(_jobs())
    first = generate(model, 200, load=0.8, cluster_gpus=64, rng=np.random.default_rng(7))
    again = generate(model, 200, load=0.8, cluster_gpus=64, rng=np.random.default_rng(7))
    other = generate(model, 200, load=0.8, cluster_gpus=64, rng=np.random.default_rng(8))
    assert first.jobs == again.jobs
    assert first.jobs != other.jobs


def test_shapes_are_observed_pairs() -> None:
    model = WorkloadModel.fit(_jobs())
    workload = generate(model, 500, load=1.0, cluster_gpus=32, rng=np.random.default_rng(1))
    assert {(job.n_gpus, job.duration_s) for job in workload} == {
        (1, 100.0), (4, 50.0), (8, 400.0)}
    assert workload[0].submit_time == 0.0
    assert [job.job_id for job in workload[:3]] == ["0", "1", "2"]
    submits = [job.submit_time for job in workload]
    assert submits == sorted(submits)


def test_mean_inter_arrival_matches_load() -> None:
    model = WorkloadModel.fit(_jobs())
    n_jobs = 20_001
    workload = generate(model, n_jobs, load=0.5, cluster_gpus=18, rng=np.random.default_rng(3))
    # Target rate 0.01 jobs/s, so gaps average 100 s; the standard error over
    # 20,000 exponential gaps is 0.7 %, so 3 % only fails when the rate is wrong.
    mean_gap_s = workload[-1].submit_time / (n_jobs - 1)
    assert mean_gap_s == pytest.approx(100.0, rel=0.03)


def test_offered_load_close_to_target() -> None:
    jobs = [Job(str(i), 0.0, n, 60.0) for i, n in enumerate([1, 2, 2, 4])]
    model = WorkloadModel.fit(jobs)
    workload = generate(model, 20_000, load=0.7, cluster_gpus=16, rng=np.random.default_rng(5))
    demand_gpu_s = sum(job.gpu_seconds for job in workload)
    offered = demand_gpu_s / workload[-1].submit_time / 16
    assert offered == pytest.approx(0.7, rel=0.04)


def test_sampled_shares_close_to_fitted() -> None:
    model = WorkloadModel.fit(_jobs())
    workload = generate(model, 20_000, load=1.0, cluster_gpus=64, rng=np.random.default_rng(11))
    sizes = np.array([job.n_gpus for job in workload])
    for size, share in model.gpu_count_shares().items():
        assert float(np.mean(sizes == size)) == pytest.approx(share, abs=0.015)
    groups = [job.group for job in workload]
    assert groups.count("a") / len(groups) == pytest.approx(5 / 8, abs=0.015)


def test_no_groups_gives_none() -> None:
    model = WorkloadModel.fit([Job("x", 0.0, 1, 10.0)])
    workload = generate(model, 3, load=1.0, cluster_gpus=1, rng=np.random.default_rng(0))
    assert [job.group for job in workload] == [None, None, None]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"n_jobs": 0}, "n_jobs"), ({"load": 0.0}, "load"), ({"load": float("nan")}, "load"),
    ({"cluster_gpus": 0}, "cluster_gpus"),
])
def test_bad_arguments(kwargs: dict[str, float], field: str) -> None:
    arguments: dict[str, object] = {"n_jobs": 5, "load": 1.0, "cluster_gpus": 8}
    arguments.update(kwargs)
    with pytest.raises(InputError) as caught:
        generate(WorkloadModel.fit(_jobs()), rng=np.random.default_rng(0),
                 **arguments)  # type: ignore[arg-type]
    assert caught.value.field == field
