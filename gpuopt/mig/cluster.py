"""The MIG layout problem of a read cluster: its MIG devices, counters and waiting claims.

:func:`from_cluster` takes a :class:`~gpuopt.cluster.model.Cluster` with DRA
facts (rules R1-R9 of ``models/cluster.md``) and keeps what the layout
question needs (rule M0 of ``models/mig.md``):

- a *GPU* is a counter set of a node's pool; its *placements* are the devices of
  kind ``gpu`` (the whole GPU) and ``mig`` that draw on that set alone (R2, R4);
  the counters are scaled to integers per counter (exact: every amount of a
  counter is divided by their greatest common divisor);
- a placement is *in use* when an allocated claim names it (R8); another device
  allocated on the set (a share, say) lowers the counters by what it draws;
- a free device with a ``NoSchedule`` or ``NoExecute`` taint is left out;
- a waiting pod (``pending``) is planned when it has claims, none allocated
  yet, and every request of every claim can be written as profiles: each
  alternative (``exactly`` or ``firstAvailable``, ``ExactCount``, no capacity
  request, no admin access) selects (DF2, by the class's and its own CEL
  selectors) on every node exactly the devices of one profile, and each
  constraint is a ``matchAttribute`` on ``parentUUID`` (or ``uuid``) over all
  requests (``same_gpu``). Its nodes are those that admit it (K1-K3:
  readiness, taints, selectors, node affinity) and have GPUs.

Every waiting pod with claims that is not planned is named in
:attr:`MigRead.skipped` with the reason, never dropped silently.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from gpuopt.cluster.devicefit import Selection, device_node
from gpuopt.cluster.devicerules import REFUSING_EFFECTS, amount
from gpuopt.cluster.devices import Device, DeviceSubRequest, ResourceClaim
from gpuopt.cluster.rules import refusal
from gpuopt.mig.problem import WHOLE_GPU, MigProblem

if TYPE_CHECKING:
    from gpuopt.cluster.model import Cluster

#: Attributes whose ``matchAttribute`` means "all on one GPU" (a placement's parent GPU).
GPU_ATTRIBUTES = ("parentUUID", "uuid")
#: The counters that say which memory slices a placement covers: ``memory-slice-K``.
SLICE_PREFIX = "memory-slice-"

_SetKey = tuple[str, str, str]


@dataclass(frozen=True)
class MigRead:
    """What :func:`from_cluster` read: the problem, and the waiting pods with claims that it
    does not plan (pod id -> why), and the template each claim is made from (claim id ->
    template, None for a claim that exists)."""

    problem: MigProblem
    skipped: dict[str, str] = field(default_factory=dict)
    templates: dict[str, str | None] = field(default_factory=dict)


class _Skip(Exception):
    """A waiting pod that cannot be written as the layout problem (the message says why)."""


def _scaled(values: list[Fraction]) -> tuple[Fraction, list[int]]:
    """Integers proportional to ``values``: each times the lcm of the denominators, divided
    by the gcd of the results; and the factor used."""
    denominator = math.lcm(*(value.denominator for value in values)) if values else 1
    integers = [int(value * denominator) for value in values]
    divisor = math.gcd(*integers) or 1
    return Fraction(denominator, divisor), [value // divisor for value in integers]


def _slices(device: Device) -> tuple[int | None, int | None]:
    """First memory slice and how many, from the ``memory-slice-K`` counters it draws."""
    found = sorted(
        int(name[len(SLICE_PREFIX) :])
        for consumed in device.consumes_counters
        for name, text in consumed.counters.items()
        if name.startswith(SLICE_PREFIX) and name[len(SLICE_PREFIX) :].isdigit() and amount(text)
    )
    return (found[0], len(found)) if found else (None, None)


def _node_gpus(cluster: Cluster, node_id: str) -> tuple[list[dict[str, Any]], dict[str, Device]]:
    """The GPUs (as problem data) of one node, and its placement devices by key."""
    here = device_node(cluster, node_id)
    allocated = {result.key for claim in here.allocated for result in claim.allocated or ()}
    sets: dict[_SetKey, dict[str, Fraction]] = {
        (item.driver, item.pool, item.name): {n: amount(t) for n, t in item.counters.items()}
        for item in here.counters
    }
    members: defaultdict[_SetKey, list[Device]] = defaultdict(list)
    for device in here.devices:
        draws = device.consumes_counters
        key = (device.driver, device.pool, draws[0].counter_set) if len(draws) == 1 else None
        placement = (
            device.kind in ("gpu", "mig")
            and key is not None
            and key in sets
            and set(draws[0].counters) <= set(sets[key])
        )
        if placement and key is not None:
            tainted = any(taint.effect in REFUSING_EFFECTS for taint in device.taints)
            if device.key in allocated or not tainted:
                members[key].append(device)
            continue
        if device.key in allocated:  # another device allocated: what it draws is gone
            for consumed in draws:
                found = sets.get((device.driver, device.pool, consumed.counter_set))
                for name, text in consumed.counters.items():
                    if found is not None and name in found:
                        found[name] -= amount(text)
    gpus: list[dict[str, Any]] = []
    by_key: dict[str, Device] = {}
    for key, devices in members.items():
        counters = sets[key]
        factors: dict[str, Fraction] = {}
        for name, value in counters.items():
            drawn = [
                amount(d.consumes_counters[0].counters[name])
                for d in devices
                if name in d.consumes_counters[0].counters
            ]
            factors[name], _ = _scaled([max(value, Fraction(0)), *drawn])
        model = next(
            (str(d.attribute("productName")) for d in devices if d.attribute("productName")), None
        )
        placements = []
        for device in devices:
            start, size = _slices(device)
            profile = WHOLE_GPU if device.kind == "gpu" else str(device.attribute("profile"))
            placements.append(
                {
                    "device": device.key,
                    "profile": profile,
                    "start": start,
                    "size": size,
                    "whole": device.kind == "gpu",
                    "draws": {
                        name: int(amount(text) * factors[name])
                        for name, text in device.consumes_counters[0].counters.items()
                    },
                    "in_use": device.key in allocated,
                }
            )
            by_key[device.key] = device
        gpus.append(
            {
                "id": "/".join(key),
                "node": node_id,
                "model": model,
                "counters": {
                    name: max(0, int(value * factors[name])) for name, value in counters.items()
                },
                "placements": placements,
            }
        )
    return gpus, by_key


def _alternative_profile(
    sub: DeviceSubRequest,
    selection: Selection,
    nodes: dict[str, tuple[list[Device], dict[str, Device]]],
) -> str | None:
    """The one profile ``sub`` selects on every node (None: it selects nothing anywhere)."""
    if sub.allocation_mode != "ExactCount":
        raise _Skip(f"subrequest {sub.name!r} asks allocationMode {sub.allocation_mode}")
    if sub.capacity:
        raise _Skip(f"subrequest {sub.name!r} asks capacity, which a MIG placement does not share")
    if sub.admin_access:
        raise _Skip(f"subrequest {sub.name!r} asks admin access")
    profiles: set[str] = set()
    for node_id, (devices, placements) in nodes.items():
        chosen = []
        for device in devices:
            answer = selection.selects(sub, device)
            if answer is None:
                raise _Skip(
                    f"subrequest {sub.name!r}: its selectors cannot be evaluated on device "
                    f"{device.key} (R5)"
                )
            if answer:
                if device.key not in placements:
                    raise _Skip(
                        f"subrequest {sub.name!r} selects device {device.key}, which is neither "
                        "a MIG placement nor a whole GPU of a counter set"
                    )
                chosen.append(placements[device.key])
        kinds = {WHOLE_GPU if d.kind == "gpu" else str(d.attribute("profile")) for d in chosen}
        if len(kinds) > 1:
            raise _Skip(f"subrequest {sub.name!r} selects several profiles on node {node_id!r}")
        if kinds:
            (profile,) = kinds
            everything = [
                d
                for d in placements.values()
                if (WHOLE_GPU if d.kind == "gpu" else str(d.attribute("profile"))) == profile
            ]
            if len(everything) != len(chosen):
                raise _Skip(
                    f"subrequest {sub.name!r} selects some placements of profile {profile!r} "
                    f"on node {node_id!r}, not all (a selector beyond the profile)"
                )
            profiles.add(profile)
    if len(profiles) > 1:
        raise _Skip(f"subrequest {sub.name!r} selects different profiles on different nodes")
    return next(iter(profiles), None)


def _claim(
    claim: ResourceClaim,
    selection: Selection,
    nodes: dict[str, tuple[list[Device], dict[str, Device]]],
) -> dict[str, Any]:
    """The claim as problem data (raises :class:`_Skip`)."""
    names = [request.name for request in claim.requests]
    same = False
    for constraint in claim.constraints:
        attribute = constraint.match_attribute
        bare = attribute.rsplit("/", 1)[-1] if attribute else None
        covers_all = not constraint.requests or set(constraint.requests) >= set(names)
        if constraint.distinct_attribute or bare not in GPU_ATTRIBUTES or not covers_all:
            raise _Skip(
                f"claim {claim.id!r} has a constraint other than matchAttribute on the parent "
                "GPU over all its requests"
            )
        same = True
    requests = []
    for request in claim.requests:
        alternatives = []
        for sub in request.alternatives:
            profile = _alternative_profile(sub, selection, nodes)
            if profile is None:
                continue
            alternatives.append(
                {
                    "profile": profile,
                    "count": sub.count,
                    "name": None if request.exactly is not None else sub.name,
                }
            )
        if not alternatives:
            raise _Skip(
                f"claim {claim.id!r} request {request.name!r} selects no MIG placement or whole "
                "GPU on any node"
            )
        requests.append({"name": request.name, "alternatives": alternatives})
    return {"id": claim.id, "requests": requests, "same_gpu": same}


def from_cluster(cluster: Cluster, *, name: str | None = None) -> MigRead:
    """The layout problem of ``cluster``'s MIG devices and waiting pods' claims (rule M0).

    Parameters
    ----------
    cluster
        A snapshot with DRA facts (e.g. read by :func:`gpuopt.readers.kubectl.read_kubernetes`).
    name
        The problem's name (default: the cluster's).

    Returns
    -------
    MigRead
        The problem (every waiting pod weight 1, in the snapshot's order) and the pods
        left out with the reason.
    """
    selection = Selection(cluster.device_classes)
    gpus: list[dict[str, Any]] = []
    nodes: dict[str, tuple[list[Device], dict[str, Device]]] = {}
    for node in cluster.nodes:
        mine, placements = _node_gpus(cluster, node.id)
        if mine:
            gpus.extend(mine)
            nodes[node.id] = (list(device_node(cluster, node.id).devices), placements)
    skipped: dict[str, str] = {}
    templates: dict[str, str | None] = {}
    pods: list[dict[str, Any]] = []
    by_node = {node.id: node for node in cluster.nodes}
    for pod in cluster.pending:
        claims = [c for c in cluster.claims if pod.id in c.pods and not c.extended_resource]
        if not claims:
            continue
        try:
            allocated = next((c for c in claims if c.allocated is not None), None)
            if allocated is not None:
                raise _Skip(f"claim {allocated.id!r} is allocated already")
            admitted = [n for n in nodes if refusal(by_node[n], pod) is None]
            if not admitted:
                raise _Skip("no node with MIG devices admits it (K1-K3)")
            data = [_claim(claim, selection, nodes) for claim in claims]
        except _Skip as why:
            skipped[pod.id] = str(why)
            continue
        pods.append({"id": pod.id, "claims": data, "nodes": admitted})
        templates.update({claim.id: claim.template for claim in claims})
    problem = MigProblem.model_validate(
        {"name": name or cluster.name or "mig", "gpus": gpus, "pods": pods}
    )
    return MigRead(problem, skipped, templates)


__all__ = ["GPU_ATTRIBUTES", "SLICE_PREFIX", "MigRead", "from_cluster"]
