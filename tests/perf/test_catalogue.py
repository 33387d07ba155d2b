"""Model catalogue: names, bytes, aliases and the seeded assignment of models."""

from __future__ import annotations

import numpy as np
import pytest

from rackwise.cluster.topology import uniform_cluster
from rackwise.errors import InputError
from rackwise.perf.catalogue import CATALOGUE, assign_models, resolve_model
from rackwise.perf.model import NetworkPerf
from rackwise.perf.throughput import default_table
from rackwise.workload.job import Job


def test_every_measured_job_type_is_in_the_catalogue() -> None:
    table = default_table()
    assert set(table.job_types) <= set(CATALOGUE)
    assert len(table.job_types) == 26
    measured = {name for name, spec in CATALOGUE.items() if spec.measured}
    assert measured == set(table.job_types)


def test_bytes_follow_parameters_and_precision() -> None:
    resnet = CATALOGUE["ResNet-50 (batch size 64)"]
    assert resnet.gradient_bytes == pytest.approx(25.6e6 * 4)
    assert resnet.checkpoint_bytes == pytest.approx(25.6e6 * 8)
    gpt3 = CATALOGUE["GPT-3 6.7B"]
    assert gpt3.gradient_bytes == pytest.approx(6.7e9 * 2)  # fp16 gradients
    assert gpt3.checkpoint_bytes == pytest.approx(6.7e9 * 16)
    assert CATALOGUE["BERT-Large"].params == 340e6


@pytest.mark.parametrize(("alias", "name"), [
    ("resnet50", "ResNet-50 (batch size 64)"), ("ResNet-50", "ResNet-50 (batch size 64)"),
    ("ResNet-50 (batch size 128)", "ResNet-50 (batch size 128)"), ("bert-large", "BERT-Large"),
    ("gpt3", "GPT-3 6.7B"), ("a3c", "A3C"), ("lm", "LM (batch size 20)")])
def test_aliases(alias: str, name: str) -> None:
    assert resolve_model(alias).name == name


def test_batch_size_option() -> None:
    assert resolve_model("resnet18", 256).name == "ResNet-18 (batch size 256)"
    with pytest.raises(InputError, match="batch sizes"):
        resolve_model("resnet18", 48)


def test_unknown_model_is_one_line_with_a_suggestion() -> None:
    with pytest.raises(InputError) as info:
        resolve_model("resnet5O")
    assert "\n" not in str(info.value)
    assert "unknown model 'resnet5O'" in str(info.value)


def test_assignment_is_conditioned_on_gpu_count() -> None:
    rng = np.random.default_rng(7)
    n = 4000
    draws = rng.random(n).tolist()
    single = assign_models([1] * n, draws, ((2, 0.2), (16, 0.75)))
    assert all(CATALOGUE[name].measured for name in single)
    assert len(set(single)) == 26  # every measured type shows up
    big = assign_models([32] * n, draws, ((2, 0.2), (16, 0.75)))
    large_share = sum(not CATALOGUE[name].measured for name in big) / n
    assert 0.72 < large_share < 0.78
    small = assign_models([2] * n, draws, ((2, 0.2), (16, 0.75)))
    # only BERT-Large allows 2 GPUs among the large models; measured picks must be distributed
    assert {name for name in small if not CATALOGUE[name].measured} == {"BERT-Large"}
    assert all(CATALOGUE[name].distributed for name in small)


def _trace() -> list[Job]:
    return [Job(str(i), float(i), n, 100.0 + i) for i, n in enumerate([1, 1, 2, 4, 8, 16, 1, 32] * 5)]


def test_assignment_is_deterministic_for_a_seed() -> None:
    topology = uniform_cluster(8, 8, 4)
    first = NetworkPerf().prepare(_trace(), topology, np.random.default_rng(3))
    again = NetworkPerf().prepare(_trace(), topology, np.random.default_rng(3))
    other = NetworkPerf().prepare(_trace(), topology, np.random.default_rng(4))
    assert first == again
    assert [j.model for j in first] != [j.model for j in other]
    assert all(j.model is not None for j in first)


def test_prepared_iterations_reproduce_the_trace_duration_consolidated() -> None:
    topology = uniform_cluster(8, 8, 4)
    jobs = [Job("a", 0.0, 4, 1000.0, model="ResNet-50 (batch size 64)")]
    (job,) = NetworkPerf().prepare(jobs, topology, np.random.default_rng(0))
    # 4 GPUs fit one V100 node, where the model runs at the table's 9.452 steps/s
    rate = default_table().measured("ResNet-50 (batch size 64)", 4, "v100")
    assert rate is not None
    assert job.total_iters == pytest.approx(1000.0 * rate, rel=1e-12)
    assert 0.0 < job.comm_sensitivity < 1.0
    assert job.gradient_bytes == pytest.approx(102.4e6)


def test_explicit_iterations_and_unknown_models() -> None:
    topology = uniform_cluster(2, 8, 2)
    kept = Job("a", 0.0, 1, 100.0, total_iters=5.0, model="A3C")
    (job,) = NetworkPerf().prepare([kept], topology, np.random.default_rng(0))
    assert job.total_iters == 5.0
    with pytest.raises(InputError, match="job b"):
        NetworkPerf().prepare([Job("b", 0.0, 1, 1.0, model="AlexNet")], topology,
                              np.random.default_rng(0))
