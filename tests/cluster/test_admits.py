"""gpuopt.cluster.admits: which nodes admit each shape of a target workload."""

from __future__ import annotations

from types import SimpleNamespace

from gpuopt.cluster.admits import node_model, shape_admits
from gpuopt.cluster.model import Cluster
from gpuopt.cluster.workload import Shape, Workload


def test_node_model_prefers_the_field_to_the_label() -> None:
    assert node_model(SimpleNamespace(gpu_model="H100", labels={"gpu_model": "A100"})) == "H100"
    assert node_model(SimpleNamespace(gpu_model=None, labels={"gpu_model": "A100"})) == "A100"
    assert node_model(SimpleNamespace(gpu_model=None, labels={})) is None


def test_shapes_admit_open_nodes_of_their_models() -> None:
    cluster = Cluster.model_validate(
        {
            "nodes": [
                {"id": "h", "gpus": 8, "cpus": 64, "gpu_model": "H100"},
                {"id": "a", "gpus": 8, "cpus": 64, "labels": {"gpu_model": "A100"}},
                {"id": "x", "gpus": 8, "cpus": 64, "gpu_model": "H100", "unschedulable": True},
                {
                    "id": "t",
                    "gpus": 8,
                    "cpus": 64,
                    "taints": [{"key": "k", "effect": "NoSchedule"}],
                },
            ],
            "tasks": [],
        }
    )
    workload = Workload(
        (
            Shape(1000, 1000, 1),
            Shape(8000, 1000, 8, ("H100",)),
            Shape(500, 250, 1, ("A100", "H100")),
        ),
        (0.5, 0.25, 0.25),
    )
    # h and a are open; x is cordoned and t has a taint no shape tolerates (K1, K2)
    assert shape_admits(cluster, workload).tolist() == [
        [True, True, False, False],
        [True, False, False, False],
        [True, True, False, False],
    ]
