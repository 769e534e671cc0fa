"""The DRA and Workload API fixtures (``gpuopt/scenarios/kubernetes/dra/``) read to counts
derived by hand from their files (each folder's README says the same)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuopt.cluster.model import Cluster, load_cluster
from gpuopt.readers.kubectl import KubectlReport, read_kubernetes

pytest.importorskip("cel", reason="the CEL library of the 'dra' extra")

FIXTURES = Path(__file__).parents[3] / "gpuopt" / "scenarios" / "kubernetes" / "dra"


def read(folder: str, **options: object) -> tuple[Cluster, KubectlReport]:
    return read_kubernetes(FIXTURES / folder, **options)  # type: ignore[arg-type]


def test_every_fixture_folder_names_its_source() -> None:
    folders = sorted(path for path in FIXTURES.iterdir() if path.is_dir())
    assert len(folders) == 7
    for folder in folders:
        text = (folder / "README.md").read_text()
        assert "Source" in text or "source" in text, folder
        assert "Apache" in text, folder


def test_nvidia_gpus_whole_gpus_and_claims() -> None:
    cluster, report = read("nvidia-gpus")
    (node,) = cluster.nodes
    # no nvidia.com/gpu in allocatable: both GPUs are the slice's gpu-0 and gpu-1
    assert node.gpus == 2
    assert [device.name for device in node.devices] == ["gpu-0", "gpu-1"]
    assert node.devices[0].attribute("productName") == "NVIDIA A100-PCIE-40GB"
    assert node.devices[0].attribute("cudaComputeCapability") == "8.0.0"
    assert node.devices[0].capacity["memory"].value == "40Gi"
    assert node.resources == {"dra.gpuopt.io/gpu.nvidia.com": 2}
    # pod1 holds gpu-0 through its allocated claim; no owner: pinned as before
    (task,) = cluster.tasks
    assert (task.id, task.gpus, task.pinned) == ("gpu-test1/pod1", 1, "no-controller")
    # pod2 waits for one GPU (template single-gpu), pod0 for two (gpu-test5's two requests)
    assert {item.id: item.gpus for item in cluster.pending} == {
        "gpu-test1/pod2": 1,
        "gpu-test5/pod0": 2,
    }
    claims = {claim.id: claim for claim in cluster.claims}
    assert claims["gpu-test1/pod1-gpu-x7k9m"].allocated[0].device == "gpu-0"  # type: ignore[index]
    assert claims["gpu-test1/pod1-gpu-x7k9m"].pods == ["gpu-test1/pod1"]
    assert claims["gpu-test5/pod0-shared-gpus"].template == "multiple-gpus"
    assert [item.name for item in cluster.device_classes] == ["gpu.nvidia.com", "mig.nvidia.com"]
    assert report.dra["devices:gpu"] == 2
    assert report.dra["claims allocated"] == 1
    assert report.dra["claims to be made from templates"] == 2
    assert report.dra["pods mapped to GPUs"] == 3
    assert report.dra["unmodelled:claim.config"] == 1  # gpu-test5's GpuConfig sharing
    assert not report.unmodelled["resource-claims"]


def test_dynamic_mig_placements_cut_their_gpu() -> None:
    cluster, report = read("dynamic-mig")
    (node,) = cluster.nodes
    # per GPU: 1 full device + 7 (1g.5gb) + 3 (2g.10gb) + 2 (3g.20gb) + 1 (4g) + 1 (7g)
    assert len(node.devices) == 2 * 15
    assert report.dra["devices:gpu"] == 2
    assert report.dra["devices:mig"] == 28
    assert [item.name for item in node.counters] == ["gpu-0-counter-set", "gpu-1-counter-set"]
    # the stale generation-1 slice is skipped; gpu-0 is drawn on by four placements
    assert report.reasons["dra-stale"] == ["kind-dra-worker-gpu.nvidia.com-old9q"]
    assert report.reasons["dra-cut"] == ["gpu.nvidia.com/kind-dra-worker/gpu-0"]
    assert node.gpus == 1
    (task,) = cluster.tasks
    assert (task.gpus, task.pinned) == (0, "dra-claim")
    assert report.dra["allocated:mig"] == 4
    assert report.unmodelled["resource-claims"] == 1


def test_consumable_shares_are_not_whole_gpus() -> None:
    cluster, report = read("consumable-shares")
    (node,) = cluster.nodes
    (device,) = node.devices
    assert device.kind == "share"
    policy = device.capacity["memory"].request_policy
    assert policy is not None and (policy.default, policy.min, policy.step) == (
        "40Gi",
        "1Mi",
        "1Mi",
    )
    assert node.gpus == 0  # a shared GPU is not offered whole
    assert [task.pinned for task in cluster.tasks] == ["dra-claim", "dra-claim"]
    consumed = [claim.allocated[0].consumed_capacity for claim in cluster.claims]  # type: ignore[index]
    assert consumed == [{"memory": "4Gi"}, {"memory": "4Gi"}]
    assert report.dra["allocated:share"] == 2


def test_compute_domain_channel_is_another_device() -> None:
    cluster, report = read("compute-domain")
    assert cluster.nodes[0].gpus == 0
    assert report.dra["devices:other"] == 1
    assert report.ignored_kinds["ComputeDomain"] == 1
    (pending,) = cluster.pending
    assert pending.gpus == 0 and pending.resources == {}
    assert report.unmodelled["resource-claims"] == 1


def test_scheduler_perf_cluster() -> None:
    cluster, report = read("scheduler-perf")
    # four nodes of two test devices; the partitionable pool reaches the two labelled nodes
    assert [len(node.devices) for node in cluster.nodes] == [2, 2, 2, 2]
    assert len(cluster.devices) == 6
    assert {tuple(device.nodes) for device in cluster.devices} == {
        ("scheduler-perf-dra-2", "scheduler-perf-dra-3")
    }
    # the DeviceTaintRule with an empty selector taints all 14 devices
    assert report.dra["tainted by rules"] == 14
    assert all(len(device.taints) == 1 for device in cluster.devices)
    assert all(node.gpus == 0 for node in cluster.nodes)  # test devices are not GPUs
    assert len(cluster.pending) == 3
    assert report.unmodelled["resource-claims"] == 3
    assert report.count("capacity") == 8  # cpu and memory of 4 nodes from status.capacity


def test_mixed_cluster_keeps_each_kind_of_gpu_to_its_pods() -> None:
    cluster, _ = read("mixed")
    nodes = {node.id: node for node in cluster.nodes}
    assert (nodes["dp-node"].gpus, nodes["dra-node"].gpus) == (8, 4)
    assert nodes["dp-node"].resources == {}
    tasks = {task.id: task for task in cluster.tasks}
    assert (tasks["ml/dp-train"].gpus, tasks["ml/dra-train"].gpus) == (2, 2)
    assert tasks["ml/dra-train"].pinned is None  # two whole GPUs, no selector: movable
    pending = {item.id: item for item in cluster.pending}
    # the waiting DRA pod may go only where its class has a free GPU; the device plugin
    # pod anywhere (the gpu.nvidia.com class serves nvidia.com/gpu on DRA nodes)
    assert cluster.admits(pending["ml/dra-wait"]) == [False, True]
    assert cluster.admits(pending["ml/dp-wait"]) == [True, True]


def test_mixed_cluster_without_a_class_serving_nvidia_gpu_keeps_device_plugin_pods_apart(
    tmp_path: Path,
) -> None:
    # the same cluster, but no DeviceClass serves nvidia.com/gpu: Kubernetes then gives a pod
    # asking nvidia.com/gpu only a device plugin's GPUs, so dra-node is not for dp-wait (R2)
    import shutil

    folder = tmp_path / "mixed"
    shutil.copytree(FIXTURES / "mixed", folder)
    classes = folder / "deviceclasses.yaml"
    text = classes.read_text()
    assert "  extendedResourceName: nvidia.com/gpu\n" in text
    classes.write_text(text.replace("  extendedResourceName: nvidia.com/gpu\n", ""))
    cluster, report = read_kubernetes(folder)
    nodes = {node.id: node for node in cluster.nodes}
    assert nodes["dp-node"].resources == {"dra.gpuopt.io/(device-plugin)": 8}
    assert nodes["dra-node"].resources == {"dra.gpuopt.io/gpu.nvidia.com": 4}
    tasks = {task.id: task for task in cluster.tasks}
    assert tasks["ml/dp-train"].resources == {"dra.gpuopt.io/(device-plugin)": 2}
    assert tasks["ml/dra-train"].resources == {"dra.gpuopt.io/gpu.nvidia.com": 2}
    pending = {item.id: item for item in cluster.pending}
    assert cluster.admits(pending["ml/dp-wait"]) == [True, False]
    assert cluster.admits(pending["ml/dra-wait"]) == [False, True]
    assert report.reasons["dra-plugin-apart"] == ["dra-node"]


def test_workload_api_gangs() -> None:
    cluster, report = read("workloads", topology_labels=["rack=topology.kubernetes.io/rack"])
    gangs = {gang.id: (gang.min_member, gang.level) for gang in cluster.gangs}
    assert gangs == {"ns-1/job-1/pg1": (2, None), "ns-1/training-worker-0": (2, "rack")}
    assert report.reasons["gang-basic"] == ["ns-1/job-1-helper"]
    without, report = read("workloads")  # no rack level: the gang has none, reported
    assert {gang.level for gang in without.gangs} == {None}
    assert report.reasons["gang-topology"] == ["ns-1/training-worker-0"]


FOLDERS = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())


@pytest.mark.parametrize("folder", FOLDERS)
def test_snapshot_round_trips(folder: str, tmp_path: Path) -> None:
    cluster, _ = read(folder)
    path = tmp_path / "snapshot.json"
    path.write_text(cluster.model_dump_json())
    assert load_cluster(path) == cluster
