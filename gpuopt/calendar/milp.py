"""The calendar's exact model (X1-X9 of ``models/calendar.md``) and its HiGHS backend.

The model is time-indexed on the problem's ticks (the caller chooses a step
coarse enough that the grid is small) and written once, as labelled row
families (:class:`CalendarRows`); :func:`solve_milp` hands them to HiGHS,
:func:`gpuopt.calendar.cpsat.solve_cpsat` to CP-SAT. Per job ``j`` a
Boolean ``X[j, t]`` says "started by tick ``t``" (``t`` from its earliest
tick to ``H - 1``), so its start is its earliest tick plus the ticks with
``X = 0`` and a job that never starts counts at the horizon, exactly as
:func:`gpuopt.calendar.solution.evaluate` does (C7, C8).

Two formulations of the nodes, chosen by ``formulation``:

``"nodes"`` (exact)
    Nodes are grouped into classes of interchangeable nodes (same capacity,
    domains, candidacy for every job and capacity left by the running pods
    at every tick) where grouping is exact: a class of one node, or a class
    whose pods pairwise cannot share a node (each node then runs at most one
    of them at a time, and because the capacity the running pods leave only
    grows, any pods that overlap at most ``K`` at a time fit on ``K`` such
    nodes); other classes are split into single nodes. ``Z[j, k, t]`` counts
    the pods of ``j`` started on class ``k`` by ``t``. Its optimum is the
    problem's optimum.
``"pools"`` (a relaxation)
    Only ``X``; capacity is summed over the nodes each job may use (X7) and
    over the pods at least a size on the nodes with room for one of them
    (X8); gangs' domains are not modelled. Its bound is a proven lower bound
    on the problem's optimum; its plan is the solver's order of starts
    re-placed by :func:`gpuopt.calendar.greedy.place_all` (legal by
    construction).
``"auto"``
    ``"pools"`` first (half the time left), then, unless its plan already
    meets the bound, ``"nodes"`` from the best plan so far with the rest of
    the time, when it has at most :data:`NODE_COLUMNS` columns. The pool
    rows are valid cuts of ``"nodes"`` and are added to it.

Whatever the solver returns, the answer is the best legal plan (C1-C7,
``violations`` with ``work_conserving``) among the solver's own, the
solver's order re-placed, and the starting plan (the heuristic's or
``initial``); ``bound`` is the larger of the solver's proven bound and the
bound of every job planned alone (each at its earliest start beside the
running pods only), so an answer always carries a gap.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import numpy as np

from gpuopt.calendar.greedy import order, place_all, solve_heuristic
from gpuopt.calendar.problem import CalendarProblem
from gpuopt.calendar.solution import CalendarPlan, JobStart, evaluate, violations
from gpuopt.options import Keywords
from gpuopt.result import Status, relative_gap
from gpuopt.solvers import require
from gpuopt.solvers.deadline import Deadline, DeadlineExceeded
from gpuopt.solvers.highs import GrowingRows, row_family, solve_rows
from gpuopt.solvers.run import ExactOptions

#: The formulations of the nodes (module docstring).
Formulation = Literal["auto", "nodes", "pools"]
FORMULATIONS: tuple[Formulation, ...] = ("auto", "nodes", "pools")
#: ``"auto"`` takes the per-class model (exact) up to this many columns.
NODE_COLUMNS = 40_000
#: No model at all beyond this many ``X`` columns: the grid is too fine (use a coarser step).
MAX_COLUMNS = 2_000_000
#: Default seconds of the whole call.
TIME_LIMIT = 10.0
#: HiGHS options for integer weights: a bound within 1 of the incumbent proves it.
INTEGER_GAP = {"mip_rel_gap": 0.0, "mip_abs_gap": 0.99}
#: Relative gap under which a plan counts as proven optimal (the solvers' tolerance).
OPTIMAL_GAP = 1e-6

Row = tuple[list[int], list[float]]


@dataclass(frozen=True, slots=True, kw_only=True)
class CalendarExactOptions(ExactOptions):
    """How an exact calendar method runs (:func:`solve_milp`, :func:`solve_cpsat
    <gpuopt.calendar.cpsat.solve_cpsat>`).

    Attributes
    ----------
    time_limit
        Seconds of the whole call (heuristic, model, solver, checks).
    initial
        A plan to start from (default: the heuristic's); a plan that breaks a
        rule is not used.
    formulation
        ``"nodes"`` (exact), ``"pools"`` (a relaxation: its bound, its order
        re-placed) or ``"auto"`` (:mod:`gpuopt.calendar.milp`).
    """

    formulation: Formulation = "auto"


#: The keywords of both calendar backends: time limit, start, seed, threads, log and
#: formulation.
CALENDAR_KEYWORDS = Keywords.of(
    CalendarExactOptions, omit=("warm", "progress"), time_limit=TIME_LIMIT
)


@dataclass
class NodeClass:
    """Interchangeable nodes (positions), how many pods may share one, and what the
    running pods leave of each resource at each tick (``free[r, t]``)."""

    nodes: list[int]
    free: np.ndarray  # [R, T] int64
    single: bool  # True: one node (X4); False: pods pairwise cannot share a node (X5)
    domain: dict[str, str | None] = field(default_factory=dict)


class CalendarRows(GrowingRows):
    """The labelled rows X1-X9 of one calendar problem, for HiGHS and CP-SAT.

    Column ``k`` is named ``names[k]``; :attr:`x_col` maps ``(job, tick)`` to
    the column of ``X[j, t]``, :attr:`z_col` ``(job, class, tick)`` to that
    of ``Z[j, k, t]``. ``cost`` is the weight of each ``X`` column: the
    objective is ``constant - cost @ x`` (minimised).
    """

    def __init__(
        self,
        problem: CalendarProblem,
        formulation: Literal["nodes", "pools"] = "nodes",
        deadline: Deadline | None = None,
        alone: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self.problem = problem
        self.index = index = problem.index
        self.deadline = deadline or Deadline(None)
        horizon = index.horizon
        jobs = range(len(index.job_ids))
        #: Earliest tick of each job: its earliest start alone, beside the running pods only
        #: (at least its submit, C3; no plan starts it earlier), or None when it cannot
        #: start before the horizon even alone (C5, C7).
        alone = alone_starts(problem) if alone is None else alone
        self.earliest: list[int | None] = [a if a >= 0 else None for a in alone]
        self.modelled = [j for j in jobs if self.earliest[j] is not None]
        longest = max((int(index.duration[j]) for j in self.modelled), default=1)
        self.ticks = horizon - 1 + longest
        weight = index.weight.astype(float)
        #: C8 when no job starts: every job at the horizon.
        self.constant = float(sum(weight[j] * (horizon - int(index.submit[j])) for j in jobs))
        x_columns = sum(horizon - (self.earliest[j] or 0) for j in self.modelled)
        if x_columns > MAX_COLUMNS:
            raise GridTooFine(x_columns)
        self.free = self._free()
        self.classes = self._classes()
        self.x_col: dict[tuple[int, int], int] = {}
        self.z_col: dict[tuple[int, int, int], int] = {}
        self.z_first: dict[tuple[int, int], int] = {}
        self.g_col: dict[tuple[int, str], int] = {}
        #: Columns of the ``"nodes"`` formulation (``X`` and ``Z``).
        self.node_columns = x_columns + sum(
            horizon - max(self.earliest[j] or 0, first)
            for j in self.modelled
            for first in self._firsts(j).values()
        )
        self.formulation = formulation
        self.exact = formulation == "nodes"
        self._names: list[str] = []
        self._lower: list[float] = []
        self._upper: list[float] = []
        self._integer: list[bool] = []
        self._cost: list[float] = []
        self._add_x(weight)
        if self.exact:
            self._add_z()
            self._add_domains()
            self._add_link()
            self._add_class_capacity()
        self._add_pools()  # the relaxation's rows; valid cuts in "nodes"
        self.col_lower = np.array(self._lower, dtype=float)
        self.col_upper = np.array(self._upper, dtype=float)
        self.integer = np.array(self._integer, dtype=bool)
        self.cost = np.array(self._cost, dtype=float)
        self.offset = -self.constant
        self.names = self._names

    # ------------------------------------------------------------------ data
    def _free(self) -> np.ndarray:
        """What the running pods leave of each node's resources at each tick: [N, R, T]."""
        index = self.index
        capacity = index.capacity
        free = np.repeat(capacity[:, :, None], self.ticks, axis=2).astype(np.int64)
        for node, use, end in zip(
            index.run_node.tolist(), index.run_use.tolist(), index.run_end.tolist(), strict=True
        ):
            free[node, :, : min(end, self.ticks)] -= np.asarray(use, dtype=np.int64)[:, None]
        return free

    def _classes(self) -> list[NodeClass]:
        """Nodes grouped where grouping is exact (the module docstring), else one each."""
        index = self.index
        levels = sorted({job.level for job in self.problem.jobs if job.level is not None})
        users: dict[int, list[int]] = defaultdict(list)
        for j in self.modelled:
            for n in index.candidates[j]:
                users[n].append(j)
        groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for n, node in enumerate(self.problem.nodes):
            key = (
                tuple(node.domains.get(level) for level in levels),
                tuple(users[n]),
                self.free[n].tobytes(),
                tuple(index.capacity[n].tolist()),
            )
            groups[key].append(n)
        classes: list[NodeClass] = []
        for key, nodes in groups.items():
            domain = dict(zip(levels, key[0], strict=True))
            uses = {tuple(index.use[j].tolist()) for j in key[1]}
            capacity = index.capacity[nodes[0]].tolist()
            apart = all(
                any(a + b > c for a, b, c in zip(u, v, capacity, strict=True))
                for u in uses
                for v in uses
            )
            if len(nodes) > 1 and apart:
                classes.append(NodeClass(nodes, self.free[nodes[0]], False, domain))
            else:
                classes.extend(NodeClass([n], self.free[n], True, domain) for n in nodes)
        return classes

    def _firsts(self, j: int) -> dict[int, int]:
        """Class -> the first tick (<= H - 1) from which one pod of ``j`` fits there
        beside the running pods (the room they leave only grows), for ``j``'s classes."""
        index = self.index
        candidates = set(index.candidates[j])
        use = index.use[j][:, None]
        out: dict[int, int] = {}
        horizon = index.horizon
        for k, group in enumerate(self.classes):
            if group.nodes[0] not in candidates:
                continue
            fits = np.all(group.free[:, :horizon] >= use, axis=0)
            ok = np.flatnonzero(fits)
            if ok.size:
                out[k] = int(ok[0])
        return out

    # ------------------------------------------------------------------ columns
    def _column(self, name: str, upper: float, integer: bool, cost: float = 0.0) -> int:
        self._names.append(name)
        self._lower.append(0.0)
        self._upper.append(upper)
        self._integer.append(integer)
        self._cost.append(cost)
        return len(self._names) - 1

    def _family(self, label: str, rows: list[Row], lower: list[float], upper: list[float]) -> None:
        if rows:
            self.families.append(row_family(label, rows, lower, upper))

    def x_at(self, j: int, tick: int) -> int | None:
        """The column of ``X[j, min(tick, H - 1)]``; None before the job's earliest tick."""
        earliest = self.earliest[j]
        if earliest is None or tick < earliest:
            return None
        return self.x_col[(j, min(tick, self.index.horizon - 1))]

    def z_at(self, j: int, k: int, tick: int) -> int | None:
        """The column of ``Z[j, k, min(tick, H - 1)]``; None before its first tick."""
        first = self.z_first.get((j, k))
        if first is None or tick < first:
            return None
        return self.z_col[(j, k, min(tick, self.index.horizon - 1))]

    def _add_x(self, weight: np.ndarray) -> None:
        """X1: ``X[j, t]`` (started by ``t``) never falls back to 0."""
        horizon = self.index.horizon
        ids = self.index.job_ids
        rows: list[Row] = []
        for j in self.modelled:
            earliest = self.earliest[j]
            assert earliest is not None
            for tick in range(earliest, horizon):
                col = self._column(f"X[{ids[j]},{tick}]", 1.0, True, float(weight[j]))
                self.x_col[(j, tick)] = col
                if tick > earliest:
                    rows.append(([col - 1, col], [1.0, -1.0]))
        self._family("X1", rows, [-math.inf] * len(rows), [0.0] * len(rows))

    def _add_z(self) -> None:
        """X3: ``Z[j, k, t]``, the pods of ``j`` started on class ``k`` by ``t``, never fall."""
        horizon = self.index.horizon
        ids = self.index.job_ids
        rows: list[Row] = []
        for j in self.modelled:
            self.deadline.check()
            members = int(self.index.members[j])
            earliest = self.earliest[j]
            assert earliest is not None
            for k, first in self._firsts(j).items():
                group = self.classes[k]
                upper = members if group.single else min(members, len(group.nodes))
                start = max(earliest, first)
                self.z_first[(j, k)] = start
                for tick in range(start, horizon):
                    col = self._column(f"Z[{ids[j]},{k},{tick}]", float(upper), True)
                    self.z_col[(j, k, tick)] = col
                    if tick > start:
                        rows.append(([col - 1, col], [1.0, -1.0]))
        self._family("X3", rows, [-math.inf] * len(rows), [0.0] * len(rows))

    def _add_link(self) -> None:
        """X2 (C2): a job's pods start together: ``sum_k Z[j, k, t] = m_j X[j, t]``."""
        rows: list[Row] = []
        classes_of: dict[int, list[int]] = defaultdict(list)
        for j, k in self.z_first:
            classes_of[j].append(k)
        for j in self.modelled:
            members = float(self.index.members[j])
            earliest = self.earliest[j]
            assert earliest is not None
            for tick in range(earliest, self.index.horizon):
                cols = [self.x_col[(j, tick)]]
                coefs = [-members]
                for k in classes_of[j]:
                    col = self.z_at(j, k, tick)
                    if col is not None:
                        cols.append(col)
                        coefs.append(1.0)
                rows.append((cols, coefs))
        self._family("X2", rows, [0.0] * len(rows), [0.0] * len(rows))

    def _add_domains(self) -> None:
        """X6 (C2): a gang with a required level uses the classes of one domain of it."""
        index = self.index
        pick: list[Row] = []
        ties: list[Row] = []
        for j in self.modelled:
            level = self.problem.jobs[j].level
            if level is None:
                continue
            members = float(index.members[j])
            domains: dict[str, list[int]] = defaultdict(list)
            for (job, k), _ in self.z_first.items():
                if job == j:
                    name = self.classes[k].domain.get(level)
                    if name is not None:
                        domains[name].append(k)
            cols = []
            for name in sorted(domains):
                g = self._column(f"G[{index.job_ids[j]},{name}]", 1.0, True)
                self.g_col[(j, name)] = g
                cols.append(g)
                for k in domains[name]:
                    z = self.z_at(j, k, index.horizon - 1)
                    assert z is not None
                    ties.append(([z, g], [1.0, -members]))
            if cols:
                pick.append((cols, [1.0] * len(cols)))
        self._family("X6a", pick, [-math.inf] * len(pick), [1.0] * len(pick))
        self._family("X6b", ties, [-math.inf] * len(ties), [0.0] * len(ties))

    def _active(
        self, j: int, tick: int, col_at: Callable[[int], int | None]
    ) -> list[tuple[int, float]]:
        """``col(t) - col(t - d_j)``: 1 when ``j`` (or its pods' count) is running at ``tick``."""
        now = col_at(tick)
        if now is None:
            return []
        before = col_at(tick - int(self.index.duration[j]))
        if before is None:
            return [(now, 1.0)]
        if before == now:
            return []
        return [(now, 1.0), (before, -1.0)]

    def _add_class_capacity(self) -> None:
        """X4 (C1, C4): a one-node class gives at most what the running pods leave of each
        resource at each tick; X5: a class whose pods cannot share a node runs at most
        as many pods at a time as it has nodes."""
        index = self.index
        by_class: dict[int, list[int]] = defaultdict(list)
        for j, k in self.z_first:
            by_class[k].append(j)
        single_rows: list[Row] = []
        single_upper: list[float] = []
        many_rows: list[Row] = []
        many_upper: list[float] = []
        for k, jobs in sorted(by_class.items()):
            self.deadline.check()
            group = self.classes[k]
            for tick in range(self.ticks):
                terms = {j: self._active(j, tick, partial(self.z_at, j, k)) for j in jobs}
                terms = {j: t for j, t in terms.items() if t}
                if not terms:
                    continue
                if group.single:
                    for r in range(index.capacity.shape[1]):
                        users = [j for j in terms if index.use[j, r] > 0]
                        most = sum(int(index.use[j, r]) * int(index.members[j]) for j in users)
                        if most <= group.free[r, tick]:
                            continue
                        cols = [c for j in users for c, _ in terms[j]]
                        coefs = [float(index.use[j, r]) * s for j in users for _, s in terms[j]]
                        single_rows.append((cols, coefs))
                        single_upper.append(float(group.free[r, tick]))
                else:
                    most = sum(min(int(index.members[j]), len(group.nodes)) for j in terms)
                    if most <= len(group.nodes):
                        continue
                    cols = [c for j in terms for c, _ in terms[j]]
                    coefs = [s for j in terms for _, s in terms[j]]
                    many_rows.append((cols, coefs))
                    many_upper.append(float(len(group.nodes)))
        self._family("X4", single_rows, [-math.inf] * len(single_rows), single_upper)
        self._family("X5", many_rows, [-math.inf] * len(many_rows), many_upper)

    def _add_pools(self) -> None:
        """X7 (C1 summed): the jobs that may use only nodes of a pool use at most what the
        running pods leave of the pool; X8: their pods of at least ``v`` of a resource number
        at most the sum over the pool's nodes of ``floor(left / v)`` (a node with ``left``
        holds no more pods of ``v`` or more). Pools: every job's candidate set, and all nodes."""
        index = self.index
        width = index.capacity.shape[1]
        pools = {frozenset(index.candidates[j]) for j in self.modelled}
        pools.add(frozenset(n for j in self.modelled for n in index.candidates[j]))
        sum_rows: list[Row] = []
        sum_upper: list[float] = []
        count_rows: list[Row] = []
        count_upper: list[float] = []
        for pool in sorted(pools, key=lambda p: (len(p), sorted(p))):
            inside = [j for j in self.modelled if set(index.candidates[j]) <= pool]
            if not inside:
                continue
            nodes = sorted(pool)
            left = self.free[nodes]  # [n, R, T]
            total = left.sum(axis=0)  # [R, T]
            sizes = [sorted({int(index.use[j, r]) for j in inside} - {0}) for r in range(width)]
            counts = {
                (r, v): (left[:, r, :] // v).sum(axis=0) for r in range(width) for v in sizes[r]
            }
            for tick in range(self.ticks):
                if tick % 64 == 0:
                    self.deadline.check()
                terms = {j: self._active(j, tick, partial(self.x_at, j)) for j in inside}
                terms = {j: t for j, t in terms.items() if t}
                if not terms:
                    continue
                for r in range(width):
                    need = {j: int(index.use[j, r]) * int(index.members[j]) for j in terms}
                    need = {j: n for j, n in need.items() if n > 0}
                    if sum(need.values()) > total[r, tick]:
                        sum_rows.append(
                            (
                                [c for j in need for c, _ in terms[j]],
                                [need[j] * s for j in need for _, s in terms[j]],
                            )
                        )
                        sum_upper.append(float(total[r, tick]))
                    for v in sizes[r][1:]:  # the smallest size is the sum row's weaker form
                        big = [j for j in terms if index.use[j, r] >= v]
                        room = int(counts[(r, v)][tick])
                        if sum(int(index.members[j]) for j in big) <= room:
                            continue
                        count_rows.append(
                            (
                                [c for j in big for c, _ in terms[j]],
                                [float(index.members[j]) * s for j in big for _, s in terms[j]],
                            )
                        )
                        count_upper.append(float(room))
        self._family("X7", sum_rows, [-math.inf] * len(sum_rows), sum_upper)
        self._family("X8", count_rows, [-math.inf] * len(count_rows), count_upper)

    # ------------------------------------------------------------------ plans
    def start_values(self, plan: CalendarPlan) -> np.ndarray:
        """Every column's value for ``plan`` (a legal plan; in ``"nodes"``, its nodes' classes)."""
        values = np.zeros(self.num_cols)
        by_job = {start.job: start for start in plan.starts}
        position = {node: n for n, node in enumerate(self.index.node_ids)}
        class_of = {n: k for k, group in enumerate(self.classes) for n in group.nodes}
        horizon = self.index.horizon
        for j in self.modelled:
            start = by_job.get(self.index.job_ids[j])
            if start is None or start.start is None:
                continue
            for tick in range(start.start, horizon):
                col = self.x_at(j, tick)
                if col is not None:
                    values[col] = 1.0
            if not self.exact:
                continue
            level = self.problem.jobs[j].level
            for node in start.nodes:
                k = class_of[position[node]]
                for tick in range(start.start, horizon):
                    col = self.z_at(j, k, tick)
                    if col is not None:
                        values[col] += 1.0
                if level is not None:
                    name = self.classes[k].domain.get(level)
                    g = self.g_col.get((j, str(name)))
                    if g is not None:
                        values[g] = 1.0
        return values

    def objective_of(self, values: np.ndarray) -> float:
        """C8 of a solution: the constant minus the weights of the ``X`` set."""
        return self.constant - float(self.cost @ np.round(values))

    def starts_of(self, values: np.ndarray) -> list[int]:
        """Each job's start tick in ``values`` (the horizon for none)."""
        horizon = self.index.horizon
        out = [horizon] * len(self.index.job_ids)
        for j in self.modelled:
            earliest = self.earliest[j]
            assert earliest is not None
            started = sum(round(values[self.x_col[(j, t)]]) for t in range(earliest, horizon))
            out[j] = horizon - int(started)
        return out

    def plan_of(self, values: np.ndarray, method: str) -> CalendarPlan | None:
        """The ``"nodes"`` solution as a plan: pods per class, one node each (a class whose
        pods cannot share a node: the first node free at the start, starts in order)."""
        if not self.exact:
            return None
        index = self.index
        horizon = index.horizon
        starts = self.starts_of(values)
        busy: dict[int, float] = {}
        nodes_of: dict[int, list[int]] = defaultdict(list)
        for j in sorted(self.modelled, key=lambda j: (starts[j], j)):
            if starts[j] >= horizon:
                continue
            for k in range(len(self.classes)):
                col = self.z_at(j, k, horizon - 1)
                count = 0 if col is None else round(values[col])
                group = self.classes[k]
                for _ in range(count):
                    if group.single:
                        nodes_of[j].append(group.nodes[0])
                        continue
                    node = next(n for n in group.nodes if busy.get(n, -1) <= starts[j])
                    busy[node] = starts[j] + int(index.duration[j])
                    nodes_of[j].append(node)
        plan = []
        for j, job in enumerate(index.job_ids):
            if starts[j] < horizon:
                chosen = [index.node_ids[n] for n in sorted(nodes_of[j])]
                plan.append(JobStart(job=job, start=starts[j], nodes=chosen))
            else:
                plan.append(JobStart(job=job, start=None, reason=_reason(self, j, method)))
        return CalendarPlan(method=method, starts=plan, step=self.problem.step)


def _reason(rows: CalendarRows, j: int, method: str) -> str:
    if not rows.index.candidates[j]:
        reason = "no node may run it (C5)"
    else:
        reason = (
            f"it does not start before the horizon ({rows.index.horizon} ticks) in {method}'s plan"
        )
    simplified = rows.problem.jobs[j].simplified  # F4, said per job
    return reason if not simplified else f"{reason}; {simplified}"


class GridTooFine(Exception):
    """The time-indexed model would have more columns than :data:`MAX_COLUMNS`."""

    def __init__(self, columns: int) -> None:
        super().__init__(columns)
        self.columns = columns


# ---------------------------------------------------------------------- shared driver
def alone_starts(problem: CalendarProblem) -> list[int]:
    """Each job's earliest start beside the running pods only (H3), -1 for none before
    the horizon: no plan starts it earlier (other jobs only take capacity away)."""
    index = problem.index
    return [
        place_all(index, [j])[j][0] if index.candidates[j] else -1
        for j in range(len(index.job_ids))
    ]


def alone_bound(problem: CalendarProblem) -> float:
    """C8 with every job at its earliest start beside the running pods only: a lower bound
    (another job can only take capacity away)."""
    return _alone_value(problem, alone_starts(problem))


def replaced(problem: CalendarProblem, starts: Sequence[int], method: str) -> CalendarPlan:
    """Every job at its earliest start (H2, H3) in the order of ``starts`` (ties: H1's
    order; jobs without a start last): legal by construction."""
    from gpuopt.calendar.greedy import plan_of

    index = problem.index
    rank = {j: r for r, j in enumerate(order(index, "heuristic", problem.step))}
    chosen = sorted(range(len(index.job_ids)), key=lambda j: (starts[j], rank[j]))
    plan = plan_of(problem, "heuristic", jobs=chosen)
    return plan.model_copy(update={"method": method, "notes": []})


@dataclass
class Outcome:
    """What one solver run returned: ``status`` ("optimal", "time_limit", "infeasible",
    "error"), the column values (None: no solution), the proven bound on C8 (None: none)."""

    status: str
    values: np.ndarray | None
    bound: float | None


Runner = Callable[[CalendarRows, Deadline, np.ndarray], Outcome]


def solve_calendar(
    problem: CalendarProblem,
    method: str,
    run: Runner,
    chosen: CalendarExactOptions,
) -> CalendarPlan:
    """Build the rows, run the solver from the starting plan, return the best legal plan
    (``chosen``: the time limit, start and formulation; ``run`` uses the rest)."""
    time_limit, initial, formulation = chosen.time_limit, chosen.initial, chosen.formulation
    if formulation not in FORMULATIONS:
        from gpuopt.errors import ProblemError

        raise ProblemError(f"formulation: {formulation!r} is not one of {', '.join(FORMULATIONS)}.")
    deadline = Deadline(time_limit)
    clock = time.perf_counter()
    start = solve_heuristic(problem)
    notes: list[str] = []
    if initial is not None:
        if violations(problem, initial):
            notes.append("initial: the plan given breaks the rules; the heuristic's is the start")
        else:
            objective = evaluate(problem, initial)
            start = initial.model_copy(update={"objective": objective})
    alone = alone_starts(problem)
    best = start
    best_value = float(start.objective if start.objective is not None else math.inf)
    bound = _alone_value(problem, alone)
    stopped = True
    stages: list[Literal["nodes", "pools"]] = (
        ["pools", "nodes"] if formulation == "auto" else [formulation]
    )
    node_columns = 0
    for stage in stages:
        if relative_gap(best_value, bound, "min") <= OPTIMAL_GAP or deadline.expired():
            break
        if stage == "nodes" and formulation == "auto" and node_columns > NODE_COLUMNS:
            notes.append(
                f"model: no per-node stage ({node_columns} columns, more than {NODE_COLUMNS})"
            )
            break
        try:
            rows = CalendarRows(problem, stage, deadline.part(0.85), alone)
            node_columns = rows.node_columns
            # the pools stage leaves half the time to the per-node stage, if that one runs
            last = stage == stages[-1] or node_columns > NODE_COLUMNS
            part = deadline if last else Deadline(deadline.share(0.5))
            outcome = run(rows, part, rows.start_values(best))
        except DeadlineExceeded:
            notes.append(f"model: the time limit passed while the {stage} model was built")
            break
        except GridTooFine as error:
            notes.append(
                f"model: {error.columns} start columns, more than {MAX_COLUMNS}: the grid is "
                "too fine; plan on a coarser step"
            )
            break
        kind = (
            f"per node class, exact ({len(rows.classes)} classes)"
            if rows.exact
            else "pools, a relaxation (its order re-placed)"
        )
        notes.append(
            f"model: {kind}; {rows.num_cols} columns, {sum(f.rows for f in rows.families)} "
            f"rows, {rows.nonzeros} non-zeros; solver {outcome.status}"
        )
        stopped = outcome.status == "time_limit" or outcome.values is None
        if outcome.bound is not None:
            bound = max(bound, outcome.bound)
        if outcome.values is None:
            continue
        candidates = [replaced(problem, rows.starts_of(outcome.values), method)]
        direct = rows.plan_of(outcome.values, method)
        if direct is not None:
            candidates.insert(0, direct)
        for plan in candidates:
            value = evaluate(problem, plan)
            if value < best_value - 1e-9 and not violations(problem, plan):
                best, best_value = plan, value
    if bound > best_value:  # the solvers' tolerance: a bound a hair above a plan it proves
        if bound - best_value > 1e-6 * max(1.0, abs(best_value)):
            notes.append(f"bound: the solver's {bound} lay above the plan's {best_value}")
        bound = best_value
    if relative_gap(best_value, bound, "min") <= OPTIMAL_GAP:
        status = Status.OPTIMAL
    elif stopped:
        status = Status.TIME_LIMIT
    else:
        status = Status.FEASIBLE
    if best is start:
        notes.append("plan: the starting plan (the solver found none better)")
    return best.model_copy(
        update={
            "method": method,
            "status": status,
            "objective": best_value,
            "bound": bound,
            "seconds": time.perf_counter() - clock,
            "notes": notes,
        }
    )


def _alone_value(problem: CalendarProblem, alone: Sequence[int]) -> float:
    index = problem.index
    return float(
        sum(
            float(index.weight[j]) * ((index.horizon if a < 0 else a) - int(index.submit[j]))
            for j, a in enumerate(alone)
        )
    )


@CALENDAR_KEYWORDS.signature
def solve_milp(
    problem: CalendarProblem, options: CalendarExactOptions | None = None, **settings: Any
) -> CalendarPlan:
    """The calendar's exact model (X1-X9) solved by HiGHS from the heuristic's plan.

    Parameters
    ----------
    problem
        The calendar.

    Returns
    -------
    CalendarPlan
        The best legal plan found, with the proven ``bound`` and ``gap``.

    Examples
    --------
    >>> from gpuopt.calendar.problem import CalendarProblem
    >>> problem = CalendarProblem(
    ...     nodes=[{"id": "a", "capacity": [8]}],
    ...     jobs=[{"id": "long", "use": [8], "duration": 5},
    ...           {"id": "short", "use": [8], "duration": 1}],
    ...     horizon=10)
    >>> plan = solve_milp(problem)
    >>> plan.status, plan.objective, sorted((s.job, s.start) for s in plan.starts)
    ('optimal', 1.0, [('long', 1), ('short', 0)])
    """
    require("highspy", "milp")
    chosen = CALENDAR_KEYWORDS.resolve(options, settings)
    weights = problem.index.weight
    integral = bool(np.all(weights == np.round(weights)))

    def run(rows: CalendarRows, deadline: Deadline, start: np.ndarray) -> Outcome:
        values, status, bound = solve_rows(
            rows,
            deadline.remaining(),
            chosen.seed,
            chosen.threads,
            start,
            chosen.log,
            None,
            INTEGER_GAP if integral else None,
        )
        lower = None if bound is None else -bound
        if status == "infeasible":
            return Outcome("infeasible", None, None)
        return Outcome("optimal" if status == "optimal" else "time_limit", values, lower)

    return solve_calendar(problem, "milp", run, chosen)


__all__ = [
    "CALENDAR_KEYWORDS",
    "FORMULATIONS",
    "MAX_COLUMNS",
    "NODE_COLUMNS",
    "TIME_LIMIT",
    "CalendarExactOptions",
    "CalendarRows",
    "Formulation",
    "NodeClass",
    "alone_bound",
    "solve_calendar",
    "solve_milp",
]
