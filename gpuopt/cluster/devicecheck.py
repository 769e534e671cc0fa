"""The device-fit checker (rules DF1-DF8 of ``models/cluster.md``) and a brute force.

Kept apart from the search (:mod:`gpuopt.cluster.devicefit`) so that the
tests can hold one to the other: :func:`violations` judges a proposed
allocation of a pod's claims on a node from the node's raw facts (what is
allocated, drawn and consumed), sharing with the search only the rules for one
device against one request (:mod:`gpuopt.cluster.devicerules`:
:func:`~gpuopt.cluster.devicerules.consumption`,
:func:`~gpuopt.cluster.devicerules.untolerated`, ...), each tested by hand;
:func:`brute_force` enumerates every allocation of a tiny node and keeps those
the checker accepts.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from gpuopt.cluster.devicefit import DeviceNode, Pick, Selection, device_fit
from gpuopt.cluster.devicerules import (
    allocated_consumption,
    amount,
    attribute_value,
    consumption,
    covers,
    untolerated,
)
from gpuopt.cluster.devices import (
    AllocatedDevice,
    CounterSet,
    Device,
    DeviceClass,
    DeviceSubRequest,
    ResourceClaim,
)

if TYPE_CHECKING:
    from gpuopt.cluster.model import Cluster


def violations(
    node: DeviceNode,
    claims: Sequence[ResourceClaim],
    classes: Iterable[DeviceClass] | Selection,
    picks: Sequence[Pick],
) -> list[str]:
    """Every rule DF1-DF8 a proposed allocation of ``claims`` on ``node`` breaks (one
    sentence each, naming the rule, the claim and the request); empty when it is legal.

    Independent of the search: it recomputes what is allocated, drawn and consumed from
    ``node`` and judges the picks as a whole.
    """
    selection = classes if isinstance(classes, Selection) else Selection(classes)
    found: list[str] = []
    devices = {device.key: device for device in node.devices}
    by_claim = {claim.id: claim for claim in claims}
    # DF1: every pick names a claim, a (sub)request of it and a device of the node
    per_request: defaultdict[tuple[str, str], list[Pick]] = defaultdict(list)
    for pick in picks:
        claim = by_claim.get(pick.claim)
        if claim is None:
            found.append(
                f"DF1: pick of device {pick.device} names claim {pick.claim!r}, not the pod's."
            )
            continue
        if pick.device not in devices:
            found.append(
                f"DF1: claim {pick.claim!r} request {pick.request!r} gets device {pick.device}, "
                f"which is not on node {node.name!r}."
            )
            continue
        per_request[pick.claim, pick.request].append(pick)
    chosen: dict[tuple[str, str], tuple[str, DeviceSubRequest]] = {}
    for claim in claims:
        for request in claim.requests:
            names = (
                {request.name: request.exactly}
                if request.exactly is not None
                else {f"{request.name}/{sub.name}": sub for sub in request.first_available}
            )
            served = [name for name in names if per_request.get((claim.id, name))]
            if len(served) != 1:
                found.append(
                    f"DF1: claim {claim.id!r} request {request.name!r} is served by "
                    f"{len(served)} alternatives, not one."
                )
                continue
            chosen[claim.id, request.name] = (served[0], names[served[0]])
        known = {
            (
                claim.id,
                request.name if request.exactly is not None else f"{request.name}/{sub.name}",
            )
            for request in claim.requests
            for sub in request.alternatives
        }
        for pair in per_request:
            if pair[0] == claim.id and pair not in known:
                found.append(f"DF1: claim {claim.id!r} has no request {pair[1]!r}.")
    # DF2, DF3, DF6 (per pick), DF7
    for (claim_id, _), (name, sub) in chosen.items():
        mine = per_request[claim_id, name]
        keys = [pick.device for pick in mine]
        selected = {
            key for key, device in devices.items() if selection.selects(sub, device) is True
        }
        for key in keys:
            answer = selection.selects(sub, devices[key])
            if answer is not True:
                word = "cannot be judged for" if answer is None else "does not select"
                found.append(
                    f"DF2: claim {claim_id!r} request {name!r}: its class and selectors "
                    f"{word} device {key}."
                )
        if len(set(keys)) != len(keys):
            found.append(f"DF3: claim {claim_id!r} request {name!r} gets one device twice.")
        if sub.allocation_mode == "All":
            if not selected or set(keys) != selected:
                found.append(
                    f"DF3: claim {claim_id!r} request {name!r} asks all {len(selected)} devices "
                    f"it selects on node {node.name!r} (at least one) and gets {len(set(keys))}."
                )
        elif len(keys) != sub.count:
            found.append(
                f"DF3: claim {claim_id!r} request {name!r} asks {sub.count} device(s) and gets "
                f"{len(keys)}."
            )
        for pick in mine:
            device = devices[pick.device]
            take = consumption(sub, device)
            if isinstance(take, str):
                found.append(
                    f"DF6: claim {claim_id!r} request {name!r}: device {pick.device}: {take}."
                )
            elif dict(pick.consumed) and dict(pick.consumed) != take:
                found.append(
                    f"DF6: claim {claim_id!r} request {name!r}: device {pick.device} is said to "
                    f"give {dict(pick.consumed)}, its policy gives {take}."
                )
            taint = untolerated(sub, device)
            if taint is not None:
                found.append(
                    f"DF7: claim {claim_id!r} request {name!r}: device {pick.device} has taint "
                    f"{taint}, not tolerated."
                )
    # DF4: distinct devices, none allocated before (shareable and admin access aside)
    before: set[str] = set()
    consumed: defaultdict[str, defaultdict[str, Fraction]] = defaultdict(
        lambda: defaultdict(Fraction)
    )
    allocated_keys: set[str] = set()
    for claim in node.allocated:
        for result in claim.allocated or ():
            held = devices.get(result.key)
            if held is None:
                continue
            allocated_keys.add(result.key)
            if held.allow_multiple_allocations:
                for key, value in allocated_consumption(claim, result.request, held).items():
                    consumed[result.key][key] += value
            else:
                before.add(result.key)
    holders: defaultdict[str, list[tuple[str, str, bool]]] = defaultdict(list)
    for (claim_id, _), (name, sub) in chosen.items():
        for pick in per_request[claim_id, name]:
            holders[pick.device].append((claim_id, name, sub.admin_access))
            device = devices[pick.device]
            take = consumption(sub, device)
            if device.allow_multiple_allocations and isinstance(take, dict):
                for key, value in take.items():
                    consumed[pick.device][key] += value
    for key, users in holders.items():
        if devices[key].allow_multiple_allocations:
            continue
        plain = [user for user in users if not user[2]]  # admin access may share it
        if key in before and plain:
            found.append(
                f"DF4: claim {plain[0][0]!r} request {plain[0][1]!r} gets device {key}, which is "
                "allocated already."
            )
        if len(plain) > 1 or any(  # admin access may share it with another claim
            sum(1 for user in users if user[0] == claim_id) > 1 for claim_id, _, _ in users
        ):
            found.append(
                f"DF4: device {key} serves {len(users)} requests (claim {users[0][0]!r} request "
                f"{users[0][1]!r} first), and it is not shareable."
            )
    # DF6: shareable devices' capacity, all allocations together
    for key, taken in consumed.items():
        if key not in holders:
            continue
        device = devices[key]
        for name, value in taken.items():
            if value > amount(device.capacity[name].value):
                who = holders.get(key) or [("?", "?", False)]
                found.append(
                    f"DF6: device {key}'s {name} would be {value} consumed of "
                    f"{device.capacity[name].value} (claim {who[0][0]!r} request {who[0][1]!r})."
                )
    # DF5: counters, every device drawing once
    left: dict[tuple[str, str, str], dict[str, Fraction]] = {
        (item.driver, item.pool, item.name): {k: amount(v) for k, v in item.counters.items()}
        for item in node.counters
    }
    new = [key for key in holders if key not in allocated_keys]
    for key in [*allocated_keys, *new]:
        device = devices[key]
        for consumption_ in device.consumes_counters:
            counter_set = left.get((device.driver, device.pool, consumption_.counter_set))
            for name, text in consumption_.counters.items():
                if counter_set is None or name not in counter_set:
                    if key in new:
                        found.append(
                            f"DF5: device {key} draws on counter {name!r} of set "
                            f"{consumption_.counter_set!r}, which was not read."
                        )
                    continue
                counter_set[name] -= amount(text)
    pools_new = {
        (devices[key].driver, devices[key].pool) for key in new if devices[key].consumes_counters
    }
    for (driver, pool, set_name), counters in left.items():
        if (driver, pool) not in pools_new:
            continue
        for name, value in counters.items():
            if value < 0:
                found.append(
                    f"DF5: counter {name!r} of set {driver}/{pool}/{set_name} on node "
                    f"{node.name!r} is overdrawn by {-value}."
                )
    # DF8: constraints
    for claim in claims:
        for constraint in claim.constraints:
            members = [
                (name, pick.device)
                for (claim_id, request_name), (name, _) in chosen.items()
                if claim_id == claim.id and covers(constraint.requests, request_name, name)
                for pick in per_request[claim_id, name]
            ]
            for attribute, same in (
                (constraint.match_attribute, True),
                (constraint.distinct_attribute, False),
            ):
                if attribute is None:
                    continue
                values = [
                    (name, key, attribute_value(devices[key], attribute)) for name, key in members
                ]
                missing = [item for item in values if item[2] is None]
                if missing:
                    found.append(
                        f"DF8: claim {claim.id!r} request {missing[0][0]!r}: device "
                        f"{missing[0][1]} has no attribute {attribute!r}."
                    )
                    continue
                distinct_values = {item[2] for item in values}
                if same and len(distinct_values) > 1:
                    found.append(
                        f"DF8: claim {claim.id!r}: the devices of request {values[0][0]!r} and "
                        f"the rest differ in {attribute!r}."
                    )
                if not same and len(distinct_values) < len(values):
                    found.append(
                        f"DF8: claim {claim.id!r}: two devices of request {values[0][0]!r} and "
                        f"the rest share a value of {attribute!r}."
                    )
    return found


def brute_force(
    node: DeviceNode,
    claims: Sequence[ResourceClaim],
    classes: Iterable[DeviceClass] | Selection,
    *,
    limit: int = 2_000_000,
) -> Iterator[tuple[Pick, ...]]:
    """Every legal allocation of ``claims`` on a tiny ``node``: each request's every
    alternative and every set of devices of the right size (All: every non-empty set),
    kept when :func:`violations` finds nothing. For tests; ``limit`` bounds the
    assignments tried (ValueError beyond it)."""
    selection = classes if isinstance(classes, Selection) else Selection(classes)
    keys = [device.key for device in node.devices]
    options: list[list[tuple[Pick, ...]]] = []
    for claim in claims:
        for request in claim.requests:
            mine: list[tuple[Pick, ...]] = []
            for sub in request.alternatives:
                name = request.name if request.exactly is not None else f"{request.name}/{sub.name}"
                sizes = range(1, len(keys) + 1) if sub.allocation_mode == "All" else [sub.count]
                for size in sizes:
                    for group in itertools.combinations(keys, size):
                        devices = {device.key: device for device in node.devices}
                        picks = []
                        for key in group:
                            take = consumption(sub, devices[key])
                            picks.append(
                                Pick(claim.id, name, key, take if isinstance(take, dict) else {})
                            )
                        mine.append(tuple(picks))
            options.append(mine)
    total = math.prod(len(item) for item in options)
    if total > limit:
        raise ValueError(f"brute_force: {total} assignments exceed limit {limit}")
    for combination in itertools.product(*options):
        picks_all = tuple(pick for group in combination for pick in group)
        if not violations(node, claims, selection, picks_all):
            yield picks_all


def _quantity(value: Fraction) -> str:
    """A consumed amount as a quantity text (a whole number, else in millis, rounded up)."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{math.ceil(value * 1000)}m"


class DeviceLedger:
    """The claims allocated on a snapshot's devices, kept up to date while an answer is
    replayed: for the checkers of the methods that move, place or stop pods (DF1-DF8).

    A pod that moves takes its claims with it, whole (DF1's exception): they are
    searched anew on the target (:func:`~gpuopt.cluster.devicefit.device_fit`) with the
    devices allocated at that moment (make-before-break: its own old allocation still
    counts), the picks confirmed by :func:`violations`, and then its claims are
    allocated there. A pod that stops releases its claims' devices. A claim several pods
    share cannot go with one of them.

    >>> from gpuopt.cluster.model import Cluster
    >>> ledger = DeviceLedger(Cluster(nodes=[{"id": "n1", "gpus": 0, "cpus": 1}]))
    >>> ledger.move("p", "n1"), ledger.claims_of("p")
    ([], [])
    """

    def __init__(self, cluster: Cluster) -> None:
        self.selection = Selection(cluster.device_classes)
        self.allocated: dict[str, ResourceClaim] = {
            claim.id: claim for claim in cluster.claims if claim.allocated
        }
        self._claims: defaultdict[str, list[ResourceClaim]] = defaultdict(list)
        for claim in cluster.claims:
            if claim.extended_resource:  # the pod's GPU count stands for it
                continue
            for pod in claim.pods:
                self._claims[pod].append(claim)
        self._devices: dict[str, tuple[tuple[Device, ...], tuple[CounterSet, ...]]] = {}
        self._seen_by: defaultdict[str, list[str]] = defaultdict(list)  # device -> nodes
        for node in cluster.nodes:
            reaching = tuple(device for device in cluster.devices if node.id in device.nodes)
            self._devices[node.id] = ((*node.devices, *reaching), tuple(node.counters))
            for device in self._devices[node.id][0]:
                self._seen_by[device.key].append(node.id)
        self._touching: defaultdict[str, set[str]] = defaultdict(set)  # node -> claims there
        for claim in self.allocated.values():
            self._touch(claim, add=True)

    def _touch(self, claim: ResourceClaim, *, add: bool) -> None:
        """Note (or forget) that ``claim``'s allocation holds devices each node sees."""
        for result in claim.allocated or ():
            for node_id in self._seen_by.get(result.key, ()):
                if add:
                    self._touching[node_id].add(claim.id)
                else:
                    self._touching[node_id].discard(claim.id)

    @property
    def active(self) -> bool:
        """Whether any pod has claims (a snapshot without DRA pays nothing)."""
        return bool(self._claims)

    def claims_of(self, pod: str) -> list[ResourceClaim]:
        """The claims pod ``pod`` uses (not those made for an extended resource)."""
        return self._claims.get(pod, [])

    def node(self, node_id: str, released: Iterable[str] = ()) -> DeviceNode:
        """Node ``node_id``'s devices, counter sets and every claim allocated now (but the
        claims of the pods ``released``, as if they had stopped)."""
        devices, counters = self._devices[node_id]
        gone = {claim.id for pod in released for claim in self.claims_of(pod)}
        allocated = tuple(
            self.allocated[key]
            for key in sorted(self._touching.get(node_id, ()))
            if key not in gone
        )
        return DeviceNode(node_id, devices, counters, allocated)

    def release(self, pod: str) -> None:
        """Pod ``pod`` stops: its claims' devices are free."""
        for claim in self.claims_of(pod):
            held = self.allocated.pop(claim.id, None)
            if held is not None:
                self._touch(held, add=False)

    def fit(
        self, claims: Sequence[ResourceClaim], node_id: str, released: Iterable[str] = ()
    ) -> tuple[list[str], list[Pick]]:
        """Whether ``claims`` (allocated anew) fit node ``node_id`` now, with the claims of
        the pods ``released`` freed first (a preemption's victims): the reasons they do
        not (empty: they fit) and the picks."""
        if not claims:
            return [], []
        fresh = [claim.model_copy(update={"allocated": None, "node": None}) for claim in claims]
        here = self.node(node_id, released)
        answer = device_fit(here, fresh, self.selection)
        if not answer.fits:
            reason = answer.reason or f"the claims on node {node_id!r} are {answer.status}."
            if not reason.startswith("DF"):  # unknown (the work cap): never taken for a yes
                reason = f"{answer.rule or 'DF1'}: cannot be judged: {reason}"
            return [reason], []
        return violations(here, fresh, self.selection, answer.picks), list(answer.picks)

    def allocate(
        self, claims: Sequence[ResourceClaim], node_id: str, picks: Sequence[Pick]
    ) -> None:
        """Record ``picks`` as the allocation of ``claims`` on node ``node_id``."""
        devices = {device.key: device for device in self._devices[node_id][0]}
        for claim in claims:
            results = [
                AllocatedDevice(
                    request=pick.request,
                    driver=devices[pick.device].driver,
                    pool=devices[pick.device].pool,
                    device=devices[pick.device].name,
                    consumed_capacity={
                        name: _quantity(value) for name, value in pick.consumed.items()
                    },
                )
                for pick in picks
                if pick.claim == claim.id
            ]
            held = self.allocated.pop(claim.id, None)
            if held is not None:
                self._touch(held, add=False)
            self.allocated[claim.id] = claim.model_copy(
                update={"allocated": results, "node": node_id}
            )
            self._touch(self.allocated[claim.id], add=True)

    def move(self, pod: str, node_id: str) -> list[str]:
        """Pod ``pod`` moves to node ``node_id`` with its claims: why they cannot go or do
        not fit there (empty: they do, and are now allocated there)."""
        claims = self.claims_of(pod)
        if not claims:
            return []
        shared = [claim for claim in claims if len(claim.pods) > 1]
        if shared:
            self.release(pod)
            others = ", ".join(other for other in shared[0].pods if other != pod)
            return [
                f"DF1: claim {shared[0].id!r} is shared with pod(s) {others} and stays on its "
                "devices; it cannot move with one pod."
            ]
        found, picks = self.fit(claims, node_id)
        self.release(pod)
        if not found:
            self.allocate(claims, node_id, picks)
        return found


__all__ = ["DeviceLedger", "brute_force", "violations"]
