"""The heuristic: best fit inside each required domain, a cheapest-first cover, the best domain.

How each rule of ``models/gang.md`` holds by construction:

- G1, G4: a domain of the required level is tried on its own, and an answer
  is built only when all ``N`` pods fit in it;
- G2, G3: pods go only to admitted nodes, at most as many as the node's free
  amounts (after its victims stop) hold, resource by resource;
- G5: with a slice, each slice domain takes a multiple of the slice size, at
  most its capacity rounded down to that multiple;
- P1: victims are drawn from the candidates only;
- P2: a pod of a gang whose allowance is used up is never taken alone: the
  unit is then the whole gang (only when every member is a candidate);
- P3: once the placement is known, victims on nodes without pods (and closed
  gangs with no member on one) are dropped; they freed nothing it uses.

Strategy. Placement: in each domain, preferred domains are filled largest
room first (the fewest domains for the room) and nodes inside by best fit
(fewest free GPUs first); the domain with the best objective wins.
Preemption: in each domain, units (one candidate pod, or a whole gang that one
more stopped pod would close) are added cheapest per GPU freed first until the
gang fits, then units whose removal keeps it fitting are dropped, most costly
first; domains are tried in increasing lower bound, and the scan stops once
a domain's bound exceeds the best cost found. The answer carries a lower
bound (a fractional cover of the GPUs missing in each domain) and its gap.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from gpuopt.cluster.model import SCALE
from gpuopt.gang.problem import GangIndex, GangProblem, capacity
from gpuopt.gang.solution import GangAnswer, GangKey, key_of, make_answer
from gpuopt.result import Status

#: A placement: pod counts per node (all nodes) and the victim task positions.
Plan = tuple[np.ndarray, frozenset[int]]


def fill(index: GangIndex, nodes: np.ndarray, cap: np.ndarray) -> np.ndarray | None:
    """Pod counts on ``nodes`` (admitted nodes of one required domain) holding at most
    ``cap`` pods each, or None when the gang does not fit there.

    Preferred domains by room (largest first), nodes by best fit (fewest free
    GPUs first, then id); with a slice, each slice domain takes a multiple of
    the slice size.
    """
    total = index.pods
    size = index.slice_size
    if index.slice is not None:
        slices = index.slice.of_node[nodes]
        room = np.bincount(slices, weights=cap, minlength=len(index.slice.ids)).astype(np.int64)
        usable = room // size * size
        if usable.sum() < total:
            return None
    elif cap.sum() < total:
        return None
    if index.preferred is not None:
        pref = index.preferred.of_node[nodes]
        room_p = np.bincount(pref, weights=cap, minlength=len(index.preferred.ids))
        order_p = np.lexsort((np.arange(len(room_p)), -room_p))
        rank_p = np.empty(len(room_p), dtype=np.int64)
        rank_p[order_p] = np.arange(len(room_p))
        # the last preferred domain needed: the smallest one that holds what is left
        left = total
        for pos, domain in enumerate(order_p.tolist()):
            if room_p[domain] >= left:
                fits = [d for d in order_p[pos:].tolist() if room_p[d] >= left]
                last = min(fits, key=lambda d: (room_p[d], d))
                rank_p[last], rank_p[domain] = rank_p[domain], rank_p[last]
                break
            left -= int(room_p[domain])
        node_rank = rank_p[pref]
    else:
        node_rank = np.zeros(len(nodes), dtype=np.int64)
    free_gpus = index.node_free[nodes, 0]
    order = np.lexsort((nodes, free_gpus, node_rank))
    count = np.zeros(index.num_nodes, dtype=np.int64)
    left = total
    if index.slice is None:
        for pos in order.tolist():
            take = min(int(cap[pos]), left)
            count[nodes[pos]] = take
            left -= take
            if not left:
                break
        return count
    seen: list[int] = []
    for pos in order.tolist():  # slice domains in the order their first node comes
        if int(slices[pos]) not in seen:
            seen.append(int(slices[pos]))
    for domain in seen:
        take = min(int(usable[domain]), left)
        for pos in order.tolist():
            if take == 0:
                break
            if slices[pos] == domain:
                put = min(int(cap[pos]), take)
                count[nodes[pos]] = put
                take -= put
                left -= put
        if not left:
            break
    return count


def _freed(index: GangIndex, nodes: np.ndarray, stopped: frozenset[int]) -> np.ndarray:
    """What is free on ``nodes`` once ``stopped`` tasks stop (nodes x resources)."""
    free: np.ndarray = index.node_free[nodes].copy()
    if stopped:
        where = {int(n): pos for pos, n in enumerate(nodes)}
        for t in stopped:
            pos = where.get(int(index.task_node[t]))
            if pos is not None:
                free[pos] += index.task_hold[t]
    return free


def _place(index: GangIndex, nodes: np.ndarray, stopped: frozenset[int]) -> np.ndarray | None:
    cap = capacity(_freed(index, nodes, stopped), index.pod_need, index.admitted[nodes])
    return fill(index, nodes, cap)


def _closure_ok(index: GangIndex, stopped: frozenset[int]) -> bool:
    """P2 holds: every gang stopped beyond its allowance is stopped entirely."""
    gangs = {int(index.task_gang[t]) for t in stopped} - {-1}
    for k in gangs:
        members = index.gang_members[k]
        down = sum(1 for t in members.tolist() if t in stopped)
        if down > index.gang_allowance[k] and down < len(members):
            return False
    return True


def _prune(index: GangIndex, count: np.ndarray, stopped: frozenset[int]) -> frozenset[int]:
    """P3: drop victims off the hosting nodes, and closed gangs with no member on one."""
    hosts = count > 0
    keep = set()
    for t in stopped:
        gang = int(index.task_gang[t])
        if gang >= 0:
            members = index.gang_members[gang]
            closed = all(m in stopped for m in members.tolist()) and (
                len(members) > index.gang_allowance[gang]
            )
            if closed:
                if hosts[index.task_node[members]].any():
                    keep.add(t)
                continue
        if hosts[index.task_node[t]]:
            keep.add(t)
    result = frozenset(keep)
    return result if _closure_ok(index, result) else stopped


def _units(
    index: GangIndex, candidates: list[int], stopped: frozenset[int]
) -> list[frozenset[int]]:
    """What may be stopped next among ``candidates`` (the domain's): one candidate pod, or a
    whole gang one more stopped pod would close."""
    units: dict[frozenset[int], None] = {}
    for t in candidates:
        if t in stopped:
            continue
        gang = int(index.task_gang[t])
        if gang < 0:
            units[frozenset((t,))] = None
            continue
        members = index.gang_members[gang].tolist()
        down = sum(1 for m in members if m in stopped)
        if down + 1 <= index.gang_allowance[gang]:
            units[frozenset((t,))] = None
        elif index.gang_closable[gang]:
            units[frozenset(m for m in members if m not in stopped)] = None
    return list(units)


def _cover(index: GangIndex, nodes: np.ndarray, candidates: list[int]) -> Plan | None:
    """Cheapest-first cover of one domain's admitted ``nodes``, then needless units dropped."""
    stopped: frozenset[int] = frozenset()
    count = _place(index, nodes, stopped)
    inside = set(nodes.tolist())
    chosen: list[frozenset[int]] = []
    while count is None:
        units = _units(index, candidates, stopped)
        if not units:
            return None

        def rank(unit: frozenset[int]) -> tuple[float, int, int]:
            members = sorted(unit)
            cost = int(index.task_cost[members].sum())
            gpus = sum(int(index.task_hold[t, 0]) for t in members if index.task_node[t] in inside)
            price = cost / gpus if gpus else math.inf
            return price, int(index.task_priority[members].sum()), members[0]

        best = min(units, key=rank)
        chosen.append(best)
        stopped = stopped | best
        count = _place(index, nodes, stopped)
    for unit in sorted(chosen, key=lambda u: (-int(index.task_cost[sorted(u)].sum()), min(u))):
        fewer = stopped - unit
        if not _closure_ok(index, fewer):
            continue
        again = _place(index, nodes, fewer)
        if again is not None:
            stopped, count = fewer, again
    pruned = _prune(index, count, stopped)
    return count, pruned


class Domain(NamedTuple):
    """One domain of the required level: its admitted nodes and the candidates on them."""

    nodes: np.ndarray
    candidates: list[int]


def domains_of(index: GangIndex) -> list[Domain]:
    """Every domain of the required level with an admitted node (domain order)."""
    on_admitted = index.candidate & index.admitted[index.task_node]
    where = index.required.of_node[index.task_node]
    tasks = np.flatnonzero(on_admitted)
    by_domain: dict[int, list[int]] = {}
    for t in tasks.tolist():
        by_domain.setdefault(int(where[t]), []).append(t)
    found = []
    for d, members in enumerate(index.required.members()):
        nodes = members[index.admitted[members]]
        if len(nodes):
            found.append(Domain(nodes, by_domain.get(d, [])))
    return found


def domain_bound(problem: GangProblem, domain: Domain) -> float:
    """A lower bound on the objective of any answer inside ``domain`` (inf: none exists).

    Preemption: the GPUs missing, covered fractionally by the domain's
    candidates cheapest per GPU first (thousandths). Placement: the fewest
    preferred domains whose room holds the gang.
    """
    index = problem.index
    nodes = domain.nodes
    if problem.preempting:
        if index.candidate_capacity[nodes].sum() < index.pods:
            return math.inf
        missing = index.pods * int(index.pod_need[0])
        missing -= int(np.maximum(index.node_free[nodes, 0], 0).sum())
        if missing <= 0:
            return 0.0
        tasks = np.array([t for t in domain.candidates if index.task_hold[t, 0] > 0], dtype=int)
        if len(tasks) == 0:
            return math.inf
        price = index.task_cost[tasks] / index.task_hold[tasks, 0]
        total = 0.0
        for t in tasks[np.argsort(price, kind="stable")].tolist():
            take = min(missing, int(index.task_hold[t, 0]))
            total += take * float(index.task_cost[t]) / float(index.task_hold[t, 0])
            missing -= take
            if not missing:
                return float(math.ceil(total - 1e-6 * max(1.0, total)))
        return math.inf
    cap = index.node_capacity[nodes]
    if cap.sum() < index.pods:
        return math.inf
    if index.preferred is None:
        return 0.0
    room = np.bincount(
        index.preferred.of_node[nodes], weights=cap, minlength=len(index.preferred.ids)
    )
    return float(np.searchsorted(np.cumsum(np.sort(room)[::-1]), index.pods) + 1)


def lower_bound(problem: GangProblem) -> float:
    """A proven lower bound on the objective (``math.inf``: no answer exists), the least
    :func:`domain_bound` over the domains."""
    return min((domain_bound(problem, d) for d in domains_of(problem.index)), default=math.inf)


def best_plan(problem: GangProblem) -> tuple[Plan | None, GangKey | None]:
    """The heuristic's best plan over all required domains and its objective.

    Domains are tried in increasing :func:`domain_bound` (then domain order),
    and the search stops at the first whose bound exceeds the best cost found
    (a domain whose bound equals it may still win a tie-break).
    """
    index = problem.index
    domains = domains_of(index)
    bounds = [domain_bound(problem, d) for d in domains]
    best: tuple[Plan | None, GangKey | None] = (None, None)
    for pos in sorted(range(len(domains)), key=lambda i: (bounds[i], i)):
        if math.isinf(bounds[pos]):
            break
        key = best[1]
        if key is not None and bounds[pos] > (key.cost if problem.preempting else key.domains):
            break
        domain = domains[pos]
        if problem.preempting:
            plan = _cover(index, domain.nodes, domain.candidates)
        else:
            count = _place(index, domain.nodes, frozenset())
            plan = None if count is None else (count, frozenset())
        if plan is None:
            continue
        found = key_of(problem, *plan)
        if key is None or found < key:
            best = (plan, found)
    return best


def solve_heuristic(problem: GangProblem) -> GangAnswer:
    """Place the gang (stopping the cheapest victims when allowed) by the heuristic.

    Examples
    --------
    >>> from gpuopt.cluster.model import Cluster
    >>> cluster = Cluster(levels=["nvl"], now=100, nodes=[
    ...     {"id": f"n{i}", "gpus": 4, "cpus": 64, "topology": {"nvl": f"d{i // 2}"}}
    ...     for i in range(4)], tasks=[
    ...     {"id": "a", "node": "n0", "gpus": 4, "priority": 1, "start_time": 10},
    ...     {"id": "b", "node": "n2", "gpus": 4, "priority": 1, "start_time": 90}])
    >>> problem = GangProblem(cluster=cluster, request={"id": "j", "pods": 2, "gpus": 4,
    ...                                                 "required": "nvl", "priority": 9})
    >>> answer = solve_heuristic(problem)
    >>> answer.nodes, answer.victims, answer.cost
    (['n2', 'n3'], ['b'], 40.0)
    """
    started = time.perf_counter()
    plan, _ = best_plan(problem)
    bound = lower_bound(problem)
    scale = SCALE if problem.preempting else 1
    if plan is None:
        status = Status.INFEASIBLE if math.isinf(bound) else Status.HEURISTIC
        shown = None if math.isinf(bound) else bound / scale
        return make_answer(
            problem,
            "heuristic",
            status,
            None,
            (),
            bound=shown,
            seconds=time.perf_counter() - started,
        )
    count, victims = plan
    return make_answer(
        problem,
        "heuristic",
        Status.HEURISTIC,
        count,
        victims,
        bound=bound / scale,
        seconds=time.perf_counter() - started,
    )


__all__ = [
    "Domain",
    "best_plan",
    "domain_bound",
    "domains_of",
    "fill",
    "lower_bound",
    "solve_heuristic",
]
