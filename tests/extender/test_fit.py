"""gpuopt.extender.fit: the filter's verdict per node (E2-E4), on arrays and node by node."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gpuopt.cluster.model import Cluster
from gpuopt.extender.fit import fit, refusal_after
from gpuopt.extender.pod import Ask, read_pod
from gpuopt.extender.state import State
from tests.extender.conftest import cluster, node, pod, task


def judged(snapshot: Cluster, ask: Ask) -> tuple[State, dict[str, tuple[str, bool] | None]]:
    state = State(snapshot, 0, "test")
    verdict = fit(state, ask, np.arange(len(snapshot.nodes)))
    found = {state.names[pos]: verdict.reasons.get(pos) for pos in verdict.positions.tolist()}
    assert [found[name] is None for name in state.names] == verdict.passed.tolist()
    return state, found


def four_nodes() -> Cluster:
    return cluster(
        [node("ok"), node("busy"), node("small", gpus=2), node("off", unschedulable=True)],
        [task("t", "busy", gpus=6)],
    )


def test_each_node_gets_the_first_rule_it_breaks() -> None:
    snapshot = four_nodes()
    _, found = judged(snapshot, read_pod(pod(gpus=4), snapshot, {}))
    assert found == {
        "ok": None,
        # 8 - 6 = 2 free: stopping t would make room, so it can be resolved
        "busy": ("C3: node busy has 2 GPUs free; the pod asks for 4", False),
        # 2 GPUs in all: no preemption helps
        "small": ("C3: node small has 2 GPUs free; the pod asks for 4", True),
        "off": ("K1: node off is cordoned (unschedulable)", True),
    }


def test_cpus_are_judged_after_gpus() -> None:
    snapshot = cluster([node("a", cpus=8), node("b")], [task("t", "a", gpus=1, cpus=6)])
    _, found = judged(snapshot, read_pod(pod(gpus=1, cpu="3"), snapshot, {}))
    # a: 8 - 6 = 2 CPUs free, 3 asked; b has 64 - 0
    assert found == {"a": ("C3: node a has 2 CPUs free; the pod asks for 3", False), "b": None}


def test_refusal_after_sees_the_room_stopped_tasks_leave() -> None:
    snapshot = four_nodes()
    ask = read_pod(pod(gpus=4), snapshot, {})
    state = State(snapshot, 0, "test")
    busy = state.node_pos["busy"]
    assert refusal_after(state, ask, busy, set()) == (
        "C3: node busy has 2 GPUs free; the pod asks for 4"
    )
    assert refusal_after(state, ask, busy, {"ml/t"}) is None
    off = state.node_pos["off"]
    assert refusal_after(state, ask, off, set()) == "K1: node off is cordoned (unschedulable)"


@pytest.mark.parametrize("seed", range(8))
def test_the_array_path_and_the_node_path_agree(seed: int) -> None:
    # fit() judges every node at once on arrays; refusal_after() one node from its
    # tasks: with nothing stopped, both must pass and refuse the same nodes.
    rng = random.Random(seed)
    nodes = [node(f"n{i}", gpus=rng.choice([2, 4, 8]), cpus=rng.choice([8, 32])) for i in range(6)]
    tasks = []
    for i, spec in enumerate(nodes):
        room, cpus = spec["gpus"], spec["cpus"]
        while room and rng.random() < 0.7:
            size = rng.choice([s for s in (1, 2, 4) if s <= room])
            cpu = rng.choice([1, 2, 4])
            if cpu > cpus:
                break
            tasks.append(task(f"t{len(tasks)}", f"n{i}", gpus=size, cpus=cpu))
            room, cpus = room - size, cpus - cpu
    snapshot = cluster(nodes, tasks)
    outcomes = set()
    for gpus in (1, 2, 4, 8):
        ask = read_pod(pod(gpus=gpus, cpu=str(rng.choice([1, 4, 16]))), snapshot, {})
        state, found = judged(snapshot, ask)
        for name, reason in found.items():
            alone = refusal_after(state, ask, state.node_pos[name], set())
            assert (alone is None) == (reason is None), (name, alone, reason)
            outcomes.add(reason is None)
    assert outcomes == {True, False}  # some nodes pass and some fail on every seed
