"""gpuopt.readers.kubectl.finish: groups settled, over-committed nodes locked, pods pinned."""

from __future__ import annotations

from typing import Any

from gpuopt.cluster.kube import LabelSelector
from gpuopt.cluster.model import Node, Task
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.finish import finish
from tests.readers.kubectl.conftest import context


def ctx_with(nodes: list[dict[str, Any]], tasks: list[dict[str, Any]]) -> Context:
    ctx = context()
    for node in nodes:
        ctx.nodes[node["id"]] = Node.model_validate({"gpus": 8, "cpus": 64, **node})
    ctx.tasks = [Task.model_validate({"gpus": 1, "cpus": 1, **task}) for task in tasks]
    return ctx


def test_an_overcommitted_node_is_locked_and_reported() -> None:
    ctx = ctx_with(
        [{"id": "a"}, {"id": "b"}],
        [{"id": "t1", "node": "a", "gpus": 6}, {"id": "t2", "node": "a", "gpus": 4}],
    )
    cluster = finish(ctx, "test", ["zone"], 1000)
    assert [(node.id, node.locked) for node in cluster.nodes] == [("a", True), ("b", False)]
    assert ctx.report.reasons == {"overcommitted": ["a"]}
    assert ctx.report.first["overcommitted"] == "node 'a': its pods hold 10 GPUs but it has 8."


def test_a_second_pod_of_a_legacy_group_on_a_node_loses_the_group() -> None:
    ctx = ctx_with(
        [{"id": "a"}],
        [
            {"id": "t1", "node": "a", "anti_affinity": "svc"},
            {"id": "t2", "node": "a", "anti_affinity": "svc"},
        ],
    )
    cluster = finish(ctx, "test", ["zone"], 1000)
    assert [task.anti_affinity for task in cluster.tasks] == ["svc", None]
    assert ctx.report.reasons == {"group-clash": ["t2"]}


def test_misplaced_budgeted_and_spread_pods_are_pinned() -> None:
    ctx = ctx_with(
        [{"id": "a", "labels": {"zone": "z1"}}],
        [
            {"id": "ml/off", "node": "a", "node_selector": {"zone": "z2"}},
            {"id": "ops/guarded", "node": "a"},
            {"id": "web/spread", "node": "a", "labels": {"app": "web"}},
            {"id": "web/free", "node": "a", "labels": {"app": "api"}},
        ],
    )
    ctx.pinned_namespaces.add("ops")
    ctx.spread.append(("web", LabelSelector(match_labels={"app": "web"})))
    cluster = finish(ctx, "test", ["zone"], 1000)
    assert {task.id: task.pinned for task in cluster.tasks} == {
        "ml/off": "misplaced",
        "ops/guarded": "budget",
        "web/spread": "topology-spread",
        "web/free": None,
    }
    assert ctx.report.pinned == {"misplaced": 1, "budget": 1, "topology-spread": 1}


def test_the_clock_is_the_latest_time_read() -> None:
    ctx = ctx_with([{"id": "a"}], [])
    ctx.times.extend([100.0, 250.0, 175.0])
    assert finish(ctx, "test", ["zone"], 1000).now == 250.0
    assert finish(ctx_with([{"id": "a"}], []), "test", ["zone"], 1000).now is None


def test_shares_count_as_rule_c7_packs_them() -> None:
    # C7, by hand: 500 + 500 fill one GPU; 700 + 500 + 500 need two (700 alone, 500 + 500);
    # 600 + 600 cannot share one GPU, so a 1-GPU node holding them is over-committed
    ctx = ctx_with(
        [{"id": "halves", "gpus": 1}, {"id": "three", "gpus": 2}, {"id": "over", "gpus": 1}],
        [
            {"id": "h1", "node": "halves", "gpu_milli": 500},
            {"id": "h2", "node": "halves", "gpu_milli": 500},
            {"id": "t1", "node": "three", "gpu_milli": 500},
            {"id": "t2", "node": "three", "gpu_milli": 700},
            {"id": "t3", "node": "three", "gpu_milli": 500},
            {"id": "o1", "node": "over", "gpu_milli": 600},
            {"id": "o2", "node": "over", "gpu_milli": 600},
        ],
    )
    cluster = finish(ctx, "test", ["zone"], 1000)
    assert [(node.id, node.locked) for node in cluster.nodes] == [
        ("halves", False),
        ("three", False),
        ("over", True),
    ]
    assert ctx.report.reasons == {"overcommitted": ["over"]}
    assert ctx.report.first["overcommitted"] == "node 'over': its pods hold 2 GPUs but it has 1."


def test_a_share_beside_whole_gpus_takes_a_gpu_of_its_own() -> None:
    # two whole GPUs and a 300 share on a 3-GPU node use all three GPUs; a third whole GPU
    # pod makes four: over-committed
    fits = ctx_with(
        [{"id": "a", "gpus": 3}],
        [{"id": "w", "node": "a", "gpus": 2}, {"id": "s", "node": "a", "gpu_milli": 300}],
    )
    assert not finish(fits, "test", ["zone"], 1000).nodes[0].locked
    over = ctx_with(
        [{"id": "a", "gpus": 3}],
        [
            {"id": "w", "node": "a", "gpus": 3},
            {"id": "s", "node": "a", "gpu_milli": 300},
        ],
    )
    assert finish(over, "test", ["zone"], 1000).nodes[0].locked
    assert over.report.first["overcommitted"] == "node 'a': its pods hold 4 GPUs but it has 3."


def test_a_host_port_is_one_per_node_held_by_its_running_pods() -> None:
    from gpuopt.cluster.model import Pending

    port, other = "hostport.gpuopt.io/TCP-8080", "hostport.gpuopt.io/TCP-9090"
    ctx = ctx_with(
        [{"id": "a"}, {"id": "b"}, {"id": "c"}],
        [
            {"id": "web-1", "node": "a", "pinned": "host-port"},
            {"id": "web-2", "node": "c", "pinned": "host-port"},  # another address, same port
            {"id": "web-3", "node": "c", "pinned": "host-port"},
            # a port no waiting pod asks: held too, so a pod read later (the extender's) finds
            # it taken on b and free elsewhere
            {"id": "dns", "node": "b", "pinned": "host-port"},
        ],
    )
    ctx.pending = [Pending.model_validate({"id": "wait", "gpus": 1, "cpus": 1})]
    ctx.host_ports = {
        "web-1": {port},
        "web-2": {port},
        "web-3": {port},
        "dns": {other},
        "wait": {port},
    }
    cluster = finish(ctx, "test", ["zone"], 1000)
    assert [node.resources for node in cluster.nodes] == [
        {port: 1},
        {port: 1, other: 1},
        {port: 2},
    ]
    assert {task.id: task.resources for task in cluster.tasks} == {
        "web-1": {port: 1},
        "web-2": {port: 1},
        "web-3": {port: 1},
        "dns": {other: 1},
    }
    assert cluster.pending[0].resources == {port: 1}
    assert not any(node.locked for node in cluster.nodes)
    assert ctx.report.reasons == {"host-port-pending": ["wait"]}
