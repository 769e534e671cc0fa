"""Rule P12 (``models/preemption.md``): victims that free the devices a request's claims need.

A request whose DRA claims are not counted whole GPUs (a MIG placement, a share, a
constraint such as one ``pcieRoot``, a selector) may fit on a node only once some of the
tasks it may stop there have released their claims: a *device node* of the problem's
scope (:attr:`~gpuopt.preemption.problem.Scope.device_nodes`). Victims chosen by GPU count
need not free the right devices, so the methods' view leaves those nodes out, and each
method hands its decision to :func:`widen`, which weighs every device node against it:

- the node's **device victims** ``D_n``: from every task the request may stop there, the
  most costly first, each is kept stopped only when the claims no longer fit without it
  (:func:`device_victims`; so no task of ``D_n`` can be spared, DF1-DF8 being monotone:
  fewer allocations never fit less);
- then the cheapest set of the node's other stoppable tasks covering the GPUs and CPUs
  still lacking (``cover``: the heuristic's cheapest-first prefix, the exact methods'
  minimum-cost cover);
- a gang these victims stop beyond its allowance stops whole, all its members counted
  (P13; the node is left out when such a gang has a member that may not stop);
- the decision with the lowest cost wins, the methods' own on ties; a device node is never
  a stage-1 node (its claims do not fit now), so a decision without preemption stands.

The exact methods keep their proof only where it holds: the bound is the lower of their
own and, per device node, the cheapest cover of its GPU and CPU deficits alone (any legal
victim set there covers them); the status is ``optimal`` when the decision's cost meets it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuopt.cluster.devicecheck import DeviceLedger
from gpuopt.cluster.items import Task
from gpuopt.cluster.model import SCALE, scaled
from gpuopt.preemption.gangs import close_gangs
from gpuopt.preemption.problem import PreemptionProblem, checkpoint_of
from gpuopt.preemption.solution import PreemptionResult
from gpuopt.result import Status

#: ``cover(gpus, cpus, costs, need_gpus, need_cpus)``: the positions of the items chosen to
#: cover both needs, or None when no subset does.
Cover = Callable[[list[int], list[int], list[int], int, int], Sequence[int] | None]


@dataclass(frozen=True)
class DeviceOption:
    """One device node's decision (P12): its victims, their cost and a lower bound on the
    cost of any legal victim set there, in thousandths."""

    node: str
    victims: list[str]
    cost: int
    bound: int


def cheapest_first(
    gpus: list[int], cpus: list[int], costs: list[int], need_gpus: int, need_cpus: int
) -> list[int] | None:
    """The heuristic's cover (P9): the items that help, cheapest first, until both needs
    are covered.

    >>> cheapest_first([1, 4, 2], [0, 0, 0], [100, 400, 150], 3, 0)
    [0, 2]
    """
    helps = [
        item
        for item in range(len(gpus))
        if (need_gpus > 0 and gpus[item] > 0) or (need_cpus > 0 and cpus[item] > 0)
    ]
    chosen: list[int] = []
    for item in sorted(helps, key=lambda item: (costs[item], item)):
        if need_gpus <= 0 and need_cpus <= 0:
            break
        chosen.append(item)
        need_gpus -= gpus[item]
        need_cpus -= cpus[item]
    return chosen if need_gpus <= 0 and need_cpus <= 0 else None


def device_victims(
    problem: PreemptionProblem,
    node_id: str,
    candidates: list[Task],
    holders: set[str] | None = None,
) -> list[Task]:
    """``D_n`` of P12: the tasks of ``candidates`` (those the request may stop on the node)
    whose release the claims need, found by releasing all that hold devices there
    (``holders``, default :func:`_holders`) and taking them back, the most costly first,
    while the claims still fit (a task holding no device there cannot change the fit).
    Empty when the claims fit already."""
    ledger = DeviceLedger(problem.cluster)
    claims = problem.request.claims
    if holders is None:
        holders = _holders(problem, node_id)
    holding = [task for task in candidates if task.id in holders]
    cost = {task.id: _cost(problem, task) for task in holding}
    released = [task.id for task in holding]
    for task in sorted(holding, key=lambda task: -cost[task.id]):
        trial = [other for other in released if other != task.id]
        if not ledger.fit(claims, node_id, trial)[0]:
            released = trial
    return [task for task in candidates if task.id in released]


def device_option(
    problem: PreemptionProblem, node_id: str, cover: Cover, *, exact: bool
) -> DeviceOption | None:
    """The decision of P12 on device node ``node_id``, or None when its stoppable tasks
    cannot also cover the GPUs and CPUs the request lacks there. With ``exact`` (``cover``
    is then a minimum-cost cover), the bound is the cheapest cover of those deficits alone;
    else 0."""
    node = next(node for node in problem.nodes if node.id == node_id)
    on = [task for task in problem.tasks if task.node == node_id]
    # a member of a gang that cannot stop whole and may lose none never stops (P13)
    candidates = [
        task
        for task in on
        if problem.stoppable(task) and close_gangs(problem.cluster, {task.id}, problem.stoppable)
    ]
    need_gpus = problem.request.gpus - node.gpus + sum(problem.gpus_of(t) for t in on)
    need_cpus = scaled(problem.request.cpus) - scaled(node.cpus) + sum(scaled(t.cpus) for t in on)
    columns = (
        [problem.gpus_of(task) for task in candidates],
        [scaled(task.cpus) for task in candidates],
        [_cost(problem, task) for task in candidates],
    )
    holders = _holders(problem, node_id)
    first = device_victims(problem, node_id, candidates, holders)
    rest = [pos for pos, task in enumerate(candidates) if task not in first]
    freed_gpus = sum(problem.gpus_of(task) for task in first)
    freed_cpus = sum(scaled(task.cpus) for task in first)
    gpus, cpus, costs = ([column[pos] for pos in rest] for column in columns)
    still_gpus, still_cpus = max(0, need_gpus - freed_gpus), max(0, need_cpus - freed_cpus)
    extra = cover(gpus, cpus, costs, still_gpus, still_cpus) if still_gpus or still_cpus else ()
    if extra is None:
        return None
    bound = 0
    if exact:
        bound = _least(
            problem, holders, candidates, columns, max(0, need_gpus), max(0, need_cpus), cover
        )
    chosen = {*(task.id for task in first), *(candidates[rest[item]].id for item in extra)}
    closed = close_gangs(problem.cluster, chosen, problem.stoppable)  # P13
    if closed is None:
        return None
    victims = [task for task in problem.cluster.tasks if task.id in closed]
    victims.sort(key=lambda task: task.node != node_id)  # the node's own first
    return DeviceOption(
        node=node_id,
        victims=[task.id for task in victims],
        cost=sum(_cost(problem, task) for task in victims),
        bound=bound,
    )


def _least(
    problem: PreemptionProblem,
    holders: set[str],
    candidates: list[Task],
    columns: tuple[list[int], list[int], list[int]],
    need_gpus: int,
    need_cpus: int,
    cover: Cover,
) -> int:
    """A lower bound on the cost of any legal victim set on a device node whose device
    holders are ``holders``: the larger of the cheapest cover of its GPU and CPU deficits
    alone (P3) and the cheapest task holding a device there (the claims do not fit as
    the node stands, and only a released device can change that), with the gang it
    breaks when stopped (P13: every victim set holding it holds that gang)."""
    least = cover(*columns, need_gpus, need_cpus) if need_gpus or need_cpus else ()
    by_room = sum(columns[2][item] for item in least or ())
    everywhere = {task.id: task for task in problem.cluster.tasks}
    held = []
    for task in candidates:
        if task.id in holders:
            stops = close_gangs(problem.cluster, {task.id}, problem.stoppable) or {task.id}
            held.append(sum(_cost(problem, everywhere[stop]) for stop in stops))
    return max(by_room, min(held, default=0))


def widen(
    problem: PreemptionProblem,
    base: PreemptionResult | None,
    *,
    cover: Cover,
    exact: bool,
    method: str,
    started: float,
) -> PreemptionResult:
    """The method's decision ``base`` over its view (None: the view has no node), or a
    device node's (P12) where one costs less; unchanged when the scope has no device node,
    the request is LP or ``base`` needs no preemption."""
    if base is None:
        base = PreemptionResult(
            method=method,
            status=Status.INFEASIBLE,
            node=None,
            request=problem.request,
            now=problem.now,
        )
    scope = problem.scope
    if not scope.device_nodes or problem.request.priority != "HP" or base.stage == 1:
        return base
    found = [
        device_option(problem, node.id, cover, exact=exact)
        for node in problem.nodes
        if node.id in scope.device_nodes
    ]
    options = [option for option in found if option is not None]
    seconds = time.perf_counter() - started
    if not options:
        return base.model_copy(update={"seconds": seconds})
    best = min(options, key=lambda option: (option.cost, len(option.victims)))
    base_cost = None if base.node is None else round(base.cost * SCALE)
    decision = base
    if base_cost is None or best.cost < base_cost:
        decision = base.model_copy(
            update={
                "node": best.node,
                "victims": best.victims,
                "cost": best.cost / SCALE,
                "objective": best.cost / SCALE,
                "preempted": True,
                "stage": 2,
            }
        )
    notes = [
        *(base.notes if decision is base else ()),
        f"P12: {len(options)} node(s) where the claims fit once chosen victims free their "
        "devices were weighed",
    ]
    status, bound = Status.HEURISTIC, None
    if exact:
        status, bound = _proof(base, base_cost, options, decision)
    return decision.model_copy(
        update={
            "method": method,
            "status": status,
            "bound": bound,
            "notes": notes,
            "seconds": seconds + base.seconds,
        }
    )


def _proof(
    base: PreemptionResult,
    base_cost: int | None,
    options: list[DeviceOption],
    decision: PreemptionResult,
) -> tuple[Status, float | None]:
    """The status and bound of an exact method's decision widened by P12."""
    if base.status == Status.INFEASIBLE:
        own: float | None = float("inf")  # proven: no node of the view can make room
    elif base.status == Status.OPTIMAL and base_cost is not None:
        own = base_cost
    else:
        own = None if base.bound is None else base.bound * SCALE
    if own is None:
        return (base.status if base.status != Status.OPTIMAL else Status.FEASIBLE), None
    least = min(own, *(option.bound for option in options))
    cost = round(decision.cost * SCALE)
    return (Status.OPTIMAL if cost <= least else Status.FEASIBLE), least / SCALE


def _holders(problem: PreemptionProblem, node_id: str) -> set[str]:
    """The pods holding a claim allocated on node ``node_id`` or on no one node (devices
    of the cluster's pools, which the node may reach too)."""
    return {
        pod
        for claim in problem.cluster.claims
        if claim.allocated and claim.node in (node_id, None)
        for pod in claim.pods
    }


def _cost(problem: PreemptionProblem, task: Task) -> int:
    """``w_t`` (P4) in thousandths (of any task of the cluster: a closed gang's members run
    on other nodes too, P13)."""
    return problem.held_gpus(task) * (scaled(problem.now) - scaled(checkpoint_of(task)))


__all__ = ["Cover", "DeviceOption", "cheapest_first", "device_option", "device_victims", "widen"]
