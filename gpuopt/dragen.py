"""Seeded DRA facts on a cluster snapshot: nodes whose GPUs are devices in ResourceSlices.

A module above the readers (it reads what it writes with the kubectl reader), used by
the legality sweep (:mod:`gpuopt.legality`) and the tests.

:func:`with_dra` turns some nodes of a snapshot into DRA nodes the way NVIDIA's
DRA driver publishes them, with the pods on them holding their GPUs through
ResourceClaims, and adds pods that wait with claims. It writes the Kubernetes
objects (DeviceClasses, Nodes, ResourceSlices, ResourceClaimTemplates,
ResourceClaims, Pods, as the fixtures under ``gpuopt/scenarios/kubernetes/dra``
show them) and reads them with :func:`gpuopt.readers.kubectl.read_kubernetes`,
so what the snapshot says of them (node and pod ``gpus``, the
``dra.gpuopt.io/<class>`` resources, the ``dra-claim`` pins, devices, counter
sets and claims; rules R1-R8 of ``models/cluster.md``) is the reader's answer,
not a second implementation of it. The read facts are then put on the
snapshot's nodes and tasks, which keep every other field (CPUs, labels,
taints, affinities, priorities, ...).

What a DRA node holds (one pool per node, driver ``gpu.nvidia.com``):

- every GPU a device ``gpu-<i>`` with attributes ``type=gpu``, ``productName``,
  ``uuid`` and ``resource.kubernetes.io/pcieRoot`` (four GPUs per PCIe root);
- on a *dynamic-MIG* node, a counter set per GPU (multiprocessors, memory and
  eight memory slices) that the whole GPU draws on entirely and every placement
  of profiles ``1g.10gb`` (seven), ``3g.40gb`` (two) and ``7g.80gb`` (one) draws
  on in part, as the driver's ``partitions.go`` writes them;
- on other nodes, some free GPUs shareable (``allowMultipleAllocations``, a
  ``memory`` capacity with a request policy);
- a ``NoSchedule`` taint on some free devices.

The pods of the snapshot on a DRA node hold their GPUs through claims: made
from a template and asking whole GPUs (movable, R7/R8), or made apart from the
pod (``resourceClaimName``) or narrowed by a CEL selector (pinned
``dra-claim`` by R8); some one-GPU pods hold MIG placements of one GPU (with
``matchAttribute`` on ``parentUUID``) or a memory share of a shareable GPU
instead, and are pinned. Waiting pods ask whole GPUs (sometimes with
``matchAttribute`` on ``pcieRoot``), a MIG profile or a share. DeviceClasses:
``gpu.nvidia.com`` (whole GPUs by a CEL selector, serving ``nvidia.com/gpu`` as
a DRA-backed extended resource), ``mig.nvidia.com`` and
``share.gpu.nvidia.com``. Nodes with GPU shares of the device plugin
(``gpu_milli``, ``gpu_indices``) or locked stay device-plugin nodes: the
cluster is mixed.

>>> from gpuopt.defrag.generator import random_snapshot
>>> cluster = with_dra(random_snapshot(1, nodes=6, gpus_per_node=8), 1, DraFacts(nodes=0.5))
>>> sum(bool(node.devices) for node in cluster.nodes) > 0, bool(cluster.claims)
(True, True)
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from gpuopt._generator import check_facts, seeded_random
from gpuopt.cluster.devices import DRA_RESOURCE_PREFIX
from gpuopt.cluster.model import Cluster, Node, Task
from gpuopt.readers.kubectl import read_kubernetes

#: The driver of every device made here.
DRIVER = "gpu.nvidia.com"
#: The DeviceClasses: whole GPUs, MIG placements, shares of a GPU.
GPU_CLASS, MIG_CLASS, SHARE_CLASS = "gpu.nvidia.com", "mig.nvidia.com", "share.gpu.nvidia.com"
#: MIG profiles of an 80 GB GPU: name -> (profile id, memory slices, multiprocessors).
PROFILES: dict[str, tuple[int, int, int]] = {
    "1g.10gb": (19, 1, 16),
    "3g.40gb": (9, 4, 60),
    "7g.80gb": (0, 8, 132),
}
#: Where each profile may start (memory slice), as NVIDIA's MIG guide places them.
STARTS: dict[str, tuple[int, ...]] = {
    "1g.10gb": (0, 1, 2, 3, 4, 5, 6),
    "3g.40gb": (0, 4),
    "7g.80gb": (0,),
}
_SLICES, _PROCESSORS, _MEMORY_GI = 8, 132, 80


@dataclass(frozen=True)
class DraFacts:
    """How many of each DRA fact :func:`with_dra` draws (shares between 0 and 1).

    Attributes
    ----------
    nodes
        Share of the nodes that may become DRA nodes (unlocked, no GPU shares of the
        device plugin) that do.
    mig
        Share of DRA nodes in dynamic MIG.
    shared
        Share of a non-MIG DRA node's free GPUs made shareable.
    apart
        Share of whole-GPU pods whose claim is made apart from the pod (pinned).
    selector
        Share of whole-GPU pods whose template narrows the GPUs by a CEL selector
        (pinned).
    cut
        Share of one-GPU pods that hold MIG placements (on a MIG node) or a memory
        share (on a node with shareable GPUs) instead of a whole GPU (pinned).
    tainted
        Share of free devices with a ``NoSchedule`` device taint.
    waiting
        Waiting pods with claims.
    max_nodes
        At most this many DRA nodes (the first drawn), so that a large snapshot is read
        in about a second.
    """

    nodes: float = 0.5
    mig: float = 0.3
    shared: float = 0.3
    apart: float = 0.15
    selector: float = 0.1
    cut: float = 0.3
    tainted: float = 0.1
    waiting: int = 3
    max_nodes: int = 64


def _attributes(node: Node, index: int) -> dict[str, Any]:
    product = node.gpu_model or node.labels.get("gpu_model") or "H100"
    return {
        "productName": {"string": f"NVIDIA {product}"},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{index // 4:02x}"},
        "type": {"string": "gpu"},
        "uuid": {"string": f"GPU-{hashlib.sha1(f'{node.id}/{index}'.encode()).hexdigest()[:24]}"},
    }


def _counters(size: int, start: int, processors: int) -> dict[str, Any]:
    counters = {
        "multiprocessors": {"value": str(processors)},
        "memory": {"value": f"{size * _MEMORY_GI // _SLICES}Gi"},
    }
    for slot in range(start, start + size):
        counters[f"memory-slice-{slot}"] = {"value": "1"}
    return counters


@dataclass
class _DraNode:
    """The objects of one DRA node being written."""

    node: Node
    mig: bool
    devices: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    counter_sets: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    free: list[int] = dataclasses.field(default_factory=list)  # whole GPUs not yet held
    shareable: set[int] = dataclasses.field(default_factory=set)
    migs: dict[int, list[str]] = dataclasses.field(default_factory=dict)  # GPU -> placements

    def gpu_name(self, index: int) -> str:
        return f"gpu-{index}"

    def write(self) -> None:
        """The node's GPUs (and MIG placements) as the driver publishes them."""
        for index in range(self.node.gpus):
            device: dict[str, Any] = {
                "name": self.gpu_name(index),
                "attributes": _attributes(self.node, index),
                "capacity": {"memory": {"value": f"{_MEMORY_GI}Gi"}},
            }
            if index in self.shareable:
                device["allowMultipleAllocations"] = True
                device["capacity"]["memory"]["requestPolicy"] = {
                    "default": f"{_MEMORY_GI}Gi",
                    "validRange": {"min": "1Gi", "step": "1Gi"},
                }
            if self.mig:
                counter_set = f"gpu-{index}-counter-set"
                self.counter_sets.append(
                    {"name": counter_set, "counters": _counters(_SLICES, 0, _PROCESSORS)}
                )
                device["consumesCounters"] = [
                    {"counterSet": counter_set, "counters": _counters(_SLICES, 0, _PROCESSORS)}
                ]
            self.devices.append(device)
            if not self.mig:
                continue
            placements = []
            for profile, (profile_id, size, processors) in PROFILES.items():
                for start in STARTS[profile]:
                    name = f"gpu-{index}-mig-{profile_id}-{start}-{size}"
                    placements.append(name)
                    attributes = dict(_attributes(self.node, index))
                    attributes["type"] = {"string": "mig"}
                    attributes["profile"] = {"string": profile}
                    attributes["parentUUID"] = attributes.pop("uuid")
                    self.devices.append(
                        {
                            "name": name,
                            "attributes": attributes,
                            "capacity": {
                                "memory": {"value": f"{size * _MEMORY_GI // _SLICES}Gi"},
                                "multiprocessors": {"value": str(processors)},
                            },
                            "consumesCounters": [
                                {
                                    "counterSet": f"gpu-{index}-counter-set",
                                    "counters": _counters(size, start, processors),
                                }
                            ],
                        }
                    )
            self.migs[index] = placements

    def slice(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "driver": DRIVER,
            "nodeName": self.node.id,
            "pool": {"name": self.node.id, "generation": 1, "resourceSliceCount": 1},
            "devices": self.devices,
        }
        if self.counter_sets:
            spec["sharedCounters"] = self.counter_sets
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{self.node.id}-{DRIVER}"},
            "spec": spec,
        }


def _classes() -> list[dict[str, Any]]:
    def of(name: str, expression: str, extended: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
        if extended is not None:
            spec["extendedResourceName"] = extended
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": spec,
        }

    kind = f"device.attributes['{DRIVER}'].type"
    return [
        of(
            GPU_CLASS,
            f"device.driver == '{DRIVER}' && {kind} == 'gpu' && !device.allowMultipleAllocations",
            "nvidia.com/gpu",
        ),
        of(MIG_CLASS, f"device.driver == '{DRIVER}' && {kind} == 'mig'"),
        of(SHARE_CLASS, f"device.driver == '{DRIVER}' && device.allowMultipleAllocations"),
    ]


def _request(name: str, device_class: str, count: int = 1, **more: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if count != 1:
        exactly["count"] = count
    exactly.update(more)
    return {"name": name, "exactly": exactly}


class _Writer:
    """The Kubernetes objects of the DRA part of a snapshot."""

    def __init__(self, rng: random.Random, facts: DraFacts) -> None:
        self.rng = rng
        self.facts = facts
        self.objects: list[dict[str, Any]] = _classes()
        self.templates: dict[tuple[str, str], dict[str, Any]] = {}
        self.serial = 0

    def template(self, namespace: str, name: str, spec: dict[str, Any]) -> str:
        if (namespace, name) not in self.templates:
            item = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"namespace": namespace, "name": name},
                "spec": {"spec": spec},
            }
            self.templates[namespace, name] = item
            self.objects.append(item)
        return name

    def claim(
        self,
        namespace: str,
        name: str,
        spec: dict[str, Any],
        results: list[dict[str, Any]],
        node: str,
        pod: str,
    ) -> None:
        self.objects.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"namespace": namespace, "name": name},
                "spec": spec,
                "status": {
                    "allocation": {
                        "devices": {"results": results},
                        "nodeSelector": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": [node]}
                                    ]
                                }
                            ]
                        },
                    },
                    "reservedFor": [{"name": pod, "resource": "pods", "uid": f"uid-{pod}"}],
                },
            }
        )

    def pod(
        self,
        namespace: str,
        name: str,
        node: str | None,
        claim_ref: dict[str, str],
        claim_name: str | None,
    ) -> None:
        metadata: dict[str, Any] = {
            "namespace": namespace,
            "name": name,
            "uid": f"uid-{name}",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"rs-{name}",
                    "uid": f"rs-uid-{name}",
                    "controller": True,
                }
            ],
        }
        spec: dict[str, Any] = {
            "containers": [
                {"name": "main", "image": "worker", "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", **claim_ref}],
        }
        status: dict[str, Any] = {"phase": "Pending"}
        if node is not None:
            spec["nodeName"] = node
            status = {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
            }
            if claim_name is not None:
                status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim_name}]
        self.objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": metadata,
                "spec": spec,
                "status": status,
            }
        )

    def result(self, request: str, node: str, device: str, **more: Any) -> dict[str, Any]:
        return {"request": request, "driver": DRIVER, "pool": node, "device": device, **more}

    # ---- the pods of the snapshot on a DRA node
    def holder(self, place: _DraNode, task: Task, namespace: str) -> None:
        """Task ``task`` as a pod holding its GPUs through a claim."""
        node_id, name = place.node.id, task.id
        rng, facts = self.rng, self.facts
        self.serial += 1
        claim_name = f"{name}-gpu-{self.serial:05d}"
        if task.gpus == 1 and rng.random() < facts.cut:
            if place.mig and place.free:
                self._mig_holder(place, task, namespace, claim_name)
                return
            if place.shareable:
                self._share_holder(place, task, namespace, claim_name)
                return
        devices = place.free[: task.gpus]
        del place.free[: task.gpus]
        requests = [_request("gpus", GPU_CLASS, task.gpus)]
        if rng.random() < facts.selector:
            product = _attributes(place.node, 0)["productName"]["string"]
            expression = f"device.attributes['{DRIVER}'].productName == '{product}'"
            requests = [
                _request(
                    "gpus",
                    GPU_CLASS,
                    task.gpus,
                    selectors=[{"cel": {"expression": expression}}],
                )
            ]
        spec = {"devices": {"requests": requests}}
        results = [self.result("gpus", node_id, place.gpu_name(i)) for i in devices]
        if rng.random() < facts.apart:  # a claim made apart from the pod: pinned by R8
            self.claim(namespace, claim_name, spec, results, node_id, name)
            self.pod(namespace, name, node_id, {"resourceClaimName": claim_name}, None)
            return
        template = self.template(namespace, f"gpus-{task.gpus}-{len(self.templates)}", spec)
        self.claim(namespace, claim_name, spec, results, node_id, name)
        self.pod(namespace, name, node_id, {"resourceClaimTemplateName": template}, claim_name)

    def _mig_holder(self, place: _DraNode, task: Task, namespace: str, claim_name: str) -> None:
        """A one-GPU pod holding one or two MIG placements of one GPU (pinned by R8)."""
        index = place.free.pop(0)
        profile = self.rng.choice(("1g.10gb", "3g.40gb"))
        profile_id, size, _ = PROFILES[profile]
        count = self.rng.choice((1, 2))
        starts = STARTS[profile][:count]
        selector = {"cel": {"expression": f"device.attributes['{DRIVER}'].profile == '{profile}'"}}
        spec = {
            "devices": {
                "requests": [_request("mig", MIG_CLASS, count, selectors=[selector])],
                "constraints": [{"matchAttribute": f"{DRIVER}/parentUUID"}],
            }
        }
        results = [
            self.result("mig", place.node.id, f"gpu-{index}-mig-{profile_id}-{start}-{size}")
            for start in starts
        ]
        template = self.template(namespace, f"mig-{profile}-{count}", spec)
        self.claim(namespace, claim_name, spec, results, place.node.id, task.id)
        self.pod(
            namespace, task.id, place.node.id, {"resourceClaimTemplateName": template}, claim_name
        )

    def _share_holder(self, place: _DraNode, task: Task, namespace: str, claim_name: str) -> None:
        """A one-GPU pod holding a memory share of a shareable GPU (pinned by R8)."""
        index = self.rng.choice(sorted(place.shareable))
        gib = self.rng.choice((10, 20))
        spec = {
            "devices": {
                "requests": [
                    _request("gpu", SHARE_CLASS, capacity={"requests": {"memory": f"{gib}Gi"}})
                ]
            }
        }
        self.serial += 1
        share_id = f"00000000-0000-4000-8000-{self.serial:012d}"
        results = [
            self.result(
                "gpu",
                place.node.id,
                place.gpu_name(index),
                shareID=share_id,
                consumedCapacity={"memory": f"{gib}Gi"},
            )
        ]
        template = self.template(namespace, f"share-{gib}gi", spec)
        self.claim(namespace, claim_name, spec, results, place.node.id, task.id)
        self.pod(
            namespace, task.id, place.node.id, {"resourceClaimTemplateName": template}, claim_name
        )

    def waiting(self, number: int) -> None:
        """A waiting pod with a claim made from a template."""
        kind = self.rng.choice(("gpu", "gpu", "pcie", "mig", "share"))
        if kind == "gpu":
            count = self.rng.choice((1, 2, 4))
            spec = {"devices": {"requests": [_request("gpus", GPU_CLASS, count)]}}
        elif kind == "pcie":
            count = 2
            spec = {
                "devices": {
                    "requests": [_request("gpus", GPU_CLASS, count)],
                    "constraints": [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}],
                }
            }
        elif kind == "mig":
            count = 1
            selector = {
                "cel": {"expression": f"device.attributes['{DRIVER}'].profile == '1g.10gb'"}
            }
            spec = {"devices": {"requests": [_request("mig", MIG_CLASS, selectors=[selector])]}}
        else:
            count = 1
            spec = {
                "devices": {
                    "requests": [
                        _request("gpu", SHARE_CLASS, capacity={"requests": {"memory": "8Gi"}})
                    ]
                }
            }
        template = self.template("dra-wait", f"wait-{kind}-{count}", spec)
        self.pod("dra-wait", f"wait-{number}", None, {"resourceClaimTemplateName": template}, None)


def _node_object(node: Node) -> dict[str, Any]:
    allocatable = {"cpu": f"{node.cpus:g}", "pods": "110"}
    if node.memory is not None:
        allocatable["memory"] = f"{int(node.memory)}Mi"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.id, "labels": dict(node.labels)},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def with_dra(cluster: Cluster, seed: int, facts: DraFacts | None = None) -> Cluster:
    """``cluster`` with DRA nodes, claims and waiting pods with claims (see the module).

    Parameters
    ----------
    cluster
        A snapshot (device-plugin GPUs); it is not changed.
    seed
        Seeds the private random generator (the same arguments give the same snapshot).
    facts
        How many of each DRA fact (default: :class:`DraFacts`' defaults).

    Returns
    -------
    Cluster
        The snapshot with the facts the kubectl reader reads from the objects written:
        DRA nodes' ``gpus``, ``devices``, ``counters`` and ``dra.gpuopt.io/<class>``
        resources; their pods' ``gpus``, resources and ``dra-claim`` pins; the claims,
        DeviceClasses and waiting pods. Nodes that could not become DRA nodes and their
        pods are as they were.
    """
    facts = DraFacts() if facts is None else facts
    check_facts(facts, whole={"waiting": (0, 1000), "max_nodes": (0, 100_000)})
    rng = seeded_random(seed)
    on: defaultdict[str, list[Task]] = defaultdict(list)
    for task in cluster.tasks:
        on[task.node].append(task)
    writer = _Writer(rng, facts)
    chosen: dict[str, _DraNode] = {}
    for node in cluster.nodes:
        eligible = (
            0 < node.gpus <= 16
            and not node.locked
            and not any(task.gpu_milli is not None or task.gpu_indices for task in on[node.id])
        )
        if not eligible or rng.random() >= facts.nodes or len(chosen) >= facts.max_nodes:
            continue
        place = _DraNode(node, mig=rng.random() < facts.mig)
        place.free = list(range(node.gpus))
        used = sum(task.gpus for task in on[node.id])
        if not place.mig:
            idle = list(range(used, node.gpus))
            place.shareable = {index for index in idle if rng.random() < facts.shared}
            place.free = [index for index in place.free if index not in place.shareable]
        place.write()
        chosen[node.id] = place
    if not chosen:
        return cluster
    namespace_of = {}
    for node_id, place in chosen.items():
        writer.objects.append(_node_object(place.node))
        for task in on[node_id]:
            if task.gpus == 0:
                continue
            namespace = task.namespace or (task.id.split("/")[0] if "/" in task.id else "default")
            namespace_of[task.id] = namespace
            writer.holder(place, task, namespace)
        held = {
            result["device"]
            for item in writer.objects
            if item["kind"] == "ResourceClaim"
            for result in item["status"]["allocation"]["devices"]["results"]
            if result["pool"] == node_id
        }
        for device in place.devices:
            if device["name"] not in held and rng.random() < facts.tainted:
                device["taints"] = [
                    {"key": f"{DRIVER}/unhealthy", "value": "xid-79", "effect": "NoSchedule"}
                ]
        writer.objects.append(place.slice())
    for number in range(facts.waiting):
        writer.waiting(number)
    read, _report = read_kubernetes({"apiVersion": "v1", "kind": "List", "items": writer.objects})
    return _graft(cluster, read, namespace_of)


def _graft(cluster: Cluster, read: Cluster, namespace_of: dict[str, str]) -> Cluster:
    """``cluster`` with what the reader read of its DRA nodes and their pods."""
    read_nodes = {node.id: node for node in read.nodes}
    read_id = {f"{namespace}/{task_id}": task_id for task_id, namespace in namespace_of.items()}
    read_tasks = {read_id[task.id]: task for task in read.tasks}
    data = cluster.model_dump(mode="json", exclude_none=True)
    for row in data["nodes"]:
        node = read_nodes.get(row["id"])
        if node is None:
            continue
        row["gpus"] = node.gpus
        # (the reader's objects as they are: validated once, not dumped and read again)
        row["devices"] = list(node.devices)
        row["counters"] = list(node.counters)
        dra = {k: v for k, v in node.resources.items() if k.startswith(DRA_RESOURCE_PREFIX)}
        row["resources"] = {**row.get("resources", {}), **dra}
    for row in data["tasks"]:
        task = read_tasks.get(row["id"])
        if task is None:
            continue
        if task.pinned not in (None, "dra-claim"):
            raise AssertionError(f"the reader pinned {task.id} as {task.pinned}")  # a bug here
        row["gpus"] = task.gpus
        dra = {k: v for k, v in task.resources.items() if k.startswith(DRA_RESOURCE_PREFIX)}
        row["resources"] = {**row.get("resources", {}), **dra}
        if task.pinned is not None and row.get("pinned") is None and not row.get("locked"):
            row["pinned"] = task.pinned
    data["pending"] = [*data.get("pending", []), *read.pending]
    data["device_classes"] = list(read.device_classes)
    data["claims"] = [
        claim.model_copy(update={"pods": [read_id.get(pod, pod) for pod in claim.pods]})
        for claim in read.claims
    ]
    data["devices"] = list(read.devices)
    return Cluster.model_validate(data)


__all__ = ["DRIVER", "GPU_CLASS", "MIG_CLASS", "PROFILES", "SHARE_CLASS", "DraFacts", "with_dra"]
