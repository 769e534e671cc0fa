"""An allocation scenario written as a cluster of its GPUs (G9, G11 of
``models/calendar.md``): Kubernetes objects that :func:`gpuopt.calendar.grid.grid_from_kubernetes`
reads back as the same scenario.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpuopt.allocation.problem import AllocationProblem, model_duration
from gpuopt.calendar.cluster import tick_time
from gpuopt.calendar.facts import (
    DEADLINE,
    DEMAND,
    DEMAND_HISTORY,
    GPU_INDICES,
    GPU_SPEED_LABEL,
    KIND,
    MAX_SWAP,
    MODEL_SPEEDS,
    PRODUCT_LABEL,
    VALUE,
)
from gpuopt.calendar.podtimes import EXPECTED_END, NOT_BEFORE, WALLTIME
from gpuopt.errors import ProblemError

#: The GPU resource :func:`scenario_objects` writes, and the gang label.
GPU_RESOURCE = "nvidia.com/gpu"
GANG_LABEL = "scheduling.x-k8s.io/pod-group"
#: Tick 0 of :func:`scenario_objects` unless given: 2026-01-01T00:00:00Z.
DEFAULT_NOW = 1_767_225_600.0


def _indices(gpus: Iterable[int]) -> str:
    return ",".join(str(g) for g in gpus)


def scenario_objects(
    problem: AllocationProblem, *, now: float = DEFAULT_NOW, namespace: str = "default"
) -> dict[str, Any]:
    """The scenario as a cluster of its GPUs: a Kubernetes ``List`` that
    :func:`~gpuopt.calendar.grid.grid_from_kubernetes` reads back as the same scenario (G9).

    ``now`` is the Unix second of step 0 (the nodes' last heartbeat, the clock
    the reader takes); one step lasts ``step_minutes``.

    GPU models (G11): each node is labelled with its pool's model
    (``nvidia.com/gpu.product``) and, where ``speed`` names it, its speed
    (``gpuopt.io/gpu-speed``); a task's ``models`` become a required node affinity
    on the model, and its own speeds the annotation ``gpuopt.io/model-speeds``.

    Raises
    ------
    ProblemError
        For what has no cluster form here: pools without ``gpus_per_node`` (a node has
        one model).
    """
    if problem.pools is not None and len(problem.pools) > 1 and problem.gpus_per_node is None:
        raise ProblemError(
            "pools: GPU models need gpus_per_node for a cluster form (a node has one model)."
        )
    step = problem.step_minutes * 60.0
    size = problem.gpus_per_node or problem.gpus
    count = problem.gpus // size
    width = len(str(count - 1))
    names = [f"node-{k:0{width}d}" for k in range(count)]
    model_of: list[str | None] = [None] * count
    first = 0
    for pool in problem.pools if problem.pools is not None and len(problem.pools) > 1 else ():
        for k in range(first // size, (first + pool.gpus) // size):
            model_of[k] = pool.model
        first += pool.gpus
    speeds = problem.speed or {}

    def at(tick: int) -> str:
        """The RFC 3339 time of ``tick`` (the calendar's tick_time, with a clock)."""
        moment = tick_time(now, tick, step)
        assert moment is not None
        return moment

    heartbeat = at(0)
    resources = {GPU_RESOURCE: str(size), "cpu": "64", "memory": "512Gi", "pods": "110"}
    items: list[dict[str, Any]] = []
    for host, host_model in zip(names, model_of, strict=True):
        labels = {"kubernetes.io/hostname": host}
        if host_model is not None:
            labels[PRODUCT_LABEL] = host_model
            if host_model in speeds:
                labels[GPU_SPEED_LABEL] = repr(float(speeds[host_model]))
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": host, "labels": labels},
                "spec": {},
                "status": {
                    "allocatable": dict(resources),
                    "capacity": dict(resources),
                    "conditions": [
                        {"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}
                    ],
                },
            }
        )

    def pod(name: str, gpus: int, notes: dict[str, str], **extra: Any) -> dict[str, Any]:
        labels = extra.pop("labels", {})
        spec = {
            "containers": [
                {
                    "name": "main",
                    "image": "workload",
                    "resources": {
                        "requests": {GPU_RESOURCE: str(gpus)},
                        "limits": {GPU_RESOURCE: str(gpus)},
                    },
                }
            ],
            **extra.pop("spec", {}),
        }
        metadata = {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": extra.pop("created", heartbeat),
            "annotations": notes,
        }
        if labels:
            metadata["labels"] = labels
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, **extra}

    def accepting(task: Any) -> tuple[dict[str, str], dict[str, Any]]:
        """G11: a task's models as a node affinity, its own speeds as an annotation."""
        if task.models is None or not any(model_of):
            return {}, {}
        models = list(task.models)
        notes = {}
        if isinstance(task.models, dict):
            notes[MODEL_SPEEDS] = ",".join(f"{m}={float(v)!r}" for m, v in task.models.items())
        term = {"key": PRODUCT_LABEL, "operator": "In", "values": models}
        required = {"nodeSelectorTerms": [{"matchExpressions": [term]}]}
        return notes, {
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
            }
        }

    for task in problem.tasks:
        if task.kind == "realtime":
            assert task.demand is not None
            notes = {DEMAND: _indices(task.demand), VALUE: repr(float(task.priority))}
            if task.history is not None:
                notes[DEMAND_HISTORY] = ",".join(repr(float(v)) for v in task.history)
            if task.max_swap is not None:
                notes[MAX_SWAP] = str(task.max_swap)
            initial = task.initial if task.initial is not None else task.demand[0]
            items.append(
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": task.id, "namespace": namespace, "annotations": notes},
                    "spec": {
                        "replicas": initial,
                        "selector": {"matchLabels": {"app": task.id}},
                        "template": {
                            "metadata": {"labels": {"app": task.id}},
                            "spec": pod(task.id, 1, {})["spec"],
                        },
                    },
                }
            )
            continue
        assert task.gpus is not None and task.duration is not None
        notes = {KIND: task.kind, VALUE: repr(float(task.priority))}
        speed_notes, affinity = accepting(task)
        notes.update(speed_notes)
        members = max(1, task.gpus // size)
        per = task.gpus // members
        gang = {GANG_LABEL: task.id} if members > 1 else {}
        if members > 1:
            items.append(
                {
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": task.id, "namespace": namespace},
                    "spec": {"minMember": members},
                }
            )
        running = task.running
        if running is not None:
            model = model_of[running.first_gpu // size]
            own = task.models if isinstance(task.models, dict) else {}
            speed = own.get(model, speeds.get(model, 1.0)) if model is not None else 1.0
            notes[EXPECTED_END] = at(running.start + model_duration(task.duration, speed))
            if speed != 1.0:  # G11: its work, which its model's speed turns into steps
                notes[WALLTIME] = f"{task.duration * step:g}"
            for m in range(members):
                first = running.first_gpu + m * per
                node, local = divmod(first, size)
                items.append(
                    pod(
                        f"{task.id}-{m}" if members > 1 else task.id,
                        per,
                        {**notes, GPU_INDICES: _indices(range(local, local + per))},
                        labels=gang,
                        created=at(running.start),
                        spec={"nodeName": names[node], **affinity},
                        status={"phase": "Running", "startTime": at(running.start)},
                    )
                )
            continue
        notes[WALLTIME] = f"{task.duration * step:g}"
        if task.deadline is not None:
            notes[DEADLINE] = at(task.deadline)
        gates: dict[str, Any] = {}
        if task.arrival > 0:
            notes[NOT_BEFORE] = at(task.arrival)
            gates = {"schedulingGates": [{"name": NOT_BEFORE}]}
        for m in range(members):
            items.append(
                pod(
                    f"{task.id}-{m}" if members > 1 else task.id,
                    per,
                    dict(notes),
                    labels=gang,
                    spec={**gates, **affinity},
                    status={"phase": "Pending"},
                )
            )
    return {"apiVersion": "v1", "kind": "List", "items": items}
