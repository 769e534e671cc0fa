"""Device fit (rules DF1-DF8 of ``models/cluster.md``): can a pod's claims be allocated on a node?

Kubernetes' DRA allocator decides, for a pod whose ResourceClaims are not yet
allocated, whether some devices of a node serve every request of every claim.
This module decides the same question exactly, reports which rule refuses when
none do, and checks any proposed allocation against the rules on its own:

- :func:`device_fit` searches: each request (``exactly``, or the alternatives
  of ``firstAvailable`` in order) gets ``count`` distinct devices (or, with
  ``allocationMode: All``, every device it selects) such that DF1-DF8 hold.
  Backtracking, requests in order of least slack (candidates minus count,
  ``All`` first), devices of a request chosen as combinations (never the same
  set twice in another order), and after each request a forward check that
  every request left still has enough free candidates. A work cap (``steps``)
  makes the answer ``unknown``, never a wrong yes.
- :func:`gpuopt.cluster.devicecheck.violations` (the checker, in a module of its
  own) judges a proposed allocation against every rule from the raw facts, with
  no part of the search; :func:`gpuopt.cluster.devicecheck.brute_force`
  enumerates every allocation of a tiny node and asks the checker, so the tests
  can hold the search's yes and no to it.
- :func:`fits` and :func:`fit_nodes` answer for a pod of a
  :class:`~gpuopt.cluster.model.Cluster` snapshot.

What one device gives one request (quantities, tolerations, attributes, capacity
policies) is in :mod:`gpuopt.cluster.devicerules`, which the search and the checker share.

An expression that cannot be evaluated (R5), a DeviceClass not read, or a
device drawing on a counter set not read makes the answer ``unknown`` (the
reason names the claim, the request and the device): never a guess.

>>> from gpuopt.cluster.devices import Device, DeviceClass, DeviceRequest, ResourceClaim
>>> gpu = lambda name: Device(name=name, driver="gpu.example.com", pool="n1")
>>> node = DeviceNode("n1", devices=(gpu("gpu-0"), gpu("gpu-1")))
>>> want = lambda n: ResourceClaim(id="ns/c", requests=[DeviceRequest(
...     name="gpus", exactly={"name": "gpus", "device_class": "any", "count": n})])
>>> device_fit(node, [want(2)], [DeviceClass(name="any")]).status
'fits'
>>> device_fit(node, [want(3)], [DeviceClass(name="any")]).rule
'DF3'
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

from gpuopt.cluster.cel import DeviceCel
from gpuopt.cluster.devicerules import (
    Number,
    _number,
    allocated_consumption,
    amount,
    attribute_value,
    consumption,
    covers,
    quick_amount,
    untolerated,
)
from gpuopt.cluster.devices import (
    CounterSet,
    Device,
    DeviceClass,
    DeviceSubRequest,
    ResourceClaim,
)

if TYPE_CHECKING:
    from gpuopt.cluster.model import Cluster

#: Device placements tried before the search gives up with ``unknown``.
WORK_LIMIT = 50_000
Status = Literal["fits", "refused", "unknown"]


@dataclass(frozen=True)
class DeviceNode:
    """What a node offers to claims: its devices (its own and the cluster pools' devices
    that reach it), its pools' counter sets, and every claim already allocated (only the
    results naming these devices count)."""

    name: str
    devices: tuple[Device, ...] = ()
    counters: tuple[CounterSet, ...] = ()
    allocated: tuple[ResourceClaim, ...] = ()


@dataclass(frozen=True)
class Pick:
    """One device allocated to one request: ``request`` is the request's name, or
    ``request/alternative`` for a ``firstAvailable`` alternative (as Kubernetes writes
    ``status.allocation``); ``consumed`` the capacity taken of a shareable device."""

    claim: str
    request: str
    device: str
    consumed: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True)
class Fit:
    """The answer: ``fits`` with the picks, ``refused`` with the first rule that fails,
    or ``unknown`` (an expression, a class or a counter set cannot be judged, or the work
    cap was reached); ``reason`` is one sentence."""

    status: Status
    picks: tuple[Pick, ...] = ()
    rule: str | None = None
    reason: str = ""
    steps: int = 0

    @property
    def fits(self) -> bool:
        """Whether the claims fit (``unknown`` is not a yes)."""
        return self.status == "fits"


class Selection:
    """DF2: which devices a DeviceClass and a request's selectors select, each CEL
    expression evaluated once per device (class selectors first; the request's only on
    devices the class selects, as Kubernetes does). Share one across nodes."""

    def __init__(self, classes: Iterable[DeviceClass]) -> None:
        self.classes = {item.name: item for item in classes}
        self.cel = DeviceCel()
        self._variables: dict[str, dict[str, Any]] = {}
        self._answers: dict[tuple[str, str], bool | None] = {}

    def _matches(self, expression: str, device: Device) -> bool | None:
        key = (expression, device.key)
        if key not in self._answers:
            variable = self._variables.get(device.key)
            if variable is None:
                variable = self._variables[device.key] = device.cel()
            self._answers[key] = self.cel.matches(expression, variable)
        return self._answers[key]

    def selects(self, sub: DeviceSubRequest, device: Device) -> bool | None:
        """Whether ``sub``'s class and selectors select ``device`` (None: unknown)."""
        found = self.classes.get(sub.device_class)
        if found is None:
            return None
        for expression in [*found.selectors, *sub.selectors]:
            answer = self._matches(expression, device)
            if answer is not True:
                return answer
        return True


# ---- the node as it stands (allocated devices, counters) ----


@dataclass
class _Standing:
    devices: list[Device]
    index: dict[str, int]
    in_use: list[bool]  # allocated and not shareable
    drawn: list[bool]  # its counters are already drawn (allocated)
    taken: list[dict[str, Fraction]]  # shareable: capacity already consumed
    available: dict[tuple[str, str, str], dict[str, Fraction]]  # set -> counter -> left
    overdrawn: set[tuple[str, str]]  # pools with a counter already below zero
    unknown_draw: list[str | None]  # why a device's draw cannot be judged
    left: dict[tuple[str, str, str], dict[str, Number]]  # available, as Numbers

    def cut(self, position: int) -> bool:
        """Whether the device at ``position`` could not draw its counters now: its pool is
        overdrawn, or its own draw exceeds what a counter set has left (DF5)."""
        device = self.devices[position]
        if (device.driver, device.pool) in self.overdrawn:
            return True
        return any(
            quick_amount(text) > self.left[device.driver, device.pool, consumed.counter_set][name]
            for consumed in device.consumes_counters
            for name, text in consumed.counters.items()
        )


#: :func:`_standing` of each DeviceNode still alive (by its id; an entry goes when its node
#: is freed): a node is read once however many searches and measures ask about it (the
#: extender keeps its nodes between requests). No caller changes a standing.
_STANDINGS: dict[int, _Standing] = {}


def _standing(node: DeviceNode) -> _Standing:
    """How ``node`` stands (its allocations and counters), read once per node."""
    key = id(node)
    found = _STANDINGS.get(key)
    if found is None:
        found = _STANDINGS[key] = _read_standing(node)
        weakref.finalize(node, _STANDINGS.pop, key, None)
    return found


def _read_standing(node: DeviceNode) -> _Standing:
    devices = list(node.devices)
    index = {device.key: position for position, device in enumerate(devices)}
    in_use = [False] * len(devices)
    drawn = [False] * len(devices)
    taken: list[dict[str, Fraction]] = [defaultdict(Fraction) for _ in devices]
    for claim in node.allocated:
        for result in claim.allocated or ():
            position = index.get(result.key)
            if position is None:
                continue
            device = devices[position]
            drawn[position] = True
            if device.allow_multiple_allocations:
                for name, value in allocated_consumption(claim, result.request, device).items():
                    taken[position][name] += value
            else:
                in_use[position] = True
    available = {
        (item.driver, item.pool, item.name): {
            name: amount(text) for name, text in item.counters.items()
        }
        for item in node.counters
    }
    unknown: list[str | None] = [None] * len(devices)
    for position, device in enumerate(devices):
        for consumed in device.consumes_counters:
            found = available.get((device.driver, device.pool, consumed.counter_set))
            missing = (
                consumed.counter_set
                if found is None
                else next((name for name in consumed.counters if name not in found), None)
            )
            if missing is not None:
                unknown[position] = f"it draws on counter {missing!r} of its pool, not read"
    for position, device in enumerate(devices):
        if not drawn[position]:
            continue
        for consumed in device.consumes_counters:
            found = available.get((device.driver, device.pool, consumed.counter_set))
            for name, text in consumed.counters.items():
                if found is not None and name in found:
                    found[name] -= amount(text)
    overdrawn = {
        (driver, pool)
        for (driver, pool, _), counters in available.items()
        if any(value < 0 for value in counters.values())
    }
    return _Standing(
        devices,
        index,
        in_use,
        drawn,
        [dict(item) for item in taken],
        available,
        overdrawn,
        unknown,
        numbers(available),
    )


def numbers(
    available: Mapping[tuple[str, str, str], Mapping[str, Fraction]],
) -> dict[tuple[str, str, str], dict[str, Number]]:
    """What counter sets have left, as :data:`Number` values."""
    return {
        key: {name: _number(value) for name, value in counters.items()}
        for key, counters in available.items()
    }


# ---- the search ----


@dataclass
class _Alternative:
    name: str  # "request" or "request/alternative"
    sub: DeviceSubRequest
    count: int  # for All: the number of devices it selects
    every: bool  # allocationMode All
    candidates: list[tuple[int, dict[str, Fraction]]]  # (device, capacity it takes)
    constraints: list[int]  # the claim's constraints covering it


@dataclass
class _Unit:
    claim: int
    request: str
    alternatives: list[_Alternative]
    order: int


class _Cap(Exception):
    """The work cap was reached."""


class _Search:
    def __init__(
        self,
        standing: _Standing,
        claims: Sequence[ResourceClaim],
        units: list[_Unit],
        limit: int,
    ) -> None:
        self.standing = standing
        self.claims = claims
        self.units = units
        self.limit = limit
        self.steps = 0
        #: device -> (claim, admin access) of the picks holding it (devices taken whole)
        self.holders: defaultdict[int, list[tuple[int, bool]]] = defaultdict(list)
        self.added: defaultdict[int, defaultdict[str, Fraction]] = defaultdict(
            lambda: defaultdict(Fraction)
        )
        self.drawing: defaultdict[int, int] = defaultdict(int)  # device -> picks drawing
        # what the picks draw of each counter set, against what it has left (both exact:
        # an integral amount as an int, which adds and compares faster than a Fraction)
        self.counters: defaultdict[tuple[str, str, str], defaultdict[str, Number]] = defaultdict(
            lambda: defaultdict(int)
        )
        self.left = standing.left
        self._draws: dict[int, list[tuple[tuple[str, str, str], str, Number]]] = {}
        # per claim, per constraint: the matched value and its count, or the distinct values
        self.matched: dict[tuple[int, int], list[Any]] = {}
        self.distinct: defaultdict[tuple[int, int], set[Any]] = defaultdict(set)
        self.chosen: list[tuple[int, _Alternative, list[tuple[int, dict[str, Fraction]]]]] = []

    def _add(
        self, unit: _Unit, alternative: _Alternative, device: int, take: Mapping[str, Fraction]
    ) -> bool:
        self.steps += 1
        if self.steps > self.limit:
            raise _Cap
        standing = self.standing
        item = standing.devices[device]
        shareable = item.allow_multiple_allocations
        admin = alternative.sub.admin_access
        if not shareable:
            holders = self.holders[device]
            if admin:  # may share a device with other claims and allocations, not its own
                if any(claim == unit.claim for claim, _ in holders):
                    return False
            elif holders or standing.in_use[device]:
                return False
        else:
            extra = self.added[device]
            for name, value in take.items():
                limit = amount(item.capacity[name].value)
                if standing.taken[device].get(name, Fraction(0)) + extra[name] + value > limit:
                    return False
        draws = (
            bool(item.consumes_counters)
            and not standing.drawn[device]
            and not (shareable and self.drawing[device])
        )
        if draws:
            if (item.driver, item.pool) in standing.overdrawn:
                return False
            for key, name, drawn in self.draws(device):
                if self.counters[key][name] + drawn > self.left[key][name]:
                    return False
        claim = self.claims[unit.claim]
        for position in alternative.constraints:
            constraint = claim.constraints[position]
            if constraint.match_attribute is not None:
                have = attribute_value(item, constraint.match_attribute)
                held = self.matched.get((unit.claim, position))
                if have is None or (held is not None and held[1] > 0 and held[0] != have):
                    return False
            if constraint.distinct_attribute is not None:
                have = attribute_value(item, constraint.distinct_attribute)
                if have is None or have in self.distinct[unit.claim, position]:
                    return False
        # apply
        if not shareable:
            self.holders[device].append((unit.claim, admin))
        else:
            for name, value in take.items():
                self.added[device][name] += value
        if draws:
            for key, name, drawn in self.draws(device):
                self.counters[key][name] += drawn
        if shareable and item.consumes_counters and not standing.drawn[device]:
            self.drawing[device] += 1
        for position in alternative.constraints:
            constraint = claim.constraints[position]
            if constraint.match_attribute is not None:
                have = attribute_value(item, constraint.match_attribute)
                held = self.matched.setdefault((unit.claim, position), [have, 0])
                if held[1] == 0:
                    held[0] = have
                held[1] += 1
            if constraint.distinct_attribute is not None:
                self.distinct[unit.claim, position].add(
                    attribute_value(item, constraint.distinct_attribute)
                )
        return True

    def draws(self, device: int) -> list[tuple[tuple[str, str, str], str, Number]]:
        """What the device at ``device`` draws: (counter set, counter, amount), once."""
        found = self._draws.get(device)
        if found is None:
            item = self.standing.devices[device]
            found = self._draws[device] = [
                ((item.driver, item.pool, consumed.counter_set), name, quick_amount(text))
                for consumed in item.consumes_counters
                for name, text in consumed.counters.items()
            ]
        return found

    def _remove(
        self, unit: _Unit, alternative: _Alternative, device: int, take: Mapping[str, Fraction]
    ) -> None:
        standing = self.standing
        item = standing.devices[device]
        shareable = item.allow_multiple_allocations
        if not shareable:
            self.holders[device].remove((unit.claim, alternative.sub.admin_access))
        else:
            for name, value in take.items():
                self.added[device][name] -= value
        if shareable and item.consumes_counters and not standing.drawn[device]:
            self.drawing[device] -= 1
        draws = (
            bool(item.consumes_counters)
            and not standing.drawn[device]
            and not (shareable and self.drawing[device])
        )
        if draws:
            for key, name, drawn in self.draws(device):
                self.counters[key][name] -= drawn
        claim = self.claims[unit.claim]
        for position in alternative.constraints:
            constraint = claim.constraints[position]
            if constraint.match_attribute is not None:
                self.matched[unit.claim, position][1] -= 1
            if constraint.distinct_attribute is not None:
                self.distinct[unit.claim, position].discard(
                    attribute_value(item, constraint.distinct_attribute)
                )

    def _room(self, start: int) -> bool:
        """Forward check: every request from ``start`` on has an alternative with enough
        candidates not taken whole yet."""
        for unit in self.units[start:]:
            if not any(
                sum(
                    1
                    for device, _ in alternative.candidates
                    if alternative.sub.admin_access
                    or not self.holders[device]
                    or self.standing.devices[device].allow_multiple_allocations
                )
                >= alternative.count
                for alternative in unit.alternatives
            ):
                return False
        return True

    def run(self, start: int = 0) -> bool:
        if start == len(self.units):
            return True
        unit = self.units[start]
        for alternative in unit.alternatives:
            picked: list[tuple[int, dict[str, Fraction]]] = []
            if self._choose(unit, alternative, 0, picked, start):
                return True
        return False

    def _choose(
        self,
        unit: _Unit,
        alternative: _Alternative,
        first: int,
        picked: list[tuple[int, dict[str, Fraction]]],
        start: int,
    ) -> bool:
        if len(picked) == alternative.count:
            self.chosen.append((start, alternative, list(picked)))
            if self._room(start + 1) and self.run(start + 1):
                return True
            self.chosen.pop()
            return False
        candidates = alternative.candidates
        need = alternative.count - len(picked)
        for position in range(first, len(candidates) - need + 1):
            device, take = candidates[position]
            if not self._add(unit, alternative, device, take):
                if alternative.every:
                    return False  # All: every device it selects, or none
                continue
            picked.append((device, take))
            if self._choose(unit, alternative, position + 1, picked, start):
                return True
            picked.pop()
            self._remove(unit, alternative, device, take)
            if alternative.every:
                return False
        return False


def _units(
    standing: _Standing,
    claims: Sequence[ResourceClaim],
    selection: Selection,
    node: str,
) -> tuple[list[_Unit], Fit | None]:
    """Every request with its alternatives' candidates (the rules a single device decides:
    DF2, DF4 for devices allocated before, DF5 alone, DF6, DF7, DF8's attribute present),
    or the answer when one request has no alternative with enough candidates (or one
    cannot be judged)."""
    units: list[_Unit] = []
    for claim_index, claim in enumerate(claims):
        for request in claim.requests:
            exactly = request.exactly is not None
            alternatives = []
            shortfalls = []
            for sub in request.alternatives:
                name = request.name if exactly else f"{request.name}/{sub.name}"
                constraints = [
                    position
                    for position, item in enumerate(claim.constraints)
                    if covers(item.requests, request.name, name)
                ]
                counts = dict.fromkeys(("DF2", "DF4", "DF6", "DF7", "DF5", "DF8"), 0)
                candidates = []
                every_ok = True
                if sub.device_class not in selection.classes:
                    return [], Fit(
                        "unknown",
                        rule="DF2",
                        reason=f"DF2: claim {claim.id!r} request {name!r} names DeviceClass "
                        f"{sub.device_class!r}, which was not read, so which devices it selects "
                        "is unknown.",
                    )
                for position, device in enumerate(standing.devices):
                    selected = selection.selects(sub, device)
                    if selected is None:
                        return [], Fit(
                            "unknown",
                            rule="DF2",
                            reason=f"DF2: claim {claim.id!r} request {name!r}: a CEL selector "
                            f"cannot be evaluated on device {device.key} of node {node!r}, so "
                            "what it selects is unknown.",
                        )
                    if not selected:
                        continue
                    counts["DF2"] += 1
                    if (
                        standing.in_use[position]
                        and not device.allow_multiple_allocations
                        and not sub.admin_access
                    ):
                        every_ok = False
                        continue
                    counts["DF4"] += 1
                    take = consumption(sub, device)
                    if isinstance(take, str):
                        every_ok = False
                        continue
                    if device.allow_multiple_allocations and any(
                        standing.taken[position].get(key, Fraction(0)) + value
                        > amount(device.capacity[key].value)
                        for key, value in take.items()
                    ):
                        every_ok = False
                        continue
                    counts["DF6"] += 1
                    if untolerated(sub, device) is not None:
                        every_ok = False
                        continue
                    counts["DF7"] += 1
                    if device.consumes_counters and not standing.drawn[position]:
                        if standing.unknown_draw[position] is not None:
                            return [], Fit(
                                "unknown",
                                rule="DF5",
                                reason=f"DF5: claim {claim.id!r} request {name!r}: device "
                                f"{device.key} of node {node!r} could serve it, but "
                                f"{standing.unknown_draw[position]}.",
                            )
                        if standing.cut(position):
                            every_ok = False
                            continue
                    counts["DF5"] += 1
                    if any(
                        attribute_value(device, attribute) is None
                        for item in (claim.constraints[index] for index in constraints)
                        for attribute in (item.match_attribute, item.distinct_attribute)
                        if attribute is not None
                    ):
                        every_ok = False
                        continue
                    counts["DF8"] += 1
                    candidates.append((position, take))
                every = sub.allocation_mode == "All"
                count = counts["DF2"] if every else sub.count
                if every and (not every_ok or count == 0):
                    rule = next((label for label in counts if counts[label] < count), "DF3")
                    shortfalls.append((rule, name, sub, count, counts))
                    continue
                if len(candidates) < count:
                    rule = next((label for label in counts if counts[label] < count), "DF3")
                    if rule == "DF2":
                        rule = "DF3"  # too few devices of the class at all
                    shortfalls.append((rule, name, sub, count, counts))
                    continue
                alternatives.append(_Alternative(name, sub, count, every, candidates, constraints))
            if not alternatives:
                rule, name, sub, count, counts = shortfalls[0]
                return [], Fit(
                    "refused",
                    rule=rule,
                    reason=_shortfall(claim, name, sub, count, counts, rule, node),
                )
            units.append(_Unit(claim_index, request.name, alternatives, len(units)))
    return units, None


_STAGES = {
    "DF3": "are selected",
    "DF4": "are not allocated already",
    "DF6": "have the capacity it asks",
    "DF7": "have no taint it does not tolerate",
    "DF5": "fit their pool's counters",
    "DF8": "have its constraints' attributes",
}


def _shortfall(
    claim: ResourceClaim,
    name: str,
    sub: DeviceSubRequest,
    count: int,
    counts: Mapping[str, int],
    rule: str,
    node: str,
) -> str:
    if sub.allocation_mode == "All":
        if count == 0:
            return (
                f"DF3: claim {claim.id!r} request {name!r} asks all devices of class "
                f"{sub.device_class!r} and node {node!r} has none."
            )
        return (
            f"{rule}: claim {claim.id!r} request {name!r} asks all {count} devices of class "
            f"{sub.device_class!r} on node {node!r}, and only {counts[rule]} "
            f"{_STAGES[rule]}."
        )
    stage = "DF2" if rule == "DF3" else rule
    return (
        f"{rule}: claim {claim.id!r} request {name!r} asks {count} device(s) of class "
        f"{sub.device_class!r} and node {node!r} has {counts[stage]} that "
        f"{_STAGES['DF3' if stage == 'DF2' else stage]}."
    )


def device_fit(
    node: DeviceNode,
    claims: Sequence[ResourceClaim],
    classes: Iterable[DeviceClass] | Selection,
    *,
    work_limit: int = WORK_LIMIT,
) -> Fit:
    """Whether ``claims`` (not allocated yet) can all be allocated on ``node`` (DF1-DF8).

    Parameters
    ----------
    node
        The node's devices, counter sets and the claims already allocated.
    claims
        The pod's claims still to allocate (their ``allocated`` is ignored).
    classes
        The DeviceClasses read, or a :class:`Selection` shared across nodes.
    work_limit
        Device placements tried before the answer is ``unknown``.

    Returns
    -------
    Fit
        ``fits`` with one :class:`Pick` per device (requests of a ``firstAvailable``
        request named ``request/alternative``, earlier alternatives preferred), or
        ``refused`` naming the first rule that fails, or ``unknown``.
    """
    selection = classes if isinstance(classes, Selection) else Selection(classes)
    standing = _standing(node)
    units, answer = _units(standing, claims, selection, node.name)
    if answer is not None:
        return answer
    units.sort(
        key=lambda unit: (
            not any(alternative.every for alternative in unit.alternatives),
            min(
                len(alternative.candidates) - alternative.count for alternative in unit.alternatives
            ),
            unit.order,
        )
    )
    search = _Search(standing, claims, units, work_limit)
    try:
        found = search.run()
    except _Cap:
        return Fit(
            "unknown",
            rule=None,
            reason=f"the search stopped after {work_limit} device placements on node "
            f"{node.name!r} without an answer.",
            steps=search.steps,
        )
    if found:
        picks = [
            Pick(
                claim=claims[units[start].claim].id,
                request=alternative.name,
                device=standing.devices[device].key,
                consumed=take,
            )
            for start, alternative, picked in search.chosen
            for device, take in picked
        ]
        return Fit("fits", picks=tuple(picks), steps=search.steps)
    return _why_not(node, claims, selection, work_limit, search.steps)


def _why_not(
    node: DeviceNode,
    claims: Sequence[ResourceClaim],
    selection: Selection,
    work_limit: int,
    steps: int,
) -> Fit:
    """The rule to name when every request has candidates but no combination works."""
    standing = _standing(node)
    for claim in claims:
        if len(claims) > 1:
            alone = device_fit(node, [claim], selection, work_limit=work_limit)
            if alone.status != "fits":
                return Fit(alone.status, rule=alone.rule, reason=alone.reason, steps=steps)
        draws = any(device.consumes_counters for device in standing.devices)
        rule = "DF8" if claim.constraints else ("DF5" if draws else "DF4")
        what = {
            "DF8": "its constraints",
            "DF5": "the counters of their pools",
            "DF4": "distinct devices",
        }[rule]
        if len(claims) == 1:
            return Fit(
                "refused",
                rule=rule,
                reason=f"{rule}: claim {claim.id!r} (request {claim.requests[0].name!r} and the "
                f"rest) has devices for each request on node {node.name!r}, but none together "
                f"that keep {what}.",
                steps=steps,
            )
    draws = any(device.consumes_counters for device in standing.devices)
    rule = "DF5" if draws else "DF4"
    return Fit(
        "refused",
        rule=rule,
        reason=f"{rule}: each claim of the pod fits node {node.name!r} alone (first "
        f"{claims[0].id!r}, request {claims[0].requests[0].name!r}), but not all together.",
        steps=steps,
    )


def claims_fit(
    node: DeviceNode,
    claims: Sequence[ResourceClaim],
    selection: Selection,
    *,
    work_limit: int = WORK_LIMIT,
) -> Fit:
    """Whether a pod whose claims are ``claims`` (given, not looked up in a snapshot) fits
    ``node`` (DF1-DF8): :func:`fits` for a pod the snapshot does not hold, as the
    scheduler extender asks it.

    A claim already allocated keeps its devices: the pod fits only the node they are on
    (DF1, judged by the claim's ``node`` and by its devices being ``node``'s). The others
    are searched together with :func:`device_fit`. No claim: ``fits``.
    """
    keys = {device.key for device in node.devices}
    waiting = []
    for claim in claims:
        if claim.allocated is None:
            waiting.append(claim)
            continue
        elsewhere = next((result.key for result in claim.allocated if result.key not in keys), None)
        if (claim.node is not None and claim.node != node.name) or elsewhere is not None:
            return Fit(
                "refused",
                rule="DF1",
                reason=f"DF1: claim {claim.id!r} request "
                f"{claim.allocated[0].request if claim.allocated else '?'!r} is allocated on "
                f"node {claim.node or '?'!r}"
                + (f" (device {elsewhere})" if elsewhere else "")
                + f", not on {node.name!r}.",
            )
    if not waiting:
        return Fit("fits")
    return device_fit(node, waiting, selection, work_limit=work_limit)


# ---- a pod of a cluster snapshot ----


def device_node(cluster: Cluster, node_id: str) -> DeviceNode:
    """:class:`DeviceNode` of a snapshot's node: its devices, the cluster pools' devices
    that reach it, its counter sets, and every claim allocated."""
    node = next((item for item in cluster.nodes if item.id == node_id), None)
    if node is None:
        raise ValueError(f"node_id: {node_id!r} is not a node of the cluster")
    reaching = tuple(device for device in cluster.devices if node_id in device.nodes)
    allocated = tuple(claim for claim in cluster.claims if claim.allocated)
    return DeviceNode(node_id, (*node.devices, *reaching), tuple(node.counters), allocated)


def fits(
    cluster: Cluster,
    pod_id: str,
    node_id: str,
    *,
    selection: Selection | None = None,
    work_limit: int = WORK_LIMIT,
) -> Fit:
    """Whether pod ``pod_id``'s claims fit node ``node_id`` of a snapshot (DF1-DF8).

    A claim of the pod already allocated keeps its devices: the pod fits only the node
    they are on (DF1). The other claims (made from templates, or waiting) are searched
    with :func:`device_fit`. A pod with no claim fits every node as far as devices go.
    """
    here = device_node(cluster, node_id)  # ValueError for a node the cluster does not have
    mine = [
        claim for claim in cluster.claims if pod_id in claim.pods and not claim.extended_resource
    ]
    selection = selection or Selection(cluster.device_classes)
    return claims_fit(here, mine, selection, work_limit=work_limit)


def fit_nodes(cluster: Cluster, pod_id: str, *, work_limit: int = WORK_LIMIT) -> dict[str, Fit]:
    """:func:`fits` of pod ``pod_id`` on every node of the snapshot, one CEL cache shared."""
    selection = Selection(cluster.device_classes)
    return {
        node.id: fits(cluster, pod_id, node.id, selection=selection, work_limit=work_limit)
        for node in cluster.nodes
    }


__all__ = [
    "WORK_LIMIT",
    "DeviceNode",
    "Fit",
    "Pick",
    "Selection",
    "Status",
    "claims_fit",
    "device_fit",
    "device_node",
    "fit_nodes",
    "fits",
]
