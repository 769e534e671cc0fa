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
Preemption: in each domain, moves (the cheapest victims of one slice domain
or node for each number of pods they add, chosen jointly over its nodes with
a gang stopped whole once its allowance would be exceeded, or a whole
closable gang plus the completion of the slots it frees) are applied least
cost per usable pod first until the gang fits (else the cover is run again
with whole-gang stops only), then victims whose removal keeps it fitting are
dropped, most costly first; domains are tried in increasing lower bound,
and the scan stops once a domain's bound exceeds the best cost found. The
answer carries a lower bound (a fractional cover of the GPUs missing in
each domain) and its gap.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from gpuopt.cluster.model import MAX_TASKS, SCALE
from gpuopt.gang.problem import GangIndex, GangProblem, capacity
from gpuopt.gang.solution import GangKey, GangResult, key_of, make_answer
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


#: Most candidates on one node whose subsets are enumerated exactly (else cheapest per GPU first).
EXACT_NODE_TASKS = 10


class Move(NamedTuple):
    """Tasks to stop together, what they cost and the usable pods they add (capped)."""

    tasks: tuple[int, ...]
    cost: int
    gain: int
    priority: int


class _Cover:
    """Per-domain cover: repeatedly stop the move with the least cost per pod gained.

    A move is either a slice-domain move (on the nodes of one slice domain, or one
    node without a slice, the cheapest victims that let them hold ``k`` more pods:
    exact over subsets when a node has few candidates, combined over the nodes
    jointly, a gang stopped beyond its allowance over the union stopped whole) or a
    gang move (close a closable gang, then complete the pod slots on the slice
    domains its members free while that lowers the cost per pod). Pods are counted
    over every node a move frees, as the gang can use them (slices rounded down),
    capped at what is still missing. With ``whole_only`` no allowance is spent: a
    gang member stops only with its whole gang (the fallback pass).
    """

    def __init__(
        self,
        index: GangIndex,
        nodes: np.ndarray,
        candidates: list[int],
        *,
        whole_only: bool = False,
    ) -> None:
        self.index = index
        self.whole_only = whole_only
        self.holds: dict[int, list[int]] = {}
        self.nodes = nodes
        self.local = {int(n): i for i, n in enumerate(nodes.tolist())}
        self.need = [int(x) for x in index.pod_need.tolist()]
        self.needs = [(r, need) for r, need in enumerate(self.need) if need > 0]
        self.free = [[int(x) for x in row] for row in index.node_free[nodes].tolist()]
        self.cap = [self._capacity(row) for row in self.free]
        self.base_cap = list(self.cap)
        self.size = index.slice_size
        self.slice_of: list[int] | None = None
        self.room: dict[int, int] = {}
        if index.slice is not None:
            self.slice_of = [int(e) for e in index.slice.of_node[nodes].tolist()]
            for i, e in enumerate(self.slice_of):
                self.room[e] = self.room.get(e, 0) + self.cap[i]
        self.usable = self._usable_total()
        self.on_node: list[list[int]] = [[] for _ in range(len(nodes))]
        for t in sorted(candidates):
            self.on_node[self.local[int(index.task_node[t])]].append(t)
        self.cost = {t: int(index.task_cost[t]) for t in candidates}
        self.gangs = sorted({int(index.task_gang[t]) for t in candidates} - {-1})
        for k in self.gangs:
            for t in index.gang_members[k].tolist():
                self.cost.setdefault(t, int(index.task_cost[t]))
        self.stopped: set[int] = set()
        self.down = {k: 0 for k in self.gangs}

    def _capacity(self, row: list[int]) -> int:
        pods = MAX_TASKS
        for r, need in self.needs:
            have = row[r]
            if have < need:
                return 0
            if have < pods * need:
                pods = have // need
        return pods

    def _usable_total(self) -> int:
        if self.slice_of is None:
            return sum(self.cap)
        return sum(room // self.size * self.size for room in self.room.values())

    def _gain(self, caps: dict[int, int]) -> int:
        """Usable pods added when local nodes take the capacities ``caps``."""
        if self.slice_of is None:
            return sum(c - self.cap[i] for i, c in caps.items())
        delta: dict[int, int] = {}
        for i, c in caps.items():
            e = self.slice_of[i]
            delta[e] = delta.get(e, 0) + c - self.cap[i]
        size = self.size
        return sum(
            (self.room[e] + d) // size * size - self.room[e] // size * size
            for e, d in delta.items()
        )

    def _hold(self, t: int) -> list[int]:
        hold = self.holds.get(t)
        if hold is None:
            hold = self.holds[t] = [int(x) for x in self.index.task_hold[t].tolist()]
        return hold

    def _allowance(self, k: int) -> int:
        return 0 if self.whole_only else int(self.index.gang_allowance[k])

    def _close(self, chosen: set[int]) -> set[int] | None:
        """``chosen`` (tasks still running) with every gang it stops beyond its allowance
        stopped whole (P2), or None when such a gang is not closable."""
        index = self.index
        used: dict[int, int] = {}
        for t in chosen:
            k = int(index.task_gang[t])
            if k >= 0:
                used[k] = used.get(k, 0) + 1
        closing = [k for k, n in used.items() if self.down.get(k, 0) + n > self._allowance(k)]
        if not closing:
            return chosen
        result = set(chosen)
        for k in closing:
            if not index.gang_closable[k]:
                return None
            result.update(t for t in index.gang_members[k].tolist() if t not in self.stopped)
        return result

    def _rows(self, tasks: set[int] | frozenset[int]) -> dict[int, list[int]]:
        """Free amounts of the local nodes ``tasks`` (still running) free, once they stop."""
        index = self.index
        rows: dict[int, list[int]] = {}
        for t in tasks:
            i = self.local.get(int(index.task_node[t]))
            if i is None:
                continue
            row = rows.get(i)
            if row is None:
                row = rows[i] = list(self.free[i])
            hold = self._hold(t)
            for r in range(len(row)):
                row[r] += hold[r]
        return rows

    def _caps(self, tasks: set[int] | frozenset[int]) -> dict[int, int]:
        """Pod capacity of the local nodes ``tasks`` (still running) free, once they stop."""
        return {i: self._capacity(row) for i, row in self._rows(tasks).items()}

    def _price(self, tasks: set[int] | frozenset[int]) -> tuple[int, int]:
        index = self.index
        cost = sum(self.cost_of(t) for t in tasks)
        priority = sum(int(index.task_priority[t]) for t in tasks)
        return cost, priority

    def cost_of(self, t: int) -> int:
        cost = self.cost.get(t)
        if cost is None:
            cost = self.cost[t] = int(self.index.task_cost[t])
        return cost

    def _node_options(
        self, i: int, pre: frozenset[int]
    ) -> dict[int, tuple[int, int, frozenset[int]]]:
        """For node ``i``, once ``pre`` (running tasks) stop: pod capacity reached ->
        (cost, priority, tasks) of its cheapest further victims, for every capacity above
        the current. A gang stopped beyond its allowance is stopped whole (when closable)."""
        tasks = [t for t in self.on_node[i] if t not in self.stopped and t not in pre]
        best: dict[int, tuple[int, int, frozenset[int]]] = {}
        if not tasks:
            return best
        base = self._rows(pre).get(i, self.free[i]) if pre else self.free[i]
        now = self._capacity(base)
        mine = set(self.on_node[i])

        def consider(chosen: list[int]) -> None:
            closed = self._close(set(pre).union(chosen) if pre else set(chosen))
            if closed is None:
                return
            new = closed - pre if pre else closed
            row = list(base)
            for t in new:
                if t in mine:
                    for r, amount in enumerate(self._hold(t)):
                        row[r] += amount
            level = self._capacity(row)
            if level <= now:
                return
            cost, priority = self._price(new)
            entry = (cost, priority, frozenset(new))
            if level not in best or entry[:2] < best[level][:2]:
                best[level] = entry

        if len(tasks) <= EXACT_NODE_TASKS:
            for mask in range(1, 1 << len(tasks)):
                consider([tasks[j] for j in range(len(tasks)) if mask >> j & 1])
        else:  # cheapest per GPU first, prefixes
            order = sorted(tasks, key=lambda t: (self.cost_of(t) / max(self._hold(t)[0], 1e-9), t))
            for end in range(1, len(order) + 1):
                consider(order[:end])
        # a higher capacity reached as cheaply supersedes a lower one
        kept: dict[int, tuple[int, int, frozenset[int]]] = {}
        cheapest: tuple[int, int] | None = None
        for level in sorted(best, reverse=True):
            if cheapest is None or best[level][:2] < cheapest:
                kept[level] = best[level]
                cheapest = best[level][:2]
        return kept

    def _groups(self, nodes: list[int]) -> list[list[int]]:
        """``nodes`` (local) grouped by slice domain (each node alone without a slice)."""
        if self.slice_of is None:
            return [[i] for i in nodes]
        groups: dict[int, list[int]] = {}
        for i in nodes:
            groups.setdefault(self.slice_of[i], []).append(i)
        return list(groups.values())

    def _group_options(
        self, group: list[int], pre: frozenset[int]
    ) -> list[tuple[int, int, frozenset[int]]]:
        """The cheapest further victims on the nodes of ``group``, once ``pre`` stop, for
        each number of pods they add there (a small knapsack over the nodes' options, the
        victims chosen jointly: allowances counted over the union, a gang stopped beyond
        its allowance stopped whole): (cost, priority, tasks)."""
        index = self.index
        base = self._caps(pre) if pre else {}
        now = {i: base.get(i, self.cap[i]) for i in group}
        states: dict[int, tuple[int, int, frozenset[int]]] = {0: (0, 0, frozenset())}
        for i in group:
            options = self._node_options(i, pre)
            if not options:
                continue
            grown = dict(states)
            for _, _, tasks in states.values():
                for _, _, more in options.values():
                    union = set(tasks) | more
                    if tasks:
                        closed = self._close(union | pre if pre else union)
                        if closed is None:
                            continue
                        union = closed - pre
                    chosen = frozenset(union)
                    caps = self._caps(pre | chosen)
                    added = min(sum(caps.get(j, now[j]) - now[j] for j in group), index.pods)
                    if added <= 0:
                        continue
                    cost, priority = self._price(chosen)
                    if added not in grown or (cost, priority) < grown[added][:2]:
                        grown[added] = (cost, priority, chosen)
            states = grown
        return [entry for added, entry in sorted(states.items()) if added > 0]

    def _moves(self, missing: int) -> list[Move]:
        moves = []
        empty: frozenset[int] = frozenset()
        for group in self._groups(list(range(len(self.nodes)))):
            for cost, priority, tasks in self._group_options(group, empty):
                gain = min(self._gain(self._caps(tasks)), missing)
                moves.append(Move(tuple(sorted(tasks)), cost, gain, priority))
        index = self.index
        for k in self.gangs:
            if not index.gang_closable[k]:
                continue
            rest = [t for t in index.gang_members[k].tolist() if t not in self.stopped]
            if not rest:
                continue
            moves.append(self._gang_move(rest, missing))
        return moves

    def _gang_move(self, rest: list[int], missing: int) -> Move:
        """Close a gang (its ``rest`` members stop), then complete pod slots on the slice
        domains (nodes without a slice) its members free, while that lowers the cost per
        pod (further gangs stopped whole when the completion needs it)."""
        pre = frozenset(rest)
        caps = self._caps(pre)
        cost, priority = self._price(pre)
        gain = self._gain(caps)
        touched = sorted(caps)
        if self.slice_of is not None:  # the whole slice domains the gang's nodes are in
            wanted = {self.slice_of[i] for i in caps}
            touched = [i for i, e in enumerate(self.slice_of) if e in wanted]
        extras: list[tuple[float, int, int, frozenset[int]]] = []
        for number, group in enumerate(self._groups(touched)):
            for c, _, tasks in self._group_options(group, pre):
                more = self._gain(self._caps(pre | tasks)) - gain
                if more > 0:
                    extras.append((c / more, number, c, tasks))
        extras.sort(key=lambda e: (e[0], e[1], e[2], sorted(e[3])))
        chosen = set(pre)
        done: set[int] = set()
        for _, number, _, tasks in extras:
            if number in done:
                continue
            trial = self._close(chosen | tasks)
            if trial is None:
                continue
            trial_gain = min(self._gain(self._caps(trial)), missing)
            if trial_gain <= min(gain, missing):
                continue
            trial_cost, trial_priority = self._price(trial)
            if gain > 0 and trial_cost * min(gain, missing) >= cost * trial_gain:
                continue  # it raises the cost per pod
            chosen, cost, priority, gain = trial, trial_cost, trial_priority, trial_gain
            done.add(number)
        return Move(tuple(sorted(chosen)), cost, min(gain, missing), priority)

    def apply(self, tasks: tuple[int, ...]) -> None:
        index = self.index
        for t in tasks:
            if t in self.stopped:
                continue
            self.stopped.add(t)
            k = int(index.task_gang[t])
            if k >= 0:
                self.down[k] = self.down.get(k, 0) + 1
            i = self.local.get(int(index.task_node[t]))
            if i is None:
                continue
            for r, amount in enumerate(self._hold(t)):
                self.free[i][r] += amount
            level = self._capacity(self.free[i])
            if self.slice_of is not None:
                self.room[self.slice_of[i]] += level - self.cap[i]
            self.cap[i] = level
        self.usable = self._usable_total()

    def run(self) -> frozenset[int] | None:
        """Victims letting the gang fit (by usable pod count), or None."""
        pods = self.index.pods
        while self.usable < pods:
            missing = pods - self.usable
            moves = [m for m in self._moves(missing) if m.gain > 0]
            if not moves:
                return None
            best = min(moves, key=lambda m: (m.cost / m.gain, m.priority, -m.gain, m.tasks))
            self.apply(best.tasks)
        return frozenset(self.stopped)

    def fits(self, stopped: frozenset[int]) -> bool:
        """The gang fits the domain once ``stopped`` stop (by usable pod count)."""
        index = self.index
        rows: dict[int, list[int]] = {}
        for t in stopped:
            i = self.local.get(int(index.task_node[t]))
            if i is not None:
                row = rows.setdefault(i, list(index.node_free[self.nodes[i]].tolist()))
                for r, amount in enumerate(self._hold(t)):
                    row[r] += amount
        base = [int(c) for c in self.base_cap]
        for i, row in rows.items():
            base[i] = self._capacity(row)
        if self.slice_of is None:
            return sum(base) >= index.pods
        room: dict[int, int] = {}
        for i, e in enumerate(self.slice_of):
            room[e] = room.get(e, 0) + base[i]
        return sum(r // self.size * self.size for r in room.values()) >= index.pods

    def trim(self, stopped: frozenset[int]) -> frozenset[int]:
        """Drop victims the gang does not need, most costly first (a closed gang as a whole)."""
        index = self.index
        closed = [
            k
            for k in sorted({int(index.task_gang[t]) for t in stopped} - {-1})
            if all(m in stopped for m in index.gang_members[k].tolist())
            and len(index.gang_members[k]) > index.gang_allowance[k]
        ]
        in_closed = {t for k in closed for t in index.gang_members[k].tolist()}
        units = [tuple(index.gang_members[k].tolist()) for k in closed]
        units += [(t,) for t in sorted(stopped) if t not in in_closed]
        units.sort(key=lambda u: (-sum(self.cost[t] for t in u), min(u)))
        for unit in units:
            fewer = stopped - set(unit)
            if self.fits(fewer) and _closure_ok(index, fewer):
                stopped = fewer
        return stopped


def _cover(index: GangIndex, nodes: np.ndarray, candidates: list[int]) -> Plan | None:
    """The cover of one domain's admitted ``nodes``, needless victims dropped, then P3."""
    cover = _Cover(index, nodes, candidates)
    found = cover.run()
    if found is None:  # fallback: gangs stop whole only (no allowance spent early)
        cover = _Cover(index, nodes, candidates, whole_only=True)
        found = cover.run()
    if found is None:
        return None
    stopped = cover.trim(found)
    count = _place(index, nodes, stopped)
    if count is None:  # not reached: the cover counts pods as fill places them
        return None
    return count, _prune(index, count, stopped)


class Domain(NamedTuple):
    """One domain of the required level: its admitted nodes and the candidates on them."""

    nodes: np.ndarray
    candidates: list[int]


class Grouped(NamedTuple):
    """Every domain of the required level at once: admitted nodes and candidates grouped by
    domain (``node_start[d]:node_start[d + 1]`` of ``node_order``, likewise tasks)."""

    node_order: np.ndarray
    node_start: np.ndarray
    task_order: np.ndarray
    task_start: np.ndarray

    def domain(self, d: int) -> Domain:
        nodes = self.node_order[self.node_start[d] : self.node_start[d + 1]]
        tasks = self.task_order[self.task_start[d] : self.task_start[d + 1]]
        return Domain(nodes, [int(t) for t in tasks.tolist()])

    def has_nodes(self) -> np.ndarray:
        result: np.ndarray = np.diff(self.node_start) > 0
        return result


def group(index: GangIndex) -> Grouped:
    """Admitted nodes and the candidates on them, grouped by domain of the required level."""
    count = len(index.required.ids)
    nodes = np.flatnonzero(index.admitted)
    of_node = index.required.of_node[nodes]
    node_order = nodes[np.argsort(of_node, kind="stable")]
    node_start = np.searchsorted(of_node[np.argsort(of_node, kind="stable")], np.arange(count + 1))
    tasks = np.flatnonzero(index.candidate & index.admitted[index.task_node])
    of_task = index.required.of_node[index.task_node[tasks]]
    by = np.argsort(of_task, kind="stable")
    task_start = np.searchsorted(of_task[by], np.arange(count + 1))
    return Grouped(node_order, node_start, tasks[by], task_start)


def domains_of(index: GangIndex) -> list[Domain]:
    """Every domain of the required level with an admitted node (domain order)."""
    grouped = group(index)
    return [grouped.domain(d) for d in np.flatnonzero(grouped.has_nodes()).tolist()]


def domain_bounds(problem: GangProblem, grouped: Grouped | None = None) -> np.ndarray:
    """A lower bound on the objective of any answer inside each domain of the required level
    (``inf``: none exists there), all domains at once.

    Preemption: the GPUs missing, covered fractionally by the domain's
    candidates cheapest per GPU first (thousandths, rounded up). Placement: the
    fewest preferred domains whose room holds the gang.
    """
    index = problem.index
    grouped = group(index) if grouped is None else grouped
    count = len(index.required.ids)
    of_node = index.required.of_node
    nodes = grouped.node_order
    bounds = np.full(count, math.inf)
    if not problem.preempting:
        cap = index.node_capacity
        room = np.bincount(of_node[nodes], weights=cap[nodes], minlength=count)
        for d in np.flatnonzero(room >= index.pods).tolist():
            bounds[d] = domain_bound(problem, grouped.domain(d))
        return bounds
    reach = np.bincount(of_node[nodes], weights=index.candidate_capacity[nodes], minlength=count)
    free = np.bincount(
        of_node[nodes], weights=np.maximum(index.node_free[nodes, 0], 0), minlength=count
    ).astype(np.int64)
    missing = index.pods * int(index.pod_need[0]) - free
    feasible = reach >= index.pods
    bounds[feasible & (missing <= 0)] = 0.0
    tasks = grouped.task_order
    gpus = index.task_hold[tasks, 0]
    tasks, gpus = tasks[gpus > 0], gpus[gpus > 0]
    if len(tasks) == 0:
        return bounds
    cost = index.task_cost[tasks]
    where = of_node[index.task_node[tasks]]
    # by domain, then price per GPU (compared exactly: a/b < c/d as a*d < c*b is not
    # vectorisable simply, floats order them and exact integers sum them)
    order = np.lexsort((tasks, cost / gpus, where))
    tasks, gpus, cost, where = tasks[order], gpus[order], cost[order], where[order]
    gpu_sum = np.cumsum(gpus)
    cost_sum = np.cumsum(cost)
    first = np.searchsorted(where, np.arange(count))
    last = np.searchsorted(where, np.arange(count), side="right")
    gpu_base = np.where(first > 0, gpu_sum[np.maximum(first - 1, 0)], 0)
    cost_base = np.where(first > 0, cost_sum[np.maximum(first - 1, 0)], 0)
    wanted = np.flatnonzero(feasible & (missing > 0))
    at = np.searchsorted(gpu_sum, gpu_base[wanted] + missing[wanted])  # the task that ends it
    inside = at < last[wanted]
    for d, pos in zip(wanted[inside].tolist(), at[inside].tolist(), strict=True):
        before_gpus = int(gpu_sum[pos - 1] - gpu_base[d]) if pos > first[d] else 0
        before_cost = int(cost_sum[pos - 1] - cost_base[d]) if pos > first[d] else 0
        take = int(missing[d]) - before_gpus
        per = int(gpus[pos])
        bounds[d] = float((before_cost * per + take * int(cost[pos]) + per - 1) // per)
    return bounds


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
    :func:`domain_bounds` over the domains."""
    bounds = domain_bounds(problem)
    return float(bounds.min()) if len(bounds) else math.inf


def best_plan(problem: GangProblem) -> tuple[Plan | None, GangKey | None, float]:
    """The heuristic's best plan over all required domains, its objective, and the lower
    bound (:func:`lower_bound`).

    Domains are tried in increasing :func:`domain_bounds` (then domain order),
    and the search stops at the first whose bound exceeds the best cost found
    (a domain whose bound equals it may still win a tie-break).
    """
    index = problem.index
    grouped = group(index)
    bounds = domain_bounds(problem, grouped)
    best: tuple[Plan | None, GangKey | None] = (None, None)
    for pos in np.lexsort((np.arange(len(bounds)), bounds)).tolist():
        if math.isinf(bounds[pos]):
            break
        key = best[1]
        if key is not None and bounds[pos] > (key.cost if problem.preempting else key.domains):
            break
        domain = grouped.domain(pos)
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
    least = float(bounds.min()) if len(bounds) else math.inf
    return best[0], best[1], least


def solve_heuristic(problem: GangProblem) -> GangResult:
    """Place the gang (stopping the cheapest victims when allowed) by the heuristic.

    Examples
    --------
    See :mod:`gpuopt.gang`, which solves one problem with both methods.
    """
    started = time.perf_counter()
    plan, _, bound = best_plan(problem)
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
    "Grouped",
    "best_plan",
    "domain_bound",
    "domain_bounds",
    "domains_of",
    "fill",
    "group",
    "lower_bound",
    "solve_heuristic",
]
