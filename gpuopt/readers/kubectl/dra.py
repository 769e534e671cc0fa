"""Dynamic Resource Allocation objects: ResourceSlices, DeviceClasses, claims, taint rules.

Kinds of ``resource.k8s.io`` (``v1``; the ``v1beta2`` spelling is the same,
``v1beta1`` writes a request's fields beside its name and a device's under
``basic``; ``v1alpha3`` a capacity as a bare quantity): each reader checks
the object and leaves it in :attr:`.context.Context.dra`; a pod notes the
claims it uses (:func:`pod_claims`); :mod:`.dra_finish` resolves them when the
cluster is made. Fields read but not modelled are counted (the report's DRA
lines); a malformed object is reported (``strict``: refused) like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuopt.cluster.devices import (
    AllocatedDevice,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
    DeviceTaint,
    ResourceClaim,
)
from gpuopt.errors import short
from gpuopt.readers.kubectl.affinity import selector_terms
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.documents import KubeObject
from gpuopt.readers.kubectl.dra_state import PodClaimRef, SliceRead, TaintRule
from gpuopt.readers.kubectl.fields import Reader, named, namespaced

#: The annotation the scheduler puts on a claim it made for an extended resource.
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
#: Device fields read (anything else of a device is counted as not modelled).
_DEVICE_FIELDS = frozenset(
    {
        "name",
        "attributes",
        "capacity",
        "consumesCounters",
        "taints",
        "allowMultipleAllocations",
        "bindsToNode",
        "nodeName",
        "nodeSelector",
        "allNodes",
        "basic",
    }
)
#: ResourceSlice spec fields read (others are counted as not modelled).
_SLICE_FIELDS = frozenset(
    {
        "driver",
        "pool",
        "nodeName",
        "nodeSelector",
        "allNodes",
        "perDeviceNodeSelection",
        "devices",
        "sharedCounters",
    }
)
#: Request fields read (others are counted as not modelled).
_REQUEST_FIELDS = frozenset(
    {
        "name",
        "deviceClassName",
        "selectors",
        "allocationMode",
        "count",
        "capacity",
        "tolerations",
        "adminAccess",
        "exactly",
        "firstAvailable",
    }
)


def _unmodelled(ctx: Context, what: str) -> None:
    ctx.dra.counts[f"unmodelled:{what}"] += 1


def node_selector_terms(reader: Reader, selector: Mapping[str, Any], path: str) -> list[Any]:
    """The terms (ORed) of a ``NodeSelector`` (``{"nodeSelectorTerms": [...]}``); one at
    least."""
    terms = selector_terms(reader, selector, path)
    if not terms:
        reader.fail(f"{path}.nodeSelectorTerms is empty (a node selector needs a term)")
    return terms


def _place(
    reader: Reader, item: Mapping[str, Any], path: str, *, per_device: bool = False
) -> tuple[str, Any]:
    """Where a slice's (or a device's) devices are: exactly one of nodeName, nodeSelector,
    allNodes (and, for a slice, perDeviceNodeSelection)."""
    found: list[tuple[str, Any]] = []
    node = reader.text(item, "nodeName", f"{path}.nodeName")
    if node is not None:
        found.append(("node", node))
    if item.get("nodeSelector") is not None:
        selector = reader.mapping(item, "nodeSelector", f"{path}.nodeSelector")
        found.append(("selector", node_selector_terms(reader, selector, f"{path}.nodeSelector")))
    if reader.flag(item, "allNodes", f"{path}.allNodes"):
        found.append(("all", None))
    if not per_device and reader.flag(
        item, "perDeviceNodeSelection", f"{path}.perDeviceNodeSelection"
    ):
        found.append(("device", None))
    if len(found) != 1:
        fields = "nodeName, nodeSelector, allNodes" + (
            "" if per_device else ", perDeviceNodeSelection"
        )
        reader.fail(f"{path} must set exactly one of {fields} (found {len(found)})")
    return found[0]


def _attributes(reader: Reader, item: Mapping[str, Any], path: str) -> dict[str, Any]:
    """A device's attributes: ``{name: {"string"|"int"|"bool"|"version": value}}``."""
    found: dict[str, Any] = {}
    for name, value in reader.mapping(item, "attributes", f"{path}.attributes").items():
        where = f"{path}.attributes.{name}"
        if not isinstance(value, dict) or len(value) != 1:
            reader.fail(f"{where} must set exactly one of string, int, bool, version")
        ((kind, held),) = value.items()
        plain = {"string": str, "int": int, "bool": bool}.get(kind)
        if (
            plain is not None
            and isinstance(held, plain)
            and (plain is bool) == (isinstance(held, bool))
        ):
            found[name] = held
        elif kind == "version" and isinstance(held, str):
            found[name] = {"version": held}
        else:
            reader.fail(f"{where} must be one of string, int, bool, version (got {short(value)})")
    return found


def _quantity_text(reader: Reader, value: Any, path: str) -> str:
    """A quantity as Kubernetes wrote it (checked)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        reader.fail(f"{path} must be a quantity (got {short(value)})")
    reader.quantity(value, path)
    return str(value)


def _capacity(ctx: Context, reader: Reader, item: Mapping[str, Any], path: str) -> dict[str, Any]:
    """A device's capacities, with their request policies (shareable devices)."""
    found: dict[str, Any] = {}
    for name, value in reader.mapping(item, "capacity", f"{path}.capacity").items():
        where = f"{path}.capacity.{name}"
        if isinstance(value, str | int) and not isinstance(value, bool):  # v1alpha3
            found[name] = {"value": _quantity_text(reader, value, where)}
            continue
        if not isinstance(value, dict):
            reader.fail(f"{where} must be an object with value (got {short(value)})")
        capacity: dict[str, Any] = {"value": _quantity_text(reader, value.get("value"), where)}
        policy = reader.mapping(value, "requestPolicy", f"{where}.requestPolicy")
        if policy:
            valid_range = reader.mapping(policy, "validRange", f"{where}.requestPolicy.validRange")
            read: dict[str, Any] = {}
            if policy.get("default") is not None:
                read["default"] = _quantity_text(
                    reader, policy["default"], f"{where}.requestPolicy.default"
                )
            read["valid_values"] = [
                _quantity_text(reader, text, f"{where}.requestPolicy.validValues")
                for text in reader.listing(
                    policy, "validValues", f"{where}.requestPolicy.validValues"
                )
            ]
            for key in ("min", "max", "step"):
                if valid_range.get(key) is not None:
                    read[key] = _quantity_text(
                        reader, valid_range[key], f"{where}.requestPolicy.validRange.{key}"
                    )
            capacity["request_policy"] = read
        found[name] = capacity
    return found


def _counters(reader: Reader, item: Mapping[str, Any], path: str) -> dict[str, str]:
    """A counter map: ``{name: {"value": quantity}}``."""
    found = {}
    for name, value in reader.mapping(item, "counters", f"{path}.counters").items():
        where = f"{path}.counters.{name}"
        held = value.get("value") if isinstance(value, dict) else value
        found[name] = _quantity_text(reader, held, where)
    return found


def _taints(reader: Reader, item: Mapping[str, Any], path: str) -> list[dict[str, str]]:
    return [
        reader.text_fields(taint, ("key", "value", "effect"), f"{path}.taints[{position}]")
        for position, taint in enumerate(reader.objects(item, "taints", f"{path}.taints"))
    ]


def _device(
    ctx: Context, reader: Reader, item: Mapping[str, Any], path: str, driver: str, pool: str
) -> Device:
    """One device of a slice (``v1beta1`` writes its fields under ``basic``)."""
    name = reader.text(item, "name", f"{path}.name")
    if name is None:
        reader.fail(f"{path}.name is missing")
    body: Mapping[str, Any] = item
    if item.get("basic") is not None:
        body = {**reader.mapping(item, "basic", f"{path}.basic"), "name": name}
        path = f"{path}.basic"
    for key in body:
        if key not in _DEVICE_FIELDS:
            _unmodelled(ctx, f"device.{key}")
    data: dict[str, Any] = {
        "name": name,
        "driver": driver,
        "pool": pool,
        "attributes": _attributes(reader, body, path),
        "capacity": _capacity(ctx, reader, body, path),
        "consumes_counters": [
            {
                "counter_set": reader.text(consumed, "counterSet", f"{path}.consumesCounters")
                or reader.fail(f"{path}.consumesCounters[{position}].counterSet is missing"),
                "counters": _counters(reader, consumed, f"{path}.consumesCounters[{position}]"),
            }
            for position, consumed in enumerate(
                reader.objects(body, "consumesCounters", f"{path}.consumesCounters")
            )
        ],
        "taints": _taints(reader, body, path),
        "allow_multiple_allocations": reader.flag(
            body, "allowMultipleAllocations", f"{path}.allowMultipleAllocations"
        ),
        "binds_to_node": reader.flag(body, "bindsToNode", f"{path}.bindsToNode"),
    }
    device: Device = reader.model(Device, data)
    return device


def read_resource_slice(ctx: Context, obj: KubeObject) -> None:
    """R1: a ResourceSlice: its pool and generation, where its devices are, its devices and
    its shared counters."""
    reader = obj.reader
    _, name = named(reader, obj.item, "ResourceSlice")
    spec = reader.mapping(obj.item, "spec", "spec")
    driver = reader.text(spec, "driver", "spec.driver")
    pool = reader.mapping(spec, "pool", "spec.pool")
    pool_name = reader.text(pool, "name", "spec.pool.name")
    generation = reader.integer(pool, "generation", "spec.pool.generation")
    count = reader.integer(pool, "resourceSliceCount", "spec.pool.resourceSliceCount")
    if driver is None or pool_name is None:
        reader.fail("spec.driver and spec.pool.name are required")
    if generation is None or generation < 0:
        reader.fail(f"spec.pool.generation must be a whole number (got {short(generation)})")
    if count is None or count < 1:
        reader.fail(f"spec.pool.resourceSliceCount must be at least 1 (got {short(count)})")
    for key in spec:
        if key not in _SLICE_FIELDS:
            _unmodelled(ctx, f"ResourceSlice.spec.{key}")
    place = _place(reader, spec, "spec")
    devices, places = [], {}
    for position, item in enumerate(reader.objects(spec, "devices", "spec.devices")):
        path = f"spec.devices[{position}]"
        device = _device(ctx, reader, item, path, driver, pool_name)
        if place[0] == "device":
            basic = item.get("basic")
            body = basic if isinstance(basic, dict) else item
            places[device.name] = _place(reader, body, path, per_device=True)
        devices.append(device)
    counters = [
        reader.model(
            CounterSet,
            {
                "driver": driver,
                "pool": pool_name,
                "name": reader.text(item, "name", f"spec.sharedCounters[{position}].name")
                or reader.fail(f"spec.sharedCounters[{position}].name is missing"),
                "counters": _counters(reader, item, f"spec.sharedCounters[{position}]"),
            },
        )
        for position, item in enumerate(
            reader.objects(spec, "sharedCounters", "spec.sharedCounters")
        )
    ]
    ctx.dra.slices.append(
        SliceRead(
            name=name,
            driver=driver,
            pool=pool_name,
            generation=generation,
            slice_count=count,
            place=place,
            devices=tuple(devices),
            counters=tuple(counters),
            device_places=places,
        )
    )


def _selectors(reader: Reader, item: Mapping[str, Any], path: str) -> list[str]:
    """The CEL expressions of a ``selectors`` list (each ``{"cel": {"expression": ...}}``)."""
    found = []
    for position, selector in enumerate(reader.objects(item, "selectors", f"{path}.selectors")):
        where = f"{path}.selectors[{position}]"
        cel = reader.mapping(selector, "cel", f"{where}.cel")
        expression = reader.text(cel, "expression", f"{where}.cel.expression")
        if expression is None:
            reader.fail(f"{where}.cel.expression is missing (only CEL selectors exist)")
        found.append(expression)
    return found


def read_device_class(ctx: Context, obj: KubeObject) -> None:
    """R6: a DeviceClass: its CEL selectors and its extended resource name."""
    reader = obj.reader
    _, name = named(reader, obj.item, "DeviceClass")
    spec = reader.mapping(obj.item, "spec", "spec")
    for key in spec:
        if key not in ("selectors", "extendedResourceName"):
            _unmodelled(ctx, f"DeviceClass.spec.{key}")
    data: dict[str, Any] = {"name": name, "selectors": _selectors(reader, spec, "spec")}
    extended = reader.text(spec, "extendedResourceName", "spec.extendedResourceName")
    if extended is not None:
        data["extended_resource_name"] = extended
    ctx.dra.classes[name] = reader.model(DeviceClass, data)


def _sub_request(
    ctx: Context, reader: Reader, item: Mapping[str, Any], path: str, name: str
) -> dict[str, Any]:
    """One request's (or alternative's) fields."""
    for key in item:
        if key not in _REQUEST_FIELDS:
            _unmodelled(ctx, f"request.{key}")
    device_class = reader.text(item, "deviceClassName", f"{path}.deviceClassName")
    if device_class is None:
        reader.fail(f"{path}.deviceClassName is missing")
    mode = reader.text(item, "allocationMode", f"{path}.allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        reader.fail(f"{path}.allocationMode must be ExactCount or All (got {short(mode)})")
    data: dict[str, Any] = {
        "name": name,
        "device_class": device_class,
        "selectors": _selectors(reader, item, path),
        "allocation_mode": mode,
        "admin_access": reader.flag(item, "adminAccess", f"{path}.adminAccess"),
        "tolerations": [
            reader.text_fields(
                toleration, ("key", "operator", "value", "effect"), f"{path}.tolerations[{n}]"
            )
            for n, toleration in enumerate(
                reader.objects(item, "tolerations", f"{path}.tolerations")
            )
        ],
    }
    count = reader.integer(item, "count", f"{path}.count")
    if count is not None:
        if mode == "All":
            reader.fail(f"{path}.count is set with allocationMode All")
        data["count"] = count
    capacity = reader.mapping(item, "capacity", f"{path}.capacity")
    requests = reader.mapping(capacity, "requests", f"{path}.capacity.requests")
    data["capacity"] = {
        key: _quantity_text(reader, value, f"{path}.capacity.requests.{key}")
        for key, value in requests.items()
    }
    return data


def _claim_spec(
    ctx: Context, reader: Reader, spec: Mapping[str, Any], path: str
) -> tuple[list[Any], list[Any]]:
    """A claim spec's requests and constraints (``config`` is counted, not modelled)."""
    devices = reader.mapping(spec, "devices", f"{path}.devices")
    path = f"{path}.devices"
    if reader.listing(devices, "config", f"{path}.config"):
        _unmodelled(ctx, "claim.config")
    requests: list[dict[str, Any]] = []
    for position, item in enumerate(reader.objects(devices, "requests", f"{path}.requests")):
        where = f"{path}.requests[{position}]"
        name = reader.text(item, "name", f"{where}.name")
        if name is None:
            reader.fail(f"{where}.name is missing")
        if item.get("firstAvailable") is not None:
            alternatives = [
                _sub_request(
                    ctx, reader, sub, f"{where}.firstAvailable[{n}]", sub.get("name") or ""
                )
                for n, sub in enumerate(
                    reader.objects(item, "firstAvailable", f"{where}.firstAvailable")
                )
            ]
            requests.append({"name": name, "first_available": alternatives})
        elif item.get("exactly") is not None:
            exactly = reader.mapping(item, "exactly", f"{where}.exactly")
            requests.append(
                {
                    "name": name,
                    "exactly": _sub_request(ctx, reader, exactly, f"{where}.exactly", name),
                }
            )
        else:  # v1beta1: the request's fields beside its name
            fields = {key: value for key, value in item.items() if key != "name"}
            requests.append(
                {"name": name, "exactly": _sub_request(ctx, reader, fields, where, name)}
            )
    constraints = []
    for position, item in enumerate(reader.objects(devices, "constraints", f"{path}.constraints")):
        where = f"{path}.constraints[{position}]"
        constraint: dict[str, Any] = {
            "requests": reader.texts(item, "requests", f"{where}.requests")
        }
        for key, field_name in (
            ("matchAttribute", "match_attribute"),
            ("distinctAttribute", "distinct_attribute"),
        ):
            value = reader.text(item, key, f"{where}.{key}")
            if value is not None:
                constraint[field_name] = value
        constraints.append(constraint)
    return requests, constraints


def read_claim_template(ctx: Context, obj: KubeObject) -> None:
    """R7: a ResourceClaimTemplate: the claim each pod naming it gets."""
    reader = obj.reader
    _, _, _, template_id = namespaced(reader, obj.item, "ResourceClaimTemplate")
    spec = reader.mapping(obj.item, "spec", "spec")
    requests, constraints = _claim_spec(
        ctx, reader, reader.mapping(spec, "spec", "spec.spec"), "spec.spec"
    )
    ctx.dra.templates[template_id] = reader.model(
        ResourceClaim,
        {"id": template_id, "requests": requests, "constraints": constraints},
    )


def read_resource_claim(ctx: Context, obj: KubeObject) -> None:
    """R7, R8: a ResourceClaim: its requests, and its allocation and users when allocated."""
    reader = obj.reader
    metadata, namespace, _, claim_id = namespaced(reader, obj.item, "ResourceClaim")
    spec = reader.mapping(obj.item, "spec", "spec")
    status = reader.mapping(obj.item, "status", "status")
    requests, constraints = _claim_spec(ctx, reader, spec, "spec")
    claim: dict[str, Any] = {"id": claim_id, "requests": requests, "constraints": constraints}
    annotations = reader.strings(metadata, "annotations", "metadata.annotations")
    if annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true":
        claim["extended_resource"] = True
    allocation = reader.mapping(status, "allocation", "status.allocation")
    if allocation:
        devices = reader.mapping(allocation, "devices", "status.allocation.devices")
        path = "status.allocation.devices.results"
        results = []
        for position, item in enumerate(reader.objects(devices, "results", path)):
            where = f"{path}[{position}]"
            result: dict[str, Any] = {
                key: reader.text(item, key, f"{where}.{key}")
                for key in ("request", "driver", "pool", "device")
            }
            if None in result.values():
                reader.fail(f"{where} needs request, driver, pool and device")
            consumed = reader.mapping(item, "consumedCapacity", f"{where}.consumedCapacity")
            result["consumed_capacity"] = {
                key: _quantity_text(reader, value, f"{where}.consumedCapacity.{key}")
                for key, value in consumed.items()
            }
            share = reader.text(item, "shareID", f"{where}.shareID")
            if share is not None:
                result["share_id"] = share
            if reader.flag(item, "adminAccess", f"{where}.adminAccess"):
                _unmodelled(ctx, "allocation.adminAccess")
            results.append(result)
        claim["allocated"] = results
        if reader.listing(devices, "config", "status.allocation.devices.config"):
            _unmodelled(ctx, "allocation.config")
        selector = reader.mapping(allocation, "nodeSelector", "status.allocation.nodeSelector")
        if selector:
            claim["node"] = _allocation_node(ctx, reader, selector)
    users = []
    for position, user in enumerate(reader.objects(status, "reservedFor", "status.reservedFor")):
        where = f"status.reservedFor[{position}]"
        if reader.text(user, "resource", f"{where}.resource") != "pods":
            _unmodelled(ctx, "reservedFor.non-pod")  # a PodGroup or another consumer
            continue
        user_name = reader.text(user, "name", f"{where}.name")
        if user_name is not None:
            users.append(f"{namespace}/{user_name}")
    claim["pods"] = users
    for key in status:
        if key not in ("allocation", "reservedFor"):
            _unmodelled(ctx, f"ResourceClaim.status.{key}")  # devices' health, conditions
    ctx.dra.claims[claim_id] = reader.model(ResourceClaim, claim)


def _allocation_node(ctx: Context, reader: Reader, selector: Mapping[str, Any]) -> str | None:
    """The node an allocation is bound to: its node selector's one ``metadata.name In
    [node]`` field (another selector, a network-attached device's, is counted)."""
    terms = node_selector_terms(reader, selector, "status.allocation.nodeSelector")
    if len(terms) == 1 and not terms[0]["match_expressions"]:
        fields = terms[0]["match_fields"]
        if (
            len(fields) == 1
            and fields[0]["key"] == "metadata.name"
            and fields[0]["operator"] == "In"
            and len(fields[0]["values"]) == 1
        ):
            node: str = fields[0]["values"][0]
            return node
    _unmodelled(ctx, "allocation.nodeSelector")
    return None


def read_device_taint_rule(ctx: Context, obj: KubeObject) -> None:
    """A DeviceTaintRule: the taint it adds to the devices it selects (applied when the
    cluster is made)."""
    reader = obj.reader
    _, name = named(reader, obj.item, "DeviceTaintRule")
    spec = reader.mapping(obj.item, "spec", "spec")
    selector = reader.mapping(spec, "deviceSelector", "spec.deviceSelector")
    taint = reader.text_fields(
        reader.mapping(spec, "taint", "spec.taint"), ("key", "value", "effect"), "spec.taint"
    )
    ctx.dra.taint_rules.append(
        TaintRule(
            name=name,
            driver=reader.text(selector, "driver", "spec.deviceSelector.driver"),
            pool=reader.text(selector, "pool", "spec.deviceSelector.pool"),
            device=reader.text(selector, "device", "spec.deviceSelector.device"),
            device_class=reader.text(
                selector, "deviceClassName", "spec.deviceSelector.deviceClassName"
            ),
            selectors=tuple(_selectors(reader, selector, "spec.deviceSelector")),
            taint=reader.model(DeviceTaint, taint),
        )
    )


def pod_claims(
    ctx: Context,
    reader: Reader,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    namespace: str,
    pod_id: str,
) -> None:
    """Note the claims a pod uses: ``spec.resourceClaims`` (a claim named, or one made from
    a template, named in ``status.resourceClaimStatuses`` once made) and the claim of its
    DRA-backed extended resources (``status.extendedResourceClaimStatus``)."""
    made = {}
    for position, item in enumerate(
        reader.objects(status, "resourceClaimStatuses", "status.resourceClaimStatuses")
    ):
        where = f"status.resourceClaimStatuses[{position}]"
        entry = reader.text(item, "name", f"{where}.name")
        if entry is not None:
            made[entry] = reader.text(item, "resourceClaimName", f"{where}.resourceClaimName")
    refs = []
    for position, item in enumerate(reader.objects(spec, "resourceClaims", "spec.resourceClaims")):
        where = f"spec.resourceClaims[{position}]"
        entry = reader.text(item, "name", f"{where}.name")
        claim = reader.text(item, "resourceClaimName", f"{where}.resourceClaimName")
        template = reader.text(
            item, "resourceClaimTemplateName", f"{where}.resourceClaimTemplateName"
        )
        if entry is None or (claim is None) == (template is None):
            reader.fail(
                f"{where} needs a name and exactly one of resourceClaimName and "
                "resourceClaimTemplateName"
            )
        if claim is None and made.get(entry):
            claim = made[entry]
        refs.append(
            PodClaimRef(
                name=entry,
                claim=f"{namespace}/{claim}" if claim else None,
                template=f"{namespace}/{template}" if template else None,
            )
        )
    if refs:
        ctx.dra.pod_claims[pod_id] = refs
    extended = reader.mapping(
        status, "extendedResourceClaimStatus", "status.extendedResourceClaimStatus"
    )
    name = reader.text(extended, "resourceClaimName", "status.extendedResourceClaimStatus")
    if name is not None:
        ctx.dra.extended_claims[pod_id] = f"{namespace}/{name}"


__all__ = [
    "EXTENDED_CLAIM_ANNOTATION",
    "AllocatedDevice",
    "CounterConsumption",
    "DeviceConstraint",
    "DeviceRequest",
    "DeviceSubRequest",
    "node_selector_terms",
    "pod_claims",
    "read_claim_template",
    "read_device_class",
    "read_device_taint_rule",
    "read_resource_claim",
    "read_resource_slice",
]
