"""The issue's burst, in process: 100 one-GPU pods on 16 free 8-GPU nodes (L5).

A small model of kube-scheduler drives the extender as the real one does:
for each pod, in turn, it keeps in its own cache what it bound (so it never
offers a node it filled), asks ``filter`` about the nodes that fit by that
cache (rotating the start of the list, as it does), then ``prioritize`` about
the nodes that passed, and binds the pod to a node of the highest score,
chosen at random among equals (kube-scheduler's ``selectHost``). The
bindings reach the watched state only after the whole burst, or ``lag`` pods
later.

100 pods of one GPU fill 12 nodes and half a thirteenth: 13 is the fewest.
Without assumed bindings the extender scores every node of a burst as it was
before the burst (all empty: all 0) and the scheduler's random choice spreads
the pods; with them (L5) each pod counts where it was scored best, so the next
pod is scored against it.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any, Literal

import pytest

from gpuopt.extender.wire import read_args
from gpuopt.live.api import NODES, PODS, Obj
from gpuopt.live.cluster import LiveCluster
from tests.live.test_cluster import node_obj, pod_obj

NODE_COUNT, GPUS, PODS_IN_BURST = 16, 8, 100
FEWEST = 13  # ceil(100 / 8)


class Clock:
    """A clock the test moves by hand (assume_ttl is measured on it)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def bound(pod: Obj, node: str) -> Obj:
    """The pod as the watch shows it once bound and started."""
    spec = {**pod["spec"], "nodeName": node}
    metadata = {**pod["metadata"], "resourceVersion": "2"}
    return {**pod, "metadata": metadata, "spec": spec, "status": {"phase": "Running"}}


def burst(
    mode: Literal["names", "nodes"],
    *,
    assume: bool,
    lag: int | None,
    seed: int,
    clock: Clock | None = None,
) -> tuple[Counter[str], LiveCluster]:
    """Run the burst; returns the pods bound per node, and the live cluster."""
    live = LiveCluster(
        rebuild_after=3600, assume_ttl=30.0 if assume else None, clock=clock or Clock()
    )
    nodes = [node_obj(f"n{i:02d}", GPUS) for i in range(NODE_COUNT)]
    by_name = {node["metadata"]["name"]: node for node in nodes}
    pods = [pod_obj(f"p{i:03d}") for i in range(PODS_IN_BURST)]
    live.replace(NODES, nodes)
    live.replace(PODS, pods)  # created: waiting
    extender = live.extender
    rng = random.Random(seed)
    used: Counter[str] = Counter()  # the scheduler's own cache
    bindings: list[tuple[Obj, str]] = []
    delivered = 0
    for cycle, pod in enumerate(pods):
        start = cycle % NODE_COUNT  # kube-scheduler rotates where it starts the list
        order = [nodes[(start + i) % NODE_COUNT]["metadata"]["name"] for i in range(NODE_COUNT)]
        feasible = [name for name in order if used[name] < GPUS]
        candidates: dict[str, Any]
        if mode == "names":
            candidates = {"NodeNames": feasible}
        else:
            candidates = {"Nodes": {"items": [by_name[name] for name in feasible]}}
        answer = extender.filter(read_args({"Pod": pod, **candidates}))
        if mode == "names":
            passed = answer["NodeNames"]
            candidates = {"NodeNames": passed}
        else:
            passed = [item["metadata"]["name"] for item in answer["Nodes"]["items"]]
            candidates = {"Nodes": {"items": [by_name[name] for name in passed]}}
        assert passed, f"pod {cycle}: no node passed"
        scores = json.loads(extender.priority_text(read_args({"Pod": pod, **candidates})))
        top = max(entry["Score"] for entry in scores)
        node = rng.choice([entry["Host"] for entry in scores if entry["Score"] == top])
        used[node] += 1
        bindings.append((pod, node))
        while lag is not None and len(bindings) - delivered > lag:
            live.apply(PODS, "MODIFIED", bound(*bindings[delivered]))
            delivered += 1
    for pod, node in bindings[delivered:]:
        live.apply(PODS, "MODIFIED", bound(pod, node))
    return used, live


@pytest.mark.parametrize("mode", ["names", "nodes"])
@pytest.mark.parametrize("lag", [None, 5])
def test_a_burst_packs_onto_the_fewest_nodes_with_assumed_bindings(
    mode: Literal["names", "nodes"], lag: int | None
) -> None:
    for seed in range(3):
        used, live = burst(mode, assume=True, lag=lag, seed=seed)
        assert sum(used.values()) == PODS_IN_BURST and max(used.values()) <= GPUS
        assert len(used) == FEWEST, (seed, sorted(used.values()))
        # the watch confirmed every binding: nothing assumed is left, and the state
        # counts each pod once, where it was bound
        assert live.extender.assumed == {}
        state = live.extender.state
        assert state is not None and len(state.cluster.tasks) == PODS_IN_BURST
        held = Counter(task.node for task in state.cluster.tasks)
        assert held == used


@pytest.mark.parametrize("mode", ["names", "nodes"])
def test_without_assumed_bindings_a_burst_spreads(mode: Literal["names", "nodes"]) -> None:
    # what the extender did before L5: it scores every node of the burst as empty
    spread = [len(burst(mode, assume=False, lag=None, seed=seed)[0]) for seed in range(3)]
    assert min(spread) > FEWEST, spread


def test_a_short_lag_without_assumed_bindings_is_not_enough() -> None:
    # bindings seen 5 pods late: each node's first pods still land at random
    spread = [len(burst("names", assume=False, lag=5, seed=seed)[0]) for seed in range(3)]
    assert max(spread) > FEWEST, spread


def test_an_assumption_the_watch_never_confirms_expires() -> None:
    clock = Clock()
    live = LiveCluster(rebuild_after=3600, assume_ttl=30.0, clock=clock)
    live.replace(NODES, [node_obj("a"), node_obj("b")])
    pod = pod_obj("p", gpus=2)
    live.apply(PODS, "ADDED", pod)
    extender = live.extender
    args = read_args({"Pod": pod, "NodeNames": ["a", "b"]})
    extender.filter(args)
    scores = json.loads(extender.priority_text(args))
    # both empty: a alone keeps the best score (the first among equals), and is assumed
    assert [(s["Host"], s["Score"]) for s in scores] == [("a", 1), ("b", 0)]
    assert extender.assumed == {"ml/p": "a"}
    state = extender.state
    assert state is not None and state.free_whole.tolist() == [6, 8]
    # a second prioritize, with b alone: the assumption moves
    extender.priority_text(read_args({"Pod": pod, "NodeNames": ["b"]}))
    assert extender.assumed == {"ml/p": "b"} and state.free_whole.tolist() == [8, 6]
    clock.now = 29.9
    assert extender.expire() == 0
    clock.now = 30.1  # nothing from the watch for assume_ttl seconds: dropped
    extender.filter(read_args({"Pod": pod_obj("q"), "NodeNames": ["a"]}))
    assert extender.assumed == {} and state.free_whole.tolist() == [8, 8]


def test_the_watch_settles_an_assumption() -> None:
    live = LiveCluster(rebuild_after=3600, assume_ttl=30.0, clock=Clock())
    live.replace(NODES, [node_obj("a"), node_obj("b")])
    extender = live.extender
    pods = {name: pod_obj(name, gpus=2) for name in ("same", "moved", "gone", "done")}
    for pod in pods.values():
        live.apply(PODS, "ADDED", pod)
        extender.priority_text(read_args({"Pod": pod, "NodeNames": ["a"]}))
    assert set(extender.assumed) == {"ml/same", "ml/moved", "ml/gone", "ml/done"}
    state = extender.state
    assert state is not None and state.free_whole.tolist() == [0, 8]
    live.apply(PODS, "MODIFIED", bound(pods["same"], "a"))  # confirmed: the watched task
    live.apply(PODS, "MODIFIED", bound(pods["moved"], "b"))  # bound elsewhere: moves there
    live.apply(PODS, "DELETED", pods["gone"])  # deleted: leaves
    finished = bound(pods["done"], "a")
    finished["status"] = {"phase": "Failed"}
    live.apply(PODS, "MODIFIED", finished)  # bound and already finished: leaves
    assert extender.assumed == {}
    assert sorted((t.id, t.node) for t in state.cluster.tasks) == [
        ("ml/moved", "b"),
        ("ml/same", "a"),
    ]
    assert state.free_whole.tolist() == [6, 6]
    # a pod still waiting (its status changed) keeps its assumption
    waiting = pod_obj("w", gpus=1)
    live.apply(PODS, "ADDED", waiting)
    extender.priority_text(read_args({"Pod": waiting, "NodeNames": ["a", "b"]}))
    assert extender.assumed == {"ml/w": "a"}
    again = {**waiting, "metadata": {**waiting["metadata"], "resourceVersion": "5"}}
    live.apply(PODS, "MODIFIED", again)
    assert extender.assumed == {"ml/w": "a"}


def test_a_full_read_keeps_what_is_assumed() -> None:
    live = LiveCluster(rebuild_after=0, assume_ttl=30.0, clock=Clock())
    live.replace(NODES, [node_obj("a")])
    pod = pod_obj("p", gpus=3)
    live.apply(PODS, "ADDED", pod)
    live.extender.priority_text(read_args({"Pod": pod, "NodeNames": ["a"]}))
    live.replace(PODS, [pod])  # nothing changed: no read
    live.apply(PODS, "ADDED", pod_obj("q", gpus=1))
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": "ml"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "maxUnavailable": 1},
    }
    rebuilds = live.rebuilds
    live.apply(NODES, "MODIFIED", node_obj("a", version=2))
    from gpuopt.live.api import PDBS

    live.apply(PDBS, "ADDED", budget)  # a full read, at once (rebuild_after=0)
    assert live.rebuilds == rebuilds + 1
    state = live.extender.state
    assert state is not None and state.free_whole.tolist() == [5]
    assert live.extender.assumed == {"ml/p": "a"}


def test_full_mode_answers_on_the_watched_state_and_reads_a_node_it_has_not_seen() -> None:
    live = LiveCluster(rebuild_after=3600, assume_ttl=30.0, clock=Clock())
    live.replace(NODES, [node_obj("a"), node_obj("b")])
    live.apply(PODS, "ADDED", pod_obj("p", "a", gpus=6))
    extender = live.extender
    state = extender.state
    # the scheduler's copy of b is a version ahead of the watch: the watched state answers
    ahead = node_obj("b", version=9, labels={"pool": "new"})
    args = read_args({"Pod": pod_obj("q", gpus=4), "Nodes": {"items": [node_obj("a"), ahead]}})
    answer = extender.filter(args)
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["b"]
    assert "C3" in answer["FailedNodes"]["a"]  # the watched pod holds 6 of a's 8 GPUs
    assert extender.state is state and extender._merged is None  # no overlay built
    # a node the watch has not seen: read from the request, laid over the state (E1, L6)
    joined = node_obj("c")
    args = read_args({"Pod": pod_obj("q", gpus=4), "Nodes": {"items": [node_obj("a"), joined]}})
    assert [n["metadata"]["name"] for n in extender.filter(args)["Nodes"]["items"]] == ["c"]
