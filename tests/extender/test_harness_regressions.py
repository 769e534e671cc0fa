"""Bugs the openb harness (``benchmarks/extender_openb.py``) found, each on a hand-written node."""

from __future__ import annotations

from typing import Any

from gpuopt.cluster.model import Cluster, Node, Task
from gpuopt.extender.check import filter_violations
from gpuopt.extender.engine import Extender
from gpuopt.extender.wire import read_args


def _pod(name: str, requests: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "openb", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "main", "resources": {"requests": requests}}]},
        "status": {"phase": "Pending"},
    }


def _shares(node: str, sizes: list[int]) -> list[Task]:
    return [
        Task(id=f"openb/s{i}", node=node, gpus=1, gpu_milli=size, cpus=1.0)
        for i, size in enumerate(sizes)
    ]


def _filter(cluster: Cluster, pod: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    extender = Extender(cluster)
    names = [node.id for node in cluster.nodes]
    answer = extender.filter(read_args({"Pod": pod, "NodeNames": names}))
    ask = extender.ask(pod, extender.state)
    return answer, filter_violations(cluster, ask, names, answer)


def test_a_share_does_not_fit_by_moving_running_shares() -> None:
    """openb-pod-0358 on openb-node-0052 (``--keep``, pod 358 of the default trace): the
    running shares 460, 440, 320, 220, 220 lie on two GPUs as 460+440 (100 left) and
    320+220+220 (240 left), so a share of 320 fits no GPU (C7: a request fits where some GPU
    has that much left). The checker judged by the snapshot's legality with the pod added,
    which repacks every share (460+320+220 and 440+320+220) and so moves running pods between
    GPUs: it called the engine's refusal a violation."""
    cluster = Cluster(
        nodes=[Node(id="g2", gpus=2, cpus=96.0, memory=393216.0)],
        tasks=_shares("g2", [460, 440, 320, 220, 220]),
    )
    answer, found = _filter(cluster, _pod("p", {"alibabacloud.com/gpu-milli": "320"}))
    assert answer["NodeNames"] == []
    assert "C7" in answer["FailedNodes"]["g2"]
    assert found == []


def test_a_whole_gpu_is_not_freed_by_moving_running_shares() -> None:
    """The same for a whole GPU: best fit lays the shares 500, 400, 300, 300, 250, 250 on all
    three GPUs (500+400, 300+300+250, 250), though two would hold them (500+250+250,
    400+300+300); no GPU is free, so a one-GPU pod does not fit (C3, C7)."""
    cluster = Cluster(
        nodes=[Node(id="n3", gpus=3, cpus=96.0)],
        tasks=_shares("n3", [500, 400, 300, 300, 250, 250]),
    )
    answer, found = _filter(cluster, _pod("p", {"nvidia.com/gpu": "1"}))
    assert answer["NodeNames"] == []
    assert "C3" in answer["FailedNodes"]["n3"]
    assert found == []


def test_a_share_still_fits_where_a_gpu_has_room() -> None:
    """The checker's new C7 test refuses nothing the rule allows: 240 left takes 220."""
    cluster = Cluster(
        nodes=[Node(id="g2", gpus=2, cpus=96.0)],
        tasks=_shares("g2", [460, 440, 320, 220, 220]),
    )
    answer, found = _filter(cluster, _pod("p", {"alibabacloud.com/gpu-milli": "220"}))
    assert answer["NodeNames"] == ["g2"]
    assert found == []


def _preempt(extender: Extender, pod: dict[str, Any], node: str) -> tuple[Any, list[str]]:
    from gpuopt.extender.check import preemption_violations
    from gpuopt.extender.wire import read_preemption

    state = extender.state
    assert state is not None
    uids = [task.uid for task in state.on_node[state.node_pos[node]] if task.uid]
    body = {
        "Pod": pod,
        "NodeNameToMetaVictims": {node: {"Pods": [{"UID": u} for u in uids]}},
    }
    answer = extender.preempt(read_preemption(body))
    ask = extender.ask(pod, state)
    return answer, preemption_violations(state.cluster, ask, {node: uids}, answer)


def _high(pod: dict[str, Any]) -> dict[str, Any]:
    pod["spec"]["priority"] = 1000
    return pod


def test_assumed_shares_on_one_gpu_are_never_stopped() -> None:
    """openb-pod-7725 (``--keep``, the default trace): the model never stops a share that
    shares its GPU (K6 ``shared-gpu``, ``models/cluster.md``), and the engine read that from
    the snapshot's index once; shares bound later by ``Extender.assume`` were not added, so
    it agreed to stop them. The fixed tasks are now read from the current tasks."""
    node = Node(id="n1", gpus=1, cpus=16.0)
    extender = Extender(Cluster(nodes=[node]))
    for i in range(2):
        extender.assume(Task(id=f"openb/s{i}", node="n1", gpus=1, gpu_milli=500, uid=f"u{i}"))
    answer, found = _preempt(extender, _high(_pod("p", {"nvidia.com/gpu": "1"})), "n1")
    assert answer == {"NodeNameToMetaVictims": {}}
    assert found == []
    # the same shares in the snapshot itself: the same answer
    snapshot = Extender(extender.state.cluster if extender.state else None)
    again, found = _preempt(snapshot, _high(_pod("p", {"nvidia.com/gpu": "1"})), "n1")
    assert again == answer and found == []


def test_an_ended_share_frees_its_gpu_mate() -> None:
    """Once one of two shares ends (``Extender.forget``), the other is alone on its GPU and
    may be stopped again."""
    node = Node(id="n1", gpus=1, cpus=16.0)
    tasks = [Task(id=f"openb/s{i}", node="n1", gpus=1, gpu_milli=500, uid=f"u{i}") for i in (0, 1)]
    extender = Extender(Cluster(nodes=[node], tasks=tasks))
    extender.forget("openb/s0")
    answer, found = _preempt(extender, _high(_pod("p", {"nvidia.com/gpu": "1"})), "n1")
    assert answer["NodeNameToMetaVictims"]["n1"]["Pods"] == [{"UID": "u1"}]
    assert found == []
