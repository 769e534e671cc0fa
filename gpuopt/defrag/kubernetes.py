"""A migration plan as the Kubernetes steps an operator runs, wave by wave.

For each move, make-before-break:

1. **hold** the room: a placeholder pod bound to the target node
   (``spec.nodeName``) that requests what the moved pod requests (GPUs, CPUs,
   memory, extended resources) and carries its tolerations, in the
   low-priority class ``gpuopt-placeholder`` (so the replacement may preempt it);
2. **evict** the pod through the Eviction API (``policy/v1``), which refuses
   an eviction its PodDisruptionBudget does not allow;
3. **release** the placeholder once the replacement runs.

A node the plan empties is cordoned before the first wave after the last
move into it, so that no replacement returns to it, and every such node is
uncordoned once the plan is done, so the freed room takes new pods. A pod
moved twice is evicted the second time under its replacement's name, which
the step says how to look up. A placeholder asks for the GPUs under the
target node's resource name (``gpuopt.io/gpu-resource``, set by the reader
for ``amd.com/gpu`` and the like). Waves come from the plan (rule D7: moves of a
wave touch distinct nodes; K7: no wave evicts more pods of a budget than it
allows), so a wave's steps may run together and the next wave starts when
the previous one's replacements run.

The output is a YAML stream: every document is preceded by a comment that
says which step it is and the ``kubectl`` command that applies it; steps
without an object (cordon, release) are comments with their command.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from gpuopt.cluster.kube import GPU_RESOURCE_LABEL
from gpuopt.cluster.model import Cluster, Task
from gpuopt.defrag.solution import MigrationPlan

#: The placeholder's priority class: below every workload, never preempting.
PLACEHOLDER_CLASS = "gpuopt-placeholder"
PLACEHOLDER_IMAGE = "registry.k8s.io/pause:3.10"
#: Longest pod name Kubernetes accepts.
MAX_NAME = 253


def _namespace_and_name(task: Task) -> tuple[str, str]:
    namespace = task.space
    prefix = f"{namespace}/"
    name = task.id[len(prefix) :] if task.id.startswith(prefix) else task.id
    return namespace, name


def _requests(task: Task, gpu_resource: str) -> dict[str, str]:
    requests: dict[str, str] = {}
    if task.gpus:
        requests[gpu_resource] = str(task.gpus)
    if task.cpus:
        requests["cpu"] = f"{round(task.cpus * 1000)}m"
    if task.memory:
        requests["memory"] = f"{round(task.memory * 1024)}Ki"  # memory is in MiB
    for name, amount in sorted(task.resources.items()):
        requests[name] = str(amount)
    return requests


def _placeholder(task: Task, target: str, gpu_resource: str) -> dict[str, Any]:
    namespace, name = _namespace_and_name(task)
    hold = _hold_name(name)
    requests = _requests(task, gpu_resource)
    # extended resources (GPUs among them) must have limits equal to requests
    limits = {k: v for k, v in requests.items() if k not in ("cpu", "memory")}
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    spec: dict[str, Any] = {
        "nodeName": target,
        "priorityClassName": PLACEHOLDER_CLASS,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "hold", "image": PLACEHOLDER_IMAGE, "resources": resources}],
    }
    if task.tolerations:
        spec["tolerations"] = [
            {_camel(k): v for k, v in t.model_dump(exclude_none=True).items()}
            for t in task.tolerations
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": hold,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpuopt"},
            "annotations": {"gpuopt.io/hold-for": task.id},
        },
        "spec": spec,
    }


def _hold_name(name: str) -> str:
    """The placeholder's name: a valid DNS-1123 subdomain of at most 253 characters."""
    return f"gpuopt-hold-{name}"[:MAX_NAME].rstrip("-.")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def kubernetes_steps(
    cluster: Cluster, plan: MigrationPlan, *, gpu_resource: str = "nvidia.com/gpu"
) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """The steps of ``plan``: ``(comment, object or None)`` in the order to run them.

    Examples
    --------
    >>> import gpuopt
    >>> cluster = Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 64},
    ...                          {"id": "b", "gpus": 8, "cpus": 64}],
    ...                   tasks=[{"id": "ml/t", "node": "a", "gpus": 2, "cpus": 4},
    ...                          {"id": "ml/u", "node": "b", "gpus": 4, "cpus": 4}])
    >>> plan = gpuopt.solve(cluster, "onehop")
    >>> [comment.split(":")[0] for comment, _ in kubernetes_steps(cluster, plan)][1:]
    ['before wave 0, cordon', 'wave 0, move 1 (ml/t a -> b) hold', \
'wave 0, move 1 (ml/t a -> b) evict', 'wave 0, move 1 (ml/t a -> b) release', 'done']
    """
    tasks = {task.id: task for task in cluster.tasks}
    yield (
        "the placeholders' priority class (lowest, never preempts): kubectl apply -f -",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": PLACEHOLDER_CLASS},
            "value": -1000,
            "preemptionPolicy": "Never",
            "globalDefault": False,
            "description": "gpuopt placeholders that hold a node's room during a move",
        },
    )
    nodes = {node.id: node for node in cluster.nodes}
    # a node the plan empties is cordoned once no later move targets it, so that no
    # replacement returns to it; every such node is uncordoned when the plan is done
    last_in = {move.to: move.wave for move in plan.moves}
    cordon_at: dict[int, list[str]] = {}
    for node_id in plan.emptied:
        cordon_at.setdefault(last_in.get(node_id, -1) + 1, []).append(node_id)
    moved: dict[str, int] = {}
    wave = -1
    for number, move in enumerate(plan.moves, start=1):
        if move.wave != wave:
            for later in range(wave + 1, move.wave + 1):
                if cordon_at.get(later):
                    yield (
                        f"before wave {later}, cordon: kubectl cordon "
                        + " ".join(cordon_at.pop(later)),
                        None,
                    )
            wave = move.wave
        task = tasks[move.task]
        namespace, name = _namespace_and_name(task)
        where = f"wave {move.wave}, move {number} ({task.id} {move.source} -> {move.to})"
        resource = nodes[move.to].labels.get(GPU_RESOURCE_LABEL, gpu_resource)
        yield (
            f"{where} hold: kubectl apply -f - (a placeholder bound to {move.to})",
            _placeholder(task, move.to, resource),
        )
        moved[task.id] = moved.get(task.id, 0) + 1
        if moved[task.id] > 1:  # its first move's replacement has a name of its own
            yield (
                f"{where} evict: the replacement of {task.id} from its move before (look its "
                f"name up: kubectl get pods -n {namespace} --field-selector "
                f"spec.nodeName={move.source}), then kubectl create --raw "
                f"/api/v1/namespaces/{namespace}/pods/<that name>/eviction -f - with this "
                "Eviction's name changed to it",
                {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": f"<replacement of {name}>", "namespace": namespace},
                },
            )
        else:
            yield (
                f"{where} evict: kubectl create --raw "
                f"/api/v1/namespaces/{namespace}/pods/{name}/eviction -f -",
                {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": name, "namespace": namespace},
                },
            )
        yield (
            f"{where} release: once the replacement of {task.id} runs, kubectl delete pod "
            f"-n {namespace} {_hold_name(name)}",
            None,
        )
    for later in sorted(cordon_at):
        yield (f"after the last wave, cordon: kubectl cordon {' '.join(cordon_at[later])}", None)
    if plan.emptied:
        yield (
            "done: once every replacement runs, kubectl uncordon "
            + " ".join(plan.emptied)
            + " (the freed nodes take new pods again)",
            None,
        )


def kubernetes_yaml(
    cluster: Cluster, plan: MigrationPlan, *, gpu_resource: str = "nvidia.com/gpu"
) -> str:
    """The steps of ``plan`` as one YAML stream (comments say how to apply each)."""
    parts = [
        f"# gpuopt plan ({plan.method}): {len(plan.moves)} moves in {plan.metrics.waves} waves, "
        f"empties {len(plan.emptied)} nodes. Run the steps in order; a wave's steps may run "
        "together."
    ]
    for comment, document in kubernetes_steps(cluster, plan, gpu_resource=gpu_resource):
        if document is None:
            parts.append(f"# {comment}")
        else:
            parts.append(f"---\n# {comment}\n" + yaml.safe_dump(document, sort_keys=False).rstrip())
    return "\n".join(parts) + "\n"


__all__ = ["PLACEHOLDER_CLASS", "kubernetes_steps", "kubernetes_yaml"]
