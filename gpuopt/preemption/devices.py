"""Rules P12 and P14 (``models/preemption.md``): victims that free the devices a request's
claims need, or lift the pod rules (K5, K11) that refuse it on a node.

Rule P14 keeps a node that K5 or K11 refuse as it stands and take once the tasks the
request may stop there are gone (a *rule node*, :attr:`Scope.rule_nodes`); its victims are
chosen below as a device node's, with the rules as its needs.

A request whose DRA claims are not counted whole GPUs (a MIG placement, a share, a
constraint such as one ``pcieRoot``, a selector) may fit on a node only once some of the
tasks it may stop there have released their claims: a *device node* of the problem's
scope (:attr:`~gpuopt.preemption.scope.Scope.device_nodes`). Victims chosen by GPU count
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

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuopt.cluster.arrival import Arrival
from gpuopt.cluster.devicecheck import DeviceLedger
from gpuopt.cluster.fields import POD_SLOTS
from gpuopt.cluster.items import Node, Task
from gpuopt.cluster.model import SCALE, scaled
from gpuopt.preemption.gangs import close_gangs
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.scope import checkpoint_of, slot_short, slots_of, task_columns
from gpuopt.preemption.solution import PreemptionResult
from gpuopt.result import Status

#: ``cover(gpus, cpus, costs, need_gpus, need_cpus)``: the positions of the items chosen to
#: cover both needs, or None when no subset does.
Cover = Callable[[list[int], list[int], list[int], int, int], Sequence[int] | None]


@dataclass(frozen=True)
class DeviceOption:
    """One weighed node's decision (P12, P14): its victims, their cost and a lower bound on
    the cost of any legal victim set there, in thousandths. Not ``legal`` when the victims
    found break a gang that cannot stop whole (P13) though a legal set may exist: then only
    its bound counts (for an exact method's proof)."""

    node: str
    victims: list[str]
    cost: int
    bound: int
    legal: bool = True


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


@dataclass(frozen=True)
class _Needs:
    """What a weighed node needs its victims to free: the devices of the request's claims
    (P12) and the rules K5 and K11 (P14), with the tasks whose release can matter to each
    (their holders: every legal victim set holds one of each kind the node needs)."""

    problem: PreemptionProblem
    node: Node
    devices: set[str] | None
    ledger: DeviceLedger | None
    rules: Arrival | None
    #: K12: how many pod slots its tasks must free for the request (0: none)
    slots: int = 0

    @classmethod
    def of(cls, problem: PreemptionProblem, node: Node) -> _Needs:
        scope = problem.scope
        devices, ledger = None, None
        if node.id in scope.device_nodes:
            devices, ledger = _holders(problem, node.id), DeviceLedger(problem.cluster)
        rules = problem.arrival if node.id in scope.rule_nodes else None
        slots = 0
        if node.id in scope.slot_nodes:
            asked = problem.request.resources.get(POD_SLOTS, 0)
            slots = slot_short(problem.cluster, node, asked, 0, problem.request)
        return cls(problem, node, devices, ledger, rules, slots)

    def holds(self, task: Task) -> bool:
        """Whether releasing ``task`` can change whether the node takes the request (with
        pod slots short, any task that holds one)."""
        return (
            (self.slots > 0 and slots_of(task) > 0)
            or (self.devices is not None and task.id in self.devices)
            or (self.rules is not None and self.rules.touches(task))
        )

    def met(self, released: list[Task]) -> bool:
        """Whether the node takes the request once ``released`` are gone (DF1-DF8, K5,
        K11, K12)."""
        if sum(map(slots_of, released)) < self.slots:
            return False
        if self.ledger is not None:
            ids = [task.id for task in released]
            if self.ledger.fit(self.problem.request.claims, self.node.id, ids)[0]:
                return False
        return self.rules is None or self.rules.refusal(self.node, released) is None

    def least(self, candidates: list[Task]) -> int:
        """The cheapest victims any legal victim set here holds for these needs: per kind
        the node needs, its cheapest holder (with the gang it breaks when stopped, P13:
        every victim set holding it holds that gang); the larger of the kinds."""
        problem = self.problem
        tasks, at = problem.cluster.tasks, task_columns(problem.cluster).pos

        def cheapest(kind: Callable[[Task], bool]) -> int:
            found = []
            for task in candidates:
                if kind(task):
                    stops = close_gangs(problem.cluster, {task.id}, problem.stoppable) or {task.id}
                    found.append(sum(_cost(problem, tasks[at[stop]]) for stop in stops))
            return min(found, default=0)

        least = 0
        if self.slots:  # (any legal set stops at least that many of the tasks holding slots)
            holding = [task for task in candidates if slots_of(task) > 0]
            most = max(map(slots_of, holding), default=1)
            costs = sorted(_cost(problem, task) for task in holding)
            least = sum(costs[: -(-self.slots // most)])
        if self.devices is not None:
            devices = self.devices
            least = max(least, cheapest(lambda task: task.id in devices))
        if self.rules is not None:
            rules = self.rules
            least = max(least, cheapest(rules.touches))
        return least


def device_victims(
    problem: PreemptionProblem,
    node_id: str,
    candidates: list[Task],
    needs: _Needs | None = None,
) -> list[Task]:
    """``D_n`` of P12 and P14: the tasks of ``candidates`` (those the request may stop on
    the node) whose release the node's needs (its claims' devices, K5 and K11) need, found
    by releasing all that can matter there (their holders) and taking them back, the most
    costly first, while the needs are still met (a task holding nothing that matters cannot
    change them). Empty when they are met already."""
    if needs is None:
        needs = _Needs.of(problem, problem.on_node[node_id][0])
    holding = [task for task in candidates if needs.holds(task)]
    cost = {task.id: _cost(problem, task) for task in holding}
    released = list(holding)
    for task in sorted(holding, key=lambda task: -cost[task.id]):
        trial = [other for other in released if other.id != task.id]
        if needs.met(trial):
            released = trial
    kept = {task.id for task in released}
    return [task for task in candidates if task.id in kept]


def device_option(
    problem: PreemptionProblem,
    node_id: str,
    cover: Cover,
    *,
    exact: bool,
    budget: list[int] | None = None,
) -> DeviceOption | None:
    """The decision of P12 on device node ``node_id``, or None when its stoppable tasks
    cannot also cover the GPUs and CPUs the request lacks there. With ``exact`` (``cover``
    is then a minimum-cost cover), the bound is the cheapest cover of those deficits alone;
    else 0."""
    node, on = problem.on_node[node_id]
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
    needs = _Needs.of(problem, node)
    holding = [task for task in candidates if needs.holds(task)]
    if not needs.met(holding):
        return None  # (not even with every task that may stop gone: no legal set here)
    sets = 2 ** len(holding)
    if exact and len(holding) <= EXHAUSTIVE_HOLDERS and (budget is None or sets <= budget[0]):
        if budget is not None:
            budget[0] -= sets
        found, least = _every_holder_set(
            problem, needs, holding, candidates, columns, cover, need_gpus, need_cpus
        )
        if least is None:
            return None  # (proven: no legal victim set here)
        bound = least
        if found is None:  # (each cover found breaks a gang: the bound alone counts)
            return DeviceOption(node_id, [], 0, bound, legal=False)
        chosen = found
    else:
        first = device_victims(problem, node_id, candidates, needs)
        covering = _cover_rest(candidates, first, columns, cover, need_gpus, need_cpus)
        if covering is None:
            return None
        extra_ids = covering
        bound = 0
        if exact:  # any legal victim set covers the deficits (P3) and meets the needs
            short = (max(0, need_gpus), max(0, need_cpus))
            cheapest = cover(*columns, *short) if any(short) else ()
            by_room = sum(columns[2][item] for item in cheapest or ())
            # the holders no legal set can spare (the needs fail with all the others gone),
            # with the cheapest cover of what they leave lacking
            spared = {task.id: task for task in holding}
            needed = [
                task
                for task in holding
                if not needs.met([other for other in spared.values() if other is not task])
            ]
            rest = _cover_rest(candidates, needed, columns, cover, need_gpus, need_cpus)
            forced = sum(_cost(problem, task) for task in needed)
            forced += sum(columns[2][pos] for pos, task in enumerate(candidates)
                          if rest is not None and task.id in rest)  # fmt: skip
            bound = max(by_room, needs.least(candidates), forced)
        chosen = {*(task.id for task in first), *extra_ids}
    closed = close_gangs(problem.cluster, chosen, problem.stoppable)  # P13
    if closed is None:  # (these break a gang; another set might not: no proof of none)
        return DeviceOption(node_id, [], 0, bound, legal=False) if exact else None
    positions = task_columns(problem.cluster).pos
    victims = [problem.cluster.tasks[at] for at in sorted(positions[task] for task in closed)]
    victims.sort(key=lambda task: task.node != node_id)  # the node's own first
    return DeviceOption(
        node=node_id,
        victims=[task.id for task in victims],
        cost=sum(_cost(problem, task) for task in victims),
        bound=bound,
    )


#: P12, P14: up to this many tasks whose release can matter on a weighed node, an exact
#: method tries every set of them (2**10 sets at most) with the cheapest cover of the rest
EXHAUSTIVE_HOLDERS = 10
#: ... and up to this many sets over all weighed nodes of one question (then, node by node,
#: the heuristic's holders with the bound of the cheapest holder of each need)
EXHAUSTIVE_SETS = 2**12


def _cover_rest(
    candidates: list[Task],
    first: list[Task],
    columns: tuple[list[int], list[int], list[int]],
    cover: Cover,
    need_gpus: int,
    need_cpus: int,
) -> list[str] | None:
    """The ids of the ``candidates`` outside ``first`` that ``cover`` chooses to cover the
    GPUs and CPUs still lacking once ``first`` are gone (P3); None when they cannot."""
    taken = {task.id for task in first}
    rest = [pos for pos, task in enumerate(candidates) if task.id not in taken]
    freed_gpus = sum(columns[0][pos] for pos, task in enumerate(candidates) if task.id in taken)
    freed_cpus = sum(columns[1][pos] for pos, task in enumerate(candidates) if task.id in taken)
    gpus, cpus, costs = ([column[pos] for pos in rest] for column in columns)
    still = (max(0, need_gpus - freed_gpus), max(0, need_cpus - freed_cpus))
    extra = cover(gpus, cpus, costs, *still) if any(still) else ()
    if extra is None:
        return None
    return [candidates[rest[item]].id for item in extra]


def _every_holder_set(
    problem: PreemptionProblem,
    needs: _Needs,
    holding: list[Task],
    candidates: list[Task],
    columns: tuple[list[int], list[int], list[int]],
    cover: Cover,
    need_gpus: int,
    need_cpus: int,
) -> tuple[set[str] | None, int | None]:
    """The exact methods' decision on a weighed node with few holders: every set ``S`` of
    ``holding`` that meets the node's needs, closed under P13 (``C``: the gangs it breaks
    stop whole), with the minimum-cost cover of what ``C`` leaves lacking among the other
    candidates, and that cover closed too. Returns the cheapest legal victim set found
    (None: none) and a lower bound on any legal set here (None: there is none): the least,
    over the sets ``S``, of ``C``'s cost plus its cover's (every legal victim set holds such
    a ``C`` and a cover of the rest; without gangs it is the cheapest set's cost, a
    proof)."""
    cluster, stoppable = problem.cluster, problem.stoppable
    at = task_columns(cluster).pos

    def worth(ids: set[str]) -> int:
        return sum(_cost(problem, cluster.tasks[at[task]]) for task in ids)

    best: tuple[set[str] | None, int] = (None, 0)
    least: int | None = None
    for size in range(len(holding) + 1):
        for chosen in itertools.combinations(holding, size):
            first = list(chosen)
            if not needs.met(first):
                continue
            closed = close_gangs(cluster, {task.id for task in first}, stoppable)
            if closed is None:
                continue  # (a gang it breaks may not stop whole: so may no superset)
            freed = [task for task in candidates if task.id in closed]
            extra = _cover_rest(candidates, freed, columns, cover, need_gpus, need_cpus)
            if extra is None:
                continue
            lower = worth(closed) + worth(set(extra))
            least = lower if least is None else min(least, lower)
            victims = close_gangs(cluster, closed | set(extra), stoppable)
            if victims is None:
                continue
            total = worth(victims)
            if best[0] is None or total < best[1]:  # (ties: the fewest holders, found first)
                best = (victims, total)
    return best[0], least


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
    aside = problem.scope.weighed_nodes
    if not aside or problem.request.priority != "HP" or base.stage == 1:
        return base
    budget = [EXHAUSTIVE_SETS]  # (the sets the exact methods may still try, all nodes)
    found = [
        device_option(problem, node.id, cover, exact=exact, budget=budget)
        for node in problem.nodes
        if node.id in aside
    ]
    weighed = [option for option in found if option is not None]
    options = [option for option in weighed if option.legal]
    seconds = time.perf_counter() - started
    if not options and not (exact and weighed):
        return base.model_copy(update={"seconds": seconds})
    best = min(options, key=lambda option: (option.cost, len(option.victims)), default=None)
    base_cost = None if base.node is None else round(base.cost * SCALE)
    decision = base
    if best is not None and (base_cost is None or best.cost < base_cost):
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
    said = [
        f"P12: {sum(o.node in problem.scope.device_nodes for o in options)} node(s) where the "
        "claims fit once chosen victims free their devices were weighed",
        f"P14: {sum(o.node in problem.scope.rule_nodes for o in options)} node(s) that pod "
        "(anti-)affinity or topology spread admits once chosen victims are gone were weighed",
        f"P14: {sum(o.node in problem.scope.slot_nodes for o in options)} node(s) whose pod "
        "slots (K12) chosen victims free were weighed",
    ]
    notes = [
        *(base.notes if decision is base else ()),
        *(note for note in said if not note.startswith(("P12: 0 ", "P14: 0 "))),
    ]
    status, bound = Status.HEURISTIC, None
    if exact:
        status, bound = _proof(base, base_cost, weighed, decision)
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
    """The status and bound of an exact method's decision widened by P12 and P14
    (``options``: every weighed node's, those not legal by their bound alone; a decision
    without a node while such a node may hold a legal set proves nothing)."""
    if base.status == Status.INFEASIBLE:
        own: float | None = float("inf")  # proven: no node of the view can make room
    elif base.status == Status.OPTIMAL and base_cost is not None:
        own = base_cost
    else:
        own = None if base.bound is None else base.bound * SCALE
    if own is None:
        return (base.status if base.status != Status.OPTIMAL else Status.FEASIBLE), None
    least = min(own, *(option.bound for option in options))
    if decision.node is None:  # (only nodes whose victims broke a gang were weighed)
        return Status.FEASIBLE, least / SCALE
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
