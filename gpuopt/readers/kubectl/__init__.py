"""Read ``kubectl get ... -o json`` or ``-o yaml`` output into a cluster snapshot.

:func:`read_kubernetes` reads one or several files or folders (or decoded
objects) holding Nodes, Pods, PodDisruptionBudgets and PriorityClasses
(together or apart; PersistentVolumeClaims and PersistentVolumes too, to tell
local volumes from network ones; PodGroups, for gangs) and returns the
:class:`~gpuopt.cluster.Cluster` and a :class:`KubectlReport` that counts, by
reason, every object skipped or simplified. :func:`read_kubectl` is the older
entry point: one input, the cluster only, and (because it has no report to
return) strict by default.
``docs/kubernetes.md`` explains the choices below for operators.

Inputs
------
* A file ending in ``.json`` is JSON; any other file is YAML (one or several
  documents separated by ``---``). A folder is every ``*.json``, ``*.yaml``
  and ``*.yml`` file in it (not below), in name order.
* A document is a list (``kind: List``, ``NodeList``, ``PodList``,
  ``PodDisruptionBudgetList``, ``PriorityClassList``, ...; the items of a
  typed list may omit ``kind``) or a single object. An object without
  ``kind`` (client-go's JSON) takes it from its fields (reported). Objects of
  other kinds are counted and ignored; an object read twice (same kind and
  name) is kept once.

Nodes
-----
* ``id`` = ``metadata.name``; ``labels`` = ``metadata.labels`` (all kept,
  ``nvidia.com/gpu.memory`` included).
* Resources from ``status.allocatable``; a resource it lacks is taken from
  ``status.capacity`` (reported). ``cpus`` = ``cpu`` in cores (required),
  ``memory`` = ``memory`` in MiB (None when absent: not checked).
* ``gpus`` = the sum of the GPU resources: the names given as
  ``gpu_resources``, by default every ``<vendor>/gpu`` and
  ``<vendor>/gpu-count`` and ``<vendor>/gpu-number`` (``nvidia.com/gpu``,
  ``amd.com/gpu``, ``alibabacloud.com/gpu-count``, ``volcano.sh/gpu-number``,
  ...). Whole numbers only. A node with neither ``status.allocatable`` nor
  ``status.capacity`` is read empty and locked (reported).
* ``resources`` = every other allocatable resource as an integer, rounded
  down (MIG profiles ``nvidia.com/mig-*``, RDMA devices, ``hugepages-*`` and
  ``ephemeral-storage`` in bytes, ...), except ``cpu``, ``memory``, ``pods``
  (the pod-count limit is not modelled) and ``alibabacloud.com/gpu-milli``
  (GPU shares, which mirror the GPU count).
* A node in MIG single strategy (a product name containing ``-MIG-``, or
  label ``nvidia.com/mig.strategy=single`` with ``nvidia.com/gpu.slices.gi``;
  the strategy label alone is on every GPU node) advertises MIG slices as
  ``nvidia.com/gpu``: it gets the label ``gpuopt.io/mig=single`` and a report
  line, so that nobody takes its slices for whole GPUs.
* ``gpu_model`` = label ``nvidia.com/gpu.product``.
* ``topology``: level ``zone`` = label ``topology.kubernetes.io/zone``, then
  one level per ``topology_labels`` entry (``LABEL`` or ``NAME=LABEL``, coarse
  to fine); the hostname is the node level. ``asw`` = label ``gpuopt.io/asw``
  (the legacy switch level).
* ``ready``: the ``Ready`` condition of ``status.conditions`` is ``True``; a
  node without a Ready condition is taken as Ready (reported).
  ``unschedulable`` = ``spec.unschedulable``; ``taints`` = ``spec.taints``
  (``PreferNoSchedule`` ones are kept but are only a preference).
* ``locked`` when its pods hold more than it has of any resource (GPUs, CPU,
  memory, any extended resource) or when a pod on it could not be read.

Pods
----
* Succeeded and Failed pods are skipped (counted). A pod with
  ``spec.nodeName`` is a task on that node; an unbound ``Pending`` pod is a
  ``pending`` request; other unbound pods are skipped (counted).
* ``id`` = ``"<namespace>/<name>"`` (namespace ``default`` when absent);
  ``namespace``, ``labels``; ``start_time`` (tasks) = ``status.startTime``
  and ``since`` (pending) = ``metadata.creationTimestamp``, in Unix seconds;
  the cluster's ``now`` is the latest time read (start times, creation
  times, nodes' Ready heartbeats).
* Requests as the scheduler counts them: per container ``requests[r]``, else
  ``limits[r]``, else 0; the sum over containers plus sidecar init containers
  (``restartPolicy: Always``), raised to the largest ordinary init container
  (plus the sidecars started before it), plus ``spec.overhead``. ``gpus`` =
  the GPU resources (whole), ``cpus`` in cores, ``memory`` in MiB,
  ``resources`` = every other request above zero as an integer, rounded up.
* Shares of one GPU: a pod that requests no GPU resource but has the KAI
  Scheduler annotation ``gpu-fraction`` (a share, e.g. ``"0.5"``) or
  ``gpu-memory`` (MiB, over the node's ``nvidia.com/gpu.memory``), or that
  requests ``alibabacloud.com/gpu-milli`` below 1000 (or carries it as an
  annotation, the openb simulator's form, with ``alibabacloud.com/gpu-count``),
  or requests GPU memory (``aliyun.com/gpu-mem``, ``volcano.sh/gpu-memory``:
  a share of the node's amount per GPU), is read as ``gpus=1``
  with ``gpu_milli`` = the share in thousandths (reported): shares of a node
  pack onto its GPUs (rule C7). A pending pod's share is read the same way,
  except a share given in GPU memory, which is one whole GPU until a node
  (and so the GPU's size) is known (reported).
* ``priority``: the legacy label ``gpuopt.io/priority`` (``HP``/``LP``) when
  present, else ``spec.priority``, else the value of the PriorityClass
  ``spec.priorityClassName`` among those read (``system-node-critical`` =
  2000001000 and ``system-cluster-critical`` = 2000000000 are known without
  the objects; an unknown class gives 0, reported), else the
  ``globalDefault`` class read, else 0. The cluster's ``hp_priority`` is
  1,000,000 unless given. ``preemption_policy`` (pending) =
  ``spec.preemptionPolicy``, else the class's.
* ``tolerations``, ``node_selector`` = ``spec.nodeSelector``,
  ``node_affinity`` = every term of the required node affinity (all
  operators, ``matchFields`` on ``metadata.name``), ``pod_affinity`` and
  ``pod_anti_affinity`` = the required terms (``labelSelector``,
  ``namespaces``, ``topologyKey``; ``namespaceSelector: {}`` is every
  namespace). A term without ``labelSelector`` selects no pod and is dropped.
  A non-empty ``namespaceSelector`` cannot be evaluated without Namespace
  objects: the term is read as every namespace (stricter for anti-affinity;
  the pods an affinity involves are kept in place anyway) and its pod is
  pinned (``pod-affinity``); ``--strict`` refuses it.
* ``pinned`` (never moved), the first that applies: ``terminating``
  (``metadata.deletionTimestamp``), ``not-running`` (phase not ``Running``:
  Pending-but-bound, Unknown; a pod without a phase is taken as Running),
  ``mirror`` (annotation ``kubernetes.io/config.mirror``), ``daemonset`` (an
  owner of kind DaemonSet), ``critical`` (priority at or above
  ``critical_priority``, default 2,000,000,000), ``no-controller`` (no owner
  reference with ``controller: true``: nothing would recreate it),
  ``local-storage`` (a ``hostPath`` or ``emptyDir`` volume, the latter unless
  ``allow_emptydir``; a ``persistentVolumeClaim`` or generic ``ephemeral``
  volume whose PersistentVolume is ``local`` or ``hostPath``; a claim whose
  volume was not read is taken as network storage, reported, and pinned only
  with ``pin_unresolved_claims``), ``pod-affinity`` (see above),
  ``misplaced`` (its node no longer matches its node selector or required
  node affinity; reported), ``budget`` (a PodDisruptionBudget of its
  namespace could not be read). ``locked`` = annotation ``gpuopt.io/locked``
  is ``"true"`` (any case).
* ``anti_affinity`` = the legacy label ``gpuopt.io/anti-affinity``; a second
  pod of one group on a node loses it (reported).
* ``gang`` (rule C8) = ``"<namespace>/<group>"``, the group named by the first
  of (:data:`GANG_KEYS`): label ``scheduling.x-k8s.io/pod-group`` (the
  coscheduling plugin of kubernetes-sigs/scheduler-plugins), label
  ``pod-group.scheduling.sigs.k8s.io`` (the same plugin before v0.24, and
  Koordinator), annotation ``scheduling.k8s.io/group-name`` or
  ``scheduling.volcano.sh/group-name`` (Volcano), label
  ``kueue.x-k8s.io/pod-group-name`` (Kueue's plain-pod groups). A pod naming
  two different groups gets the first (reported; ``--strict`` refuses it). A
  waiting pod of a gang stays one pending request (the pending demand has no
  gang; reported: place the gang with ``gpuopt place --gang``). A pod that
  forms a gang only by keys not modelled (:data:`UNMODELLED_GANG_PREFIXES`:
  the lightweight coscheduling labels, Koordinator's annotations) is read
  alone (reported).
* ``gangs``: a running gang's ``min_member`` is its PodGroup's
  ``spec.minMember`` (kind ``PodGroup`` of ``scheduling.x-k8s.io``,
  ``scheduling.sigs.k8s.io`` or ``scheduling.volcano.sh``; other API groups'
  are ignored kinds), else for a Kueue group the annotation
  ``kueue.x-k8s.io/pod-group-total-count`` (Kueue admits and evicts the group
  whole; counts that differ give the largest, reported). A gang with neither,
  or whose PodGroup has no valid ``minMember`` or could not be read, is not
  listed: all or nothing (reported). A gang running fewer pods than its
  ``min_member`` is kept (stopping any stops all; reported). PodGroups with no
  running pod are skipped (reported). The PodGroup's other spec fields
  (``minResources``, ``scheduleTimeoutSeconds``, ``queue``,
  ``priorityClassName``, ``minTaskMember``, ...) are counted as read but not
  modelled.

PodDisruptionBudgets and PriorityClasses
----------------------------------------
* Budget ``id`` = ``"<namespace>/<name>"``, ``selector`` = ``spec.selector``,
  ``min_available`` / ``max_unavailable`` (an integer or ``"N%"``). A budget
  without a selector (it selects nothing) or without either limit (it limits
  nothing) is skipped (reported).
* PriorityClasses: ``value``, ``globalDefault``, ``preemptionPolicy``.

Tolerance
---------
A malformed object is reported and skipped, with what it implies: the node of
an unreadable pod is locked (what it holds is unknown), the pods of the
namespace of an unreadable budget are pinned. Pods on nodes not read are
skipped. With ``strict`` the first such problem (and an over-committed node,
a misplaced pod, a non-empty ``namespaceSelector``, two pods of one legacy
group on a node) raises :class:`~gpuopt.errors.ProblemError` instead, one
sentence naming the object and the field. Fields read but not modelled
(topology spread constraints, preferred affinities, ``PreferNoSchedule``
taints, ``tolerationSeconds``, ...) are counted in the report.

Units: CPUs in cores rounded up to a milli-CPU; memory in MiB (bytes rounded
up, MiB rounded down to a thousandth on nodes and pods alike, so that pods
that fit a node in bytes fit it in MiB). Quantities are read by
:func:`parse_quantity`.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gpuopt.cluster.kube import (
    CRITICAL_PRIORITY,
    DEFAULT_GPU_RESOURCE,
    GPU_RESOURCE_LABEL,
    MIG_LABEL,
    Budget,
    LabelSelector,
    affinity_matches,
    selector_matches,
)
from gpuopt.cluster.model import (
    MAX_NODE_GPUS,
    MAX_RESOURCE,
    MAX_TASKS,
    Cluster,
    Gang,
    Node,
    Pending,
    Task,
    scaled,
)
from gpuopt.errors import ProblemError, problem_error_from, short, validate_object
from gpuopt.io.files import MAX_JSON_BYTES, read_json

#: Default threshold of the HP class for Kubernetes input: user PriorityClasses for
#: production work are usually around a million, and system classes far above.
KUBE_HP_PRIORITY = 1_000_000
#: The built-in PriorityClasses, known even when their objects are not read.
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}
ZONE_LABEL = "topology.kubernetes.io/zone"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
#: GPU feature discovery's label of the GPU instances of a MIG slice (single strategy only).
MIG_SLICES_LABEL = "nvidia.com/gpu.slices.gi"
#: The label gpuopt puts on a node whose GPUs are MIG slices (single strategy).
MIG_PREFIX = "nvidia.com/mig-"
#: KAI Scheduler's GPU-sharing annotations (a share of one GPU; GPU memory in MiB).
GPU_FRACTION_ANNOTATION = "gpu-fraction"
GPU_MEMORY_ANNOTATION = "gpu-memory"
#: A share of one GPU in thousandths, as a resource (Alibaba's GPU-sharing scheduler).
GPU_MILLI_RESOURCE = "alibabacloud.com/gpu-milli"
#: The openb simulator's pod annotation beside ``alibabacloud.com/gpu-milli``: how many GPUs.
GPU_COUNT_ANNOTATION = "alibabacloud.com/gpu-count"
#: GPU memory as a resource of its own, on nodes (the pool) and pods (a slice of one GPU):
#: Alibaba's gpushare device plugin (GiB) and Volcano's GPU sharing (MiB).
GPU_MEMORY_RESOURCES = ("aliyun.com/gpu-mem", "volcano.sh/gpu-memory")
#: Default GPU resource names: ``<vendor>/gpu``, ``<vendor>/gpu-count`` and
#: ``<vendor>/gpu-number`` (Volcano's whole GPUs).
_GPU_NAME = re.compile(r"[^/\s]+/gpu(?:-count|-number)?")
#: Allocatable names that are neither GPUs nor extended resources of the model.
_NOT_EXTENDED = frozenset({"cpu", "memory", "pods", GPU_MILLI_RESOURCE})
_DONE_PHASES = frozenset({"Succeeded", "Failed"})
#: The pod keys that name a pod's gang (its PodGroup), in the order a pod that names two
#: different gangs is read by (the first found wins): ``(where, key)``.
GANG_KEYS: tuple[tuple[str, str], ...] = (
    # the coscheduling plugin of kubernetes-sigs/scheduler-plugins (PodGroupLabel, v0.24 on)
    ("labels", "scheduling.x-k8s.io/pod-group"),
    # the same plugin before v0.24 (PodGroups of scheduling.sigs.k8s.io), and Koordinator
    ("labels", "pod-group.scheduling.sigs.k8s.io"),
    # Volcano (KubeGroupNameAnnotationKey, then VolcanoGroupNameAnnotationKey)
    ("annotations", "scheduling.k8s.io/group-name"),
    ("annotations", "scheduling.volcano.sh/group-name"),
    # Kueue's plain-pod groups (no PodGroup object: the group's size is an annotation)
    ("labels", "kueue.x-k8s.io/pod-group-name"),
)
#: Prefixes of pod keys that form gangs by schemes the reader does not model: the
#: lightweight coscheduling labels (``pod-group.scheduling.sigs.k8s.io/name`` and
#: ``/min-available``, before PodGroup objects) and Koordinator's gang annotations. A pod
#: that carries one but none of :data:`GANG_KEYS` is read alone, and reported.
UNMODELLED_GANG_PREFIXES: tuple[str, ...] = (
    "pod-group.scheduling.sigs.k8s.io/",
    "gang.scheduling.koordinator.sh/",
)
#: Kueue's label of a plain-pod group and its annotation of the group's size (every pod of
#: the group carries both; Kueue admits and evicts the group as one workload).
KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
#: API groups whose ``PodGroup`` objects are read: coscheduling (current and older) and Volcano.
POD_GROUP_APIS = frozenset(
    {"scheduling.x-k8s.io", "scheduling.sigs.k8s.io", "scheduling.volcano.sh"}
)
_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_TERMS = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_MIB = 2**20
_FILE_SUFFIXES = (".json", ".yaml", ".yml")

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


_Scalar = TypeVar("_Scalar", str, bool, int)


class _Reader:
    """Typed access to one decoded object, with one-sentence errors naming it and the field."""

    def __init__(self, source: str, where: str = "the top level") -> None:
        self.source = source
        self.where = where

    def at(self, where: str) -> _Reader:
        """The same source, another object."""
        return _Reader(self.source, where)

    def fail(self, text: str) -> NoReturn:
        raise ProblemError(f"{self.source}: {self.where}: {text}.")

    def mapping(self, parent: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
        """``parent[key]`` as an object; absent or null gives ``{}``."""
        value = parent.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(f"{path} must be an object (got {type(value).__name__})")
        return value

    def listing(self, parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
        """``parent[key]`` as a list; absent or null gives ``[]``."""
        value = parent.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(f"{path} must be a list (got {type(value).__name__})")
        return value

    def objects(self, parent: Mapping[str, Any], key: str, path: str) -> list[dict[str, Any]]:
        """``parent[key]`` as a list of objects."""
        found = self.listing(parent, key, path)
        for position, value in enumerate(found):
            if not isinstance(value, dict):
                self.fail(f"{path}[{position}] must be an object (got {type(value).__name__})")
        return found

    def scalar(
        self, parent: Mapping[str, Any], key: str, path: str, kind: type[_Scalar], what: str
    ) -> _Scalar | None:
        """``parent[key]`` as a ``kind`` (a boolean only when asked for); absent or null
        gives None; else it fails, saying the field must be ``what``."""
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            self.fail(f"{path} must be {what} (got {short(value)})")
        return value

    def text(self, parent: Mapping[str, Any], key: str, path: str) -> str | None:
        """``parent[key]`` as a string; absent, null or empty gives None."""
        return self.scalar(parent, key, path, str, "a string") or None

    def texts(self, parent: Mapping[str, Any], key: str, path: str) -> list[str]:
        """``parent[key]`` as a list of strings."""
        found = self.listing(parent, key, path)
        for position, value in enumerate(found):
            if not isinstance(value, str):
                self.fail(f"{path}[{position}] must be a string (got {short(value)})")
        return found

    def flag(self, parent: Mapping[str, Any], key: str, path: str) -> bool:
        """``parent[key]`` as a boolean; absent or null gives False."""
        return self.scalar(parent, key, path, bool, "true or false") or False

    def integer(self, parent: Mapping[str, Any], key: str, path: str) -> int | None:
        """``parent[key]`` as an integer; absent or null gives None."""
        return self.scalar(parent, key, path, int, "an integer")

    def strings(self, parent: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
        """``parent[key]`` as a string-to-string map (labels, annotations, selectors)."""
        value = self.mapping(parent, key, path)
        for name, item in value.items():
            if not isinstance(item, str):
                self.fail(f"{path}.{short(name)[1:-1]} must be a string (got {short(item)})")
        return value

    def quantity(self, value: Any, path: str) -> Fraction:
        try:
            amount = parse_quantity(value)
        except ValueError as exc:
            self.fail(f"{path}: {exc}")
        if amount < 0:
            self.fail(f"{path} is negative ({short(value)})")
        return amount

    def time(self, parent: Mapping[str, Any], key: str, path: str) -> float | None:
        """An RFC 3339 time (``2026-01-02T03:04:05Z``) in Unix seconds; absent gives None."""
        value = parent.get(key)
        if value is None:
            return None
        if isinstance(value, datetime):  # a YAML timestamp
            moment = value
        else:
            if not isinstance(value, str):
                self.fail(f"{path} must be a time (got {short(value)})")
            try:
                moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                self.fail(f"{path} is not an RFC 3339 time (got {short(value)})")
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return max(0.0, moment.timestamp())

    def model(self, kind: type[BaseModel], data: dict[str, Any]) -> Any:
        """``data`` validated as ``kind``; its first error as one sentence naming this object."""
        try:
            return kind.model_validate(data)
        except ValidationError as exc:
            self.fail(str(problem_error_from(exc)).rstrip("."))

    def container_requests(self, container: Mapping[str, Any], path: str) -> dict[str, Fraction]:
        """A container's requests: ``requests[r]``, else ``limits[r]`` (the API's default)."""
        resources = self.mapping(container, "resources", f"{path}.resources")
        amounts: dict[str, Fraction] = {}
        for field_name in ("limits", "requests"):  # requests override limits
            table = self.mapping(resources, field_name, f"{path}.resources.{field_name}")
            for key, value in table.items():
                amounts[key] = self.quantity(value, f"{path}.resources.{field_name}.{key}")
        return amounts


def _cpus(amount: Fraction) -> float:
    """Cores, rounded up to a milli-CPU."""
    return math.ceil(amount * 1000) / 1000


def _mebibytes(amount: Fraction) -> float:
    """A node's bytes (rounded up to a byte) in MiB, rounded down to a thousandth."""
    return math.floor(Fraction(math.ceil(amount)) * 1000 / _MIB) / 1000


#: Most node selector terms a pod's affinity ANDed with its volumes' may expand to.
_MAX_TERMS = 64


def _and_terms(alternatives: list[list[Any]]) -> list[Any] | None:
    """Node selector terms (each list ORed) ANDed together, as one list of terms (ORed):
    every combination of one term from each list, their requirements joined. An empty
    list admits every node. None when the product would exceed :data:`_MAX_TERMS`."""
    result: list[Any] = [{"match_expressions": [], "match_fields": []}]
    for terms in alternatives:
        if not terms:
            continue
        if len(result) * len(terms) > _MAX_TERMS:
            return None
        result = [
            {
                "match_expressions": [*left["match_expressions"], *right["match_expressions"]],
                "match_fields": [*left["match_fields"], *right["match_fields"]],
            }
            for left in result
            for right in terms
        ]
    return result


def _host_ports(spec: Mapping[str, Any]) -> bool:
    """The pod binds ports of its node (``hostNetwork``, or a container's ``hostPort``):
    gpuopt does not plan ports, so such a pod is pinned and no move can make two pods
    share one."""
    if spec.get("hostNetwork") is True:
        return True
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    return any(
        isinstance(port, dict) and port.get("hostPort")
        for container in containers
        if isinstance(container, dict)
        for port in container.get("ports") or ()
    )


def _api(item: Mapping[str, Any]) -> str | None:
    """The object's ``apiVersion``, None when absent."""
    value = item.get("apiVersion")
    return value if isinstance(value, str) and value else None


def _group(api: str) -> str:
    """The API group of an ``apiVersion`` (``""`` for the core group's ``v1``)."""
    group, slash, _ = api.partition("/")
    return group if slash else ""


def _condition(status: Mapping[str, Any], kind: str) -> str | None:
    """The status (``"True"``, ``"False"``, ``"Unknown"``) of a condition, None when absent."""
    for condition in status.get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == kind:
            value = condition.get("status")
            return value if isinstance(value, str) else None
    return None


def _requested_mebibytes(amount: Fraction) -> float:
    """A pod's bytes in MiB, rounded up to a thousandth: a pod too large for a node in
    bytes stays too large in MiB (nodes round down)."""
    return math.ceil(Fraction(math.ceil(amount)) * 1000 / _MIB) / 1000


def _whole(reader: _Reader, amount: Fraction, path: str, *, limit: int, unit: str) -> int:
    if amount.denominator != 1:
        reader.fail(f"{path} is {float(amount):g}, not a whole number of {unit}")
    if amount > limit:  # named here, with the object, rather than as a snapshot field
        reader.fail(f"{path} is {float(amount):g}, more than {limit} {unit}")
    return int(amount)


def _pod_requests(reader: _Reader, spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """The pod's requests as the scheduler counts them (containers, init containers, overhead)."""
    total: defaultdict[str, Fraction] = defaultdict(Fraction)
    for position, container in enumerate(reader.objects(spec, "containers", "spec.containers")):
        for key, value in reader.container_requests(
            container, f"spec.containers[{position}]"
        ).items():
            total[key] += value
    sidecars: defaultdict[str, Fraction] = defaultdict(Fraction)
    init_peak: defaultdict[str, Fraction] = defaultdict(Fraction)
    init_containers = reader.objects(spec, "initContainers", "spec.initContainers")
    for position, container in enumerate(init_containers):
        amounts = reader.container_requests(container, f"spec.initContainers[{position}]")
        sidecar = container.get("restartPolicy") == "Always"
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


#: What the report says for each reason (``{n}``: how many objects), in the order it says it.
#: Reasons marked as problems are what ``strict`` refuses.
_LINES: dict[str, str] = {
    "document": "skipped {n} malformed documents",
    "malformed-Node": "skipped {n} malformed nodes",
    "malformed-Pod": "skipped {n} malformed pods (their nodes are locked: what they hold is "
    "unknown)",
    "malformed-PodDisruptionBudget": "skipped {n} malformed PodDisruptionBudgets (the pods of "
    "their namespaces are pinned: budget)",
    "malformed-PriorityClass": "skipped {n} malformed PriorityClasses",
    "malformed-PersistentVolumeClaim": "skipped {n} malformed PersistentVolumeClaims",
    "malformed-PersistentVolume": "skipped {n} malformed PersistentVolumes",
    "malformed-PodGroup": "skipped {n} malformed PodGroups (their gangs are all or nothing)",
    "malformed-item": "skipped {n} malformed list items",
    "kind-inferred": "{n} objects have no kind: their kind was taken from their fields",
    "duplicate": "skipped {n} objects read twice (the first copy is kept)",
    "done": "skipped {n} Succeeded or Failed pods",
    "unbound": "skipped {n} unbound pods that are neither Pending nor alive",
    "volume-affinity": "{n} pods mount volumes reachable from some nodes only (zonal disks): "
    "their node affinity includes the volumes'",
    "gated": "skipped {n} waiting pods with schedulingGates (the scheduler does not consider "
    "them yet, so they are not pending demand)",
    "unknown-node": "skipped {n} pods bound to nodes that were not read",
    "pending": "{n} unbound pods became pending demand",
    "not-ready": "{n} nodes NotReady: nothing will move there",
    "no-ready-condition": "{n} nodes report no Ready condition: taken as Ready",
    "cordoned": "{n} nodes cordoned (spec.unschedulable): nothing will move there",
    "tainted": "{n} nodes have NoSchedule or NoExecute taints: only pods that tolerate them go "
    "there",
    "overcommitted": "{n} nodes hold pods that need more than their allocatable: kept and locked, "
    "nothing moves on or off",
    "unreadable-pod": "{n} nodes locked because a pod on them could not be read",
    "capacity": "{n} node resources read from status.capacity (absent from status.allocatable)",
    "no-allocatable": "{n} nodes report neither status.allocatable nor status.capacity: read as "
    "empty and locked (nothing goes there)",
    "gpu-names": "{n} nodes advertise GPUs under several resource names: the node has their sum",
    "mig-single": "{n} nodes in MIG single strategy: their GPUs are MIG slices, not whole GPUs "
    f"(label {MIG_LABEL}=single)",
    "mig-profiles": "{n} nodes offer MIG profiles (nvidia.com/mig-*): resources of their own, "
    "not GPUs",
    "fraction": "{n} pods ask for a share of one GPU: read as gpu_milli of one GPU (shares of a "
    "node pack onto its GPUs; which GPU each holds is not read, so they are laid out best fit)",
    "fraction-whole": "{n} pods ask for GPU memory (gpu-memory, aliyun.com/gpu-mem, "
    "volcano.sh/gpu-memory) where the GPU's size is unknown (on no node yet, or on a node "
    "that states no GPU memory): read as one whole GPU",
    "no-phase": "{n} bound pods report no status.phase: taken as Running",
    "misplaced": "{n} pods run on nodes that no longer match their node selector or required node "
    "affinity: pinned (misplaced)",
    "namespace-selector": "{n} pods have pod (anti-)affinity terms with a non-empty "
    "namespaceSelector, which needs Namespace objects: read as every namespace, pods pinned",
    "null-selector": "{n} pods have pod (anti-)affinity terms without a labelSelector "
    "(they select no pod): terms dropped",
    "group-clash": "{n} pods share a node with another pod of their gpuopt.io/anti-affinity "
    "group: group dropped",
    "unknown-class": "{n} pods name a PriorityClass that was not read and have no spec.priority: "
    "priority 0",
    "legacy-priority": "{n} pods take their class from the gpuopt.io/priority label",
    "locked": "{n} pods locked by the gpuopt.io/locked annotation",
    "claim": "{n} pods mount PersistentVolumeClaims whose volume was not read: taken as network "
    "storage (movable; read PVs and PVCs too, or pin them)",
    "claim-pinned": "{n} pods mount PersistentVolumeClaims whose volume was not read: pinned "
    "(local-storage)",
    "budget-selector": "skipped {n} PodDisruptionBudgets without a selector (they select no pod)",
    "budget-limit": "skipped {n} PodDisruptionBudgets with neither minAvailable nor "
    "maxUnavailable (they limit nothing)",
    "gang-min-member": "{n} PodGroups state no valid spec.minMember: their gangs are all or "
    "nothing",
    "gang-unlisted": "{n} gangs named by running pods have no PodGroup read (nor a Kueue "
    f"{KUEUE_GROUP_COUNT_ANNOTATION}): all or nothing (stopping one pod stops them all)",
    "gang-size": f"{{n}} Kueue pod groups have no single valid {KUEUE_GROUP_COUNT_ANNOTATION} "
    "on their running pods: the largest valid one is their min_member (none: all or nothing)",
    "gang-conflict": "{n} pods name different gangs by different keys: the first key's is read "
    "(order: " + ", ".join(key for _, key in GANG_KEYS) + ")",
    "gang-short": "{n} gangs run fewer pods than their min_member (still starting, or pods "
    "lost): stopping any of them stops them all",
    "gang-idle": "skipped {n} PodGroups with no running pod (nothing of them runs to be stopped)",
    "gang-key-ignored": "{n} pods name a gang only by keys not modelled (lightweight "
    "coscheduling pod-group.scheduling.sigs.k8s.io/name, Koordinator "
    "gang.scheduling.koordinator.sh/*): read as single pods, not as a gang",
    "gang-pending": "{n} waiting pods belong to a gang: read one by one as pending demand "
    "(place the gang with `gpuopt place --gang`)",
}
_PROBLEMS = frozenset(
    {
        "document",
        *(key for key in _LINES if key.startswith("malformed-")),
        "unknown-node",
        "overcommitted",
        "misplaced",
        "namespace-selector",
        "group-clash",
        "gang-min-member",
        "gang-size",
        "gang-conflict",
    }
)
#: Fields gpuopt reads but does not plan with (``{n}``: how many objects carry one).
_UNMODELLED: dict[str, str] = {
    "topology-spread": "topologySpreadConstraints on {n} pods",
    "preferred-node-affinity": "preferred node affinity on {n} pods",
    "preferred-pod-affinity": "preferred pod (anti-)affinity on {n} pods",
    "label-keys": "matchLabelKeys/mismatchLabelKeys of pod (anti-)affinity on {n} pods "
    "(terms read without them)",
    "pending-pod-affinity": "required pod (anti-)affinity of {n} pending pods (kept; "
    "only gpuopt serve checks it)",
    "prefer-no-schedule": "PreferNoSchedule taints on {n} nodes",
    "toleration-seconds": "tolerationSeconds on {n} pods (such a toleration is not counted: "
    "a pod moved there would be evicted when the time runs out)",
    "pod-limit": "pod-count limits (status.allocatable.pods) of {n} nodes",
    "scheduler": "another scheduler (spec.schedulerName) on {n} pods",
    "resource-claims": "dynamic resource claims (spec.resourceClaims) on {n} pods",
}
#: How many object names a report line quotes.
_EXAMPLES = 3


@dataclass
class KubectlReport:
    """What :func:`read_kubernetes` did with every object it read.

    ``read`` counts the objects read by kind; ``reasons`` lists, per reason
    (the keys of the summary's lines), the objects skipped or simplified for
    it; ``pinned`` counts the pods never moved by reason; ``unmodelled``
    counts the objects that carry a field gpuopt reads but does not plan with;
    ``group_fields`` counts the PodGroups that carry each spec field other than
    ``minMember`` (read but not modelled); ``ignored_kinds`` counts the objects
    of other kinds.
    """

    read: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, list[str]] = field(default_factory=dict)
    pinned: Counter[str] = field(default_factory=Counter)
    unmodelled: Counter[str] = field(default_factory=Counter)
    ignored_kinds: Counter[str] = field(default_factory=Counter)
    group_fields: Counter[str] = field(default_factory=Counter)
    #: The first sentence said about each problem reason (shown in the summary).
    first: dict[str, str] = field(default_factory=dict)

    def count(self, reason: str) -> int:
        """How many objects were skipped or simplified for ``reason``."""
        return len(self.reasons.get(reason, ()))

    @property
    def problems(self) -> int:
        """Objects that ``strict`` would have refused."""
        return sum(self.count(reason) for reason in _PROBLEMS)

    def lines(self) -> list[str]:
        """The summary, one line per reason."""
        kinds = ", ".join(f"{count} {kind}" for kind, count in self.read.items())
        lines = [f"read {kinds or 'nothing'}"]
        for reason, text in _LINES.items():
            names = self.reasons.get(reason)
            if not names:
                continue
            shown = ", ".join(names[:_EXAMPLES]) + (", ..." if len(names) > _EXAMPLES else "")
            line = f"{text.format(n=len(names))} ({shown})"
            if reason in self.first:
                line += f"; first: {self.first[reason]}"
            lines.append(line)
        if self.pinned:
            counts = ", ".join(f"{count} {why}" for why, count in self.pinned.most_common())
            lines.append(f"{sum(self.pinned.values())} pods pinned (never moved): {counts}")
        if self.ignored_kinds:
            kinds = ", ".join(f"{count} {kind}" for kind, count in self.ignored_kinds.items())
            lines.append(f"ignored objects of other kinds: {kinds}")
        if self.group_fields:
            fields = ", ".join(f"{name} on {count}" for name, count in self.group_fields.items())
            lines.append(
                "PodGroup fields read but not modelled (a gang is modelled by spec.minMember "
                f"only): {fields}"
            )
        if self.unmodelled:
            found = "; ".join(
                text.format(n=self.unmodelled[key])
                for key, text in _UNMODELLED.items()
                if self.unmodelled[key]
            )
            lines.append(
                f"read but not modelled (preferences or facts gpuopt does not plan): {found}"
            )
        return lines

    def summary(self) -> str:
        """The report for people: one block, one line per reason."""
        return "\n".join(self.lines())


@dataclass(frozen=True)
class _Object:
    """One Kubernetes object read, with where it was found."""

    kind: str
    item: dict[str, Any]
    reader: _Reader
    #: Its ``apiVersion`` (a typed list's, for an item that states none), or None.
    api: str | None = None


@dataclass(frozen=True)
class _Options:
    gpu_resources: frozenset[str] | None
    levels: tuple[tuple[str, str], ...]  # (level name, node label), coarse to fine
    critical_priority: int
    allow_emptydir: bool
    pin_unresolved_claims: bool
    strict: bool
    asw_label: str
    lock_annotation: str
    group_label: str
    priority_label: str

    def is_gpu(self, name: str) -> bool:
        if self.gpu_resources is not None:
            return name in self.gpu_resources
        return _GPU_NAME.fullmatch(name) is not None


@dataclass(frozen=True)
class _PriorityClass:
    value: int
    global_default: bool
    preemption_policy: str | None


class _ClusterReader:
    """Reads the objects of every input into the cluster's parts and fills the report."""

    def __init__(self, options: _Options) -> None:
        self.options = options
        self.report = KubectlReport()
        self.seen: set[tuple[str, str]] = set()
        self.classes: dict[str, _PriorityClass] = {}
        self.claims: dict[tuple[str, str], str | None] = {}  # (namespace, claim) -> volume
        self.local_volumes: dict[str, bool] = {}  # PersistentVolume -> is node-local
        self.nodes: dict[str, Node] = {}
        self.gpu_memory: dict[str, Fraction] = {}  # node -> MiB per GPU, when labelled
        # (node, GPU memory resource) -> its amount per GPU of the node
        self.gpu_memory_pool: dict[tuple[str, str], Fraction] = {}
        self.tasks: list[Task] = []
        self.pending: list[Pending] = []
        self.budgets: list[Budget] = []
        self.locked_nodes: set[str] = set()
        self.pinned_namespaces: set[str] = set()
        # (namespace, selector) of every DoNotSchedule topology spread constraint read
        self.spread: list[tuple[str, LabelSelector]] = []
        self.times: list[float] = []
        # exact bytes of node allocatable and pod requests: memory is read in MiB rounded
        # to a thousandth (nodes down, pods up), and a node its pods fill exactly in bytes
        # is set to their rounded sum (:meth:`_lock_overcommitted`)
        self.memory_bytes: dict[str, Fraction] = {}
        self.pod_bytes: dict[str, Fraction] = {}
        # PersistentVolume -> its required node affinity terms; the terms of the volumes of
        # the pod being read (set by _local_storage)
        self.volume_affinity: dict[str, list[Any]] = {}
        self.pod_volume_terms: list[list[Any]] = []
        # gang id ("<namespace>/<name>") of every PodGroup read -> its minMember (None: none
        # valid, or the PodGroup could not be read: the gang is all or nothing, reported once)
        self.pod_groups: dict[str, int | None] = {}
        # Kueue group id -> the pod-group-total-count annotation of each of its running pods
        self.group_counts: dict[str, list[str | None]] = {}

    # ------------------------------------------------------------------ report
    def note(self, reason: str, name: str) -> None:
        self.report.reasons.setdefault(reason, []).append(name)

    def problem(self, reason: str, name: str, error: ProblemError) -> None:
        """A problem: ``strict`` refuses the input with it, else it is counted."""
        if self.options.strict:
            raise error
        self.note(reason, name)
        self.report.first.setdefault(reason, str(error))

    # ------------------------------------------------------------------ objects
    def add_document(self, reader: _Reader, data: Any) -> list[_Object]:
        """The objects of one decoded document (a list or one object)."""
        if data is None:  # an empty YAML document
            return []
        if not isinstance(data, Mapping):
            raise ProblemError(
                f"{reader.source}: expected a JSON object with items (got {type(data).__name__})."
            )
        try:
            kind = data.get("kind")
            if "items" not in data and not (isinstance(kind, str) and kind.endswith("List")):
                if not isinstance(kind, str) or not kind:
                    kind = self._infer_kind(data, reader.where)
                if kind is None:
                    reader.fail("kind is missing (expected kubectl get -o json or -o yaml output)")
                return [_Object(kind, dict(data), reader, _api(data))]
            if "items" not in data:
                reader.fail("items is missing (expected kubectl get -o json output)")
            items = reader.listing(data, "items", "items")
        except ProblemError as exc:
            self.problem("document", reader.where, exc)
            return []
        implied = kind[:-4] if isinstance(kind, str) and kind.endswith("List") else None
        prefix = "" if reader.where == "the top level" else f"{reader.where}, "
        found = []
        for position, item in enumerate(items):
            at = reader.at(f"{prefix}items[{position}]")
            if not isinstance(item, dict):
                error = ProblemError(
                    f"{at.source}: {at.where}: must be an object (got {type(item).__name__})."
                )
                self.problem("malformed-item", at.where, error)
                continue
            item_kind = item.get("kind") or implied or self._infer_kind(item, at.where)
            if not isinstance(item_kind, str) or not item_kind:
                error = ProblemError(f"{at.source}: {at.where}: kind is missing.")
                self.problem("malformed-item", at.where, error)
                continue
            found.append(
                _Object(item_kind, item, at, _api(item) or (_api(data) if implied else None))
            )
        return found

    def _infer_kind(self, item: Mapping[str, Any], where: str) -> str | None:
        """The kind of an object written without one, from its shape (reported), or None.

        Objects serialized by client-go rather than kubectl (must-gather and
        Insights archives, some tools' test data) omit ``kind`` and ``apiVersion``.
        """
        spec, status = item.get("spec"), item.get("status")
        spec = spec if isinstance(spec, Mapping) else {}
        status = status if isinstance(status, Mapping) else {}
        if "containers" in spec:
            kind = "Pod"
        elif "nodeInfo" in status or "allocatable" in status or "capacity" in status:
            kind = "Node"
        elif "selector" in spec and ("minAvailable" in spec or "maxUnavailable" in spec):
            kind = "PodDisruptionBudget"
        elif isinstance(item.get("value"), int) and "metadata" in item and not spec:
            kind = "PriorityClass"
        elif "minMember" in spec:
            kind = "PodGroup"
        else:
            return None
        metadata = item.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        self.note(
            "kind-inferred", f"{kind} {name}" if isinstance(name, str) else f"{where} ({kind})"
        )
        return kind

    def read(self, objects: Sequence[_Object]) -> None:
        """Read every object: classes, volumes and PodGroups first, then nodes, pods and
        budgets."""
        order = {
            "PriorityClass": (0, self._priority_class),
            "PersistentVolume": (0, self._volume),
            "PersistentVolumeClaim": (0, self._claim),
            "PodGroup": (0, self._pod_group),
            "Node": (1, self._node),
            "Pod": (2, self._pod),
            "PodDisruptionBudget": (3, self._budget),
        }
        for obj in objects:
            if obj.kind not in order:
                self.report.ignored_kinds[obj.kind] += 1
            elif obj.kind == "PodGroup" and obj.api and _group(obj.api) not in POD_GROUP_APIS:
                # another scheduler's PodGroup (its fields may mean something else)
                self.report.ignored_kinds[f"PodGroup ({obj.api})"] += 1
        objects = [
            obj
            for obj in objects
            if obj.kind != "PodGroup" or not obj.api or _group(obj.api) in POD_GROUP_APIS
        ]
        for stage in range(4):
            for obj in objects:
                rank, read = order.get(obj.kind, (-1, None))
                if rank != stage or read is None:
                    continue
                metadata = obj.item.get("metadata")
                name = metadata.get("name") if isinstance(metadata, dict) else None
                space = metadata.get("namespace") if isinstance(metadata, dict) else None
                key = (obj.kind, f"{space}/{name}")
                if isinstance(name, str) and key in self.seen:
                    self.note("duplicate", f"{obj.kind} {name}")
                    continue
                self.seen.add(key)
                try:
                    read(obj)
                except ProblemError as error:
                    self._unreadable(obj, error)
                else:
                    self.report.read[obj.kind] += 1

    def _unreadable(self, obj: _Object, error: ProblemError) -> None:
        """A malformed object: counted (or refused), with what it implies."""
        self.problem(f"malformed-{obj.kind}", obj.reader.where, error)
        metadata = obj.item.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        if obj.kind == "Pod":
            spec = obj.item.get("spec")
            node = spec.get("nodeName") if isinstance(spec, dict) else None
            if isinstance(node, str) and node:
                self.locked_nodes.add(node)
        elif obj.kind == "PodDisruptionBudget":
            space = metadata.get("namespace")
            self.pinned_namespaces.add(space if isinstance(space, str) and space else "default")
        elif obj.kind == "PodGroup":
            space, name = metadata.get("namespace"), metadata.get("name")
            if isinstance(name, str) and name:
                space = space if isinstance(space, str) and space else "default"
                self.pod_groups.setdefault(f"{space}/{name}", None)  # its gang: all or nothing

    @staticmethod
    def _name(reader: _Reader, item: Mapping[str, Any], kind: str) -> tuple[dict[str, Any], str]:
        """The object's metadata and name, naming the object in the reader from now on."""
        metadata = reader.mapping(item, "metadata", "metadata")
        name = reader.text(metadata, "name", "metadata.name")
        if name is None:
            reader.fail("metadata.name is missing")
        reader.where = f"{reader.where} ({kind} {short(name)})"
        return metadata, name

    @staticmethod
    def _namespaced(
        reader: _Reader, item: Mapping[str, Any], kind: str
    ) -> tuple[dict[str, Any], str, str, str]:
        """The object's metadata, namespace (``default`` when absent), name and id
        ``"<namespace>/<name>"``, naming the object by its id in the reader from now on."""
        metadata = reader.mapping(item, "metadata", "metadata")
        name = reader.text(metadata, "name", "metadata.name")
        if name is None:
            reader.fail("metadata.name is missing")
        namespace = reader.text(metadata, "namespace", "metadata.namespace") or "default"
        object_id = f"{namespace}/{name}"
        reader.where = f"{reader.where} ({kind} {short(object_id)})"
        return metadata, namespace, name, object_id

    # ------------------------------------------------------------------ small kinds
    def _priority_class(self, obj: _Object) -> None:
        reader = obj.reader
        _, name = self._name(reader, obj.item, "PriorityClass")
        value = reader.integer(obj.item, "value", "value")
        if value is None:
            reader.fail("value is missing")
        policy = reader.text(obj.item, "preemptionPolicy", "preemptionPolicy")
        default = reader.flag(obj.item, "globalDefault", "globalDefault")
        self.classes[name] = _PriorityClass(value, default, policy)

    def _volume(self, obj: _Object) -> None:
        reader = obj.reader
        _, name = self._name(reader, obj.item, "PersistentVolume")
        spec = reader.mapping(obj.item, "spec", "spec")
        self.local_volumes[name] = spec.get("local") is not None or spec.get("hostPath") is not None
        # a volume reachable from some nodes only (a zonal disk): its pod must stay there
        terms = self._terms(reader, spec, "nodeAffinity", "spec.nodeAffinity", key="required")
        if terms:
            self.volume_affinity[name] = terms

    def _claim(self, obj: _Object) -> None:
        reader = obj.reader
        metadata, name = self._name(reader, obj.item, "PersistentVolumeClaim")
        space = reader.text(metadata, "namespace", "metadata.namespace") or "default"
        spec = reader.mapping(obj.item, "spec", "spec")
        self.claims[space, name] = reader.text(spec, "volumeName", "spec.volumeName")

    def _pod_group(self, obj: _Object) -> None:
        """A PodGroup (coscheduling or Volcano): its gang's ``min_member``; the other fields of
        its spec are counted as read but not modelled."""
        reader = obj.reader
        _, _, _, gang_id = self._namespaced(reader, obj.item, "PodGroup")
        spec = reader.mapping(obj.item, "spec", "spec")
        for key, value in spec.items():
            if key != "minMember" and value not in (None, "", [], {}):
                self.report.group_fields[f"spec.{key}"] += 1
        value = spec.get("minMember")
        self.pod_groups[gang_id] = None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TASKS:
            said = (
                "is missing"
                if value is None
                else f"must be a whole number of pods from 1 to {MAX_TASKS:,} (got {short(value)})"
            )
            error = ProblemError(
                f"{reader.source}: {reader.where}: spec.minMember {said}, so its gang is read as "
                "all or nothing."
            )
            self.problem("gang-min-member", gang_id, error)
            return
        self.pod_groups[gang_id] = value

    # ------------------------------------------------------------------ nodes
    def _node(self, obj: _Object) -> None:
        reader, options = obj.reader, self.options
        metadata, name = self._name(reader, obj.item, "Node")
        labels = dict(reader.strings(metadata, "labels", "metadata.labels"))
        spec = reader.mapping(obj.item, "spec", "spec")
        status = reader.mapping(obj.item, "status", "status")
        allocatable = reader.mapping(status, "allocatable", "status.allocatable")
        capacity = reader.mapping(status, "capacity", "status.capacity")
        amounts: dict[str, tuple[Fraction, str]] = {}
        for key in dict.fromkeys([*allocatable, *capacity]):
            table = "allocatable" if key in allocatable else "capacity"
            path = f"status.{table}.{key}"
            amounts[key] = (reader.quantity(status[table][key], path), path)
            if table == "capacity" and key != "pods":
                self.note("capacity", f"{name} {key}")
        if "cpu" not in amounts:
            if allocatable or capacity:
                reader.fail("status.allocatable.cpu is missing (and status.capacity.cpu too)")
            # a node that has just registered (or a trimmed dump): nothing fits there yet
            amounts["cpu"] = (Fraction(0), "status.allocatable.cpu")
            self.note("no-allocatable", name)
        gpus = 0
        gpu_names = [key for key in amounts if options.is_gpu(key)]
        for key in gpu_names:
            amount, path = amounts[key]
            gpus += _whole(reader, amount, path, limit=MAX_NODE_GPUS, unit="GPUs")
        if sum(amounts[key][0] > 0 for key in gpu_names) > 1:
            self.note("gpu-names", name)
        offered = [key for key in gpu_names if amounts[key][0] > 0]
        if offered and offered[0] != DEFAULT_GPU_RESOURCE:
            labels[GPU_RESOURCE_LABEL] = offered[0]  # what a pod asks for to get these GPUs
        resources: dict[str, int] = {}
        for key, (amount, path) in amounts.items():
            if key in _NOT_EXTENDED or key in gpu_names:
                continue
            resources[key] = math.floor(amount)
            if resources[key] > MAX_RESOURCE:
                reader.fail(f"{path} is more than {MAX_RESOURCE}")
        if "pods" in amounts:
            self.report.unmodelled["pod-limit"] += 1
        if any(key.startswith(MIG_PREFIX) and amount > 0 for key, amount in resources.items()):
            self.note("mig-profiles", name)
        product = labels.get(GPU_PRODUCT_LABEL)
        # GPU feature discovery writes its strategy label on every GPU node, MIG or not
        # (vGPU and whole GPUs too); slices are named in the product, and their count
        # of GPU instances has a label of its own.
        if "-MIG-" in (product or "") or (
            labels.get(MIG_STRATEGY_LABEL) == "single" and MIG_SLICES_LABEL in labels
        ):
            labels[MIG_LABEL] = "single"
            self.note("mig-single", name)
        for key in GPU_MEMORY_RESOURCES:
            if key in amounts and gpus > 0 and amounts[key][0] > 0:
                self.gpu_memory_pool[name, key] = amounts[key][0] / gpus
        gpu_memory = labels.get(GPU_MEMORY_LABEL)
        if gpu_memory and gpu_memory.isdigit() and int(gpu_memory) > 0:
            self.gpu_memory[name] = Fraction(int(gpu_memory))
        node: dict[str, Any] = {
            "id": name,
            "gpus": gpus,
            "cpus": _cpus(amounts["cpu"][0]),
            "labels": labels,
            "ready": self._ready(reader, status, name),
            "unschedulable": reader.flag(spec, "unschedulable", "spec.unschedulable"),
            "taints": self._taints(reader, spec, name),
            "resources": resources,
        }
        if not (allocatable or capacity):
            node["locked"] = True
        if node["unschedulable"]:
            self.note("cordoned", name)
        if "memory" in amounts:
            node["memory"] = _mebibytes(amounts["memory"][0])
            self.memory_bytes[name] = amounts["memory"][0]
        if product:
            node["gpu_model"] = product
        topology = {level: labels[label] for level, label in options.levels if labels.get(label)}
        if topology:
            node["topology"] = topology
        if labels.get(options.asw_label):
            node["asw"] = labels[options.asw_label]
        self.nodes[name] = reader.model(Node, node)

    def _ready(self, reader: _Reader, status: Mapping[str, Any], name: str) -> bool:
        conditions = reader.objects(status, "conditions", "status.conditions")
        for position, condition in enumerate(conditions):
            if condition.get("type") != "Ready":
                continue
            path = f"status.conditions[{position}]"
            heartbeat = reader.time(condition, "lastHeartbeatTime", f"{path}.lastHeartbeatTime")
            if heartbeat is not None:
                self.times.append(heartbeat)
            ready = reader.text(condition, "status", f"{path}.status") == "True"
            if not ready:
                self.note("not-ready", name)
            return ready
        self.note("no-ready-condition", name)
        return True

    def _taints(self, reader: _Reader, spec: Mapping[str, Any], name: str) -> list[dict[str, str]]:
        taints = []
        for position, taint in enumerate(reader.objects(spec, "taints", "spec.taints")):
            path = f"spec.taints[{position}]"
            entry = {
                "key": reader.text(taint, "key", f"{path}.key"),
                "value": reader.text(taint, "value", f"{path}.value"),
                "effect": reader.text(taint, "effect", f"{path}.effect"),
            }
            taints.append({key: value for key, value in entry.items() if value is not None})
        effects = {taint.get("effect") for taint in taints}
        if "PreferNoSchedule" in effects:
            self.report.unmodelled["prefer-no-schedule"] += 1
        if effects & {"NoSchedule", "NoExecute"}:
            self.note("tainted", name)
        return taints

    # ------------------------------------------------------------------ pods
    def _pod(self, obj: _Object) -> None:
        reader, options = obj.reader, self.options
        metadata, namespace, name, pod_id = self._namespaced(reader, obj.item, "Pod")
        spec = reader.mapping(obj.item, "spec", "spec")
        status = reader.mapping(obj.item, "status", "status")
        phase = reader.text(status, "phase", "status.phase")
        node = reader.text(spec, "nodeName", "spec.nodeName")
        if phase in _DONE_PHASES:
            self.note("done", pod_id)
            return
        deleting = metadata.get("deletionTimestamp") is not None
        if node is None and (deleting or phase not in (None, "Pending")):
            self.note("unbound", pod_id)
            return
        if node is None and spec.get("schedulingGates"):
            self.note("gated", pod_id)  # the scheduler does not consider it yet
            return
        labels = reader.strings(metadata, "labels", "metadata.labels")
        annotations = reader.strings(metadata, "annotations", "metadata.annotations")
        gang, gang_key = self._gang(reader, labels, annotations, namespace, pod_id)
        requests = _pod_requests(reader, spec)
        gpus, gpu_milli = self._gpus(reader, requests, annotations, node, pod_id)
        priority, class_policy = self._priority(reader, spec, labels, pod_id)
        affinity = reader.mapping(spec, "affinity", "spec.affinity")
        pod: dict[str, Any] = {
            "id": pod_id,
            "gpus": gpus,
            "cpus": _cpus(requests.get("cpu", Fraction(0))),
            "memory": _requested_mebibytes(requests.get("memory", Fraction(0))),
            "priority": priority,
            "node_selector": reader.strings(spec, "nodeSelector", "spec.nodeSelector"),
            "namespace": namespace,
            "labels": labels,
            "tolerations": self._tolerations(reader, spec, pod_id),
            "node_affinity": self._node_affinity(reader, affinity),
            "resources": {
                key: math.ceil(amount)
                for key, amount in requests.items()
                if amount > 0 and key not in _NOT_EXTENDED and not options.is_gpu(key)
            },
        }
        uid = reader.text(metadata, "uid", "metadata.uid")
        if uid:
            pod["uid"] = uid
        terms, unresolved = self._pod_terms(reader, affinity, pod_id)
        self._unmodelled_pod_fields(reader, spec, affinity)
        spread = self._hard_spread(reader, spec, namespace) if node is not None else False
        if gpu_milli is not None:
            pod["gpu_milli"] = gpu_milli
        if node is None:
            policy = reader.text(spec, "preemptionPolicy", "spec.preemptionPolicy")
            pod["preemption_policy"] = policy or class_policy or "PreemptLowerPriority"
            since = reader.time(metadata, "creationTimestamp", "metadata.creationTimestamp")
            if since is not None:
                pod["since"] = since
                self.times.append(since)
            if any(terms.values()):
                self.report.unmodelled["pending-pod-affinity"] += 1
                pod.update(terms)  # kept: the scheduler extender checks them (K5)
            if gang is not None:
                pod["gang"] = gang
            self.pending.append(reader.model(Pending, pod))
            self.note("pending", pod_id)
            if gang is not None:  # waiting demand has no gang: read one by one, said so
                self.note("gang-pending", pod_id)
            return
        if node not in self.nodes:
            error = ProblemError(
                f"{reader.source}: {reader.where}: spec.nodeName {short(node)} is not a node "
                "that was read."
            )
            self.problem("unknown-node", pod_id, error)
            return
        if phase is None:
            self.note("no-phase", pod_id)
        pod.update(terms, node=node)
        started = reader.time(status, "startTime", "status.startTime")
        if started is not None:
            pod["start_time"] = started
            self.times.append(started)
        group = labels.get(options.group_label)
        if group:
            pod["anti_affinity"] = group
        if gang is not None:
            pod["gang"] = gang
            if gang_key == KUEUE_GROUP_LABEL:
                count = annotations.get(KUEUE_GROUP_COUNT_ANNOTATION)
                self.group_counts.setdefault(gang, []).append(count)
        if annotations.get(options.lock_annotation, "").lower() == "true":
            pod["locked"] = True
            self.note("locked", pod_id)
        owners = reader.objects(metadata, "ownerReferences", "metadata.ownerReferences")
        reasons = {
            "terminating": deleting,
            "not-running": phase not in (None, "Running"),
            "not-ready": _condition(status, "Ready") == "False",
            "mirror": _MIRROR_ANNOTATION in annotations,
            "daemonset": any(owner.get("kind") == "DaemonSet" for owner in owners),
            "critical": isinstance(priority, int) and priority >= options.critical_priority,
            "no-controller": not any(owner.get("controller") is True for owner in owners),
            "local-storage": self._local_storage(reader, spec, namespace, name, pod_id),
            "pod-affinity": unresolved,
            "topology-spread": spread,
            "host-port": _host_ports(spec),
        }
        pod["pinned"] = next((reason for reason, holds in reasons.items() if holds), None)
        if self.pod_volume_terms:  # a pod goes where its node affinity AND its volumes allow
            merged = _and_terms([pod["node_affinity"], *self.pod_volume_terms])
            if merged is None:
                pod["pinned"] = pod["pinned"] or "local-storage"
            else:
                pod["node_affinity"] = merged
                self.note("volume-affinity", pod_id)
        if unresolved:
            error = ProblemError(
                f"{reader.source}: {reader.where}: a required pod (anti-)affinity term has a "
                "non-empty namespaceSelector, which cannot be evaluated without Namespace objects."
            )
            self.problem("namespace-selector", pod_id, error)
        self.pod_bytes[pod_id] = requests.get("memory", Fraction(0))
        self.tasks.append(reader.model(Task, pod))

    def _gang(
        self,
        reader: _Reader,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        namespace: str,
        pod_id: str,
    ) -> tuple[str | None, str | None]:
        """The gang the pod names (``"<namespace>/<group>"``) and the key that names it: the
        first of :data:`GANG_KEYS` found; a pod naming two different groups is reported."""
        named = [
            (key, value)
            for where, key in GANG_KEYS
            if (value := (labels if where == "labels" else annotations).get(key))
        ]
        if not named:
            if any(key.startswith(UNMODELLED_GANG_PREFIXES) for key in (*labels, *annotations)):
                self.note("gang-key-ignored", pod_id)
            return None, None
        key, value = named[0]
        other = next(((k, v) for k, v in named if v != value), None)
        if other is not None:
            error = ProblemError(
                f"{reader.source}: {reader.where}: it names gang {short(value)} by {key} and "
                f"gang {short(other[1])} by {other[0]} (the first is read)."
            )
            self.problem("gang-conflict", pod_id, error)
        return f"{namespace}/{value}", key

    def _gpus(
        self,
        reader: _Reader,
        requests: Mapping[str, Fraction],
        annotations: Mapping[str, str],
        node: str | None,
        pod_id: str,
    ) -> tuple[int, int | None]:
        """Its GPUs and, for a share of one GPU, the share in thousandths."""
        gpus = 0
        for key, amount in requests.items():
            if self.options.is_gpu(key):
                path = f"the {key} request"
                gpus += _whole(reader, amount, path, limit=MAX_NODE_GPUS, unit="GPUs")
        if gpus > 1:
            return gpus, None
        share: Fraction | None = None  # of one GPU
        milli = requests.get(GPU_MILLI_RESOURCE, Fraction(0))
        if 0 < milli < 1000:
            share = milli / 1000
        elif gpus == 0 and milli >= 1000:  # whole GPUs in thousandths
            return _whole(
                reader,
                milli / 1000,
                f"the {GPU_MILLI_RESOURCE} request / 1000",
                limit=MAX_NODE_GPUS,
                unit="GPUs",
            ), None
        elif gpus == 0 and GPU_MILLI_RESOURCE in annotations:
            whole, share = self._openb_annotations(reader, annotations)
            if share is None:
                return whole, None
        elif gpus == 0 and GPU_FRACTION_ANNOTATION in annotations:
            share = self._share(reader, annotations[GPU_FRACTION_ANNOTATION])
            if share > 1:
                reader.fail(f"metadata.annotations.{GPU_FRACTION_ANNOTATION} is more than 1")
        elif gpus == 0 and GPU_MEMORY_ANNOTATION in annotations:
            wanted = self._share(reader, annotations[GPU_MEMORY_ANNOTATION])
            size = self.gpu_memory.get(node or "")
            if size is None:
                self.note("fraction-whole", pod_id)
                return 1, None
            share = min(Fraction(1), wanted / size)
        elif gpus == 0 and any(requests.get(key, 0) > 0 for key in GPU_MEMORY_RESOURCES):
            key = next(key for key in GPU_MEMORY_RESOURCES if requests.get(key, 0) > 0)
            pool = self.gpu_memory_pool.get((node or "", key))
            if pool is None:
                self.note("fraction-whole", pod_id)
                return 1, None
            share = min(Fraction(1), requests[key] / pool)
        if share is None or share == 1:
            return max(gpus, 0 if share is None else 1), None
        self.note("fraction", pod_id)
        return 1, min(999, max(1, math.ceil(share * 1000)))

    @classmethod
    def _openb_annotations(
        cls, reader: _Reader, annotations: Mapping[str, str]
    ) -> tuple[int, Fraction | None]:
        """Whole GPUs, or a share of one, from the openb simulator's pod annotations.

        The FGD simulator (and the openb trace it replays) writes a pod's GPUs as
        annotations: ``alibabacloud.com/gpu-milli`` per GPU (1000 is a whole
        one) and ``alibabacloud.com/gpu-count`` GPUs (1 when absent).
        """
        milli = cls._share(reader, annotations[GPU_MILLI_RESOURCE])
        count_text = annotations.get(GPU_COUNT_ANNOTATION, "1")
        count = cls._share(reader, count_text)
        if count.denominator != 1:
            reader.fail(
                f"metadata.annotations.{GPU_COUNT_ANNOTATION} is {short(count_text)}, "
                "not a whole number of GPUs"
            )
        if milli >= 1000:
            whole = count * milli / 1000
            return _whole(
                reader,
                whole,
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

    @staticmethod
    def _share(reader: _Reader, text: str) -> Fraction:
        try:
            amount = Fraction(text.strip())
        except (ValueError, ZeroDivisionError):
            reader.fail(f"the GPU-sharing annotation {short(text)} is not a number")
        if amount <= 0:
            reader.fail(f"the GPU-sharing annotation {short(text)} is not positive")
        return amount

    def _priority(
        self, reader: _Reader, spec: Mapping[str, Any], labels: Mapping[str, str], pod_id: str
    ) -> tuple[int | str, str | None]:
        """Its priority (an integer, or the legacy class) and its class's preemption policy."""
        class_name = reader.text(spec, "priorityClassName", "spec.priorityClassName")
        found = self.classes.get(class_name or "")
        if class_name is None:
            found = next((c for c in self.classes.values() if c.global_default), None)
        policy = found.preemption_policy if found else None
        legacy = labels.get(self.options.priority_label)
        if legacy is not None:
            if legacy.upper() not in ("HP", "LP"):
                reader.fail(
                    f"metadata.labels.{self.options.priority_label} must be 'HP' or 'LP' "
                    f"(got {short(legacy)})"
                )
            self.note("legacy-priority", pod_id)
            return legacy.upper(), policy
        value = reader.integer(spec, "priority", "spec.priority")
        if value is not None:
            return value, policy
        if found is not None:
            return found.value, policy
        if class_name in SYSTEM_PRIORITY_CLASSES:
            return SYSTEM_PRIORITY_CLASSES[class_name], policy
        if class_name is not None:
            self.note("unknown-class", pod_id)
        return 0, policy

    def _tolerations(
        self, reader: _Reader, spec: Mapping[str, Any], pod_id: str
    ) -> list[dict[str, str]]:
        tolerations = []
        for position, item in enumerate(reader.objects(spec, "tolerations", "spec.tolerations")):
            path = f"spec.tolerations[{position}]"
            if item.get("tolerationSeconds") is not None:
                # tolerates a NoExecute taint only for a while: a pod moved there would be
                # evicted when the time runs out, so it does not tolerate it for planning
                continue
            entry = {
                name: reader.text(item, name, f"{path}.{name}")
                for name in ("key", "operator", "value", "effect")
            }
            tolerations.append({key: value for key, value in entry.items() if value is not None})
        if any(item.get("tolerationSeconds") is not None for item in spec.get("tolerations") or ()):
            self.report.unmodelled["toleration-seconds"] += 1
        return tolerations

    @staticmethod
    def _requirements(reader: _Reader, parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
        found = []
        for position, item in enumerate(reader.objects(parent, key, path)):
            where = f"{path}[{position}]"
            found.append(
                {
                    "key": reader.text(item, "key", f"{where}.key"),
                    "operator": reader.text(item, "operator", f"{where}.operator"),
                    "values": reader.texts(item, "values", f"{where}.values"),
                }
            )
        return found

    def _node_affinity(self, reader: _Reader, affinity: Mapping[str, Any]) -> list[Any]:
        """Every required node affinity term (ORed)."""
        return self._terms(reader, affinity, "nodeAffinity", "spec.affinity.nodeAffinity")

    def _terms(
        self,
        reader: _Reader,
        parent: Mapping[str, Any],
        field: str,
        path: str,
        *,
        key: str = _TERMS,
    ) -> list[Any]:
        """The node selector terms (ORed) of ``parent[field][key]`` (a pod's required node
        affinity, or a PersistentVolume's ``nodeAffinity.required``)."""
        node_affinity = reader.mapping(parent, field, path)
        required = reader.mapping(node_affinity, key, f"{path}.{key}")
        path = f"{path}.{key}.nodeSelectorTerms"
        terms = []
        for position, term in enumerate(reader.objects(required, "nodeSelectorTerms", path)):
            where = f"{path}[{position}]"
            terms.append(
                {
                    "match_expressions": self._requirements(
                        reader, term, "matchExpressions", f"{where}.matchExpressions"
                    ),
                    "match_fields": self._requirements(
                        reader, term, "matchFields", f"{where}.matchFields"
                    ),
                }
            )
        return terms

    def _pod_terms(
        self, reader: _Reader, affinity: Mapping[str, Any], pod_id: str
    ) -> tuple[dict[str, list[Any]], bool]:
        """Its required pod affinity and anti-affinity terms, and whether one needs Namespaces."""
        found: dict[str, list[Any]] = {}
        unresolved = dropped = False
        for kind, field_name in (
            ("podAffinity", "pod_affinity"),
            ("podAntiAffinity", "pod_anti_affinity"),
        ):
            section = reader.mapping(affinity, kind, f"spec.affinity.{kind}")
            path = f"spec.affinity.{kind}.{_TERMS}"
            terms = []
            for position, term in enumerate(reader.objects(section, _TERMS, path)):
                where = f"{path}[{position}]"
                if term.get("labelSelector") is None:
                    dropped = True  # a null selector selects no pod: the term holds everywhere
                    continue
                topology_key = reader.text(term, "topologyKey", f"{where}.topologyKey")
                if topology_key is None:
                    reader.fail(f"{where}.topologyKey is missing")
                namespace_selector = term.get("namespaceSelector")
                if namespace_selector is not None:
                    selector = reader.mapping(
                        term, "namespaceSelector", f"{where}.namespaceSelector"
                    )
                    unresolved = unresolved or any(selector.values())
                entry: dict[str, Any] = {
                    "selector": self._label_selector(
                        reader, term, "labelSelector", f"{where}.labelSelector"
                    ),
                    "topology_key": topology_key,
                    "all_namespaces": namespace_selector is not None,
                }
                namespaces = reader.texts(term, "namespaces", f"{where}.namespaces")
                if namespaces:
                    entry["namespaces"] = namespaces
                if term.get("matchLabelKeys") or term.get("mismatchLabelKeys"):
                    self.report.unmodelled["label-keys"] += 1
                terms.append(entry)
            found[field_name] = terms
        if dropped:
            self.note("null-selector", pod_id)
        return found, unresolved

    def _label_selector(
        self, reader: _Reader, parent: Mapping[str, Any], key: str, path: str
    ) -> dict[str, Any]:
        selector = reader.mapping(parent, key, path)
        return {
            "match_labels": reader.strings(selector, "matchLabels", f"{path}.matchLabels"),
            "match_expressions": self._requirements(
                reader, selector, "matchExpressions", f"{path}.matchExpressions"
            ),
        }

    def _hard_spread(self, reader: _Reader, spec: Mapping[str, Any], namespace: str) -> bool:
        """Note the pod's DoNotSchedule spread constraints; True when it has one.

        gpuopt does not plan with spreads yet; the pod and every pod its
        constraints select are pinned (:meth:`finish`), so no move changes a
        count the constraint compares and the rule keeps holding.
        """
        hard = False
        for position, constraint in enumerate(
            reader.objects(spec, "topologySpreadConstraints", "spec.topologySpreadConstraints")
        ):
            if constraint.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            hard = True
            path = f"spec.topologySpreadConstraints[{position}].labelSelector"
            selector = self._label_selector(reader, constraint, "labelSelector", path)
            self.spread.append((namespace, reader.model(LabelSelector, selector)))
        return hard

    def _unmodelled_pod_fields(
        self, reader: _Reader, spec: Mapping[str, Any], affinity: Mapping[str, Any]
    ) -> None:
        """Count the fields of a pod that gpuopt reads but does not plan with."""
        unmodelled = self.report.unmodelled
        if spec.get("topologySpreadConstraints"):
            unmodelled["topology-spread"] += 1
        if (affinity.get("nodeAffinity") or {}).get(_PREFERRED):
            unmodelled["preferred-node-affinity"] += 1
        if any(
            (affinity.get(kind) or {}).get(_PREFERRED)
            for kind in ("podAffinity", "podAntiAffinity")
        ):
            unmodelled["preferred-pod-affinity"] += 1
        scheduler = reader.text(spec, "schedulerName", "spec.schedulerName")
        if scheduler not in (None, "default-scheduler"):
            unmodelled["scheduler"] += 1
        if spec.get("resourceClaims"):
            unmodelled["resource-claims"] += 1

    def _local_storage(
        self, reader: _Reader, spec: Mapping[str, Any], namespace: str, name: str, pod_id: str
    ) -> bool:
        """True when a volume of the pod lives on its node (it cannot follow the pod)."""
        unresolved = False
        self.pod_volume_terms = []
        for position, volume in enumerate(reader.objects(spec, "volumes", "spec.volumes")):
            if volume.get("hostPath") is not None:
                return True
            if volume.get("emptyDir") is not None and not self.options.allow_emptydir:
                return True
            claim_field = volume.get("persistentVolumeClaim")
            if claim_field is not None:
                path = f"spec.volumes[{position}].persistentVolumeClaim"
                claim = reader.text(
                    reader.mapping(volume, "persistentVolumeClaim", path),
                    "claimName",
                    f"{path}.claimName",
                )
            elif volume.get("ephemeral") is not None:
                claim = f"{name}-{volume.get('name')}"  # the claim a generic ephemeral volume gets
            else:
                continue
            volume_name = self.claims.get((namespace, claim or ""))
            if volume_name in self.volume_affinity:
                self.pod_volume_terms.append(self.volume_affinity[volume_name])
            local = self.local_volumes.get(volume_name or "")
            if local:
                return True
            unresolved = unresolved or local is None
        if unresolved:
            self.note("claim-pinned" if self.options.pin_unresolved_claims else "claim", pod_id)
            return self.options.pin_unresolved_claims
        return False

    # ------------------------------------------------------------------ budgets
    def _budget(self, obj: _Object) -> None:
        reader = obj.reader
        metadata, name = self._name(reader, obj.item, "PodDisruptionBudget")
        namespace = reader.text(metadata, "namespace", "metadata.namespace") or "default"
        budget_id = f"{namespace}/{name}"
        spec = reader.mapping(obj.item, "spec", "spec")
        if spec.get("selector") is None:
            self.note("budget-selector", budget_id)
            return
        budget: dict[str, Any] = {
            "id": budget_id,
            "namespace": namespace,
            "selector": self._label_selector(reader, spec, "selector", "spec.selector"),
        }
        for key, field_name in (
            ("minAvailable", "min_available"),
            ("maxUnavailable", "max_unavailable"),
        ):
            value = spec.get(key)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int | str):
                    reader.fail(
                        f"spec.{key} must be an integer or a percentage (got {short(value)})"
                    )
                budget[field_name] = value
        if len(budget) == 3:
            self.note("budget-limit", budget_id)
            return
        self.budgets.append(reader.model(Budget, budget))

    # ------------------------------------------------------------------ checks
    def finish(self, name: str, levels: list[str], hp_priority: int) -> Cluster:
        """The cluster: legacy groups, over-committed and misplaced pods settled, then validated."""
        tasks = self._settle_groups(self.tasks)
        nodes = self._lock_overcommitted(tasks)
        settled = []
        for task in tasks:
            node = nodes[task.node]
            if not task.fixed and not (
                selector_matches(task.node_selector, node.labels)
                and affinity_matches(task.node_affinity, node.id, node.labels)
            ):
                error = ProblemError(
                    f"pod {task.id!r}: its node {node.id!r} no longer matches its node selector "
                    "or required node affinity."
                )
                self.problem("misplaced", task.id, error)
                task = task.model_copy(update={"pinned": "misplaced"})
            elif not task.fixed and task.space in self.pinned_namespaces:
                task = task.model_copy(update={"pinned": "budget"})
            elif not task.fixed and any(
                space == task.space and selector.matches(task.labels)
                for space, selector in self.spread
            ):
                task = task.model_copy(update={"pinned": "topology-spread"})
            if task.pinned is not None:
                self.report.pinned[task.pinned] += 1
            settled.append(task)
        snapshot = {
            "name": name,
            "levels": levels,
            "nodes": list(nodes.values()),
            "tasks": settled,
            "pending": self.pending,
            "budgets": self.budgets,
            "gangs": self._gangs(settled),
            "hp_priority": hp_priority,
            "now": max(self.times, default=None),
        }
        return validate_object(Cluster, snapshot, what="a snapshot", source=None)

    def _gangs(self, tasks: list[Task]) -> list[Gang]:
        """The running gangs and their ``min_member``: a PodGroup's ``spec.minMember``, else
        a Kueue group's size; a gang with neither is left out of the list (all or nothing,
        reported). PodGroups with no running pod are left out too (reported)."""
        running = Counter(task.gang for task in tasks if task.gang is not None)
        gangs = []
        for gang_id, count in running.items():
            if gang_id in self.pod_groups:
                min_member = self.pod_groups[gang_id]  # None: reported with the PodGroup
            elif gang_id in self.group_counts:
                min_member = self._group_count(gang_id)
            else:
                min_member = None
                self.note("gang-unlisted", gang_id)
            if min_member is None:
                continue
            if min_member > count:
                self.note("gang-short", gang_id)
            gangs.append(Gang(id=gang_id, min_member=min_member))
        for gang_id in self.pod_groups:
            if gang_id not in running:
                self.note("gang-idle", gang_id)
        return gangs

    def _group_count(self, gang_id: str) -> int | None:
        """A Kueue group's size: its pods' ``pod-group-total-count`` (the largest when they
        differ, reported); None when none is a whole number of pods (reported)."""
        texts = self.group_counts[gang_id]
        valid = [
            int(text)
            for text in texts
            if text is not None
            and re.fullmatch(r"[0-9]{1,9}", text)
            and 1 <= int(text) <= MAX_TASKS
        ]
        if len(valid) < len(texts) or len(set(valid)) > 1:
            said = ", ".join(sorted({short(text) for text in texts}))
            error = ProblemError(
                f"Kueue pod group {gang_id!r}: the {KUEUE_GROUP_COUNT_ANNOTATION} annotations of "
                f"its running pods are {said}, not one whole number of pods."
            )
            self.problem("gang-size", gang_id, error)
        return max(valid, default=None)

    def _settle_groups(self, tasks: list[Task]) -> list[Task]:
        """At most one pod of a legacy anti-affinity group per node: later ones lose the group."""
        held: set[tuple[str, str]] = set()
        settled = []
        for task in tasks:
            if task.anti_affinity is not None:
                key = (task.anti_affinity, task.node)
                if key in held:
                    error = ProblemError(
                        f"pod {task.id!r}: node {task.node!r} already runs a pod of "
                        f"{self.options.group_label} group {task.anti_affinity!r}."
                    )
                    self.problem("group-clash", task.id, error)
                    task = task.model_copy(update={"anti_affinity": None})
                held.add(key)
            settled.append(task)
        return settled

    def _lock_overcommitted(self, tasks: Iterable[Task]) -> dict[str, Node]:
        """The nodes, those whose pods hold more than they have (or could not be read) locked."""
        tasks = list(tasks)
        used: defaultdict[str, Counter[str]] = defaultdict(Counter)
        for task in tasks:
            held = used[task.node]
            held["GPUs"] += task.gpus
            held["CPUs"] += scaled(task.cpus)
            held["memory"] += scaled(task.memory or 0)
            held.update(task.resources)
        nodes = dict(self.nodes)
        held_bytes: defaultdict[str, Fraction] = defaultdict(Fraction)
        for task in tasks:
            held_bytes[task.node] += self.pod_bytes.get(task.id, Fraction(0))
        for node_id, node in self.nodes.items():
            allocatable = self.memory_bytes.get(node_id)
            rounded = used[node_id]["memory"]
            if (
                node.memory is not None
                and allocatable is not None
                and rounded > scaled(node.memory)
                and held_bytes[node_id] <= allocatable
            ):  # full in bytes, over by rounding: the node is as full as its pods say
                node = node.model_copy(update={"memory": rounded / 1000})
                self.nodes[node_id] = nodes[node_id] = node
        for node_id, node in self.nodes.items():
            have = {"GPUs": node.gpus, "CPUs": scaled(node.cpus), **node.resources}
            if node.memory is not None:
                have["memory"] = scaled(node.memory)
            over = [
                (key, amount, have.get(key, 0))
                for key, amount in used[node_id].items()
                if amount > have.get(key, 0) and (key != "memory" or node.memory is not None)
            ]
            if over:
                key, amount, limit = over[0]
                unit = 1000 if key in ("CPUs", "memory") else 1  # CPU and memory in thousandths
                error = ProblemError(
                    f"node {node_id!r}: its pods hold {amount / unit:g} {key} but it has "
                    f"{limit / unit:g}."
                )
                self.problem("overcommitted", node_id, error)
            elif node_id in self.locked_nodes:
                self.note("unreadable-pod", node_id)
            else:
                continue
            nodes[node_id] = node.model_copy(update={"locked": True})
        return nodes


class _Loader(yaml.SafeLoader):
    """YAML without implicit timestamps: times stay the strings kubectl wrote."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

Source = str | os.PathLike[str] | Mapping[str, Any]


def _read_yaml(path: Path) -> list[Any]:
    """The documents of a YAML file, with a one-sentence :class:`ProblemError` for every failure."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise ProblemError(f"{path}: is larger than {MAX_JSON_BYTES // 2**20:,} MB.")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemError(f"{path}: no such file.") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ProblemError(f"{path}: cannot be read ({exc}).") from None
    try:
        return list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ProblemError(f"{path}: not valid YAML ({problem}{where}).") from None
    except RecursionError:
        raise ProblemError(f"{path}: not valid YAML (nested too deeply).") from None


def _documents(source: Source) -> list[tuple[_Reader, Any]]:
    """Every decoded document of one input (a mapping, a file or a folder of files)."""
    if isinstance(source, Mapping):
        return [(_Reader("kubectl JSON"), source)]
    if not isinstance(source, str | os.PathLike):
        raise ProblemError(
            "kubectl input: expected a path or a decoded JSON object "
            f"(got {type(source).__name__})."
        )
    path = Path(source)
    if str(source) and path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in _FILE_SUFFIXES and p.is_file())
        if not files:
            raise ProblemError(f"{path}: the folder holds no .json, .yaml or .yml file.")
        return [found for file in files for found in _documents(file)]
    if path.suffix == ".json":
        return [(_Reader(str(path)), read_json(path))]
    documents = _read_yaml(path)
    if len(documents) == 1:
        return [(_Reader(str(path)), documents[0])]
    return [(_Reader(str(path), f"document {n}"), doc) for n, doc in enumerate(documents, 1)]


def _levels(topology_labels: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """(level, node label) pairs from ``LABEL`` or ``NAME=LABEL`` entries, the zone first."""
    levels = [("zone", ZONE_LABEL)]
    for entry in topology_labels:
        level, equals, label = entry.partition("=")
        if not equals:
            level, label = entry, entry
        if not level or not label or level == "node":
            raise ProblemError(
                f"topology label {short(entry)}: give LABEL or NAME=LABEL (the level 'node' is "
                "implied)."
            )
        if any(level == known for known, _ in levels):
            raise ProblemError(f"topology label {short(entry)}: level {level!r} is given twice.")
        levels.append((level, label))
    return tuple(levels)


def read_kubernetes(
    *sources: Source,
    gpu_resources: Iterable[str] | None = None,
    topology_labels: Iterable[str] = (),
    critical_priority: int = CRITICAL_PRIORITY,
    hp_priority: int = KUBE_HP_PRIORITY,
    allow_emptydir: bool = False,
    pin_unresolved_claims: bool = False,
    strict: bool = False,
    asw_label: str = "gpuopt.io/asw",
    lock_annotation: str = "gpuopt.io/locked",
    group_label: str = "gpuopt.io/anti-affinity",
    priority_label: str = "gpuopt.io/priority",
    name: str | None = None,
) -> tuple[Cluster, KubectlReport]:
    """A cluster from ``kubectl get ... -o json`` or ``-o yaml`` output, and what was done.

    The mapping of every field is in the module docstring; ``docs/kubernetes.md``
    explains it for operators.

    Parameters
    ----------
    *sources
        Files (``.json`` is JSON, anything else YAML), folders of them, or
        decoded objects; nodes, pods, PodDisruptionBudgets and PriorityClasses
        together or apart.
    gpu_resources
        Resource names counted as GPUs; default every ``<vendor>/gpu`` and
        ``<vendor>/gpu-count``.
    topology_labels
        Node labels of topology levels below the zone, coarse to fine, each
        ``LABEL`` or ``NAME=LABEL`` (the level's name; default the label).
    critical_priority
        Pods at or above this priority are never moved.
    hp_priority
        The cluster's HP class threshold.
    allow_emptydir
        Let pods with ``emptyDir`` volumes move (their scratch data is lost).
    pin_unresolved_claims
        Pin pods whose PersistentVolumeClaims could not be traced to a volume.
    strict
        Refuse the input at the first problem instead of reporting it.
    asw_label, lock_annotation, group_label, priority_label
        The legacy gpuopt label and annotation names.
    name
        Snapshot name; default the first file's name without extension, or ``"kubectl"``.

    Returns
    -------
    tuple[Cluster, KubectlReport]
        The validated cluster (nodes in the order read, then the bound pods and
        the pending ones) and the report.

    Raises
    ------
    ProblemError
        With one sentence, for a missing or unreadable input, an option out of
        range, or (with ``strict``) the first problem, naming the object and field.

    Examples
    --------
    >>> cluster, report = read_kubernetes({"kind": "List", "items": [
    ...     {"kind": "Node", "metadata": {"name": "n1"},
    ...      "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "amd.com/gpu": "2"}}},
    ...     {"kind": "Pod", "metadata": {"name": "w", "namespace": "ml"},
    ...      "spec": {"containers": [{"resources": {"limits": {"amd.com/gpu": "1"}}}]},
    ...      "status": {"phase": "Pending"}}]})
    >>> cluster.nodes[0].gpus, cluster.pending[0].id, cluster.pending[0].gpus
    (2, 'ml/w', 1)
    >>> print(report.summary())
    read 1 Node, 1 Pod
    1 unbound pods became pending demand (ml/w)
    1 nodes report no Ready condition: taken as Ready (n1)
    """
    if not sources:
        raise ProblemError("kubectl input: give at least one file, folder or object.")
    options = _Options(
        gpu_resources=None if gpu_resources is None else frozenset(gpu_resources),
        levels=_levels(topology_labels),
        critical_priority=critical_priority,
        allow_emptydir=allow_emptydir,
        pin_unresolved_claims=pin_unresolved_claims,
        strict=strict,
        asw_label=asw_label,
        lock_annotation=lock_annotation,
        group_label=group_label,
        priority_label=priority_label,
    )
    reader = _ClusterReader(options)
    objects = [
        found
        for source in sources
        for document_reader, data in _documents(source)
        for found in reader.add_document(document_reader, data)
    ]
    reader.read(objects)
    first = sources[0]
    default = "kubectl" if isinstance(first, Mapping) else (Path(first).stem or "kubectl")
    used = {level for node in reader.nodes.values() for level in node.topology}
    levels = [level for level, _ in options.levels if level != "zone" or "zone" in used]
    try:
        cluster = reader.finish(name or default, levels, hp_priority)
    except ProblemError as exc:
        where = "kubectl JSON" if isinstance(first, Mapping) else str(first)
        raise ProblemError(f"{where}: {exc}") from None
    return cluster, reader.report


def read_kubectl(
    data_or_path: Source,
    *,
    asw_label: str = "gpuopt.io/asw",
    lock_annotation: str = "gpuopt.io/locked",
    group_label: str = "gpuopt.io/anti-affinity",
    priority_label: str = "gpuopt.io/priority",
    gpu_resource: str | None = None,
    name: str | None = None,
    strict: bool = True,
) -> Cluster:
    """A snapshot from the JSON of ``kubectl get nodes,pods -A -o json`` (strict by default).

    The older entry point of :func:`read_kubernetes`, for one input: it
    returns the cluster only, so it refuses (``strict``) what the other would
    report. The mapping of every field is in the module docstring.

    Parameters
    ----------
    data_or_path
        The decoded JSON (a mapping), or the path of a file or folder.
    asw_label
        Node label holding the node's access switch.
    lock_annotation
        Pod annotation that, when ``"true"``, locks the pod in place.
    group_label
        Pod label holding its anti-affinity group (at most one per node).
    priority_label
        Pod label holding ``"HP"`` or ``"LP"`` (it overrides the pod's priority).
    gpu_resource
        The one resource name of the GPUs; default every ``<vendor>/gpu`` and
        ``<vendor>/gpu-count``.
    name
        Snapshot name; default the file name without extension, or ``"kubectl"``.
    strict
        Refuse the input at the first problem (False: skip and work around it silently;
        use :func:`read_kubernetes` to get the report).

    Returns
    -------
    Cluster
        The validated snapshot: nodes in item order, then the bound pods.

    Raises
    ------
    ProblemError
        With one sentence naming the item and field, for a missing or
        malformed file or item, or (``strict``) a cluster that needs working around.

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
    >>> task.id, task.node, task.gpus, task.cpus, task.memory, task.pinned
    ('ml/p', 'n1', 1, 0.5, 1024.0, 'no-controller')
    """
    cluster, _ = read_kubernetes(
        data_or_path,
        gpu_resources=None if gpu_resource is None else (gpu_resource,),
        strict=strict,
        asw_label=asw_label,
        lock_annotation=lock_annotation,
        group_label=group_label,
        priority_label=priority_label,
        name=name,
    )
    return cluster


__all__ = [
    "KUBE_HP_PRIORITY",
    "SYSTEM_PRIORITY_CLASSES",
    "KubectlReport",
    "parse_quantity",
    "read_kubectl",
    "read_kubernetes",
]
