"""The exact MIG layout model (``models/mig.md``, "Exact model") solved with CP-SAT.

Variables (Booleans, named with their indices):

- ``serve[q]``: pod ``q`` is served; ``at[q, n]``: on node ``n``;
- ``alt[c, r, a]``: request ``r`` of claim ``c`` is served by alternative ``a``;
- ``take[c, r, a, p]``: placement ``p`` serves it (``p`` free, of ``a``'s profile,
  on a node the pod may use);
- ``on[c, g]``: claim ``c`` (asking one GPU) is on GPU ``g``;
- ``cut[g]``: GPU ``g`` (not cut before) is cut by the plan;
- ``open[p]``: free placement ``p`` could still be allocated after the plan.

The objective is the score of :class:`gpuopt.mig.solution.MigMetrics`, one
integer, maximised; the heuristic's answer hints every variable. One worker
and a fixed seed by default: the same problem gives the same answer.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from typing import Any

from gpuopt.mig.greedy import warm_start
from gpuopt.mig.problem import MigProblem
from gpuopt.mig.solution import MigPick, MigResult, make_result, weights
from gpuopt.result import Status
from gpuopt.solvers import require
from gpuopt.solvers.cpsat import run_cpsat
from gpuopt.solvers.deadline import Deadline

#: Default seconds of the whole call.
TIME_LIMIT = 10.0
#: The share of the time limit the warm start's improvements may take (the heuristic's
#: repacks and moves stop there; CP-SAT gets the rest).
WARM_SHARE = 0.5


class MigModel:
    """The CP-SAT model of one problem (see the module docstring for the variables)."""

    def __init__(self, problem: MigProblem) -> None:
        self.cp_model = require("ortools.sat.python.cp_model", "cpsat")
        self.problem = problem
        self.index = problem.index
        self.model = self.cp_model.CpModel()
        self.serve: dict[int, Any] = {}  # q -> serve
        self.at: dict[tuple[int, int], Any] = {}  # (q, node) -> at
        self.alt: dict[tuple[str, str, int], Any] = {}  # (claim, request, alternative) -> alt
        self.take: dict[tuple[str, str, int, int], Any] = {}  # (claim, request, alt, p) -> take
        self.on: dict[tuple[str, int], Any] = {}  # (claim, gpu) -> on
        self.cut: dict[int, Any] = {}  # gpu -> cut
        self.open: dict[int, Any] = {}  # p -> open
        self.uses: defaultdict[int, list[Any]] = defaultdict(list)  # p -> its take variables
        self.groups: list[list[int]] = []  # identical GPUs of one node, in order
        self.requests = {
            (claim.id, request.name): request
            for pod in problem.pods
            for claim in pod.claims
            for request in claim.requests
        }
        self._requests()
        self._distinct()
        self._counters()
        self._cuts()
        self._open()
        self._symmetry()
        self._objective()

    def _requests(self) -> None:
        """M1-M3, M6: a served pod is on one node it may use; each request of each of its
        claims has one alternative, served by ``count`` devices of its profile there; a
        claim asking one GPU has all its devices on one GPU."""
        model, index = self.model, self.index
        for q, pod in enumerate(self.problem.pods):
            serve = self.serve[q] = model.new_bool_var(f"serve[{q}]")
            nodes = index.pod_nodes[q]
            for node in nodes:
                self.at[q, node] = model.new_bool_var(f"at[{q},{node}]")
            model.add(sum(self.at[q, node] for node in nodes) == serve)
            for claim in pod.claims:
                gpus: dict[int, Any] = {}
                for request in claim.requests:
                    alts = []
                    for a, alternative in enumerate(request.alternatives):
                        chosen = model.new_bool_var(f"alt[{claim.id},{request.name},{a}]")
                        self.alt[claim.id, request.name, a] = chosen
                        alts.append(chosen)
                        takes = []
                        for node in nodes:
                            for p in index.free.get((node, alternative.profile), []):
                                take = model.new_bool_var(
                                    f"take[{claim.id},{request.name},{a},{p}]"
                                )
                                self.take[claim.id, request.name, a, p] = take
                                self.uses[p].append(take)
                                takes.append(take)
                                model.add_implication(take, self.at[q, node])
                                if claim.same_gpu:
                                    g = index.gpu[p]
                                    if g not in gpus:
                                        gpus[g] = model.new_bool_var(f"on[{claim.id},{g}]")
                                        self.on[claim.id, g] = gpus[g]
                                    model.add_implication(take, gpus[g])
                        model.add(sum(takes) == alternative.count * chosen)
                    model.add(sum(alts) == serve)
                if claim.same_gpu:
                    model.add(sum(gpus.values()) == serve)

    def _distinct(self) -> None:
        """M4: a placement serves at most one request (free ones only have variables)."""
        for takes in self.uses.values():
            if len(takes) > 1:
                self.model.add_at_most_one(takes)

    def _counters(self) -> None:
        """M5: per GPU and counter, what the plan draws fits what placements in use left."""
        index = self.index
        for g in range(index.gpus):
            for k, left in enumerate(index.residual[g]):
                terms = [
                    (value, take)
                    for p in index.members[g]
                    for key, value in index.draws[p].items()
                    if key == k
                    for take in self.uses.get(p, [])
                ]
                if terms and sum(value for value, _ in terms) > left:
                    self.model.add(sum(value * take for value, take in terms) <= left)

    def _cuts(self) -> None:
        """Objective term: a GPU not cut before is cut when a MIG placement on it is taken."""
        index = self.index
        for g in range(index.gpus):
            if index.cut_before[g]:
                continue
            takes = [
                take
                for p in index.members[g]
                if not index.whole[p]
                for take in self.uses.get(p, [])
            ]
            if takes:
                cut = self.cut[g] = self.model.new_bool_var(f"cut[{g}]")
                for take in takes:
                    self.model.add_implication(take, cut)

    def _open(self) -> None:
        """Objective term: ``open[p]`` only if ``p`` is not taken and its draws fit what is
        left of every counter it draws after the plan."""
        index, model = self.index, self.model
        for p in range(index.placements):
            if index.in_use[p]:
                continue
            g = index.gpu[p]
            if any(value > index.residual[g][k] for k, value in index.draws[p].items()):
                continue  # closed before the plan
            opened = self.open[p] = model.new_bool_var(f"open[{p}]")
            for take in self.uses.get(p, []):
                model.add_implication(take, opened.Not())
            for k, value in index.draws[p].items():
                terms = [
                    (index.draws[other][k], take)
                    for other in index.members[g]
                    if k in index.draws[other]
                    for take in self.uses.get(other, [])
                ]
                if terms:
                    model.add(
                        value * opened + sum(amount * take for amount, take in terms)
                        <= index.residual[g][k]
                    )

    def _symmetry(self) -> None:
        """Identical GPUs of one node (same counters, same placements, same in use) are
        interchangeable: their load (what their taken placements draw, summed) does not
        rise from one to the next. Any answer, its GPUs so permuted, stays legal and scores
        the same."""
        index = self.index
        groups: defaultdict[tuple[Any, ...], list[int]] = defaultdict(list)
        for g in range(index.gpus):
            members = index.members[g]
            if not members:
                continue
            shape = tuple(
                (
                    index.profile[p],
                    index.whole[p],
                    index.in_use[p],
                    tuple(sorted(index.draws[p].items())),
                )
                for p in members
            )
            groups[index.node[members[0]], tuple(index.capacity[g]), shape].append(g)
        self.groups = [same for same in groups.values() if len(same) > 1]
        for same in self.groups:
            loads = [
                sum(
                    sum(index.draws[p].values()) * take
                    for p in index.members[g]
                    for take in self.uses.get(p, [])
                )
                for g in same
            ]
            for first, second in itertools.pairwise(loads):
                self.model.add(first >= second)

    def _objective(self) -> None:
        """The score: weight served, then GPUs newly cut, then placements left open."""
        w_served, w_cut = weights(self.problem)
        self.model.maximize(
            sum(w_served * pod.weight * self.serve[q] for q, pod in enumerate(self.problem.pods))
            - sum(w_cut * cut for cut in self.cut.values())
            + sum(self.open.values())
        )

    def ordered(self, picks: list[MigPick]) -> list[MigPick]:
        """``picks`` with identical GPUs permuted so that their loads fall (as the symmetry
        rows ask), the same answer otherwise."""
        index = self.index
        load = [0] * index.gpus
        for pick in picks:
            p = index.device_of[pick.device]
            load[index.gpu[p]] += sum(index.draws[p].values())
        moved: dict[int, int] = {}
        for same in self.groups:
            by_load = sorted(same, key=lambda g: (-load[g], g))
            for target, source in zip(same, by_load, strict=True):
                for p_target, p_source in zip(
                    index.members[target], index.members[source], strict=True
                ):
                    moved[p_source] = p_target
        return [
            pick.model_copy(
                update={
                    "device": index.keys[
                        moved.get(index.device_of[pick.device], index.device_of[pick.device])
                    ]
                }
            )
            for pick in picks
        ]

    def hint(self, picks: list[MigPick]) -> None:
        """Hint every variable with the answer ``picks`` (permuted by :meth:`ordered`)."""
        index = self.index
        picks = self.ordered(picks)
        taken = {(pick.claim, pick.request, index.device_of[pick.device]) for pick in picks}
        values: dict[Any, int] = {}
        claim_pod = {claim.id: q for q, pod in enumerate(self.problem.pods) for claim in pod.claims}
        pod_node = {
            claim_pod[pick.claim]: index.node[index.device_of[pick.device]] for pick in picks
        }
        for q, var in self.serve.items():
            values[var] = int(q in pod_node)
        for (q, node), var in self.at.items():
            values[var] = int(pod_node.get(q) == node)
        chosen_alt: set[tuple[str, str, int]] = set()
        claim_gpu: set[tuple[str, int]] = set()
        for (claim, request, a, p), var in self.take.items():
            owner = self.requests[claim, request]
            name = owner.alternative_name(owner.alternatives[a])
            value = int((claim, name, p) in taken)
            values[var] = value
            if value:
                chosen_alt.add((claim, request, a))
                claim_gpu.add((claim, index.gpu[p]))
        for alt_key, var in self.alt.items():
            values[var] = int(alt_key in chosen_alt)
        for on_key, var in self.on.items():
            values[var] = int(on_key in claim_gpu)
        used = {p for _, _, p in taken}
        for g, var in self.cut.items():
            values[var] = int(any(p in used and not index.whole[p] for p in index.members[g]))
        left = [list(row) for row in index.residual]
        for p in used:
            for k, value in index.draws[p].items():
                left[index.gpu[p]][k] -= value
        for p, var in self.open.items():
            fits = all(value <= left[index.gpu[p]][k] for k, value in index.draws[p].items())
            values[var] = int(p not in used and fits)
        self.model.clear_hints()
        for var, value in values.items():
            self.model.add_hint(var, value)

    def picks(self, values: Any) -> list[MigPick]:
        """The answer in a solution's variable values."""
        found = []
        for (claim, request, a, p), var in self.take.items():
            if values[var.index]:
                owner = self.requests[claim, request]
                found.append(
                    MigPick(
                        claim=claim,
                        request=owner.alternative_name(owner.alternatives[a]),
                        device=self.index.keys[p],
                    )
                )
        return found


def solve_cpsat(
    problem: MigProblem,
    *,
    time_limit: float = TIME_LIMIT,
    threads: int = 1,
    seed: int = 0,
    log: bool = False,
    initial: MigResult | None = None,
) -> MigResult:
    """The best layout by CP-SAT, started from the heuristic's (or ``initial``), with a bound.

    Parameters
    ----------
    problem
        The GPUs and the waiting pods.
    time_limit
        Seconds for the whole call (the heuristic and the model included).
    threads, seed, log
        CP-SAT's workers, random seed and log (on stderr).
    initial
        A starting answer (default: :func:`gpuopt.mig.greedy.solve_heuristic`'s).

    Returns
    -------
    MigResult
        Status ``optimal`` (proven), or ``time_limit`` with the best answer found and
        CP-SAT's bound on the score; the start itself when the solver found nothing better.

    Examples
    --------
    >>> from gpuopt.mig.generator import random_problem
    >>> from gpuopt.mig.greedy import solve_heuristic
    >>> problem = random_problem(1)
    >>> exact = solve_cpsat(problem, time_limit=5)
    >>> exact.status, exact.objective >= solve_heuristic(problem).objective
    ('optimal', True)
    """
    started = time.perf_counter()
    deadline = Deadline(time_limit)
    if initial is None:  # the warm start's improvements get at most WARM_SHARE of the limit
        start = warm_start(problem, improve=True, deadline=deadline.part(WARM_SHARE))
    else:
        start = initial
    if deadline.expired():  # its warm start took the time: no model is built
        return make_result(
            problem,
            "cpsat",
            start.picks,
            status=Status.TIME_LIMIT,
            seconds=time.perf_counter() - started,
            notes=[
                "no bound: cpsat did not run, its warm start (the heuristic) took the time "
                "limit; the heuristic's answer is returned"
            ],
        )
    mig = MigModel(problem)
    mig.hint(start.picks)
    # linearization level 2: CP-SAT adds the LP relaxation of every row (on 8-GPU nodes it
    # proves in under a second what level 1 does not in 10)
    outcome = run_cpsat(
        mig.cp_model, mig.model, deadline, seed=seed, threads=threads, log=log,
        linearization_level=2,
    )  # fmt: skip
    status = Status.OPTIMAL if outcome.status == "optimal" else Status.TIME_LIMIT
    picks = list(start.picks)
    bound = outcome.bound
    if outcome.values is not None:
        found = mig.picks(outcome.values)
        found_result = make_result(problem, "cpsat", found)
        if found_result.metrics.score >= start.metrics.score:
            picks = found
    if outcome.status == "infeasible":  # never: serving nobody is always an answer
        status = Status.ERROR
    return make_result(
        problem,
        "cpsat",
        picks,
        status=status,
        bound=None if bound is None else float(math.floor(bound + 1e-6)),
        seconds=time.perf_counter() - started,
    )


__all__ = ["TIME_LIMIT", "WARM_SHARE", "MigModel", "solve_cpsat"]
