"""The Kubernetes output of a calendar's plan (F8): a placeholder per hold, what binds now."""

from __future__ import annotations

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
