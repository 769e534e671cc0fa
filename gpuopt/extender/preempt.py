"""The extender's review of kube-scheduler's victims: whom gpuopt agrees to stop (E6).

Per node kube-scheduler proposes, :func:`review` keeps the victims gpuopt
agrees with: never a pod at or above the pod's priority or one the model
never stops (K8, as ``gpuopt preempt``), shrunk by :func:`cheapest_victims`
to the subset of least PodDisruptionBudget violations, then least lost
work (GPUs x time since the last checkpoint), then fewest pods, that still
makes room (judged by :func:`gpuopt.extender.fit.refusal_after`). A subset that
stops more members of a running gang than its allowance stops the whole gang (P13 of
``models/preemption.md``): it is priced at every member's lost work and pods, and is
allowed only when every member may be stopped (E6.3).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuopt.cluster.model import Cluster, Task, gang_allowance, priority_value
from gpuopt.cluster.rules import budget_allowance
from gpuopt.extender.fit import refusal_after
from gpuopt.extender.pod import Ask
from gpuopt.extender.state import State

#: Largest victim set searched exhaustively per node (E6); above it, cheapest first then shrink.
EXACT_VICTIMS = 10

#: Why a proposed node was dropped (E6.4): the label counted on ``/metrics`` -> the words
#: of the log line, kube-scheduler style ("0/3 nodes: 2 budget exhausted, 1 ...").
DROP_REASONS = {
    "unknown-victim": "victim not in the snapshot",
    "no-victim-needed": "room without victims",
    "no-room": "no room even with every victim stopped",
    "higher-priority": "needed victims not of lower priority",
    "budget": "budget exhausted",
    "protected": "needed victims never stopped (K8)",
    "gang": "needed victims stop a gang with a member never stopped (P13)",
    "costlier": "victims lose more work than on another proposed node",
}
#: Why a request got no victims on any node: label -> words of the log line.
EMPTY_REASONS = {
    "preemption-policy-never": "the pod's preemptionPolicy is Never",
    "no-candidates": "kube-scheduler proposed no node",
    "nodes-dropped": "every proposed node dropped",
}

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


def lost_work(task: Task, now: float) -> float:
    """``gpus * (now - last checkpoint)`` (else the start time); infinite with neither."""
    checkpoint = task.checkpoint
    if checkpoint is None:
        return math.inf
    return task.gpus * max(0.0, now - checkpoint)


@dataclass(frozen=True)
class RunningGang:
    """A running gang (C8) as the review prices it (P13): how many members may stop alone
    (``allowance``), the lost work and pods of stopping it whole, and the first member that
    may not be stopped (None when every member may)."""

    allowance: int
    loss: float
    pods: int
    blocker: str | None


def running_gangs(
    cluster: Cluster, ask: Ask, fixed: Mapping[str, str], now: float
) -> dict[str, RunningGang]:
    """Every running gang of ``cluster`` by id, for a pod asking with ``ask``'s priority: a
    member may be stopped when it is below that priority and not fixed (K8)."""
    hp = cluster.hp_priority
    found = {}
    for gang, (tasks, allowance) in gang_allowance(cluster).items():
        blocker = next(
            (
                t.id
                for t in tasks
                if t.id in fixed or priority_value(t.priority, hp) >= ask.priority
            ),
            None,
        )
        found[gang] = RunningGang(
            allowance=allowance,
            loss=sum(lost_work(t, now) for t in tasks),
            pods=len(tasks),
            blocker=blocker,
        )
    return found


def gang_cost(
    chosen: Iterable[Task], gangs: Mapping[str, RunningGang], now: float
) -> tuple[float, int] | None:
    """The lost work and pods of stopping ``chosen`` (P13: a gang stopped beyond its
    allowance counts every member), or None when that would stop a gang a member of which
    may not be stopped."""
    loss, pods = 0.0, 0
    per_gang: Counter[str] = Counter()
    mine: dict[str, float] = {}
    for task in chosen:
        work = lost_work(task, now)
        if task.gang is not None and task.gang in gangs:
            per_gang[task.gang] += 1
            mine[task.gang] = mine.get(task.gang, 0.0) + work
        loss += work
        pods += 1
    for gang, count in per_gang.items():
        facts = gangs[gang]
        if count > facts.allowance:
            if facts.blocker is not None:
                return None
            loss += facts.loss - mine[gang]
            pods += facts.pods - count
    return loss, pods


def cheapest_victims(
    state: State,
    ask: Ask,
    pos: int,
    allowed: Sequence[Task],
    allowance: Allowance,
    now: float,
    gangs: Mapping[str, RunningGang] | None = None,
) -> list[Task] | None:
    """The subset of ``allowed`` of least (budget violations, lost work, pods) after which the
    pod fits on the node at ``pos`` (E6.3), or None when none does. With ``gangs``
    (:func:`running_gangs`), a subset is priced and allowed as :func:`gang_cost` says.

    Exhaustive up to :data:`EXACT_VICTIMS` victims; above, cheapest first until the pod
    fits, then each victim dropped again, most expensive first, while it still fits (a
    victim that would stop a gang that may not stop is passed over).
    """
    gangs = gangs or {}

    def key(chosen: Sequence[Task]) -> tuple[int, float, int] | None:
        cost = gang_cost(chosen, gangs, now)
        if cost is None:
            return None
        return (budget_violations(chosen, allowance), cost[0], cost[1])

    def fits(chosen: Sequence[Task]) -> bool:
        return refusal_after(state, ask, pos, {t.id for t in chosen}) is None

    if len(allowed) <= EXACT_VICTIMS:
        best: list[Task] | None = None
        best_key: tuple[int, float, int] | None = None
        for size in range(len(allowed) + 1):
            for subset in itertools.combinations(allowed, size):
                k = key(subset)
                if k is None or (best_key is not None and k >= best_key):
                    continue
                if fits(subset):
                    best, best_key = list(subset), k
        return best
    chosen: list[Task] = []
    for task in sorted(allowed, key=lambda t: (lost_work(t, now), t.id)):
        if fits(chosen):
            break
        if key([*chosen, task]) is not None:
            chosen.append(task)
    if not fits(chosen):
        return None
    for task in sorted(chosen, key=lambda t: (-lost_work(t, now), t.id)):  # shrink
        trial = [t for t in chosen if t is not task]
        if fits(trial):
            chosen = trial
    return chosen


@dataclass
class Review:
    """The victims gpuopt agrees with, per node kept, and why each other node was dropped."""

    #: node -> (the victims' UIDs, highest priority first; budget violations)
    kept: dict[str, tuple[list[str], int]] = field(default_factory=dict)
    #: node -> (reason label, a key of :data:`DROP_REASONS`; one-sentence detail)
    dropped: dict[str, tuple[str, str]] = field(default_factory=dict)

    def summary(self) -> str:
        """The nodes kept out of those proposed, and the dropped ones counted by reason, most
        frequent first: ``"0/3 nodes: 2 budget exhausted, 1 room without victims"``."""
        total = len(self.kept) + len(self.dropped)
        counts = Counter(reason for reason, _ in self.dropped.values())
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        parts = ", ".join(f"{count} {DROP_REASONS[reason]}" for reason, count in ranked)
        return f"{len(self.kept)}/{total} nodes" + (f": {parts}" if parts else "")


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


def _why_no_room(
    state: State,
    ask: Ask,
    pos: int,
    proposed: list[Task],
    allowed: list[Task],
    gangs: Mapping[str, RunningGang],
) -> tuple[str, str]:
    """Why no subset of the ``allowed`` victims makes room on the node at ``pos``: the pod
    would not fit even with every ``proposed`` victim stopped (``no-room``), else the kind of
    victim gpuopt will not stop that is needed: ``higher-priority``, ``budget`` (a budget
    that allows no disruption, or two budgets: K7) or ``protected`` (pinned, locked, a
    shared GPU, ...: K8). Of several kinds, the first that makes room with the allowed
    victims, else the first present."""
    node = state.names[pos]
    everyone = refusal_after(state, ask, pos, {t.id for t in proposed})
    if everyone is not None:
        return "no-room", f"stopping every proposed victim leaves no room ({everyone})"
    if refusal_after(state, ask, pos, {t.id for t in allowed}) is None:
        # the allowed victims make room, but every subset that does stops a gang beyond its
        # allowance that has a member gpuopt never stops (P13)
        blocked = sorted(
            {
                f"{t.gang} ({facts.blocker})"
                for t in allowed
                if t.gang is not None
                and (facts := gangs.get(t.gang)) is not None
                and facts.blocker is not None
            }
        )
        return "gang", (
            f"room on node {node} stops gangs that have members gpuopt does not stop: "
            + ", ".join(blocked)
        )
    hp = state.cluster.hp_priority
    kinds: dict[str, list[Task]] = {"higher-priority": [], "budget": [], "protected": []}
    chosen = {t.id for t in allowed}
    for task in proposed:
        if task.id in chosen:
            continue
        if priority_value(task.priority, hp) >= ask.priority:
            kinds["higher-priority"].append(task)
        elif state.fixed.get(task.id) in ("budget", "two-budgets"):
            kinds["budget"].append(task)
        else:
            kinds["protected"].append(task)
    present = [kind for kind, tasks in kinds.items() if tasks] or ["protected"]
    blocking = next(
        (
            kind
            for kind in present
            if refusal_after(state, ask, pos, chosen | {t.id for t in kinds[kind]}) is None
        ),
        present[0],
    )
    names = ", ".join(
        f"{t.id} ({state.fixed[t.id]})" if t.id in state.fixed else t.id for t in kinds[blocking]
    )
    return blocking, f"room on node {node} needs victims gpuopt does not stop: {names}"


def review(
    state: State, ask: Ask, proposals: Proposals, positions: Sequence[int], now: float
) -> Review:
    """E6 on every node of ``proposals`` (at ``positions`` in ``state``)."""
    found = Review()
    allowance = budget_allowances(state.cluster)
    gangs = running_gangs(state.cluster, ask, state.fixed, now)
    costs: dict[str, tuple[int, float, int]] = {}
    hp = state.cluster.hp_priority
    for pos, (node, (uids, pods, _)) in zip(positions, proposals.items(), strict=True):
        tasks = _proposed_tasks(state, node, uids, pods)
        if isinstance(tasks, str):
            found.dropped[node] = (
                "unknown-victim",
                f"victim {tasks} is not on node {node} in the snapshot",
            )
            continue
        allowed = [
            t
            for t in tasks
            if t.id not in state.fixed and priority_value(t.priority, hp) < ask.priority
        ]
        choice = cheapest_victims(state, ask, pos, allowed, allowance, now, gangs)
        if choice is None:
            found.dropped[node] = _why_no_room(state, ask, pos, tasks, allowed, gangs)
            continue
        if not choice:  # kube-scheduler refuses a node without victims (E6)
            found.dropped[node] = (
                "no-victim-needed",
                f"the pod fits on node {node} without victims (kube-scheduler refuses such a node)",
            )
            continue
        choice.sort(key=lambda t: (-priority_value(t.priority, hp), t.id))  # most important first
        found.kept[node] = ([t.uid or t.id for t in choice], budget_violations(choice, allowance))
        cost = gang_cost(choice, gangs, now)
        assert cost is not None  # cheapest_victims keeps only sets that may stop
        costs[node] = (found.kept[node][1], *cost)
    _keep_the_cheapest(found, costs)
    return found


def _keep_the_cheapest(found: Review, costs: dict[str, tuple[int, float, int]]) -> None:
    """E6.6: of the nodes kept, only those of least (budget violations, lost work, pods): the
    answer replaces kube-scheduler's candidates, and its own choice among them (latest
    started victims first) does not weigh GPUs or the gangs a victim breaks (P13)."""
    if len(costs) < 2:
        return
    best = min(costs, key=lambda node: (costs[node], node))
    for node, cost in costs.items():
        if cost > costs[best]:
            del found.kept[node]
            found.dropped[node] = (
                "costlier",
                f"victims on node {node} lose {cost[1]:,.0f} GPU-seconds of work in "
                f"{cost[2]} pods ({cost[0]} budget violations), more than on node {best} "
                f"({costs[best][1]:,.0f} in {costs[best][2]}, {costs[best][0]})",
            )


__all__ = [
    "DROP_REASONS",
    "EMPTY_REASONS",
    "EXACT_VICTIMS",
    "Allowance",
    "Review",
    "RunningGang",
    "budget_allowances",
    "budget_violations",
    "cheapest_victims",
    "gang_cost",
    "lost_work",
    "review",
    "running_gangs",
]
