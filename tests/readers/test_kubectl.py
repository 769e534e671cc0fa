"""The kubectl reader: Kubernetes quantities, the field mapping, and errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpuopt.defrag.problem import Cluster
from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl import read_kubectl

FIXTURE = Path(__file__).parent / "fixtures" / "kubectl_small.json"


def test_fixture_gives_the_expected_snapshot() -> None:
    problem = read_kubectl(FIXTURE)
    assert isinstance(problem, Cluster)
    assert problem.name == "kubectl_small"
    nodes = [node.model_dump() for node in problem.nodes]
    assert nodes == [
        {
            "id": "gpu-a",
            "gpus": 8,
            "cpus": 95.5,
            "memory": 524288.0,
            "asw": "asw-1",
            "labels": {
                "gpuopt.io/asw": "asw-1",
                "gpu_model": "A100",
                "kubernetes.io/hostname": "gpu-a",
            },
        },
        {  # GPUs from status.capacity, no switch label
            "id": "gpu-b",
            "gpus": 2,
            "cpus": 32.0,
            "memory": 131072.0,
            "asw": None,
            "labels": {"gpu_model": "T4"},
        },
    ]
    tasks = {task.id: task.model_dump() for task in problem.tasks}
    assert list(tasks) == ["ml/train-0", "serve/infer-1", "gpu-operator/dcgm-exporter-x"]
    assert tasks["ml/train-0"] == {
        "id": "ml/train-0",
        "node": "gpu-a",
        "gpus": 4,  # only as a limit
        "cpus": 8.25,  # 8 + 250m over two containers
        "memory": 66048.0,  # 64Gi + 512Mi in MiB
        "gpu_milli": None,
        "locked": True,
        "priority": "HP",  # the legacy label overrides spec.priority
        "node_selector": {"gpu_model": "A100"},
        "anti_affinity": "train",
        "namespace": "ml",
        "labels": {"gpuopt.io/priority": "HP", "gpuopt.io/anti-affinity": "train"},
        "pinned": "no-controller",  # a bare pod: nothing would recreate it
        "annotations": {"gpuopt.io/locked": "true"},  # gpuopt.io/ annotations kept as written
    }
    assert tasks["serve/infer-1"] == {
        "id": "serve/infer-1",
        "node": "gpu-b",
        "gpus": 1,
        "cpus": 6.0,  # the init container's 6 CPUs exceed the server's 2
        "memory": 4096.0,  # the server's 4Gi exceed the init container's 1Gi
        "gpu_milli": None,
        "locked": False,
        "priority": 0,  # no spec.priority, no class
        "node_selector": {},
        "node_affinity": [  # read whole, no longer folded into the node selector
            {
                "match_expressions": [
                    {"key": "gpu_model", "operator": "In", "values": ["T4", "A10"]}
                ],
                "match_fields": [],
            }
        ],
        "anti_affinity": "infer",
        "namespace": "serve",
        "labels": {"gpuopt.io/anti-affinity": "infer"},
    }
    assert tasks["gpu-operator/dcgm-exporter-x"] == {
        "id": "gpu-operator/dcgm-exporter-x",
        "node": "gpu-a",
        "gpus": 0,
        "cpus": 0.1,
        "memory": 128.0,
        "gpu_milli": None,
        "locked": False,
        "priority": 0,
        "node_selector": {},
        "anti_affinity": None,
        "namespace": "gpu-operator",
        "pinned": "daemonset",  # a DaemonSet pod cannot move
    }
    # the unbound Pending pod is demand, no longer dropped
    assert [(item.id, item.gpus) for item in problem.pending] == [("ml/waiting", 8)]


def test_mapping_and_path_give_the_same_snapshot() -> None:
    data = json.loads(FIXTURE.read_text())
    from_data = read_kubectl(data, name="kubectl_small")
    from_path = read_kubectl(str(FIXTURE))
    assert from_data == from_path
    assert read_kubectl(data).name == "kubectl"


def node(name: str, *, gpus: str | None = "8", cpu: str = "64", **status: Any) -> dict[str, Any]:
    allocatable = {"cpu": cpu, **status}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = gpus
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": allocatable}}


def pod(
    name: str, node_name: str | None, *, phase: str = "Running", **requests: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec,
        "status": {"phase": phase},
    }


def listing(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


def test_skipped_pods() -> None:
    problem = read_kubectl(
        listing(
            node("n1"),
            pod("running", "n1", cpu="1"),
            pod("pending-bound", "n1", phase="Pending", cpu="1"),
            pod("unknown", "n1", phase="Unknown", cpu="1"),
            pod("succeeded", "n1", phase="Succeeded", cpu="1"),
            pod("failed", "n1", phase="Failed", cpu="1"),
            pod("unbound", None, phase="Pending", cpu="1"),
        )
    )
    assert [task.id for task in problem.tasks] == ["ns/running", "ns/pending-bound", "ns/unknown"]


def test_node_without_gpus_or_memory() -> None:
    problem = read_kubectl(listing(node("cpu-only", gpus=None)))
    only = problem.nodes[0]
    assert (only.gpus, only.cpus, only.memory, only.asw, only.labels) == (0, 64.0, None, None, {})


def test_units_keep_a_full_node_valid() -> None:
    # 1G = 953.67431640625 MiB; two 500M pods fill it exactly in bytes.
    problem = read_kubectl(
        listing(
            node("n1", cpu="1", memory="1G"),
            pod("a", "n1", cpu="500m", memory="500M"),
            pod("b", "n1", cpu="0.5", memory="500M"),
        )
    )
    # pods round up, nodes down; a node its pods fill exactly in bytes is as full as they say
    assert [task.memory for task in problem.tasks] == [476.838, 476.838]
    assert problem.nodes[0].memory == 953.676
    assert [task.cpus for task in problem.tasks] == [0.5, 0.5]


def test_memory_rounding_never_lets_a_pod_fit_that_does_not_fit_in_bytes() -> None:
    """Review finding: 8 pods of 1G on a node of 7812499Ki (8,000,000,000 > 7,999,998,976)."""
    import gpuopt

    pods = [pod(f"p{k}", "n1", cpu="1", memory="1G") for k in range(7)]
    problem = read_kubectl(
        listing(
            node("n1", cpu="64", memory="7812499Ki"),
            node("n2", cpu="64", memory="7812499Ki"),
            *pods,
            pod("last", "n2", cpu="1", memory="1G"),
        )
    )
    plan = gpuopt.solve(problem, "ipc")
    assert all(move.to != "n1" for move in plan.moves)
    from gpuopt.defrag.solution import Move

    moved = [Move.model_validate({"task": "ns/last", "from": "n2", "to": "n1"})]
    assert any("lacks memory" in text for text in gpuopt.violations(problem, moved))


def test_cpu_rounds_up_to_a_milli_cpu() -> None:
    problem = read_kubectl(listing(node("n1"), pod("a", "n1", cpu="100u")))
    assert problem.tasks[0].cpus == 0.001


def test_sidecars_and_overhead() -> None:
    item = pod("a", "n1", cpu="1", memory="1Gi")
    item["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
        {"name": "setup", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}},
    ]
    item["spec"]["overhead"] = {"cpu": "250m", "memory": "64Mi"}
    task = read_kubectl(listing(node("n1"), item)).tasks[0]
    # cpu: max(1 + 0.5 sidecar, 1 + 0.5 sidecar started before it) + 0.25 overhead
    assert task.cpus == 1.75
    # memory: max(1Gi, 4Gi for setup) + 64Mi overhead
    assert task.memory == 4096.0 + 64.0


def test_locks_and_labels() -> None:
    static = pod("static", "n1", cpu="1")
    static["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    upper = pod("upper", "n1", cpu="1")
    upper["metadata"]["annotations"] = {"gpuopt.io/locked": "TRUE"}
    not_locked = pod("false", "n1", cpu="1")
    not_locked["metadata"]["annotations"] = {"gpuopt.io/locked": "false"}
    other_affinity = pod("not-in", "n1", cpu="1")
    other_affinity["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["x"]}]}
                ]
            }
        }
    }
    custom = pod("custom", "n1", cpu="1")
    custom["metadata"]["labels"] = {"team/prio": "hp", "team/group": "g"}
    problem = read_kubectl(
        listing(node("n1"), static, upper, not_locked, other_affinity, custom),
        priority_label="team/prio",
        group_label="team/group",
    )
    # the pods of pod() have no controller, so they are pinned; mirror pods say so
    held = {task.id: (task.locked, task.pinned) for task in problem.tasks}
    assert held == {
        "ns/static": (False, "mirror"),
        "ns/upper": (True, "no-controller"),
        "ns/false": (False, "no-controller"),
        "ns/not-in": (False, "no-controller"),
        "ns/custom": (False, "no-controller"),
    }
    assert problem.tasks[-1].priority == "HP"
    assert problem.tasks[-1].anti_affinity == "g"
    not_in = problem.tasks[3]
    assert not_in.node_selector == {}
    # any required node affinity is read whole (it used to lock the pod)
    assert [r.model_dump() for r in not_in.node_affinity[0].match_expressions] == [
        {"key": "zone", "operator": "NotIn", "values": ["x"]}
    ]


def test_custom_gpu_resource_and_node_list() -> None:
    data = {
        "kind": "NodeList",
        "items": [
            {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "8", "amd.com/gpu": "4"}}}
        ],
    }
    assert read_kubectl(data, gpu_resource="amd.com/gpu").nodes[0].gpus == 4


def test_default_namespace() -> None:
    item = pod("a", "n1", cpu="1")
    del item["metadata"]["namespace"]
    assert read_kubectl(listing(node("n1"), item)).tasks[0].id == "default/a"


def broken(path: str, value: Any) -> dict[str, Any]:
    """The small fixture with the field at ``path`` set to ``value``.

    ``path`` is ``items/<n>/`` then the field's keys split on ``/``; a last key with a
    dot and a slash (a resource name like ``nvidia.com/gpu``) is kept whole.
    """
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    target: Any = data
    parts = path.split("/")
    if len(parts) > 1 and "." in parts[-2]:
        parts[-2:] = ["/".join(parts[-2:])]
    keys: list[Any] = [int(key) if key.isdigit() else key for key in parts]
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = copy.deepcopy(value)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "List"}, "items is missing"),
        ({"items": {}}, "items must be a list"),
        ({"items": [3]}, "items[0]: must be an object (got int)"),
        ({"items": [{"metadata": {"name": "x"}}]}, "items[0]: kind is missing"),
        (broken("items/0/metadata/name", ""), "items[0]: metadata.name is missing"),
        (
            broken("items/0/status/allocatable/cpu", "12x"),
            "items[0] (Node 'gpu-a'): status.allocatable.cpu: '12x' is not a Kubernetes quantity",
        ),
        (
            broken("items/1/status", {"capacity": {"memory": "1Gi"}}),
            "items[1] (Node 'gpu-b'): status.allocatable.cpu is missing",
        ),
        (
            broken("items/0/status/allocatable/nvidia.com/gpu", "-1"),
            "status.allocatable.nvidia.com/gpu is negative ('-1')",
        ),
        (
            broken("items/0/status/allocatable/nvidia.com/gpu", "1500m"),
            "status.allocatable.nvidia.com/gpu is 1.5, not a whole number of GPUs",
        ),
        (
            broken("items/0/metadata/labels/gpu_model", 100),
            "items[0] (Node 'gpu-a'): metadata.labels.gpu_model must be a string (got 100)",
        ),
        (
            broken("items/2/spec/containers", {"name": "x"}),
            "items[2] (Pod 'ml/train-0'): spec.containers must be a list (got dict)",
        ),
        (
            broken("items/2/spec/containers/0/resources/requests/memory", "lots"),
            "spec.containers[0].resources.requests.memory: 'lots' is not a Kubernetes quantity",
        ),
        (
            broken("items/2/metadata/labels/gpuopt.io/priority", "urgent"),
            "metadata.labels.gpuopt.io/priority must be 'HP' or 'LP' (got 'urgent')",
        ),
        (
            broken("items/3/spec/nodeName", "gpu-z"),
            "items[3] (Pod 'serve/infer-1'): spec.nodeName 'gpu-z' is not a node that was read",
        ),
        (
            broken("items/1/status/capacity/nvidia.com/gpu", "0"),
            "node 'gpu-b': its pods hold 1 GPUs but it has 0",
        ),
        (
            broken("items/1/metadata/labels/gpu_model", "V100"),
            "pod 'serve/infer-1': its node 'gpu-b' no longer matches its node selector",
        ),
    ],
)
def test_errors_name_the_item_and_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ProblemError) as caught:
        read_kubectl(data)
    text = str(caught.value)
    assert message in text
    assert text.startswith("kubectl JSON: ")
    assert text.endswith(".")
    assert "\n" not in text


def test_top_level_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "pods.json"
    path.write_text("[]")
    with pytest.raises(
        ProblemError, match=r"pods.json: expected a JSON object with items \(got list\)"
    ):
        read_kubectl(path)


def test_missing_file_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no such file"):
        read_kubectl(tmp_path / "absent.json")
    path = tmp_path / "bad.json"
    path.write_text("{")
    with pytest.raises(ProblemError, match="not valid JSON"):
        read_kubectl(path)


def test_wrong_input_type() -> None:
    with pytest.raises(ProblemError, match="expected a path or a decoded JSON object"):
        read_kubectl(42)  # type: ignore[arg-type]
