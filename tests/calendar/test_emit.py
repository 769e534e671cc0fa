"""The Kubernetes output of a calendar's plan (F8): a placeholder per hold, what binds now."""

from __future__ import annotations

import copy
from typing import Any

from gpuopt.calendar.emit import HOLD_CLASS, HOLD_PRIORITY, HOLDS_FOR, kubernetes_objects
from gpuopt.calendar.greedy import solve_heuristic
from tests.calendar import two_nodes


def test_one_pinned_placeholder_per_hold_and_a_bind_note_without_a_cluster() -> None:
    # two_nodes: the 2-node job 'big' holds a and b (8 GPUs each) from tick 10; 'small'
    # starts now on a. Without a cluster no pod is known, so 'small' gets a comment only.
    problem = two_nodes()
    objects = kubernetes_objects(problem, solve_heuristic(problem))
    klass = objects[0][1]
    assert klass is not None and klass["kind"] == "PriorityClass"
    assert (klass["metadata"]["name"], klass["value"]) == (HOLD_CLASS, HOLD_PRIORITY)
    pods = [item for _, item in objects if item is not None and item["kind"] == "Pod"]
    assert len(pods) == 2
    for pod, node in zip(pods, ["a", "b"], strict=True):
        spec = pod["spec"]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [node]
        assert spec["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "8"}
        assert spec["priorityClassName"] == HOLD_CLASS
        assert pod["metadata"]["labels"][HOLDS_FOR] == "big"
    (note,) = [comment for comment, item in objects if item is None]
    assert "small" in note and " a " in note


def test_an_existing_priority_class_is_named_not_emitted() -> None:
    problem = two_nodes()
    objects = kubernetes_objects(problem, solve_heuristic(problem), priority_class="spare")
    kinds = [item["kind"] for _, item in objects if item is not None]
    assert "PriorityClass" not in kinds
    pods = [item for _, item in objects if item is not None and item["kind"] == "Pod"]
    assert {pod["spec"]["priorityClassName"] for pod in pods} == {"spare"}


def test_a_bound_placeholder_is_not_pinned_but_a_plain_pod_without_controller_is() -> None:
    """K6's no-controller pin spares placeholders (they are there to be stopped), so the
    extender's preempt verb may take them as victims; a plain pod without controller stays
    pinned."""
    from gpuopt.readers.kubectl import read_kubernetes

    problem = two_nodes()
    objects = kubernetes_objects(problem, solve_heuristic(problem))
    placeholder = next(item for _, item in objects if item is not None and item["kind"] == "Pod")
    placeholder = {
        **placeholder,
        "spec": {**placeholder["spec"], "nodeName": "a"},
        "status": {"phase": "Running"},
    }
    plain = {
        "kind": "Pod",
        "metadata": {"name": "plain", "namespace": placeholder["metadata"]["namespace"]},
        "spec": {"nodeName": "a", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }
    node = {
        "kind": "Node",
        "metadata": {"name": "a"},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "256Gi"}},
    }
    cluster, _ = read_kubernetes({"kind": "List", "items": [node, placeholder, plain]})
    pinned = {task.id.split("/")[1]: task.pinned for task in cluster.tasks}
    assert pinned[placeholder["metadata"]["name"]] is None
    assert pinned["plain"] == "no-controller"
    assert set(cluster.index.fixed) == {f"{plain['metadata']['namespace']}/plain"}


def test_a_hold_asks_for_gpus_not_for_gpuopts_account_of_dra_gpus() -> None:
    from gpuopt.calendar.emit import _quantities

    # a DRA job's GPUs are counted twice in the calendar: as GPUs and, per DeviceClass,
    # as dra.gpuopt.io/<class> (R2); a placeholder asks Kubernetes for the GPUs only
    asked = _quantities(
        ["gpu", "cpu", "dra.gpuopt.io/gpu.nvidia.com"], [2, 1000, 2], "nvidia.com/gpu"
    )
    assert asked == {"nvidia.com/gpu": "2", "cpu": "1000m"}


def _dra_calendar(extended_resource: str | None) -> list[tuple[str, dict[str, Any] | None]]:
    """A DRA node of 2 GPUs held for an hour by a running pod's claim, and a pod waiting for
    both through a template: the calendar holds n1 for it from the hour on (tick 12)."""
    from gpuopt.api import solve, violations
    from gpuopt.calendar.cluster import CalendarReport, from_cluster_report
    from gpuopt.calendar.podtimes import pod_times
    from gpuopt.readers.kubectl import read_kubernetes
    from tests.readers.kubectl.dra_objects import GPU_CLASS, held_pair

    klass: Any = copy.deepcopy(GPU_CLASS)
    if extended_resource is not None:
        klass["spec"]["extendedResourceName"] = extended_resource
    listed = {"kind": "List", "items": held_pair("3600", klass)}
    cluster, _ = read_kubernetes(listed)
    times = pod_times([listed], strict=True, report=CalendarReport())
    problem, _ = from_cluster_report(
        cluster, pods=times, horizon=24 * 3600, step=300, now=0, objective="delay",
        running_default=None, gang_level=None, class_weights={},
    )  # fmt: skip
    plan = solve(problem)
    assert violations(problem, plan) == []
    return kubernetes_objects(problem, plan, cluster=cluster, now=0)


def test_a_hold_on_dra_gpus_asks_them_by_a_claim_template_when_no_class_serves_nvidia_gpu() -> None:
    objects = [item for _, item in _dra_calendar(None) if item is not None]
    kinds = [item["kind"] for item in objects]
    assert kinds == ["PriorityClass", "ResourceClaimTemplate", "Pod"]
    made, hold = objects[1], objects[2]
    # the template asks what the job's own claim asks: 2 devices of the whole-GPU class
    requests = made["spec"]["spec"]["devices"]["requests"]
    assert requests == [
        {
            "name": "gpus",
            "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                        "count": 2},
        }
    ]  # fmt: skip
    assert made["metadata"]["name"] == hold["metadata"]["name"]
    assert made["metadata"]["labels"] == hold["metadata"]["labels"]
    spec = hold["spec"]
    assert spec["resourceClaims"] == [
        {"name": "gpus", "resourceClaimTemplateName": made["metadata"]["name"]}
    ]
    resources = spec["containers"][0]["resources"]
    assert resources["claims"] == [{"name": "gpus"}]
    # no nvidia.com/gpu: this node has no device plugin, so that request would never fit
    assert "nvidia.com/gpu" not in resources["requests"]
    assert hold["metadata"]["annotations"]["gpuopt.io/hold-start-tick"] == "12"  # the hour


def test_a_hold_on_dra_gpus_asks_the_extended_resource_a_class_serves() -> None:
    objects = [item for _, item in _dra_calendar("example.com/gpu") if item is not None]
    assert [item["kind"] for item in objects] == ["PriorityClass", "Pod"]
    resources = objects[1]["spec"]["containers"][0]["resources"]
    assert resources["requests"]["example.com/gpu"] == "2"
    assert resources["limits"] == {"example.com/gpu": "2"}
    assert "nvidia.com/gpu" not in resources["requests"]
    assert "resourceClaims" not in objects[1]["spec"]


def test_a_dra_pod_that_starts_now_is_left_to_kube_scheduler_and_a_mig_pod_is_left_out() -> None:
    """Two free DRA GPUs: a pod waiting for one through a template starts now, with no
    Binding (only the scheduler allocates claims as it binds); a pod waiting for a MIG
    placement is not planned at all (the calendar plans GPU counts), and is reported."""
    from gpuopt.calendar.cluster import CalendarReport, from_cluster_report
    from gpuopt.calendar.podtimes import pod_times
    from gpuopt.readers.kubectl import read_kubernetes
    from tests.readers.kubectl.dra_objects import (
        GPU_CLASS,
        exactly,
        gpu,
        node,
        pod,
        resource_slice,
        template,
    )  # fmt: skip

    mig_class: Any = copy.deepcopy(GPU_CLASS)
    mig_class["metadata"]["name"] = "mig.nvidia.com"
    mig_class["spec"]["selectors"][0]["cel"]["expression"] = (
        "device.attributes['gpu.nvidia.com'].type == 'mig'"
    )
    objects = [
        node(),
        resource_slice("s", [gpu("gpu-0"), gpu("gpu-1")]),
        GPU_CLASS,
        mig_class,
        template("one", exactly(1)),
        template("slice", exactly(1, "mig.nvidia.com")),
        # review finding 04: a CEL selector chooses among the devices, which a GPU count
        # per node cannot judge: left out, not planned on a node it selects nothing of
        template(
            "h100",
            exactly(
                1,
                selectors=[
                    {
                        "cel": {
                            "expression": "device.attributes['gpu.nvidia.com'].productName"
                            " == 'NVIDIA H100 80GB HBM3'"
                        }
                    }
                ],
            ),
        ),
        pod("whole", "one"),
        pod("sliced", "slice"),
        pod("picky", "h100"),
    ]
    listed = {"kind": "List", "items": objects}
    cluster, _ = read_kubernetes(listed)
    report = CalendarReport()
    times = pod_times([listed], strict=True, report=report)
    problem, report = from_cluster_report(
        cluster, pods=times, horizon=3600, step=300, now=0, objective="delay",
        running_default=None, gang_level=None, class_weights={},
    )  # fmt: skip
    assert [job.id for job in problem.jobs] == ["ml/whole"]
    assert report.notes["device-claims"] == 2
    plan = solve_heuristic(problem)
    found = kubernetes_objects(problem, plan, cluster=cluster, now=0)
    assert [item["kind"] for _, item in found if item is not None] == ["PriorityClass"]
    (note,) = [comment for comment, item in found if item is None]
    assert note.startswith("starts now: ml/whole on n1; no Binding")


def _mixed_objects(*, served: bool) -> list[tuple[str, dict[str, Any] | None]]:
    """The DRA fixture 'mixed' (a device-plugin node, a DRA node; a waiting pod of each
    kind), its class serving nvidia.com/gpu or (``served`` False) not, planned now."""
    from pathlib import Path

    import yaml

    from gpuopt.calendar.cluster import CalendarReport, from_cluster_report
    from gpuopt.calendar.podtimes import pod_times
    from gpuopt.readers.kubectl import read_kubernetes

    folder = Path(__file__).parents[2] / "gpuopt/scenarios/kubernetes/dra/mixed"
    items: list[Any] = []
    for path in sorted(folder.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                items.extend(document["items"] if document["kind"] == "List" else [document])
    if not served:
        for item in items:
            if item["kind"] == "DeviceClass":
                item["spec"].pop("extendedResourceName", None)
    listed = {"kind": "List", "items": items}
    cluster, _ = read_kubernetes(listed)
    times = pod_times([listed], strict=False, report=CalendarReport())
    problem, _ = from_cluster_report(
        cluster, pods=times, horizon=3600, step=300, now=0, objective="delay",
        running_default=None, gang_level=None, class_weights={},
    )  # fmt: skip
    return kubernetes_objects(problem, solve_heuristic(problem), cluster=cluster, now=0)


def test_no_binding_of_a_gpu_pod_onto_dra_gpus_and_a_binding_of_a_device_plugin_pod() -> None:
    # served: dp-wait asks nvidia.com/gpu, which dra-node gives only through a claim the
    # scheduler makes (KEP-5004): started there, it gets a comment, never a Binding
    found = _mixed_objects(served=True)
    bindings = [item for _, item in found if item is not None and item["kind"] == "Binding"]
    notes = [comment for comment, item in found if item is None]
    assert bindings == []
    assert any(note.startswith("starts now: ml/dp-wait on dra-node") for note in notes)
    # not served: dp-wait takes only the device plugin's GPUs (counted apart), on dp-node,
    # and is bound there; dra-wait's claim is the scheduler's
    found = _mixed_objects(served=False)
    bindings = [item for _, item in found if item is not None and item["kind"] == "Binding"]
    assert [(b["metadata"]["name"], b["target"]["name"]) for b in bindings] == [
        ("dp-wait", "dp-node")
    ]
    notes = [comment for comment, item in found if item is None]
    assert any(note.startswith("starts now: ml/dra-wait on dra-node") for note in notes)
