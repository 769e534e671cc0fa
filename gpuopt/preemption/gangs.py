"""Rule P13 (``models/preemption.md``): what stopping a member of a running gang stops.

A running gang (rule C8 of ``models/cluster.md``) runs while at least ``min_member`` of
its pods do; stopping more than its **allowance** ``a_k = |M_k| - min_member`` members
stops every member (P2 of ``models/gang.md``), on every node, and all their work is lost.
The methods therefore choose among **items** rather than tasks (:class:`Items`): on each
node of the view,

- an LP task outside any gang is an item of its own;
- an LP member of gang ``k`` is an item of its own when the gang allows stopping members
  (``a_k >= 1``); when ``a_k`` is smaller than the gang's LP members on the node, those
  items form a **group** of which at most ``a_k`` may be chosen;
- a **closure** of gang ``k`` on the node, when every member of the gang (on any node) may
  be stopped and ``a_k`` is smaller than its members on the node: one item holding the
  GPUs and CPUs of the members on the node, costing the whole gang's lost work, stopping
  every member; it belongs to the node's group of ``k`` when there is one, and is then
  exclusive with the members chosen alone;
- a member of a gang that cannot be closed, beyond its allowance, is no item: it never
  stops.

A closure where the allowance covers the gang's members on the node is left out: stopping
those members alone frees the same there, costs no more and stops fewer pods. Everything
else of the methods (the prefix sums, the bounds, the covers, the model's columns) reads
items where it read tasks; with no gang, the items are the LP tasks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from gpuopt.cluster.items import Task
from gpuopt.cluster.model import Cluster, gang_allowance
from gpuopt.errors import ProblemError


@dataclass(frozen=True)
class Group:
    """A gang's items on one node of which at most ``allowance`` members may be chosen alone;
    ``closure`` is the gang's closure item there (exclusive with them), or -1."""

    gang: str
    members: tuple[int, ...]
    allowance: int
    closure: int


@dataclass(frozen=True, eq=False)
class Items:
    """What the methods may stop, by item (P13), sorted by node, then the view position of
    the item's first task on the node, a closure after the member it starts with.

    Per item: ``node`` (view position), ``gpus`` and ``cpus`` it frees on that node,
    ``cost`` (the work lost, thousandths), ``count`` (pods it stops), ``task`` (its view
    task position, -1 for a closure), ``group`` (position in ``groups``, -1 for none);
    ``task_ids`` are the view's task ids and ``closure_of`` holds, per closure item, its
    gang and the ids of all its members (cluster order): :meth:`stops` and :meth:`label`
    read them.
    """

    node: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    cost: np.ndarray
    count: np.ndarray
    task: np.ndarray
    group: np.ndarray
    task_ids: list[str]
    closure_of: dict[int, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    groups: list[Group] = field(default_factory=list)

    @property
    def size(self) -> int:
        return int(self.node.size)

    def stops(self, item: int) -> tuple[str, ...]:
        """The ids of the tasks ``item`` stops (a closure: every member of its gang)."""
        closure = self.closure_of.get(item)
        return closure[1] if closure is not None else (self.task_ids[int(self.task[item])],)

    def label(self, item: int) -> str:
        """A task item's id, ``gang:<id>`` for a closure."""
        closure = self.closure_of.get(item)
        return f"gang:{closure[0]}" if closure is not None else self.task_ids[int(self.task[item])]

    @cached_property
    def closures(self) -> bool:
        """Whether some item is a gang's closure."""
        return bool(np.any(self.task < 0))

    @cached_property
    def grouped_nodes(self) -> frozenset[int]:
        """The nodes holding a group (their covers are searched item by item)."""
        return frozenset(int(self.node[group.members[0]]) for group in self.groups)

    def freeable(self, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
        """Per node, the GPUs and CPUs its items free at most: every item, but a group's
        members only where the group has no closure (the closure frees them all)."""
        keep = np.ones(self.size, dtype=bool)
        for group in self.groups:
            if group.closure >= 0:
                keep[list(group.members)] = False
        gpus = np.bincount(self.node[keep], weights=self.gpus[keep], minlength=num_nodes)
        cpus = np.bincount(self.node[keep], weights=self.cpus[keep], minlength=num_nodes)
        return gpus.astype(np.int64), cpus.astype(np.int64)

    def unsure_nodes(self) -> frozenset[int]:
        """The nodes with a group that has no closure: :meth:`freeable` counts all its
        members there, more than at most ``allowance`` of them may free."""
        return frozenset(int(self.node[g.members[0]]) for g in self.groups if g.closure < 0)

    def victims(self, chosen: list[int]) -> list[str]:
        """The ids stopped by the items ``chosen``, in their order."""
        return [task_id for item in chosen for task_id in self.stops(item)]


def task_items(
    task_node: np.ndarray,
    task_gpus: np.ndarray,
    task_cpus: np.ndarray,
    task_cost: np.ndarray,
    task_hp: np.ndarray,
    task_ids: list[str],
) -> Items:
    """The items of a view without gangs: its LP tasks, in view order."""
    lp = np.flatnonzero(~task_hp)
    return Items(
        node=task_node[lp],
        gpus=task_gpus[lp],
        cpus=task_cpus[lp],
        cost=task_cost[lp],
        count=np.ones(lp.size, dtype=np.int64),
        task=lp.astype(np.int64),
        group=np.full(lp.size, -1, dtype=np.int64),
        task_ids=task_ids,
    )


@dataclass(frozen=True)
class GangFacts:
    """The running gangs of a cluster as one question sees them: per gang, its members'
    cluster positions (cluster order), its allowance, whether every member may be stopped,
    and the work all of them lose (thousandths; None when a member's is unknown)."""

    members: dict[str, list[int]]
    allowance: dict[str, int]
    closable: dict[str, bool]
    cost: dict[str, int | None]


def gang_facts(
    cluster: Cluster,
    stoppable: np.ndarray,
    gpus: np.ndarray,
    checkpoint: np.ndarray,
    no_checkpoint: np.ndarray,
    now: int,
) -> GangFacts:
    """The :class:`GangFacts` of ``cluster``; ``stoppable``, ``gpus``, ``checkpoint`` and
    ``no_checkpoint`` per cluster task (GPUs as the question counts them, C7)."""
    position = cluster.index.task_pos
    members: dict[str, list[int]] = {}
    allowance, closable, cost = {}, {}, {}
    for gang, (tasks, allowed) in gang_allowance(cluster).items():
        where = members[gang] = [position[task.id] for task in tasks]
        allowance[gang] = allowed
        closable[gang] = bool(stoppable[where].all())
        known = not bool(no_checkpoint[where].any())
        cost[gang] = int((gpus[where] * (now - checkpoint[where])).sum()) if known else None
    return GangFacts(members=members, allowance=allowance, closable=closable, cost=cost)


def gang_items(
    cluster: Cluster,
    facts: GangFacts,
    view_tasks: np.ndarray,
    task_node: np.ndarray,
    task_gpus: np.ndarray,
    task_cpus: np.ndarray,
    task_cost: np.ndarray,
    task_hp: np.ndarray,
    task_ids: list[str],
) -> Items:
    """The items (P13) of a view whose LP tasks include gang members; ``view_tasks`` is each
    view task's cluster position.

    Raises
    ------
    ProblemError
        When a gang could be closed but a member has neither a checkpoint nor a start
        time (its loss, and so the closure's, is unknown).
    """
    rows: list[tuple[int, int, int, int, int, int, int, int, tuple[str, ...], str | None, str]] = []
    # (node, first, closure?, gpus, cpus, cost, count, task, stops, gang of its group, gang)
    by_gang: dict[tuple[str, int], list[int]] = {}
    for pos in np.flatnonzero(~task_hp).tolist():
        gang = cluster.tasks[int(view_tasks[pos])].gang
        if gang is None:
            rows.append(
                (
                    int(task_node[pos]), pos, 0, int(task_gpus[pos]), int(task_cpus[pos]),
                    int(task_cost[pos]), 1, pos, (task_ids[pos],), None, "",
                )
            )  # fmt: skip
        else:
            by_gang.setdefault((gang, int(task_node[pos])), []).append(pos)
    for (gang, node), mine in by_gang.items():
        allowance, closable = facts.allowance[gang], facts.closable[gang]
        binding = allowance < len(mine)
        if allowance >= 1:
            for pos in mine:
                rows.append(
                    (
                        node, pos, 0, int(task_gpus[pos]), int(task_cpus[pos]),
                        int(task_cost[pos]), 1, pos, (task_ids[pos],), gang if binding else None,
                        gang,
                    )
                )  # fmt: skip
        if binding and closable:
            cost = facts.cost[gang]
            if cost is None:
                where = facts.members[gang]
                lost = next(at for at in where if cluster.tasks[at].checkpoint is None)
                raise ProblemError(
                    f"task {cluster.tasks[lost].id!r} (gang {gang!r}): has neither "
                    "last_checkpoint nor start_time, so the work its gang would lose is unknown."
                )
            stops = tuple(cluster.tasks[at].id for at in facts.members[gang])
            rows.append(
                (
                    node, min(mine), 1, int(task_gpus[mine].sum()), int(task_cpus[mine].sum()),
                    cost, len(stops), -1, stops, gang if allowance >= 1 else None, gang,
                )
            )  # fmt: skip
    rows.sort(key=lambda row: (row[0], row[1], row[2]))
    groups: dict[tuple[str, int], list[int]] = {}
    closure_of: dict[tuple[str, int], int] = {}
    for item, row in enumerate(rows):
        if row[9] is not None:
            key = (row[9], row[0])
            if row[2]:
                closure_of[key] = item
            else:
                groups.setdefault(key, []).append(item)
    group_list = [
        Group(gang, tuple(members), facts.allowance[gang], closure_of.get((gang, node), -1))
        for (gang, node), members in groups.items()
    ]
    group = np.full(len(rows), -1, dtype=np.int64)
    for number, found in enumerate(group_list):
        group[list(found.members)] = number
        if found.closure >= 0:
            group[found.closure] = number

    def column(k: int) -> np.ndarray:
        return np.array([row[k] for row in rows], dtype=np.int64).reshape(len(rows))

    return Items(
        node=column(0),
        gpus=column(3),
        cpus=column(4),
        cost=column(5),
        count=column(6),
        task=column(7),
        group=group,
        task_ids=task_ids,
        closure_of={item: (row[10], row[8]) for item, row in enumerate(rows) if row[7] < 0},
        groups=group_list,
    )


def group_cover(
    items: Items,
    order: list[int],
    need_gpus: int,
    need_cpus: int,
) -> list[int] | None:
    """The heuristic's cover (P9) of a node holding groups: ``order`` (the node's helpful
    items in P9's order) taken one by one while a need is left, skipping a member whose
    group has its allowance used or is closed; a closure takes the place of the members of
    its gang taken before it. When that leaves a need, any cover that keeps the groups'
    rules (:func:`feasible_cover`), else None."""
    chosen: list[int] = []
    used: dict[int, int] = {}
    closed: set[int] = set()
    gpus = cpus = 0
    for item in order:
        if gpus >= need_gpus and cpus >= need_cpus:
            break
        number = int(items.group[item])
        if number >= 0:
            group = items.groups[number]
            if number in closed:
                continue
            if item == group.closure:
                gone = [k for k in chosen if int(items.group[k]) == number]
                chosen = [k for k in chosen if int(items.group[k]) != number]
                gpus -= int(items.gpus[gone].sum()) if gone else 0
                cpus -= int(items.cpus[gone].sum()) if gone else 0
                closed.add(number)
            elif used.get(number, 0) >= group.allowance:
                continue
            else:
                used[number] = used.get(number, 0) + 1
        chosen.append(item)
        gpus += int(items.gpus[item])
        cpus += int(items.cpus[item])
    if gpus >= need_gpus and cpus >= need_cpus:
        return chosen
    return feasible_cover(items, order, need_gpus, need_cpus)


def feasible_cover(
    items: Items, candidates: list[int], need_gpus: int, need_cpus: int
) -> list[int] | None:
    """Some choice among ``candidates`` (one node's items) that covers both needs and keeps
    the groups' rules, or None when none does: the free items all, and per group the
    closure or one of the largest sets of at most ``allowance`` members, searched over the
    Pareto front of (GPUs, CPUs) freed."""
    free = [k for k in candidates if int(items.group[k]) < 0]
    front: dict[tuple[int, int], list[int]] = {
        (
            int(items.gpus[free].sum()) if free else 0,
            int(items.cpus[free].sum()) if free else 0,
        ): free
    }
    numbers = sorted({int(items.group[k]) for k in candidates if int(items.group[k]) >= 0})
    for number in numbers:
        group = items.groups[number]
        mine = [k for k in group.members if k in candidates]
        options = [list(c) for c in itertools.combinations(mine, min(group.allowance, len(mine)))]
        if group.closure >= 0 and group.closure in candidates:
            options.append([group.closure])
        merged: dict[tuple[int, int], list[int]] = {}
        for (gpus, cpus), taken in front.items():
            for option in options:
                point = (
                    gpus + int(items.gpus[option].sum()),
                    cpus + int(items.cpus[option].sum()),
                )
                merged.setdefault(point, taken + option)
        front = {
            point: taken
            for point, taken in merged.items()
            if not any(o != point and o[0] >= point[0] and o[1] >= point[1] for o in merged)
        }
    for (gpus, cpus), taken in front.items():
        if gpus >= need_gpus and cpus >= need_cpus:
            return taken
    return None


def close_gangs(
    cluster: Cluster, chosen: set[str], stoppable: Callable[[Task], bool]
) -> set[str] | None:
    """``chosen`` (task ids) with every member of each gang they stop beyond its allowance
    (P13), or None when such a gang has a member that may not stop."""
    closed = set(chosen)
    for tasks, allowed in gang_allowance(cluster).values():
        if sum(task.id in chosen for task in tasks) > allowed:
            if not all(stoppable(task) for task in tasks):
                return None
            closed.update(task.id for task in tasks)
    return closed


__all__ = [
    "GangFacts",
    "Group",
    "Items",
    "close_gangs",
    "feasible_cover",
    "gang_facts",
    "gang_items",
    "group_cover",
    "task_items",
]
