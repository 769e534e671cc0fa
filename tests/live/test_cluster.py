"""gpuopt.live.cluster: the watched objects kept as the extender's state, in place (L4-L6).

The reference everywhere is a fresh read of the same objects by
``read_kubernetes``: after any sequence of events the state must hold the
same nodes, the same tasks and the same free GPUs per node as a state built
from that read.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import numpy as np
import pytest

from gpuopt.extender.engine import Extender
from gpuopt.extender.state import State
from gpuopt.extender.wire import read_args
from gpuopt.live.api import NODES, PDBS, PODS, PRIORITY_CLASSES, Obj
from gpuopt.live.cluster import LiveCluster, bound_node, for_watch, pod_id, trimmed, wide
from gpuopt.readers.kubectl import read_kubernetes

GPU = "nvidia.com/gpu"


def node_obj(
    name: str,
    gpus: int = 8,
    *,
    version: int = 1,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    cordoned: bool = False,
    ready: bool = True,
    gpu_memory: int | None = None,
) -> Obj:
    """A v1.Node as the API server writes it."""
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if gpu_memory is not None:
        all_labels["nvidia.com/gpu.memory"] = str(gpu_memory)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if cordoned:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": str(version), "labels": all_labels},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", GPU: str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod_obj(
    name: str,
    node: str | None = None,
    gpus: int = 1,
    *,
    namespace: str = "ml",
    version: int = 1,
    phase: str | None = None,
    labels: dict[str, str] | None = None,
    selector: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority: int = 100,
) -> Obj:
    """A v1.Pod as the API server writes it (bound when ``node`` is given)."""
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "2", GPU: str(gpus)}}}],
        "tolerations": [  # what DefaultTolerationSeconds adds to every pod
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
        ],
    }
    if node is not None:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = selector
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "resourceVersion": str(version),
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j", "controller": True}
        ],
    }
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    status: dict[str, Any] = {"phase": phase or ("Running" if node else "Pending")}
    if node is not None:
        status["startTime"] = "2026-01-01T00:01:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def fresh(live: LiveCluster) -> tuple[Any, State]:
    """A fresh read of the live cluster's objects, and the state built from it."""
    items = [obj for objects in live.objects.values() for obj in objects.values()]
    cluster, _ = read_kubernetes({"kind": "List", "items": items})
    return cluster, State(cluster, 0, "fresh")


def assert_same(live: LiveCluster) -> None:
    """The live state holds what a fresh read of its objects holds (L4)."""
    cluster, reference = fresh(live)
    state = live.extender.state
    assert state is not None
    assert {n.id: n for n in state.cluster.nodes} == {n.id: n for n in cluster.nodes}
    assert {t.id: t for t in state.cluster.tasks} == {t.id: t for t in cluster.tasks}
    for name in ("free_whole", "cpus_free", "gpus", "best_share"):
        mine = dict(zip(state.names, getattr(state, name).tolist(), strict=True))
        theirs = dict(zip(reference.names, getattr(reference, name).tolist(), strict=True))
        assert mine == theirs, name
    # the per-node lists agree with the node of each task, and the index with the tasks
    for pos, tasks in enumerate(state.on_node):
        assert all(state.node_pos[t.node] == pos for t in tasks)
    assert sorted(state.task_node.tolist()) == sorted(
        state.node_pos[t.node] for t in state.cluster.tasks
    )
    assert [state.node_pos[t.node] for t in state.cluster.tasks] == state.task_node.tolist()
    assert {p.id for p in live.waiting()} == {p.id for p in cluster.pending}
    snap = live.snapshot()
    assert {t.id: t for t in snap.tasks} == {t.id: t for t in cluster.tasks}


def test_a_node_and_its_pods_are_read_in_place() -> None:
    live = LiveCluster(rebuild_after=3600)
    assert live.rebuilds == 1  # the empty start
    live.apply(NODES, "ADDED", node_obj("a"))
    live.apply(NODES, "ADDED", node_obj("b", gpus=4))
    live.apply(PODS, "ADDED", pod_obj("w"))  # waiting
    assert [p.id for p in live.waiting()] == ["ml/w"]
    live.apply(PODS, "MODIFIED", pod_obj("w", "b", gpus=1, version=2))  # bound
    live.apply(PODS, "ADDED", pod_obj("x", "a", gpus=3))
    state = live.extender.state
    assert state is not None and state.names == ["a", "b"]
    assert state.free_whole.tolist() == [5, 3]  # a: 8 - 3; b: 4 - 1
    assert live.waiting() == []
    assert_same(live)
    live.apply(PODS, "MODIFIED", pod_obj("x", "a", gpus=3, version=2, phase="Succeeded"))
    assert state.free_whole.tolist() == [8, 3]
    live.apply(PODS, "DELETED", pod_obj("w", "b"))
    assert state.free_whole.tolist() == [8, 4]
    assert live.rebuilds == 1 and live.extender.state is state  # every change in place
    assert_same(live)


def test_a_node_deleted_leaves_with_its_pods_and_comes_back() -> None:
    live = LiveCluster(rebuild_after=3600)
    for name in "abc":
        live.apply(NODES, "ADDED", node_obj(name))
    live.apply(PODS, "ADDED", pod_obj("p", "b", gpus=2))
    live.apply(NODES, "DELETED", node_obj("b"))
    state = live.extender.state
    assert state is not None and state.names == ["a", "c"] and state.cluster.tasks == []
    assert_same(live)
    live.apply(NODES, "ADDED", node_obj("b", version=2))  # its pod object is still there
    assert live.extender.state is not None
    assert live.extender.state.names == ["a", "c", "b"]
    assert [t.id for t in live.extender.state.cluster.tasks] == ["ml/p"]
    assert_same(live)


def test_a_relist_turns_into_the_differences() -> None:
    live = LiveCluster(rebuild_after=3600)
    live.replace(NODES, [node_obj("a"), node_obj("b")])
    live.replace(PODS, [pod_obj("p", "a"), pod_obj("q", "b")])
    rebuilds = live.rebuilds
    state = live.extender.state
    # q gone, p changed, r new: three events, in place
    live.replace(PODS, [pod_obj("p", "a", gpus=2, version=2), pod_obj("r", "b", gpus=4)])
    assert live.rebuilds == rebuilds and live.extender.state is state
    assert_same(live)


def test_other_kinds_are_read_again_after_rebuild_after() -> None:
    live = LiveCluster(rebuild_after=3600)
    live.apply(NODES, "ADDED", node_obj("a"))
    bound = pod_obj("p", "a")
    del bound["spec"]["priority"]
    bound["spec"]["priorityClassName"] = "high"
    live.apply(PODS, "ADDED", bound)
    state = live.extender.state
    assert state is not None and state.by_id["ml/p"].priority == 0  # the class is not known
    high = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 5000,
    }
    live.apply(PRIORITY_CLASSES, "ADDED", high)
    assert live.extender.state is state  # not yet: due within rebuild_after
    assert live.flush() and not live.flush()
    state = live.extender.state
    assert state is not None and state.by_id["ml/p"].priority == 5000
    assert_same(live)
    # a later pod is read with the class known, in place
    other = copy.deepcopy(bound)
    other["metadata"]["name"] = "q"
    live.apply(PODS, "ADDED", other)
    assert live.extender.state is state and state.by_id["ml/q"].priority == 5000
    assert_same(live)


def test_rebuild_after_zero_reads_at_once_and_a_timer_reads_later() -> None:
    live = LiveCluster(rebuild_after=0)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": "ml"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "maxUnavailable": 1},
    }
    live.apply(PDBS, "ADDED", budget)
    assert live.rebuilds == 2
    assert live.extender.state is not None
    assert [b.id for b in live.extender.state.cluster.budgets] == ["ml/b"]
    timed = LiveCluster(rebuild_after=0.05)
    timed.apply(PDBS, "ADDED", budget)
    for _ in range(200):
        if timed.rebuilds == 2:
            break
        import time

        time.sleep(0.01)
    assert timed.rebuilds == 2
    timed.close()


def test_wide_pods_make_a_full_read_due() -> None:
    spread = pod_obj("s", "a")
    spread["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "x"}}}
    ]
    assert wide(spread, None)
    assert not wide(pod_obj("p", "a"), None)
    live = LiveCluster(rebuild_after=3600)
    live.apply(NODES, "ADDED", node_obj("a"))
    live.apply(PODS, "ADDED", pod_obj("t", "a", labels={"app": "x"}))
    live.apply(PODS, "ADDED", spread)
    assert live._due is not None  # the other pod is pinned by it: one node cannot tell
    live.flush()
    assert_same(live)
    live.close()


def test_identity_helpers() -> None:
    assert pod_id({"metadata": {"name": "p"}}) == "default/p"
    assert bound_node(pod_obj("p", "a")) == "a" and bound_node(pod_obj("p")) is None


#: event -> its weight in random_events
EVENT_KINDS = {
    "node-add": 2,
    "node-change": 3,
    "node-delete": 0.5,
    "pod-add": 6,
    "pod-bind": 2,
    "pod-change": 1.5,
    "pod-finish": 1,
    "pod-delete": 1,
}


def random_events(seed: int, live: LiveCluster, steps: int = 240, check: bool = False) -> None:
    """Random node and pod events applied to ``live`` (pods bound wherever: nodes get
    over-committed, pods misplaced, legacy groups doubled, as a fresh read must settle);
    with ``check``, the state is held to a fresh read every 20 events."""
    rng = random.Random(seed)
    nodes: dict[str, Obj] = {}
    pods: dict[str, Obj] = {}
    version = 10
    for step in range(steps):
        if check and step % 20 == 19:
            assert_same(live)
        version += 1
        kind = rng.choices(list(EVENT_KINDS), list(EVENT_KINDS.values()))[0]
        if kind == "node-add" or not nodes:
            name = f"n{rng.randrange(12)}"
            labels = {"pool": rng.choice(["x", "y"])}
            if rng.random() < 0.3:
                labels["gpuopt.io/asw"] = rng.choice(["s1", "s2"])
            obj = node_obj(
                name,
                rng.choice([2, 4, 8]),
                version=version,
                labels=labels,
                cordoned=rng.random() < 0.1,
                ready=rng.random() > 0.1,
                gpu_memory=rng.choice([None, 81920]),
            )
            nodes[name] = obj
            live.apply(NODES, "MODIFIED" if name in live.objects["Node"] else "ADDED", obj)
        elif kind == "node-change":
            name = rng.choice(sorted(nodes))
            obj = copy.deepcopy(nodes[name])
            obj["metadata"]["resourceVersion"] = str(version)
            change = rng.random()
            if change < 0.3:
                obj["metadata"]["labels"]["pool"] = rng.choice(["x", "y"])
            elif change < 0.5:
                obj["spec"]["unschedulable"] = not obj["spec"].get("unschedulable", False)
            elif change < 0.7:
                obj["status"]["allocatable"][GPU] = str(rng.choice([1, 2, 4, 8]))
            elif change < 0.8:
                obj["spec"]["taints"] = [{"key": "gpu", "effect": "NoSchedule"}]
            nodes[name] = obj
            live.apply(NODES, "MODIFIED", obj)
        elif kind == "node-delete":
            name = rng.choice(sorted(nodes))
            live.apply(NODES, "DELETED", nodes.pop(name))
        elif kind == "pod-add":
            name = f"p{step}"
            selector = {"pool": rng.choice(["x", "y"])} if rng.random() < 0.3 else None
            labels = {"gpuopt.io/anti-affinity": "g"} if rng.random() < 0.15 else None
            annotations = None
            gpus = rng.choice([1, 1, 2, 4])
            if rng.random() < 0.15:
                annotations, gpus = {"gpu-fraction": "0.5"}, 0
            node = rng.choice(sorted(nodes)) if rng.random() < 0.5 else None
            obj = pod_obj(
                name,
                node,
                gpus,
                namespace=rng.choice(["ml", "team"]),
                version=version,
                labels=labels,
                selector=selector,
                annotations=annotations,
            )
            pods[name] = obj
            live.apply(PODS, "ADDED", obj)
        elif not pods:
            continue
        else:
            name = rng.choice(sorted(pods))
            obj = copy.deepcopy(pods[name])
            obj["metadata"]["resourceVersion"] = str(version)
            if kind == "pod-bind" and bound_node(obj) is None and nodes:
                obj["spec"]["nodeName"] = rng.choice(sorted(nodes))
                obj["status"]["phase"] = "Running"
            elif kind == "pod-change":
                obj["metadata"]["labels"] = {"app": rng.choice(["a", "b"])}
                if rng.random() < 0.3:
                    obj["status"]["phase"] = "Pending"  # bound, not started
            elif kind == "pod-finish":
                obj["status"]["phase"] = rng.choice(["Succeeded", "Failed"])
            elif kind == "pod-delete":
                live.apply(PODS, "DELETED", pods.pop(name))
                continue
            pods[name] = obj
            live.apply(PODS, "MODIFIED", obj)


@pytest.mark.parametrize("seed", range(12))
def test_random_events_leave_the_state_a_fresh_read_gives(seed: int) -> None:
    live = LiveCluster(rebuild_after=3600)
    random_events(seed, live, check=True)
    # only nodes and pods, none wide: everything was done in place (malformed objects,
    # over-committed nodes and legacy groups included)
    assert live.rebuilds == 1
    assert live.in_place > 100
    assert_same(live)


@pytest.mark.parametrize("seed", range(3))
def test_the_state_answers_as_a_fresh_read_does(seed: int) -> None:
    # the same filter answers from the live state and from an extender on a fresh read
    live = LiveCluster(rebuild_after=3600)
    random_events(100 + seed, live)
    cluster, _ = fresh(live)
    reference = Extender(cluster)
    state = live.extender.state
    assert state is not None
    args = read_args({"Pod": pod_obj("ask", gpus=2), "NodeNames": list(state.names)})
    assert live.extender.filter(args) == reference.filter(args)


def test_the_free_gpus_follow_every_event() -> None:
    # a hand-checked sequence: 8 GPUs, 3 taken, one finished, the node shrinks to 4
    live = LiveCluster(rebuild_after=3600)
    live.apply(NODES, "ADDED", node_obj("a", 8))
    for name, gpus in (("p", 1), ("q", 2)):
        live.apply(PODS, "ADDED", pod_obj(name, "a", gpus))
    state = live.extender.state
    assert state is not None
    assert int(state.free_whole[0]) == 5
    live.apply(PODS, "MODIFIED", pod_obj("q", "a", 2, version=2, phase="Failed"))
    assert int(state.free_whole[0]) == 7
    live.apply(NODES, "MODIFIED", node_obj("a", 4, version=2))
    assert int(state.free_whole[0]) == 3 and int(state.gpus[0]) == 4
    # 4 GPUs left, and pods that hold 5: locked, as the reader locks an over-committed node
    live.apply(PODS, "ADDED", pod_obj("r", "a", 4))
    assert state.cluster.nodes[0].locked
    assert_same(live)
    assert np.array_equal(state.gpus, np.array([4]))


def test_a_pod_that_does_not_read_locks_its_node_as_a_fresh_read_does() -> None:
    live = LiveCluster(rebuild_after=3600)
    live.apply(NODES, "ADDED", node_obj("a"))
    broken = pod_obj("b", "a")
    broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    live.apply(PODS, "ADDED", broken)
    state = live.extender.state
    assert state is not None and state.cluster.nodes[0].locked  # what it holds is unknown
    assert_same(live)
    live.apply(PODS, "DELETED", broken)
    assert not state.cluster.nodes[0].locked
    assert_same(live)
    live.close()


def test_a_node_relist_is_applied_in_place_and_the_snapshot_has_no_assumption() -> None:
    live = LiveCluster(rebuild_after=3600, assume_ttl=30.0)
    live.replace(NODES, [node_obj("a"), node_obj("b")])
    waiting = pod_obj("w", gpus=2)
    live.replace(PODS, [pod_obj("p", "a"), waiting])
    state = live.extender.state
    live.replace(NODES, [node_obj("a", 4, version=2), node_obj("c")])  # b gone, c new
    assert live.extender.state is not state  # a node gone: positions move, built again
    state = live.extender.state
    assert state is not None and state.names == ["a", "c"]
    assert state.gpus.tolist() == [4, 8]
    assert_same(live)
    live.extender.priority_text(read_args({"Pod": waiting, "NodeNames": ["a", "c"]}))
    assert live.extender.assumed == {"ml/w": "a"} and len(state.cluster.tasks) == 2
    snap = live.snapshot()  # what the watch says: the assumed pod still waits
    assert [t.id for t in snap.tasks] == ["ml/p"]
    assert [p.id for p in snap.pending] == ["ml/w"] == [p.id for p in live.waiting()]


def test_held_lists_are_read_once_when_flushed() -> None:
    live = LiveCluster(rebuild_after=3600)
    live.hold()
    live.replace(NODES, [node_obj("a"), node_obj("b")])
    live.replace(PODS, [pod_obj("p", "a"), pod_obj("q", "b")])
    live.apply(PODS, "ADDED", pod_obj("r", "a", gpus=2))
    live.apply(PODS, "DELETED", pod_obj("q", "b"))
    assert live.rebuilds == 1  # nothing read yet: the empty start only
    state = live.extender.state
    assert state is not None and state.names == []
    assert live.flush() and live.rebuilds == 2
    assert_same(live)
    live.apply(PODS, "ADDED", pod_obj("s", "b"))  # after the flush: in place again
    assert live.rebuilds == 2
    assert_same(live)


def test_objects_are_held_without_what_no_reader_reads() -> None:
    heavy = pod_obj("p", "a")
    heavy["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    heavy["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        "gpu-fraction": "0.5",
    }
    light = trimmed(heavy)
    assert "managedFields" not in light["metadata"]
    assert light["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    assert "managedFields" in heavy["metadata"]  # the object given is not changed
    plain = pod_obj("q", "a")
    assert trimmed(plain) is plain
    live = LiveCluster(rebuild_after=3600)
    live.apply(NODES, "ADDED", node_obj("a"))
    live.apply(PODS, "ADDED", heavy)
    assert "managedFields" not in live.objects["Pod"]["ml/p"]["metadata"]
    # read as the whole object reads: the same task
    cluster, _ = read_kubernetes({"kind": "List", "items": [node_obj("a"), heavy]})
    state = live.extender.state
    assert state is not None and state.cluster.tasks == cluster.tasks


def test_a_cluster_for_a_watch_reads_the_first_sync_once() -> None:
    from gpuopt.live.api import WATCHED

    live = for_watch(rebuild_after=3600)
    for resource in WATCHED:
        assert live.rebuilds == 1  # not yet: a kind is still to be listed
        items = {"Node": [node_obj("a")], "Pod": [pod_obj("p", "a")]}.get(resource.kind, [])
        live.replace(resource, items)
    assert live.rebuilds == 2  # once, with everything
    assert_same(live)
    live.apply(PODS, "ADDED", pod_obj("q", "a"))
    assert live.rebuilds == 2
    assert_same(live)


def test_a_status_the_reader_does_not_read_changes_nothing() -> None:
    live = LiveCluster(rebuild_after=3600)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": "ml", "resourceVersion": "1"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "maxUnavailable": 1},
        "status": {"disruptionsAllowed": 1},
    }
    live.apply(PDBS, "ADDED", budget)
    assert live.flush()
    # the disruption controller's update: status and version only
    updated = copy.deepcopy(budget)
    updated["metadata"]["resourceVersion"] = "2"
    updated["status"] = {"disruptionsAllowed": 0}
    live.apply(PDBS, "MODIFIED", updated)
    live.replace(PDBS, [updated])
    assert not live.flush()
    assert live.objects["PodDisruptionBudget"]["ml/b"] is updated  # kept, all the same
    changed = copy.deepcopy(updated)
    changed["spec"]["maxUnavailable"] = 2
    live.apply(PDBS, "MODIFIED", changed)
    assert live.flush()
    # a node's heartbeat: read the same, nothing done to the state
    live.apply(NODES, "ADDED", node_obj("a"))
    live.apply(PODS, "ADDED", pod_obj("p", "a"))
    state = live.extender.state
    assert state is not None
    changes = state.changes
    beat = node_obj("a", version=7)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:05:00Z"
    live.apply(NODES, "MODIFIED", beat)
    assert state.changes == changes and state.node_versions["a"] == "7"
    assert_same(live)


def test_every_gang_kind_is_watched_and_kept_apart() -> None:
    """Review finding (stop 49, left): the watched state kept objects by kind, and PodGroup
    is the kind of three groups, so it watched scheduling.x-k8s.io's alone and lost Volcano
    gangs (their minMember, their members kept together)."""
    from pathlib import Path

    import yaml

    from gpuopt.live.api import POD_GROUPS, WATCHED

    fixture = Path(__file__).parents[1] / "readers" / "fixtures" / "gangs" / "volcano.yaml"
    items = yaml.safe_load(fixture.read_text())["items"]
    by_version = {(r.api_version, r.kind): r for r in WATCHED}
    volcano = [i for i in items if i["apiVersion"].startswith("scheduling.volcano.sh")]
    assert volcano and all((i["apiVersion"], i["kind"]) in by_version for i in items
                           if i["kind"] == "PodGroup")  # fmt: skip
    live = for_watch(rebuild_after=3600)
    for resource in WATCHED:
        kind = (resource.api_version, resource.kind)
        live.replace(resource, [i for i in items if (i["apiVersion"], i["kind"]) == kind])
    # the gangs as a fresh read of the same objects finds them (L4)
    cluster, _ = read_kubernetes({"kind": "List", "items": items})
    snapshot = live.snapshot()
    assert snapshot.gangs == cluster.gangs and snapshot.gangs
    # (sweep-5f1c's minMember, 2; eval-9a2e has no pod, running or waiting: not a gang)
    assert {gang.id: gang.min_member for gang in snapshot.gangs} == {"research/sweep-5f1c": 2}
    # a scheduler-plugins PodGroup of the same namespace and name as a Volcano one: both
    # kept, each under its kind's name
    twin = copy.deepcopy(volcano[0])
    twin["apiVersion"] = POD_GROUPS.api_version
    live.replace(POD_GROUPS, [twin])
    kept = {name: len(objects) for name, objects in live.objects.items() if objects}
    assert kept["PodGroup"] == 1 and kept["PodGroup.scheduling.volcano.sh"] == len(volcano)


def test_a_nomination_to_a_node_that_is_gone_is_dropped() -> None:
    """Review s50 F6 (K10): a waiting pod read while its nominated node existed kept the
    nomination after the node was deleted, and snapshot() refused the cluster; a fresh
    read drops it."""
    live = LiveCluster(rebuild_after=3600)
    live.apply(NODES, "ADDED", node_obj("a"))
    live.apply(NODES, "ADDED", node_obj("b"))
    waiting = pod_obj("w")
    waiting["status"] = {**waiting.get("status", {}), "nominatedNodeName": "b"}
    live.apply(PODS, "ADDED", waiting)
    assert [p.nominated_node for p in live.snapshot().pending] == ["b"]
    live.apply(NODES, "DELETED", node_obj("b"))
    assert [p.nominated_node for p in live.snapshot().pending] == [None]
    cluster, _ = read_kubernetes({"kind": "List", "items": [node_obj("a"), waiting]})
    assert [p.nominated_node for p in cluster.pending] == [None]


def test_a_pod_count_limit_turns_on_as_a_fresh_read_decides() -> None:
    """K12 in the watched state: node a may hold 2 pods. With one pod and nothing waiting,
    no plan can reach the limit (left out); pods arriving make it reachable, and the state
    reads everything again within rebuild_after, as a fresh read would have it (L4)."""
    live = LiveCluster(rebuild_after=0)
    small = node_obj("a")
    small["status"]["allocatable"]["pods"] = "2"
    live.apply(NODES, "ADDED", small)
    live.apply(NODES, "ADDED", node_obj("b"))
    live.apply(PODS, "ADDED", pod_obj("x", "a"))
    assert not any("pods" in node.resources for node in live.snapshot().nodes)
    assert_same(live)
    for name in ("w1", "w2", "y"):  # two waiting, one more on b: a could be reached
        live.apply(PODS, "ADDED", pod_obj(name, "b" if name == "y" else None))
        assert_same(live)
    snap = live.snapshot()
    assert {node.id: node.resources.get("pods") for node in snap.nodes} == {
        "a": 2,
        "b": 110,
    }
    assert all(pod.resources.get("pods") == 1 for pod in live.waiting())
