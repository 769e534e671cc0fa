"""The exact gang model (``models/gang.md``, "Exact model"): columns and labelled row families.

One model chooses the domain of the required level, the pod count on every
admitted node, the victims and the gang closures together, so victims are
never chosen before the topology. :class:`GangRows` writes it once as integer
columns and labelled row families (``lower <= A x <= upper``, the form
:func:`gpuopt.solvers.highs.solve_rows` reads); :mod:`gpuopt.gang.cpsat` hands
the same rows to CP-SAT and :mod:`gpuopt.gang.milp` to HiGHS: one model, never
two formulations. Every coefficient and bound is an exact integer (CPUs,
memory and costs in thousandths), so both solvers read the rows as they are.

The lexicographic objective (cost, preferred domains, victim priorities,
victims and best fit) is solved in stages by :func:`solve_staged`, the same
loop for both solvers: each stage minimises one term with the earlier ones
kept at their optimum, started from the previous stage's solution (the first
from the heuristic's answer).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol

import numpy as np

from gpuopt.cluster.model import SCALE
from gpuopt.gang.greedy import best_plan, domain_bounds
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import GangResult, make_answer
from gpuopt.result import Status
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.highs import GrowingRows, RowFamily, row_family

#: A plan: pod counts per node and the victims' task positions.
Plan = tuple[np.ndarray, frozenset[int]]
#: Sparse terms of one row: (column, coefficient) pairs.
Terms = list[tuple[int, int]]


@dataclass
class GangRows(GrowingRows):
    """Integer columns and labelled row families of the exact gang model.

    Columns (each dict maps a position in the index view to a column):
    ``domain_col[D]`` = ``d_D`` (required domain used), ``pods_col[n]`` =
    ``x_n`` (pods on admitted node ``n``), ``hosts_col[n]`` = ``y_n`` (it holds
    a pod), ``stop_col[t]`` = ``v_t`` (task ``t`` stops), ``close_col[k]`` =
    ``c_k`` (gang ``k`` stops entirely), ``preferred_col[q]`` = ``p_q``
    (preferred domain ``q`` holds a pod), ``slices_col[e]`` = ``z_e`` (slices in
    slice domain ``e``). ``names[col]`` is a readable name with index suffixes.
    ``cost`` is all zeros: each stage's solver sets its own objective from
    :meth:`stages`.
    """

    problem: GangProblem
    nodes: list[int]
    upper: np.ndarray
    names: list[str] = field(default_factory=list)
    domain_col: dict[int, int] = field(default_factory=dict)
    pods_col: dict[int, int] = field(default_factory=dict)
    hosts_col: dict[int, int] = field(default_factory=dict)
    stop_col: dict[int, int] = field(default_factory=dict)
    close_col: dict[int, int] = field(default_factory=dict)
    preferred_col: dict[int, int] = field(default_factory=dict)
    slices_col: dict[int, int] = field(default_factory=dict)
    _uppers: list[int] = field(default_factory=list, repr=False)

    @classmethod
    def build(cls, problem: GangProblem, domains: np.ndarray | None = None) -> GangRows:
        """The rows of ``problem``; ``domains``: the required domains the model may use
        (default all; the others are left out, their lower bound exceeding a known
        answer's objective)."""
        index = problem.index
        bound = index.candidate_capacity if problem.preempting else index.node_capacity
        upper = np.minimum(bound, index.pods)
        usable = index.admitted & (upper > 0)
        if domains is not None:
            allowed = np.zeros(len(index.required.ids), dtype=bool)
            allowed[domains] = True
            usable &= allowed[index.required.of_node]
        rows = cls(problem, [int(n) for n in np.flatnonzero(usable)], upper)
        rows.families = [
            *rows._g1_g2_g4_placement(),
            *rows._p1_p3_victims(),
            rows._g3_capacity(),
            rows._g5_slices(),
            rows._o2_preferred(),
        ]
        num = len(rows._uppers)
        rows.col_lower = np.zeros(num)
        rows.col_upper = np.array(rows._uppers, dtype=float)
        rows.integer = np.ones(num, dtype=bool)
        rows.cost = np.zeros(num)
        return rows

    def _column(self, name: str, upper: int) -> int:
        """A new integer column in ``0..upper``; its position."""
        self.names.append(name)
        self._uppers.append(int(upper))
        return len(self._uppers) - 1

    def _g1_g2_g4_placement(self) -> list[RowFamily]:
        """G4: one domain of the required level; G1: all N pods; G2: on admitted nodes, with
        ``y_n <= x_n <= u_n y_n`` and ``y_n <= d_{D(n)}``."""
        index = self.problem.index
        links: list[Terms] = []
        lower: list[float] = []
        high: list[float] = []
        for n in self.nodes:
            d = int(index.required.of_node[n])
            if d not in self.domain_col:
                self.domain_col[d] = self._column(f"domain_{d}", 1)
            x = self.pods_col[n] = self._column(f"pods_{n}", int(self.upper[n]))
            y = self.hosts_col[n] = self._column(f"hosts_{n}", 1)
            links += [[(x, 1), (y, -1)], [(x, 1), (y, -int(self.upper[n]))]]
            links.append([(y, 1), (self.domain_col[d], -1)])
            lower += [0.0, -math.inf, -math.inf]
            high += [math.inf, 0.0, 0.0]
        one = [(list(self.domain_col.values()), [1.0] * len(self.domain_col))]
        pods = [(list(self.pods_col.values()), [1.0] * len(self.pods_col))]
        return [
            row_family("G4", one, 1.0, 1.0),
            row_family("G1", pods, float(index.pods), float(index.pods)),
            _family("G2", links, lower, high),
        ]

    def _p1_p3_victims(self) -> list[RowFamily]:
        """P1: candidates on admitted nodes, and members of closable gangs they may close;
        P2: a gang stopped beyond its allowance stops entirely; P3: no stray victim."""
        if not self.problem.preempting:
            return []
        index = self.problem.index
        usable = set(self.nodes)
        direct = [
            int(t) for t in np.flatnonzero(index.candidate) if int(index.task_node[t]) in usable
        ]
        gangs = sorted({int(index.task_gang[t]) for t in direct} - {-1})
        for k in gangs:
            if index.gang_closable[k]:
                self.close_col[k] = self._column(f"close_{k}", 1)
        for t in direct:
            self.stop_col[t] = self._column(f"stop_{t}", 1)
        for k in self.close_col:
            for t in index.gang_members[k].tolist():
                if t not in self.stop_col:
                    self.stop_col[t] = self._column(f"stop_{t}", 1)
        p1: list[Terms] = []
        p1_upper: list[float] = []
        p2: list[Terms] = []
        p2_lower: list[float] = []
        p2_upper: list[float] = []
        p3: list[Terms] = []
        for t, v in self.stop_col.items():  # on a hosting node, or closed with its gang
            n, k = int(index.task_node[t]), int(index.task_gang[t])
            row = [(v, 1)]
            if n in self.hosts_col:
                row.append((self.hosts_col[n], -1))
            if k in self.close_col:
                row.append((self.close_col[k], -1))
            p3.append(row)
        for k in gangs:
            members = index.gang_members[k].tolist()
            allowance = int(index.gang_allowance[k])
            listed = [(self.stop_col[t], 1) for t in members if t in self.stop_col]
            c = self.close_col.get(k)
            if c is None:  # a member may not stop, so the gang may not close
                p1.append(listed)
                p1_upper.append(float(allowance))
                continue
            p2 += [[(v, 1), (c, -1)] for v, _ in listed]
            p2_lower += [0.0] * len(listed)
            p2_upper += [math.inf] * len(listed)
            p2.append([*listed, (c, -len(members))])
            p2_lower.append(-math.inf)
            p2_upper.append(float(allowance))
            hosting = [
                (self.hosts_col[n], -1)
                for n in index.task_node[members].tolist()
                if n in self.hosts_col
            ]
            p3.append([(c, 1), *hosting])  # a closed gang has a member on a hosting node
        return [
            _family("P1", p1, [-math.inf] * len(p1), p1_upper),
            _family("P2", p2, p2_lower, p2_upper),
            _family("P3", p3, [-math.inf] * len(p3), [0.0] * len(p3)),
        ]

    def _g3_capacity(self) -> RowFamily:
        """G3: each resource the pods need fits what is free once the victims stop."""
        index = self.problem.index
        by_node: dict[int, list[int]] = {}
        for t in self.stop_col:
            by_node.setdefault(int(index.task_node[t]), []).append(t)
        rows: list[Terms] = []
        upper: list[float] = []
        for n in self.nodes:
            on = by_node.get(n, [])
            for r, need in enumerate(index.pod_need.tolist()):
                free = int(index.node_free[n, r])
                if need == 0 or free >= need * int(self.upper[n]):
                    continue  # never binds
                freed = [(self.stop_col[t], -int(index.task_hold[t, r])) for t in on]
                rows.append([(self.pods_col[n], need), *freed])
                upper.append(float(free))
        return _family("G3", rows, [-math.inf] * len(rows), upper)

    def _g5_slices(self) -> RowFamily:
        """G5: the pods of each slice domain are a multiple of the slice size."""
        index = self.problem.index
        if index.slice is None:
            return _family("G5", [], [], [])
        size = index.slice_size
        groups: dict[int, Terms] = {}
        for n in self.nodes:
            groups.setdefault(int(index.slice.of_node[n]), []).append((self.pods_col[n], 1))
        rows = []
        for e, pods in groups.items():
            z = self.slices_col[e] = self._column(f"slices_{e}", index.pods // size)
            rows.append([*pods, (z, -size)])
        return _family("G5", rows, [0.0] * len(rows), [0.0] * len(rows))

    def _o2_preferred(self) -> RowFamily:
        """O2 (objective term 2): a preferred domain is used when one of its nodes holds a pod."""
        index = self.problem.index
        rows: list[Terms] = []
        if index.preferred is not None:
            for n in self.nodes:
                q = int(index.preferred.of_node[n])
                if q not in self.preferred_col:
                    self.preferred_col[q] = self._column(f"preferred_{q}", 1)
                rows.append([(self.hosts_col[n], 1), (self.preferred_col[q], -1)])
        return _family("O2", rows, [-math.inf] * len(rows), [0.0] * len(rows))

    def stages(self) -> list[np.ndarray]:
        """The objective's terms as integer column costs, most important first (minimised).

        Preemption: cost, preferred domains, (with ``tie_break="priority"``) victim
        priorities, then victims and best fit as one term; placement only: domains, then
        best fit (``models/gang.md``, "Objective").
        """
        index = self.problem.index
        num = self.num_cols
        domains = np.zeros(num, dtype=np.int64)
        domains[list(self.preferred_col.values())] = 1
        most_fit = index.pods * int(max(1, index.node_free[:, 0].max(initial=0))) + 1
        last = np.zeros(num, dtype=np.int64)
        for n, x in self.pods_col.items():
            last[x] = int(index.node_free[n, 0])
        last[list(self.stop_col.values())] = most_fit
        if not self.problem.preempting:
            return [domains, last]
        cost = np.zeros(num, dtype=np.int64)
        priority = np.zeros(num, dtype=np.int64)
        for t, v in self.stop_col.items():
            cost[v] = int(index.task_cost[t])
            priority[v] = int(index.task_priority[t])
        terms = [cost, domains]
        if self.problem.options.tie_break == "priority":
            terms.append(priority)
        return [*terms, last]

    def start_values(self, plan: Plan) -> np.ndarray:
        """The value of every column in a plan (a start for either solver)."""
        count, victims = plan
        index = self.problem.index
        values = np.zeros(self.num_cols, dtype=np.int64)
        hosted = [n for n in self.pods_col if count[n]]
        for n, x in self.pods_col.items():
            values[x] = int(count[n])
            values[self.hosts_col[n]] = int(count[n] > 0)
        chosen = {int(index.required.of_node[n]) for n in hosted}
        for d, col in self.domain_col.items():
            values[col] = int(d in chosen)
        for t, col in self.stop_col.items():
            values[col] = int(t in victims)
        for k, col in self.close_col.items():
            values[col] = int(
                all(t in victims for t in index.gang_members[k].tolist())
                and len(index.gang_members[k]) > index.gang_allowance[k]
            )
        if index.preferred is not None:
            used = {int(index.preferred.of_node[n]) for n in hosted}
            for q, col in self.preferred_col.items():
                values[col] = int(q in used)
        if index.slice is not None:
            for e, col in self.slices_col.items():
                pods = sum(int(count[n]) for n in self.nodes if index.slice.of_node[n] == e)
                values[col] = pods // index.slice_size
        return values

    def read(self, values: np.ndarray) -> Plan:
        """The plan in a solution: pod counts per node and victim task positions."""
        rounded = np.rint(np.asarray(values, dtype=float)).astype(np.int64)
        count = np.zeros(self.problem.index.num_nodes, dtype=np.int64)
        for n, x in self.pods_col.items():
            count[n] = int(rounded[x])
        victims = frozenset(t for t, v in self.stop_col.items() if rounded[v])
        return count, victims


def _family(label: str, rows: list[Terms], lower: list[float], upper: list[float]) -> RowFamily:
    """A row family from sparse rows, repeated columns of a row summed (HiGHS refuses them)."""
    merged = []
    for row in rows:
        coefs: dict[int, int] = {}
        for col, coef in row:
            coefs[col] = coefs.get(col, 0) + coef
        merged.append((list(coefs), [float(c) for c in coefs.values()]))
    return row_family(label, merged, np.array(lower, dtype=float), np.array(upper, dtype=float))


class StageOutcome(NamedTuple):
    """One stage's search: ``values`` (None: no solution) and a proven lower ``bound`` on
    the minimised term (None: none proven)."""

    status: Literal["optimal", "time_limit", "infeasible"]
    values: np.ndarray | None
    bound: float | None


class StageSolver(Protocol):
    """A solver of the rows, stage by stage (:mod:`gpuopt.gang.cpsat`, :mod:`gpuopt.gang.milp`)."""

    def minimise(self, term: np.ndarray, start: np.ndarray | None) -> StageOutcome:
        """Minimise ``term`` (column costs) from the ``start`` values of every column."""
        ...

    def keep(self, term: np.ndarray, value: int) -> None:
        """From now on, ``term`` may be at most ``value`` (a solved stage's optimum)."""
        ...


def solve_staged(
    problem: GangProblem,
    method: str,
    solver_of: Callable[[GangRows, Deadline], StageSolver],
    time_limit: float | None,
) -> GangResult:
    """The exact answer by ``solver_of``'s solver: the lexicographically best plan.

    The heuristic runs first; the required domains whose lower bound exceeds
    its objective are left out of the model (they cannot win), and its plan
    starts the first stage. ``bound`` is the first stage's proof, never below
    the heuristic's lower bound (which stands alone when the solver proved
    nothing in time). When the heuristic's bound already proves that no domain
    has room (as its own answer says), the answer is infeasible without a
    search. ``time_limit`` counts from this call.
    """
    started = time.perf_counter()
    deadline = Deadline(time_limit)
    scale = SCALE if problem.preempting else 1
    plan, key, floor = best_plan(problem)
    kept = None
    if key is not None:  # a domain whose bound exceeds the heuristic's objective cannot win
        bounds = domain_bounds(problem)
        kept = np.flatnonzero(bounds <= (key.cost if problem.preempting else key.domains))
    if plan is None and math.isinf(floor):  # no domain has the room, even with every victim
        return make_answer(
            problem,
            method,
            Status.INFEASIBLE,
            None,
            (),
            bound=None,
            seconds=time.perf_counter() - started,
        )
    rows = GangRows.build(problem, kept)

    def answer(
        status: Status, chosen: Plan | None, bound: float | None, notes: list[str] | None = None
    ) -> GangResult:
        count, victims = (None, frozenset[int]()) if chosen is None else chosen
        return make_answer(
            problem,
            method,
            status,
            count,
            victims,
            bound=bound,
            seconds=time.perf_counter() - started,
            notes=notes,
        )

    if not rows.nodes:
        return answer(Status.INFEASIBLE, None, None)
    staged = run_stages(rows, solver_of(rows, deadline), plan)
    if staged is None:
        return answer(Status.INFEASIBLE, None, None)
    status, chosen, primary_bound = staged
    if status != Status.OPTIMAL and math.isfinite(floor):  # the heuristic's bound holds too
        primary_bound = floor if primary_bound is None else max(primary_bound, floor)
    bound = None if primary_bound is None else primary_bound / scale
    if chosen is None:
        return answer(Status.TIME_LIMIT, None, bound, ["no plan found within the time limit"])
    return answer(status, chosen, bound)


def run_stages(
    rows: GangRows, solver: StageSolver, plan: Plan | None
) -> tuple[Status, Plan | None, float | None] | None:
    """Solve the stages of ``rows`` in order from ``plan`` (None: proven infeasible).

    Returns the status (optimal when every stage was proven), the best plan
    (``plan`` when no stage found one) and the first stage's proven lower bound
    in the model's units (None when none was proven).
    """
    chosen = plan
    start = None if plan is None else rows.start_values(plan)
    primary_bound: float | None = None
    solved = 0  # stages solved so far
    for term in rows.stages():
        if not term.any():  # a constant 0 (no preferred level, no victims)
            primary_bound = 0.0 if primary_bound is None else primary_bound
            continue
        outcome = solver.minimise(term, start)
        if outcome.status == "infeasible":
            if solved == 0:
                return None
            break  # not reached: the previous stage's solution satisfies this one
        solved += 1
        if outcome.values is None:
            return Status.TIME_LIMIT, chosen, primary_bound
        chosen = rows.read(outcome.values)
        start = rows.start_values(chosen)
        value = int(term @ start)
        if primary_bound is None:
            if outcome.status == "optimal":
                primary_bound = float(value)
            elif outcome.bound is not None:  # the stage's objective is an integer
                primary_bound = float(math.ceil(outcome.bound - 1e-6))
        if outcome.status != "optimal":
            return Status.TIME_LIMIT, chosen, primary_bound
        solver.keep(term, value)
    return Status.OPTIMAL, chosen, primary_bound


__all__ = ["GangRows", "Plan", "StageOutcome", "StageSolver", "run_stages", "solve_staged"]
