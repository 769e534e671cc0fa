"""The watched cluster state at scale (issue 34, "Watch at scale").

A cluster of ``--nodes`` 8-GPU nodes (default 5,000) and ``--pods`` pods
(default 50,000: one to four GPUs each, bound round the nodes, 10 % waiting)
is fed to :class:`gpuopt.live.cluster.LiveCluster` directly through its sink,
as the watch feeds it (no API server): one ``replace`` per kind, in the
watch's order. Measured on this machine:

1. **build**: the lists fed to the sink until the extender's state serves
   them (a full read of every object, and the state's arrays);
2. **memory**: tracemalloc's peak during the build and what the live
   cluster holds after it (traced, Python objects: the objects as the server
   wrote them, the cluster model, the state), and the process's RSS;
3. **update latency** per event, applied in place (median and p99 over
   ``--events`` of each): a new pod bound to a node, a bound pod deleted, a
   node changed (a label: the node is read again with its pods).

Usage::

    python benchmarks/live_scale.py
    python benchmarks/live_scale.py --nodes 500 --pods 5000 --events 200
"""

from __future__ import annotations

import argparse
import copy
import gc
import math
import random
import resource
import sys
import time
import tracemalloc
from typing import Any

GPU = "nvidia.com/gpu"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    position = share * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def node_obj(name: str, version: int, rack: int) -> dict[str, Any]:
    """A v1.Node as the API server writes it: 8 GPUs, 128 CPUs, 1 TiB, a rack label."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": str(version),
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "example.com/rack": f"rack-{rack}",
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "128", "memory": "1Ti", GPU: "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_obj(name: str, node: str | None, gpus: int, version: int) -> dict[str, Any]:
    """A v1.Pod as the API server writes it (a Job's pod, with the admission defaults)."""
    spec: dict[str, Any] = {
        "priority": 100,
        "containers": [
            {
                "name": "main",
                "resources": {"requests": {"cpu": "8", "memory": "64Gi", GPU: str(gpus)}},
            }
        ],
        "tolerations": [
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        ],
    }
    if not gpus:
        del spec["containers"][0]["resources"]["requests"][GPU]
        spec["containers"][0]["resources"]["requests"].update(cpu="2", memory="8Gi")
    status: dict[str, Any] = {"phase": "Pending"}
    if node is not None:
        spec["nodeName"] = node
        status = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            "resourceVersion": str(version),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": f"job-{sum(map(ord, name)) % 50}"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "j",
                    "uid": "j",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def objects(nodes: int, pods: int, seed: int) -> tuple[list[Any], list[Any]]:
    """The nodes and pods: a third of the pods ask for 1, 2 or 4 GPUs, the others for CPUs
    only; each is bound to the next node it fits (round the nodes), 10 % wait."""
    rng = random.Random(seed)
    node_list = [node_obj(f"node-{i:05d}", 1, i // 32) for i in range(nodes)]
    free = [8] * nodes
    pod_list = []
    cursor = 0
    for i in range(pods):
        gpus = rng.choice([1, 1, 2, 4]) if rng.random() < 0.35 else 0
        node = None
        if rng.random() > 0.1:
            for _ in range(nodes):
                if free[cursor] >= gpus:
                    free[cursor] -= gpus
                    node = node_list[cursor]["metadata"]["name"]
                    break
                cursor = (cursor + 1) % nodes
        pod_list.append(pod_obj(f"pod-{i:06d}", node, gpus, 1))
    return node_list, pod_list


def feed(node_list: list[Any], pod_list: list[Any]) -> Any:
    """A live cluster fed the lists as the watch feeds them: one ``replace`` per kind."""
    from gpuopt.live.api import NODES, PODS, WATCHED
    from gpuopt.live.cluster import LiveCluster

    live = LiveCluster(rebuild_after=3600)
    live.hold()  # as gpuopt serve does: the first lists read once, together
    for kind in WATCHED:
        live.replace(kind, {NODES.kind: node_list, PODS.kind: pod_list}.get(kind.kind, []))
    live.flush()
    return live


def rss_mib() -> float:
    """The process's peak resident set size, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--events", type=int, default=500, help="events of each kind timed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from gpuopt.live.api import NODES, PODS

    node_list, pod_list = objects(args.nodes, args.pods, args.seed)
    bound = sum(1 for pod in pod_list if pod["spec"].get("nodeName"))
    print(f"{args.nodes:,} nodes, {args.pods:,} pods ({bound:,} bound)", file=sys.stderr)
    gc.collect()
    rss_before = rss_mib()
    started = time.perf_counter()
    live = feed(node_list, pod_list)
    build = time.perf_counter() - started
    rss_built = rss_mib()
    # memory: a second build, traced (tracemalloc slows it down: not the one timed)
    del live
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    live = feed(node_list, pod_list)
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    state = live.extender.state
    assert state is not None and len(state.cluster.tasks) == bound

    rebuilds = live.rebuilds
    rng = random.Random(args.seed + 1)
    names = [node["metadata"]["name"] for node in node_list]
    latency: dict[str, list[float]] = {"pod bound": [], "pod deleted": [], "node changed": []}
    added = []
    for i in range(args.events):
        pod = pod_obj(f"new-{i:05d}", rng.choice(names), 1, 2)
        clock = time.perf_counter()
        live.apply(PODS, "ADDED", pod)
        latency["pod bound"].append(time.perf_counter() - clock)
        added.append(pod)
    victims = rng.sample([p for p in pod_list if p["spec"].get("nodeName")], args.events)
    for pod in victims:
        clock = time.perf_counter()
        live.apply(PODS, "DELETED", pod)
        latency["pod deleted"].append(time.perf_counter() - clock)
    for i in range(args.events):
        node = copy.deepcopy(node_list[rng.randrange(len(node_list))])
        node["metadata"]["resourceVersion"] = str(10 + i)
        node["metadata"]["labels"]["example.com/state"] = f"s{i}"
        clock = time.perf_counter()
        live.apply(NODES, "MODIFIED", node)
        latency["node changed"].append(time.perf_counter() - clock)
    assert live.rebuilds == rebuilds, live.rebuilds  # every event in place

    print("| measure | value |")
    print("| --- | --- |")
    print(f"| nodes, pods (bound) | {args.nodes:,}, {args.pods:,} ({bound:,}) |")
    print(f"| build (lists fed to the sink, full read, state) | {build:.2f} s |")
    print(f"| tracemalloc peak during the build | {(peak - base) / 2**20:,.0f} MiB |")
    print(f"| held after the build (traced) | {(held - base) / 2**20:,.0f} MiB |")
    print(
        f"| RSS peak after the first build (before it: {rss_before:,.0f} MiB, the objects "
        f"made) | {rss_built:,.0f} MiB |"
    )
    for name, seconds in latency.items():
        ms = [s * 1000 for s in seconds]
        print(
            f"| {name}: median / p99 over {len(ms)} | "
            f"{percentile(ms, 0.5):.2f} / {percentile(ms, 0.99):.2f} ms |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
