"""Gang answers: the result type, the independent checker and the objective.

A :class:`GangResult` names the node of every pod (or None when the gang
cannot run), the domains used at every level from the required one down to
the node, and every stopped task. :func:`violations` knows nothing about the
methods: it recomputes capacity, domains, closures and the cost from the
problem and reports every breach of the rules G1-G6 and P1-P3 of
``models/gang.md``; :func:`evaluate` recomputes the objective
(:class:`GangKey`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from gpuopt._compat import old_result_names
from gpuopt.cluster.model import NODE_LEVEL, SCALE
from gpuopt.errors import short
from gpuopt.gang.problem import GangIndex, GangOptions, GangProblem, GangRequest, pod_claims
from gpuopt.result import Result, Sense, Status, relative_gap


class DomainUse(BaseModel):
    """One domain holding pods: its level, its id and how many pods it holds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level: str
    domain: str
    pods: int


class GangResult(Result):
    """Where the gang's pods go and whom they stop: a :class:`gpuopt.Result`.

    ``nodes[i]`` is the node of pod ``i`` (None: the gang cannot run, then no
    victims and ``cost`` 0); ``topology`` the domains holding pods at every
    level from the required one down to ``node``; ``victims`` every stopped
    task, gang closures included (sorted); ``cost`` their lost work,
    ``sum(gpus * (now - last_checkpoint))``; ``domains`` the domains of the
    preferred level used. ``objective`` is ``cost`` when preemption is
    allowed, else ``domains``; ``bound`` a proven lower bound on it.
    """

    model_config = ConfigDict(extra="forbid")
    document: ClassVar[str] = "a gang answer"
    sense: ClassVar[Sense] = "min"
    no_objective: ClassVar[str] = "the gang cannot run, so there is no objective to bound"

    request: GangRequest | None = Field(
        default=None, description="The request answered, so the answer can be checked."
    )
    options: GangOptions | None = Field(default=None, description="The options it was asked with.")
    now: float | None = Field(default=None, description="The clock the costs were taken at.")
    nodes: list[str] | None = None
    topology: list[DomainUse] = Field(default_factory=list)
    victims: list[str] = Field(default_factory=list)
    cost: float = 0.0
    domains: int = 0

    def summary(self) -> str:
        """One line: where the gang goes, what it stops, and the status."""
        if self.nodes is None:
            return f"{self.method}: the gang cannot run ({self.status})"
        top = [use for use in self.topology if use.level == self.topology[0].level]
        if len(top) == 1:
            where = f"in {top[0].level} {top[0].domain}"
        else:  # (none: no level above the nodes; several: the gang spans them)
            where = f"in {len(top)} domains of {top[0].level}" if top else "placed"
        pods, nodes, victims = len(self.nodes), len(set(self.nodes)), len(self.victims)
        return (
            f"{self.method}: {pods} pod{'s' * (pods != 1)} {where} on {nodes} "
            f"node{'s' * (nodes != 1)}, {victims} victim{'s' * (victims != 1)}, "
            f"cost {self.cost:g} ({self.status})"
        )


class GangKey(NamedTuple):
    """The objective of ``models/gang.md``, compared lexicographically (smaller is better).

    ``cost`` in thousandths; ``priority`` is 0 unless the tie-break is
    ``"priority"``.
    """

    cost: int
    domains: int
    priority: int
    victims: int
    fit: int


def pods_per_node(index: GangIndex, nodes: Sequence[str]) -> np.ndarray:
    """The pod count on each node of ``index`` (ids not in it are ignored)."""
    pos = {node_id: i for i, node_id in enumerate(index.node_ids)}
    count = np.zeros(index.num_nodes, dtype=np.int64)
    for node_id in nodes:
        if node_id in pos:
            count[pos[node_id]] += 1
    return count


def key_of(problem: GangProblem, count: np.ndarray, victims: Iterable[int]) -> GangKey:
    """The objective of pod counts per node and victim task positions."""
    index = problem.index
    stopped = sorted(set(victims))
    domains = 0
    if index.preferred is not None:
        used = index.preferred.of_node[count > 0]
        domains = len(set(used.tolist()))
    priority = 0
    if problem.options.tie_break == "priority":
        priority = int(index.task_priority[stopped].sum()) if stopped else 0
    return GangKey(
        cost=int(index.task_cost[stopped].sum()) if stopped else 0,
        domains=domains,
        priority=priority,
        victims=len(stopped),
        fit=int((count * index.node_free[:, 0]).sum()),
    )


def topology_of(problem: GangProblem, count: np.ndarray) -> list[DomainUse]:
    """The domains holding pods at every level from the required one down to ``node``."""
    cluster = problem.cluster
    levels = [*cluster.level_names, NODE_LEVEL]
    required = problem.request.required
    start = 0 if required is None else levels.index(required)
    uses = []
    hosts = [(cluster.nodes[n], int(count[n])) for n in np.flatnonzero(count).tolist()]
    for level in levels[start:]:
        pods: Counter[str] = Counter()
        for node, many in hosts:
            domain = node.domain(level)
            if domain is not None:
                pods[domain] += many
        uses += [DomainUse(level=level, domain=d, pods=pods[d]) for d in sorted(pods)]
    return uses


def make_answer(
    problem: GangProblem,
    method: str,
    status: Status,
    count: np.ndarray | None,
    victims: Iterable[int],
    *,
    bound: float | None,
    seconds: float,
    notes: list[str] | None = None,
) -> GangResult:
    """The answer of pod counts per node (None: cannot run) and victim task positions.

    ``bound`` is in the objective's unit (cost in time units, or domains).
    """
    index = problem.index
    preempting = problem.preempting
    question: dict[str, Any] = {  # what every answer carries, so a check can rebuild it
        "method": method,
        "status": status,
        "request": problem.request,
        "options": problem.options,
        "now": problem.cluster.now,
        "bound": bound,
        "seconds": seconds,
        "notes": notes or [],
    }
    if count is None:
        return GangResult(objective=None, **question)
    stopped = sorted(set(victims))
    key = key_of(problem, count, stopped)
    nodes = [index.node_ids[n] for n in np.flatnonzero(count) for _ in range(int(count[n]))]
    cost = key.cost / SCALE
    objective = cost if preempting else float(key.domains)
    return GangResult(
        nodes=nodes,
        topology=topology_of(problem, count),
        victims=sorted(index.task_ids[t] for t in stopped),
        cost=cost,
        domains=key.domains,
        objective=objective,
        **question,
    )


def parse_answer(data: object, *, source: str | None = None) -> GangResult:
    """A gang answer from decoded JSON (a one-sentence ``ProblemError`` when it is not one)."""
    from gpuopt.errors import validate_object

    return validate_object(GangResult, data, what="a gang answer", source=source)


def gap_of(objective: float, bound: float | None) -> float | None:
    """The gap of a minimum to its proven lower bound: :func:`gpuopt.result.relative_gap`
    with ``sense="min"``, ``(objective - bound) / objective`` (0 when the bound is met).

    >>> gap_of(10.0, 8.0), gap_of(0.0, 0.0), gap_of(3.0, None)
    (0.2, 0.0, None)
    """
    return relative_gap(objective, bound, "min")


def evaluate(problem: GangProblem, answer: GangResult) -> GangKey | None:
    """The objective the answer achieves, recomputed from the problem (None: not placed).

    Raises
    ------
    ValueError
        When the answer names a node or task the problem does not have.
    """
    if answer.nodes is None:
        return None
    index = problem.index
    known = set(index.node_ids)
    for node_id in answer.nodes:
        if node_id not in known:
            raise ValueError(f"nodes: {short(node_id)} is not a node of the cluster")
    task_pos = {task_id: pos for pos, task_id in enumerate(index.task_ids)}
    for task_id in answer.victims:
        if task_id not in task_pos:
            raise ValueError(f"victims: {short(task_id)} is not a running task")
    return key_of(
        problem, pods_per_node(index, answer.nodes), (task_pos[t] for t in answer.victims)
    )


def violations(problem: GangProblem, answer: GangResult) -> list[str]:
    """Every rule of ``models/gang.md`` the answer breaks (an empty list when it is legal)."""
    index = problem.index
    request = problem.request
    broken: list[str] = []
    task_pos = {task_id: pos for pos, task_id in enumerate(index.task_ids)}
    victims = [task_pos[t] for t in answer.victims if t in task_pos]
    for task_id in answer.victims:
        if task_id not in task_pos:
            broken.append(f"P1: victim {short(task_id)} is not a running task")
    for task_id, many in Counter(answer.victims).items():
        if many > 1:
            broken.append(f"P1: victim {short(task_id)} is listed {many} times")
    if answer.nodes is None:
        if answer.victims or answer.cost:
            broken.append("G1: the gang is not placed but the answer stops tasks or costs")
        return broken
    if len(answer.nodes) != request.pods:
        broken.append(f"G1: {len(answer.nodes)} pods placed, the gang has {request.pods}")
    known = set(index.node_ids)
    for node_id in sorted(set(answer.nodes) - known):
        broken.append(f"G2: node {short(node_id)} is not a node of the cluster")
    count = pods_per_node(index, answer.nodes)
    stopped = np.zeros(len(index.task_ids), dtype=bool)
    stopped[victims] = True
    for node in np.flatnonzero(count):
        node_id = index.node_ids[node]
        if not index.admitted[node]:
            broken.append(
                f"G2: node {node_id} does not admit the pods (K1-K3, GPU model, or no domain "
                "at a level the request names)"
            )
        freed = index.task_hold[stopped & (index.task_node == node)].sum(axis=0)
        room = index.node_free[node] + freed
        need = index.pod_need * count[node]
        names = ["GPUs", "milli-CPUs", "memory (thousandths)", *index.resource_names]
        for name, have, wanted in zip(names, room.tolist(), need.tolist(), strict=True):
            if wanted > have:
                broken.append(
                    f"G3: node {node_id} holds {count[node]} pods needing {wanted} {name} "
                    f"but has {have} after the victims stop"
                )
    if request.claims:  # DF1-DF8: each node's pods' claims fit together, victims' freed
        from gpuopt.cluster.devicecheck import DeviceLedger

        ledger = DeviceLedger(problem.cluster)
        for node in np.flatnonzero(count):
            node_id = index.node_ids[node]
            released = [
                index.task_ids[t] for t in np.flatnonzero(stopped & (index.task_node == node))
            ]
            claims = pod_claims(request, int(count[node]))
            broken.extend(ledger.fit(claims, node_id, released)[0])
    hosts = count > 0
    required = index.required.of_node[hosts]
    if len(set(required.tolist())) > 1 or (required < 0).any():
        broken.append(
            f"G4: the pods span {len(set(required.tolist()))} domains of the required level "
            f"{request.required!r}"
        )
    if index.slice is not None:
        per: Counter[int] = Counter()
        for node in np.flatnonzero(count):
            per[int(index.slice.of_node[node])] += int(count[node])
        for domain, many in sorted(per.items()):
            if many % index.slice_size:
                name = index.slice.ids[domain] if domain >= 0 else "none"
                broken.append(
                    f"G5: {request.slice.level if request.slice else ''} domain {name} holds "
                    f"{many} pods, not a multiple of the slice size {index.slice_size}"
                )
    if answer.topology != topology_of(problem, count):
        broken.append("G6: topology is not what the nodes give")
    cost = int(index.task_cost[victims].sum()) if victims else 0
    if abs(answer.cost - cost / SCALE) > 1e-9 * max(1.0, abs(cost / SCALE)):
        broken.append(f"G6: cost {answer.cost:g} but the victims cost {cost / SCALE:g}")
    for t in victims:
        if not index.candidate[t]:
            broken.append(
                f"P1: victim {index.task_ids[t]} may not be stopped (priority not below the "
                "request's, fixed, protected by min_runtime, or preemption not allowed)"
            )
    closed = set()
    for k, members in enumerate(index.gang_members):
        down = int(stopped[members].sum())
        if down > index.gang_allowance[k]:
            if not stopped[members].all():
                broken.append(
                    f"P2: stopping {down} pods of gang {index.gang_ids[k]} leaves it below "
                    "min_member, so all its pods stop and must be listed as victims"
                )
            else:
                closed.add(k)
    for t in victims:
        gang = int(index.task_gang[t])
        if hosts[index.task_node[t]]:
            continue
        if gang in closed and hosts[index.task_node[index.gang_members[gang]]].any():
            continue
        broken.append(
            f"P3: victim {index.task_ids[t]} runs on a node without pods of the gang and is "
            "not stopped by a gang closure"
        )
    return broken


#: The result's old name, one release, with a ``DeprecationWarning``.
__getattr__ = old_result_names(__name__, "GangAnswer")

__all__ = [
    "DomainUse",
    "GangKey",
    "GangResult",
    "evaluate",
    "gap_of",
    "key_of",
    "make_answer",
    "parse_answer",
    "pods_per_node",
    "topology_of",
    "violations",
]
