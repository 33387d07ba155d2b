"""The measured table: reading it, reproducing it, and adding GPU types."""

from __future__ import annotations

import numpy as np
import pytest

from rackwise.cluster.topology import uniform_cluster
from rackwise.errors import InputError
from rackwise.perf.config import PerfConfig, datasheet_speedup
from rackwise.perf.model import NetworkPerf
from rackwise.perf.throughput import ThroughputTable, default_table, parse_key
from rackwise.workload.job import Job

TABLE = default_table()
ENTRIES = sorted((gpu, job_type, scale) for gpu, rows in TABLE.isolated.items()
                 for (job_type, scale), value in rows.items() if value > 0)


def test_parse_key() -> None:
    assert parse_key("('ResNet-50 (batch size 64)', 4)") == ("ResNet-50 (batch size 64)", 4)
    with pytest.raises(InputError):
        parse_key("ResNet-50")


def test_known_entries() -> None:
    assert TABLE.gpu_types == ("k80", "p100", "v100")
    assert TABLE.measured("LM (batch size 5)", 8, "v100") == pytest.approx(698.773, abs=1e-3)
    assert TABLE.measured("LM (batch size 5)", 8, "v100", consolidated=False) == pytest.approx(
        73.120, abs=1e-3)
    assert TABLE.scales("ResNet-50 (batch size 64)") == (1, 2, 4, 8)
    # pairs with a zero rate (did not fit) are dropped
    assert all(own > 0 and other > 0 for rows in TABLE.pairs.values() for own, other in rows.values())


@pytest.mark.parametrize(("gpu_type", "job_type", "scale"), ENTRIES)
def test_model_reproduces_every_consolidated_entry(gpu_type: str, job_type: str, scale: int) -> None:
    topology = uniform_cluster(1, 8, 1, gpu_type)
    perf = NetworkPerf(assign_models=False)
    (job,) = perf.prepare([Job("j", 0.0, scale, 1.0, model=job_type)], topology,
                          np.random.default_rng(0))
    expected = TABLE.measured(job_type, scale, gpu_type)
    assert perf.rate(job, tuple(range(scale)), {}) == pytest.approx(expected, rel=1e-12)


def test_gpu_counts_between_measured_scales_scale_linearly() -> None:
    eight = TABLE.measured("Transformer (batch size 64)", 8, "v100")
    assert eight is not None
    assert TABLE.consolidated("Transformer (batch size 64)", 16, "v100") == pytest.approx(2 * eight)
    four = TABLE.measured("Transformer (batch size 64)", 4, "v100")
    assert four is not None
    assert TABLE.consolidated("Transformer (batch size 64)", 6, "v100") == pytest.approx(1.5 * four)


def test_zero_entries_fall_back_to_a_smaller_scale() -> None:
    # ResNet-50 at batch 128 did not fit two K80s; one K80 ran it
    assert TABLE.measured("ResNet-50 (batch size 128)", 2, "k80") == 0.0
    one = TABLE.measured("ResNet-50 (batch size 128)", 1, "k80")
    assert one is not None and one > 0
    assert TABLE.consolidated("ResNet-50 (batch size 128)", 2, "k80") == pytest.approx(2 * one)


def test_new_gpu_type_by_speedup() -> None:
    assert datasheet_speedup("a100") == pytest.approx(((312 / 125) * (1555 / 900)) ** 0.5)
    v100 = TABLE.measured("ResNet-18 (batch size 64)", 1, "v100")
    assert v100 is not None
    a100 = TABLE.consolidated("ResNet-18 (batch size 64)", 1, "a100", {"a100": 2.0})
    assert a100 == pytest.approx(2.0 * v100)
    with pytest.raises(InputError, match="gpu_speedup_vs_v100"):
        TABLE.consolidated("ResNet-18 (batch size 64)", 1, "tpu")


def test_new_gpu_type_in_the_model() -> None:
    topology = uniform_cluster(1, 8, 1, "h100")
    perf = NetworkPerf(PerfConfig(gpu_speedup_vs_v100={"h100": 3.0}), assign_models=False)
    (job,) = perf.prepare([Job("j", 0.0, 1, 1.0, model="CycleGAN")], topology,
                          np.random.default_rng(0))
    v100 = TABLE.measured("CycleGAN", 1, "v100")
    assert v100 is not None
    assert perf.rate(job, (0,), {}) == pytest.approx(3.0 * v100)
    with pytest.raises(InputError, match="gpu_type"):
        NetworkPerf().prepare([], uniform_cluster(1, 8, 1, "tpu"), np.random.default_rng(0))


def test_new_gpu_type_by_table() -> None:
    extra = ThroughputTable.from_mapping({"a100": {"('A3C', 1)": {"null": 42.0}}})
    merged = TABLE.merged(extra)
    topology = uniform_cluster(1, 8, 1, "a100")
    perf = NetworkPerf(table=merged, assign_models=False)
    (job,) = perf.prepare([Job("j", 0.0, 1, 1.0, model="A3C")], topology, np.random.default_rng(0))
    assert perf.rate(job, (0,), {}) == pytest.approx(42.0)


def test_measured_speedup_of_table_types() -> None:
    # K80 is slower than V100 on average over the single-GPU entries
    assert 0.0 < TABLE.speedup_vs_v100("k80") < 1.0
    assert TABLE.speedup_vs_v100("v100") == 1.0


def test_bad_table_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "t.json"
    bad.write_text('{"v100": {"(\'A3C\', 1)": {}}}')
    with pytest.raises(InputError, match="null"):
        ThroughputTable.from_file(bad)
    with pytest.raises(InputError, match="no such"):
        ThroughputTable.from_file(tmp_path / "missing.json")
