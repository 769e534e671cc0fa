"""How much of a node's devices can still be allocated: rule E9 of ``models/extender.md``.

:func:`servable` is the scheduler extender's measure for choosing devices (a device
set that leaves more of the node servable is better), :func:`servable_devices` its
part per device, and :func:`servable_costs` what taking each device alone removes,
to order the device-fit search (:mod:`gpuopt.cluster.devicefit`) cheapest first.
They read the node as the search does (its allocations and counters).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

from gpuopt.cluster.devicefit import DeviceNode, _Standing, _standing, numbers
from gpuopt.cluster.devicerules import REFUSING_EFFECTS, allocated_consumption, amount
from gpuopt.cluster.devices import Device, ResourceClaim


def servable(node: DeviceNode) -> Fraction:
    """How much of ``node`` can still be allocated: the sum of :func:`servable_devices`
    (rule E9 of ``models/extender.md``)."""
    return sum(servable_devices(node).values(), Fraction(0))


def servable_devices(node: DeviceNode) -> dict[str, Fraction]:
    """How much of each device of ``node`` can still be allocated (rule E9 of
    ``models/extender.md``): each device that one more request could take alone counts
    1 -- one not taken whole, not cut by its pool's counters (its own draw still fits
    what is left), with no NoSchedule/NoExecute taint -- and a shareable device counts
    the smallest share of its capacities still free. A MIG placement that cuts a whole
    GPU takes that GPU and every placement overlapping it out of the count; a whole GPU
    left uncut keeps all of them in.
    """
    return _parts(_standing(node))


def _parts(standing: _Standing) -> dict[str, Fraction]:
    """:func:`servable_devices` of the node that ``standing`` reads."""
    found: dict[str, Fraction] = {}
    for position, device in enumerate(standing.devices):
        part = _part(standing, position)
        if part is not None:
            found[device.key] = part
    return found


def _part(standing: _Standing, position: int) -> Fraction | None:
    """The device at ``position``'s part of the servable count, None when it has none."""
    device = standing.devices[position]
    if standing.in_use[position] or standing.unknown_draw[position] is not None:
        return None
    if any(taint.effect in REFUSING_EFFECTS for taint in device.taints):
        return None
    if not standing.drawn[position] and standing.cut(position):
        return None  # cut: its own draw no longer fits what its counters have left
    if device.allow_multiple_allocations:
        return _share_left(standing.taken[position], device)
    return Fraction(1)


def _share_left(taken: dict[str, Fraction], device: Device) -> Fraction:
    """The smallest share of a shareable ``device``'s capacities still free (1 without
    capacities), ``taken`` being what its allocations hold of each."""
    shares = [
        max(Fraction(0), 1 - taken.get(name, Fraction(0)) / value)
        for name, capacity in device.capacity.items()
        if (value := amount(capacity.value)) > 0
    ]
    return min(shares) if shares else Fraction(1)


def servable_costs(node: DeviceNode) -> dict[str, Fraction]:
    """What taking each device of ``node`` alone would remove from :func:`servable`: the
    device's own part, and every servable device whose counters no longer fit beside
    its draw (a MIG placement cuts its whole GPU and the placements overlapping it).
    One pass over the devices drawing on each counter set; for ordering a search, not
    for judging (a shareable device is counted as taken whole)."""
    standing = _standing(node)
    return _costs(standing, _parts(standing))


def _costs(standing: _Standing, worth: dict[str, Fraction]) -> dict[str, Fraction]:
    """:func:`servable_costs` of the node ``standing`` reads, whose parts are ``worth``."""
    draws: list[dict[tuple[str, str, str], dict[str, Fraction]]] = []
    by_set: defaultdict[tuple[str, str, str], list[int]] = defaultdict(list)
    for position, device in enumerate(standing.devices):
        drawn: dict[tuple[str, str, str], dict[str, Fraction]] = {}
        if not standing.drawn[position] and standing.unknown_draw[position] is None:
            for consumed in device.consumes_counters:
                key = (device.driver, device.pool, consumed.counter_set)
                drawn[key] = {name: amount(text) for name, text in consumed.counters.items()}
                by_set[key].append(position)
        draws.append(drawn)
    costs: dict[str, Fraction] = {}
    for position, device in enumerate(standing.devices):
        cost = worth.get(device.key, Fraction(0))
        cut: set[int] = set()
        for key, mine in draws[position].items():
            left = standing.available.get(key, {})
            for other in by_set[key]:
                if other == position or other in cut:
                    continue
                if standing.devices[other].key not in worth:
                    continue
                theirs = draws[other][key]
                if any(
                    value + theirs.get(name, Fraction(0)) > left.get(name, Fraction(0))
                    for name, value in mine.items()
                ):
                    cut.add(other)
        cost += sum((worth[standing.devices[other].key] for other in cut), Fraction(0))
        costs[device.key] = cost
    return costs


@dataclass
class Servable:
    """E9's measure of one node, kept to judge device sets on it without reading the whole
    node again: its servable count (:func:`servable`), each device's part
    (:func:`servable_devices`) and cost (:func:`servable_costs`), and :meth:`after`, the
    count once some claims are allocated on it."""

    node: DeviceNode
    total: Fraction
    parts: dict[str, Fraction]
    costs: dict[str, Fraction]
    by_cost: tuple[Device, ...]  # the node's devices, least cost first (ties: its order)
    _standing: _Standing = field(repr=False)
    _by_set: dict[tuple[str, str, str], list[int]] = field(repr=False)
    _by_pool: dict[tuple[str, str], list[int]] = field(repr=False)

    @classmethod
    def of(cls, node: DeviceNode) -> Servable:
        """The measure of ``node``."""
        standing = _standing(node)
        parts = _parts(standing)
        by_set: defaultdict[tuple[str, str, str], list[int]] = defaultdict(list)
        by_pool: defaultdict[tuple[str, str], list[int]] = defaultdict(list)
        for position, device in enumerate(standing.devices):
            by_pool[device.driver, device.pool].append(position)
            for consumed in device.consumes_counters:
                by_set[device.driver, device.pool, consumed.counter_set].append(position)
        costs = _costs(standing, parts)
        return cls(
            node,
            sum(parts.values(), Fraction(0)),
            parts,
            costs,
            tuple(sorted(node.devices, key=lambda device: costs[device.key])),
            standing,
            dict(by_set),
            dict(by_pool),
        )

    def after(self, claims: Sequence[ResourceClaim]) -> Fraction:
        """:func:`servable` of the node with ``claims`` allocated on it too (their results
        naming its devices count, as in :class:`~gpuopt.cluster.devicefit.DeviceNode`):
        only the devices they take and those drawing on a counter set they draw from (or
        in a pool they overdraw) are judged again; every other device keeps its part."""
        before = self._standing
        in_use, drawn = list(before.in_use), list(before.drawn)
        taken = list(before.taken)
        available = dict(before.available)
        touched: set[int] = set()
        for claim in claims:
            for result in claim.allocated or ():
                position = before.index.get(result.key)
                if position is None:
                    continue
                touched.add(position)
                device = before.devices[position]
                if device.allow_multiple_allocations:
                    mine = dict(taken[position])
                    for name, value in allocated_consumption(claim, result.request, device).items():
                        mine[name] = mine.get(name, Fraction(0)) + value
                    taken[position] = mine
                else:
                    in_use[position] = True
                if drawn[position]:
                    continue  # (its counters are drawn once, as _standing draws them)
                drawn[position] = True
                for consumed in device.consumes_counters:
                    key = (device.driver, device.pool, consumed.counter_set)
                    found = available.get(key)
                    if found is None:
                        continue
                    left = dict(found)
                    for name, text in consumed.counters.items():
                        if name in left:
                            left[name] -= amount(text)
                    available[key] = left
                    touched.update(self._by_set.get(key, ()))
        overdrawn = set(before.overdrawn)
        for key, counters in available.items():
            pool = key[:2]
            if pool in overdrawn or counters is before.available.get(key):
                continue  # (already overdrawn, or no claim drew on this set)
            if any(value < 0 for value in counters.values()):
                overdrawn.add(pool)
                touched.update(self._by_pool.get(pool, ()))
        if not touched:
            return self.total
        changed = {
            key: value for key, value in available.items() if value is not before.available.get(key)
        }
        fast = {**before.left, **numbers(changed)}
        standing = replace(
            before,
            in_use=in_use,
            drawn=drawn,
            taken=taken,
            available=available,
            overdrawn=overdrawn,
            left=fast,
        )
        total = self.total
        for position in touched:
            was = self.parts.get(before.devices[position].key, Fraction(0))
            total += (_part(standing, position) or Fraction(0)) - was
        return total


__all__ = ["Servable", "servable", "servable_costs", "servable_devices"]
