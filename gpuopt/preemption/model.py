"""The model of the whole preemption decision (``models/preemption.md``, P11).

One description, backend-neutral, fed to HiGHS (:mod:`gpuopt.preemption.milp`)
and to CP-SAT (:mod:`gpuopt.preemption.cpsat`): one model, never two
formulations. Columns are ``y[n]`` (the request goes to node ``n``; one per
node that has room or, for an HP request, can make room) and ``x[i]`` (item
``i`` is stopped: an LP task, or a running gang closed whole, P13; one per
item holding GPUs or CPUs on a node of a ``y`` column, none for an LP
request). The rows M1-M4 are built by one
private method each, citing its label; the objective is the lexicographic
key of P8 and P10, solved as a sequence of integer levels (L1-L6), each
earlier level's value kept as a row (M0) before the next is minimised, so
the answer is exactly the dynamic programme's (:mod:`gpuopt.preemption.dp`).

:func:`solve_levels` runs that sequence on any :class:`Backend`; the
backends only say how one level is solved.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np

from gpuopt.cluster.model import SCALE
from gpuopt.options import Keywords
from gpuopt.preemption.devices import widen
from gpuopt.preemption.dp import exact_cover
from gpuopt.preemption.greedy import Deficits, heuristic_decision
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import (
    PreemptionResult,
    item_decision,
    make_decision,
    violations,
)
from gpuopt.result import Status
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.highs import RowCounts, RowFamily, csr_family
from gpuopt.solvers.run import ExactOptions

#: The keywords of the model's backends (:mod:`~gpuopt.preemption.milp`,
#: :mod:`~gpuopt.preemption.cpsat`): time limit, seed, threads, warm start, log.
MODEL_KEYWORDS = Keywords.of(ExactOptions, omit=("initial", "progress"))

#: Bits of one victim-set level (L6): a sum of distinct powers of two below 2**30 stays an
#: exact integer in HiGHS's doubles, with room to spare in its tolerances.
SET_BITS = 30

SolveStatus = Literal["optimal", "feasible", "time_limit", "infeasible", "error"]
#: The methods that solve this model.
ModelMethod = Literal["milp", "cpsat"]


class Level(NamedTuple):
    """One level of the lexicographic objective: its label, what it minimises, coefficients.

    ``objective`` has one integer coefficient per column; the level's value of
    a solution is ``objective @ values``.
    """

    label: str
    name: str
    objective: np.ndarray


class Solved(NamedTuple):
    """What a backend returned for one level: column values (None: no solution), status,
    and a proven lower bound on the level's value (None: none)."""

    values: np.ndarray | None
    status: SolveStatus
    bound: float | None


class Backend(Protocol):
    """How one solver takes the levels: solve one, keep its value, pin the node."""

    def solve(self, level: Level, start: np.ndarray | None, deadline: Deadline) -> Solved:
        """Minimise ``level.objective`` from ``start`` (a feasible solution, or None)."""
        ...

    def keep(self, level: Level, value: int) -> None:
        """Add the row ``level.objective @ v <= value`` (M0) to every later solve."""
        ...

    def fix(self, columns: np.ndarray, value: int) -> None:
        """Fix ``columns`` at ``value`` in every later solve."""
        ...


@dataclass
class PreemptionRows(RowCounts):
    """Columns and labelled rows (M1-M4) of the model of one decision, and its levels.

    Column ``j < num_y`` is ``y[nodes[j]]``; column ``num_y + k`` is
    ``x[items[k]]``, whose node is the ``y`` column ``item_y[k]``. Items
    (:attr:`~gpuopt.preemption.index.PreemptionIndex.items`: LP tasks and gangs'
    closures, P13) and nodes are positions of the index view, in its order.
    Costs are counted in units of ``cost_unit`` thousandths (the greatest
    common divisor of the items' costs), which keeps the coefficients small
    and exact.
    """

    problem: PreemptionProblem
    nodes: np.ndarray
    items: np.ndarray
    item_y: np.ndarray
    cost_unit: int
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    cost: np.ndarray
    offset: float = 0.0
    families: list[RowFamily] = field(default_factory=list)

    @property
    def num_y(self) -> int:
        return int(self.nodes.size)

    @property
    def num_x(self) -> int:
        return int(self.items.size)

    @classmethod
    def build(cls, problem: PreemptionProblem) -> PreemptionRows:
        """The columns and rows of ``problem`` (no column at all when nothing can hold it)."""
        index = problem.index
        room = (index.node_free_gpus >= index.request_gpus) & (
            index.node_free_cpus >= index.request_cpus
        )
        hosts = room.copy()
        found = index.items
        items = np.zeros(0, dtype=np.int64)
        if index.request_hp:  # an LP request never preempts (P2)
            hosts[Deficits.of(index).nodes] = True
            on_hosts = np.flatnonzero(hosts[found.node])
            helps = (found.gpus[on_hosts] > 0) | (found.cpus[on_hosts] > 0)
            items = on_hosts[helps]  # an item holding nothing never lowers the key (P10)
        nodes = np.flatnonzero(hosts)
        y_of_node = np.full(index.num_nodes, -1, dtype=np.int64)
        y_of_node[nodes] = np.arange(nodes.size)
        costs = found.cost[items]
        unit = math.gcd(*(int(c) for c in costs)) if costs.size else 1
        num = nodes.size + items.size
        rows = cls(
            problem=problem,
            nodes=nodes,
            items=items,
            item_y=y_of_node[found.node[items]],
            cost_unit=max(unit, 1),
            col_lower=np.zeros(num),
            col_upper=np.ones(num),
            integer=np.ones(num, dtype=bool),
            cost=np.zeros(num),
        )
        if num:
            rows.families = [
                rows._m1_one_node(),
                rows._m2_victims_on_the_node(),
                *rows._m3_room(),
            ]
            gangs = rows._m4_gangs()
            if gangs is not None:
                rows.families.append(gangs)
        return rows

    def x_col(self, k: np.ndarray | int) -> np.ndarray | int:
        """The column of ``x[items[k]]``."""
        return self.num_y + k

    def _m1_one_node(self) -> RowFamily:
        """M1 (P1): the request goes to exactly one node, ``sum_n y[n] = 1``."""
        return csr_family(
            "m1", np.arange(self.num_y), np.ones(self.num_y), np.array([self.num_y]), 1.0, 1.0
        )

    def _m2_victims_on_the_node(self) -> RowFamily:
        """M2 (P2): only items of the chosen node stop, ``x[i] - y[h(i)] <= 0``.

        Only items (LP tasks, closures of gangs whose members are all LP) have
        ``x`` columns (none for an LP request), so HP tasks never stop.
        """
        count = self.num_x
        cols = np.column_stack([np.asarray(self.x_col(np.arange(count))), self.item_y]).ravel()
        coefs = np.tile([1.0, -1.0], count)
        return csr_family("m2", cols, coefs, np.full(count, 2), -math.inf, 0.0)

    def _m3_room(self) -> list[RowFamily]:
        """M3 (P3): the victims cover the node's deficits, ``sum_{h(i)=n} g_i x[i] >= D^G_n y[n]``
        and ``sum_{h(i)=n} c_i x[i] >= D^C_n y[n]`` (milli-CPUs; an item's amounts on its
        node); rows only where ``D > 0``."""
        index = self.problem.index
        found = index.items
        need = {
            "m3_gpus": (index.request_gpus - index.node_free_gpus[self.nodes], found.gpus),
            "m3_cpus": (index.request_cpus - index.node_free_cpus[self.nodes], found.cpus),
        }
        families = []
        for label, (deficit, amount) in need.items():
            short = np.flatnonzero(deficit > 0)
            mine = np.flatnonzero(deficit[self.item_y] > 0)
            # one row per short node: its items' x columns, then its y column last
            row = np.concatenate([self.item_y[mine], short])
            last = np.concatenate([np.zeros(mine.size), np.ones(short.size)])
            cols = np.concatenate([np.asarray(self.x_col(mine)), short])
            coefs = np.concatenate([amount[self.items[mine]], -deficit[short]]).astype(float)
            order = np.lexsort((last, row))
            counts = np.bincount(row, minlength=self.num_y)[short]
            families.append(csr_family(label, cols[order], coefs[order], counts, 0.0, math.inf))
        return families

    def _m4_gangs(self) -> RowFamily | None:
        """M4 (P13): per group of a gang on a node, at most ``a_k`` of its members stop alone,
        and none with its closure: ``sum x[members] + a_k x[closure] <= a_k`` (None: no
        group)."""
        found = self.problem.index.items
        column = {int(item): int(self.x_col(k)) for k, item in enumerate(self.items.tolist())}
        cols: list[int] = []
        coefs: list[float] = []
        counts: list[int] = []
        uppers: list[float] = []
        for group in found.groups:
            members = [column[m] for m in group.members if m in column]
            closure = column.get(group.closure)
            if len(members) <= group.allowance and closure is None:
                continue  # the allowance covers every member with a column
            row = members + ([closure] if closure is not None else [])
            cols += row
            coefs += [1.0] * len(members) + (
                [float(group.allowance)] if closure is not None else []
            )
            counts.append(len(row))
            uppers.append(float(group.allowance))
        if not counts:
            return None
        return csr_family(
            "m4", np.array(cols), np.array(coefs), np.array(counts), -math.inf, np.array(uppers)
        )

    # ------------------------------------------------------------------ levels
    def _on_x(self, values: np.ndarray) -> np.ndarray:
        objective = np.zeros(self.num_cols, dtype=np.int64)
        objective[self.num_y :] = values
        return objective

    def first_levels(self) -> list[Level]:
        """L1 the victims' cost (P4, in ``cost_unit``), L2 their number, the pods stopped (P6:
        0 exactly when some node has room, which makes the decision stage 1)."""
        found = self.problem.index.items
        return [
            Level("L1", "cost", self._on_x(found.cost[self.items] // self.cost_unit)),
            Level("L2", "victims", self._on_x(found.count[self.items])),
        ]

    def stage_one_levels(self) -> list[Level]:
        """L3' (P8): the rank of each node with room in P8's order (best fit on GPUs, then on
        CPUs, class rank, preemptions, node order); its value is the chosen node's rank."""
        index = self.problem.index
        nodes = self.nodes
        preemptions = index.node_preemptions[nodes]
        keys = (
            nodes,
            -preemptions if index.request_hp else preemptions,
            index.node_class_rank[nodes],
            index.node_free_cpus[nodes],
            index.node_free_gpus[nodes],
        )
        rank = np.empty(self.num_y, dtype=np.int64)
        rank[np.lexsort(keys)] = np.arange(self.num_y)
        objective = np.zeros(self.num_cols, dtype=np.int64)
        objective[: self.num_y] = rank
        return [Level("L3'", "P8 rank", objective)]

    def stage_two_levels(self) -> list[Level]:
        """L3 free GPUs after placement, L4 free CPUs after (P10's best fit), L5 node order."""
        index = self.problem.index
        found = index.items
        levels = []
        for label, name, free, asked, held in (
            ("L3", "free GPUs after", index.node_free_gpus, index.request_gpus, found.gpus),
            ("L4", "free CPUs after", index.node_free_cpus, index.request_cpus, found.cpus),
        ):
            objective = self._on_x(held[self.items])
            objective[: self.num_y] = free[self.nodes] - asked
            levels.append(Level(label, name, objective))
        order = np.zeros(self.num_cols, dtype=np.int64)
        order[: self.num_y] = np.arange(self.num_y)  # y columns are in node order
        levels.append(Level("L5", "node order", order))
        return levels

    def set_levels(self, y: int) -> list[Level]:
        """L6 (P10's last key): on node ``y``, the item set whose items come first in item
        order: bit ``2**(m-1-j)`` for the ``j``-th of ``m`` items, maximised (minimised
        negated), in chunks of :data:`SET_BITS` items (lexicographic chunk by chunk)."""
        mine = np.flatnonzero(self.item_y == y)  # items are in item order
        levels = []
        for first in range(0, mine.size, SET_BITS):
            chunk = mine[first : first + SET_BITS]
            weights = np.left_shift(1, np.arange(chunk.size - 1, -1, -1, dtype=np.int64))
            objective = np.zeros(self.num_cols, dtype=np.int64)
            objective[np.asarray(self.x_col(chunk))] = -weights
            levels.append(
                Level("L6", f"victim set, items {first + 1}-{first + chunk.size}", objective)
            )
        return levels

    # ------------------------------------------------------------------ values
    def start_values(self, decision: PreemptionResult) -> np.ndarray | None:
        """Column values of ``decision`` (a start or hint), or None when it has no node here."""
        index = self.problem.index
        if decision.node is None:
            return None
        where = np.flatnonzero(self.nodes == index.node_pos[decision.node])
        if where.size == 0:
            return None
        values = np.zeros(self.num_cols)
        values[int(where[0])] = 1.0
        victims = set(decision.victims)
        found = index.items
        chosen = {int(item) for item in self.items.tolist() if set(found.stops(item)) <= victims}
        for group in found.groups:  # a closure taken stops its members: they are not items
            if group.closure in chosen:
                chosen -= set(group.members)
        for k, item in enumerate(self.items.tolist()):
            if item in chosen:
                values[int(self.x_col(k))] = 1.0
        return values

    def read(self, values: np.ndarray) -> tuple[int, list[int]]:
        """The node position and item positions (item order) of a solution."""
        chosen = np.rint(values).astype(np.int64)
        y = int(np.argmax(chosen[: self.num_y]))
        items = self.items[np.flatnonzero(chosen[self.num_y :])]
        return int(self.nodes[y]), sorted(int(item) for item in items)


def level_value(level: Level, values: np.ndarray) -> int:
    """A level's exact value at (rounded) column values, in Python integers."""
    chosen = np.rint(values).astype(np.int64)
    return sum(int(c) for c in level.objective[chosen > 0].tolist())


def bottom(level: Level, values: np.ndarray) -> bool:
    """Whether ``values`` are 0 on a level that is never negative (so they are its optimum)."""
    return bool(np.all(level.objective >= 0)) and level_value(level, values) == 0


def proves(level: Level, solved: Solved) -> bool:
    """Whether ``solved`` is proven optimal by its own values: status optimal, and their
    level value within one unit of the bound (every level is an integer)."""
    if solved.status != "optimal" or solved.values is None:
        return False
    return solved.bound is not None and level_value(level, solved.values) < solved.bound + 1 - 1e-6


@dataclass
class Outcome:
    """The decision the levels reached: the solution, how far the proof went, and why.

    ``cost_bound`` is a proven lower bound on the cost in thousandths (None:
    none); ``status`` is ``optimal`` when every level was proven, else the
    status of the first level that was not.
    """

    values: np.ndarray | None
    status: SolveStatus
    cost_bound: int | None
    notes: list[str] = field(default_factory=list)


def solve_levels(
    rows: PreemptionRows, backend: Backend, start: np.ndarray | None, deadline: Deadline
) -> Outcome:
    """Minimise the levels one after the other, each kept as a row (M0) for the next.

    L1 and L2 first; L3' when no victim is needed (stage 1), else L3-L5, then the
    node is fixed and L6 runs on its items. A level is not solved when the
    best solution so far is 0 on it and its coefficients are all nonnegative
    (no ``x`` column, or a start that stops nobody on L1 and L2). Each solve
    starts from the best solution so far (``start`` first), which is kept
    when the solver's is not better on the level, so the answer is never
    worse than ``start``. The sequence stops at the first level that is not
    proven optimal (the time limit, or the solver failing).
    """
    values = start
    cost_bound: int | None = None
    pending = list(rows.first_levels())
    notes: list[str] = []
    done = 0
    while pending:
        level = pending.pop(0)
        if values is not None and bottom(level, values):
            value = 0  # no solution is below 0: proven without a solver
            solved = Solved(values, "optimal", 0.0)
        else:
            solved = backend.solve(level, values, deadline)
            if solved.values is not None and (
                values is None or level_value(level, solved.values) <= level_value(level, values)
            ):
                values = solved.values
            value = 0 if values is None else level_value(level, values)
        if level.label == "L1" and solved.bound is not None:
            lowest = max(0, math.ceil(solved.bound - 1e-6))
            if values is not None:
                lowest = min(lowest, value)  # a bound is never above the cost found
            cost_bound = lowest * rows.cost_unit
        if values is None or not proves(level, Solved(values, solved.status, solved.bound)):
            if done:
                unproven = ", ".join(left.label for left in [level, *pending])
                notes.append(
                    f"levels {unproven} of the lexicographic order were not proven "
                    f"({solved.status}); the tie-breaks may not be P10's"
                )
            # a solver that claims a proof its values do not bear out proved nothing
            status: SolveStatus = solved.status if solved.status != "optimal" else "feasible"
            return Outcome(values, status, cost_bound, notes)
        done += 1
        backend.keep(level, value)
        if level.label == "L2":
            pending += rows.stage_two_levels() if value else rows.stage_one_levels()
        elif level.label == "L5":
            y = int(np.argmax(np.rint(values[: rows.num_y])))
            backend.fix(np.array([y]), 1)
            others = np.flatnonzero(rows.item_y != y)
            backend.fix(np.asarray(rows.x_col(others)), 0)
            pending += rows.set_levels(y)
    return Outcome(values, "optimal", cost_bound, notes)


class Levels(Protocol):
    """A backend's constructor: the rows, and the solver's seed, threads and log switch."""

    def __call__(self, rows: PreemptionRows, *, seed: int, threads: int, log: bool) -> Backend: ...


def solve_by(
    problem: PreemptionProblem,
    method: ModelMethod,
    levels: Levels,
    options: ExactOptions | None,
    settings: dict[str, Any],
) -> PreemptionResult:
    """:func:`solve_model` with a backend's settings (:data:`MODEL_KEYWORDS`, as one object or
    as keywords, the keywords overriding it) handed to ``levels`` for each model."""
    started = time.perf_counter()
    run = MODEL_KEYWORDS.resolve(options, settings)
    backend = partial(levels, seed=run.seed, threads=run.threads, log=run.log)
    decision = solve_model(problem, method, backend, time_limit=run.time_limit, warm=run.warm)
    return widen(problem, decision, cover=exact_cover, exact=True, method=method, started=started)


def solve_model(
    problem: PreemptionProblem,
    method: ModelMethod,
    make_backend: Callable[[PreemptionRows], Backend],
    *,
    time_limit: float | None,
    warm: bool,
) -> PreemptionResult:
    """The decision of the model (P11) solved by ``make_backend(rows)``'s solver.

    The heuristic runs first (its decision is the start when ``warm``, and
    the answer when no solver finds one in time); ``time_limit`` covers the
    whole call. ``status`` is ``optimal`` when every level was proven, and
    ``bound`` is then the cost; when the time limit (or the solver) stopped
    the levels, ``status`` says so, and ``bound`` is the solver's proven
    bound on the cost (None when the cost level had none).
    """
    deadline = Deadline(time_limit)
    heuristic = heuristic_decision(problem)
    rows = PreemptionRows.build(problem)
    if rows.num_cols == 0:  # no node has room or can make room (P7): nothing to solve
        return make_decision(problem, method, None, stage=None, seconds=deadline.elapsed())
    start = rows.start_values(heuristic) if warm else None
    outcome = solve_levels(rows, make_backend(rows), start, deadline)
    notes = list(outcome.notes)
    values = outcome.values
    decision = None
    if values is not None:
        node, items = rows.read(values)
        decision = (
            item_decision(problem, method, node, items, seconds=0.0)
            if items
            else make_decision(problem, method, node, stage=1, seconds=0.0)
        )
        if violations(problem, decision):  # a solver's rounding gone wrong: never returned
            notes.append(f"the solver's answer broke {violations(problem, decision)[0]}")
            decision = None
    if decision is None:
        notes.append("no solution from the solver in time; the heuristic's decision is returned")
        decision = heuristic
    status = {"optimal": Status.OPTIMAL, "error": Status.ERROR}.get(
        outcome.status, Status.TIME_LIMIT
    )
    bound = None if outcome.cost_bound is None else outcome.cost_bound / SCALE
    return decision.model_copy(
        update={
            "method": method,
            "status": status,
            "bound": bound,
            "notes": notes,
            "seconds": deadline.elapsed(),
        }
    )


__all__ = [
    "MODEL_KEYWORDS",
    "SET_BITS",
    "Backend",
    "Level",
    "Levels",
    "Outcome",
    "PreemptionRows",
    "Solved",
    "level_value",
    "proves",
    "solve_by",
    "solve_levels",
    "solve_model",
]
