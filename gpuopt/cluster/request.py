"""Request shapes: what one waiting job asks of a node (``"8G64C"``, ``"4G16C128M"``).

Diagnosis, placement and preemption all take a request; on the command line it
is written as a shape text, read by :func:`parse_request`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from gpuopt.cluster.arrival import nominated_pods
from gpuopt.cluster.devices import ResourceClaim
from gpuopt.cluster.fields import POD_SLOTS, KubeName, spread_field
from gpuopt.cluster.kube import (
    NodeSelectorTerm,
    PodAffinityTerm,
    SelectorValue,
    SpreadConstraint,
    Toleration,
)
from gpuopt.cluster.model import (
    MAX_AMOUNT,
    MAX_NODE_GPUS,
    Cluster,
    Priority,
    check_share,
    scaled,
    share_field,
)
from gpuopt.errors import ProblemError, problem_error_from, short

#: The expected form of a request text, quoted in error messages.
REQUEST_FORM = "<GPUs>G[<CPUs>C][<memory>M], e.g. '8G64C', '8G64C256M', '4G' or '0.5G4C' (a share)"

_TOKEN = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([gcm])", re.IGNORECASE)


def _number(value: float) -> str:
    """``64.0`` as ``'64'``, ``0.5`` as ``'0.5'`` (no exponent, no trailing zeros)."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


class Request(BaseModel):
    """A request shape: ``gpus`` GPUs with ``cpus`` CPUs (and ``memory``) on one node.

    ``gpus = 0`` takes no whole GPU of the node: a request whose devices are all asked
    by its DRA ``claims`` (MIG placements, shares, other devices: R7 counts no whole GPU
    for them), or one for CPUs alone.

    ``same_asw = N`` asks for ``N`` copies of the shape under one access switch
    (a gang); ``node_selector``, ``node_affinity`` and ``tolerations``
    restrict the nodes like a task's (rules K1-K3: closed nodes are never
    offered either).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    gpus: int = Field(ge=0, le=MAX_NODE_GPUS)
    cpus: float = Field(default=0.0, ge=0, le=MAX_AMOUNT)
    memory: float | None = Field(default=None, ge=0, le=MAX_AMOUNT)
    gpu_milli: int | None = share_field(
        "C7: a share of one GPU, in thousandths (gpus=1); None: whole GPUs."
    )
    same_asw: int = Field(default=1, ge=1, le=1_000_000)
    node_selector: dict[str, SelectorValue] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(
        default_factory=list, max_length=1000, description="K2: taints it tolerates."
    )
    node_affinity: list[NodeSelectorTerm] = Field(
        default_factory=list, max_length=1000, description="K3: required node affinity terms."
    )
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = Field(
        default="PreemptLowerPriority", description="K8: 'Never' evicts nobody."
    )
    resources: dict[str, int] = Field(
        default_factory=dict,
        description="K4: extended resources it requests (RDMA, hugepages, ...), as integers.",
    )
    claims: list[ResourceClaim] = Field(
        default_factory=list,
        max_length=256,
        description="DF1-DF8: the DRA claims it waits with (not allocated yet); a node "
        "serves it only where they fit.",
    )
    namespace: KubeName | None = Field(
        default=None,
        description="K5: the namespace of the waiting pod it stands for (None: a shape, "
        "which no pod (anti-)affinity term judges).",
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="K5: the labels of the waiting pod it stands for."
    )
    pod_affinity: list[PodAffinityTerm] = Field(
        default_factory=list, max_length=1000, description="K5: its required pod affinity."
    )
    pod_anti_affinity: list[PodAffinityTerm] = Field(
        default_factory=list,
        max_length=1000,
        description="K5: its required pod anti-affinity.",
    )
    topology_spread: list[SpreadConstraint] = spread_field(
        "K11: its DoNotSchedule topology spread constraints."
    )
    pending: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="The cluster's waiting pod it stands for (None: a shape): its own "
        "nomination never counts against it (K10), and a check rebuilds the question with "
        "the pod's rules.",
    )

    @model_validator(mode="after")
    def _check_selector(self) -> Request:
        check_share("request", self.gpus, self.gpu_milli)
        for key, wanted in self.node_selector.items():
            if isinstance(wanted, list) and not wanted:
                raise ValueError(f"request: node_selector.{key} is an empty list")
        return self

    @property
    def space(self) -> str:
        """The namespace of the pod it stands for ('default' for a shape)."""
        return self.namespace or "default"

    @property
    def shape(self) -> str:
        """The shape as request text, e.g. ``'8G64C'`` (grouping and selector left out)."""
        text = f"{self.gpus}G" if self.gpu_milli is None else f"{_number(self.gpu_milli / 1000)}G"
        if self.cpus:
            text += f"{_number(self.cpus)}C"
        if self.memory:
            text += f"{_number(self.memory)}M"
        return text

    def __str__(self) -> str:
        text = self.shape
        if self.same_asw > 1:
            text += f" x{self.same_asw} per switch"
        return text


def parse_request(
    text: str,
    *,
    same_asw: int = 1,
    node_selector: Mapping[str, SelectorValue] | None = None,
    tolerations: Sequence[str] = (),
) -> Request:
    """Read a request shape such as ``"8G64C"``, ``"8G64C256M"`` or ``"4G"``.

    Parameters
    ----------
    text
        Numbers each followed by a unit letter: ``G`` (GPUs, a whole number,
        or a share of one GPU below 1 in thousandths, rule C7; required),
        ``C`` (CPUs) and ``M`` (memory, in the snapshot's unit).
        Case and whitespace do not matter; a missing ``C`` means no CPU need.
    same_asw
        Copies of the shape needed under one access switch.
    node_selector
        Labels a node must carry, as in a task's ``node_selector``.
    tolerations
        Taints it tolerates (K2), each ``KEY[=VALUE][:EFFECT]`` (:func:`parse_toleration`).

    Returns
    -------
    Request
        The validated request.

    Raises
    ------
    ProblemError
        When the text is not of the form ``<GPUs>G[<CPUs>C][<memory>M]`` or a
        value is out of range.

    Examples
    --------
    >>> request = parse_request(" 8g 64c 256m ")
    >>> request.gpus, request.cpus, request.memory, request.same_asw, request.node_selector
    (8, 64.0, 256.0, 1, {})
    >>> share = parse_request("0.25G4C")
    >>> share.gpus, share.gpu_milli, share.shape
    (1, 250, '0.25G4C')
    """
    if not isinstance(text, str):
        raise ProblemError(f"request {short(text)} is not text of the form {REQUEST_FORM}.")
    amounts = _amounts(text)
    gpus, share = _gpu_count(text, amounts.get("G"))
    data: dict[str, Any] = {
        "gpus": gpus,
        "cpus": float(amounts.get("C", "0")),
        "same_asw": same_asw,
        "node_selector": dict(node_selector or {}),
        "tolerations": [parse_toleration(item) for item in tolerations],
    }
    if share is not None:
        data["gpu_milli"] = share
    if "M" in amounts:
        data["memory"] = float(amounts["M"])
    try:
        return Request.model_validate(data)
    except ValidationError as exc:
        raise problem_error_from(exc, source=f"request {short(text)}") from None


def _amounts(text: str) -> dict[str, str]:
    """The number written before each unit letter of ``text`` (upper case), each at most once."""
    amounts: dict[str, str] = {}
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None or match.group(2).upper() in amounts:
            raise ProblemError(f"request {short(text)} is not of the form {REQUEST_FORM}.")
        amounts[match.group(2).upper()] = match.group(1)
        position = match.end()
    return amounts


def _gpu_count(text: str, gpus: str | None) -> tuple[int, int | None]:
    """The GPUs of the ``G`` amount and, for a share below 1 (C7), its thousandths."""
    share = None
    if gpus is not None and not gpus.isdigit() and 0 < Decimal(gpus) < 1:
        thousandths = Decimal(gpus) * 1000
        share = int(thousandths)
        if share != thousandths or share == 0:
            raise ProblemError(
                f"request {short(text)}: a share of a GPU is given in thousandths "
                f"(0.001 to 0.999), not {gpus}."
            )
        gpus = "1"
    if gpus is None or not gpus.isdigit():
        raise ProblemError(
            f"request {short(text)} needs a whole number of GPUs or a share below 1 "
            f"(the form is {REQUEST_FORM})."
        )
    if len(gpus) > 18:  # int() refuses 4,300 digits; no node has 10**18 GPUs anyway
        raise ProblemError(f"request {short(text)} asks for more GPUs than any node can have.")
    if int(gpus) == 0:  # (a request of claims only is a waiting pod's: --pending)
        raise ProblemError(
            f"request {short(text)}: gpus is 0, but a request text asks at least 1 GPU "
            f"or a share (the form is {REQUEST_FORM})."
        )
    return int(gpus), share


def pending_request(cluster: Cluster, pod_id: str) -> tuple[Request, Priority]:
    """What the cluster's waiting pod ``pod_id`` asks for, as a request, and its priority.

    The request keeps the pod's node selector, tolerations, required node
    affinity, preemption policy and DRA claims (those not made for an extended
    resource, whose GPUs its count already asks), so the views judge nodes by its
    rules (K1-K3, K8, DF1-DF8). A pod whose devices all come through claims that are
    not whole GPUs (a MIG placement, a share: R7) asks ``gpus = 0``.

    Raises
    ------
    ProblemError
        When the cluster has no waiting pod of that id, or the pod asks neither a GPU
        nor a device claim.
    """
    for pod in cluster.pending:
        if pod.id == pod_id:
            claims = [
                claim
                for claim in cluster.claims
                if pod_id in claim.pods and not claim.extended_resource
            ]
            if pod.gpus == 0 and not claims:
                raise ProblemError(
                    f"pending: the waiting pod {pod_id!r} asks for no GPU and no DRA claim, "
                    "so it is not GPU demand gpuopt places."
                )
            request = Request(
                gpus=pod.gpus,
                gpu_milli=pod.gpu_milli,
                cpus=pod.cpus,
                memory=pod.memory,
                node_selector=pod.node_selector,
                tolerations=pod.tolerations,
                node_affinity=pod.node_affinity,
                preemption_policy=pod.preemption_policy,
                resources=pod.resources,
                claims=claims,
                namespace=pod.space,
                labels=pod.labels,
                pod_affinity=pod.pod_affinity,
                pod_anti_affinity=pod.pod_anti_affinity,
                topology_spread=pod.topology_spread,
                pending=pod_id,
            )
            return request, pod.priority
    known = ", ".join(repr(pod.id) for pod in cluster.pending[:5]) or "none"
    raise ProblemError(
        f"pending: the cluster has no waiting pod {pod_id!r} (its waiting pods: {known})."
    )


def nominated_room(
    cluster: Cluster, asking: str | None, rank: int | None = None
) -> dict[str, tuple[int, int, int]]:
    """K10: per node, the GPUs, CPUs and memory (thousandths) that the waiting pods
    nominated to it (``Pending.nominated_node``) hold there against the waiting pod
    ``asking``: those of its priority (or of ``rank``, an integer priority, when given)
    and above, not itself. A request that stands for no waiting pod and states no rank
    counts as the lowest priority, so every nomination holds against it. A nominated
    share of a GPU (``gpu_milli``) holds its CPUs and memory, not a GPU.

    >>> cluster = Cluster(nodes=[{"id": "n", "gpus": 8, "cpus": 64}], pending=[
    ...     {"id": "a", "gpus": 4, "cpus": 2, "priority": 10, "nominated_node": "n"},
    ...     {"id": "b", "gpus": 2, "priority": 5}])
    >>> nominated_room(cluster, None), nominated_room(cluster, "b"), nominated_room(cluster, "a")
    ({'n': (4, 2000, 0)}, {'n': (4, 2000, 0)}, {})
    """
    held: dict[str, tuple[int, int, int]] = {}
    for pod in nominated_pods(cluster, asking, rank):  # (a pod of higher priority may take
        node = pod.nominated_node  # the room of one of lower priority)
        held[node] = add_held(held.get(node, (0, 0, 0)), pod)
    return held


def add_held(held: tuple[int, int, int], pod: Any) -> tuple[int, int, int]:
    """K10: ``held`` (GPUs, CPUs and memory in thousandths) with what the nominated waiting
    ``pod`` holds added: its whole GPUs (a share holds none), CPUs and memory."""
    gpus, cpus, memory = held
    return (
        gpus + (pod.gpus if pod.gpu_milli is None else 0),
        cpus + scaled(pod.cpus),
        memory + scaled(pod.memory or 0.0),
    )


def held_short(
    held: tuple[int, int, int], left: tuple[int, int, int | None], asked: tuple[int, int, int]
) -> list[int]:
    """K10: which of GPUs, CPUs and memory (0, 1, 2) a node would keep less of than the
    nominated waiting pods hold there (``held``), with ``left`` free after a request that
    takes ``asked`` of each (a resource it does not ask, or a node stating no memory, is
    not judged, as in kube-scheduler)."""
    return [
        at
        for at in range(3)
        if held[at] and asked[at] and (kept := left[at]) is not None and kept < held[at]
    ]


def parse_toleration(text: str) -> Toleration:
    """A toleration written ``KEY[=VALUE][:EFFECT]``: without a value it tolerates every
    value of the key (``Exists``), without an effect every effect.

    >>> parse_toleration("nvidia.com/gpu").model_dump(exclude_none=True)
    {'key': 'nvidia.com/gpu', 'operator': 'Exists'}
    >>> parse_toleration("dedicated=ml:NoSchedule").model_dump(exclude_none=True)
    {'key': 'dedicated', 'operator': 'Equal', 'value': 'ml', 'effect': 'NoSchedule'}
    """
    rest, colon, effect = text.rpartition(":") if ":" in text else (text, "", "")
    key, equals, value = rest.partition("=")
    effects = ("NoSchedule", "PreferNoSchedule", "NoExecute")
    if not key or (colon and effect not in effects) or (equals and not value):
        raise ProblemError(
            f"toleration {short(text)} is not KEY[=VALUE][:EFFECT] with EFFECT one of "
            f"{', '.join(effects)} (e.g. nvidia.com/gpu or dedicated=ml:NoSchedule)."
        )
    data: dict[str, Any] = {"key": key, "operator": "Equal" if equals else "Exists"}
    if equals:
        data["value"] = value
    if colon:
        data["effect"] = effect
    try:
        return Toleration.model_validate(data)
    except ValidationError as exc:
        raise problem_error_from(exc, source=f"toleration {short(text)}") from None


def as_request(request: Request | str, cluster: Cluster | None = None) -> Request:
    """``request`` itself, or the shape text read by :func:`parse_request`; asked of
    ``cluster`` where it keeps pod-count limits (K12: some node offers ``pods``), one that
    states no pod slot asks one, as every pod takes one."""
    found = parse_request(request) if isinstance(request, str) else request
    if cluster is None or POD_SLOTS in found.resources or not keeps_pod_slots(cluster):
        return found
    return found.model_copy(update={"resources": with_pod_slot(found.resources, True)})


def with_pod_slot(resources: Mapping[str, int], kept: bool) -> dict[str, int]:
    """K12: the extended resources a pod asks, ``resources`` and one pod slot where the
    cluster keeps them (``kept``, :func:`keeps_pod_slots`) and it states none: every pod
    takes one (a request shape, a gang's pod, a waiting pod written by hand)."""
    if kept and POD_SLOTS not in resources:
        return {**resources, POD_SLOTS: 1}
    return dict(resources)


def keeps_pod_slots(cluster: Cluster) -> bool:
    """K12: whether some node of ``cluster`` offers pod slots (the extended resource
    ``pods``; the kubectl reader keeps them where a plan could reach a limit)."""
    found = cluster.views.get(_KEEPS_POD_SLOTS)
    if found is None:
        found = cluster.views[_KEEPS_POD_SLOTS] = any(
            POD_SLOTS in node.resources for node in cluster.nodes
        )
    return bool(found)


#: The key of :func:`keeps_pod_slots`' answer in a cluster's ``views``.
_KEEPS_POD_SLOTS = "k12-pod-slots"


class WrittenRequest(Request):
    """A problem's request that writes the fields of the form it replaced first, always and
    in that form's order (``_written``), and the cluster request's other fields only where
    they differ from their default: a file of the old form reads and writes as before."""

    _written: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _old_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        fields = type(self).model_fields
        # (a field of the old form left out while unset, ``pending``, is written as it was)
        written = {
            name: data[name] if name in data else getattr(self, name)
            for name in self._written
            if name in data or (name in fields and getattr(self, name) is None)
        }
        for name, value in data.items():
            if name not in written and getattr(self, name) != fields[name].get_default(
                call_default_factory=True
            ):
                written[name] = value
        return written


__all__ = [
    "REQUEST_FORM",
    "Request",
    "WrittenRequest",
    "as_request",
    "parse_request",
    "pending_request",
]
