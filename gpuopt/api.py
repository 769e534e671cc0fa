"""One entry point for every problem: :func:`solve`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, overload

from gpuopt.allocation.cpsat import solve_cpsat
from gpuopt.allocation.fifo import solve_fifo
from gpuopt.allocation.greedy import solve_greedy
from gpuopt.allocation.milp import solve_milp
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult
from gpuopt.defrag.cpsat import solve_cpsat as defrag_cpsat
from gpuopt.defrag.greedy import solve_ipc
from gpuopt.defrag.milp import solve_milp as defrag_milp
from gpuopt.defrag.onehop import solve_onehop
from gpuopt.defrag.problem import DefragProblem
from gpuopt.defrag.solution import MigrationPlan
from gpuopt.placement.greedy import solve_greedy as topology_greedy
from gpuopt.placement.milp import solve_milp as topology_milp
from gpuopt.placement.problem import TopologyProblem
from gpuopt.placement.solution import TopologyResult
from gpuopt.preemption import Decision, PreemptionProblem, solve_exact, solve_heuristic

Solver = Callable[..., Any]

#: problem type -> method name -> function(problem, **options)
METHODS: dict[type, dict[str, Solver]] = {
    AllocationProblem: {
        "greedy": solve_greedy,
        "fifo": solve_fifo,
        "cpsat": solve_cpsat,
        "milp": solve_milp,
    },
    DefragProblem: {
        "ipc": solve_ipc,
        "onehop": solve_onehop,
        "milp": defrag_milp,
        "cpsat": defrag_cpsat,
    },
    TopologyProblem: {"greedy": topology_greedy, "milp": topology_milp},
    PreemptionProblem: {"heuristic": solve_heuristic, "exact": solve_exact},
}


def methods_for(problem: object) -> dict[str, Solver]:
    """The methods that can solve ``problem``, by name."""
    for problem_type, table in METHODS.items():
        if isinstance(problem, problem_type):
            return table
    known = ", ".join(t.__name__ for t in METHODS)
    raise TypeError(f"problem: expected one of {known}, got {type(problem).__name__}")


@overload
def solve(
    problem: AllocationProblem,
    method: str | None = ...,
    *,
    time_limit: float | None = ...,
    seed: int | None = ...,
    initial: Any = ...,
    **options: Any,
) -> AllocationResult: ...


@overload
def solve(
    problem: PreemptionProblem,
    method: str | None = ...,
    *,
    time_limit: float | None = ...,
    seed: int | None = ...,
    initial: Any = ...,
    **options: Any,
) -> Decision: ...


@overload
def solve(
    problem: TopologyProblem,
    method: str | None = ...,
    *,
    time_limit: float | None = ...,
    seed: int | None = ...,
    initial: Any = ...,
    **options: Any,
) -> TopologyResult: ...


@overload
def solve(
    problem: DefragProblem,
    method: str | None = ...,
    *,
    time_limit: float | None = ...,
    seed: int | None = ...,
    initial: Any = ...,
    **options: Any,
) -> MigrationPlan: ...


def solve(
    problem: AllocationProblem | DefragProblem | TopologyProblem | PreemptionProblem,
    method: str | None = None,
    *,
    time_limit: float | None = None,
    seed: int | None = None,
    initial: Any = None,
    **options: Any,
) -> AllocationResult | MigrationPlan | TopologyResult | Decision:
    """Solve ``problem`` with ``method`` and return the problem's result type.

    Parameters
    ----------
    problem
        A validated problem: :class:`gpuopt.AllocationProblem` or
        :class:`gpuopt.DefragProblem`.
    method
        Allocation: ``"greedy"`` (default, milliseconds), ``"fifo"`` (the
        baseline), or the exact ``"cpsat"`` (OR-Tools) and ``"milp"`` (Pyomo;
        ``solver="highs"`` by default), which start from the greedy grid and
        report a bound. Defragmentation: ``"ipc"`` (default), ``"onehop"``
        (the baseline), ``"milp"`` (HiGHS) and ``"cpsat"``, which start from
        ipc and report a bound.
    time_limit
        Seconds the method may spend; None keeps the method's default (10 s
        for the exact methods; the heuristics run to completion).
    seed
        Seed for methods that use randomness (None: the method's default, or
        the snapshot's ``options.seed``).
    initial
        A starting solution for methods that accept one.
    **options
        Method-specific options (e.g. ``improve=False`` for the greedy).

    Raises
    ------
    ValueError
        For an unknown method or an option the method does not take.

    Examples
    --------
    >>> import gpuopt
    >>> problem = gpuopt.AllocationProblem(gpus=4, horizon=4, tasks=[
    ...     {"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 2}])
    >>> gpuopt.solve(problem).metrics.completed
    1
    """
    table = methods_for(problem)
    if method is None:
        method = next(iter(table))
    if method not in table:
        raise ValueError(f"method {method!r} is not known; choose one of {', '.join(table)}")
    function = table[method]
    accepted = inspect.signature(function).parameters
    given = {"time_limit": time_limit, "seed": seed, "initial": initial, **options}
    call: dict[str, Any] = {}
    for name, value in given.items():
        if name in accepted:
            if value is None and name in ("time_limit", "seed", "initial"):
                continue  # keep the method's own default
            call[name] = value
        elif name in options:
            valid = ", ".join(p for p in accepted if p != "problem") or "none"
            raise ValueError(
                f"option {name!r} does not apply to method {method!r}; its options: {valid}"
            )
        elif name == "initial" and value is not None:
            raise ValueError(f"method {method!r} does not take an initial solution")
    result: AllocationResult | MigrationPlan | TopologyResult | Decision = function(problem, **call)
    return result
