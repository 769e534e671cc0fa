"""The exact method: one CP-SAT model of domain, pods per node, victims and gang closures.

The model of ``models/gang.md`` ("Exact model") chooses the domain of the
required level, the pod count on every admitted node, the victims and the
closed gangs together, so victims are never chosen before the topology. The
lexicographic objective (cost, preferred domains, victim priorities, victims
and best fit) is solved in stages: each stage minimises one term with the
earlier ones fixed at their optimum, hinted with the previous solution (the
first with the heuristic's answer). Costs are exact integers (thousandths).
One worker and a fixed seed by default: the same state gives the same answer.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from gpuopt.cluster.model import SCALE
from gpuopt.gang.greedy import best_plan, domain_bounds
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import GangAnswer, make_answer
from gpuopt.result import Status
from gpuopt.solvers.cpsat import hint_all, run_cpsat
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.run import SOLVER_KEYWORDS, ExactOptions

#: Default seconds of the whole call.
TIME_LIMIT = 10.0


class GangModel:
    """The CP-SAT model of one gang problem (variables keyed by positions in the index view)."""

    def __init__(self, problem: GangProblem, domains: np.ndarray | None = None) -> None:
        """``domains``: the required domains the model may use (default all); the others
        are left out (their lower bound exceeds a known answer's objective)."""
        from ortools.sat.python import cp_model

        self.cp_model = cp_model
        self.problem = problem
        self.model = cp_model.CpModel()
        index = self.index = problem.index
        bound = index.candidate_capacity if problem.preempting else index.node_capacity
        self.upper = np.minimum(bound, index.pods)
        usable = index.admitted & (self.upper > 0)
        if domains is not None:
            allowed = np.zeros(len(index.required.ids), dtype=bool)
            allowed[domains] = True
            usable &= allowed[index.required.of_node]
        self.nodes = [int(n) for n in np.flatnonzero(usable)]
        self.domain: dict[int, Any] = {}  # required domain -> BoolVar
        self.pods: dict[int, Any] = {}  # node -> IntVar: its pods
        self.hosts: dict[int, Any] = {}  # node -> BoolVar: it holds a pod
        self.stop: dict[int, Any] = {}  # task -> BoolVar: it stops
        self.close: dict[int, Any] = {}  # gang -> BoolVar: it stops entirely (P2)
        self.preferred: dict[int, Any] = {}  # preferred domain -> BoolVar: it holds a pod
        self.slices: dict[int, Any] = {}  # slice domain -> IntVar: slices of it
        self._placement()
        self._victims()
        self._capacity()
        self._slices()
        self._preferred()

    def _placement(self) -> None:
        """G1, G2, G4: one domain of the required level holds all pods, on admitted nodes."""
        model, index = self.model, self.index
        for n in self.nodes:
            d = int(index.required.of_node[n])
            if d not in self.domain:
                self.domain[d] = model.new_bool_var(f"domain_{d}")
            x = self.pods[n] = model.new_int_var(0, int(self.upper[n]), f"pods_{n}")
            y = self.hosts[n] = model.new_bool_var(f"hosts_{n}")
            model.add(x >= y)
            model.add(x <= int(self.upper[n]) * y)
            model.add_implication(y, self.domain[d])
        model.add_exactly_one(list(self.domain.values()))
        model.add(sum(self.pods.values()) == index.pods)

    def _victims(self) -> None:
        """P1-P3: candidates on admitted nodes and the members of gangs they may close."""
        if not self.problem.preempting:
            return
        model, index = self.model, self.index
        usable = set(self.nodes)
        direct = [
            int(t) for t in np.flatnonzero(index.candidate) if int(index.task_node[t]) in usable
        ]
        gangs = sorted({int(index.task_gang[t]) for t in direct} - {-1})
        for k in gangs:
            if index.gang_closable[k]:
                self.close[k] = model.new_bool_var(f"close_{k}")
        for t in direct:
            self.stop[t] = model.new_bool_var(f"stop_{t}")
        for k in self.close:
            for t in index.gang_members[k].tolist():
                if t not in self.stop:
                    self.stop[t] = model.new_bool_var(f"stop_{t}")
        for t, v in self.stop.items():
            n, k = int(index.task_node[t]), int(index.task_gang[t])
            reasons = [self.hosts[n]] if n in self.hosts else []
            if k in self.close:
                reasons.append(self.close[k])
            model.add(v <= sum(reasons))  # P3: on a hosting node, or closed with its gang
        for k in gangs:
            members = index.gang_members[k].tolist()
            allowance = int(index.gang_allowance[k])
            listed = [self.stop[t] for t in members if t in self.stop]
            c = self.close.get(k)
            if c is None:  # P1: a member may not stop, so the gang may not close
                model.add(sum(listed) <= allowance)
                continue
            for v in listed:
                model.add(v >= c)
            model.add(sum(listed) <= allowance + len(members) * c)  # P2
            hosting = [self.hosts[n] for n in index.task_node[members].tolist() if n in self.hosts]
            model.add(c <= sum(hosting))  # P3: a closed gang has a member on a hosting node

    def _capacity(self) -> None:
        """G3: each resource the pods need fits what is free once the victims stop."""
        index = self.index
        by_node: dict[int, list[int]] = {}
        for t in self.stop:
            by_node.setdefault(int(index.task_node[t]), []).append(t)
        for n in self.nodes:
            on = by_node.get(n, [])
            for r, need in enumerate(index.pod_need.tolist()):
                free = int(index.node_free[n, r])
                if need == 0 or free >= need * int(self.upper[n]):
                    continue
                freed = [int(index.task_hold[t, r]) * self.stop[t] for t in on]
                self.model.add(need * self.pods[n] <= free + sum(freed))

    def _slices(self) -> None:
        """G5: the pods of each slice domain are a multiple of the slice size."""
        index = self.index
        if index.slice is None:
            return
        size = index.slice_size
        groups: dict[int, list[Any]] = {}
        for n in self.nodes:
            groups.setdefault(int(index.slice.of_node[n]), []).append(self.pods[n])
        for e, pods in groups.items():
            z = self.slices[e] = self.model.new_int_var(0, index.pods // size, f"slices_{e}")
            self.model.add(sum(pods) == size * z)

    def _preferred(self) -> None:
        """Objective term 2: a preferred domain is used when one of its nodes holds a pod."""
        index = self.index
        if index.preferred is None:
            return
        for n in self.nodes:
            q = int(index.preferred.of_node[n])
            if q not in self.preferred:
                self.preferred[q] = self.model.new_bool_var(f"preferred_{q}")
            self.model.add_implication(self.hosts[n], self.preferred[q])

    def stages(self) -> list[Term]:
        """The objective's terms as weighted sums, most important first (``models/gang.md``)."""
        index = self.index
        domains = [(p, 1) for p in self.preferred.values()]
        fit = [(x, int(index.node_free[n, 0])) for n, x in self.pods.items()]
        most_fit = index.pods * int(max(1, index.node_free[:, 0].max(initial=0))) + 1
        last = [(v, most_fit) for v in self.stop.values()] + fit
        if not self.problem.preempting:
            return [domains, last]
        cost = [(v, int(index.task_cost[t])) for t, v in self.stop.items()]
        terms = [cost, domains]
        if self.problem.options.tie_break == "priority":
            terms.append([(v, int(index.task_priority[t])) for t, v in self.stop.items()])
        return [*terms, last]

    def hint(self, count: np.ndarray, victims: frozenset[int]) -> None:
        """Hint every variable with a plan (pod counts per node, victim task positions)."""
        index = self.index
        values: dict[int, int] = {}  # variable index -> value
        hosted = set()
        for n, x in self.pods.items():
            values[x.index] = int(count[n])
            values[self.hosts[n].index] = int(count[n] > 0)
            if count[n]:
                hosted.add(n)
        chosen = {int(index.required.of_node[n]) for n in hosted}
        for d, var in self.domain.items():
            values[var.index] = int(d in chosen)
        for t, v in self.stop.items():
            values[v.index] = int(t in victims)
        for k, c in self.close.items():
            values[c.index] = int(
                all(t in victims for t in index.gang_members[k].tolist())
                and len(index.gang_members[k]) > index.gang_allowance[k]
            )
        if index.preferred is not None:
            used = {int(index.preferred.of_node[n]) for n in hosted}
            for q, var in self.preferred.items():
                values[var.index] = int(q in used)
        if index.slice is not None:
            for e, z in self.slices.items():
                pods = sum(int(count[n]) for n in self.nodes if index.slice.of_node[n] == e)
                values[z.index] = pods // index.slice_size
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        hint_all(self.model, list(values), list(values.values()))

    def read(self, values: np.ndarray) -> tuple[np.ndarray, frozenset[int]]:
        """The plan in a solution: pod counts per node and victim task positions."""
        count = np.zeros(self.index.num_nodes, dtype=np.int64)
        for n, x in self.pods.items():
            count[n] = int(values[x.index])
        victims = frozenset(t for t, v in self.stop.items() if values[v.index])
        return count, victims


Term = list[tuple[Any, int]]


def _value(term: Term, values: np.ndarray) -> int:
    """The value of a weighted sum of variables in a solution."""
    return sum(coef * int(values[var.index]) for var, coef in term)


def _expression(term: Term) -> Any:
    from ortools.sat.python import cp_model

    return cp_model.LinearExpr.weighted_sum([v for v, _ in term], [c for _, c in term])


@SOLVER_KEYWORDS.signature
def solve_cpsat(
    problem: GangProblem, options: ExactOptions | None = None, **settings: Any
) -> GangAnswer:
    """The exact answer: the lexicographically best plan over every domain together.

    Its settings (time limit, default :data:`TIME_LIMIT`; seed; threads; log) come as
    keywords or as one :class:`~gpuopt.solvers.run.ExactOptions` (``options``).

    Examples
    --------
    See :mod:`gpuopt.gang`, which solves one problem with both methods.
    """
    run = SOLVER_KEYWORDS.resolve(options, settings)
    started = time.perf_counter()
    deadline = Deadline(run.time_limit)
    scale = SCALE if problem.preempting else 1
    plan, key, _ = best_plan(problem)
    kept = None
    if key is not None:  # a domain whose bound exceeds the heuristic's objective cannot win
        bounds = domain_bounds(problem)
        kept = np.flatnonzero(bounds <= (key.cost if problem.preempting else key.domains))
    gang = GangModel(problem, kept)

    def answer(
        status: Status,
        chosen: tuple[np.ndarray, frozenset[int]] | None,
        bound: float | None,
        notes: list[str] | None = None,
    ) -> GangAnswer:
        count, victims = (None, frozenset()) if chosen is None else chosen
        return make_answer(
            problem,
            "exact",
            status,
            count,
            victims,
            bound=bound,
            seconds=time.perf_counter() - started,
            notes=notes,
        )

    if not gang.nodes:
        return answer(Status.INFEASIBLE, None, None)
    if plan is not None:
        gang.hint(*plan)
    chosen = plan
    primary_bound: float | None = None
    status = Status.OPTIMAL
    solved = 0  # stages solved so far
    for term in gang.stages():
        if not term:  # a constant 0 (no preferred level, no victims)
            primary_bound = 0.0 if primary_bound is None else primary_bound
            continue
        gang.model.minimize(_expression(term))
        outcome = run_cpsat(
            gang.cp_model, gang.model, deadline, seed=run.seed, threads=run.threads, log=run.log
        )
        if outcome.status == "infeasible":
            if solved == 0:
                return answer(Status.INFEASIBLE, None, None)
            break  # not reached: the previous stage's solution satisfies this one
        solved += 1
        if outcome.values is None:
            status = Status.TIME_LIMIT
            break
        chosen = gang.read(outcome.values)
        value = _value(term, outcome.values)
        if primary_bound is None:
            proven = outcome.status == "optimal" or outcome.bound is None
            primary_bound = (
                float(value) if proven else float(math.ceil((outcome.bound or 0.0) - 1e-6))
            )
        if outcome.status != "optimal":
            status = Status.TIME_LIMIT
            break
        gang.model.add(_expression(term) <= value)
        gang.hint(*chosen)
    if chosen is None:
        return answer(Status.TIME_LIMIT, None, None, ["no plan found within the time limit"])
    bound = None if primary_bound is None else primary_bound / scale
    return answer(status, chosen, bound)


__all__ = ["TIME_LIMIT", "GangModel", "solve_cpsat"]
