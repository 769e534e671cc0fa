"""The extender's review of kube-scheduler's victims: whom gpuopt agrees to stop (E6).

Per node kube-scheduler proposes, :func:`review` keeps the victims gpuopt
agrees with: never a pod at or above the pod's priority or one the model
never stops (K8, as ``gpuopt preempt``), shrunk by :func:`cheapest_victims`
to the subset of least PodDisruptionBudget violations, then least lost
work (GPUs x time since the last checkpoint), then fewest pods, that still
makes room (judged by :func:`gpuopt.extender.fit.refusal_after`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuopt.cluster.model import Cluster, Task, priority_value
from gpuopt.cluster.rules import budget_allowance
from gpuopt.extender.fit import refusal_after
from gpuopt.extender.pod import Ask
from gpuopt.extender.state import State

#: Largest victim set searched exhaustively per node (E6); above it, cheapest first then shrink.
EXACT_VICTIMS = 10

#: Per budget: the budget, the ids of the tasks it selects, and the disruptions it allows.
Allowance = list[tuple[Any, set[str], int]]
#: What kube-scheduler proposes per node: the victims' UIDs, the full pods (full mode, else
#: None), and its count of budget violations (``wire.PreemptionArgs.victims``).
Proposals = Mapping[str, tuple[list[str], list[dict[str, Any]] | None, int]]


def budget_allowances(cluster: Cluster) -> Allowance:
    """Per PodDisruptionBudget of ``cluster``: the budget, its tasks' ids, its allowance (K7)."""
    return [(budget, set(ids), allowed) for budget, ids, allowed in budget_allowance(cluster)]


def budget_violations(chosen: Iterable[Task], allowance: Allowance) -> int:
    """PodDisruptionBudget violations of stopping ``chosen`` (K7): per budget, the victims it
    covers beyond its allowed disruptions."""
    ids = {task.id for task in chosen}
    return sum(max(0, len(ids & members) - allowed) for _, members, allowed in allowance)


def cheapest_victims(
    state: State,
    ask: Ask,
    pos: int,
    allowed: Sequence[Task],
    allowance: Allowance,
    now: float,
) -> list[Task] | None:
    """The subset of ``allowed`` of least (budget violations, lost work, pods) after which the
    pod fits on the node at ``pos`` (E6.3), or None when none does.

    Exhaustive up to :data:`EXACT_VICTIMS` victims; above, cheapest first until the pod
    fits, then each victim dropped again, most expensive first, while it still fits.
    """

    def loss(task: Task) -> float:
        checkpoint = task.checkpoint
        if checkpoint is None:
            return math.inf
        return task.gpus * max(0.0, now - checkpoint)

    def key(chosen: Sequence[Task]) -> tuple[int, float, int]:
        return (budget_violations(chosen, allowance), sum(loss(t) for t in chosen), len(chosen))

    def fits(chosen: Sequence[Task]) -> bool:
        return refusal_after(state, ask, pos, {t.id for t in chosen}) is None

    if len(allowed) <= EXACT_VICTIMS:
        best: list[Task] | None = None
        best_key: tuple[int, float, int] | None = None
        for size in range(len(allowed) + 1):
            for subset in itertools.combinations(allowed, size):
                k = key(subset)
                if best_key is not None and k >= best_key:
                    continue
                if fits(subset):
                    best, best_key = list(subset), k
        return best
    chosen: list[Task] = []
    for task in sorted(allowed, key=lambda t: (loss(t), t.id)):
        if fits(chosen):
            break
        chosen.append(task)
    if not fits(chosen):
        return None
    for task in sorted(chosen, key=lambda t: (-loss(t), t.id)):  # shrink
        trial = [t for t in chosen if t is not task]
        if fits(trial):
            chosen = trial
    return chosen


@dataclass
class Review:
    """The victims gpuopt agrees with, per node kept, and why each other node was dropped."""

    #: node -> (the victims' UIDs, highest priority first; budget violations)
    kept: dict[str, tuple[list[str], int]] = field(default_factory=dict)
    #: node -> (reason label, one-sentence detail)
    dropped: dict[str, tuple[str, str]] = field(default_factory=dict)


def _proposed_tasks(
    state: State, node: str, uids: list[str], pods: list[dict[str, Any]] | None
) -> list[Task] | str:
    """The snapshot's tasks for the victims proposed on ``node``, or the first victim that is
    not on it (by UID, else a full pod's namespace and name)."""
    tasks: list[Task] = []
    for i, uid in enumerate(uids):
        task = state.by_uid.get(uid) if uid else None
        if task is None and pods is not None:
            meta = pods[i].get("metadata") or {}
            pod_id = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            task = state.by_id.get(pod_id)
        if task is None or task.node != node:
            return uid
        tasks.append(task)
    return tasks


def review(
    state: State, ask: Ask, proposals: Proposals, positions: Sequence[int], now: float
) -> Review:
    """E6 on every node of ``proposals`` (at ``positions`` in ``state``)."""
    found = Review()
    allowance = budget_allowances(state.cluster)
    hp = state.cluster.hp_priority
    for pos, (node, (uids, pods, _)) in zip(positions, proposals.items(), strict=True):
        tasks = _proposed_tasks(state, node, uids, pods)
        if isinstance(tasks, str):
            found.dropped[node] = ("unknown-victim", f"victim {tasks} is not on it")
            continue
        allowed = [
            t
            for t in tasks
            if t.id not in state.fixed and priority_value(t.priority, hp) < ask.priority
        ]
        choice = cheapest_victims(state, ask, pos, allowed, allowance, now)
        if choice is None:
            found.dropped[node] = ("no-victim-set", "no victims it may stop make room")
            continue
        if not choice:  # kube-scheduler refuses a node without victims (E6)
            found.dropped[node] = ("no-victim-needed", "the pod fits without victims")
            continue
        choice.sort(key=lambda t: (-priority_value(t.priority, hp), t.id))  # most important first
        found.kept[node] = ([t.uid or t.id for t in choice], budget_violations(choice, allowance))
    return found


__all__ = [
    "EXACT_VICTIMS",
    "Allowance",
    "Review",
    "budget_allowances",
    "budget_violations",
    "cheapest_victims",
    "review",
]
