"""Devices of Dynamic Resource Allocation as a snapshot carries them (rules R1-R9).

Kubernetes' DRA (``resource.k8s.io/v1``) publishes devices in ResourceSlices
and allocates them to ResourceClaims. A snapshot keeps what was read in the
API's own terms, so that nothing is lost on the way and the device-fit rules
of the next step can be written against it:

- :class:`Device` (on the :class:`~gpuopt.cluster.items.Node` whose slice
  names it, or on the cluster when its pool reaches several nodes) with its
  attributes, capacities, counter consumption, taints and
  ``allowMultipleAllocations``; :class:`CounterSet` (a pool's
  ``sharedCounters``, e.g. one per physical GPU for dynamic MIG);
- :class:`DeviceClass` (its CEL selectors, its ``extendedResourceName``);
- :class:`ResourceClaim` (requests, constraints, and the allocation, with
  the pods it is reserved for).

Quantities stay the texts Kubernetes wrote (``"40Gi"``, ``"14"``); every one
is checked to be a quantity. What each field means, and which of them the
methods plan with today, is ``models/cluster.md`` (R1-R9).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_validator, model_validator

from gpuopt.cluster.fields import _Extended
from gpuopt.errors import short

#: A name inside DRA objects (a device, a pool, a driver, a request, a counter).
DraName = Annotated[str, Field(min_length=1, max_length=253)]
#: A Kubernetes quantity as written (``"40Gi"``, ``"14"``, ``"500m"``).
Quantity = Annotated[str, Field(min_length=1, max_length=64)]
#: Most devices one ResourceSlice lists (the API's limit is 128 per slice; a pool may
#: have many slices).
MAX_DEVICES = 100_000
#: The prefix of the extended resource that stands for a whole-GPU DeviceClass's GPUs
#: (R2): gpuopt's own accounting, never a name to ask Kubernetes for.
DRA_RESOURCE_PREFIX = "dra.gpuopt.io/"
#: R2: a device plugin's whole GPUs, counted apart from DRA's where nodes offer DRA GPUs and
#: no DeviceClass serves the GPU extended resource (so that a pod asking ``nvidia.com/gpu``
#: goes only where a device plugin offers it). No DeviceClass can have this name.
PLUGIN_GPUS = DRA_RESOURCE_PREFIX + "(device-plugin)"
#: The ``type`` attribute NVIDIA's driver gives a whole GPU, a MIG placement, a channel.
GPU_TYPE = "gpu"
MIG_TYPE = "mig"


def accounting_only(resource: str) -> bool:
    """Whether an extended resource name is gpuopt's account of DRA GPUs (R2), which an
    object written for Kubernetes must leave out (its GPUs are asked for as GPUs)."""
    return resource.startswith(DRA_RESOURCE_PREFIX)


def amount(text: str) -> Fraction:
    """The exact value of a quantity written by Kubernetes."""
    from gpuopt.cluster.quantity import parse_quantity

    return parse_quantity(text)


def _check_quantities(owner: str, values: Mapping[str, str]) -> None:
    for name, text in values.items():
        try:
            amount(text)
        except Exception:
            raise ValueError(f"{owner}: {name} {short(text)} is not a quantity") from None


class Version(_Extended):
    """A ``version`` attribute (semantic versioning, e.g. ``"8.0.0"``)."""

    version: Annotated[str, Field(min_length=1, max_length=64)]


#: A device attribute: a boolean, an integer, a string or a version.
AttributeValue = StrictBool | StrictInt | Annotated[str, Field(max_length=64)] | Version


class RequestPolicy(_Extended):
    """How much of a shareable capacity one request takes (``capacity[...].requestPolicy``)."""

    _quiet_defaults = frozenset({"default", "valid_values", "min", "max", "step"})

    default: Quantity | None = None
    valid_values: list[Quantity] = Field(default_factory=list, max_length=128)
    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None


class DeviceCapacity(_Extended):
    """One capacity of a device, and its request policy when the device is shared."""

    _quiet_defaults = frozenset({"request_policy"})

    value: Quantity
    request_policy: RequestPolicy | None = None


class CounterConsumption(_Extended):
    """What a device draws from one counter set of its pool when allocated."""

    counter_set: DraName
    counters: dict[str, Quantity] = Field(max_length=1000)


class DeviceTaint(_Extended):
    """A taint of a device (in its slice, or from a DeviceTaintRule)."""

    _quiet_defaults = frozenset({"value"})

    key: DraName
    value: Annotated[str, Field(max_length=63)] | None = None
    effect: Literal["NoSchedule", "NoExecute", "None"]


class Device(_Extended):
    """R1: one device of a pool (a whole GPU, a MIG placement, a channel, ...)."""

    _quiet_defaults = frozenset(
        {
            "attributes",
            "capacity",
            "consumes_counters",
            "taints",
            "allow_multiple_allocations",
            "binds_to_node",
            "nodes",
        }
    )

    name: DraName
    driver: DraName
    pool: DraName
    attributes: dict[str, AttributeValue] = Field(default_factory=dict, max_length=64)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict, max_length=64)
    consumes_counters: list[CounterConsumption] = Field(default_factory=list, max_length=8)
    taints: list[DeviceTaint] = Field(default_factory=list, max_length=64)
    allow_multiple_allocations: bool = Field(
        default=False, description="R3: several claims may share it, each taking capacity."
    )
    binds_to_node: bool = Field(
        default=False, description="Its allocation binds the pod to the node chosen then."
    )
    nodes: list[DraName] = Field(
        default_factory=list,
        max_length=100_000,
        description="For a device of a pool that reaches several nodes: the nodes read that "
        "reach it (a node's own devices leave this empty).",
    )

    @model_validator(mode="after")
    def _check_device(self) -> Device:
        owner = f"device {self.key!r}"
        _check_quantities(owner, {name: cap.value for name, cap in self.capacity.items()})
        for consumed in self.consumes_counters:
            _check_quantities(owner, consumed.counters)
        return self

    @property
    def key(self) -> str:
        """``driver/pool/name``: the device's identity in the cluster."""
        return f"{self.driver}/{self.pool}/{self.name}"

    def attribute(self, name: str) -> Any:
        """Its value of attribute ``name``: a bare name or one qualified by the driver's domain."""
        found = self.attributes.get(name)
        if found is None and name.startswith(f"{self.driver}/"):
            found = self.attributes.get(name[len(self.driver) + 1 :])
        if found is None and "/" not in name:
            found = self.attributes.get(f"{self.driver}/{name}")
        return found.version if isinstance(found, Version) else found

    @property
    def kind(self) -> Literal["gpu", "mig", "share", "other"]:
        """R2: what it is by NVIDIA's ``type`` attribute: a whole GPU, a MIG placement, a
        GPU several claims share (``allowMultipleAllocations``), or another device."""
        kind = self.attribute("type")
        if kind == GPU_TYPE:
            return "share" if self.allow_multiple_allocations else "gpu"
        if kind == MIG_TYPE:
            return "share" if self.allow_multiple_allocations else "mig"
        return "other"

    def cel(self) -> dict[str, Any]:
        """Its CEL ``device`` variable (:func:`gpuopt.cluster.cel.device_variable`)."""
        from gpuopt.cluster.cel import device_variable

        attributes = {
            name: {"version": value.version} if isinstance(value, Version) else value
            for name, value in self.attributes.items()
        }
        capacity = {name: cap.value for name, cap in self.capacity.items()}
        return device_variable(self.driver, attributes, capacity, self.allow_multiple_allocations)


class CounterSet(_Extended):
    """R4: a pool's shared counters (``sharedCounters``): what its devices draw on together."""

    driver: DraName
    pool: DraName
    name: DraName
    counters: dict[str, Quantity] = Field(max_length=1000)

    @model_validator(mode="after")
    def _check_counters(self) -> CounterSet:
        _check_quantities(f"counter set {self.driver}/{self.pool}/{self.name}", self.counters)
        return self


class DeviceClass(_Extended):
    """R6: a DeviceClass: the devices its CEL selectors select, and the extended resource
    name pods may ask for them by."""

    _quiet_defaults = frozenset({"selectors", "extended_resource_name"})

    name: DraName
    selectors: list[Annotated[str, Field(min_length=1, max_length=10_240)]] = Field(
        default_factory=list, max_length=32
    )
    extended_resource_name: DraName | None = None


class DeviceToleration(_Extended):
    """A request's toleration of device taints."""

    _quiet_defaults = frozenset({"key", "operator", "value", "effect"})

    key: str | None = None
    operator: Literal["Equal", "Exists"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "NoExecute", "None"] | None = None


class DeviceSubRequest(_Extended):
    """What one request (or one alternative of a ``firstAvailable`` request) asks for."""

    _quiet_defaults = frozenset(
        {"selectors", "allocation_mode", "count", "capacity", "tolerations", "admin_access"}
    )

    name: DraName
    device_class: DraName
    selectors: list[Annotated[str, Field(min_length=1, max_length=10_240)]] = Field(
        default_factory=list, max_length=32
    )
    allocation_mode: Literal["ExactCount", "All"] = "ExactCount"
    count: int = Field(default=1, ge=1, le=1000)
    capacity: dict[str, Quantity] = Field(
        default_factory=dict, description="R3: capacity asked of a shareable device."
    )
    tolerations: list[DeviceToleration] = Field(default_factory=list, max_length=32)
    admin_access: bool = False

    @field_validator("capacity")
    @classmethod
    def _check_capacity(cls, value: dict[str, str]) -> dict[str, str]:
        _check_quantities("capacity request", value)
        return value


class DeviceRequest(_Extended):
    """R7: a claim's request: ``exactly`` one kind of device, or the first alternative of
    ``first_available`` that can be allocated."""

    _quiet_defaults = frozenset({"exactly", "first_available"})

    name: DraName
    exactly: DeviceSubRequest | None = None
    first_available: list[DeviceSubRequest] = Field(default_factory=list, max_length=8)

    @model_validator(mode="after")
    def _check_request(self) -> DeviceRequest:
        if (self.exactly is None) == (not self.first_available):
            raise ValueError(
                f"request {self.name!r}: give exactly one of exactly and first_available"
            )
        return self

    @property
    def alternatives(self) -> list[DeviceSubRequest]:
        """What it may be served by, in order of preference."""
        return [self.exactly] if self.exactly is not None else list(self.first_available)


class DeviceConstraint(_Extended):
    """R7: devices of the named requests (all when empty) agree on an attribute, or differ."""

    _quiet_defaults = frozenset({"requests", "match_attribute", "distinct_attribute"})

    requests: list[DraName] = Field(default_factory=list, max_length=32)
    match_attribute: DraName | None = None
    distinct_attribute: DraName | None = None


class AllocatedDevice(_Extended):
    """R8: one device of a claim's allocation (``status.allocation.devices.results``)."""

    _quiet_defaults = frozenset({"consumed_capacity", "share_id"})

    request: DraName
    driver: DraName
    pool: DraName
    device: DraName
    consumed_capacity: dict[str, Quantity] = Field(default_factory=dict)
    share_id: DraName | None = None

    @property
    def key(self) -> str:
        """``driver/pool/device``, as :attr:`Device.key`."""
        return f"{self.driver}/{self.pool}/{self.device}"


class ResourceClaim(_Extended):
    """R7, R8: a ResourceClaim (or the one a pod's template will make), its allocation and
    the pods that use it."""

    _quiet_defaults = frozenset(
        {"constraints", "allocated", "node", "pods", "template", "extended_resource"}
    )

    id: Annotated[str, Field(min_length=1, max_length=600)]
    requests: list[DeviceRequest] = Field(max_length=32)
    constraints: list[DeviceConstraint] = Field(default_factory=list, max_length=32)
    allocated: list[AllocatedDevice] | None = Field(
        default=None,
        max_length=MAX_DEVICES,
        description="R8: the devices allocated (None: not allocated yet).",
    )
    node: DraName | None = Field(
        default=None, description="R8: the node its allocation is bound to, when one."
    )
    pods: list[Annotated[str, Field(min_length=1, max_length=600)]] = Field(
        default_factory=list,
        max_length=256,
        description="The pods that use it (status.reservedFor, else the pods naming it).",
    )
    template: DraName | None = Field(
        default=None,
        description="The ResourceClaimTemplate it comes from, when the claim itself was not "
        "read (a waiting pod's claim, made when the pod is created).",
    )
    extended_resource: bool = Field(
        default=False,
        description="Made by the scheduler for an extended resource a DeviceClass serves "
        "(the pod's request already counts it).",
    )


def device_asks(
    resources: Sequence[str], use: Sequence[int], cluster: Any
) -> tuple[int, dict[str, int], dict[str, int]]:
    """R2 reversed, for an object written for Kubernetes (a placeholder) that asks ``use``
    of ``resources``: how many of its GPUs are DRA's (its ``dra.gpuopt.io/<class>``
    amounts), the extended resources that ask them of a class that serves one
    (``extendedResourceName``), and the count per class a ResourceClaim must ask.
    ``cluster`` (a :class:`~gpuopt.cluster.model.Cluster` or None) gives the classes."""
    classes = {item.name: item for item in cluster.device_classes} if cluster is not None else {}
    dra = 0
    extended: dict[str, int] = {}
    claimed: dict[str, int] = {}
    for name, amount in zip(resources, use, strict=True):
        if amount <= 0 or not accounting_only(name) or name == PLUGIN_GPUS:
            continue
        dra += amount
        klass = classes.get(name.removeprefix(DRA_RESOURCE_PREFIX))
        if klass is not None and klass.extended_resource_name is not None:
            served = klass.extended_resource_name
            extended[served] = extended.get(served, 0) + amount
        else:
            claimed[name.removeprefix(DRA_RESOURCE_PREFIX)] = amount
    return dra, extended, claimed


def claim_template(
    name: str, namespace: str, labels: dict[str, str], claimed: dict[str, int]
) -> dict[str, Any]:
    """The ResourceClaimTemplate of a placeholder on DRA GPUs: ``count`` devices of each
    whole-GPU class of ``claimed``, one request per class (the claim made from it goes with
    the placeholder pod)."""
    requests = [
        {
            "name": f"gpus-{number}" if len(claimed) > 1 else "gpus",
            "exactly": {"deviceClassName": klass, "allocationMode": "ExactCount", "count": count},
        }
        for number, (klass, count) in enumerate(sorted(claimed.items()))
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"spec": {"devices": {"requests": requests}}},
    }


__all__ = [
    "DRA_RESOURCE_PREFIX",
    "GPU_TYPE",
    "MAX_DEVICES",
    "MIG_TYPE",
    "PLUGIN_GPUS",
    "AllocatedDevice",
    "AttributeValue",
    "CounterConsumption",
    "CounterSet",
    "Device",
    "DeviceCapacity",
    "DeviceClass",
    "DeviceConstraint",
    "DeviceRequest",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceToleration",
    "RequestPolicy",
    "ResourceClaim",
    "Version",
    "accounting_only",
    "amount",
    "claim_template",
    "device_asks",
]
