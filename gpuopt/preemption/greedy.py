"""The heuristic: best-fit placement, else the cheapest cheapest-first prefix of LP tasks.

Stage 1 (P8, shared with the exact method, which it already solves exactly:
it is a lexicographic minimum) is a handful of array operations over the
nodes. Stage 2 (P9) reads the LP tasks sorted by node and cost once
(:meth:`PreemptionIndex.lp_by_cost`, cached) and finds, for every node at
once, the shortest prefix of its helpful LP tasks (those holding what the
node lacks) that covers the GPU and the CPU deficit, with two binary
searches in the prefix sums; the node with the cheapest prefix wins.

How each rule holds: P1 the node is an index position; P2 victims are taken
from the node's own LP segment, and LP requests stop after stage 1; P3 the
prefix covers both deficits by construction; P4/P5 ``make_decision``
computes the cost and the flags from the victims; P6 stage 2 runs only when
stage 1 found nothing; P7 a node qualifies exactly when all its LP tasks
cover the deficits, so ``node`` is null only when none does. P13 the
prefixes run over items (:mod:`gpuopt.preemption.gangs`): a gang stopped
beyond its allowance is one item stopping every member at the whole gang's
cost, and a node holding a gang's group is walked item by item under its
rule.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from gpuopt.preemption.devices import cheapest_first, widen
from gpuopt.preemption.gangs import feasible_cover, group_cover
from gpuopt.preemption.index import Holding, PreemptionIndex
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import Method, PreemptionResult, item_decision, make_decision


def lex_first(keys: Sequence[np.ndarray]) -> int:
    """Position of the lexicographically smallest row of ``keys`` (first on ties).

    Keys are filtered one after the other, so the cost is one pass per key
    over the entries still tied.

    >>> lex_first([np.array([2, 1, 1]), np.array([0, 5, 3])])
    2
    """
    candidates = np.arange(len(keys[0]))
    for key in keys:
        values = key[candidates]
        candidates = candidates[values == values.min()]
        if len(candidates) == 1:
            break
    return int(candidates[0])


def stage_one(index: PreemptionIndex) -> int | None:
    """The node the request goes to without preemption (P8), or None when none has room.

    Best fit (fewest free GPUs after placement, then fewest free CPUs), then
    the request's own node class, then idle nodes, then the other class, then
    for an LP request the least-preempted node and for an HP request the
    most-preempted one, then node order.
    """
    free_gpus, free_cpus = index.node_free_gpus, index.node_free_cpus
    nodes = np.flatnonzero((free_gpus >= index.request_gpus) & (free_cpus >= index.request_cpus))
    if len(nodes) == 0:
        return None
    preemptions = index.node_preemptions[nodes]
    keys = (
        free_gpus[nodes],
        free_cpus[nodes],
        index.node_class_rank[nodes],
        -preemptions if index.request_hp else preemptions,
    )
    return int(nodes[lex_first(keys)])


@dataclass(frozen=True)
class Deficits:
    """The nodes that can make room by preemption and what each lacks (P7).

    ``nodes`` are the positions of the nodes whose free capacity plus what
    their items free at most hold the request (P13: a gang that cannot be
    closed frees at most its allowance); ``gpus`` and ``cpus`` are what they
    lack without preemption (0 when nothing is lacking in that resource).
    """

    nodes: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray

    @classmethod
    def of(cls, index: PreemptionIndex) -> Deficits:
        need_gpus = index.request_gpus - index.node_free_gpus
        need_cpus = index.request_cpus - index.node_free_cpus
        can = (index.node_lp_gpus >= need_gpus) & (index.node_lp_cpus >= need_cpus)
        items = index.items
        for node in items.unsure_nodes():
            if can[node]:  # the sums counted every member of a group: search its choices
                mine = np.flatnonzero(items.node == node).tolist()
                wanted = max(0, int(need_gpus[node])), max(0, int(need_cpus[node]))
                can[node] = feasible_cover(items, mine, *wanted) is not None
        nodes = np.flatnonzero(can)
        return cls(
            nodes=nodes,
            gpus=np.maximum(need_gpus[nodes], 0),
            cpus=np.maximum(need_cpus[nodes], 0),
        )


def holding(need_gpus: int, need_cpus: int) -> Holding:
    """Which LP tasks can help a node that lacks ``need_gpus`` GPUs and ``need_cpus`` CPUs.

    >>> holding(2, 0), holding(0, 500), holding(2, 500)
    ('gpus', 'cpus', 'any')
    """
    if need_cpus <= 0 < need_gpus:
        return "gpus"
    if need_gpus <= 0 < need_cpus:
        return "cpus"
    return "any"


def _groups(deficits: Deficits) -> list[tuple[Holding, np.ndarray]]:
    """The entries of ``deficits`` split by which LP tasks can help them."""
    lacks_gpus, lacks_cpus = deficits.gpus > 0, deficits.cpus > 0
    groups: list[tuple[Holding, np.ndarray]] = [
        ("gpus", np.flatnonzero(lacks_gpus & ~lacks_cpus)),
        ("cpus", np.flatnonzero(lacks_cpus & ~lacks_gpus)),
        ("any", np.flatnonzero(lacks_gpus == lacks_cpus)),
    ]
    return [(kind, entries) for kind, entries in groups if len(entries)]


@dataclass(frozen=True)
class Prefixes:
    """Per node of a :class:`Deficits`: the heuristic's cover (P9), its length in items, its
    cost (thousandths), the pods it stops, and the GPUs and CPUs it frees; ``chosen`` holds
    the items of the entries of nodes with a gang's group (P13), whose cover is no prefix."""

    length: np.ndarray
    cost: np.ndarray
    count: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    chosen: dict[int, list[int]]


def cheapest_first_prefixes(index: PreemptionIndex, deficits: Deficits) -> Prefixes:
    """For each node of ``deficits``: the heuristic's cover of its deficits (P9).

    The cover is the shortest run of the node's helpful items in
    :meth:`PreemptionIndex.lp_by_cost` order whose GPUs and CPUs cover both
    deficits; all nodes are handled at once with binary searches in the
    cluster-wide prefix sums (once per kind of deficit). A node holding a
    gang's group (P13) is walked item by item (:func:`group_cover`). Costs
    are in thousandths.
    """
    size = len(deficits.nodes)
    length, cost, count, gpus, cpus = (np.zeros(size, dtype=np.int64) for _ in range(5))
    chosen: dict[int, list[int]] = {}
    grouped = index.items.grouped_nodes
    for kind, entries in _groups(deficits):
        segments = index.lp_by_cost(kind)
        start = segments.start[deficits.nodes[entries]]
        # The first j with cum[start + j] >= cum[start] + deficit, for GPUs and CPUs alike;
        # a zero deficit lands at or before start and clips to 0.
        need_gpus = segments.cum_gpus[start] + deficits.gpus[entries]
        need_cpus = segments.cum_cpus[start] + deficits.cpus[entries]
        stop = np.maximum(
            np.maximum(
                np.searchsorted(segments.cum_gpus, need_gpus),
                np.searchsorted(segments.cum_cpus, need_cpus),
            ),
            start,
        )
        length[entries] = stop - start
        cost[entries] = segments.cum_cost[stop] - segments.cum_cost[start]
        count[entries] = segments.cum_count[stop] - segments.cum_count[start]
        gpus[entries] = segments.cum_gpus[stop] - segments.cum_gpus[start]
        cpus[entries] = segments.cum_cpus[stop] - segments.cum_cpus[start]
        if grouped:
            mine = np.isin(deficits.nodes[entries], sorted(grouped))
            for entry in entries[mine].tolist():
                node = int(deficits.nodes[entry])
                items = index.items
                order = segments.items[segments.start[node] : segments.end[node]].tolist()
                found = group_cover(
                    items, order, int(deficits.gpus[entry]), int(deficits.cpus[entry])
                )
                if found is None:  # unreachable: Deficits keeps only nodes with a cover
                    raise AssertionError(f"no cover of node {index.node_ids[node]}")
                chosen[entry] = found
                length[entry] = len(found)
                cost[entry] = int(items.cost[found].sum()) if found else 0
                count[entry] = int(items.count[found].sum()) if found else 0
                gpus[entry] = int(items.gpus[found].sum()) if found else 0
                cpus[entry] = int(items.cpus[found].sum()) if found else 0
    return Prefixes(length, cost, count, gpus, cpus, chosen)


def stage_two_heuristic(index: PreemptionIndex) -> tuple[int, list[int]] | None:
    """The node and items of P9, or None when no node can make room by preemption.

    Among the nodes that can make room, the cheapest covering prefix wins;
    ties go to fewer victims (pods stopped), then best fit afterwards (fewest
    free GPUs, then fewest free CPUs after placement), then node order.
    """
    deficits = Deficits.of(index)
    if len(deficits.nodes) == 0:
        return None
    prefixes = cheapest_first_prefixes(index, deficits)
    nodes = deficits.nodes
    # Free capacity after placement differs from the freed one by a per-node constant.
    keys = (
        prefixes.cost,
        prefixes.count,
        index.node_free_gpus[nodes] + prefixes.gpus,
        index.node_free_cpus[nodes] + prefixes.cpus,
    )
    best = lex_first(keys)
    node = int(nodes[best])
    if best in prefixes.chosen:
        return node, prefixes.chosen[best]
    segments = index.lp_by_cost(holding(int(deficits.gpus[best]), int(deficits.cpus[best])))
    start = int(segments.start[node])
    return node, segments.items[start : start + int(prefixes.length[best])].tolist()


def solve_heuristic(problem: PreemptionProblem) -> PreemptionResult:
    """Place the request by best fit, else stop the cheapest cheapest-first prefix (P8, P9).

    Examples
    --------
    >>> problem = PreemptionProblem(
    ...     now=100,
    ...     nodes=[{"id": "a", "gpus": 8, "cpus": 64}, {"id": "b", "gpus": 8, "cpus": 64}],
    ...     tasks=[{"id": "hp", "node": "a", "gpus": 6, "priority": "HP", "last_checkpoint": 0},
    ...            {"id": "old", "node": "b", "gpus": 4, "priority": "LP", "last_checkpoint": 0},
    ...            {"id": "new", "node": "b", "gpus": 4, "priority": "LP", "last_checkpoint": 90}],
    ...     request={"id": "r", "gpus": 4, "priority": "HP"})
    >>> decision = solve_heuristic(problem)
    >>> decision.node, decision.victims, decision.cost, decision.stage
    ('b', ['new'], 40.0, 2)
    """
    started = time.perf_counter()
    decision = heuristic_decision(problem)
    return widen(
        problem, decision, cover=cheapest_first, exact=False, method="heuristic", started=started
    )


def heuristic_decision(problem: PreemptionProblem) -> PreemptionResult:
    """:func:`solve_heuristic` over the methods' view alone, its device nodes (P12) left
    out: the start of the exact models."""
    started = time.perf_counter()
    index = problem.index
    node = stage_one(index)
    found = stage_two_heuristic(index) if node is None and index.request_hp else None
    return decide(problem, "heuristic", node, found, started=started)


def decide(
    problem: PreemptionProblem,
    method: Method,
    node: int | None,
    found: tuple[int, Iterable[int]] | None,
    *,
    started: float,
) -> PreemptionResult:
    """Stage one's ``node`` (P8), else stage two's ``found`` (node, items: P13), else no node.

    ``seconds`` counts from ``started`` (``time.perf_counter``).
    """
    seconds = time.perf_counter() - started
    if node is not None:
        return make_decision(problem, method, node, stage=1, seconds=seconds)
    if found is None:
        return make_decision(problem, method, None, stage=None, seconds=seconds)
    return item_decision(problem, method, found[0], found[1], seconds=seconds)


__all__ = [
    "Deficits",
    "Prefixes",
    "cheapest_first_prefixes",
    "decide",
    "heuristic_decision",
    "holding",
    "lex_first",
    "solve_heuristic",
    "stage_one",
    "stage_two_heuristic",
]
