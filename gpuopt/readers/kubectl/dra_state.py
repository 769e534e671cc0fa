"""What the DRA and Workload API readers leave behind during one read (:class:`DraState`).

The kinds are read first (:mod:`.dra`, :mod:`.workloads`), the pods note the
claims they use, and :mod:`.dra_finish` resolves it all when the cluster is
made: the newest generation of each pool, devices onto nodes, claims onto pods.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpuopt.cluster.devices import CounterSet, Device, DeviceClass, DeviceTaint, ResourceClaim


@dataclass(frozen=True)
class SliceRead:
    """One ResourceSlice read: its pool, where its devices are, its devices and counters."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    #: ``("node", name)``, ``("selector", terms)``, ``("all", None)`` or ``("device", None)``
    #: (each device says, in :attr:`device_places`).
    place: tuple[str, Any]
    devices: tuple[Device, ...]
    counters: tuple[CounterSet, ...]
    #: Device name -> its own place, for a slice with ``perDeviceNodeSelection``.
    device_places: dict[str, tuple[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class PodClaimRef:
    """One entry of a pod's ``spec.resourceClaims``, resolved as far as the pod says."""

    #: The entry's name in the pod.
    name: str
    #: The claim's id (``"<namespace>/<name>"``) when known (named, or in the pod's status).
    claim: str | None
    #: The template's id when the claim comes from one.
    template: str | None


@dataclass(frozen=True)
class TaintRule:
    """A DeviceTaintRule: the devices it selects and the taint it adds."""

    name: str
    driver: str | None
    pool: str | None
    device: str | None
    device_class: str | None
    selectors: tuple[str, ...]
    taint: DeviceTaint


@dataclass
class DraState:
    """DRA objects read so far, and the gangs of the Workload API."""

    slices: list[SliceRead] = field(default_factory=list)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    #: Claim id -> the claim as read (``pods``: its ``reservedFor`` pods).
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    #: Template id -> the claim it makes (its id is the template's).
    templates: dict[str, ResourceClaim] = field(default_factory=dict)
    taint_rules: list[TaintRule] = field(default_factory=list)
    #: Pod id -> its claims, in ``spec.resourceClaims`` order.
    pod_claims: dict[str, list[PodClaimRef]] = field(default_factory=dict)
    #: Pod id -> the claim of its DRA-backed extended resources (status).
    extended_claims: dict[str, str] = field(default_factory=dict)
    #: (namespace, Workload) -> its pod groups' names and minCount (None: basic policy).
    workloads: dict[tuple[str, str], dict[str, int | None]] = field(default_factory=dict)
    #: Gang id -> the topology key of its PodGroup's constraint.
    gang_keys: dict[str, str] = field(default_factory=dict)
    #: Gang ids of PodGroups with the basic policy (their pods are scheduled one by one).
    basic_groups: set[str] = field(default_factory=set)
    #: Nodes locked because a ResourceSlice of theirs could not be read.
    locked_nodes: set[str] = field(default_factory=set)
    #: What was counted, for the report's DRA lines (see :mod:`.report`).
    counts: Counter[str] = field(default_factory=Counter)
