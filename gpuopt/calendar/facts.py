"""What Kubernetes objects tell the time grid beyond the cluster model (G3-G5, G11 of
``models/calendar.md``): the pods' ``gpuopt.io`` annotations (:class:`PodFacts`) and the
realtime services of annotated Deployments (:class:`Service`), read by
:func:`read_grid_facts`; :mod:`gpuopt.calendar.grid` builds the grid from them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuopt.allocation.problem import MAX_STEPS
from gpuopt.calendar.podtimes import AnnotationReader, kube_objects, parse_time
from gpuopt.cluster.model import Cluster, Pending, Task
from gpuopt.errors import ProblemError, short

#: Annotations the grid reads (G3-G5).
KIND = "gpuopt.io/kind"
VALUE = "gpuopt.io/value"
DEADLINE = "gpuopt.io/deadline"
GPU_INDICES = "gpuopt.io/gpu-indices"
DEMAND = "gpuopt.io/demand"
MAX_SWAP = "gpuopt.io/max-swap"
#: A service's demand in the steps before now, oldest first (GPUs, decimals allowed): what
#: ``gpuopt rolling --forecast seasonal`` learns from (G5).
DEMAND_HISTORY = "gpuopt.io/demand-history"
#: A pod's own speed per GPU model (``A100=1,H100=2.5``), and a node label: its GPU model's
#: default speed (G11).
MODEL_SPEEDS = "gpuopt.io/model-speeds"
GPU_SPEED_LABEL = "gpuopt.io/gpu-speed"
#: The node label of the GPU model (the kubectl reader's ``gpu_model``).
PRODUCT_LABEL = "nvidia.com/gpu.product"
BATCH_KINDS = ("training", "batch_inference", "quantization")


@dataclass(frozen=True)
class PodFacts:
    """What a pod's ``gpuopt.io`` annotations tell the grid (G3, G4), and its input position."""

    position: int
    kind: str | None = None
    value: float | None = None
    deadline: float | None = None
    gpu_indices: tuple[int, ...] | None = None
    speeds: tuple[tuple[str, float], ...] | None = None


@dataclass(frozen=True)
class Service:
    """A realtime service read from a Deployment (G5)."""

    id: str
    position: int
    demand: tuple[int, ...]
    initial: int
    per_replica: int
    max_swap: int | None
    value: float
    namespace: str
    history: tuple[float, ...] | None
    selector: tuple[tuple[str, str], ...]

    def picks(self, namespace: str, labels: Mapping[str, Any]) -> bool:
        """Whether a pod of ``namespace`` with ``labels`` is one of the service's."""
        return (
            bool(self.selector)
            and namespace == self.namespace
            and all(labels.get(key) == value for key, value in self.selector)
        )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _name(item: Mapping[str, Any]) -> tuple[str, str, Mapping[str, Any], Mapping[str, Any]]:
    metadata = item.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    notes = metadata.get("annotations")
    labels = metadata.get("labels")
    return (
        str(metadata.get("namespace") or "default"),
        str(metadata.get("name") or ""),
        notes if isinstance(notes, Mapping) else {},
        labels if isinstance(labels, Mapping) else {},
    )


def _number(text: Any, what: str) -> float:
    try:
        value = float(str(text))
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= 1e9):
        raise ProblemError(f"{what}: {short(text)} is not a number from 0 to 1e9.")
    return value


def _count(text: Any, what: str) -> int:
    value = str(text).strip()
    if not value.isdigit() or int(value) > MAX_STEPS:
        raise ProblemError(f"{what}: {short(text)} is not a whole number from 0 to {MAX_STEPS:,}.")
    return int(value)


def _parts(text: Any, what: str) -> list[str]:
    """The items of a comma- or space-separated list, at least one and at most MAX_STEPS."""
    parts = [part for part in str(text).replace(" ", ",").split(",") if part]
    if not parts or len(parts) > MAX_STEPS:
        raise ProblemError(f"{what}: lists {len(parts):,} numbers (1 to {MAX_STEPS:,}).")
    return parts


def _counts(text: Any, what: str) -> tuple[int, ...]:
    return tuple(_count(part, what) for part in _parts(text, what))


def parse_speeds(text: Any, what: str) -> tuple[tuple[str, float], ...]:
    pairs = []
    for part in str(text).replace(" ", "").split(","):
        model, sep, value = part.partition("=")
        try:
            speed = float(value)
        except ValueError:
            speed = math.nan
        if not sep or not model or not (math.isfinite(speed) and 0 < speed <= 1e6):
            raise ProblemError(
                f"{what}: {short(text)} is not MODEL=SPEED,... with speeds in (0, 1e6]."
            )
        pairs.append((model, speed))
    return tuple(pairs)


def _history(text: Any, what: str) -> tuple[float, ...]:
    return tuple(_number(part, what) for part in _parts(text, what))


def _kind(text: Any, what: str) -> str:
    if text not in BATCH_KINDS:
        raise ProblemError(f"{what}: {short(text)} is not one of {', '.join(BATCH_KINDS)}.")
    return str(text)


def _gpus_of(spec: Any) -> int:
    """GPUs a pod spec asks for: its containers' ``<vendor>/gpu`` limits (else requests)."""
    total = 0
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    for container in containers if isinstance(containers, list) else ():
        resources = container.get("resources") if isinstance(container, Mapping) else None
        if not isinstance(resources, Mapping):
            continue
        for part in ("limits", "requests"):
            amounts = resources.get(part)
            if isinstance(amounts, Mapping):
                found = [v for k, v in amounts.items() if str(k).endswith("/gpu")]
                if found:
                    total += sum(int(str(v)) for v in found if str(v).isdigit())
                    break
    return total


def _pod_facts(
    notes: AnnotationReader, annotations: Mapping[str, Any], owner: str, position: int
) -> PodFacts:
    """One pod's :class:`PodFacts` from its annotations."""
    indices = notes.read(annotations, GPU_INDICES, _counts, owner=owner)
    return PodFacts(
        position=position,
        kind=notes.read(annotations, KIND, _kind, owner=owner),
        value=notes.read(annotations, VALUE, _number, owner=owner),
        deadline=notes.read(annotations, DEADLINE, parse_time, owner=owner),
        gpu_indices=None if indices is None else tuple(indices),
        speeds=notes.read(annotations, MODEL_SPEEDS, parse_speeds, owner=owner),
    )


def cluster_facts(cluster: Cluster, report: Any, *, strict: bool = False) -> dict[str, PodFacts]:
    """The :class:`PodFacts` of every running task and waiting pod of ``cluster``, read from
    the ``annotations`` the cluster model keeps (a ``gpuopt snapshot`` of kubectl output keeps
    them), as :func:`read_grid_facts` reads the pods themselves; positions in the
    cluster's order, tasks first. ``report`` counts a bad annotation (``bad-annotation``).

    >>> from gpuopt.cluster.model import Cluster, Pending, Task
    >>> cluster = Cluster(nodes=[{"id": "n", "gpus": 8, "cpus": 8}], tasks=[], pending=[
    ...     {"id": "ml/p", "gpus": 1, "annotations": {"gpuopt.io/kind": "batch_inference"}}])
    >>> cluster_facts(cluster, None)["ml/p"].kind
    'batch_inference'
    """
    notes = AnnotationReader(report, strict)
    pods: list[Task | Pending] = [*cluster.tasks, *cluster.pending]
    return {
        pod.id: _pod_facts(notes, pod.annotations, f"pod {pod.id}", position)
        for position, pod in enumerate(pods)
    }


def read_grid_facts(
    decoded: Sequence[Any], report: Any, *, strict: bool = False
) -> tuple[dict[str, PodFacts], list[Service], list[Any]]:
    """The pods' grid annotations (by pod id), the realtime services (G5), and the objects
    without the services' pods and Deployments (what the kubectl reader then reads).
    ``report`` is the grid's :class:`~gpuopt.calendar.grid.GridReport` (its ``note``,
    ``services`` and ``service_pods`` are filled in)."""
    notes = AnnotationReader(report, strict)
    facts: dict[str, PodFacts] = {}
    services: list[Service] = []
    objects = list(kube_objects(decoded))
    for position, item in enumerate(objects):
        if item.get("kind") != "Deployment":
            continue
        namespace, name, annotations, _ = _name(item)
        if DEMAND not in annotations:
            continue
        owner = f"deployment {namespace}/{name}"
        demand = notes.read(annotations, DEMAND, _counts, owner=owner)
        if demand is None:
            continue
        spec = _mapping(item.get("spec"))
        replicas = spec.get("replicas", 1)
        per = _gpus_of(_mapping(spec.get("template")).get("spec"))
        selector = _mapping(spec.get("selector"))
        labels = _mapping(selector.get("matchLabels"))
        if selector.get("matchExpressions"):
            report.note("selector-expressions", owner, ignored=True)
        swap = notes.read(annotations, MAX_SWAP, _count, owner=owner)
        history = notes.read(annotations, DEMAND_HISTORY, _history, owner=owner)
        if not labels:
            report.note("service-without-selector", owner)
        value = notes.read(annotations, VALUE, _number, owner=owner)
        services.append(
            Service(
                id=name if namespace == "default" else f"{namespace}/{name}",
                position=position,
                demand=demand,
                initial=(replicas if isinstance(replicas, int) and replicas >= 0 else 1)
                * max(per, 1),
                per_replica=max(per, 1),
                max_swap=swap,
                value=1.0 if value is None else value,
                namespace=namespace,
                history=history,
                selector=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
            )
        )
    kept: list[Any] = []
    for position, item in enumerate(objects):
        kind = item.get("kind", "Pod")
        namespace, name, annotations, labels = _name(item)
        if kind == "Deployment" and DEMAND in annotations:
            continue
        if kind == "Pod":
            if any(service.picks(namespace, labels) for service in services):
                report.service_pods += 1
                continue
            pod = f"{namespace}/{name}"
            facts[pod] = _pod_facts(notes, annotations, f"pod {pod}", position)
        kept.append(item)
    report.services = len(services)
    return facts, services, kept
