"""The Kubernetes reader on real ``kubectl``/API output taken from public repositories.

``fixtures/kubernetes/real/README.md`` names the source and licence of every file.
Each fixture reads without error in tolerant mode, the facts below were checked
by eye against the files, and the fast methods plan legally on each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import gpuopt
from gpuopt.cluster.model import Cluster
from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl import KubectlReport, read_kubernetes

REAL = Path(__file__).parent / "fixtures" / "kubernetes" / "real"
FIXTURES = sorted(path.name for path in REAL.iterdir() if path.name != "README.md")


def read(name: str, **options: object) -> tuple[Cluster, KubectlReport]:
    return read_kubernetes(REAL / name, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_reads_and_plans_legally(name: str) -> None:
    cluster, report = read(name)
    assert sum(report.read.values()) > 0
    if not cluster.nodes:
        return
    for method in ("ipc", "onehop"):
        result = gpuopt.solve(cluster, method)
        assert gpuopt.violations(cluster, result) == [], (name, method)


def test_at_least_ten_fixtures() -> None:
    assert len(FIXTURES) >= 10


def test_fgd_simulator_example_reads_gpu_annotations() -> None:
    # hkust-adsl/kubernetes-scheduler-simulator example/test-cluster: V100 nodes with 2
    # and 4 GPUs (alibabacloud.com/gpu-count), pods with the simulator's annotations
    cluster, report = read("fgd-example")
    assert {node.id: (node.gpus, node.cpus, node.memory) for node in cluster.nodes} == {
        "pai-node-00": (2, 64.0, 256000.0),
        "pai-node-01": (4, 64.0, 256000.0),
    }
    assert all(node.resources == {} for node in cluster.nodes)  # gpu-milli mirrors the count
    pending = {pod.id: (pod.gpus, pod.gpu_milli, pod.cpus, pod.memory) for pod in cluster.pending}
    assert pending == {
        "pai-gpu/gpu-pod-00": (1, 500, 4.0, 9216.0),  # gpu-milli 500: half a GPU, waiting too
        "pai-gpu/gpu-pod-01": (0, None, 8.0, 17408.0),  # no GPU annotation
        "pai-gpu/gpu-pod-02": (2, None, 12.0, 18432.0),  # gpu-milli 1000 x gpu-count 2
    }
    assert report.reasons["fraction"] == ["pai-gpu/gpu-pod-00"]
    assert "fraction-whole" not in report.reasons


def test_fgd_annotations_of_a_bound_pod_give_a_share() -> None:
    node, pod = (
        yaml.safe_load((REAL / "fgd-example" / name).read_text())
        for name in ("pai-node-00.yaml", "gpu-pod-00.yaml")
    )
    pod["spec"]["nodeName"] = "pai-node-00"
    cluster, report = read_kubernetes({"kind": "List", "items": [node, pod]})
    (task,) = cluster.tasks
    assert (task.gpus, task.gpu_milli) == (1, 500)
    assert report.reasons["fraction"] == ["pai-gpu/gpu-pod-00"]


def test_openb_nodes() -> None:
    # the first 40 nodes of the openb trace (data/node_yaml/openb_node_list_gpu_node.yaml)
    cluster, report = read("openb-gpu-nodes.yaml")
    assert len(cluster.nodes) == 40
    first = cluster.nodes[0]
    assert (first.id, first.gpus, first.cpus, first.memory) == (
        "openb-node-0000",
        2,
        64.0,
        262144.0,
    )
    assert first.labels["alibabacloud.com/gpu-card-model"] == "P100"
    assert sum(node.gpus for node in cluster.nodes) == 22 * 2 + 1 * 2 + 2 * 4 + 15 * 8
    assert report.count("no-ready-condition") == 40
    # K12: 110 pod slots a node, no pod: no plan could reach a limit (left out)
    assert report.count("pod-limit") == 0
    assert not any("pods" in node.resources for node in cluster.nodes)


def test_openshift_insights_archive_objects_without_kind() -> None:
    # openshift/insights-operator docs/insights-archive-sample: client-go JSON, no `kind`
    cluster, report = read("openshift-insights")
    assert report.read == {"Node": 2, "Pod": 12, "PodDisruptionBudget": 1}
    assert report.count("kind-inferred") == 14  # the budget names its kind
    assert report.problems == 0
    nodes = {node.id.split(".")[0]: node for node in cluster.nodes}
    master, worker = nodes["master-0"], nodes["worker-0"]
    assert (master.cpus, worker.cpus) == (7.5, 3.5)  # allocatable "7500m", "3500m"
    assert worker.memory == pytest.approx(7002280 / 1024, abs=0.001)  # "7002280Ki"
    assert [(t.key, t.effect) for t in master.taints] == [
        ("node-role.kubernetes.io/master", "NoSchedule")
    ]
    assert worker.taints == []
    tasks = {task.id: task for task in cluster.tasks}
    prometheus = tasks["openshift-monitoring/prometheus-k8s-0"]
    # seven containers: 70m + 6 x 1m, 1Gi + 10 + 100 + 20 + 20 + 20 + 10 Mi
    assert (prometheus.cpus, prometheus.memory) == (0.076, 1204.0)
    assert (prometheus.priority, prometheus.pinned) == (2_000_000_000, "critical")
    etcd = next(task for task in cluster.tasks if task.id.startswith("openshift-etcd/etcd-"))
    assert (etcd.priority, etcd.pinned) == (2_000_001_000, "mirror")  # a static pod
    assert report.pinned == {"critical": 8, "mirror": 3}
    (router,) = cluster.pending
    assert router.id == "openshift-ingress/router-default-7bbdcfcf9b-7xdln"
    (budget,) = cluster.budgets
    assert (budget.id, budget.max_unavailable) == (
        "openshift-machine-config-operator/etcd-quorum-guard",
        1,
    )


@pytest.mark.parametrize(
    "name", ["kubectl-neat-pod1-raw.yaml", "kubectl-neat-pod1-raw.json", "k9s-po_sidecar.json"]
)
def test_a_pod_without_its_node_is_skipped_or_refused(name: str) -> None:
    cluster, report = read(name)
    assert cluster.tasks == [] and report.count("unknown-node") == 1
    with pytest.raises(ProblemError, match="is not a node that was read"):
        read(name, strict=True)


@pytest.mark.parametrize("name", ["kubectl-neat-list1-raw.json", "kubectl-neat-list1-raw.yaml"])
def test_kubectl_neat_list(name: str) -> None:
    # a kind: List of two pods with managedFields and tolerationSeconds: only the two the
    # DefaultTolerationSeconds admission plugin adds (not-ready, unreachable; 300 s), so
    # nothing is reported as ignored (L6)
    _, report = read(name)
    assert report.read == {"Pod": 2}
    assert report.reasons["unknown-node"] == ["default/t1", "default/t2"]
    assert report.unmodelled["toleration-seconds"] == 0


def test_k9s_minikube() -> None:
    cluster, report = read("k9s-minikube")
    (node,) = cluster.nodes
    assert (node.id, node.gpus, node.cpus, node.ready) == ("minikube", 0, 4.0, True)
    (task,) = cluster.tasks
    assert (task.id, task.cpus, task.memory, task.pinned) == (
        "default/nginx",
        0.1,
        70.0,
        "no-controller",
    )
    assert report.read["PodDisruptionBudget"] == 1
    assert report.reasons["claim"] == ["default/nginx"]


def test_k9s_init_container() -> None:
    # one init container and one container, each 100m and 70Mi: the pod holds the larger
    cluster, _ = read("k9s-init")
    (task,) = cluster.tasks
    assert (task.cpus, task.memory) == (0.1, 70.0)


def test_k9s_sidecar_requests() -> None:
    # init 333m/333Mi, then a sidecar (restartPolicy: Always) 20m/40Mi, container 30m/10Mi:
    # the init container runs before the sidecar starts, so the scheduler counts
    # max(333, 30 + 20) = 333m and max(333, 10 + 40) = 333Mi
    pod = json.loads((REAL / "k9s-po_sidecar.json").read_text())
    pod["spec"].pop("nodeName")
    pod["status"]["phase"] = "Pending"
    cluster, _ = read_kubernetes(pod)
    (pending,) = cluster.pending
    assert (pending.cpus, pending.memory) == (0.333, 333.0)


def test_popeye_lint_data() -> None:
    cluster, report = read("popeye")
    nodes = {node.id: node for node in cluster.nodes}
    assert set(nodes) == {"n1", "n2", "n3", "n4", "n5"}
    assert [(t.key, t.effect) for t in nodes["n2"].taints] == [("t2", "NoSchedule")]
    assert nodes["n5"].cpus == 0.1 and nodes["n5"].memory == 10.0  # "100m", "10Mi"
    # n3 and n4 have no status.allocatable or capacity: empty and locked
    assert report.reasons["no-allocatable"] == ["n3", "n4"]
    assert nodes["n3"].locked and nodes["n3"].cpus == 0
    assert nodes["n4"].unschedulable and not nodes["n4"].ready
    assert report.count("unbound") == 5  # Running pods without spec.nodeName
    assert report.read["PodDisruptionBudget"] == 5


def test_kai_gpu_sharing_examples() -> None:
    # NVIDIA/KAI-Scheduler docs/gpu-sharing: pending pods with gpu-fraction or gpu-memory
    cluster, report = read("kai-gpu-sharing")
    assert {pod.id: (pod.gpus, pod.gpu_milli) for pod in cluster.pending} == {
        "default/gpu-sharing": (1, None),  # gpu-memory: the GPU's size is unknown while pending
        "default/gpu-sharing-init-container": (1, 500),  # gpu-fraction 0.5
        "default/gpu-sharing-non-default": (1, 500),
        "default/gpu-sharing-with-mps": (1, 500),
    }
    assert report.count("fraction-whole") == 1
    assert report.count("fraction") == 3
    assert report.unmodelled["scheduler"] == 4  # schedulerName: kai-scheduler
    assert report.reasons["duplicate"] == ["Pod gpu-sharing"]  # two files, one name


def test_gfd_strategy_label_alone_is_not_mig() -> None:
    # GPU feature discovery labels every GPU node with its MIG strategy (here a vGPU
    # node, GRID-A100-4C, mig.capable false): whole GPUs, not slices
    labels = {
        "nvidia.com/gpu.product": "GRID-A100-4C",
        "nvidia.com/mig.capable": "false",
        "nvidia.com/mig.strategy": "single",
    }
    node = {
        "kind": "Node",
        "metadata": {"name": "vgpu", "labels": labels},
        "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "1"}},
    }
    cluster, report = read_kubernetes(node)
    assert "gpuopt.io/mig" not in cluster.nodes[0].labels
    assert report.count("mig-single") == 0


def test_gpu_memory_resources_give_a_share() -> None:
    # Alibaba's gpushare: the node pools GPU memory (GiB) beside its GPU count
    node = {
        "kind": "Node",
        "metadata": {"name": "share"},
        "status": {
            "allocatable": {
                "aliyun.com/gpu-count": "1",
                "aliyun.com/gpu-mem": "15",
                "cpu": "3920m",
                "memory": "14368792Ki",
                "nvidia.com/gpu": "0",
            }
        },
    }
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "ownerReferences": [{"kind": "ReplicaSet", "controller": True}]},
        "spec": {
            "nodeName": "share",
            "containers": [{"resources": {"limits": {"aliyun.com/gpu-mem": 3}}}],
        },
        "status": {"phase": "Running"},
    }
    cluster, report = read_kubernetes({"kind": "List", "items": [node, pod]})
    (task,) = cluster.tasks
    assert (task.gpus, task.gpu_milli, task.resources) == (1, 200, {"aliyun.com/gpu-mem": 3})
    assert cluster.nodes[0].gpus == 1
    assert report.reasons["fraction"] == ["default/p"]
