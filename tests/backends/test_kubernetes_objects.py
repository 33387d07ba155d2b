"""Reading nodes and pods (kubernetes_objects), and the missing-extra error."""

from __future__ import annotations

import sys

import pytest

from rackwise.backends.kubernetes_objects import discover, gpu_type, group, node_unusable, pack, parse_time, pod_gpus
from rackwise.errors import InputError, MissingExtraError


def node(name: str, gpus: int, **labels: str) -> dict:  # type: ignore[type-arg]
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, job: str | None = None, size: int | None = None, gpus: int = 1,
        namespace: str = "ml") -> dict:  # type: ignore[type-arg]
    meta: dict = {"name": name, "namespace": namespace, "labels": {}, "annotations": {}}  # type: ignore[type-arg]
    if job:
        meta["labels"]["rackwise.io/job"] = job
    if size:
        meta["annotations"]["rackwise.io/job-size"] = str(size)
    return {"metadata": meta, "spec": {"containers": [
        {"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}, "status": {"phase": "Pending"}}


def test_racks_come_from_a_label_and_nodes_without_gpus_are_left_out() -> None:
    zone = "topology.kubernetes.io/zone"
    product = "nvidia.com/gpu.product"
    nodes = [node("gpu10", 8, **{zone: "b", product: "NVIDIA-A100-SXM4-80GB"}),
             node("gpu2", 8, **{zone: "b"}),
             node("cpu1", 0, **{zone: "a"}),
             node("gpu1", 4, **{zone: "a", product: "Tesla-V100-SXM2-16GB"}),
             node("loose", 2)]
    topology, names = discover(nodes, rack_label=zone, gpu_type_label=product,
                               default_gpu_type="k80")
    assert names == ("gpu1", "gpu2", "gpu10", "loose")  # racks a, b, then unlabelled; natural order
    assert [n.rack_id for n in topology.nodes] == [0, 1, 1, 2]
    assert [n.gpu_type for n in topology.nodes] == ["v100", "k80", "a100", "k80"]
    assert [n.n_gpus for n in topology.nodes] == [4, 8, 8, 2]
    with pytest.raises(InputError, match=r"no node has allocatable nvidia\.com/gpu"):
        discover([node("cpu", 0)], rack_label=zone, gpu_type_label=product)


def test_gpu_products_map_to_known_types_or_the_default() -> None:
    assert gpu_type("NVIDIA-H100-80GB-HBM3", "v100") == "h100"
    assert gpu_type("Tesla-P100-PCIE-16GB", "v100") == "p100"
    assert gpu_type("NVIDIA-L4", "v100") == "v100"
    assert gpu_type(None, "a100") == "a100"


def test_pods_count_gpus_of_containers_or_their_largest_init_container() -> None:
    spec = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}},
                           {"resources": {"requests": {"nvidia.com/gpu": "1"}}}, {}],
            "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    assert pod_gpus({"spec": spec}) == 4
    spec["initContainers"] = []
    assert pod_gpus({"spec": spec}) == 3
    assert pod_gpus({"spec": {"containers": [{"resources": {"limits": {"cpu": "2"}}}]}}) == 0


def test_pods_group_into_gangs_by_label_and_namespace() -> None:
    gangs = group([pod("w-1", "train", 2), pod("w-0", "train", 2), pod("solo"),
                   pod("w-0", "train", 2, namespace="other")])
    assert sorted(gangs) == ["ml/solo", "ml/train", "other/train"]
    train = gangs["ml/train"]
    assert train.size == 2 and [p["metadata"]["name"] for p in train.pods] == ["w-0", "w-1"]
    assert gangs["ml/solo"].size == 1 and gangs["other/train"].size == 2


def test_packing_fills_nodes_exactly_or_refuses() -> None:
    assert pack([2, 2, 2, 2], {"a": 4, "b": 4}) == ["a", "a", "b", "b"]
    assert pack([3, 3], {"a": 4, "b": 2}) is None
    assert pack([1, 4, 0], {"a": 4, "b": 1}) == ["b", "a", "a"]
    assert pack([1], {}) is None


def test_cordoned_and_unready_nodes_are_unusable() -> None:
    ready = node("n", 4)
    assert node_unusable(ready) is None
    assert node_unusable({**ready, "spec": {"unschedulable": True}}) == "cordoned"
    assert node_unusable({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}) \
        == "not Ready"
    assert node_unusable(None) == "gone"


def test_timestamps_parse_as_unix_seconds() -> None:
    assert parse_time("1970-01-01T00:01:40Z") == 100.0
    assert parse_time("garbage") is None and parse_time(None) is None


def test_without_the_client_the_backend_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from rackwise.backends.kubernetes_api import KubeApi

    monkeypatch.setitem(sys.modules, "kubernetes", None)  # makes `import kubernetes` fail
    with pytest.raises(MissingExtraError, match=r"pip install 'rackwise\[k8s\]'"):
        KubeApi(host="http://127.0.0.1:1")
