"""A MIG layout (:class:`MigResult`), what it achieves (:func:`evaluate`), the checker
(:func:`violations`, rules M1-M7 of ``models/mig.md``) and a brute force for tiny problems.

The checker knows nothing of the methods: it recounts every counter from the
problem's placements, the picks and what is in use, and judges the answer as a
whole. :func:`brute_force` enumerates every answer of a tiny problem and keeps
the best one the checker accepts: the exact method must equal it, and no
heuristic may beat it.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from gpuopt.mig.problem import MigClaim, MigId, MigIndex, MigPod, MigProblem
from gpuopt.result import Result, Status


class MigPick(BaseModel):
    """One device allocated to one request of one claim (``request`` is ``req`` or
    ``req/sub`` for a ``firstAvailable`` alternative, as ``status.allocation`` writes it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim: MigId
    request: MigId
    device: MigId


class MigMetrics(BaseModel):
    """What a layout achieves (recomputed by :func:`evaluate`).

    ``score`` is the lexicographic objective as one integer:
    ``weight * W_served - newly_cut * W_cut + open_placements`` with
    ``W_cut = P + 1`` and ``W_served = (G + 1) * W_cut`` (``P`` placements, ``G``
    GPUs), so more weight served always wins, then fewer GPUs newly cut, then
    more placements left open.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    pods_served: int = 0
    weight_served: int = 0
    claims_served: int = 0
    gpus_cut: int = 0
    newly_cut: int = 0
    open_placements: int = 0
    score: int = 0


class MigResult(Result):
    """A layout: which pods are served and, per claim, the devices to allocate."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    document: ClassVar[str] = "a MIG layout"

    served: list[str] = Field(default_factory=list, description="Pods served, in problem order.")
    picks: list[MigPick] = Field(default_factory=list)
    metrics: MigMetrics = Field(default_factory=MigMetrics)


def weights(problem: MigProblem) -> tuple[int, int]:
    """``(W_served, W_cut)`` of the score (:class:`MigMetrics`)."""
    index = problem.index
    cut = index.placements + 1
    return (index.gpus + 1) * cut, cut


def evaluate(problem: MigProblem, result: MigResult | Sequence[MigPick]) -> MigMetrics:
    """What the picks achieve, from the problem alone (the picks are taken as given: check
    them with :func:`violations`)."""
    picks = result.picks if isinstance(result, MigResult) else list(result)
    index = problem.index
    claim_pod = {claim.id: pod for pod in problem.pods for claim in pod.claims}
    picked = [index.device_of[pick.device] for pick in picks if pick.device in index.device_of]
    claims = {pick.claim for pick in picks if pick.claim in claim_pod}
    pods = {claim_pod[claim].id: claim_pod[claim] for claim in claims}
    left = [list(row) for row in index.residual]
    cut = list(index.cut_before)
    taken = set(picked)
    for p in picked:
        for k, value in index.draws[p].items():
            left[index.gpu[p]][k] -= value
        if not index.whole[p]:
            cut[index.gpu[p]] = True
    open_count = sum(
        1
        for p in range(index.placements)
        if not index.in_use[p]
        and p not in taken
        and all(value <= left[index.gpu[p]][k] for k, value in index.draws[p].items())
    )
    weight = sum(pod.weight for pod in pods.values())
    newly = sum(1 for g in range(index.gpus) if cut[g] and not index.cut_before[g])
    w_served, w_cut = weights(problem)
    return MigMetrics(
        pods_served=len(pods),
        weight_served=weight,
        claims_served=len(claims),
        gpus_cut=sum(cut),
        newly_cut=newly,
        open_placements=open_count,
        score=weight * w_served - newly * w_cut + open_count,
    )


def make_result(
    problem: MigProblem,
    method: str,
    picks: Sequence[MigPick],
    *,
    status: Status = Status.HEURISTIC,
    bound: float | None = None,
    seconds: float = 0.0,
    notes: Sequence[str] = (),
) -> MigResult:
    """The result of ``picks``, with its metrics and objective (the score) computed."""
    metrics = evaluate(problem, picks)
    claim_pod = {claim.id: pod.id for pod in problem.pods for claim in pod.claims}
    served_ids = {claim_pod[pick.claim] for pick in picks}
    return MigResult(
        method=method,
        status=status,
        objective=float(metrics.score),
        bound=bound,
        seconds=seconds,
        notes=list(notes),
        served=[pod.id for pod in problem.pods if pod.id in served_ids],
        picks=list(picks),
        metrics=metrics,
    )


def violations(problem: MigProblem, result: MigResult | Sequence[MigPick]) -> list[str]:
    """Every rule M1-M7 the answer breaks (one sentence each); empty when it is legal.

    ``result`` may be a :class:`MigResult` (then M7: its ``served`` and ``metrics``
    must be what :func:`evaluate` recomputes) or a plain list of picks.
    """
    picks = result.picks if isinstance(result, MigResult) else list(result)
    index = problem.index
    found: list[str] = []
    claims = {claim.id: (pod, claim) for pod in problem.pods for claim in pod.claims}
    by_claim: defaultdict[str, list[tuple[MigPick, int]]] = defaultdict(list)
    # M1: every pick names a claim of a waiting pod and a device of the problem
    for pick in picks:
        if pick.claim not in claims:
            found.append(f"M1: pick of device {pick.device!r} names claim {pick.claim!r}, unknown.")
            continue
        if pick.device not in index.device_of:
            found.append(
                f"M1: claim {pick.claim!r} request {pick.request!r} gets device "
                f"{pick.device!r}, which is no placement of the problem."
            )
            continue
        by_claim[pick.claim].append((pick, index.device_of[pick.device]))
    for pod in problem.pods:
        served = [claim.id for claim in pod.claims if by_claim.get(claim.id)]
        if served and len(served) != len(pod.claims):
            missing = next(claim.id for claim in pod.claims if claim.id not in served)
            found.append(
                f"M1: pod {pod.id!r} has claim {served[0]!r} served but not {missing!r}: "
                "a pod is served whole or not at all."
            )
        if served:
            found.extend(_pod_node(index, pod, by_claim))
        for claim in pod.claims:
            if by_claim.get(claim.id):
                found.extend(_claim_rules(index, claim, by_claim[claim.id]))
    found.extend(_shared_rules(index, [p for items in by_claim.values() for _, p in items]))
    if isinstance(result, MigResult):
        found.extend(_reported(problem, result))
    return found


def _pod_node(
    index: MigIndex, pod: MigPod, by_claim: dict[str, list[tuple[MigPick, int]]]
) -> list[str]:
    """M2: a served pod's devices are on one node, one it may use."""
    nodes = {index.node[p] for claim in pod.claims for _, p in by_claim.get(claim.id, [])}
    if len(nodes) > 1:
        names = sorted(index.node_ids[n] for n in nodes)
        return [f"M2: pod {pod.id!r} gets devices on nodes {names[0]!r} and {names[1]!r}."]
    (node,) = nodes
    if node not in index.pod_nodes[index_of_pod(index, pod)]:
        return [f"M2: pod {pod.id!r} may not go to node {index.node_ids[node]!r}."]
    return []


def index_of_pod(index: MigIndex, pod: MigPod) -> int:
    """Position of ``pod`` in the problem (its ``pod_nodes`` row)."""
    return index.pod_position[pod.id]


def _claim_rules(index: MigIndex, claim: MigClaim, items: list[tuple[MigPick, int]]) -> list[str]:
    """M3 (one alternative, count devices of its profile) and M6 (same GPU)."""
    found: list[str] = []
    names = {
        request.alternative_name(alternative): (request, alternative)
        for request in claim.requests
        for alternative in request.alternatives
    }
    per_name: defaultdict[str, list[int]] = defaultdict(list)
    for pick, p in items:
        if pick.request not in names:
            found.append(f"M3: claim {claim.id!r} has no request {pick.request!r}.")
            continue
        per_name[pick.request].append(p)
    for request in claim.requests:
        served = [
            request.alternative_name(alt)
            for alt in request.alternatives
            if per_name.get(request.alternative_name(alt))
        ]
        if len(served) != 1:
            found.append(
                f"M3: claim {claim.id!r} request {request.name!r} is served by {len(served)} "
                "alternatives, not one."
            )
            continue
        _, alternative = names[served[0]]
        devices = per_name[served[0]]
        if len(devices) != alternative.count:
            found.append(
                f"M3: claim {claim.id!r} request {served[0]!r} gets {len(devices)} devices, "
                f"not {alternative.count}."
            )
        wrong = [p for p in devices if index.profile[p] != alternative.profile]
        if wrong:
            found.append(
                f"M3: claim {claim.id!r} request {served[0]!r} gets device "
                f"{index.keys[wrong[0]]!r} of profile {index.profile[wrong[0]]!r}, not "
                f"{alternative.profile!r}."
            )
    if claim.same_gpu:
        gpus = sorted({index.gpu[p] for _, p in items})
        if len(gpus) > 1:
            found.append(
                f"M6: claim {claim.id!r} asks one GPU and gets devices on "
                f"{index.gpu_ids[gpus[0]]!r} and {index.gpu_ids[gpus[1]]!r}."
            )
    return found


def _shared_rules(index: MigIndex, picked: list[int]) -> list[str]:
    """M4 (a device once, not in use) and M5 (counters), over the whole answer."""
    found: list[str] = []
    seen: set[int] = set()
    for p in picked:
        if p in seen:
            found.append(f"M4: device {index.keys[p]!r} is picked twice.")
        elif index.in_use[p]:
            found.append(f"M4: device {index.keys[p]!r} is in use already.")
        seen.add(p)
    drawn: defaultdict[tuple[int, int], int] = defaultdict(int)
    for p in range(index.placements):
        if index.in_use[p]:
            for k, value in index.draws[p].items():
                drawn[index.gpu[p], k] += value
    for p in picked:
        for k, value in index.draws[p].items():
            drawn[index.gpu[p], k] += value
    for (g, k), value in sorted(drawn.items()):
        if value > index.capacity[g][k]:
            found.append(
                f"M5: GPU {index.gpu_ids[g]!r} counter {index.counter_names[g][k]!r} is drawn "
                f"{value}, more than its {index.capacity[g][k]}."
            )
    return found


def _reported(problem: MigProblem, result: MigResult) -> list[str]:
    """M7: what the result says it served and achieved is what its picks give."""
    found: list[str] = []
    metrics = evaluate(problem, result.picks)
    claim_pod = {claim.id: pod.id for pod in problem.pods for claim in pod.claims}
    served = {claim_pod[pick.claim] for pick in result.picks if pick.claim in claim_pod}
    if set(result.served) != served:
        extra = sorted(set(result.served) ^ served)
        found.append(f"M7: served lists {sorted(result.served)}, the picks serve {sorted(served)}")
        found[-1] += f" (differs on {extra[0]!r})."
    if result.metrics != metrics:
        found.append(f"M7: metrics say {result.metrics}, the picks give {metrics}.")
    if result.objective is not None and result.objective != metrics.score:
        found.append(f"M7: objective {result.objective} is not the score {metrics.score}.")
    return found


# ---------------------------------------------------------------- brute force
def pod_options(problem: MigProblem, pod: MigPod) -> Iterator[tuple[MigPick, ...]]:
    """Every way to pick devices for all of ``pod``'s claims on one node it may use (each
    request: each alternative, each set of ``count`` free devices of its profile there),
    counters and distinctness not checked."""
    index = problem.index
    for node in index.pod_nodes[index_of_pod(index, pod)]:
        per_request: list[list[tuple[MigPick, ...]]] = []
        for claim in pod.claims:
            for request in claim.requests:
                mine: list[tuple[MigPick, ...]] = []
                for alternative in request.alternatives:
                    name = request.alternative_name(alternative)
                    free = index.free.get((node, alternative.profile), [])
                    for group in itertools.combinations(free, alternative.count):
                        mine.append(
                            tuple(
                                MigPick(claim=claim.id, request=name, device=index.keys[p])
                                for p in group
                            )
                        )
                per_request.append(mine)
        for combination in itertools.product(*per_request):
            yield tuple(pick for group in combination for pick in group)


def brute_force(problem: MigProblem, *, limit: int = 2_000_000) -> tuple[MigPick, ...]:
    """The picks of a best answer of a tiny problem (highest score), by enumeration.

    Every pod is left out or served by one of :func:`pod_options`; each
    combination that :func:`violations` passes is scored by :func:`evaluate`.
    For tests; ``limit`` bounds the combinations tried (ValueError beyond it).
    """
    options = [[(), *pod_options(problem, pod)] for pod in problem.pods]
    total = 1
    for item in options:
        total *= len(item)
    if total > limit:
        raise ValueError(f"brute_force: {total} combinations exceed limit {limit}")
    best: tuple[MigPick, ...] = ()
    best_score = evaluate(problem, best).score
    for combination in itertools.product(*options):
        picks = tuple(pick for group in combination for pick in group)
        score = evaluate(problem, picks).score
        if score > best_score and not violations(problem, picks):
            best, best_score = picks, score
    return best


__all__ = [
    "MigMetrics",
    "MigPick",
    "MigResult",
    "brute_force",
    "evaluate",
    "make_result",
    "pod_options",
    "violations",
    "weights",
]
