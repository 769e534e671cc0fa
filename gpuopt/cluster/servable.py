"""How much of a node's devices can still be allocated: rule E9 of ``models/extender.md``.

:func:`servable` is the scheduler extender's measure for choosing devices (a device
set that leaves more of the node servable is better), :func:`servable_devices` its
part per device, and :func:`servable_costs` what taking each device alone removes,
to order the device-fit search (:mod:`gpuopt.cluster.devicefit`) cheapest first.
They read the node as the search does (its allocations and counters).
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

from gpuopt.cluster.devicefit import REFUSING_EFFECTS, DeviceNode, _standing, amount


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
    standing = _standing(node)
    found: dict[str, Fraction] = {}
    for position, device in enumerate(standing.devices):
        if standing.in_use[position] or standing.unknown_draw[position] is not None:
            continue
        if any(taint.effect in REFUSING_EFFECTS for taint in device.taints):
            continue
        cut = (device.driver, device.pool) in standing.overdrawn or any(
            amount(text)
            > standing.available[device.driver, device.pool, consumed.counter_set][counter]
            for consumed in device.consumes_counters
            for counter, text in consumed.counters.items()
        )
        if cut and not standing.drawn[position]:
            continue
        shares = [
            max(Fraction(0), 1 - standing.taken[position].get(name, Fraction(0)) / value)
            for name, capacity in device.capacity.items()
            if (value := amount(capacity.value)) > 0
        ]
        found[device.key] = (
            min(shares) if device.allow_multiple_allocations and shares else Fraction(1)
        )
    return found


def servable_costs(node: DeviceNode) -> dict[str, Fraction]:
    """What taking each device of ``node`` alone would remove from :func:`servable`: the
    device's own part, and every servable device whose counters no longer fit beside
    its draw (a MIG placement cuts its whole GPU and the placements overlapping it).
    One pass over the devices drawing on each counter set; for ordering a search, not
    for judging (a shareable device is counted as taken whole)."""
    standing = _standing(node)
    worth = servable_devices(node)
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


__all__ = ["servable", "servable_costs", "servable_devices"]
