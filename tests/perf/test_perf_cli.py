"""The ``perf`` sub-app: explain a placement, list models, fail clearly."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rackwise.cli.perf import app, build_placement, explain_placement
from rackwise.cluster.topology import Links
from rackwise.errors import InputError

runner = CliRunner()


def test_explain_two_nodes() -> None:
    result = runner.invoke(app, ["explain", "--model", "resnet50", "--gpus", "8", "--spread", "2-nodes"])
    assert result.exit_code == 0, result.output
    assert "ResNet-50 (batch size 64)" in result.output
    assert "intra-rack at 100 Gb/s" in result.output
    assert "slowdown vs consolidated" in result.output


def test_explain_one_node_reproduces_the_table() -> None:
    result = runner.invoke(app, ["explain", "--model", "lm", "--batch-size", "5", "--gpus", "8",
                                 "--spread", "1-node", "--gpu-type", "v100"])
    assert result.exit_code == 0, result.output
    assert "698.773 steps/s" in result.output  # the model's and the table's figure
    assert "1.000x" in result.output


def test_unknown_model_is_one_line_and_exit_2() -> None:
    result = runner.invoke(app, ["explain", "--model", "alexnet"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "unknown model 'alexnet'" in lines[0]


def test_bad_spread_is_exit_2() -> None:
    result = runner.invoke(app, ["explain", "--model", "resnet50", "--spread", "sideways"])
    assert result.exit_code == 2
    assert "spread 'sideways'" in result.output


def test_models_lists_the_catalogue() -> None:
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0
    assert "GPT-3 6.7B" in result.output and "CycleGAN" in result.output


def test_placements() -> None:
    _, gpus = build_placement(8, "2-nodes", 8, 8, "v100", Links())
    assert gpus == (0, 1, 2, 3, 8, 9, 10, 11)
    topology, gpus = build_placement(5, "2-racks", 8, 2, "v100", Links())
    assert topology.n_racks == 2 and gpus == (0, 1, 2, 16, 17)
    with pytest.raises(InputError):
        build_placement(16, "1-node", 8, 8, "v100", Links())
    with pytest.raises(InputError):
        build_placement(2, "3-nodes", 8, 8, "v100", Links())


def test_spread_across_racks_is_slower() -> None:
    _, _, node = explain_placement("transformer", 8, "1-node")
    _, _, racks = explain_placement("transformer", 8, "2-racks", links=Links(cross_rack_gbps=25.0))
    assert racks.bottleneck == "cross-rack" and racks.bandwidth_gbps == 25.0
    assert racks.iteration_s > node.iteration_s


@pytest.mark.parametrize("tensor", [1, 8])
def test_sensitivity_is_the_two_node_slowdown_of_the_partitioned_job(tensor: int) -> None:
    # two nodes of a rack holding 4 + 4 workers in order is the partitioner's choice too
    job, _, breakdown = explain_placement("gpt2", 8, "2-nodes", tensor=tensor)
    assert job.comm_sensitivity == pytest.approx(1.0 - 1.0 / breakdown.slowdown, rel=1e-9)


def test_explain_a_tensor_parallel_job() -> None:
    result = runner.invoke(app, ["explain", "--model", "gpt2", "--gpus", "8", "--tensor", "4",
                                 "--pipeline", "2", "--spread", "2-nodes"])
    assert result.exit_code == 0, result.output
    assert "data 1 x tensor 4 x pipeline 2" in result.output
    assert "communication sensitivity" in result.output


@pytest.mark.parametrize(("flags", "message"), [
    (["--tensor", "3"], "8 GPUs do not split into tensor 3 x pipeline 1"),
    (["--pipeline", "0"], "field 'pipeline': must be >= 1"),
])
def test_a_bad_split_is_one_line_and_exit_2(flags: list[str], message: str) -> None:
    result = runner.invoke(app, ["explain", "--model", "gpt2", "--gpus", "8", *flags])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0]
