"""The exact dynamic programme (method ``dp``): a minimum-cost cover of the deficits on
every node, and the best node.

The same decision comes from the model of the whole decision
(:mod:`gpuopt.preemption.model`) solved by HiGHS (:mod:`gpuopt.preemption.milp`)
or CP-SAT (:mod:`gpuopt.preemption.cpsat`); this programme is the fast one.
Stage 1 is shared with the heuristic (P8 is a lexicographic minimum, solved
exactly by :func:`~gpuopt.preemption.greedy.stage_one`). Stage 2 (P10) is, on
each node, a two-dimensional covering knapsack: choose items (LP tasks, and
running gangs stopped whole, P13: :mod:`gpuopt.preemption.gangs`) whose GPUs
and CPUs cover what the node lacks, at minimum cost, then fewest victims,
then fewest freed GPUs and CPUs (best fit), then the set whose tasks come
first in input order. Across nodes the smallest (cost, victims, free GPUs
after, free CPUs after, node order) wins.

Not every node is searched. The heuristic's cheapest covering prefix of
every node is an upper bound. A lower bound per node is the larger of two
fractional (linear) relaxations, one per resource: dropping the other
resource and integrality leaves a covering knapsack solved by taking tasks by
cost per unit, the last one in part. Per GPU the cost of a task is its age,
so the GPU bound is an exact integer; the CPU bound is rounded down after a
safety margin. Nodes are searched in increasing lower bound and the search
stops at the first node whose bound exceeds the best cost found (or the
heuristic's, before any); a node whose bound equals it is still searched,
since it may win a tie-break.

Each searched node is solved exactly by a dynamic programme over the covered
(GPUs, CPUs), both capped at the deficits, that keeps one best partial set
per cell; that is exact whatever the number of tasks, with at most
``min(2**k, (gpu deficit + 1) * (cpu deficit + 1))`` cells. Enumerating all
``2**k`` subsets with numpy (:func:`cheapest_cover` with ``enumerate_limit``)
gives the same answers, but numpy's per-call overhead makes it slower than
the programme (whose capped cells stay few) at every size measured, 1 to 10
LP tasks per node, so by default it only serves as the independent check in
the tests (``models/preemption.md``, P10).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

import gpuopt.progress
from gpuopt.errors import ProblemError, short
from gpuopt.preemption.devices import widen
from gpuopt.preemption.greedy import (
    Deficits,
    cheapest_first_prefixes,
    decide,
    holding,
    stage_one,
)
from gpuopt.preemption.index import PreemptionIndex
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import PreemptionResult

#: Nodes with at most this many LP tasks are solved by enumerating all subsets; by
#: default none (the dynamic programme is faster at every size, see above).
ENUMERATE_LIMIT = 0
#: Most LP tasks ever enumerated, whatever ``enumerate_limit`` says (the dynamic
#: programme takes larger nodes): 2**20 subsets take 32 MB, and memory doubles per task.
MAX_ENUMERATE = 20
#: Most cells the dynamic programme of one node may need, by its bound
#: ``min(2**k, (gpu deficit + 1) * (cpu deficit + 1))`` (k: the LP tasks that hold
#: something): a cell costs about 350 bytes, twice while a task is added, and 2**20
#: cells took 0.4 GB and 2.6 s, so 2M stay under 1.5 GB. Hostile states reach it (30
#: LP tasks of distinct CPU amounts and no GPUs on one node); real ones have few
#: LP tasks per node or small deficits.
MAX_COVER_CELLS = 2_000_000


@dataclass(frozen=True)
class Cover:
    """The best victim set of one node: its key (cost, pods, GPUs, CPUs) and the chosen items.

    ``chosen`` are indices into the item lists given to :func:`cheapest_cover`.
    """

    cost: int
    count: int
    gpus: int
    cpus: int
    chosen: tuple[int, ...]


#: A gang's group of items (P13): the members' indices, how many of them may be chosen
#: alone, and the index of the gang's closure (exclusive with them), or -1.
ItemGroup = tuple[tuple[int, ...], int, int]


def cheapest_cover(
    gpus: list[int],
    cpus: list[int],
    costs: list[int],
    need_gpus: int,
    need_cpus: int,
    *,
    bound: int | None = None,
    enumerate_limit: int = ENUMERATE_LIMIT,
    counts: list[int] | None = None,
    groups: Sequence[ItemGroup] = (),
) -> Cover | None:
    """The exact best subset of items whose GPUs and CPUs cover both needs (P10).

    Minimises (cost, pods stopped, GPUs, CPUs), then prefers the set whose
    items come first in list order (the lexicographically smallest sorted
    indices among sets that tie). ``counts`` are the pods each item stops
    (default 1 each: a task; a gang's closure stops all its members, P13);
    ``groups`` are the gangs' groups, of which at most ``allowance`` members
    are chosen, and none with the closure. Returns None when no subset of
    cost at most ``bound`` covers the needs.

    Examples
    --------
    Cheapest first would take the 1-GPU item (cost 100) and then the 4-GPU
    one (400); the 4-GPU item alone covers 4 GPUs:

    >>> cheapest_cover([1, 4], [0, 0], [100, 400], need_gpus=4, need_cpus=0)
    Cover(cost=400, count=1, gpus=4, cpus=0, chosen=(1,))

    A gang of two 2-GPU members that allows one stop, and its closure (cost 500, 3 pods):

    >>> cheapest_cover([2, 2, 4], [0, 0, 0], [100, 100, 500], 4, 0, counts=[1, 1, 3],
    ...                groups=[((0, 1), 1, 2)])
    Cover(cost=500, count=3, gpus=4, cpus=0, chosen=(2,))
    """
    question = CoverQuestion(
        gpus,
        cpus,
        costs,
        need_gpus,
        need_cpus,
        bound,
        [1] * len(gpus) if counts is None else counts,
        list(groups),
    )
    if len(gpus) <= min(enumerate_limit, MAX_ENUMERATE):
        return _enumerate(question)
    return _dynamic_programme(question)


class CoverQuestion(NamedTuple):
    """What :func:`cheapest_cover` solves: the items and the needs they must cover."""

    gpus: list[int]
    cpus: list[int]
    costs: list[int]
    need_gpus: int
    need_cpus: int
    bound: int | None
    counts: list[int]
    groups: list[ItemGroup]


def _enumerate(question: CoverQuestion) -> Cover | None:
    """All 2^k subsets at once: column ``mask`` holds item ``i`` when bit ``k - 1 - i`` is set.

    Among sets that tie, the one whose items come first has the larger mask
    (no set that ties is a part of another: every item stops a pod), so the
    last column of a tie wins.
    """
    gpus, cpus, costs, need_gpus, need_cpus, bound, counts, groups = question
    count = len(gpus)
    sums = np.zeros((4, 1), dtype=np.int64)  # rows: cost, pods, GPUs, CPUs
    for item in reversed(range(count)):  # item k - 1 becomes bit 0
        step = np.array([[costs[item]], [counts[item]], [gpus[item]], [cpus[item]]], np.int64)
        sums = np.concatenate([sums, sums + step], axis=1)
    every = np.arange(sums.shape[1], dtype=np.int64)
    legal = (sums[2] >= need_gpus) & (sums[3] >= need_cpus)
    for members, allowance, closure in groups:
        alone = sum((every >> (count - 1 - item)) & 1 for item in members)
        legal &= np.asarray(alone <= allowance)
        if closure >= 0:
            legal &= ~(((every >> (count - 1 - closure)) & 1 == 1) & (np.asarray(alone) > 0))
    masks = np.flatnonzero(legal)
    if bound is not None:
        masks = masks[sums[0, masks] <= bound]
    if len(masks) == 0:
        return None
    for row in range(4):
        values = sums[row, masks]
        masks = masks[values == values.min()]
        if len(masks) == 1:
            break
    mask = int(masks[-1])
    chosen = tuple(item for item in range(count) if mask >> (count - 1 - item) & 1)
    cost, items, freed_gpus, freed_cpus = (int(value) for value in sums[:, mask])
    return Cover(cost, items, freed_gpus, freed_cpus, chosen)


#: One cell of the dynamic programme: (cost, pods, GPUs, CPUs, -mask).
_Key = tuple[int, int, int, int, int]


def _dynamic_programme(question: CoverQuestion) -> Cover | None:
    """Exact DP over covered (GPUs, CPUs), each capped at its need.

    Two partial sets that cover the same capped amounts can be completed by
    the same later items, and the key (cost, pods, GPUs, CPUs, -mask) is a
    sum, so adding the same items keeps their order: only the best partial
    set of each cell is kept. Item ``i`` is bit ``k - 1 - i`` of ``mask``.
    A gang's group (P13) is added as one block: its closure, or up to
    ``allowance`` of its members, counted in the block by one more index
    (sets in the same cell with as many members taken are completed alike).
    There are at most ``(need_gpus + 1) * (need_cpus + 1)`` cells, and in
    practice far fewer (only reachable sums).
    """
    gpus, cpus, costs, need_gpus, need_cpus, bound, counts, groups = question
    count = len(gpus)
    grouped = {item for members, _, closure in groups for item in (*members, closure)}

    def add(
        cells: dict[tuple[int, int], _Key], item: int, into: dict[tuple[int, int], _Key]
    ) -> None:
        item_gpus, item_cpus, item_cost = gpus[item], cpus[item], costs[item]
        if item_gpus == 0 and item_cpus == 0:
            return  # covers nothing, so it never improves a key
        bit = 1 << (count - 1 - item)
        for (got_gpus, got_cpus), key in cells.items():
            cost = key[0] + item_cost
            if bound is not None and cost > bound:
                continue
            cell = (min(got_gpus + item_gpus, need_gpus), min(got_cpus + item_cpus, need_cpus))
            candidate = (
                cost, key[1] + counts[item], key[2] + item_gpus, key[3] + item_cpus, key[4] - bit
            )  # fmt: skip
            held = into.get(cell)
            if held is None or candidate < held:
                into[cell] = candidate

    cells: dict[tuple[int, int], _Key] = {(0, 0): (0, 0, 0, 0, 0)}
    for item in range(count):
        if item not in grouped:
            updated = dict(cells)
            add(cells, item, updated)
            cells = updated
    for members, allowance, closure in groups:
        updated = dict(cells)
        if closure >= 0:
            add(cells, closure, updated)
        layers = [cells]  # layers[j]: the sets with j members of the group taken
        for item in members:
            for taken in range(min(len(layers), allowance) - 1, -1, -1):
                if taken + 1 == len(layers):
                    layers.append({})
                add(layers[taken], item, layers[taken + 1])
        for layer in layers[1:]:
            for cell, key in layer.items():
                held = updated.get(cell)
                if held is None or key < held:
                    updated[cell] = key
        cells = updated
    best = cells.get((need_gpus, need_cpus))
    if best is None:
        return None
    mask = -best[4]
    chosen = tuple(item for item in range(count) if mask >> (count - 1 - item) & 1)
    return Cover(best[0], best[1], best[2], best[3], chosen)


#: Relative margin taken off the floating-point CPU bound: far above its rounding error
#: (a few units of 2**-53), so the bound stays below the exact fractional optimum.
_FLOAT_MARGIN = 1e-12


def lower_bounds(index: PreemptionIndex, deficits: Deficits) -> np.ndarray:
    """A lower bound on each node's minimum cover cost: the larger of two relaxations (P10).

    Each drops one resource and integrality, leaving a one-dimensional
    fractional covering knapsack whose optimum takes tasks by cost per unit,
    the last one in part. Per GPU the cost of a task is its age, so the GPU
    bound is an exact integer; the CPU bound is computed in floating point
    and rounded down after a safety margin.
    """
    items = index.items
    by_gpus = index.lp_by_age
    start = by_gpus.start[deficits.nodes]
    target = by_gpus.cum_gpus[start] + deficits.gpus
    # The item crossing the target is the one before the first prefix that reaches it.
    crossing = np.maximum(np.searchsorted(by_gpus.cum_gpus, target) - 1, start)
    last = by_gpus.items[np.minimum(crossing, max(len(by_gpus.items) - 1, 0))]
    if len(by_gpus.items):
        # its part, r * cost / gpus rounded down, in integers (a task's is r * age, exact)
        part_cost, part_gpus = items.cost[last], np.maximum(items.gpus[last], 1)
        rest = target - by_gpus.cum_gpus[crossing]
        part = (part_cost // part_gpus) * rest + ((part_cost % part_gpus) * rest) // part_gpus
    else:
        part = np.zeros_like(target)
    gpu_bound = np.where(
        deficits.gpus > 0, by_gpus.cum_cost[crossing] - by_gpus.cum_cost[start] + part, 0
    )
    if items.closures:  # prices of closures are fractions, ordered in floating point
        gpu_bound = np.floor(gpu_bound * (1 - _FLOAT_MARGIN)).astype(np.int64)
    by_cpus = index.lp_by_cpu_price
    start = by_cpus.start[deficits.nodes]
    target = by_cpus.cum_cpus[start] + deficits.cpus
    crossing = np.maximum(np.searchsorted(by_cpus.cum_cpus, target) - 1, start)
    last = by_cpus.items[np.minimum(crossing, max(len(by_cpus.items) - 1, 0))]
    price = index.item_cpu_price[last] if len(by_cpus.items) else np.zeros(len(target))
    with np.errstate(invalid="ignore"):  # inf * 0 where the deficit is 0 (masked below)
        fractional = (by_cpus.cum_cost[crossing] - by_cpus.cum_cost[start]) + (
            target - by_cpus.cum_cpus[crossing]
        ) * price
        cpu_bound = np.floor(fractional * (1 - _FLOAT_MARGIN))
    cpu_bound = np.where(deficits.cpus > 0, cpu_bound, 0).astype(np.int64)
    bound: np.ndarray = np.maximum(gpu_bound, cpu_bound)
    return bound


def _check_cells(
    index: PreemptionIndex, node: int, mine: np.ndarray, need_gpus: int, need_cpus: int
) -> None:
    """Refuse a node whose dynamic programme could exceed :data:`MAX_COVER_CELLS` cells."""
    items = index.items
    useful = int(np.count_nonzero((items.gpus[mine] > 0) | (items.cpus[mine] > 0)))
    cells = (need_gpus + 1) * (need_cpus + 1)
    if useful < 63:
        cells = min(cells, 2**useful)
    if cells > MAX_COVER_CELLS:
        raise ProblemError(
            f"node {index.node_ids[node]!r}: the exact cover of its {useful} LP tasks could "
            f"need {cells:,} states, more than the {MAX_COVER_CELLS:,} this method keeps in "
            "memory; use method 'heuristic'."
        )


def node_groups(index: PreemptionIndex, mine: np.ndarray) -> list[ItemGroup]:
    """The gangs' groups (P13) among the items ``mine`` (sorted item positions of one node),
    as indices into ``mine``."""
    local = {int(item): k for k, item in enumerate(mine.tolist())}
    found: list[ItemGroup] = []
    for number in sorted({int(g) for g in index.items.group[mine].tolist() if g >= 0}):
        group = index.items.groups[number]
        members = tuple(local[m] for m in group.members if m in local)
        found.append((members, group.allowance, local.get(group.closure, -1)))
    return found


def stage_two_exact(
    index: PreemptionIndex, *, enumerate_limit: int = ENUMERATE_LIMIT
) -> tuple[int, list[int]] | None:
    """The node and items of P10, or None when no node can make room by preemption."""
    deficits = Deficits.of(index)
    if len(deficits.nodes) == 0:
        return None
    upper = cheapest_first_prefixes(index, deficits).cost
    bound = int(upper.min())
    lower = lower_bounds(index, deficits)
    hopeful = np.flatnonzero(lower <= bound)
    hopeful = hopeful[np.argsort(lower[hopeful], kind="stable")]  # node order within a bound
    best_key: tuple[int, int, int, int, int] | None = None
    best_items: list[int] = []
    items = index.items
    with gpuopt.progress.task("preemption exact: nodes", total=len(hopeful)) as shown:
        for searched, entry in enumerate(hopeful.tolist()):
            if lower[entry] > bound:
                break
            if shown.active:  # the best cost so far, and no node left can cost less than its bound
                shown.update(completed=searched, incumbent=bound, bound=float(lower[entry]))
            node = int(deficits.nodes[entry])
            need_gpus, need_cpus = int(deficits.gpus[entry]), int(deficits.cpus[entry])
            segments = index.lp_by_cost(holding(need_gpus, need_cpus))  # items that can help
            mine = np.sort(segments.items[segments.start[node] : segments.end[node]])
            if len(mine) > min(enumerate_limit, MAX_ENUMERATE):
                _check_cells(index, node, mine, need_gpus, need_cpus)
            cover = cheapest_cover(
                items.gpus[mine].tolist(),
                items.cpus[mine].tolist(),
                items.cost[mine].tolist(),
                need_gpus,
                need_cpus,
                bound=bound,
                enumerate_limit=enumerate_limit,
                counts=items.count[mine].tolist(),
                groups=node_groups(index, mine) if node in items.grouped_nodes else (),
            )
            if cover is None:
                continue
            key = (
                cover.cost,
                cover.count,
                int(index.node_free_gpus[node]) + cover.gpus,
                int(index.node_free_cpus[node]) + cover.cpus,
                node,
            )
            if best_key is None or key < best_key:
                best_key = key
                best_items = [int(mine[item]) for item in cover.chosen]
                bound = cover.cost
    if best_key is None:  # unreachable: the heuristic's node has a cover within its bound
        raise AssertionError("no exact cover within the heuristic's cost")
    return best_key[4], best_items


def solve_dp(
    problem: PreemptionProblem, *, enumerate_limit: int = ENUMERATE_LIMIT
) -> PreemptionResult:
    """Place the request by best fit, else stop a minimum-cost set of LP tasks (P8, P10).

    ``enumerate_limit`` is the largest number of LP tasks on a node that is
    solved by enumerating subsets (default 0: none; never more than
    :data:`MAX_ENUMERATE`); nodes with more use the exact dynamic programme.
    Both give the same answer.

    Raises
    ------
    ProblemError
        When a node's dynamic programme could need more than
        :data:`MAX_COVER_CELLS` cells (use :func:`solve_heuristic`).

    Examples
    --------
    >>> problem = PreemptionProblem(
    ...     now=100, nodes=[{"id": "a", "gpus": 8, "cpus": 64}],
    ...     tasks=[{"id": "hp", "node": "a", "gpus": 3, "priority": "HP", "last_checkpoint": 0},
    ...            {"id": "small", "node": "a", "gpus": 1, "priority": "LP", "last_checkpoint": 0},
    ...            {"id": "big", "node": "a", "gpus": 4, "priority": "LP", "last_checkpoint": 0}],
    ...     request={"id": "r", "gpus": 4, "priority": "HP"})
    >>> decision = solve_dp(problem)
    >>> decision.victims, decision.cost
    (['big'], 400.0)

    Every method on the same problem: cheapest-first stops ``small`` (100) and
    still needs ``big``; the exact methods stop ``big`` alone, and the models
    (:func:`~gpuopt.preemption.milp.solve_milp`,
    :func:`~gpuopt.preemption.cpsat.solve_cpsat`) prove it with their bound.

    >>> from gpuopt.preemption import solve_cpsat, solve_heuristic, solve_milp
    >>> for solve in (solve_heuristic, solve_dp, solve_milp, solve_cpsat):
    ...     decision = solve(problem)
    ...     print(decision.method, decision.victims, decision.cost, decision.status, decision.bound)
    heuristic ['small', 'big'] 500.0 heuristic None
    dp ['big'] 400.0 optimal 400.0
    milp ['big'] 400.0 optimal 400.0
    cpsat ['big'] 400.0 optimal 400.0
    """
    started = time.perf_counter()
    if isinstance(enumerate_limit, bool) or not isinstance(enumerate_limit, int):
        raise ProblemError(f"enumerate_limit must be an integer (got {short(enumerate_limit)}).")
    index = problem.index
    node = stage_one(index)
    found = None
    if node is None and index.request_hp:
        found = stage_two_exact(index, enumerate_limit=enumerate_limit)
    decision = decide(problem, "dp", node, found, started=started)
    return widen(problem, decision, cover=exact_cover, exact=True, method="dp", started=started)


def exact_cover(
    gpus: list[int], cpus: list[int], costs: list[int], need_gpus: int, need_cpus: int
) -> tuple[int, ...] | None:
    """:func:`cheapest_cover`'s chosen items (the exact methods' cover of P12), or None."""
    found = cheapest_cover(gpus, cpus, costs, need_gpus, need_cpus)
    return None if found is None else found.chosen


#: The function's name before the exact methods were named by backend (``dp``, ``milp``,
#: ``cpsat``); the same function.
solve_exact = solve_dp


__all__ = [
    "ENUMERATE_LIMIT",
    "MAX_COVER_CELLS",
    "MAX_ENUMERATE",
    "Cover",
    "ItemGroup",
    "cheapest_cover",
    "exact_cover",
    "lower_bounds",
    "node_groups",
    "solve_dp",
    "solve_exact",
    "stage_two_exact",
]
