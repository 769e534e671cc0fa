"""The Kubernetes reader on a realistic cluster: every field mapping and every report count.

``fixtures/kubernetes/cluster.yaml`` is ``kubectl get nodes,pods,pdb,priorityclasses,pv,pvc
-A -o yaml`` of a seven-node GPU cluster; ``cluster.json`` is the same objects as ``-o json``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import gpuopt
from gpuopt.cli import main
from gpuopt.cluster.model import Cluster
from gpuopt.cluster.request import pending_request
from gpuopt.defrag.pending import fit_pending, plan_for_pending
from gpuopt.errors import ProblemError
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.readers.kubectl import KubectlReport, read_kubectl, read_kubernetes

FOLDER = Path(__file__).parent / "fixtures" / "kubernetes"
YAML_FILE, JSON_FILE = FOLDER / "cluster.yaml", FOLDER / "cluster.json"
RACK = ("rack=example.com/rack",)


@pytest.fixture(scope="module")
def read() -> tuple[Cluster, KubectlReport]:
    return read_kubernetes(YAML_FILE, topology_labels=RACK)


def test_json_and_yaml_give_the_same_cluster(read: tuple[Cluster, KubectlReport]) -> None:
    cluster, report = read
    from_json, json_report = read_kubernetes(JSON_FILE, topology_labels=RACK)
    assert from_json == cluster
    assert json_report.reasons == report.reasons  # the summary names the file
    assert cluster.name == "cluster"


def test_nodes(read: tuple[Cluster, KubectlReport]) -> None:
    cluster, _ = read
    assert cluster.levels == ["zone", "rack"]
    assert cluster.hp_priority == 1_000_000
    # id: gpus, cpus, memory (MiB), ready, cordoned, locked, taints, resources, model
    found = {
        node.id: (
            node.gpus,
            node.cpus,
            node.memory,
            node.ready,
            node.unschedulable,
            node.locked,
            [(t.key, t.value, t.effect) for t in node.taints],
            node.resources,
            node.gpu_model,
            node.topology,
        )
        for node in cluster.nodes
    }
    gpu_taint = ("nvidia.com/gpu", "present", "NoSchedule")
    assert found == {
        "h100-a": (
            8,
            191.45,  # allocatable 191450m, not capacity 192
            2004238.882,  # 2052340616Ki
            True,
            False,
            False,
            [gpu_taint],
            {
                "ephemeral-storage": 1800936640305,
                "hugepages-1Gi": 0,
                "hugepages-2Mi": 0,
                "rdma/hca_shared_devices_a": 1000,  # "1k"
            },
            "NVIDIA-H100-80GB-HBM3",
            {"zone": "us-east-1a", "rack": "r1"},
        ),
        "h100-b": (  # cordoned, MIG mixed: profiles are resources
            4,
            191.45,
            2004238.882,
            True,
            True,
            False,
            [gpu_taint, ("node.kubernetes.io/unschedulable", None, "NoSchedule")],
            {"nvidia.com/mig-1g.10gb": 14},
            "NVIDIA-H100-80GB-HBM3",
            {"zone": "us-east-1a", "rack": "r2"},
        ),
        "h100-c": (  # NotReady (status Unknown); no capacity listed
            8,
            191.45,
            2004238.882,
            False,
            False,
            False,
            [
                gpu_taint,
                ("node.kubernetes.io/unreachable", None, "NoExecute"),
                ("node.kubernetes.io/unreachable", None, "NoSchedule"),
            ],
            {},
            "NVIDIA-H100-80GB-HBM3",
            {"zone": "us-east-1a", "rack": "r2"},
        ),
        "a100-mig": (  # MIG single: 56 slices advertised as nvidia.com/gpu
            56,
            94.0,
            1031616.25,
            True,
            False,
            False,
            [],
            {},
            "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            {"zone": "us-east-1b", "rack": "r3"},
        ),
        "l4-a": (  # allocatable GPUs dropped to 2 while its pods hold 3: locked
            2,
            47.81,
            186713.097,
            True,
            False,
            True,
            [],
            {},
            "NVIDIA-L4",
            {"zone": "us-east-1b", "rack": "r3"},
        ),
        "mi300x-a": (  # AMD GPUs by default; a PreferNoSchedule taint is kept
            8,
            190.0,
            2060546.875,
            True,
            False,
            False,
            [("amd.com/gpu", None, "PreferNoSchedule")],
            {"ephemeral-storage": 1759218604441},
            None,
            {"zone": "us-east-1b", "rack": "r4"},
        ),
        "cpu-1": (
            0,
            7.91,
            31031.843,
            True,
            False,
            False,
            [],
            {"ephemeral-storage": 95491281146},
            None,
            {"zone": "us-east-1a"},
        ),
    }
    by_id = {node.id: node for node in cluster.nodes}
    assert by_id["a100-mig"].labels["gpuopt.io/mig"] == "single"
    assert "gpuopt.io/mig" not in by_id["h100-b"].labels
    assert by_id["h100-a"].labels["nvidia.com/gpu.memory"] == "81559"  # kept in labels


def test_tasks(read: tuple[Cluster, KubectlReport]) -> None:
    cluster, _ = read
    # id: node, gpus, gpu_milli, cpus, memory (MiB), priority, pinned, extended resources
    found = {
        task.id: (
            task.node,
            task.gpus,
            task.gpu_milli,
            task.cpus,
            task.memory,
            task.priority,
            task.pinned,
            task.resources,
        )
        for task in cluster.tasks
    }
    assert found == {
        "gpu-operator/nvidia-device-plugin-daemonset-7xk2p": (
            "h100-a",
            0,
            None,
            0.05,
            64.0,
            2000001000,
            "daemonset",
            {},
        ),
        "ml/train-llm-worker-0": (  # /dev/shm emptyDir: local storage
            "h100-a",
            4,
            None,
            48.0,
            524288.0,
            1000000,
            "local-storage",
            {"rdma/hca_shared_devices_a": 1, "ephemeral-storage": 100 * 2**30},
        ),
        # its PVC is bound to an NFS volume: movable
        "ml/train-llm-worker-1": ("h100-a", 1, None, 8.0, 65536.0, 1000000, None, {}),
        "ml/notebook-alice": ("h100-a", 1, None, 4.0, 32768.0, 0, "no-controller", {}),
        "ml/eval-batch-7x2kq": ("h100-a", 1, None, 2.0, 16384.0, 0, "terminating", {}),
        # KAI gpu-fraction 0.5: one GPU, half used
        "ml/infer-frac-84d9c7b5f-m2xq7": ("h100-a", 1, 500, 2.0, 8192.0, 0, None, {}),
        "serve/llm-server-6b7c9d-cccc": ("h100-b", 1, None, 6.0, 40960.0, 1000000, None, {}),
        "serve/whisper-small-5f6d-q2r8t": (
            "h100-b",
            0,
            None,
            2.0,
            8192.0,
            0,
            None,
            {"nvidia.com/mig-1g.10gb": 1},
        ),
        "kube-system/kube-proxy-h8k2m": ("h100-c", 0, None, 0.1, 0.0, 2000001000, "daemonset", {}),
        "ml/rl-rollout-0": ("h100-c", 8, None, 64.0, 262144.0, 0, "not-running", {}),  # Unknown
        "serve/llm-server-6b7c9d-aaaa": ("a100-mig", 1, None, 6.0, 40960.0, 1000000, None, {}),
        "serve/llm-server-6b7c9d-bbbb": ("l4-a", 1, None, 6.0, 40960.0, 1000000, None, {}),
        # a namespaceSelector with labels needs Namespace objects
        "serve/embedder-7c8d-zx9vw": ("l4-a", 1, None, 4.0, 16384.0, 0, "pod-affinity", {}),
        "serve/reranker-55f9-lp2dd": ("l4-a", 1, None, 4.0, 16384.0, 0, None, {}),
        # no spec.priority, no class: the globalDefault class "standard"
        "ml/rocm-train-0": ("mi300x-a", 4, None, 32.0, 262144.0, 1000, None, {}),
        "ml/preprocess-9f8b7-xk2mn": ("mi300x-a", 2, None, 16.0, 65536.0, 0, "not-running", {}),
        "ml/legacy-job-abc12": ("mi300x-a", 1, None, 8.0, 32768.0, 0, "misplaced", {}),
        "monitoring/log-shipper-6d5f-hp7rt": (
            "mi300x-a",
            0,
            None,
            0.2,
            256.0,
            0,
            "local-storage",
            {},
        ),
        "kube-system/kube-apiserver-cpu-1": ("cpu-1", 0, None, 0.25, 0.0, 2000001000, "mirror", {}),
        # system-cluster-critical is known without its PriorityClass object
        "kube-system/coredns-5d78c9869d-x7k4p": (
            "cpu-1",
            0,
            None,
            0.1,
            70.0,
            2000000000,
            "critical",
            {},
        ),
        "default/debug-shell": ("cpu-1", 0, None, 0.1, 128.0, 0, "no-controller", {}),
    }


def test_task_placement_rules(read: tuple[Cluster, KubectlReport]) -> None:
    cluster, _ = read
    tasks = {task.id: task for task in cluster.tasks}
    worker = tasks["ml/train-llm-worker-0"]
    # its not-ready toleration holds only for tolerationSeconds: not a toleration for moves
    assert [t.model_dump() for t in worker.tolerations] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "value": None, "effect": "NoSchedule"},
    ]
    [term] = worker.node_affinity
    assert [(r.key, r.operator, r.values) for r in term.match_expressions] == [
        ("nvidia.com/gpu.product", "In", ["NVIDIA-H100-80GB-HBM3"]),
        ("nvidia.com/gpu.count", "Gt", ["4"]),
    ]
    assert worker.labels["job-name"] == "train-llm" and worker.namespace == "ml"
    assert worker.start_time == 1773036005.0  # 2026-03-09T06:00:05Z
    server = tasks["serve/llm-server-6b7c9d-aaaa"]
    assert server.node_selector == {"nvidia.com/gpu.present": "true"}
    [anti] = server.pod_anti_affinity
    assert anti.all_namespaces  # namespaceSelector: {}
    assert anti.selector.match_labels == {"app": "llm-server"}
    assert anti.topology_key == "kubernetes.io/hostname"
    [affinity] = tasks["serve/embedder-7c8d-zx9vw"].pod_affinity
    assert affinity.all_namespaces  # a superset of the namespaces its selector would pick
    assert [(r.key, r.operator, r.values) for r in affinity.selector.match_expressions] == [
        ("app", "In", ["llm-server"])
    ]
    assert tasks["kube-system/kube-proxy-h8k2m"].tolerations[0].operator == "Exists"
    assert cluster.now == 1773057491.0  # the latest heartbeat, 2026-03-09T11:58:11Z


def test_pending_and_budgets(read: tuple[Cluster, KubectlReport]) -> None:
    cluster, _ = read
    found = {
        item.id: (item.gpus, item.cpus, item.priority, item.preemption_policy, item.resources)
        for item in cluster.pending
    }
    assert found == {
        "ml/train-llm-worker-2": (
            8,
            96.0,
            1000000,
            "PreemptLowerPriority",
            {"rdma/hca_shared_devices_a": 1},
        ),
        "research/sweep-17-trial-3": (1, 4.0, 100, "Never", {}),
        "research/frac-probe": (1, 1.0, 0, "PreemptLowerPriority", {}),  # gpu-memory: whole GPU
    }
    worker = cluster.pending[0]
    assert worker.node_affinity[0].match_expressions[0].values == ["NVIDIA-H100-80GB-HBM3"]
    assert worker.tolerations[0].key == "nvidia.com/gpu"
    assert worker.since == 1773036004.0
    budgets = {b.id: (b.namespace, b.min_available, b.max_unavailable) for b in cluster.budgets}
    assert budgets == {
        "serve/llm-server-pdb": ("serve", 2, None),
        "ml/train-llm-pdb": ("ml", None, "50%"),
    }
    assert cluster.budgets[1].selector.match_expressions[0].values == ["train-llm"]


def test_report(read: tuple[Cluster, KubectlReport]) -> None:
    _, report = read
    assert dict(report.read) == {
        "PriorityClass": 4,
        "PersistentVolumeClaim": 1,
        "PersistentVolume": 1,
        "Node": 7,
        "Pod": 26,
        "PodDisruptionBudget": 2,
    }
    assert report.reasons == {
        "done": ["ml/train-llm-preflight-b7d2x", "ml/train-llm-preflight-k9w3c"],
        "pending": ["ml/train-llm-worker-2", "research/sweep-17-trial-3", "research/frac-probe"],
        "not-ready": ["h100-c"],
        "cordoned": ["h100-b"],
        "tainted": ["h100-a", "h100-b", "h100-c"],
        "overcommitted": ["l4-a"],
        "mig-single": ["a100-mig"],
        "mig-profiles": ["h100-b"],
        "fraction": ["ml/infer-frac-84d9c7b5f-m2xq7"],
        "fraction-whole": ["research/frac-probe"],
        "misplaced": ["ml/legacy-job-abc12"],
        "namespace-selector": ["serve/embedder-7c8d-zx9vw"],
        "unknown-class": ["default/debug-shell"],
        "claim": ["ml/notebook-alice"],
    }
    assert dict(report.pinned) == {
        "daemonset": 2,
        "local-storage": 2,
        "no-controller": 2,
        "not-running": 2,
        "terminating": 1,
        "pod-affinity": 1,
        "misplaced": 1,
        "mirror": 1,
        "critical": 1,
    }
    assert report.count("pod-limit") == 0  # (K12: 26 pods, 110 slots a node)
    assert dict(report.unmodelled) == {
        "prefer-no-schedule": 1,
        # the worker's only timed toleration is the admission default (not-ready, 300 s): L6
        "preferred-node-affinity": 1,
        "scheduler": 2,
        "topology-spread": 3,
        "pending-pod-affinity": 1,
    }
    assert report.problems == 3  # over-committed, misplaced, namespaceSelector
    lines = report.lines()
    assert lines[0] == (
        "read 4 PriorityClass, 1 PersistentVolumeClaim, 1 PersistentVolume, 7 Node, 26 Pod, "
        "2 PodDisruptionBudget"
    )
    assert "skipped 2 Succeeded or Failed pods (ml/train-llm-preflight-b7d2x, " in lines[1]
    assert lines[2].startswith("3 unbound pods became pending demand")
    assert "1 nodes NotReady: nothing will move there (h100-c)" in lines
    assert (
        "13 pods pinned (never moved): 2 daemonset, 2 local-storage, 2 no-controller, "
        "2 not-running, 1 terminating, 1 pod-affinity, 1 misplaced, 1 mirror, 1 critical"
    ) in lines
    assert lines[-1].startswith("read but not modelled")
    assert "topologySpreadConstraints on 3 running pods" in lines[-1]


def test_the_plans_of_every_fast_method_are_legal(read: tuple[Cluster, KubectlReport]) -> None:
    cluster, _ = read
    for method in ("onehop", "ipc"):
        result = gpuopt.solve(cluster, method)
        assert gpuopt.violations(cluster, result) == []


def split(tmp_path: Path) -> Path:
    """The fixture as separate files, as ``kubectl get nodes``, ``pods`` ... write them."""
    items = json.loads(JSON_FILE.read_text())["items"]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_kind.setdefault(item["kind"], []).append(item)
    folder = tmp_path / "dump"
    folder.mkdir()
    nodes = [{k: v for k, v in item.items() if k != "kind"} for item in by_kind["Node"]]
    (folder / "nodes.yaml").write_text(yaml.safe_dump({"kind": "NodeList", "items": nodes}))
    (folder / "pods.json").write_text(json.dumps({"kind": "PodList", "items": by_kind["Pod"]}))
    rest = [i for i in items if i["kind"] not in ("Node", "Pod")]
    (folder / "rest.yml").write_text(yaml.safe_dump_all(rest))  # single objects, several docs
    (folder / "notes.txt").write_text("not read")
    return folder


def test_a_folder_of_separate_files(read: tuple[Cluster, KubectlReport], tmp_path: Path) -> None:
    cluster, report = read
    folder = split(tmp_path)
    from_folder, folder_report = read_kubernetes(folder, topology_labels=RACK, name="cluster")
    # the folder reads pods before priority classes; the order of objects does not matter
    assert from_folder == cluster
    assert folder_report.reasons == report.reasons
    files = [folder / "pods.json", folder / "nodes.yaml", folder / "rest.yml"]
    assert read_kubernetes(*files, topology_labels=RACK, name="cluster")[0] == cluster


def test_strict_refuses_the_first_problem() -> None:
    with pytest.raises(ProblemError) as caught:
        read_kubernetes(YAML_FILE, strict=True)
    text = str(caught.value)
    assert text == (
        f"{YAML_FILE}: items[21] (Pod 'serve/embedder-7c8d-zx9vw'): a required pod "
        "(anti-)affinity term has a non-empty namespaceSelector, which cannot be evaluated "
        "without Namespace objects."
    )
    with pytest.raises(ProblemError, match="namespaceSelector"):
        read_kubectl(YAML_FILE)  # strict by default: it has no report to return


def listing(*items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "List", "items": list(items)}


def node(name: str, **allocatable: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {}},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", **allocatable}},
    }


def pod(name: str, node_name: str | None = "n1", **requests: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "controller": True}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": [owner]},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def test_tolerant_reading_works_around_bad_objects() -> None:
    bad_pod = pod("bad", cpu="lots")
    budget = {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": "ns"},
        "spec": {"minAvailable": [1], "selector": {}},
    }
    cluster, report = read_kubernetes(
        listing(
            node("n1", **{"nvidia.com/gpu": "4"}),
            node("n2", cpu="x"),
            pod("good", cpu="1"),
            bad_pod,
            pod("lost", "n9", cpu="1"),
            budget,
            {"kind": "Service", "metadata": {"name": "s"}},
            {"metadata": {"name": "no-kind"}},
            7,
        )
    )
    assert [n.id for n in cluster.nodes] == ["n1"]
    assert cluster.nodes[0].locked  # a pod on it could not be read
    assert [(t.id, t.pinned) for t in cluster.tasks] == [("ns/good", "budget")]
    assert report.reasons == {
        "malformed-item": ["items[7]", "items[8]"],
        "malformed-Node": ["items[1] (Node 'n2')"],
        "malformed-Pod": ["items[3] (Pod 'ns/bad')"],
        "unknown-node": ["ns/lost"],
        "malformed-PodDisruptionBudget": ["items[5] (PodDisruptionBudget 'b')"],
        "unreadable-pod": ["n1"],
        "no-ready-condition": ["n1"],
    }
    assert report.first["malformed-Pod"] == (
        "kubectl JSON: items[3] (Pod 'ns/bad'): spec.containers[0].resources.requests.cpu: "
        "'lots' is not a Kubernetes quantity."
    )
    assert dict(report.ignored_kinds) == {"Service": 1}
    assert report.problems == 6


@pytest.mark.parametrize(
    ("annotations", "requests", "node_labels", "expected"),
    [
        ({"gpu-fraction": "0.25"}, {}, {}, (1, 250)),
        ({"gpu-fraction": "1"}, {}, {}, (1, None)),
        ({"gpu-memory": "20000"}, {}, {"nvidia.com/gpu.memory": "80000"}, (1, 250)),
        ({"gpu-memory": "90000"}, {}, {"nvidia.com/gpu.memory": "80000"}, (1, None)),
        ({"gpu-memory": "2000"}, {}, {}, (1, None)),  # the GPU's size is unknown
        (
            {},
            {"alibabacloud.com/gpu-milli": "300", "alibabacloud.com/gpu-count": "1"},
            {},
            (1, 300),
        ),
        ({}, {"alibabacloud.com/gpu-milli": "2000"}, {}, (2, None)),
        ({"gpu-fraction": "0.5"}, {"nvidia.com/gpu": "2"}, {}, (2, None)),  # GPUs win
    ],
)
def test_gpu_shares(
    annotations: dict[str, str],
    requests: dict[str, str],
    node_labels: dict[str, str],
    expected: tuple[int, int | None],
) -> None:
    host = node("n1", **{"nvidia.com/gpu": "4", "alibabacloud.com/gpu-count": "4"})
    host["metadata"]["labels"] = node_labels
    item = pod("p", **requests)
    item["metadata"]["annotations"] = annotations
    cluster, _ = read_kubernetes(listing(host, item))
    assert cluster.nodes[0].gpus == 8  # both GPU names count by default
    task = cluster.tasks[0]
    assert (task.gpus, task.gpu_milli) == expected


def test_gpu_resource_names() -> None:
    host = node("n1", **{"alibabacloud.com/gpu-count": "2", "example.com/fpga": "1"})
    cluster, report = read_kubernetes(listing(host))
    assert (cluster.nodes[0].gpus, cluster.nodes[0].resources) == (2, {"example.com/fpga": 1})
    only, _ = read_kubernetes(listing(host), gpu_resources=["example.com/fpga"])
    assert only.nodes[0].gpus == 1
    assert only.nodes[0].resources == {"alibabacloud.com/gpu-count": 2}
    assert report.reasons["no-ready-condition"] == ["n1"]


def test_volumes_and_options() -> None:
    scratch = pod("scratch", cpu="1")
    scratch["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {}}]
    claimed = pod("claimed", cpu="1")
    claimed["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]
    ephemeral = pod("eph", cpu="1")
    ephemeral["spec"]["volumes"] = [{"name": "v", "ephemeral": {"volumeClaimTemplate": {}}}]
    claim = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "eph-v", "namespace": "ns"},
        "spec": {"volumeName": "local-1"},
    }
    volume = {"kind": "PersistentVolume", "metadata": {"name": "local-1"}, "spec": {"local": {}}}
    data = listing(node("n1"), scratch, claimed, ephemeral, claim, volume)
    pinned = {t.id: t.pinned for t in read_kubernetes(data)[0].tasks}
    assert pinned == {"ns/scratch": "local-storage", "ns/claimed": None, "ns/eph": "local-storage"}
    cluster, report = read_kubernetes(data, allow_emptydir=True, pin_unresolved_claims=True)
    pinned = {t.id: t.pinned for t in cluster.tasks}
    assert pinned == {"ns/scratch": None, "ns/claimed": "local-storage", "ns/eph": "local-storage"}
    assert report.reasons["claim-pinned"] == ["ns/claimed"]


def test_topology_levels_and_legacy_labels() -> None:
    host = node("n1")
    host["metadata"]["labels"] = {
        "topology.kubernetes.io/zone": "z1",
        "example.com/switch": "s1",
        "gpuopt.io/asw": "asw-1",
    }
    item = pod("p", cpu="1")
    item["metadata"]["labels"] = {"gpuopt.io/priority": "hp", "gpuopt.io/anti-affinity": "g"}
    item["metadata"]["annotations"] = {"gpuopt.io/locked": "true"}
    cluster, report = read_kubernetes(listing(host, item), topology_labels=["example.com/switch"])
    assert cluster.levels == ["zone", "example.com/switch"]
    assert cluster.nodes[0].topology == {"zone": "z1", "example.com/switch": "s1"}
    assert cluster.nodes[0].asw == "asw-1"
    task = cluster.tasks[0]
    assert (task.priority, task.anti_affinity, task.locked) == ("HP", "g", True)
    assert report.reasons["legacy-priority"] == ["ns/p"] and report.reasons["locked"] == ["ns/p"]
    with pytest.raises(ProblemError, match="give LABEL or NAME=LABEL"):
        read_kubernetes(listing(host), topology_labels=["node=x"])


def test_priority_classes_and_group_clashes() -> None:
    classes = [
        {
            "kind": "PriorityClass",
            "metadata": {"name": "low"},
            "value": 5,
            "preemptionPolicy": "Never",
        },
        {"kind": "PriorityClass", "metadata": {"name": "base"}, "value": 7, "globalDefault": True},
    ]
    named = pod("named", None, cpu="1")
    named["spec"]["priorityClassName"] = "low"
    plain = pod("plain", None, cpu="1")
    first, second = pod("a", cpu="1"), pod("b", cpu="1")
    for item in (first, second):
        item["metadata"]["labels"] = {"gpuopt.io/anti-affinity": "g"}
    cluster, report = read_kubernetes(listing(node("n1"), *classes, named, plain, first, second))
    assert [(p.id, p.priority, p.preemption_policy) for p in cluster.pending] == [
        ("ns/named", 5, "Never"),
        ("ns/plain", 7, "PreemptLowerPriority"),
    ]
    assert [t.anti_affinity for t in cluster.tasks] == ["g", None]
    assert report.reasons["group-clash"] == ["ns/b"]


def test_yaml_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("items: [\n")
    with pytest.raises(ProblemError, match=r"bad.yaml: not valid YAML \(.* at line 2 column 1\)"):
        read_kubernetes(path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ProblemError, match=r"holds no \.json, \.yaml or \.yml file"):
        read_kubernetes(empty)
    with pytest.raises(ProblemError, match="give at least one"):
        read_kubernetes()


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "snap.json"
    argv = ["snapshot", "kubectl", str(YAML_FILE), "--out", str(out), "--topology-label", RACK[0]]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert Cluster.load(out) == read_kubernetes(YAML_FILE, topology_labels=RACK)[0]
    assert "13 pods pinned (never moved)" in captured.err
    assert "7 nodes, 21 tasks" in captured.out
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    assert main([*argv, "--strict"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "namespaceSelector" in err
    changed = copy.deepcopy(json.loads(JSON_FILE.read_text()))
    (tmp_path / "c.json").write_text(json.dumps(changed))
    argv = ["snapshot", "kubectl", str(tmp_path / "c.json"), "--out", str(out)]
    assert main([*argv, "--hp-priority", "100", "--critical-priority", "999"]) == 0
    cluster = Cluster.load(out)
    assert cluster.hp_priority == 100
    pinned = {t.id: t.pinned for t in cluster.tasks}
    assert pinned["ml/rocm-train-0"] == "critical"  # 1000 >= 999


def test_a_hard_topology_spread_pins_its_pod_and_the_pods_it_counts() -> None:
    from gpuopt.readers.kubectl import read_kubernetes

    def pod(name: str, node: str, app: str, spread: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "nodeName": node,
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        }
        if spread is not None:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": spread,
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ]
        owner = {"kind": "ReplicaSet", "name": "rs", "controller": True}
        return {
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ml",
                "labels": {"app": app},
                "ownerReferences": [owner],
            },
            "spec": spec,
            "status": {"phase": "Running"},
        }

    nodes = [
        {
            "kind": "Node",
            "metadata": {"name": n},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}},
        }
        for n in ("a", "b")
    ]
    items = [
        *nodes,
        pod("hard", "a", "web", "DoNotSchedule"),
        pod("peer", "b", "web"),
        pod("soft", "a", "db", "ScheduleAnyway"),
        pod("free", "b", "other"),
    ]
    cluster, _ = read_kubernetes({"kind": "List", "items": items})
    pinned = {task.id: task.pinned for task in cluster.tasks}
    assert pinned == {
        "ml/hard": "topology-spread",
        "ml/peer": "topology-spread",
        "ml/soft": None,
        "ml/free": None,
    }
    # read as a waiting pod's: matchLabelKeys join the selector (the other version's web
    # pod is not counted, so not pinned), and a constraint without a selector counts none
    keyed = pod("keyed", "a", "web", "DoNotSchedule")
    keyed["metadata"]["labels"]["version"] = "v2"
    keyed["spec"]["topologySpreadConstraints"][0]["matchLabelKeys"] = ["version"]
    old = pod("old", "b", "web")
    old["metadata"]["labels"]["version"] = "v1"
    bare = pod("bare", "b", "db", "DoNotSchedule")
    del bare["spec"]["topologySpreadConstraints"][0]["labelSelector"]
    items = [*nodes, keyed, old, bare, pod("db", "a", "db")]
    cluster, _ = read_kubernetes({"kind": "List", "items": items})
    pinned = {task.id: task.pinned for task in cluster.tasks}
    assert pinned == {
        "ml/keyed": "topology-spread",
        "ml/old": None,
        "ml/bare": "topology-spread",
        "ml/db": None,
    }


def test_zonal_volumes_and_host_ports_keep_their_pods_where_kubernetes_would() -> None:
    """Review findings: a zonal disk's node affinity, and host ports."""
    from gpuopt.readers.kubectl import read_kubernetes

    def node(name: str, zone: str) -> dict[str, Any]:
        return {
            "kind": "Node",
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}},
        }

    owner = [{"kind": "StatefulSet", "name": "db", "controller": True}]
    db = {
        "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": "data", "ownerReferences": owner},
        "spec": {
            "nodeName": "n1",
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data-db-0"}}],
        },
        "status": {"phase": "Running"},
    }
    web = {
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "data", "ownerReferences": owner},
        "spec": {
            "nodeName": "n2",
            "containers": [{"ports": [{"containerPort": 80, "hostPort": 8000}]}],
        },
        "status": {"phase": "Running"},
    }
    claim = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-db-0", "namespace": "data"},
        "spec": {"volumeName": "pv-1"},
    }
    volume = {
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-1"},
        "spec": {
            "csi": {"driver": "ebs.csi.aws.com"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "topology.kubernetes.io/zone",
                                    "operator": "In",
                                    "values": ["za"],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }
    items = [node("n1", "za"), node("n2", "zb"), node("n3", "za"), db, web, claim, volume]
    cluster, report = read_kubernetes({"kind": "List", "items": items})
    tasks = {task.id: task for task in cluster.tasks}
    assert tasks["data/web-0"].pinned == "host-port"
    [term] = tasks["data/db-0"].node_affinity
    assert [(r.key, r.values) for r in term.match_expressions] == [
        ("topology.kubernetes.io/zone", ["za"])
    ]
    assert "zonal disks" in report.summary()
    import gpuopt

    plan = gpuopt.solve(cluster, "ipc")
    assert all(m.to != "n2" for m in plan.moves if m.task == "data/db-0")


def test_a_waiting_pod_is_placed_only_where_its_zonal_disk_reaches() -> None:
    """Review finding 01: the emptier node n1 is in zone za, the disk in zb (n2 only)."""
    from gpuopt.cluster.request import pending_request
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.placement.node.solution import violations

    def node(name: str, zone: str) -> dict[str, Any]:
        return {
            "kind": "Node",
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}},
        }

    zone_b = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zb"]}
    items = [
        node("n1", "za"),
        node("n2", "zb"),
        {
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-b"},
            "spec": {
                "nodeAffinity": {
                    "required": {"nodeSelectorTerms": [{"matchExpressions": [zone_b]}]}
                }
            },
        },
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "ml"},
            "spec": {"volumeName": "pv-b"},
        },
        {
            "kind": "Pod",
            "metadata": {"name": "fill", "namespace": "ml"},
            "spec": {
                "nodeName": "n2",
                "containers": [{"resources": {"requests": {"nvidia.com/gpu": "3"}}}],
            },
            "status": {"phase": "Running"},
        },
        {
            "kind": "Pod",
            "metadata": {"name": "zonal", "namespace": "ml"},
            "spec": {
                "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
            },
            "status": {"phase": "Pending"},
        },
    ]
    cluster, _ = read_kubernetes({"kind": "List", "items": items})
    request, _ = pending_request(cluster, "ml/zonal")
    problem = NodePlacementProblem.from_cluster(cluster, request, pending="ml/zonal")
    placed = gpuopt.solve(problem, "heuristic")
    assert placed.node == "n2" and not violations(problem, placed)
    elsewhere = placed.model_copy(update={"node": "n1", "gpus": [0]})
    assert violations(problem, elsewhere)


def test_a_waiting_pod_goes_only_where_its_host_port_is_free() -> None:
    """Review finding 02 (K9): web-1 on n1 holds port 8080; n1 is the fullest node, n2 free."""
    from gpuopt.cluster.request import pending_request
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.placement.node.solution import violations
    from gpuopt.preemption.problem import PreemptionProblem

    def pod(name: str, node: str | None, gpus: str, port: int | None) -> dict[str, Any]:
        container: dict[str, Any] = {"resources": {"requests": {"nvidia.com/gpu": gpus}}}
        if port is not None:
            container["ports"] = [{"containerPort": 80, "hostPort": port}]
        spec: dict[str, Any] = {"containers": [container]}
        if node is not None:
            spec["nodeName"] = node
        owner = [{"kind": "Job", "name": name, "controller": True}]
        return {
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "ownerReferences": owner},
            "spec": spec,
            "status": {"phase": "Running", "startTime": "2026-03-02T10:00:00Z"}
            if node
            else {"phase": "Pending"},
        }

    nodes = [
        {
            "kind": "Node",
            "metadata": {"name": n},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}},
        }
        for n in ("n1", "n2")
    ]
    items = [
        *nodes,
        pod("web-1", "n1", "2", 8080),
        pod("wait", None, "1", 8080),
        pod("free", None, "1", None),
    ]
    cluster, report = read_kubernetes({"kind": "List", "items": items})
    assert "1 waiting pods bind host ports" in report.summary()
    request, _ = pending_request(cluster, "ml/wait")
    problem = NodePlacementProblem.from_cluster(cluster, request, pending="ml/wait")
    placed = gpuopt.solve(problem, "heuristic")
    assert placed.node == "n2" and not violations(problem, placed)
    assert violations(problem, placed.model_copy(update={"node": "n1", "gpus": [2]}))
    decision = gpuopt.solve(PreemptionProblem.from_cluster(cluster, request), "heuristic")
    assert decision.node == "n2"
    # a pod binding no port still goes to the fullest node (binpack)
    free, _ = pending_request(cluster, "ml/free")
    assert gpuopt.solve(NodePlacementProblem.from_cluster(cluster, free), "heuristic").node == "n1"


def test_a_pod_marked_do_not_evict_is_pinned_and_no_plan_moves_or_stops_it() -> None:
    # two 8-GPU nodes, a 2-GPU pod on each; a waiting 8-GPU pod fits only once one of them
    # moves: each pod carries one of the annotations by which an operator forbids voluntary
    # eviction, so neither may move (defragmentation) nor stop (preemption): nothing fits
    marks = {
        "w1": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
        "w2": {"karpenter.sh/do-not-disrupt": "True"},
    }
    items = [node("n1", **{"nvidia.com/gpu": "8"}), node("n2", **{"nvidia.com/gpu": "8"})]
    for name, where in (("w1", "n1"), ("w2", "n2")):
        item = pod(name, where, **{"nvidia.com/gpu": "2"})
        item["metadata"]["annotations"] = marks[name]
        item["status"]["startTime"] = "2026-12-01T10:00:00Z"
        items.append(item)
    free = pod("w3", "n1", **{"nvidia.com/gpu": "1"})
    free["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    free["status"]["startTime"] = "2026-12-01T10:00:00Z"
    items.append(free)
    big = pod("big", None, **{"nvidia.com/gpu": "8"})
    big["spec"]["priority"] = 1_000_000_000
    items.append(big)
    cluster, report = read_kubernetes(listing(*items))
    pinned = {task.id: task.pinned for task in cluster.tasks}
    assert pinned == {"ns/w1": "do-not-evict", "ns/w2": "do-not-evict", "ns/w3": None}
    assert report.pinned["do-not-evict"] == 2
    for method in ("heuristic", "cpsat"):
        plan, _, after = plan_for_pending(cluster, method, time_limit=10)
        assert not {move.task for move in plan.moves} & {"ns/w1", "ns/w2"}, method
        assert not gpuopt.violations(cluster, plan)
        assert [fit.node for fit in after] == [None]  # 8 GPUs free nowhere without them
    request, priority = pending_request(cluster, "ns/big")
    problem = PreemptionProblem.from_cluster(
        cluster,
        request,
        priority=priority,
        now=cluster.tasks[0].start_time + 7200,
        pending="ns/big",
    )
    decision = gpuopt.solve(problem, "heuristic")
    assert decision.node is None and not gpuopt.violations(problem, decision)


def test_a_terminating_pod_keeps_its_deletion_time() -> None:
    # metadata.deletionTimestamp: pinned (terminating, K6) and its kubelet's deadline kept
    # for the calendar (models/calendar.md F3); a pod not terminating has none
    going = pod("going", **{"nvidia.com/gpu": "2"})
    going["metadata"]["deletionTimestamp"] = "1970-01-01T01:00:30Z"
    items = [
        node("n1", **{"nvidia.com/gpu": "8"}),
        going,
        pod("staying", **{"nvidia.com/gpu": "1"}),
    ]
    cluster, _ = read_kubernetes(listing(*items))
    tasks = {task.id: task for task in cluster.tasks}
    assert tasks["ns/going"].pinned == "terminating"
    assert tasks["ns/going"].deletion_time == 3630.0
    assert tasks["ns/staying"].deletion_time is None


def test_who_stops_a_pod_is_read_from_its_disruption_target_condition() -> None:
    # K10: kube-scheduler marks the pods it preempts (DisruptionTarget True, reason
    # PreemptionByScheduler) and waits only for those; False or absent: no disruption
    def stopped(name: str, status: str, reason: str | None) -> dict[str, Any]:
        found = pod(name, **{"nvidia.com/gpu": "1"})
        found["metadata"]["deletionTimestamp"] = "1970-01-01T01:00:30Z"
        condition = {"type": "DisruptionTarget", "status": status}
        if reason is not None:
            condition["reason"] = reason
        found["status"]["conditions"] = [{"type": "Ready", "status": "True"}, condition]
        return found

    items = [
        node("n1", **{"nvidia.com/gpu": "8"}),
        stopped("preempted", "True", "PreemptionByScheduler"),
        stopped("evicted", "True", "EvictionByEvictionAPI"),
        stopped("cleared", "False", "PreemptionByScheduler"),
        stopped("unsaid", "True", None),
        pod("running", **{"nvidia.com/gpu": "1"}),
    ]
    cluster, _ = read_kubernetes(listing(*items))
    found = {task.id: task.disruption for task in cluster.tasks}
    assert found == {
        "ns/preempted": "PreemptionByScheduler",
        "ns/evicted": "EvictionByEvictionAPI",
        "ns/cleared": None,
        "ns/unsaid": "",
        "ns/running": None,
    }


def test_a_nominated_node_is_kept_for_the_fit_and_counted_where_not_modelled() -> None:
    waiting = pod("urgent", None, **{"nvidia.com/gpu": "4"})
    waiting["status"]["nominatedNodeName"] = "n1"
    lost = pod("lost", None, **{"nvidia.com/gpu": "4"})
    lost["status"]["nominatedNodeName"] = "gone"  # a node that was not read
    items = [node("n1", **{"nvidia.com/gpu": "8"}), waiting, lost, pod("other", None)]
    cluster, report = read_kubernetes(listing(*items))
    nominated = {pod.id: pod.nominated_node for pod in cluster.pending}
    assert nominated["ns/urgent"] == "n1" and nominated["ns/lost"] is None
    assert report.unmodelled["nominated-node"] == 2
    assert "status.nominatedNodeName of 2 pending pods" in report.summary()


def test_a_waiting_pod_keeps_pod_anti_affinity_both_ways() -> None:
    """Review finding 09 (K5): llm-serve-0 runs on n1 with a required anti-affinity against
    app=llm-serve on the hostname. A waiting replica with the label (and no term of its own)
    may not go to n1, the fullest node, nor may one whose own term selects it; a pod
    without the label may. Node placement, its checker, preemption, the fit of waiting
    pods and the calendar all keep it."""
    from gpuopt.calendar.cluster import from_cluster
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.placement.node.solution import violations

    term = {
        "labelSelector": {"matchLabels": {"app": "llm-serve"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    serving = pod("llm-serve-0", "n1", **{"nvidia.com/gpu": "2"})
    serving["metadata"]["labels"] = {"app": "llm-serve"}
    serving["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    serving["status"]["startTime"] = "2026-12-01T10:00:00Z"
    replica = pod("llm-serve-1", None, **{"nvidia.com/gpu": "2"})
    replica["metadata"]["labels"] = {"app": "llm-serve"}
    own = pod("probe", None, **{"nvidia.com/gpu": "1"})
    own["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    other = pod("other", None, **{"nvidia.com/gpu": "2"})
    nodes = []
    for name in ("n1", "n2"):
        item = node(name, **{"nvidia.com/gpu": "4"})
        item["metadata"]["labels"] = {"kubernetes.io/hostname": name}
        nodes.append(item)
    cluster, _ = read_kubernetes(listing(*nodes, serving, replica, own, other))
    for pod_id, expected in (("ns/llm-serve-1", "n2"), ("ns/probe", "n2"), ("ns/other", "n1")):
        request, _ = pending_request(cluster, pod_id)
        problem = NodePlacementProblem.from_cluster(cluster, request, pending=pod_id)
        placed = gpuopt.solve(problem, "heuristic")
        assert placed.node == expected, pod_id
        assert not violations(problem, placed)
        on_n1 = violations(problem, placed.model_copy(update={"node": "n1", "gpus": [2, 3]}))
        assert bool(on_n1) == (expected == "n2"), pod_id
        assert all("K5: " in v for v in on_n1), on_n1
    fits = {fit.pod.id: fit.node for fit in fit_pending(cluster)}
    assert fits["ns/llm-serve-1"] != "n1" and fits["ns/probe"] != "n1"
    calendar = from_cluster(
        cluster, now=cluster.tasks[0].start_time + 60, horizon=3600.0, step=60.0
    )
    jobs = {job.id: job for job in calendar.jobs}
    assert "n1" not in jobs["ns/llm-serve-1"].eligible and "n1" not in jobs["ns/probe"].eligible
    assert "n1" in jobs["ns/other"].eligible


def test_a_waiting_pod_with_a_bad_creation_time_stays_demand() -> None:
    # review finding 11f: it was skipped as a malformed pod "whose node is locked"; a
    # waiting pod has no node, and a bad creationTimestamp only loses its waiting time
    bad = pod("late", None, **{"nvidia.com/gpu": "1"})
    bad["metadata"]["creationTimestamp"] = "yesterday"
    broken = pod("broken", None, cpu="lots")
    cluster, report = read_kubernetes(listing(node("n1", **{"nvidia.com/gpu": "8"}), bad, broken))
    assert [(p.id, p.since) for p in cluster.pending] == [("ns/late", None)]
    assert report.count("waiting-since") == 1
    assert report.count("malformed-waiting-Pod") == 1 and report.count("malformed-Pod") == 0
    assert "skipped 1 malformed waiting pods (left out of the demand)" in report.summary()
    with pytest.raises(ProblemError, match="creationTimestamp"):
        read_kubernetes(listing(node("n1", **{"nvidia.com/gpu": "8"}), bad), strict=True)


def test_a_terminating_pod_with_a_bad_deletion_time_stays_a_task() -> None:
    # it was skipped as a malformed pod (its node locked) when only its deletionTimestamp
    # was unreadable: it still holds its GPUs, pinned terminating, with no end from it
    going = pod("going", "n1", **{"nvidia.com/gpu": "2"})
    going["metadata"]["deletionTimestamp"] = "soon"
    items = listing(node("n1", **{"nvidia.com/gpu": "8"}), going)
    cluster, report = read_kubernetes(items)
    task = cluster.tasks[0]
    assert (task.id, task.pinned, task.deletion_time) == ("ns/going", "terminating", None)
    assert report.count("deleting-since") == 1 and report.count("malformed-Pod") == 0
    assert not cluster.nodes[0].locked
    with pytest.raises(ProblemError, match="deletionTimestamp"):
        read_kubernetes(items, strict=True)


def test_a_pod_resized_in_place_counts_as_kube_scheduler_counts_it() -> None:
    """KEP-1287: kube-scheduler counts a running container's request as the largest of the
    spec's (desired, unless the resize is Infeasible), the actual (status resources) and
    the allocated amounts, per resource; the cases of component-helpers' tests."""

    def resized(name: str, spec_cpu: str, actual: str | None, allocated: str | None,
                infeasible: bool = False) -> dict[str, Any]:  # fmt: skip
        item = pod(name, "n1", cpu=spec_cpu)
        item["spec"]["containers"][0]["name"] = "main"
        state: dict[str, Any] = {"name": "main"}
        if actual is not None:
            state["resources"] = {"requests": {"cpu": actual}}
        if allocated is not None:
            state["allocatedResources"] = {"cpu": allocated}
        item["status"]["containerStatuses"] = [state]
        if infeasible:
            item["status"]["conditions"] = [
                *item["status"].get("conditions", []),
                {"type": "PodResizePending", "status": "True", "reason": "Infeasible"},
            ]
        return item

    items = [
        node("n1", cpu="64"),
        resized("down", "2", "6", None),  # resized down, not yet actuated: 6
        resized("up", "4", "2", None),  # no resize status: the desired 4
        resized("infeasible", "4", "2", None, infeasible=True),  # 2
        resized("moving", "6", "2", "4", infeasible=True),  # infeasible & in progress: 4
        resized("three-way", "3", "1", "5"),  # 5
        resized("allocated-only", "4", None, "6", infeasible=True),  # no status resources: 4
        pod("plain", "n1", cpu="7"),  # no status: the spec
    ]
    cluster, _ = read_kubernetes(listing(*items))
    found = {task.id.split("/")[1]: task.cpus for task in cluster.tasks}
    assert found == {"down": 6, "up": 4, "infeasible": 2, "moving": 4, "three-way": 5,
                     "allocated-only": 4, "plain": 7}  # fmt: skip


def test_match_label_keys_join_the_selector_as_the_api_server_merges_them() -> None:
    """KEP-3633: a required anti-affinity with matchLabelKeys [pod-template-hash] selects
    only the pods of its own revision; mismatchLabelKeys [team] only other teams' pods. A
    key the pod lacks is ignored."""
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname",
        "matchLabelKeys": ["pod-template-hash", "absent"],
        "mismatchLabelKeys": ["team"],
    }
    waiting = pod("web-new", None, **{"nvidia.com/gpu": "1"})
    waiting["metadata"]["labels"] = {"app": "web", "pod-template-hash": "v2", "team": "a"}
    waiting["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    cluster, report = read_kubernetes(listing(node("n1", **{"nvidia.com/gpu": "8"}), waiting))
    [read] = cluster.pending[0].pod_anti_affinity
    assert [(e.key, e.operator, e.values) for e in read.selector.match_expressions] == [
        ("pod-template-hash", "In", ["v2"]),
        ("team", "NotIn", ["a"]),
    ]
    assert "label-keys" not in report.unmodelled
    old = {"app": "web", "pod-template-hash": "v1", "team": "b"}
    same = {"app": "web", "pod-template-hash": "v2", "team": "b"}
    mine = {"app": "web", "pod-template-hash": "v2", "team": "a"}
    assert not read.selects("ns", "ns", old)  # another revision
    assert read.selects("ns", "ns", same)
    assert not read.selects("ns", "ns", mine)  # its own team


def test_a_waiting_pods_hard_spread_is_kept_and_its_soft_one_counted() -> None:
    waiting = pod("web-9", None, **{"nvidia.com/gpu": "1"})
    waiting["metadata"]["labels"] = {"app": "web", "pod-template-hash": "v2"}
    waiting["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 2,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
            "matchLabelKeys": ["pod-template-hash"],
            "minDomains": 3,
            "nodeTaintsPolicy": "Honor",
        },
        {"maxSkew": 1, "topologyKey": "rack"},  # no selector: it counts no pod
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
    ]
    cluster, report = read_kubernetes(listing(node("n1", **{"nvidia.com/gpu": "8"}), waiting))
    first, second = cluster.pending[0].topology_spread
    assert (first.max_skew, first.topology_key, first.min_domains) == (2, "zone", 3)
    assert (first.node_affinity_policy, first.node_taints_policy) == ("Honor", "Honor")
    assert first.selector is not None and first.selector.match_labels == {"app": "web"}
    assert [(e.key, e.values) for e in first.selector.match_expressions] == [
        ("pod-template-hash", ["v2"])
    ]
    assert (second.topology_key, second.selector) == ("rack", None)
    assert report.unmodelled["spread-preference"] == 1
    assert "topology-spread" not in report.unmodelled  # (a running pod's would count)
    for constraint, message in (
        ({"maxSkew": 0, "topologyKey": "zone"}, r"\[0\].maxSkew .*got 0"),
        ({"minDomains": 0, "topologyKey": "zone"}, r"\[0\].minDomains .*got 0"),
        ({"topologyKey": "zone", "whenUnsatisfiable": "Maybe"}, r"whenUnsatisfiable .*'Maybe'"),
    ):
        bad = copy.deepcopy(waiting)
        bad["spec"]["topologySpreadConstraints"] = [constraint]
        with pytest.raises(ProblemError, match=message):
            read_kubernetes(listing(node("n1", **{"nvidia.com/gpu": "8"}), bad), strict=True)


def test_a_pod_count_limit_a_plan_could_reach_is_kept() -> None:
    """K12 (kube-scheduler's NodeResourcesFit, "Too many pods"): n1 may hold 3 pods and
    holds 3 (one with a GPU, two CPU-only sidecars of a DaemonSet-like kind); n2 may hold
    110. A waiting 1-GPU pod fits n1's GPUs but not its pod slots: every way of placing it
    sends it to n2, and a move onto n1 is refused by the checker."""
    from gpuopt.cluster.request import pending_request
    from gpuopt.defrag.pending import fit_pending
    from gpuopt.defrag.solution import make_plan
    from gpuopt.placement.node.problem import NodePlacementProblem

    items = [
        node("n1", pods="3", **{"nvidia.com/gpu": "8"}),
        node("n2", pods="110", **{"nvidia.com/gpu": "8"}),
        pod("a", "n1", **{"nvidia.com/gpu": "1"}),
        pod("b", "n1", cpu="1"),
        pod("c", "n1", cpu="1"),
        pod("d", "n2", **{"nvidia.com/gpu": "7"}),
        pod("w", None, **{"nvidia.com/gpu": "1"}),
    ]
    cluster, report = read_kubernetes(listing(*items))
    assert report.count("pod-limit") == 1  # n1: no free slot, three pods could come
    assert {node.id: node.resources.get("pods") for node in cluster.nodes} == {"n1": 3, "n2": 110}
    assert all(task.resources.get("pods") == 1 for task in cluster.tasks)
    assert cluster.pending[0].resources == {"pods": 1}
    assert [fit.node for fit in fit_pending(cluster)] == ["n2"]
    request, _ = pending_request(cluster, "ns/w")
    placed = gpuopt.solve(NodePlacementProblem.from_cluster(cluster, request, pending="ns/w"))
    assert placed.node == "n2"
    plan = make_plan(cluster, "greedy", [("ns/d", "n2", "n1")], seconds=0.0)
    broken = gpuopt.violations(cluster, plan)
    assert any("lacks pods" in why for why in broken), broken
    # the same cluster with slots to spare on n1: the limit is left out
    items[0] = node("n1", pods="110", **{"nvidia.com/gpu": "8"})
    cluster, report = read_kubernetes(listing(*items))
    assert report.count("pod-limit") == 0 and not cluster.nodes[0].resources
