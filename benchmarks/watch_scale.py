"""Watch at scale: the watched state with 5,000 nodes and 50,000 pods (issue 34), and the
Kubernetes clients compared (docs/live.md).

Protocol. The fake API server (:mod:`gpuopt.live.fake`) runs in a subprocess of its
own (``--serve``), seeded with ``--nodes`` nodes (8 GPUs, labels, conditions,
addresses) and ``--pods`` pods bound
round-robin (a Job's pod: owner, one container with GPU/CPU/memory requests and
limits, env, mounts, the admission's default tolerations, Running and Ready with
its conditions and container status, and the ``managedFields`` the API server
records for it: about 5.3 KB each, 2.4 KB of it managedFields), so that this
process holds only the client and the sink. Nodes carry 20 images and their
managedFields too (about 7 KB each). Then here:

1. **sync**: a :class:`~gpuopt.live.watch.Watcher` over every watched kind
   (``WATCHED``) through :class:`~gpuopt.live.api.KubeApi` (a kubeconfig pointing
   at the server) into a sink (``--sink store``: :class:`~gpuopt.live.watch.Store`,
   or any ``module:factory`` that makes a sink); time from ``start()`` until
   ``wait_synced()``; the process's RSS growth over the sync (``/proc/self/status``,
   after a ``gc.collect()``) and, with ``--tracemalloc``, the memory Python
   allocated and still holds (slower: sync time is then not reported); the time
   of one full collection of the cyclic collector with that state held, and with
   ``--freeze`` the same after ``gc.freeze()``;
2. **update latency, paced**: ``--updates`` times, one at a time, a random pod is
   changed on the server (a merge patch of one label through the API) and the
   time is taken from just before the patch is sent until the sink has applied
   that change (the patch's own round trip included: an upper bound);
3. **burst**: ``--burst`` patches sent back to back from one thread; the rate
   at which the sink received them, and the latency of the last one.

``--clients`` instead compares the candidate clients (the table of docs/live.md):
import time in a fresh process (best of 3), installed size of each client with its
dependencies, listing every pod as raw dicts and as the client's models, and
watch throughput (a watch that replays ``--churn`` logged changes as fast as the
client reads them).

    python benchmarks/watch_scale.py                                # 5,000 nodes, 50,000 pods
    python benchmarks/watch_scale.py --nodes 500 --pods 5000 --updates 100 --burst 500
    python benchmarks/watch_scale.py --clients --pods 50000 --churn 20000
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.metadata
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from gpuopt.live.api import NODES, PODS, WATCHED, KubeApi, Obj, Resource, gc_paused
from gpuopt.live.fake import FakeApiServer
from gpuopt.live.watch import Sink, Store, Watcher

ROOT = Path(__file__).resolve().parents[1]

# -- the cluster ----------------------------------------------------------------------------


def make_node(index: int) -> Obj:
    """A GPU node as a kubelet reports it (no image list)."""
    name = f"gpu-node-{index:05d}"
    ready_since = "2026-11-01T00:00:00Z"
    return {
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "gpu-8x-h100",
                "topology.kubernetes.io/zone": f"zone-{index % 3}",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.memory": "81559",
                "nvidia.com/gpu.count": "8",
                "network.example.com/block": f"block-{index // 256}",
                "network.example.com/rack": f"rack-{index // 16}",
                "network.example.com/switch": f"asw-{index // 32}",
            },
            "managedFields": [
                {
                    "manager": manager,
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ready_since,
                    "fieldsType": "FieldsV1",
                    **({"subresource": "status"} if manager == "kubelet" else {}),
                    "fieldsV1": {
                        "f:status": {
                            "f:conditions": {
                                f'k:{{"type":"{kind}"}}': {
                                    ".": {},
                                    **_fields("lastHeartbeatTime", "lastTransitionTime", "message"),
                                    **_fields("reason", "status", "type"),
                                }
                                for kind in (
                                    "DiskPressure",
                                    "MemoryPressure",
                                    "PIDPressure",
                                    "Ready",
                                )
                            },
                            **_fields(
                                "allocatable", "capacity", "daemonEndpoints", "images", "nodeInfo"
                            ),
                        }
                    }
                    if manager == "kubelet"
                    else {
                        "f:metadata": {"f:labels": {".": {}, **_fields("network.example.com/rack")}}
                    },
                }
                for manager in ("kubelet", "kubectl-label")
            ],
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {
            "podCIDR": f"10.{index // 256}.{index % 256}.0/24",
            "providerID": f"fake://{name}",
        },
        "status": {
            "capacity": {
                "cpu": "192",
                "memory": "2113451232Ki",
                "ephemeral-storage": "3750000000Ki",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "nvidia.com/gpu": "8",
                "rdma/ib": "8",
                "pods": "110",
            },
            "allocatable": {
                "cpu": "190",
                "memory": "2100000000Ki",
                "ephemeral-storage": "3456000000000",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "nvidia.com/gpu": "8",
                "rdma/ib": "8",
                "pods": "110",
            },
            "conditions": [
                {
                    "type": kind,
                    "status": "True" if kind == "Ready" else "False",
                    "lastHeartbeatTime": "2026-12-06T10:00:00Z",
                    "lastTransitionTime": ready_since,
                    "reason": reason,
                    "message": message,
                }
                for kind, reason, message in (
                    (
                        "MemoryPressure",
                        "KubeletHasSufficientMemory",
                        "kubelet has sufficient memory available",
                    ),
                    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    (
                        "PIDPressure",
                        "KubeletHasSufficientPID",
                        "kubelet has sufficient PID available",
                    ),
                    ("Ready", "KubeletReady", "kubelet is posting ready status"),
                )
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.200.{index // 256}.{index % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": [
                {
                    "names": [
                        f"registry.example.com/ml/image-{image}@sha256:{image:064x}",
                        f"registry.example.com/ml/image-{image}:2026.{image % 12 + 1}",
                    ],
                    "sizeBytes": 1_000_000_000 + 7919 * image,
                }
                for image in range(20)
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"boot-{index:08x}",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.8.0-45-generic",
                "kubeProxyVersion": "v1.36.0",
                "kubeletVersion": "v1.36.0",
                "machineID": f"{index:032x}",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 24.04.1 LTS",
                "systemUUID": f"{index:08x}-0000-0000-0000-000000000000",
            },
        },
    }


def _fields(*names: str) -> dict[str, Any]:
    return {f"f:{name}": {} for name in names}


def pod_managed_fields(job: str) -> list[Obj]:
    """What the API server records for a Job pod (server-side apply's bookkeeping):
    the Job controller's fields, the scheduler's condition and the kubelet's status."""
    condition = {".": {}, **_fields("lastProbeTime", "lastTransitionTime", "status", "type")}
    return [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-12-06T07:59:58Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    **_fields("generateName"),
                    "f:annotations": {".": {}, **_fields("gpuopt.io/checkpoint")},
                    "f:labels": {
                        ".": {},
                        **_fields(
                            "app",
                            "batch.kubernetes.io/controller-uid",
                            "batch.kubernetes.io/job-name",
                            "team",
                        ),
                    },
                    "f:ownerReferences": {".": {}, f'k:{{"uid":"uid-{job}"}}': {}},
                },
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"trainer"}': {
                            ".": {},
                            **_fields("args", "command", "image", "imagePullPolicy", "name"),
                            "f:env": {
                                ".": {},
                                'k:{"name":"JOB_NAME"}': {".": {}, **_fields("name", "value")},
                                'k:{"name":"NCCL_DEBUG"}': {".": {}, **_fields("name", "value")},
                            },
                            "f:resources": {
                                ".": {},
                                "f:limits": {".": {}, **_fields("memory", "nvidia.com/gpu")},
                                "f:requests": {
                                    ".": {},
                                    **_fields("cpu", "memory", "nvidia.com/gpu"),
                                },
                            },
                            **_fields("terminationMessagePath", "terminationMessagePolicy"),
                            "f:volumeMounts": {
                                ".": {},
                                'k:{"mountPath":"/etc/train"}': {
                                    ".": {},
                                    **_fields("mountPath", "name"),
                                },
                            },
                        }
                    },
                    **_fields(
                        "dnsPolicy", "enableServiceLinks", "priorityClassName", "restartPolicy"
                    ),
                    **_fields("schedulerName", "securityContext", "terminationGracePeriodSeconds"),
                    "f:tolerations": {},
                    "f:volumes": {
                        ".": {},
                        'k:{"name":"config"}': {
                            ".": {},
                            "f:configMap": {".": {}, **_fields("defaultMode", "name")},
                            "f:name": {},
                        },
                    },
                },
            },
        },
        {
            "manager": "kube-scheduler",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-12-06T07:59:59Z",
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": {
                "f:status": {"f:conditions": {".": {}, 'k:{"type":"PodScheduled"}': condition}}
            },
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-12-06T08:00:05Z",
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {
                        f'k:{{"type":"{kind}"}}': condition
                        for kind in (
                            "ContainersReady",
                            "Initialized",
                            "PodReadyToStartContainers",
                            "Ready",
                        )
                    },
                    **_fields("containerStatuses", "hostIP", "phase", "podIP", "startTime"),
                    "f:hostIPs": {},
                    "f:podIPs": {".": {}, 'k:{"ip":"10.0.0.2"}': {".": {}, "f:ip": {}}},
                }
            },
        },
    ]


def pod_name(index: int) -> tuple[str, str]:
    """(namespace, name) of pod ``index``."""
    return f"team-{index % 20}", f"train-{index // 8:05d}-{index % 8}-x{index:06x}"


def make_pod(index: int, nodes: int) -> Obj:
    """A running Job pod bound to node ``index % nodes``."""
    job = f"train-{index // 8:05d}"
    namespace, name = pod_name(index)
    gpus = str(1 << (index % 4))
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app": "trainer",
                "batch.kubernetes.io/job-name": job,
                "batch.kubernetes.io/controller-uid": f"uid-{job}",
                "team": f"team-{index % 20}",
            },
            "annotations": {"gpuopt.io/checkpoint": "2026-12-06T09:00:00Z"},
            "managedFields": pod_managed_fields(job),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": f"uid-{job}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": f"gpu-node-{index % nodes:05d}",
            "schedulerName": "default-scheduler",
            "priorityClassName": "batch",
            "priority": 1000,
            "preemptionPolicy": "PreemptLowerPriority",
            "restartPolicy": "Never",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {
                    "name": "trainer",
                    "image": "registry.example.com/ml/trainer:2026.11",
                    "command": ["python", "-m", "train"],
                    "args": ["--config", "/etc/train/config.yaml"],
                    "env": [
                        {"name": "NCCL_DEBUG", "value": "WARN"},
                        {"name": "JOB_NAME", "value": job},
                    ],
                    "resources": {
                        "requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": gpus},
                        "limits": {"memory": "128Gi", "nvidia.com/gpu": gpus},
                    },
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/train"},
                        {
                            "name": "kube-api-access",
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                            "readOnly": True,
                        },
                    ],
                    "imagePullPolicy": "IfNotPresent",
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": f"{job}-config"}},
                {
                    "name": "kube-api-access",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
                        ],
                    },
                },
            ],
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ],
        },
        "status": {
            "phase": "Running",
            "hostIP": f"10.200.{(index % nodes) // 256}.{(index % nodes) % 256}",
            "podIP": f"10.{(index % nodes) // 256}.{(index % nodes) % 256}.{index % 200 + 2}",
            "startTime": "2026-12-06T08:00:00Z",
            "qosClass": "Burstable",
            "conditions": [
                {"type": kind, "status": "True", "lastTransitionTime": "2026-12-06T08:00:05Z"}
                for kind in (
                    "PodReadyToStartContainers",
                    "Initialized",
                    "Ready",
                    "ContainersReady",
                    "PodScheduled",
                )
            ],
            "containerStatuses": [
                {
                    "name": "trainer",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "image": "registry.example.com/ml/trainer:2026.11",
                    "imageID": "registry.example.com/ml/trainer@sha256:" + "0" * 64,
                    "containerID": f"containerd://{index:064x}",
                    "state": {"running": {"startedAt": "2026-12-06T08:00:04Z"}},
                }
            ],
        },
    }


# -- the server, in a process of its own ------------------------------------------------------


def serve(nodes: int, pods: int, churn: int, seed: int) -> None:
    """``--serve``: seed a fake server, make ``churn`` logged changes, print
    ``{"url", "churn_from", "pod_list_bytes", ...}`` on one line, serve until stdin closes."""
    objects = [make_node(index) for index in range(nodes)]
    objects += [make_pod(index, nodes) for index in range(pods)]
    started = time.perf_counter()
    server = FakeApiServer(objects, bookmark_every=5.0, history=max(100_000, 2 * churn))
    seeded = time.perf_counter() - started
    del objects
    churn_from = server.resource_version
    rng = random.Random(seed)
    for tick in range(churn):  # logged changes, made as another client would
        pod = make_pod(rng.randrange(pods), nodes)
        pod["metadata"]["labels"]["tick"] = str(tick)
        server.put(pod)
    server.start()
    body = server.list_body(PODS, None)
    print(
        json.dumps(
            {
                "url": server.url,
                "churn_from": churn_from,
                "seed_seconds": round(seeded, 2),
                "pod_list_bytes": len(body),
                "node_list_bytes": len(server.list_body(NODES, None)),
            }
        ),
        flush=True,
    )
    del body
    sys.stdin.read()
    server.stop()


@contextmanager
def server_process(
    nodes: int, pods: int, churn: int = 0, seed: int = 0
) -> Iterator[dict[str, Any]]:
    """A ``--serve`` subprocess; yields its startup line (with ``kubeconfig`` added)."""
    command = [sys.executable, __file__, "--serve", "--nodes", str(nodes), "--pods", str(pods)]
    command += ["--churn", str(churn), "--seed", str(seed)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
    )
    assert process.stdout is not None and process.stdin is not None
    try:
        info = json.loads(process.stdout.readline())
        with tempfile.TemporaryDirectory() as folder:
            config = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": info["url"]}}],
                "users": [{"name": "fake", "user": {"token": "fake"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                "current-context": "fake",
            }
            info["kubeconfig"] = str(Path(folder) / "config")
            Path(info["kubeconfig"]).write_text(json.dumps(config))
            yield info
    finally:
        process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


# -- the watch at scale -----------------------------------------------------------------------


def rss_mib() -> float:
    """This process's resident memory, MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Timed:
    """A sink wrapper that notes when the change it waits for arrives."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.waiting: tuple[str, str, str] | None = None  # (namespace, name, tick)
        self.arrived = threading.Event()
        self.arrivals: dict[str, float] = {}  # tick -> perf_counter, for the burst
        self.count_ticks = False

    def replace(self, resource: Resource, items: list[Obj]) -> None:
        self.sink.replace(resource, items)

    def apply(self, resource: Resource, kind: str, obj: Obj) -> None:
        self.sink.apply(resource, kind, obj)
        tick = (obj["metadata"].get("labels") or {}).get("bench")
        if tick is None:
            return
        if self.count_ticks:
            self.arrivals[tick] = time.perf_counter()
        waiting = self.waiting
        if waiting is not None and waiting[2] == tick and waiting[1] == obj["metadata"]["name"]:
            self.arrived.set()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(
    nodes: int,
    pods: int,
    updates: int,
    burst: int,
    sink_factory: Callable[[], Sink],
    *,
    seed: int = 0,
    trace: bool = False,
    keep_managed_fields: bool = False,
    freeze: bool = False,
) -> dict[str, Any]:
    """Sync, paced updates and a burst (module docstring); returns the figures."""
    rng = random.Random(seed)
    result: dict[str, Any] = {"nodes": nodes, "pods": pods}
    with server_process(nodes, pods, seed=seed) as info:
        result["pod_list_mib"] = round(info["pod_list_bytes"] / 2**20, 1)
        result["node_list_mib"] = round(info["node_list_bytes"] / 2**20, 1)
        api = KubeApi.from_kubeconfig(info["kubeconfig"])
        gc.collect()
        before = rss_mib()
        if trace:
            tracemalloc.start()
        sink = Timed(sink_factory())
        if keep_managed_fields:
            watcher = Watcher(api, sink, WATCHED, transform=None)
        else:
            watcher = Watcher(api, sink, WATCHED)
        started = time.perf_counter()
        watcher.start()
        if not watcher.wait_synced(600):
            raise SystemExit("the watcher did not sync within 600 s")
        sync = time.perf_counter() - started
        gc.collect()
        if trace:
            current, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            result["traced_mib"] = round(current / 2**20, 1)
            result["traced_peak_mib"] = round(peak / 2**20, 1)
        else:
            result["sync_seconds"] = round(sync, 2)
        result["rss_growth_mib"] = round(rss_mib() - before, 1)
        # what one full collection of the cyclic collector costs with this state held
        # (it runs now and then on its own, in whatever thread allocates: a latency spike)
        seconds, _ = timed(gc.collect)
        result["gc_full_seconds"] = round(seconds, 3)
        if freeze:
            gc.freeze()  # the synced objects leave the collector's generations
            seconds, _ = timed(gc.collect)
            result["gc_full_after_freeze_seconds"] = round(seconds, 3)
        if isinstance(sink.sink, Store):
            result["held"] = {
                kind: len(objects) for kind, objects in sink.sink.objects.items() if objects
            }

        names = [pod_name(index) for index in range(pods)]
        latencies, round_trips = [], []
        for tick in range(updates):
            namespace, name = names[rng.randrange(len(names))]
            sink.arrived.clear()
            sink.waiting = (namespace, name, f"p{tick}")
            sent = time.perf_counter()
            api.patch(
                PODS, name, {"metadata": {"labels": {"bench": f"p{tick}"}}}, namespace=namespace
            )
            round_trips.append(time.perf_counter() - sent)
            if not sink.arrived.wait(30):
                raise SystemExit(f"update {tick} did not reach the sink within 30 s")
            latencies.append(time.perf_counter() - sent)
        if latencies:
            result["update_ms"] = {
                "p50": round(1000 * statistics.median(latencies), 2),
                "p99": round(1000 * percentile(latencies, 0.99), 2),
                "max": round(1000 * max(latencies), 2),
                "patch_round_trip_p50": round(1000 * statistics.median(round_trips), 2),
            }
        if burst:
            sink.count_ticks = True
            sink.waiting = None
            started = time.perf_counter()
            for tick in range(burst):
                namespace, name = names[rng.randrange(len(names))]
                api.patch(
                    PODS, name, {"metadata": {"labels": {"bench": f"b{tick}"}}}, namespace=namespace
                )
            sent = time.perf_counter()
            deadline = time.monotonic() + 60
            while f"b{burst - 1}" not in sink.arrivals and time.monotonic() < deadline:
                time.sleep(0.001)
            last = sink.arrivals.get(f"b{burst - 1}", float("nan"))
            result["burst"] = {
                "updates": burst,
                "sent_per_second": round(burst / (sent - started)),
                "received_per_second": round(burst / (last - started)),
            }
        result["health"] = {
            kind: {"errors": health.errors, "relists": health.relists, "stale": health.stale}
            for kind, health in watcher.health().items()
            if health.errors or health.relists or health.stale
        }
        watcher.stop()
    return result


# -- the clients compared ---------------------------------------------------------------------

CLIENTS = {
    "kubernetes": "import kubernetes.client, kubernetes.config",
    "lightkube": "import lightkube, lightkube.resources.core_v1",
    "kr8s": "import kr8s",
    "kubernetes_asyncio": "import kubernetes_asyncio.client, kubernetes_asyncio.config",
}


def import_seconds(statement: str) -> float | None:
    """Best of three fresh processes."""
    times = []
    for _ in range(3):
        code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if done.returncode != 0:
            return None
        times.append(float(done.stdout))
    return min(times)


#: gpuopt's own dependencies (pyproject.toml): what a client's install does not add
GPUOPT_DEPENDENCIES = (
    "numpy",
    "pydantic",
    "networkx",
    "rich",
    "matplotlib",
    "pyyaml",
    "ortools",
    "highspy",
)


def closure(*distributions: str) -> set[str]:
    """The names of ``distributions`` and everything they require, installed."""
    seen: set[str] = set()
    todo = list(distributions)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                todo.append(re.split(r"[\s;\[<>=!~(]", requirement, maxsplit=1)[0])
    return seen


def installed(distribution: str) -> tuple[int, float]:
    """(distributions, MiB on disk) that ``distribution`` adds to gpuopt's own."""
    names = closure(distribution) - closure(*GPUOPT_DEPENDENCIES)
    size = 0
    for name in names:
        for file in importlib.metadata.distribution(name).files or []:
            path = Path(str(file.locate()))
            if path.is_file():
                size += path.stat().st_size
    return len(names), size / 2**20


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = function()
    return time.perf_counter() - started, value


def compare_clients(pods: int, churn: int) -> dict[str, Any]:
    """The figures of docs/live.md's client table."""
    result: dict[str, Any] = {"import_seconds": {}, "installed": {}, "pods": pods, "churn": churn}
    for name, statement in CLIENTS.items():
        result["import_seconds"][name] = import_seconds(statement)
        count, mib = installed(name.replace("_", "-"))
        if count:
            result["installed"][name] = {"distributions": count, "mib": round(mib, 1)}
    with server_process(max(1, pods // 10), pods, churn=churn) as info:
        official = KubeApi.from_kubeconfig(info["kubeconfig"])
        whole = KubeApi.from_kubeconfig(info["kubeconfig"])
        whole.page_size = 0

        import lightkube
        from lightkube.config.kubeconfig import KubeConfig
        from lightkube.resources.core_v1 import Pod

        light = lightkube.Client(KubeConfig.from_file(info["kubeconfig"]), timeout=600)
        http = light._client._client  # lightkube's configured httpx client

        def lightkube_raw_list() -> list[Obj]:
            content = http.get("/api/v1/pods").content
            with gc_paused():  # as KubeApi.list parses
                items: list[Obj] = orjson.loads(content)["items"]
            return items

        # raw dicts: best of 3, the three ways taken in turn (the machine is shared)
        raw_lists: dict[str, Callable[[], Any]] = {
            "list_raw_kubernetes_pages_of_500": lambda: official.list(PODS)[0],
            "list_raw_kubernetes_whole": lambda: whole.list(PODS)[0],
            "list_raw_lightkube_whole": lightkube_raw_list,
        }
        best: dict[str, float] = {}
        for _ in range(3):
            for label, function in raw_lists.items():
                gc.collect()
                seconds, items = timed(function)
                assert len(items) == pods
                del items
                best[label] = min(best.get(label, float("inf")), seconds)
        result.update({label: round(seconds, 2) for label, seconds in best.items()})

        from kubernetes import client as kclient
        from kubernetes import config as kconfig

        configuration = kclient.Configuration()
        kconfig.load_kube_config(info["kubeconfig"], client_configuration=configuration)
        core = kclient.CoreV1Api(kclient.ApiClient(configuration))
        seconds, typed = timed(lambda: core.list_pod_for_all_namespaces(_request_timeout=600).items)
        assert len(typed) == pods
        del typed
        result["list_models_kubernetes"] = round(seconds, 2)

        seconds, models = timed(lambda: list(light.list(Pod, namespace="*", chunk_size=0)))
        assert len(models) == pods
        del models
        result["list_models_lightkube"] = round(seconds, 2)

        start = str(info["churn_from"])

        def official_watch() -> int:
            count = 0
            stream = official.watch(PODS, start, timeout_seconds=120)
            for kind, _ in stream:
                count += kind == "MODIFIED"
                if count == churn:
                    stream.close()
            return count

        def lightkube_raw_watch() -> int:
            count = 0
            params = {"watch": "1", "resourceVersion": start, "allowWatchBookmarks": "true"}
            with http.stream("GET", "/api/v1/pods", params=params) as response:
                for line in response.iter_lines():
                    count += orjson.loads(line)["type"] == "MODIFIED"
                    if count == churn:
                        break
            return count

        for label, function in (
            ("kubernetes", official_watch),
            ("lightkube_raw", lightkube_raw_watch),
        ):
            seconds, count = timed(function)
            result[f"watch_events_per_second_{label}"] = round(count / seconds)
    return result


def store_factory() -> Sink:
    return Store()


def sink_factory(spec: str) -> Callable[[], Sink]:
    """``store`` or ``module:callable`` (a factory of sinks, e.g. the cluster state's)."""
    if spec == "store":
        return store_factory
    module, _, attribute = spec.partition(":")
    factory: Callable[[], Sink] = getattr(importlib.import_module(module), attribute)
    return factory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--updates", type=int, default=300, help="paced updates (latency)")
    parser.add_argument("--burst", type=int, default=2000, help="back-to-back updates")
    parser.add_argument("--sink", default="store", help="'store' or module:factory")
    parser.add_argument("--tracemalloc", action="store_true", help="Python's own memory count")
    parser.add_argument(
        "--freeze", action="store_true", help="gc.freeze() after the sync (then the updates)"
    )
    parser.add_argument(
        "--keep-managed-fields", action="store_true", help="the sink gets metadata.managedFields"
    )
    parser.add_argument("--clients", action="store_true", help="compare the clients instead")
    parser.add_argument("--churn", type=int, default=0, help="logged changes (--clients, --serve)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.nodes, args.pods, args.churn, args.seed)
        return 0
    if args.clients:
        result = compare_clients(args.pods, args.churn or 20_000)
    else:
        result = measure(
            args.nodes,
            args.pods,
            args.updates,
            args.burst,
            sink_factory(args.sink),
            seed=args.seed,
            trace=args.tracemalloc,
            keep_managed_fields=args.keep_managed_fields,
            freeze=args.freeze,
        )
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
