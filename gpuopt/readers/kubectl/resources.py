"""What a pod requests, as the scheduler counts it: resources, whole GPUs, shares of one GPU.

Per container ``requests[r]``, else ``limits[r]``; the sum over containers and
sidecars, raised to the largest init container, plus ``spec.overhead``; a bound pod
resized in place counts, per container and sidecar, the largest of the desired, actual
and allocated amounts (KEP-1287, as kube-scheduler). A pod
asking for a share of one GPU (KAI Scheduler's annotations, Alibaba's
``gpu-milli``, GPU memory resources) is read as ``gpus=1`` with ``gpu_milli``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from gpuopt.cluster.model import MAX_NODE_GPUS
from gpuopt.errors import short
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.fields import Reader, whole
from gpuopt.readers.kubectl.names import (
    GPU_COUNT_ANNOTATION,
    GPU_FRACTION_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    GPU_MEMORY_RESOURCES,
    GPU_MILLI_RESOURCE,
)


def container_requests(
    reader: Reader, container: Mapping[str, Any], path: str
) -> dict[str, Fraction]:
    """A container's requests: ``requests[r]``, else ``limits[r]`` (the API's default)."""
    resources = reader.mapping(container, "resources", f"{path}.resources")
    amounts: dict[str, Fraction] = {}
    for field_name in ("limits", "requests"):  # requests override limits
        table = reader.mapping(resources, field_name, f"{path}.resources.{field_name}")
        for key, value in table.items():
            amounts[key] = reader.quantity(value, f"{path}.resources.{field_name}.{key}")
    return amounts


def _resized(
    reader: Reader,
    status: Mapping[str, Any],
    field: str,
) -> tuple[dict[str, dict[str, Fraction]], bool]:
    """In-place resize (KEP-1287): per container name in ``status.<field>``, the larger of
    what its ``resources.requests`` (actual) and ``allocatedResources`` state, per
    resource; and whether a resize is infeasible (``PodResizePending`` with reason
    ``Infeasible``, or the older ``status.resize: Infeasible``), when the spec's desired
    requests do not count."""
    found: dict[str, dict[str, Fraction]] = {}
    for position, state in enumerate(reader.objects(status, field, f"status.{field}")):
        name = state.get("name")
        if not isinstance(name, str) or state.get("resources") is None:
            continue  # (kube-scheduler reads a status only when it states resources)
        path = f"status.{field}[{position}]"
        amounts: dict[str, Fraction] = {}
        actual = reader.mapping(
            reader.mapping(state, "resources", f"{path}.resources"),
            "requests",
            f"{path}.resources.requests",
        )
        allocated = reader.mapping(state, "allocatedResources", f"{path}.allocatedResources")
        for where, table in (("resources.requests", actual), ("allocatedResources", allocated)):
            for key, value in table.items():
                amount = reader.quantity(value, f"{path}.{where}.{key}")
                amounts[key] = max(amounts.get(key, Fraction(0)), amount)
        found[name] = amounts
    conditions = reader.objects(status, "conditions", "status.conditions")
    infeasible = status.get("resize") == "Infeasible" or any(
        c.get("type") == "PodResizePending"
        and c.get("status") == "True"
        and c.get("reason") == "Infeasible"
        for c in conditions
    )
    return found, infeasible


def _observed(
    desired: dict[str, Fraction],
    container: Mapping[str, Any],
    states: Mapping[str, dict[str, Fraction]],
    infeasible: bool,
) -> dict[str, Fraction]:
    """A running container's requests as kube-scheduler counts them during an in-place
    resize: per resource the largest of the desired (the spec's, unless the resize is
    infeasible), the actual and the allocated amounts."""
    state = states.get(str(container.get("name")))
    if state is None:
        return desired
    base = {} if infeasible else dict(desired)
    for key, amount in state.items():
        base[key] = max(base.get(key, Fraction(0)), amount)
    return base


def pod_requests(
    reader: Reader, spec: Mapping[str, Any], status: Mapping[str, Any] | None = None
) -> dict[str, Fraction]:
    """The pod's requests as the scheduler counts them (containers, init containers,
    overhead); with a bound pod's ``status``, its containers' and sidecars' as an in-place
    resize leaves them (the largest of desired, actual and allocated per resource, as
    kube-scheduler's ``PodRequests(UseStatusResources)``)."""
    states: dict[str, dict[str, Fraction]] = {}
    sidecar_states: dict[str, dict[str, Fraction]] = {}
    infeasible = False
    if status:
        states, infeasible = _resized(reader, status, "containerStatuses")
        sidecar_states, _ = _resized(reader, status, "initContainerStatuses")
    total: defaultdict[str, Fraction] = defaultdict(Fraction)
    for position, container in enumerate(reader.objects(spec, "containers", "spec.containers")):
        amounts = container_requests(reader, container, f"spec.containers[{position}]")
        for key, value in _observed(amounts, container, states, infeasible).items():
            total[key] += value
    sidecars: defaultdict[str, Fraction] = defaultdict(Fraction)
    init_peak: defaultdict[str, Fraction] = defaultdict(Fraction)
    init_containers = reader.objects(spec, "initContainers", "spec.initContainers")
    for position, container in enumerate(init_containers):
        amounts = container_requests(reader, container, f"spec.initContainers[{position}]")
        sidecar = container.get("restartPolicy") == "Always"
        if sidecar:  # (a sidecar is resized as a container; an ordinary init container not)
            amounts = _observed(amounts, container, sidecar_states, infeasible)
        for key in {*amounts, *sidecars}:
            amount = amounts.get(key, Fraction(0))
            if sidecar:
                total[key] += amount
                sidecars[key] += amount
                running = sidecars[key]
            else:
                running = amount + sidecars[key]
            init_peak[key] = max(init_peak[key], running)
    # pod-level resources (PodLevelResources): the pod's request for what they name
    pod_level = reader.mapping(
        reader.mapping(spec, "resources", "spec.resources"), "requests", "spec.resources.requests"
    )
    for key, value in pod_level.items():
        total[key] = reader.quantity(value, f"spec.resources.requests.{key}")
        init_peak.pop(key, None)
    overhead = reader.mapping(spec, "overhead", "spec.overhead")
    for key in {*init_peak, *overhead}:
        total[key] = max(total[key], init_peak[key])
        if key in overhead:
            total[key] += reader.quantity(overhead[key], f"spec.overhead.{key}")
    return dict(total)


def pod_gpus(
    ctx: Context,
    reader: Reader,
    requests: Mapping[str, Fraction],
    annotations: Mapping[str, str],
    node: str | None,
    pod_id: str,
) -> tuple[int, int | None]:
    """Its GPUs and, for a share of one GPU, the share in thousandths."""
    gpus = 0
    for key, amount in requests.items():
        if ctx.options.is_gpu(key):
            path = f"the {key} request"
            gpus += whole(reader, amount, path, limit=MAX_NODE_GPUS, unit="GPUs")
    if gpus > 1:
        return gpus, None
    share: Fraction | None = None  # of one GPU
    milli = requests.get(GPU_MILLI_RESOURCE, Fraction(0))
    if 0 < milli < 1000:
        share = milli / 1000
    elif gpus == 0 and milli >= 1000:  # whole GPUs in thousandths
        return whole(
            reader,
            milli / 1000,
            f"the {GPU_MILLI_RESOURCE} request / 1000",
            limit=MAX_NODE_GPUS,
            unit="GPUs",
        ), None
    elif gpus == 0 and GPU_MILLI_RESOURCE in annotations:
        count, share = _openb_annotations(reader, annotations)
        if share is None:
            return count, None
    elif gpus == 0 and GPU_FRACTION_ANNOTATION in annotations:
        share = _share(reader, annotations[GPU_FRACTION_ANNOTATION])
        if share > 1:
            reader.fail(f"metadata.annotations.{GPU_FRACTION_ANNOTATION} is more than 1")
    elif gpus == 0 and GPU_MEMORY_ANNOTATION in annotations:
        wanted = _share(reader, annotations[GPU_MEMORY_ANNOTATION])
        size = ctx.gpu_memory.get(node or "")
        if size is None:
            ctx.note("fraction-whole", pod_id)
            return 1, None
        share = min(Fraction(1), wanted / size)
    elif gpus == 0 and any(requests.get(key, 0) > 0 for key in GPU_MEMORY_RESOURCES):
        key = next(key for key in GPU_MEMORY_RESOURCES if requests.get(key, 0) > 0)
        pool = ctx.gpu_memory_pool.get((node or "", key))
        if pool is None:
            ctx.note("fraction-whole", pod_id)
            return 1, None
        share = min(Fraction(1), requests[key] / pool)
    if share is None or share == 1:
        return max(gpus, 0 if share is None else 1), None
    ctx.note("fraction", pod_id)
    return 1, min(999, max(1, math.ceil(share * 1000)))


def _openb_annotations(
    reader: Reader, annotations: Mapping[str, str]
) -> tuple[int, Fraction | None]:
    """Whole GPUs, or a share of one, from the openb simulator's pod annotations.

    The FGD simulator (and the openb trace it replays) writes a pod's GPUs as
    annotations: ``alibabacloud.com/gpu-milli`` per GPU (1000 is a whole
    one) and ``alibabacloud.com/gpu-count`` GPUs (1 when absent).
    """
    milli = _share(reader, annotations[GPU_MILLI_RESOURCE])
    count_text = annotations.get(GPU_COUNT_ANNOTATION, "1")
    count = _share(reader, count_text)
    if count.denominator != 1:
        reader.fail(
            f"metadata.annotations.{GPU_COUNT_ANNOTATION} is {short(count_text)}, "
            "not a whole number of GPUs"
        )
    if milli >= 1000:
        amount = count * milli / 1000
        return whole(
            reader,
            amount,
            f"metadata.annotations.{GPU_MILLI_RESOURCE} x {GPU_COUNT_ANNOTATION} / 1000",
            limit=MAX_NODE_GPUS,
            unit="GPUs",
        ), None
    if count != 1:
        reader.fail(
            f"metadata.annotations.{GPU_MILLI_RESOURCE} is a share of one GPU "
            f"({short(annotations[GPU_MILLI_RESOURCE])}) but {GPU_COUNT_ANNOTATION} is "
            f"{short(count_text)}"
        )
    return 0, milli / 1000


def _share(reader: Reader, text: str) -> Fraction:
    """A GPU-sharing annotation's positive number."""
    try:
        amount = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        reader.fail(f"the GPU-sharing annotation {short(text)} is not a number")
    if amount <= 0:
        reader.fail(f"the GPU-sharing annotation {short(text)} is not positive")
    return amount
