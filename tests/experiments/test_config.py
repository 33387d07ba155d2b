"""Experiment files: validation errors name the file and field; grids expand in a fixed order."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.experiments.conftest import EXPERIMENTS

from rackwise.errors import InputError, UnknownNameError
from rackwise.experiments.config import load_experiment
from rackwise.experiments.grid import expand, plan

BASE = {
    "name": "t",
    "policies": ["fifo", {"label": "t-ff", "policy": "tiresias", "params": {"placement": "first-fit"}}],
    "workloads": [{"label": "p", "trace": "philly_2017", "first_n": 20},
                  {"label": "i", "trace": "itp_2021", "first_n": 20}],
    "clusters": [{"label": "a", "nodes": 2}, {"label": "b", "nodes": 4}],
    "loads": [1.0, 2.0],
    "seeds": [0, 1, 2],
}


def write(tmp_path: Path, data: dict, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_grid_has_every_combination_in_a_fixed_order(tmp_path: Path) -> None:
    cells = expand(load_experiment(write(tmp_path, BASE)))
    assert len(cells) == 2 * 2 * 2 * 2 * 3
    assert len({cell.key for cell in cells}) == len(cells)
    first = cells[0]
    assert (first.workload_label, first.cluster_label, first.load, first.policy_label,
            first.config.seed) == ("p", "a", 1.0, "fifo", 0)
    # the seed varies fastest, then the policy
    assert [c.config.seed for c in cells[:3]] == [0, 1, 2]
    assert cells[3].policy_label == "t-ff" and cells[3].config.policy_params == {"placement": "first-fit"}
    assert cells[6].load == 2.0 and cells[6].config.workload.load == 2.0
    assert [c.key for c in expand(load_experiment(write(tmp_path, BASE)))] == [c.key for c in cells]


def test_keys_ignore_labels_but_follow_cluster_files(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text("node_groups: [{count: 2, gpus_per_node: 8}]\n")
    data = {**BASE, "clusters": [{"label": "x", "spec": "c.yaml"}], "loads": [1.0], "seeds": [0]}
    keys = [c.key for c in expand(load_experiment(write(tmp_path, data)))]
    relabelled = {**data, "workloads": [{**w, "label": w["label"] + "-renamed"} for w in data["workloads"]]}
    assert [c.key for c in expand(load_experiment(write(tmp_path, relabelled)))] == keys
    spec.write_text("node_groups: [{count: 3, gpus_per_node: 8}]\n")
    from rackwise.experiments import grid

    grid.file_digest.cache_clear()
    changed = [c.key for c in expand(load_experiment(write(tmp_path, data)))]
    assert set(changed).isdisjoint(keys)


def test_unknown_key_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, {**BASE, "seedz": [0]})
    with pytest.raises(InputError) as info:
        load_experiment(path)
    assert str(path) in str(info.value) and "seedz" in str(info.value)
    assert "unknown key" in str(info.value)


def test_unknown_nested_key_names_its_path(tmp_path: Path) -> None:
    data = {**BASE, "workloads": [{"trace": "philly_2017", "frist_n": 3}]}
    with pytest.raises(InputError, match=r"workloads\.0\.frist_n"):
        load_experiment(write(tmp_path, data))


@pytest.mark.parametrize(("change", "error", "field"), [
    ({"workloads": [{"trace": "philly_2071"}]}, UnknownNameError, "workloads.0.trace"),
    ({"perf": "netwrok"}, UnknownNameError, "perf"),
    ({"loads": [1.0, 0.0]}, InputError, "loads"),
    ({"loads": []}, InputError, "loads"),
    ({"seeds": [0, 0]}, InputError, "seeds"),
    ({"baseline": "nobody"}, InputError, "baseline"),
    ({"policies": ["fifo", "fifo"]}, InputError, "policies"),
    ({"workloads": [{"trace": "philly_2017", "load": 2.0}]}, InputError, "load"),
    ({"clusters": [{"spec": "missing.yaml"}]}, InputError, "clusters.0.spec"),
])
def test_bad_grids_are_refused_with_the_field(tmp_path: Path, change: dict, error: type,
                                             field: str) -> None:
    path = write(tmp_path, {**BASE, **change})
    with pytest.raises(error) as info:
        load_experiment(path)
    assert str(path) in str(info.value) and field in str(info.value)


def test_unknown_policy_is_refused_unless_optional(tmp_path: Path) -> None:
    path = write(tmp_path, {**BASE, "policies": ["fifo", "no-such-policy"]})
    with pytest.raises(UnknownNameError, match=r"policies\.1\.policy"):
        plan(load_experiment(path), str(path))
    optional = write(tmp_path, {**BASE, "policies": ["fifo", {"policy": "no-such-policy",
                                                              "optional": True}]})
    cells = plan(load_experiment(optional), str(optional))
    reasons = {c.policy_label: c.skip_reason for c in cells}
    assert reasons["fifo"] is None
    assert "not installed" in reasons["no-such-policy"]


def test_bad_policy_parameter_names_the_policy_entry(tmp_path: Path) -> None:
    path = write(tmp_path, {**BASE, "policies": [{"policy": "fifo", "params": {"placment": "x"}}]})
    with pytest.raises(InputError, match=r"policies\.0\.params"):
        plan(load_experiment(path), str(path))


def test_workload_that_does_not_fit_fails_before_running(tmp_path: Path) -> None:
    data = {**BASE, "workloads": [{"trace": "philly_2017", "first_n": 300, "skip_oversized": False}],
            "clusters": [{"nodes": 1, "gpus_per_node": 1}]}
    path = write(tmp_path, data)
    with pytest.raises(InputError, match=r"workloads\.0"):
        plan(load_experiment(path), str(path))


@pytest.mark.parametrize("name", ["smoke", "all", "delay", "hetero", "marl", "asrpt", "asrpt-prediction-quality"])
def test_shipped_experiments_are_valid(name: str) -> None:
    experiment = load_experiment(EXPERIMENTS / f"{name}.yaml")
    assert experiment.name == name
    assert expand(experiment)
