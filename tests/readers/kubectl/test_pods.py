"""gpuopt.readers.kubectl.pods: a pod skipped, read as pending demand, or as a task on its node."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.cluster.kube import affinity_matches
from gpuopt.errors import ProblemError
from gpuopt.readers.kubectl.context import Context, PriorityClass
from gpuopt.readers.kubectl.documents import KubeObject
from gpuopt.readers.kubectl.fields import Reader
from gpuopt.readers.kubectl.nodes import read_node
from gpuopt.readers.kubectl.objects import read_claim, read_volume
from gpuopt.readers.kubectl.pods import condition, host_ports, pod_priority, read_pod, tolerations
from tests.readers.kubectl.conftest import context

READER = Reader("pods.json", "Pod 'ml/p'")


def with_node(**options: Any) -> Context:
    ctx = context(**options)
    node = {
        "metadata": {"name": "n1"},
        "status": {
            "allocatable": {"cpu": "32", "memory": "64Gi", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    read_node(ctx, KubeObject("Node", node, Reader("nodes.json", "Node")))
    return ctx


def pod(name: str = "p", *, node: str | None = None, phase: str = "Pending", **spec: Any) -> dict:
    body: dict[str, Any] = {
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "2"}}}
        ],
        **spec,
    }
    if node is not None:
        body["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": body,
        "status": {"phase": phase},
    }


def read(ctx: Context, item: dict[str, Any]) -> None:
    read_pod(ctx, KubeObject("Pod", item, READER))


def test_an_unbound_pending_pod_is_demand_and_a_bound_one_a_task() -> None:
    ctx = with_node()
    read(ctx, pod("wait"))
    read(ctx, pod("run", node="n1", phase="Running"))
    [pending] = ctx.pending
    [task] = ctx.tasks
    assert (pending.id, pending.gpus, pending.cpus, pending.uid) == ("ml/wait", 2, 2.0, "uid-wait")
    assert (task.id, task.node, task.gpus) == ("ml/run", "n1", 2)


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (pod("done", node="n1", phase="Succeeded"), "done"),
        (pod("lost", phase="Running"), "unbound"),
        (pod("gated", schedulingGates=[{"name": "wait"}]), "gated"),
    ],
)
def test_pods_that_are_no_demand_are_skipped_with_a_reason(item: dict, reason: str) -> None:
    ctx = with_node()
    read(ctx, item)
    assert (ctx.tasks, ctx.pending) == ([], [])
    assert list(ctx.report.reasons) == [reason]


def test_a_pod_on_a_node_not_read_is_a_problem() -> None:
    ctx = with_node()
    read(ctx, pod("x", node="n9", phase="Running"))
    assert ctx.tasks == [] and ctx.report.reasons == {"unknown-node": ["ml/x"]}
    with pytest.raises(ProblemError, match=r"spec\.nodeName 'n9' is not a node that was read"):
        read(with_node(strict=True), pod("x", node="n9", phase="Running"))


def test_priority_comes_from_the_pod_then_its_class_then_the_default_class() -> None:
    ctx = context()
    ctx.classes["train"] = PriorityClass(500, False, "Never")
    ctx.classes["base"] = PriorityClass(7, True, None)
    assert pod_priority(ctx, READER, {"priority": 900, "priorityClassName": "train"}, {}, "p") == (
        900,
        "Never",
    )
    assert pod_priority(ctx, READER, {"priorityClassName": "train"}, {}, "p") == (500, "Never")
    assert pod_priority(ctx, READER, {}, {}, "p") == (7, None)  # the global default
    assert pod_priority(ctx, READER, {"priorityClassName": "system-node-critical"}, {}, "p") == (
        2_000_001_000,
        None,
    )
    assert pod_priority(ctx, READER, {"priorityClassName": "gone"}, {}, "q") == (0, None)
    assert ctx.report.reasons == {"unknown-class": ["q"]}


def test_the_legacy_priority_label() -> None:
    ctx = context()
    assert pod_priority(ctx, READER, {"priority": 5}, {"gpuopt.io/priority": "hp"}, "p") == (
        "HP",
        None,
    )
    with pytest.raises(ProblemError, match="must be 'HP' or 'LP'"):
        pod_priority(ctx, READER, {}, {"gpuopt.io/priority": "urgent"}, "p")


def test_a_toleration_for_a_while_does_not_count() -> None:
    ctx = context()
    spec = {
        "tolerations": [
            {"key": "gpu", "operator": "Exists"},
            {"key": "down", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ]
    }
    assert tolerations(ctx, READER, spec, "p") == [{"key": "gpu", "operator": "Exists"}]
    assert ctx.report.unmodelled["toleration-seconds"] == 1


ADMISSION = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}


def test_the_admission_defaults_are_not_reported() -> None:
    # what DefaultTolerationSeconds adds to every pod: left out, and not counted (L6)
    ctx = context()
    spec = {
        "tolerations": [
            {**ADMISSION, "key": "node.kubernetes.io/not-ready", "tolerationSeconds": 300},
            {**ADMISSION, "tolerationSeconds": 300},
        ]
    }
    assert tolerations(ctx, READER, spec, "p") == []
    assert ctx.report.unmodelled["toleration-seconds"] == 0
    # the same key for another time, or with another effect, is the pod's own choice
    for other in (
        {**ADMISSION, "tolerationSeconds": 600},
        {**ADMISSION, "key": "node.kubernetes.io/memory-pressure", "tolerationSeconds": 300},
        {**ADMISSION, "operator": "Equal", "value": "x", "tolerationSeconds": 300},
    ):
        ctx = context()
        assert (
            tolerations(
                ctx, READER, {"tolerations": [ADMISSION | {"tolerationSeconds": 300}, other]}, "p"
            )
            == []
        )
        assert ctx.report.unmodelled["toleration-seconds"] == 1, other


def test_host_ports_and_conditions() -> None:
    assert host_ports({"hostNetwork": True})
    assert host_ports({"initContainers": [{"ports": [{"containerPort": 80, "hostPort": 8080}]}]})
    assert not host_ports({"containers": [{"ports": [{"containerPort": 80}]}]})
    status = {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled"}]}
    assert condition(status, "Ready") == "False"
    assert condition(status, "PodScheduled") is None
    assert condition({}, "Ready") is None


def volume_on(ctx: Context, claim: str, volume: str | None, spec: dict[str, Any]) -> None:
    """A claim ``ml/<claim>`` bound to ``volume`` (None: unbound), and that volume."""
    pvc = {"metadata": {"name": claim, "namespace": "ml"}, "spec": {}}
    if volume is not None:
        pvc["spec"] = {"volumeName": volume}
        read_volume(
            ctx,
            KubeObject("PersistentVolume", {"metadata": {"name": volume}, "spec": spec}, READER),
        )
    read_claim(ctx, KubeObject("PersistentVolumeClaim", pvc, READER))


def required(key: str, *values: str) -> dict[str, Any]:
    expression = {"key": key, "operator": "In", "values": list(values)}
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}


def test_a_waiting_pod_goes_only_where_its_bound_volumes_reach() -> None:
    # kube-scheduler's VolumeBinding: a bound claim's volume node affinity is required (K3);
    # by hand, of nodes (a, z1), (b, z2), (c, z2): the zonal disk (z2) and the pod's own
    # affinity (not c) leave b; the local volume pinned to c leaves c; an unbound claim
    # (WaitForFirstConsumer) leaves every node, counted as not modelled
    ctx = with_node()
    volume_on(ctx, "zonal", "pv-z2", {"csi": {}, "nodeAffinity": required("zone", "z2")})
    volume_on(ctx, "ssd", "pv-c", {"local": {}, "nodeAffinity": required("host", "c")})
    volume_on(ctx, "later", None, {})
    not_c = {"key": "host", "operator": "NotIn", "values": ["c"]}
    own = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [not_c]}]
            }
        }
    }

    def mounting(name: str, claim: str, **spec: Any) -> dict[str, Any]:
        volumes = [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]
        return pod(name, volumes=[{"name": "tmp", "emptyDir": {}}, *volumes], **spec)

    read(ctx, mounting("zonal", "zonal", affinity=own))
    read(ctx, mounting("local", "ssd"))
    read(ctx, mounting("later", "later"))
    nodes = {
        "a": {"zone": "z1", "host": "a"},
        "b": {"zone": "z2", "host": "b"},
        "c": {"zone": "z2", "host": "c"},
    }
    reach = {
        pending.id: [
            n for n, labels in nodes.items() if affinity_matches(pending.node_affinity, n, labels)
        ]
        for pending in ctx.pending
    }
    assert reach == {"ml/zonal": ["b"], "ml/local": ["c"], "ml/later": ["a", "b", "c"]}
    assert ctx.report.reasons["volume-affinity"] == ["ml/zonal", "ml/local"]
    assert ctx.report.unmodelled["pending-volume"] == 1


def test_host_ports_are_read_as_k9_resources() -> None:
    from gpuopt.readers.kubectl.pods import port_resources

    spec = {
        "containers": [
            {"ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9090}]},
            {"ports": [{"hostPort": 53, "protocol": "UDP"}, {"hostPort": 8080}]},
        ],
        "initContainers": [{"ports": [{"hostPort": 9000, "protocol": "TCP"}]}],
    }
    assert port_resources(spec) == {
        "hostport.gpuopt.io/TCP-8080",
        "hostport.gpuopt.io/UDP-53",
        "hostport.gpuopt.io/TCP-9000",
    }
    assert port_resources({"hostNetwork": True, "containers": [{"name": "c"}]}) == set()
