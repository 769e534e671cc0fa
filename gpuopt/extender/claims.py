"""A pod's DRA claims as the extender judges them (``models/extender.md``, E8-E10).

- :func:`gpuopt.extender.pod.claim_refs` reads a request pod's ``spec.resourceClaims``
  and ``status.resourceClaimStatuses`` with the kubectl reader's own function.
- :func:`resolve` finds the claims those entries name in the state's cluster,
  with the reader's resolver (``gpuopt.readers.kubectl.dra_finish``): a claim
  named, a claim made for the pod (its status names it), or the claim a
  template makes (a waiting pod's). A claim or template the state does not
  have is named in one sentence (E8: the pod is refused on every node, not
  unresolvable).
- The filter's device rule (E8, :mod:`gpuopt.extender.fit`) asks
  :func:`~gpuopt.cluster.devicefit.claims_fit` on each node, with the state's
  one :class:`~gpuopt.cluster.devicefit.Selection`.
- :func:`choose_devices` is E9: among a few device sets the search finds on a
  node (the node's devices in :data:`ORDERS` orders), the one that leaves the most of
  the node servable (:func:`~gpuopt.cluster.servable.servable`).
- :func:`assumed_claims` writes the chosen devices as allocated claims (E10):
  what the state counts as taken until the watch confirms the binding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from gpuopt.cluster.devicefit import (
    DeviceNode,
    Pick,
    Selection,
    claims_fit,
    device_fit,
)
from gpuopt.cluster.devices import AllocatedDevice, ResourceClaim
from gpuopt.cluster.servable import Servable

if TYPE_CHECKING:
    from gpuopt.cluster.model import Pending
    from gpuopt.extender.state import State
    from gpuopt.readers.kubectl.dra_state import PodClaimRef

#: Device orders tried per node when choosing devices (E9): the search's first set in
#: each (least cost first, then the node's own order: the search's plain answer).
ORDERS = 2


@dataclass(frozen=True)
class Resolved:
    """A pod's claims found in the state (in ``spec.resourceClaims`` order), or the
    sentence naming the first one the state does not have (``missing``)."""

    claims: tuple[ResourceClaim, ...]
    missing: str | None = None


def resolve(state: State, pending: Pending, refs: Sequence[PodClaimRef]) -> Resolved:
    """The claims of the pod ``pending`` whose entries are ``refs``, found in ``state``
    by the reader's resolver (``dra_finish.resolve_claims``): a claim the pod names, or the one
    its status says was made for it, must be in the state; a template's claim is made
    from the template (as Kubernetes makes it, named ``<pod>-<entry>``), when the state
    knows the template (:meth:`~gpuopt.extender.state.State.claim_templates`)."""
    from gpuopt.readers.kubectl.context import Context, KubectlOptions
    from gpuopt.readers.kubectl.dra_finish import resolve_claims

    ctx = Context(KubectlOptions())
    ctx.dra.claims = dict(state.claims_by_id())
    ctx.dra.templates = dict(state.claim_templates())
    ctx.dra.pod_claims = {pending.id: list(refs)}
    ids = resolve_claims(ctx, [pending]).get(pending.id, [])
    for ref, claim_id in zip(refs, ids, strict=True):
        if not claim_id:
            what = f"claim {ref.claim!r}" if ref.claim is not None else f"template {ref.template!r}"
            return Resolved(
                (),
                f"E8: the pod's {what} (spec.resourceClaims {ref.name!r}) is not in the "
                f"cluster state ({state.source}) yet; the pod is answered once it is.",
            )
    return Resolved(tuple(ctx.dra.claims[claim_id] for claim_id in ids))


@dataclass(frozen=True)
class Choice:
    """E9: the devices chosen on one node, and the node's servable count before and after
    them (:func:`~gpuopt.cluster.servable.servable`)."""

    node: str
    picks: tuple[Pick, ...]
    before: Fraction
    after: Fraction

    @property
    def lost(self) -> Fraction:
        """What the chosen devices take from the node's servable count (E9's cost)."""
        return self.before - self.after


def _claims_with_picks(
    claims: Sequence[ResourceClaim], picks: Sequence[Pick], node: DeviceNode, pod_id: str
) -> tuple[ResourceClaim, ...]:
    """The waiting ``claims`` allocated with ``picks`` on ``node`` (E10): each keeps its
    requests, so what a shareable device gives it is recomputed by its policy."""
    by_key = {device.key: device for device in node.devices}
    made = []
    for claim in claims:
        if claim.allocated is not None:
            continue
        results = []
        for pick in picks:
            if pick.claim != claim.id:
                continue
            device = by_key[pick.device]
            results.append(
                AllocatedDevice.model_construct(
                    request=pick.request,
                    driver=device.driver,
                    pool=device.pool,
                    device=device.name,
                    consumed_capacity={},
                    share_id=None,
                )
            )
        made.append(
            claim.model_copy(update={"allocated": results, "node": node.name, "pods": [pod_id]})
        )
    return tuple(made)


def choose_devices(
    state: State,
    pending: Pending,
    claims: Sequence[ResourceClaim],
    pos: int,
    selection: Selection,
    *,
    orders: int = ORDERS,
) -> Choice | None:
    """E9: the device set for the pod's waiting ``claims`` on the node at ``pos`` that
    leaves the most of the node servable (:func:`~gpuopt.cluster.servable.servable`),
    among the first sets the search finds with the node's devices in ``orders`` orders:
    least cost first (a device's cost: what taking it alone removes from the servable
    count), the node's order, and its reverse. None when the claims do not fit."""
    node = state.device_node(pos, without=pending.id)
    waiting = [claim for claim in claims if claim.allocated is None]
    own = pending.id in state.assumed_claims
    ids = tuple(claim.id for claim in claims)
    first = None if own else state.fits.get((pending.id, pos, ids))  # the filter's, if kept
    if first is None:
        first = claims_fit(node, claims, selection)
    if not first.fits:
        return None
    measure = Servable.of(node) if own else state.servable(pos)
    before = measure.total
    if not waiting:
        return Choice(node.name, (), before, before)
    devices = list(node.devices)
    sequences = [list(measure.by_cost), devices, devices[::-1]]
    if orders <= 0:  # the search's plain answer alone (the node's order)
        sequences = [devices]
    best: Choice | None = None
    tried: set[tuple[str, ...]] = set()
    for sequence in sequences[: max(1, orders)]:
        if sequence is devices:
            found = first
        else:
            ordered = DeviceNode(node.name, tuple(sequence), node.counters, node.allocated)
            found = device_fit(ordered, waiting, selection)
        if not found.fits:
            continue
        key = tuple(sorted(pick.device for pick in found.picks))
        if key in tried:
            continue
        tried.add(key)
        after = measure.after(_claims_with_picks(waiting, found.picks, node, pending.id))
        choice = Choice(node.name, found.picks, before, after)
        if best is None or choice.after > best.after:
            best = choice
    return best


def assumed_claims(
    state: State, pending: Pending, claims: Sequence[ResourceClaim], choice: Choice, pos: int
) -> tuple[ResourceClaim, ...]:
    """E10: the pod's waiting ``claims`` allocated on the devices of ``choice``, as the
    state counts them until the watch shows the pod bound."""
    node = state.device_node(pos, without=pending.id)
    return _claims_with_picks(claims, choice.picks, node, pending.id)


__all__ = [
    "ORDERS",
    "Choice",
    "Resolved",
    "assumed_claims",
    "choose_devices",
    "resolve",
]
