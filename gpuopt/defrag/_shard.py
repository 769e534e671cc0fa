"""The search engine behind ``onehop`` and ``ipc``: one shard of nodes, emptied node by node.

A :class:`Shard` is a plain, picklable payload (numpy arrays and ints) that
holds a set of nodes and every task on them, so it can be solved in another
process or on a Dask worker without the pydantic snapshot. :func:`empty_nodes`
tries the shard's nodes in a given order and returns the moves it made, in an
order that runs make-before-break (rule D3 of ``models/defrag.md``).

How each rule holds (labels of ``models/defrag.md``):

- D2: locked tasks are never chosen, and a node holding one is never tried.
- D3 and K4: a move is made only when the target has room for the task's
  GPUs, CPUs, memory and every extended resource it requests while the source
  still holds it; an eviction chain makes the victim's move first, so the
  plan runs from the chain's tail.
- D4: targets are filtered by the task's selector mask.
- D5: a target that already holds a task of the task's anti-affinity group is
  never chosen (unless that task is the victim evicted first).
- D6: the move budget and per-group budgets are checked before a node is
  accepted; a node whose moves would exceed them is rolled back.
- D8: the node orders hold only nodes with at least ``min_node_gpus`` GPUs,
  and a fill that would empty a smaller node is rolled back.

With a workload (``Shard.slots``, X9) a node's evacuation is kept only when
it raises the shard's integer-weighted slots, targets are chosen where the
fewest slots are lost, and the fill pass becomes single moves that raise the
slots (:func:`_raise_slots`); the rules hold as above.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuopt._native import compiled
from gpuopt.defrag.exact import NO_LIMIT, ExactSolver, budgeted, solve_from
from gpuopt.defrag.problem import SCALE, Cluster
from gpuopt.defrag.solution import make_plan
from gpuopt.defrag.workload import SlotModel
from gpuopt.errors import ProblemError
from gpuopt.solvers.deadline import Deadline

#: Candidate targets and victims tried per level of an eviction chain.
CHAIN_TARGETS = 4
CHAIN_VICTIMS = 2
#: Placement attempts (direct or chained) spent on one node before giving up on it.
NODE_BUDGET = 120
#: Targets (the best fitting) whose workload slots are weighed for one placement.
SLOT_TARGETS = 24


@dataclass
class Shard:
    """Nodes of one partition and the tasks on them (positions are global)."""

    node_pos: np.ndarray  # local node -> global node position
    node_gpus: np.ndarray
    node_cpus: np.ndarray
    free_gpus: np.ndarray
    free_cpus: np.ndarray
    free_memory: np.ndarray  # NO_LIMIT where memory is not tracked
    node_extra: np.ndarray  # local node x extended resource: allocatable (K4)
    free_extra: np.ndarray  # local node x extended resource: free now
    selector_masks: np.ndarray  # selector row -> bool per local node
    task_pos: np.ndarray  # local task -> global task position
    task_node: np.ndarray  # local task -> local node
    task_gpus: np.ndarray
    task_cpus: np.ndarray
    task_memory: np.ndarray
    task_extra: np.ndarray  # local task x extended resource: request
    task_locked: np.ndarray
    task_hp: np.ndarray
    task_group: np.ndarray
    task_selector: np.ndarray
    orders: list[np.ndarray]  # node orders to try (local nodes); the best result is kept
    depth: int
    max_moves: int | None = None
    group_budget: dict[int, int] = field(default_factory=dict)
    seconds: float | None = None
    deadline: float | None = None  # as time.time(): the call's deadline, shared by all shards
    fill: bool = True  # after emptying, fill fragmented nodes exactly (ipc; not onehop)
    exact: str | None = None  # "milp" or "cpsat": then improve the result exactly
    exact_seconds: float = 5.0
    min_node_gpus: int = 0  # nodes with fewer GPUs are never emptied (D8)
    slots: SlotModel | None = None  # the workload objective (X9), local positions
    partial: np.ndarray | None = None  # local node x shape: partly used GPUs' slots now


@dataclass
class _State:
    shard: Shard
    free_gpus: np.ndarray
    free_cpus: np.ndarray
    free_memory: np.ndarray
    free_extra: np.ndarray  # no columns when no task requests an extended resource
    count: np.ndarray  # tasks per local node
    tasks_on: list[list[int]]
    task_node: np.ndarray
    group_nodes: dict[int, set[int]]
    blocked: np.ndarray  # nodes emptied or being emptied: never targets
    cpu_scale: float
    log: list[tuple[int, int, int]] = field(default_factory=list)
    in_flight: set[int] = field(default_factory=set)
    attempts: int = 0
    partial: np.ndarray | None = None  # local node x shape (workload objective only)
    value_now: np.ndarray | None = None  # local node -> integer-weighted slots (kept current)
    moves_left: int | None = None  # budgets left after the emptying pass (D6)
    group_left: dict[int, int] = field(default_factory=dict)
    #: ``~blocked & (count > 0)``, kept current by :meth:`move` and :meth:`block` (targets
    #: read it on every placement)
    open: np.ndarray = field(init=False)

    #: ``_cslots.Targets`` over this state's arrays where it is built and no extended
    #: resource is asked, else None (the numpy expressions of :meth:`targets` run)
    _targets_c: Any = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.open = ~self.blocked & (self.count > 0)
        module = compiled("gpuopt.defrag._cslots")
        if module is not None and not self.free_extra.shape[1]:
            self._targets_c = module.Targets(
                self.shard.selector_masks,
                self.open,
                self.free_gpus,
                self.free_cpus,
                self.free_memory,
            )

    def block(self, node: int, blocked: bool) -> None:
        """Set whether ``node`` is blocked (never a target), keeping :attr:`open` current."""
        self.blocked[node] = blocked
        self.open[node] = not blocked and self.count[node] > 0

    def values(self, nodes: np.ndarray) -> np.ndarray:
        """Integer-weighted workload slots of ``nodes`` now, computed afresh."""
        slots = self.shard.slots
        assert slots is not None and self.partial is not None
        return slots.node_values(
            self.free_gpus[nodes], self.free_cpus[nodes], self.partial[nodes], nodes
        )

    def total(self) -> int:
        """Integer-weighted workload slots of the shard (0 without a workload)."""
        return 0 if self.value_now is None else int(self.value_now.sum())

    def move(self, task: int, target: int, *, refresh: bool = True) -> None:
        """Move ``task`` to ``target``; ``refresh=False`` leaves ``value_now`` to the caller."""
        shard, source = self.shard, int(self.task_node[task])
        self.free_gpus[target] -= shard.task_gpus[task]
        self.free_cpus[target] -= shard.task_cpus[task]
        self.free_memory[target] -= shard.task_memory[task]
        self.free_gpus[source] += shard.task_gpus[task]
        self.free_cpus[source] += shard.task_cpus[task]
        self.free_memory[source] += shard.task_memory[task]
        if self.free_extra.shape[1]:
            self.free_extra[target] -= shard.task_extra[task]
            self.free_extra[source] += shard.task_extra[task]
        if self.partial is not None and shard.slots is not None:
            self.partial[target] += shard.slots.task_slots[task]
            self.partial[source] -= shard.slots.task_slots[task]
        self.count[target] += 1
        self.count[source] -= 1
        self.open[target] = not self.blocked[target]
        self.open[source] = not self.blocked[source] and self.count[source] > 0
        self.tasks_on[source].remove(task)
        self.tasks_on[target].append(task)
        self.task_node[task] = target
        if refresh and self.value_now is not None:
            pair = np.array([source, target])
            self.value_now[pair] = self.values(pair)
        group = int(shard.task_group[task])
        if group >= 0:
            nodes = self.group_nodes[group]
            nodes.discard(source)
            nodes.add(target)
        self.log.append((task, source, target))

    def rollback(self, mark: int) -> None:
        """Undo the moves after ``mark``; the slots of the nodes they touched are computed
        once at the end (a node's slots depend only on its own state, restored exactly)."""
        touched: list[int] = []
        while len(self.log) > mark:
            task, source, target = self.log.pop()
            self.move(task, source, refresh=False)
            self.log.pop()
            touched += (source, target)
        if touched and self.value_now is not None:
            nodes = np.unique(np.array(touched))
            self.value_now[nodes] = self.values(nodes)

    def targets(self, task: int, forbidden: set[int]) -> np.ndarray:
        """Boolean mask of nodes that may receive ``task`` now (D3, D4, D5, K4)."""
        shard = self.shard
        mask: np.ndarray
        if self._targets_c is not None:  # the same mask in one pass (no extended resources)
            mask = self._targets_c(
                shard.task_selector[task],
                shard.task_gpus[task],
                shard.task_cpus[task],
                shard.task_memory[task],
            )
        else:
            mask = shard.selector_masks[shard.task_selector[task]] & self.open
            mask &= self.free_gpus >= shard.task_gpus[task]
            mask &= self.free_cpus >= shard.task_cpus[task]
            mask &= self.free_memory >= shard.task_memory[task]
            if self.free_extra.shape[1]:
                mask &= _has_room(self.free_extra, shard.task_extra[task])
        mask[self.task_node[task]] = False
        for node in forbidden:
            mask[node] = False
        group = int(shard.task_group[task])
        if group >= 0:
            for node in self.group_nodes[group]:
                mask[node] = False
        return mask

    def best_fit(self, task: int, mask: np.ndarray) -> int:
        """The fullest eligible node after placing ``task`` (GPUs first, CPUs to break ties)."""
        candidates = mask.nonzero()[0]  # 1-D: flatnonzero without its wrappers
        if candidates.size == 0:
            return -1
        shard = self.shard
        score = (self.free_gpus[candidates] - shard.task_gpus[task]) + (
            self.free_cpus[candidates] - shard.task_cpus[task]
        ) * self.cpu_scale
        if shard.slots is not None:  # fewest workload slots lost first, then best fit
            candidates, score = _best_scored(candidates, score)
            loss = self.loss(task, candidates)
            return int(candidates[np.lexsort((score, loss))[0]])
        return int(candidates[int(np.argmin(score))])

    def loss(self, task: int, candidates: np.ndarray) -> np.ndarray:
        """Workload slots ``candidates`` would lose by taking ``task`` (X9's count)."""
        shard = self.shard
        slots = shard.slots
        assert slots is not None and self.partial is not None and self.value_now is not None
        now = self.value_now[candidates]
        after = slots.moved_values(
            self.free_gpus,
            self.free_cpus,
            self.partial,
            candidates,
            shard.task_gpus[task],
            shard.task_cpus[task],
            task,
        )
        lost: np.ndarray = now - after
        return lost

    def place(self, task: int, depth: int, forbidden: set[int]) -> bool:
        """Move ``task`` off its node, directly or through an eviction chain of ``depth`` moves."""
        self.attempts += 1
        if self.attempts > NODE_BUDGET:
            return False
        target = self.best_fit(task, self.targets(task, forbidden))
        if target >= 0:
            self.move(task, target)
            return True
        if depth <= 1:
            return False
        return self._chain(task, depth, forbidden)

    def _chain(self, task: int, depth: int, forbidden: set[int]) -> bool:
        """Make room on a near-fitting node by moving one of its tasks first (tail first)."""
        shard = self.shard
        gpus, cpus, memory = shard.task_gpus[task], shard.task_cpus[task], shard.task_memory[task]
        mask = shard.selector_masks[shard.task_selector[task]] & self.open
        mask &= shard.node_gpus >= gpus
        extra = shard.task_extra[task]
        if self.free_extra.shape[1]:
            mask &= _has_room(shard.node_extra, extra)
        mask[self.task_node[task]] = False
        for node in forbidden:
            mask[node] = False
        candidates = mask.nonzero()[0]
        if candidates.size == 0:
            return False
        deficit = np.maximum(gpus - self.free_gpus[candidates], 0)
        ranked = candidates[np.argsort(deficit, kind="stable")[:CHAIN_TARGETS]]
        group = int(shard.task_group[task])
        for node in ranked.tolist():
            need_gpus = max(0, int(gpus - self.free_gpus[node]))
            need_cpus = max(0, int(cpus - self.free_cpus[node]))
            need_memory = max(0, int(memory - self.free_memory[node]))
            need_extra = extra  # what a victim must free of each extended resource (K4)
            short_extra = False
            if self.free_extra.shape[1]:
                need_extra = np.maximum(extra - self.free_extra[node], 0)
                short_extra = bool(need_extra.any())
            conflict = group >= 0 and node in self.group_nodes[group]
            victims = [
                victim
                for victim in self.tasks_on[node]
                if not shard.task_locked[victim]
                and victim not in self.in_flight
                and shard.task_gpus[victim] >= need_gpus
                and shard.task_cpus[victim] >= need_cpus
                and shard.task_memory[victim] >= need_memory
                and (not short_extra or bool((shard.task_extra[victim] >= need_extra).all()))
                and (not conflict or shard.task_group[victim] == group)
            ]
            if not victims or (
                need_gpus == 0
                and need_cpus == 0
                and need_memory == 0
                and not short_extra
                and not conflict
            ):
                continue
            victims.sort(key=lambda v: (int(shard.task_gpus[v]), int(shard.task_cpus[v])))
            for victim in victims[:CHAIN_VICTIMS]:
                mark = len(self.log)
                self.in_flight.add(victim)
                moved = self.place(victim, depth - 1, forbidden | {node})
                self.in_flight.discard(victim)
                if moved and self.targets(task, forbidden)[node]:
                    self.move(task, node)
                    return True
                self.rollback(mark)
        return False


def _best_scored(candidates: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The :data:`SLOT_TARGETS` candidates of lowest ``score`` (all when fewer)."""
    if candidates.size <= SLOT_TARGETS:
        return candidates, score
    best = np.argpartition(score, SLOT_TARGETS)[:SLOT_TARGETS]
    return candidates[best], score[best]


def _start(shard: Shard) -> _State:
    num_nodes = shard.node_pos.size
    tasks_on: list[list[int]] = [[] for _ in range(num_nodes)]
    group_nodes: dict[int, set[int]] = {}
    for task, node in enumerate(shard.task_node.tolist()):
        tasks_on[node].append(task)
        group = int(shard.task_group[task])
        if group >= 0:
            group_nodes.setdefault(group, set()).add(node)
    max_cpus = float(shard.node_cpus.max()) if num_nodes else 0.0
    value_now = None
    if shard.slots is not None and shard.partial is not None:
        value_now = shard.slots.node_values(shard.free_gpus, shard.free_cpus, shard.partial)
    return _State(
        shard=shard,
        free_gpus=shard.free_gpus.copy(),
        free_cpus=shard.free_cpus.copy(),
        free_memory=shard.free_memory.copy(),
        free_extra=shard.free_extra.copy(),
        count=np.bincount(shard.task_node, minlength=num_nodes).astype(np.int64),
        tasks_on=tasks_on,
        task_node=shard.task_node.copy(),
        group_nodes=group_nodes,
        blocked=np.zeros(num_nodes, dtype=bool),
        cpu_scale=0.5 / (max_cpus + 1.0),
        partial=None if shard.partial is None else shard.partial.copy(),
        value_now=value_now,
    )


def _has_room(free: np.ndarray, request: np.ndarray) -> np.ndarray:
    """Per node (row of ``free``, nodes x resources): room for every resource ``request`` names."""
    room: np.ndarray
    if free.shape[1] == 1:  # the common case (RDMA alone, say): no reduction needed
        room = free[:, 0] >= request[0] if request[0] else np.ones(free.shape[0], dtype=bool)
        return room
    wanted = np.flatnonzero(request)
    if wanted.size == 0:
        return np.ones(free.shape[0], dtype=bool)
    room = np.all(free[:, wanted] >= request[wanted], axis=1)
    return room


def empty_nodes(shard: Shard) -> list[tuple[int, int, int]]:
    """Empty the shard's nodes; return moves as global positions, in execution order.

    Each order of ``shard.orders`` is tried from the same start and the best
    result is kept: most nodes emptied, then fewest fragmented nodes, then
    fewest moves. Along an order, a node is accepted only when every task on it
    found a place (directly or through a chain of at most ``shard.depth``
    moves) within the budgets; otherwise all its moves are rolled back.
    Accepted nodes are never targets afterwards. Returns ``(task, source node,
    target node)`` triples.
    """
    deadline = _monotonic_deadline(shard)
    best: tuple[tuple[int, int, int], list[tuple[int, int, int]]] | None = None
    best_state: _State | None = None
    for order in shard.orders:
        if best is not None and deadline is not None and time.monotonic() > deadline:
            break
        state = _empty_along(shard, order, deadline)
        used = shard.node_gpus - state.free_gpus
        emptied = int(np.count_nonzero((state.count == 0) & (shard.free_gpus < shard.node_gpus)))
        fragmented = int(np.count_nonzero((used > 0) & (used < shard.node_gpus)))
        score = (emptied, -fragmented, -len(state.log))
        if shard.slots is not None:
            score = (state.total(), 0, -len(state.log))
        if best is None or score > best[0]:
            best, best_state = (score, state.log), state
    log = best[1] if best is not None else []
    in_time = deadline is None or time.monotonic() <= deadline
    if shard.slots is not None and shard.fill and best_state is not None and in_time:
        # once, on the best order's result
        _raise_slots(best_state, best_state.moves_left, best_state.group_left, deadline)
        log = best_state.log
    if shard.exact is not None and not shard.group_budget:
        left = shard.exact_seconds
        if deadline is not None:
            left = min(left, deadline - time.monotonic())
        if left > 0:
            log = _improve_exactly(shard, log, left)
    return [
        (int(shard.task_pos[task]), int(shard.node_pos[source]), int(shard.node_pos[target]))
        for task, source, target in log
    ]


def _monotonic_deadline(shard: Shard) -> float | None:
    """The earlier of ``seconds`` from now and the shared ``deadline``, on this process's
    monotonic clock (the shared one is wall-clock time, comparable across processes)."""
    deadline = None if shard.seconds is None else time.monotonic() + shard.seconds
    if shard.deadline is not None:
        shared = time.monotonic() + (shard.deadline - time.time())
        deadline = shared if deadline is None else min(deadline, shared)
    return deadline


def sub_snapshot(shard: Shard) -> Cluster:
    """The shard as a snapshot of its own (local ids ``n<k>``, ``t<k>``), for the exact models.

    Eligibility classes (rules K1-K3) that exclude a node of the shard become
    labels ``sel<r>`` on the nodes class ``r`` admits and a node selector on
    its tasks; a task that sits on a node its class no longer admits (a
    cordon or taint added since it started) may also stay where it is, by a
    required node affinity on its own node. Anti-affinity groups keep their
    numbers; capacities are the nodes' own (extended resources as ``r<k>``,
    K4), the tasks are those on the shard's nodes now. A node whose tasks hold
    more than it has (locked in the snapshot) is locked here too.
    """
    masks = shard.selector_masks
    partial = [not bool(masks[row].all()) for row in range(masks.shape[0])]
    names = [f"r{col}" for col in range(shard.task_extra.shape[1])]
    nodes = []
    for node in range(shard.node_pos.size):
        labels = {
            f"sel{row}": "1" for row in range(masks.shape[0]) if partial[row] and masks[row, node]
        }
        memory = shard.free_memory[node]
        used_memory = int(shard.task_memory[shard.task_node == node].sum())
        nodes.append(
            {
                "id": f"n{node}",
                "gpus": int(shard.node_gpus[node]),
                "cpus": int(shard.node_cpus[node]) / SCALE,
                "memory": None if memory >= NO_LIMIT // 2 else (int(memory) + used_memory) / SCALE,
                "labels": labels,
                "resources": _named(names, shard.node_extra[node]),
                "locked": bool(
                    shard.free_gpus[node] < 0
                    or shard.free_cpus[node] < 0
                    or memory < 0
                    or (shard.free_extra[node] < 0).any()
                ),
            }
        )
    tasks = []
    for task in range(shard.task_pos.size):
        row = int(shard.task_selector[task])
        group = int(shard.task_group[task])
        here = int(shard.task_node[task])
        stays: list[dict[str, object]] = []
        if partial[row] and not masks[row, here] and not shard.task_locked[task]:
            stays = [
                {"match_expressions": [{"key": f"sel{row}", "operator": "Exists"}]},
                {
                    "match_fields": [
                        {"key": "metadata.name", "operator": "In", "values": [f"n{here}"]}
                    ]
                },
            ]
        tasks.append(
            {
                "id": f"t{task}",
                "node": f"n{int(shard.task_node[task])}",
                "gpus": int(shard.task_gpus[task]),
                "cpus": int(shard.task_cpus[task]) / SCALE,
                "memory": int(shard.task_memory[task]) / SCALE,
                "locked": bool(shard.task_locked[task]),
                "priority": "HP" if shard.task_hp[task] else "LP",
                "node_selector": {f"sel{row}": "1"} if partial[row] and not stays else {},
                "node_affinity": stays,
                "anti_affinity": None if group < 0 else f"g{group}",
                "resources": _named(names, shard.task_extra[task]),
            }
        )
    return Cluster.model_validate({"name": "partition", "nodes": nodes, "tasks": tasks})


def _named(names: list[str], amounts: np.ndarray) -> dict[str, int]:
    """The nonzero ``amounts`` by resource name (a snapshot's ``resources``)."""
    return {names[col]: int(amounts[col]) for col in np.flatnonzero(amounts).tolist()}


def _improve_exactly(
    shard: Shard, log: list[tuple[int, int, int]], seconds: float
) -> list[tuple[int, int, int]]:
    """Run the exact model on the shard for ``seconds``, warm-started from ``log``; keep the
    better plan.

    Not used with per-group budgets (the exact rows have one budget for all
    groups, the shard one per group).
    """
    problem = sub_snapshot(shard)
    budgets = {"max_moves": shard.max_moves, "min_node_gpus": shard.min_node_gpus}
    problem = problem.model_copy(update={"options": problem.options.model_copy(update=budgets)})
    start = make_plan(
        problem, "heuristic", [(f"t{t}", f"n{a}", f"n{b}") for t, a, b in log], seconds=0
    )
    deadline = Deadline(seconds)
    solver: ExactSolver = "cpsat" if shard.exact == "cpsat" else "milp"
    if shard.slots is not None:
        start = start.model_copy(update={"maximises": "workload"})
    try:
        plan = solve_from(
            budgeted(problem, None, None),
            start,
            solver=solver,
            deadline=deadline,
            slots=shard.slots,
        )
    except ProblemError:  # the partition's model is too large: keep the heuristic's result
        return log

    def score(found: Any) -> tuple[int, int, int]:  # the order empty_nodes ranks results by
        m = found.metrics
        if shard.slots is not None:  # X9's count of the partition's workload slots
            final = problem.index.task_node.copy()
            for move in found.moves:
                final[int(move.task[1:])] = int(move.to[1:])
            return shard.slots.placement_value(problem, final), 0, -m.moves
        return m.emptied, -m.fragmented_after, -m.moves

    if score(plan) <= score(start):
        return log
    return [(int(m.task[1:]), int(m.source[1:]), int(m.to[1:])) for m in plan.moves]


def _room_left(state: _State, node: int) -> bool:
    """Whether the other open nodes have, in sum, the free GPUs, CPUs and extended
    resources ``node`` uses."""
    shard = state.shard
    open_nodes = ~state.blocked & (state.count > 0)
    open_nodes[node] = False
    used_gpus = shard.node_gpus[node] - state.free_gpus[node]
    used_cpus = shard.node_cpus[node] - state.free_cpus[node]
    # free room below zero (an over-committed node kept locked) offers nothing to others
    if not (
        np.maximum(state.free_gpus[open_nodes], 0).sum() >= used_gpus
        and np.maximum(state.free_cpus[open_nodes], 0).sum() >= used_cpus
    ):
        return False
    if state.free_extra.shape[1]:
        used_extra = shard.node_extra[node] - state.free_extra[node]
        room = np.maximum(state.free_extra[open_nodes], 0).sum(axis=0)
        return bool((room >= used_extra).all())
    return True


def _empty_along(shard: Shard, order: np.ndarray, deadline: float | None) -> _State:
    state = _start(shard)
    moves_left = shard.max_moves
    group_left = dict(shard.group_budget)
    for node in order.tolist():
        if deadline is not None and time.monotonic() > deadline:
            break
        if moves_left is not None and moves_left <= 0:
            break
        tasks = sorted(
            state.tasks_on[node],
            key=lambda t: (-int(shard.task_gpus[t]), -int(shard.task_cpus[t]), t),
        )
        if not tasks or any(shard.task_locked[t] for t in tasks) or not _room_left(state, node):
            continue
        state.block(node, True)
        state.attempts = 0
        mark = len(state.log)
        value = state.total()
        if not all(state.place(task, shard.depth, set()) for task in tasks) or (
            shard.slots is not None and state.total() <= value  # X9: keep only what gains
        ):
            state.rollback(mark)
            state.block(node, False)
            continue
        new = state.log[mark:]
        spent_groups: dict[int, int] = {}
        for task, _, _ in new:
            group = int(shard.task_group[task])
            if group >= 0 and group in group_left:
                spent_groups[group] = spent_groups.get(group, 0) + 1
        over_groups = any(spent > group_left[g] for g, spent in spent_groups.items())
        if (moves_left is not None and len(new) > moves_left) or over_groups:
            state.rollback(mark)
            state.block(node, False)
            continue
        if moves_left is not None:
            moves_left -= len(new)
        for group, spent in spent_groups.items():
            group_left[group] -= spent
    state.moves_left, state.group_left = moves_left, group_left
    if shard.slots is None and shard.fill and (deadline is None or time.monotonic() <= deadline):
        _fill_open_nodes(state, moves_left, group_left)
    return state


def _raise_slots(
    state: _State, moves_left: int | None, group_left: dict[int, int], deadline: float | None
) -> None:
    """Workload objective: single direct moves that raise the shard's weighted slots (X9).

    Tasks of open nodes (not emptied by the first pass), from the nodes with
    the fewest tasks; each goes where the source's gain plus the target's
    change is largest, when that is above 0. A move that would empty a node
    with fewer than ``min_node_gpus`` GPUs (D8) or exceed a budget (D6) is
    not made.
    """
    shard = state.shard
    open_nodes = np.flatnonzero(~state.blocked & (state.count > 0))
    order = open_nodes[np.argsort(state.count[open_nodes], kind="stable")]
    for node in order.tolist():
        for task in sorted(state.tasks_on[node]):
            if deadline is not None and time.monotonic() > deadline:
                return
            if moves_left is not None and moves_left <= 0:
                return
            if shard.task_locked[task]:
                continue
            group = int(shard.task_group[task])
            if group in group_left and group_left[group] <= 0:
                continue
            source = int(state.task_node[task])
            if state.count[source] == 1 and shard.node_gpus[source] < shard.min_node_gpus:
                continue
            candidates = state.targets(task, set()).nonzero()[0]
            if candidates.size == 0:
                continue
            score = state.free_gpus[candidates] + state.free_cpus[candidates] * state.cpu_scale
            candidates, _ = _best_scored(candidates, score)
            slots = shard.slots
            assert slots is not None and state.partial is not None and state.value_now is not None
            # the source without the task and each candidate with it, in one call: rows are
            # independent, so this is the source's gain and the candidates' loss at once
            nodes = np.concatenate(([source], candidates))
            values = slots.moved_values(
                state.free_gpus,
                state.free_cpus,
                state.partial,
                nodes,
                shard.task_gpus[task],
                shard.task_cpus[task],
                task,
                first_leaves=True,
            )
            gain = int(values[0] - state.value_now[source])
            change = gain - (state.value_now[candidates] - values[1:])
            best = int(np.argmax(change))
            if change[best] > 0:
                state.move(task, int(candidates[best]))
                if moves_left is not None:
                    moves_left -= 1
                if group in group_left:
                    group_left[group] -= 1


def _fill_with(state: _State, node: int, tasks: list[int]) -> bool:
    """Move ``tasks`` (in order, skipping those that do not fit) onto ``node``; True when full."""
    shard = state.shard
    for task in tasks:
        need = int(state.free_gpus[node])
        if need == 0:
            break
        if shard.task_gpus[task] > need or state.task_node[task] == node:
            continue
        if state.free_gpus[int(state.task_node[task])] == 0:  # filled earlier: keep it full
            continue
        state.block(node, False)
        fits = bool(state.targets(task, set())[node])
        state.block(node, True)
        if fits:
            state.move(task, node)
    return int(state.free_gpus[node]) == 0


def _exact_subset(shard: Shard, pool: list[int], free: int) -> list[int]:
    """Tasks of ``pool`` whose GPUs sum exactly to ``free`` (fewest, largest first), or []."""
    reach: dict[int, list[int]] = {0: []}
    for task in pool:
        gpus = int(shard.task_gpus[task])
        for total in sorted(reach, reverse=True):
            if total + gpus <= free and total + gpus not in reach:
                reach[total + gpus] = [*reach[total], task]
        if free in reach:
            return reach[free]
    return []


def _fill_open_nodes(state: _State, moves_left: int | None, group_left: dict[int, int]) -> None:
    """Make fragmented nodes full with tasks from other fragmented nodes.

    After the emptying pass, a node with ``f`` free GPUs is filled exactly with
    movable tasks taken from other fragmented nodes (largest first, direct
    moves only); a source stays fragmented or becomes empty, so each filled
    node is one fragmented node fewer. A fill that cannot reach exactly
    ``f`` is rolled back, and so is one that would empty a node with fewer
    than ``min_node_gpus`` GPUs (D8).
    """
    shard = state.shard
    used = shard.node_gpus - state.free_gpus
    open_nodes = np.flatnonzero((used > 0) & (state.free_gpus > 0) & ~state.blocked)
    for node in open_nodes[np.argsort(state.free_gpus[open_nodes], kind="stable")].tolist():
        free = int(state.free_gpus[node])
        if free <= 0 or int(shard.node_gpus[node] - state.free_gpus[node]) <= 0:
            continue
        state.block(node, True)  # not a source or a chain target while it is filled
        pool = [
            task
            for other in open_nodes.tolist()
            if other != node and state.free_gpus[other] > 0 and state.count[other] > 0
            for task in state.tasks_on[other]
            if not shard.task_locked[task] and 0 < shard.task_gpus[task] <= free
        ]
        pool.sort(key=lambda t: (-int(shard.task_gpus[t]), t))
        mark = len(state.log)
        if not _fill_with(state, node, pool):
            state.rollback(mark)
            _fill_with(state, node, _exact_subset(shard, pool, free))
        new = state.log[mark:]
        spent: dict[int, int] = {}
        for task, _, _ in new:
            group = int(shard.task_group[task])
            if group in group_left:
                spent[group] = spent.get(group, 0) + 1
        over = any(count > group_left[g] for g, count in spent.items())
        emptied_small = any(
            state.count[source] == 0 and shard.node_gpus[source] < shard.min_node_gpus
            for _, source, _ in new
        )
        over = over or emptied_small or (moves_left is not None and len(new) > moves_left)
        if state.free_gpus[node] != 0 or over:
            state.rollback(mark)
        else:
            if moves_left is not None:
                moves_left -= len(new)
            for group, count in spent.items():
                group_left[group] -= count
        state.block(node, False)


__all__ = ["NO_LIMIT", "Shard", "empty_nodes"]
