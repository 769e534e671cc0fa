"""What one device gives one request (rules DF4-DF8 of ``models/cluster.md``), shared by the
device-fit search (:mod:`gpuopt.cluster.devicefit`) and its checker
(:mod:`gpuopt.cluster.devicecheck`), each tested on its own: exact quantities, taints and
tolerations, attributes, capacity and its policies, and which requests a constraint covers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from gpuopt.cluster.devices import (
    Device,
    DeviceCapacity,
    DeviceSubRequest,
    DeviceToleration,
    ResourceClaim,
    Version,
)
from gpuopt.cluster.devices import amount as _parse_amount

#: Taint effects that keep a device from a request that does not tolerate them (DF7).
REFUSING_EFFECTS = ("NoSchedule", "NoExecute")


@functools.lru_cache(maxsize=65_536)
def amount(text: str) -> Fraction:
    """A quantity's exact value, remembered (the search and the checker read the same
    few texts many times)."""
    return _parse_amount(text)


#: An exact amount: an int where it is integral (it adds and compares faster than a
#: Fraction, and mixes with one exactly), else a Fraction.
Number = int | Fraction


def _number(value: Fraction) -> Number:
    """``value`` as an int when it is integral, else itself (the same exact value)."""
    return value.numerator if value.denominator == 1 else value


@functools.lru_cache(maxsize=65_536)
def quick_amount(text: str) -> Number:
    """:func:`amount` as a :data:`Number` (for the counters the search adds and compares)."""
    return _number(amount(text))


def tolerates(tolerations: Sequence[DeviceToleration], key: str, value: str, effect: str) -> bool:
    """DF7: whether a request's tolerations tolerate a device taint (Kubernetes'
    ``ToleratesTaint``: an empty key matches every key, an empty effect every effect,
    ``Exists`` any value, ``Equal`` (the default) the same value)."""
    for toleration in tolerations:
        if toleration.effect and toleration.effect != effect:
            continue
        if toleration.key and toleration.key != key:
            continue
        if toleration.operator == "Exists" or (toleration.value or "") == value:
            return True
    return False


def untolerated(sub: DeviceSubRequest, device: Device) -> str | None:
    """DF7: the first NoSchedule/NoExecute taint of ``device`` that ``sub`` does not
    tolerate, as ``key=value:effect``."""
    for taint in device.taints:
        if taint.effect in REFUSING_EFFECTS and not tolerates(
            sub.tolerations, taint.key, taint.value or "", taint.effect
        ):
            return f"{taint.key}={taint.value or ''}:{taint.effect}"
    return None


def attribute_value(device: Device, name: str) -> tuple[str, Any] | None:
    """DF8: a device's attribute by its fully qualified name, with its type (Kubernetes'
    ``lookupAttribute``: the name as written, else the bare name when the domain is the
    driver's); None when it has none."""
    found = device.attributes.get(name)
    if found is None:
        domain, _, bare = name.partition("/")
        if bare and domain == device.driver:
            found = device.attributes.get(bare)
    if found is None:
        return None
    if isinstance(found, Version):
        return ("version", found.version)
    return (type(found).__name__, found)


def _policy_amount(requested: Fraction | None, capacity: DeviceCapacity) -> Fraction:
    """What one allocation consumes of one capacity (Kubernetes' calculateConsumedCapacity,
    in exact arithmetic)."""
    policy = capacity.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return amount(policy.default)
        return amount(capacity.value)
    if policy is None:
        return requested
    if policy.min is not None:
        low = amount(policy.min)
        if requested < low:
            return low
        if policy.step is None:
            return requested
        step = amount(policy.step)
        return low + step * math.ceil((requested - low) / step)
    if policy.valid_values:
        for valid in sorted(amount(text) for text in policy.valid_values):
            if requested <= valid:
                return valid
    return requested


def _violates_policy(value: Fraction, capacity: DeviceCapacity) -> bool:
    policy = capacity.request_policy
    if policy is None or (policy.default is not None and value == amount(policy.default)):
        return False
    if policy.min is not None or policy.max is not None or policy.step is not None:
        if policy.max is not None and value > amount(policy.max):
            return True
        if policy.step is not None:
            low = amount(policy.min) if policy.min is not None else Fraction(0)
            return ((value - low) / amount(policy.step)).denominator != 1
        return False
    if policy.valid_values:
        return value not in {amount(text) for text in policy.valid_values}
    return False


def consumption(sub: DeviceSubRequest, device: Device) -> dict[str, Fraction] | str:
    """DF6: what ``sub`` takes of ``device``'s capacities, or why it cannot take it.

    Every capacity the request names must exist on the device. A device that does not
    allow multiple allocations is taken whole: each named amount must be at most its
    capacity (the answer is then empty). A shareable device gives each capacity its
    request policy's amount (the request rounded up to the range's step or the next valid
    value; the default, else the whole capacity, when not named), refused when it breaks
    the policy.
    """
    requested = {name: amount(text) for name, text in sub.capacity.items()}
    for name in requested:
        if name not in device.capacity:
            return f"it has no capacity {name!r}"
    if not device.allow_multiple_allocations:
        for name, value in requested.items():
            if value > amount(device.capacity[name].value):
                return f"{name} {sub.capacity[name]} is more than its {device.capacity[name].value}"
        return {}
    taken = {}
    for name, capacity in device.capacity.items():
        value = _policy_amount(requested.get(name), capacity)
        if _violates_policy(value, capacity):
            return f"{name} {value} breaks its request policy"
        taken[name] = value
    return taken


def allocated_consumption(
    claim: ResourceClaim, request: str, device: Device
) -> dict[str, Fraction]:
    """What an allocation already made takes of a shareable device: its
    ``consumedCapacity``, else what its request asks by the device's policy (else all)."""
    for result in claim.allocated or ():
        if result.key == device.key and result.request == request and result.consumed_capacity:
            return {name: amount(text) for name, text in result.consumed_capacity.items()}
    base, _, alternative = request.partition("/")
    for item in claim.requests:
        if item.name != base:
            continue
        for sub in item.alternatives:
            if not alternative or sub.name == alternative:
                taken = consumption(sub, device)
                if isinstance(taken, dict):
                    return taken
    return {name: amount(cap.value) for name, cap in device.capacity.items()}


def covers(constraint_requests: Sequence[str], request: str, name: str) -> bool:
    """Whether a constraint naming ``constraint_requests`` covers the (sub)request
    ``name`` of request ``request`` (empty: all; a request's name covers its
    alternatives)."""
    return not constraint_requests or request in constraint_requests or name in constraint_requests


__all__ = [
    "REFUSING_EFFECTS",
    "Number",
    "allocated_consumption",
    "amount",
    "attribute_value",
    "consumption",
    "covers",
    "quick_amount",
    "tolerates",
    "untolerated",
]
