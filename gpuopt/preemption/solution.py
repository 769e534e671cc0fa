"""Preemption decisions: the result type, the independent checker and the cost.

A decision names the node the request goes to and the LP tasks stopped to
make room (``victims``). :func:`violations` knows nothing about the methods:
it rebuilds the state from the problem's own fields and reports every breach
of the rules P1-P7 and P13 (a running gang stopped below its ``min_member``
stops whole) of ``models/preemption.md`` and, for a request with DRA
claims, of DF1-DF8 of ``models/cluster.md`` (its claims fit the node's devices
once the victims' claims are freed); :func:`evaluate` recomputes the cost of a
victim set.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from gpuopt._compat import old_result_names
from gpuopt.cluster.devicecheck import DeviceLedger
from gpuopt.cluster.fields import POD_SLOTS
from gpuopt.cluster.items import Node, Task
from gpuopt.cluster.model import SCALE, scaled
from gpuopt.errors import ProblemError, short
from gpuopt.preemption.gangs import close_gangs
from gpuopt.preemption.problem import PreemptionProblem, PreemptionRequest
from gpuopt.preemption.scope import checkpoint_of, held_room, slot_short, slots_of
from gpuopt.result import Result, Sense, Status

Method = Literal["heuristic", "dp", "milp", "cpsat"]
#: old name -> method name: still read (a decision written as ``exact``) and accepted by
#: :func:`gpuopt.solve`; part of the one alias table, :data:`gpuopt.api.ALIASES`.
ALIASES: dict[str, str] = {"exact": "dp"}
Stage = Literal[1, 2]


class PreemptionResult(Result):
    """Where the request goes and whom it stops: a :class:`gpuopt.Result`.

    ``node`` is None when nothing can make room (then ``victims`` is empty
    and ``cost`` 0); ``stage`` is 1 when the request fits without preemption,
    2 when LP tasks are stopped, None when ``node`` is None; ``cost`` is the
    work the victims redo, ``sum(gpus * (now - last_checkpoint))``;
    ``seconds`` is the decision time. ``objective`` is ``cost`` (minimised);
    the exact methods prove it (``status`` optimal, ``bound`` = ``cost``; ``milp``
    and ``cpsat`` stopped by their time limit give ``status`` time_limit and
    their solver's bound), the heuristic does not (``status`` heuristic);
    ``status`` is infeasible when no node can make room.
    """

    model_config = ConfigDict(extra="forbid")
    document: ClassVar[str] = "a decision"
    sense: ClassVar[Sense] = "min"

    method: Method
    node: str | None
    victims: list[str] = Field(default_factory=list)
    cost: float = 0.0
    preempted: bool = False
    stage: Stage | None = None
    request: PreemptionRequest | None = Field(
        default=None, description="The request decided on, so the answer can be checked."
    )
    now: float | None = Field(default=None, description="The clock the costs were taken at.")
    seconds: float = 0.0

    @field_validator("method", mode="before")
    @classmethod
    def _new_name(cls, value: object) -> object:
        """A decision written under an old name (``exact``) reads as the new one (``dp``)."""
        return ALIASES.get(value, value) if isinstance(value, str) else value

    def to_json(self, *, indent: int | None = 1) -> str:
        return self.model_dump_json(indent=indent)

    def summary(self) -> str:
        if self.node is None:
            return f"{self.method}: no node can make room ({self.seconds * 1000:.3f} ms)"
        count = len(self.victims)
        # (victims are below the request's priority: with integer priorities that may be the
        # cluster's HP class too, so they are not called LP here)
        stopped = f"stops {count} task{'' if count == 1 else 's'}" if count else "no preemption"
        return (
            f"{self.method}: node {self.node}, stage {self.stage}, {stopped}, "
            f"cost {self.cost:g} GPU x time units lost ({self.seconds * 1000:.3f} ms)"
        )


def _milli_cost(problem: PreemptionProblem, victims: Iterable[str]) -> int:
    # every task of the cluster: a closed gang's members may run on nodes the question
    # does not see (P13)
    tasks = {t.id: t for t in problem.cluster.tasks}
    now = scaled(problem.now)
    total = 0
    for victim in victims:
        task = tasks.get(victim)
        if task is None:
            raise ProblemError(f"victim {short(victim)} is not a task of the state.")
        total += problem.held_gpus(task) * (now - scaled(checkpoint_of(task)))
    return total


def evaluate(problem: PreemptionProblem, victims: PreemptionResult | Iterable[str]) -> float:
    """The cost of stopping ``victims``: ``sum(gpus * (now - last_checkpoint))`` (P4).

    Times are taken in thousandths, as everywhere in the package, so the
    result is exactly what the methods report.

    Raises
    ------
    ProblemError
        When a victim is not a task of the state.

    Examples
    --------
    >>> lp = {"node": "n1", "priority": "LP"}
    >>> problem = PreemptionProblem(
    ...     now=7200, nodes=[{"id": "n1", "gpus": 8, "cpus": 96}],
    ...     tasks=[{"id": "t1", "gpus": 2, "last_checkpoint": 6000, **lp},
    ...            {"id": "t2", "gpus": 1, "last_checkpoint": 7000, **lp}],
    ...     request={"id": "r", "gpus": 8, "priority": "HP"})
    >>> evaluate(problem, ["t1", "t2"])
    2600.0
    """
    ids = victims.victims if isinstance(victims, PreemptionResult) else victims
    return _milli_cost(problem, ids) / SCALE


def violations(problem: PreemptionProblem, decision: PreemptionResult) -> list[str]:
    """Every breach of P1-P7 and P13 (``models/preemption.md``) by ``decision``.

    Returns an empty list when the decision is legal. Each message starts with
    its rule label, e.g. ``"P3: node n1 lacks GPUs for the request (needs 4,
    has 3 free after the victims)"``.

    Examples
    --------
    >>> problem = PreemptionProblem(
    ...     now=10, nodes=[{"id": "n1", "gpus": 8, "cpus": 8}],
    ...     tasks=[{"id": "t1", "node": "n1", "gpus": 8, "priority": "LP", "last_checkpoint": 4}],
    ...     request={"id": "r", "gpus": 2, "priority": "HP"})
    >>> violations(problem, PreemptionResult(method="dp", node="n1", victims=["t1"], cost=48,
    ...                              preempted=True, stage=2))
    []
    >>> violations(problem, PreemptionResult(method="dp", node="n1", stage=1))
    ['P3: node n1 lacks GPUs for the request (needs 2, has 0 free after the victims)']
    """
    room = _Room.of(problem)
    if decision.node is None:
        return _null_decision(problem, decision, room)
    node = room.nodes.get(decision.node)
    if node is None:
        return [f"P1: node {short(decision.node)} is not in the state"]
    request = problem.request
    found: list[str] = []
    stopped = _victims(problem, decision, room, node.id, found)
    victims = [task for task in stopped if task.node == node.id]
    counts = Counter(decision.victims)

    # P3: the request fits once the victims are gone.
    gpus_after = room.free_gpus[node.id] + sum(problem.gpus_of(task) for task in victims)
    cpus_after = room.free_cpus[node.id] + sum(scaled(task.cpus) for task in victims)
    if gpus_after < request.gpus:
        found.append(
            f"P3: node {node.id} lacks GPUs for the request (needs {request.gpus}, "
            f"has {gpus_after} free after the victims)"
        )
    if cpus_after < room.wanted_cpus:
        found.append(
            f"P3: node {node.id} lacks CPUs for the request (needs {request.cpus:g}, "
            f"has {cpus_after / SCALE:g} free after the victims)"
        )

    # DF1-DF8: the request's claims fit the node's devices once the victims' are freed.
    if request.claims:
        released = [task.id for task in victims]
        found.extend(DeviceLedger(problem.cluster).fit(request.claims, node.id, released)[0])

    # P14: K5 and K11 take the request on the node once the victims are gone (as
    # kube-scheduler's preemption filters a node with the pods it stops removed), and its
    # pod slots (K12) are free then.
    if problem.arrival is not None:
        why = problem.arrival.refusal(node, victims)
        if why is not None:
            found.append(f"P14: {why}")
    freed = sum(map(slots_of, victims))
    lacking = slot_short(problem.cluster, node, _asked_slots(problem), freed, problem.request)
    if lacking:
        found.append(
            f"P14: K12: node {node.id} lacks {lacking} pod slot(s) (pods) after the victims"
        )

    # P4: the cost is the victims' work to redo (P13: every member of a gang they close).
    now = scaled(problem.now)
    cost = sum(problem.held_gpus(t) * (now - scaled(checkpoint_of(t))) for t in stopped) / SCALE
    if len(stopped) == len(counts) and not math.isclose(
        decision.cost, cost, rel_tol=1e-9, abs_tol=1e-9
    ):
        found.append(f"P4: cost is {decision.cost:g} but the victims' cost is {cost:g}")

    # P5: the flags agree with the victims.
    if decision.preempted != bool(decision.victims):
        found.append(f"P5: preempted is {decision.preempted} with {len(decision.victims)} victims")
    expected_stage = 2 if decision.victims else 1
    if decision.stage != expected_stage:
        found.append(
            f"P5: stage is {decision.stage} but {len(decision.victims)} victims means "
            f"stage {expected_stage}"
        )

    # P6: nobody is preempted when some node has room already.
    room_now = _room_now(problem, room) if decision.victims else None
    if room_now is not None:
        found.append(f"P6: victims are stopped but node {room_now} has room without preemption")
    return found


def _room_now(problem: PreemptionProblem, room: _Room) -> str | None:
    """The first node with room without preemption: the GPUs and CPUs free, the request's
    claims fitting as the node stands (DF1-DF8; P12: not every node with the GPUs has the
    devices) and K5 and K11 taking it there (P14); None when there is none."""
    claims = problem.request.claims
    ledger = DeviceLedger(problem.cluster) if claims else None
    for node in room.room_now():
        if ledger is not None and ledger.fit(claims, node)[0]:
            continue
        if slot_short(problem.cluster, room.nodes[node], _asked_slots(problem), 0, problem.request):
            continue
        if problem.arrival is not None and problem.arrival.refusal(room.nodes[node]):
            continue
        return node
    return None


@dataclass(frozen=True)
class _Room:
    """What the checker rebuilds from the problem's own fields: per node id, the free GPUs
    and milli-CPUs and those its LP tasks may free, and the request's milli-CPUs.

    ``lp_gpus`` and ``lp_cpus`` count the LP tasks outside gangs and the members of gangs
    whose every member may stop (P13: stopping them all closes the gang); ``limited`` holds,
    per node, the (GPUs, milli-CPUs) of the LP members of each gang that has a member that
    may not stop, with how many of them may stop (its allowance)."""

    nodes: dict[str, Node]
    tasks: dict[str, Task]
    free_gpus: dict[str, int]
    free_cpus: dict[str, int]
    lp_gpus: dict[str, int]
    lp_cpus: dict[str, int]
    limited: dict[str, list[tuple[list[tuple[int, int]], int]]]
    wanted_gpus: int
    wanted_cpus: int

    @classmethod
    def of(cls, problem: PreemptionProblem) -> _Room:
        nodes = {n.id: n for n in problem.nodes}
        free_gpus = {n.id: n.gpus for n in problem.nodes}
        free_cpus = {n.id: scaled(n.cpus) for n in problem.nodes}
        lp_gpus = dict.fromkeys(nodes, 0)
        lp_cpus = dict.fromkeys(nodes, 0)
        gangs = _Gangs.of(problem)
        everywhere = {task.id: task for task in problem.cluster.tasks}
        closable = {
            gang: all(problem.stoppable(everywhere[m]) for m in members)
            for gang, members in gangs.members.items()
        }
        for node_id, (gpus, cpus) in held_room(problem.cluster, problem.request).items():
            if node_id in nodes:  # K10: room the nominated waiting pods hold stays theirs
                free_gpus[node_id] -= gpus
                free_cpus[node_id] -= cpus
        held_back: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for held in problem.tasks:
            free_gpus[held.node] -= problem.gpus_of(held)
            free_cpus[held.node] -= scaled(held.cpus)
            if not problem.stoppable(held):
                continue
            if held.gang is not None and not closable[held.gang]:
                pair = (problem.gpus_of(held), scaled(held.cpus))
                held_back.setdefault((held.node, held.gang), []).append(pair)
                continue
            lp_gpus[held.node] += problem.gpus_of(held)
            lp_cpus[held.node] += scaled(held.cpus)
        limited: dict[str, list[tuple[list[tuple[int, int]], int]]] = {}
        for (node_id, gang), amounts in held_back.items():
            limited.setdefault(node_id, []).append((amounts, gangs.allowance[gang]))
        return cls(
            nodes=nodes,
            tasks={t.id: t for t in problem.tasks},
            free_gpus=free_gpus,
            free_cpus=free_cpus,
            lp_gpus=lp_gpus,
            lp_cpus=lp_cpus,
            limited=limited,
            wanted_gpus=problem.request.gpus,
            wanted_cpus=scaled(problem.request.cpus),
        )

    def room_now(self) -> list[str]:
        """The nodes that have room without preemption."""
        return [
            n
            for n in self.nodes
            if self.free_gpus[n] >= self.wanted_gpus and self.free_cpus[n] >= self.wanted_cpus
        ]

    def room_by_preemption(self) -> list[str]:
        """The nodes that have room once LP tasks are stopped: all of them, but at most its
        allowance of the members of a gang that cannot stop whole (P13)."""
        found = []
        for n in self.nodes:
            points = {(self.free_gpus[n] + self.lp_gpus[n], self.free_cpus[n] + self.lp_cpus[n])}
            for amounts, allowance in self.limited.get(n, []):
                size = min(allowance, len(amounts))
                points = {
                    (gpus + sum(a[0] for a in chosen), cpus + sum(a[1] for a in chosen))
                    for gpus, cpus in points
                    for chosen in itertools.combinations(amounts, size)
                }
            if any(g >= self.wanted_gpus and c >= self.wanted_cpus for g, c in points):
                found.append(n)
        return found


def _null_decision(
    problem: PreemptionProblem, decision: PreemptionResult, room: _Room
) -> list[str]:
    """P1, P5 and P7 for a decision that chooses no node."""
    found: list[str] = []
    if decision.victims or decision.cost != 0 or decision.preempted:
        found.append("P1: no node is chosen but victims, a cost or preempted are reported")
    if decision.stage is not None:
        found.append(f"P5: no node is chosen but stage is {decision.stage}, not null")
    # P7: null only when nothing can make room.
    room_now = _room_now(problem, room)
    if room_now is not None:
        found.append(f"P7: no node is chosen but node {room_now} has room without preemption")
    elif problem.request.priority == "HP":
        by_preemption = [node for node in room.room_by_preemption() if _lifted(problem, node)]
        if by_preemption:
            found.append(
                f"P7: no node is chosen but node {by_preemption[0]} has room once its "
                "LP tasks are stopped"
            )
    return found


def _lifted(problem: PreemptionProblem, node_id: str) -> bool:
    """P14 for P7: whether K5, K11 and K12 take the request on ``node_id`` once every task
    it may stop there (alone or with its gang, P13) is gone."""
    node, on = problem.on_node[node_id]
    gone = [
        task
        for task in on
        if problem.stoppable(task)
        and close_gangs(problem.cluster, {task.id}, problem.stoppable) is not None
    ]
    freed = sum(map(slots_of, gone))
    if slot_short(problem.cluster, node, _asked_slots(problem), freed, problem.request):
        return False
    return problem.arrival is None or problem.arrival.refusal(node, gone) is None


def _asked_slots(problem: PreemptionProblem) -> int:
    """K12: the pod slots the request asks (one where the cluster keeps them, a shape's
    too: :func:`~gpuopt.cluster.request.as_request`)."""
    return problem.request.resources.get(POD_SLOTS, 0)


def _victims(
    problem: PreemptionProblem,
    decision: PreemptionResult,
    room: _Room,
    node_id: str,
    found: list[str],
) -> list[Task]:
    """P2 and P13: the victims that are distinct LP tasks on node ``node_id`` or members of
    a gang the victims close (none for an LP request); every breach is added to ``found``."""
    everywhere = {task.id: task for task in problem.cluster.tasks}
    gangs = _Gangs.of(problem)
    listed = set(decision.victims)
    closed = {
        gang
        for gang, members in gangs.members.items()
        if len(listed & set(members)) > gangs.allowance[gang]
    }
    victims: list[Task] = []
    for victim, count in Counter(decision.victims).items():
        task = everywhere.get(victim)
        if count > 1:
            found.append(f"P2: victim {short(victim)} is listed {count} times")
        if task is None:
            found.append(f"P2: victim {short(victim)} is not a task of the state")
            continue
        if task.node != node_id and not (
            task.gang in closed
            and any(everywhere[m].node == node_id for m in gangs.members[task.gang])
        ):
            found.append(f"P2: victim {short(victim)} runs on {task.node}, not on {node_id}")
            continue
        if not problem.stoppable(task):
            found.append(
                f"P2: victim {short(victim)} is an HP task"
                if problem.outranks(task)
                else f"P2: victim {short(victim)} is fixed ({problem.facts.fixed[task.id]}), "
                "never stopped"
            )
            continue
        victims.append(task)
    # P13: a gang stopped beyond its allowance stops whole
    for gang in sorted(closed):
        members = gangs.members[gang]
        left = [m for m in members if m not in listed]
        if left:
            stops = len(members) - len(left)
            found.append(
                f"P13: victims stop {stops} of the {len(members)} pods of gang {gang!r}, more "
                f"than the {gangs.allowance[gang]} it may lose (min_member "
                f"{len(members) - gangs.allowance[gang]}), so {', '.join(left)} stop too but "
                "are not victims"
            )
    if problem.request.priority == "LP" and decision.victims:
        found.append("P2: an LP request never preempts, but victims are listed")
    return victims


@dataclass(frozen=True)
class _Gangs:
    """The running gangs as the checker reads them from the cluster (C8): per gang, its
    members' ids in cluster order and how many of them may stop without stopping it."""

    members: dict[str, list[str]]
    allowance: dict[str, int]

    @classmethod
    def of(cls, problem: PreemptionProblem) -> _Gangs:
        cluster = problem.cluster
        members: dict[str, list[str]] = {}
        for task in cluster.tasks:
            if task.gang is not None:
                members.setdefault(task.gang, []).append(task.id)
        least = {gang.id: gang.min_member for gang in cluster.gangs}
        allowance = {
            gang: max(0, len(ids) - least.get(gang, len(ids))) for gang, ids in members.items()
        }
        return cls(members=members, allowance=allowance)


def make_decision(
    problem: PreemptionProblem,
    method: Method,
    node: int | None,
    victims: Iterable[int] = (),
    *,
    stage: Stage | None,
    seconds: float,
) -> PreemptionResult:
    """Build a :class:`PreemptionResult` from a node position and victim positions of the
    index view."""
    index = problem.index
    if node is None:
        return PreemptionResult(
            method=method,
            status=Status.INFEASIBLE,
            node=None,
            objective=0.0,
            seconds=seconds,
            request=problem.request,
            now=problem.now,
        )
    positions = [int(victim) for victim in victims]
    cost = int(index.task_cost[positions].sum()) if positions else 0
    ids = [index.task_ids[victim] for victim in positions]
    return _decided(problem, method, node, ids, cost, stage=stage, seconds=seconds)


def item_decision(
    problem: PreemptionProblem,
    method: Method,
    node: int,
    items: Iterable[int],
    *,
    seconds: float,
) -> PreemptionResult:
    """A stage-2 :class:`PreemptionResult` from a node position and the positions of the
    items chosen there (P13: :attr:`~gpuopt.preemption.index.PreemptionIndex.items`; a
    gang's closure stops every member, on every node, and costs all their work)."""
    found = problem.index.items
    chosen = [int(item) for item in items]
    cost = int(found.cost[chosen].sum()) if chosen else 0
    victims = found.victims(chosen)
    stage: Stage = 2 if victims else 1
    return _decided(problem, method, node, victims, cost, stage=stage, seconds=seconds)


def _decided(
    problem: PreemptionProblem,
    method: Method,
    node: int,
    victims: list[str],
    cost: int,
    *,
    stage: Stage | None,
    seconds: float,
) -> PreemptionResult:
    """The result for node position ``node`` stopping ``victims`` at ``cost`` thousandths
    (optimal and bounded for ``dp``; milp and cpsat set their solver's proof)."""
    proven = method == "dp"
    return PreemptionResult(
        method=method,
        status=Status.OPTIMAL if proven else Status.HEURISTIC,
        objective=cost / SCALE,
        bound=cost / SCALE if proven else None,
        node=problem.index.node_ids[node],
        victims=victims,
        cost=cost / SCALE,
        preempted=bool(victims),
        stage=stage,
        seconds=seconds,
        request=problem.request,
        now=problem.now,
    )


parse_decision = PreemptionResult.parse
load_decision = PreemptionResult.load


#: The result's old name, one release, with a ``DeprecationWarning``.
__getattr__ = old_result_names(__name__, "Decision")

__all__ = [
    "Method",
    "PreemptionResult",
    "Stage",
    "evaluate",
    "item_decision",
    "load_decision",
    "make_decision",
    "parse_decision",
    "violations",
]
