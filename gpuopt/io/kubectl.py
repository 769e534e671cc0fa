"""Read the JSON of ``kubectl get nodes,pods -A -o json`` into a defragmentation snapshot.

The input is a ``{"kind": "List", "items": [...]}`` object whose items are of
kind ``Node`` and ``Pod`` (a ``NodeList`` or ``PodList`` from the API, whose
items carry no kind, is read too). Items of other kinds are ignored. Every
mapping below is what :func:`read_kubectl` does; the label, annotation and
resource names are keyword arguments.

Nodes (``Node`` items, in order)
--------------------------------
* ``id`` = ``metadata.name``; ``labels`` = ``metadata.labels``.
* ``gpus``, ``cpus``, ``memory`` from ``status.allocatable``, each resource
  falling back to ``status.capacity`` when allocatable does not list it:
  ``gpus`` = ``nvidia.com/gpu`` (a whole number; 0 when absent), ``cpus`` =
  ``cpu`` in cores (required), ``memory`` = ``memory`` in MiB (None when
  absent, and memory is then not checked on the node).
* ``asw`` = the node label ``gpuopt.io/asw`` (None when absent).

Pods (``Pod`` items, in order)
------------------------------
* Skipped: pods without ``spec.nodeName`` (not bound to a node) and pods whose
  ``status.phase`` is ``Succeeded`` or ``Failed`` (they hold nothing). Pending,
  Running, Unknown and terminating pods on a node are kept: they hold their
  requests.
* ``id`` = ``"<metadata.namespace>/<metadata.name>"`` (namespace ``default``
  when absent); ``node`` = ``spec.nodeName``.
* ``gpus``, ``cpus``, ``memory``: the pod's requests as the Kubernetes
  scheduler counts them. A container's request for a resource is
  ``resources.requests[r]``, else ``resources.limits[r]`` (the API server
  defaults a missing request to the limit, and GPUs are often given only as
  limits), else 0. The pod's request is the sum over ``spec.containers``, plus
  the sidecar init containers (``restartPolicy: Always``), raised to the
  largest ordinary init container (plus the sidecars started before it) when
  that is larger, plus ``spec.overhead``. GPUs must come to a whole number.
* ``node_selector`` = ``spec.nodeSelector``; a required node affinity with
  exactly one term whose expressions all use the ``In`` operator adds one
  any-of entry per key (``{"key": [values]}``, a single value as a string).
* ``locked`` when the annotation ``gpuopt.io/locked`` is ``"true"``
  (any case), and also, because the model could not keep them where they
  belong, for DaemonSet pods (an owner of kind ``DaemonSet``), static pods
  (annotation ``kubernetes.io/config.mirror``) and pods with any other
  required node affinity.
* ``anti_affinity`` = the pod label ``gpuopt.io/anti-affinity`` (pod
  anti-affinity rules themselves and topology spread constraints are not
  read).
* ``priority`` = the pod label ``gpuopt.io/priority``, ``"HP"`` or ``"LP"``
  (any case); ``"LP"`` when absent.
* ``gpu_milli`` is not set (Kubernetes has no standard GPU-share request).

Units: CPUs are in cores, rounded up to a thousandth like the scheduler's
milli-CPU accounting; memory is in MiB (bytes / 2**20, bytes rounded up like
the scheduler, MiB rounded down to a thousandth, so pods that fit a node in
bytes still fit it in MiB). Quantities are read by :func:`parse_quantity`.

Errors: a malformed file or item raises :class:`~gpuopt.errors.ProblemError`
with one sentence naming the item and field; a cluster the snapshot model
rejects (for instance a node whose allocatable GPUs dropped below what its pods
hold, or a pod on a node whose labels no longer match its selector) raises the
model's one-sentence error.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn

from gpuopt.defrag.problem import MAX_NODE_GPUS, DefragProblem
from gpuopt.errors import ProblemError, short, validate_object
from gpuopt.io.files import read_json

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?"
)
#: Quantity suffixes: binary ones are powers of 1024, decimal ones powers of 10.
_BINARY = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX: dict[str, Fraction] = {
    **{suffix: Fraction(1024) ** power for power, suffix in enumerate(_BINARY, start=1)},
    **{suffix: Fraction(10) ** power for suffix, power in _DECIMAL.items()},
}
#: Largest decimal exponent accepted (``1e30`` is already far beyond any resource).
_MAX_EXPONENT = 30
_MIB = 2**20
_DONE_PHASES = frozenset({"Succeeded", "Failed"})
_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a Kubernetes quantity (``"500m"``, ``"1.5Gi"``, ``"1e3"``, ...).

    Accepts the Kubernetes grammar: a signed decimal number, then nothing, a
    binary suffix (``Ki Mi Gi Ti Pi Ei``), a decimal suffix (``n u m k M G T
    P E``) or a decimal exponent (``e3``, ``E-2``). JSON numbers are accepted
    too.

    Parameters
    ----------
    value
        The quantity, as found in a resource list.

    Returns
    -------
    Fraction
        Its exact value (cores for CPUs, bytes for memory).

    Raises
    ------
    ValueError
        When ``value`` is not a quantity.

    Examples
    --------
    >>> parse_quantity("500m")
    Fraction(1, 2)
    >>> parse_quantity("96"), parse_quantity("1.5")
    (Fraction(96, 1), Fraction(3, 2))
    >>> parse_quantity("512Gi") / 2**20  # in MiB
    Fraction(524288, 1)
    >>> [int(parse_quantity(q)) for q in ("1000Mi", "123456Ki", "1G", "1e3", "2E")]
    [1048576000, 126418944, 1000000000, 1000, 2000000000000000000]
    >>> parse_quantity("12x")
    Traceback (most recent call last):
    ...
    ValueError: '12x' is not a Kubernetes quantity
    """
    if isinstance(value, bool):
        raise ValueError(f"{short(value)} is not a Kubernetes quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{short(value)} is not a Kubernetes quantity")
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"{short(value)} is not a Kubernetes quantity")
    match = _QUANTITY.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"{short(value)} is not a Kubernetes quantity")
    number = Fraction(match["number"])
    if match["exponent"]:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"{short(value)} is out of range")
        return number * Fraction(10) ** exponent
    if match["suffix"]:
        return number * _SUFFIX[match["suffix"]]
    return number


class _Reader:
    """Typed access to the decoded JSON, with one-sentence errors naming item and field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, text: str) -> NoReturn:
        raise ProblemError(f"{self.source}: {where}: {text}.")

    def mapping(self, parent: Mapping[str, Any], key: str, where: str, path: str) -> dict[str, Any]:
        """``parent[key]`` as an object; absent or null gives ``{}``."""
        value = parent.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(where, f"{path} must be an object (got {type(value).__name__})")
        return value

    def listing(self, parent: Mapping[str, Any], key: str, where: str, path: str) -> list[Any]:
        """``parent[key]`` as a list; absent or null gives ``[]``."""
        value = parent.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(where, f"{path} must be a list (got {type(value).__name__})")
        return value

    def text(self, parent: Mapping[str, Any], key: str, where: str, path: str) -> str | None:
        """``parent[key]`` as a string; absent, null or empty gives None."""
        value = parent.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            self.fail(where, f"{path} must be a string (got {short(value)})")
        return value

    def strings(self, parent: Mapping[str, Any], key: str, where: str, path: str) -> dict[str, str]:
        """``parent[key]`` as a string-to-string map (labels, annotations, selectors)."""
        value = self.mapping(parent, key, where, path)
        for name, item in value.items():
            if not isinstance(item, str):
                self.fail(where, f"{path}.{short(name)[1:-1]} must be a string (got {short(item)})")
        return value

    def quantity(self, value: Any, where: str, path: str) -> Fraction:
        try:
            amount = parse_quantity(value)
        except ValueError as exc:
            self.fail(where, f"{path}: {exc}")
        if amount < 0:
            self.fail(where, f"{path} is negative ({short(value)})")
        return amount

    def resources(
        self, parent: Mapping[str, Any], keys: tuple[str, ...], where: str, path: str
    ) -> dict[str, Fraction]:
        """A container's requests for ``keys``: requests, else limits, else 0."""
        resources = self.mapping(parent, "resources", where, f"{path}.resources")
        requests = self.mapping(resources, "requests", where, f"{path}.resources.requests")
        limits = self.mapping(resources, "limits", where, f"{path}.resources.limits")
        amounts: dict[str, Fraction] = {}
        for key in keys:
            if key in requests:
                amounts[key] = self.quantity(
                    requests[key], where, f"{path}.resources.requests.{key}"
                )
            elif key in limits:
                amounts[key] = self.quantity(limits[key], where, f"{path}.resources.limits.{key}")
            else:
                amounts[key] = Fraction(0)
        return amounts


def _cpus(amount: Fraction) -> float:
    """Cores, rounded up to a milli-CPU."""
    return math.ceil(amount * 1000) / 1000


def _mebibytes(amount: Fraction) -> float:
    """Bytes (rounded up to a byte) in MiB, rounded down to a thousandth."""
    return math.floor(Fraction(math.ceil(amount)) * 1000 / _MIB) / 1000


def _whole_gpus(reader: _Reader, amount: Fraction, where: str, path: str) -> int:
    if amount.denominator != 1:
        reader.fail(where, f"{path} is {float(amount):g}, not a whole number of GPUs")
    if amount > MAX_NODE_GPUS:  # named here, with the item, rather than as a snapshot field
        reader.fail(where, f"{path} is {float(amount):g}, more than {MAX_NODE_GPUS} GPUs")
    return int(amount)


def _read_node(
    reader: _Reader, item: Mapping[str, Any], where: str, asw_label: str, gpu_resource: str
) -> dict[str, Any]:
    metadata = reader.mapping(item, "metadata", where, "metadata")
    name = reader.text(metadata, "name", where, "metadata.name")
    if name is None:
        reader.fail(where, "metadata.name is missing")
    where = f"{where} (Node {short(name)})"
    labels = reader.strings(metadata, "labels", where, "metadata.labels")
    status = reader.mapping(item, "status", where, "status")
    allocatable = reader.mapping(status, "allocatable", where, "status.allocatable")
    capacity = reader.mapping(status, "capacity", where, "status.capacity")

    def amount(key: str) -> tuple[Fraction | None, str]:
        for field, table in (("allocatable", allocatable), ("capacity", capacity)):
            if key in table:
                path = f"status.{field}.{key}"
                return reader.quantity(table[key], where, path), path
        return None, f"status.allocatable.{key}"

    gpus, gpu_path = amount(gpu_resource)
    cpus, cpu_path = amount("cpu")
    memory, _ = amount("memory")
    if cpus is None:
        reader.fail(where, f"{cpu_path} is missing (and status.capacity.cpu too)")
    node: dict[str, Any] = {
        "id": name,
        "gpus": 0 if gpus is None else _whole_gpus(reader, gpus, where, gpu_path),
        "cpus": _cpus(cpus),
        "labels": labels,
    }
    if memory is not None:
        node["memory"] = _mebibytes(memory)
    asw = labels.get(asw_label)
    if asw:
        node["asw"] = asw
    return node


def _pod_requests(
    reader: _Reader, spec: Mapping[str, Any], keys: tuple[str, ...], where: str
) -> dict[str, Fraction]:
    """The pod's requests as the scheduler counts them (containers, init containers, overhead)."""
    total = dict.fromkeys(keys, Fraction(0))
    for position, container in enumerate(
        reader.listing(spec, "containers", where, "spec.containers")
    ):
        path = f"spec.containers[{position}]"
        if not isinstance(container, dict):
            reader.fail(where, f"{path} must be an object")
        for key, value in reader.resources(container, keys, where, path).items():
            total[key] += value
    sidecars = dict.fromkeys(keys, Fraction(0))
    init_peak = dict.fromkeys(keys, Fraction(0))
    init_containers = reader.listing(spec, "initContainers", where, "spec.initContainers")
    for position, container in enumerate(init_containers):
        path = f"spec.initContainers[{position}]"
        if not isinstance(container, dict):
            reader.fail(where, f"{path} must be an object")
        amounts = reader.resources(container, keys, where, path)
        sidecar = container.get("restartPolicy") == "Always"
        for key in keys:
            if sidecar:
                total[key] += amounts[key]
                sidecars[key] += amounts[key]
                running = sidecars[key]
            else:
                running = amounts[key] + sidecars[key]
            init_peak[key] = max(init_peak[key], running)
    overhead = reader.mapping(spec, "overhead", where, "spec.overhead")
    for key in keys:
        total[key] = max(total[key], init_peak[key])
        if key in overhead:
            total[key] += reader.quantity(overhead[key], where, f"spec.overhead.{key}")
    return total


def _affinity_selector(
    reader: _Reader, spec: Mapping[str, Any], where: str
) -> tuple[dict[str, list[str]], bool]:
    """Selector entries from a required node affinity, and whether some of it cannot be kept."""
    affinity = reader.mapping(spec, "affinity", where, "spec.affinity")
    node_affinity = reader.mapping(affinity, "nodeAffinity", where, "spec.affinity.nodeAffinity")
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = reader.mapping(
        node_affinity, "requiredDuringSchedulingIgnoredDuringExecution", where, path
    )
    terms = reader.listing(required, "nodeSelectorTerms", where, f"{path}.nodeSelectorTerms")
    if not terms:
        return {}, False
    term = terms[0]
    if len(terms) != 1 or not isinstance(term, dict) or term.get("matchFields"):
        return {}, True
    selector: dict[str, list[str]] = {}
    expressions = reader.listing(
        term, "matchExpressions", where, f"{path}.nodeSelectorTerms[0].matchExpressions"
    )
    for expression in expressions:
        if not isinstance(expression, dict) or expression.get("operator") != "In":
            return {}, True
        key, values = expression.get("key"), expression.get("values")
        if (
            not isinstance(key, str)
            or not isinstance(values, list)
            or not values
            or not all(isinstance(value, str) for value in values)
        ):
            return {}, True
        kept = values if key not in selector else [v for v in selector[key] if v in values]
        if not kept:
            return {}, True
        selector[key] = list(dict.fromkeys(kept))
    return selector, False


def _read_pod(
    reader: _Reader,
    item: Mapping[str, Any],
    where: str,
    *,
    lock_annotation: str,
    group_label: str,
    priority_label: str,
    gpu_resource: str,
) -> dict[str, Any] | None:
    metadata = reader.mapping(item, "metadata", where, "metadata")
    name = reader.text(metadata, "name", where, "metadata.name")
    if name is None:
        reader.fail(where, "metadata.name is missing")
    namespace = reader.text(metadata, "namespace", where, "metadata.namespace") or "default"
    task_id = f"{namespace}/{name}"
    where = f"{where} (Pod {short(task_id)})"
    spec = reader.mapping(item, "spec", where, "spec")
    status = reader.mapping(item, "status", where, "status")
    node = reader.text(spec, "nodeName", where, "spec.nodeName")
    if node is None or reader.text(status, "phase", where, "status.phase") in _DONE_PHASES:
        return None
    keys = (gpu_resource, "cpu", "memory")
    requests = _pod_requests(reader, spec, keys, where)
    labels = reader.strings(metadata, "labels", where, "metadata.labels")
    annotations = reader.strings(metadata, "annotations", where, "metadata.annotations")
    selector: dict[str, str | list[str]] = dict(
        reader.strings(spec, "nodeSelector", where, "spec.nodeSelector")
    )
    from_affinity, unrepresented = _affinity_selector(reader, spec, where)
    for key, values in from_affinity.items():
        if key not in selector:  # a nodeSelector equality is at least as strict
            selector[key] = values[0] if len(values) == 1 else values
    owners = reader.listing(metadata, "ownerReferences", where, "metadata.ownerReferences")
    pinned = (
        unrepresented
        or _MIRROR_ANNOTATION in annotations
        or any(isinstance(owner, dict) and owner.get("kind") == "DaemonSet" for owner in owners)
    )
    priority = labels.get(priority_label, "LP").upper()
    if priority not in ("HP", "LP"):
        reader.fail(
            where,
            f"metadata.labels.{priority_label} must be 'HP' or 'LP' "
            f"(got {short(labels[priority_label])})",
        )
    task: dict[str, Any] = {
        "id": task_id,
        "node": node,
        "gpus": _whole_gpus(reader, requests[gpu_resource], where, f"the {gpu_resource} request"),
        "cpus": _cpus(requests["cpu"]),
        "memory": _mebibytes(requests["memory"]),
        "locked": pinned or annotations.get(lock_annotation, "").lower() == "true",
        "priority": priority,
        "node_selector": selector,
    }
    group = labels.get(group_label)
    if group:
        task["anti_affinity"] = group
    return task


def read_kubectl(
    data_or_path: str | os.PathLike[str] | Mapping[str, Any],
    *,
    asw_label: str = "gpuopt.io/asw",
    lock_annotation: str = "gpuopt.io/locked",
    group_label: str = "gpuopt.io/anti-affinity",
    priority_label: str = "gpuopt.io/priority",
    gpu_resource: str = "nvidia.com/gpu",
    name: str | None = None,
) -> DefragProblem:
    """A snapshot from the JSON of ``kubectl get nodes,pods -A -o json``.

    The mapping of every field is in the module docstring.

    Parameters
    ----------
    data_or_path
        The decoded JSON (a mapping) or the path of a file holding it.
    asw_label
        Node label holding the node's access switch.
    lock_annotation
        Pod annotation that, when ``"true"``, locks the pod in place.
    group_label
        Pod label holding its anti-affinity group (at most one per node).
    priority_label
        Pod label holding ``"HP"`` or ``"LP"`` (default ``"LP"``).
    gpu_resource
        Extended resource name of the GPUs.
    name
        Snapshot name; default the file name without extension, or ``"kubectl"``.

    Returns
    -------
    DefragProblem
        The validated snapshot: nodes in item order, then the bound pods.

    Raises
    ------
    ProblemError
        With one sentence naming the item and field, for a missing or
        malformed file or item, or for a cluster the snapshot model rejects.

    Examples
    --------
    >>> problem = read_kubectl({"kind": "List", "items": [
    ...     {"kind": "Node", "metadata": {"name": "n1"},
    ...      "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}}},
    ...     {"kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
    ...      "spec": {"nodeName": "n1", "containers": [{"resources": {
    ...          "requests": {"cpu": "500m", "memory": "1Gi"},
    ...          "limits": {"nvidia.com/gpu": "1"}}}]},
    ...      "status": {"phase": "Running"}}]})
    >>> task = problem.tasks[0]
    >>> task.id, task.node, task.gpus, task.cpus, task.memory
    ('ml/p', 'n1', 1, 0.5, 1024.0)
    """
    if isinstance(data_or_path, Mapping):
        data: Any = data_or_path
        source = "kubectl JSON"
        default_name = "kubectl"
    elif isinstance(data_or_path, str | os.PathLike):
        path = Path(data_or_path)
        data = read_json(path)
        source = str(path)
        default_name = path.stem or "kubectl"
    else:
        raise ProblemError(
            f"kubectl input: expected a path or a decoded JSON object "
            f"(got {type(data_or_path).__name__})."
        )
    reader = _Reader(source)
    if not isinstance(data, Mapping):
        raise ProblemError(
            f"{source}: expected a JSON object with items (got {type(data).__name__})."
        )
    if "items" not in data:
        reader.fail("the top level", "items is missing (expected kubectl get -o json output)")
    items = reader.listing(data, "items", "the top level", "items")
    implied = {"NodeList": "Node", "PodList": "Pod"}.get(str(data.get("kind")))
    nodes: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    for position, item in enumerate(items):
        where = f"items[{position}]"
        if not isinstance(item, dict):
            reader.fail(where, f"must be an object (got {type(item).__name__})")
        kind = item.get("kind", implied)
        if kind is None:
            reader.fail(where, "kind is missing")
        if kind == "Node":
            nodes.append(_read_node(reader, item, where, asw_label, gpu_resource))
        elif kind == "Pod":
            task = _read_pod(
                reader,
                item,
                where,
                lock_annotation=lock_annotation,
                group_label=group_label,
                priority_label=priority_label,
                gpu_resource=gpu_resource,
            )
            if task is not None:
                tasks.append(task)
    snapshot = {"name": name or default_name, "nodes": nodes, "tasks": tasks}
    return validate_object(DefragProblem, snapshot, what="a snapshot", source=source)


__all__ = ["parse_quantity", "read_kubectl"]
