"""gpuopt.readers.kubectl.kinds: every object read in its stage, duplicates and bad ones counted."""

from __future__ import annotations

from typing import Any

from gpuopt.readers.kubectl.documents import KubeObject
from gpuopt.readers.kubectl.fields import Reader
from gpuopt.readers.kubectl.kinds import read_objects
from tests.readers.kubectl.conftest import context

NODE = {
    "metadata": {"name": "n1"},
    "status": {
        "allocatable": {"cpu": "32", "nvidia.com/gpu": "8"},
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}], **spec},
        "status": {"phase": "Running"},
    }


def objects(*found: tuple[str, dict[str, Any]], api: str | None = None) -> list[KubeObject]:
    return [
        KubeObject(kind, item, Reader("all.json", f"items[{n}]"), api)
        for n, (kind, item) in enumerate(found)
    ]


def test_nodes_are_read_before_the_pods_that_name_them() -> None:
    ctx = context()
    read_objects(ctx, objects(("Pod", pod("a")), ("Node", NODE)))
    assert [task.node for task in ctx.tasks] == ["n1"]
    assert ctx.report.read == {"Node": 1, "Pod": 1}


def test_a_second_copy_is_skipped_and_other_kinds_are_counted() -> None:
    ctx = context()
    read_objects(
        ctx,
        objects(("Node", NODE), ("Pod", pod("a")), ("Pod", pod("a")), ("Service", {})),
    )
    assert len(ctx.tasks) == 1
    assert ctx.report.reasons["duplicate"] == ["Pod a"]
    assert ctx.report.ignored_kinds == {"Service": 1}


def test_an_unreadable_pod_locks_its_node_and_a_budget_pins_its_namespace() -> None:
    ctx = context()
    bad_pod = pod("bad", priority="high")
    bad_budget = {"metadata": {"name": "b", "namespace": "ml"}, "spec": {"selector": []}}
    read_objects(
        ctx, objects(("Node", NODE), ("Pod", bad_pod), ("PodDisruptionBudget", bad_budget))
    )
    assert ctx.locked_nodes == {"n1"}
    assert ctx.pinned_namespaces == {"ml"}
    assert set(ctx.report.reasons) >= {"malformed-Pod", "malformed-PodDisruptionBudget"}


def test_another_schedulers_pod_group_is_ignored() -> None:
    ctx = context()
    group = {"metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 2}}
    read_objects(ctx, objects(("PodGroup", group), api="example.com/v1"))
    assert ctx.pod_groups == {}
    assert ctx.report.ignored_kinds == {"PodGroup (example.com/v1)": 1}
    read_objects(ctx, objects(("PodGroup", group), api="scheduling.x-k8s.io/v1alpha1"))
    assert ctx.pod_groups == {"ml/g": 2}
