"""One entry point for every problem: :func:`solve`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from gpuopt.allocation.cpsat import solve_cpsat
from gpuopt.allocation.fifo import solve_fifo
from gpuopt.allocation.greedy import solve_greedy
from gpuopt.allocation.milp import solve_milp
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult

Solver = Callable[..., Any]

#: problem type -> method name -> function(problem, **options)
METHODS: dict[type, dict[str, Solver]] = {
    AllocationProblem: {
        "greedy": solve_greedy,
        "fifo": solve_fifo,
        "cpsat": solve_cpsat,
        "milp": solve_milp,
    },
}


def methods_for(problem: object) -> dict[str, Solver]:
    """The methods that can solve ``problem``, by name."""
    for problem_type, table in METHODS.items():
        if isinstance(problem, problem_type):
            return table
    known = ", ".join(t.__name__ for t in METHODS)
    raise TypeError(f"problem: expected one of {known}, got {type(problem).__name__}")


def solve(
    problem: AllocationProblem,
    method: str = "greedy",
    *,
    time_limit: float | None = None,
    seed: int = 0,
    initial: Any = None,
    **options: Any,
) -> AllocationResult:
    """Solve ``problem`` with ``method`` and return the problem's result type.

    Parameters
    ----------
    problem
        A validated problem, e.g. :class:`gpuopt.AllocationProblem`.
    method
        ``"greedy"`` (default, milliseconds), ``"fifo"`` (the baseline), or the
        exact ``"cpsat"`` (OR-Tools) and ``"milp"`` (Pyomo; ``solver="highs"``
        by default), which start from the greedy grid and report a bound.
    time_limit
        Seconds the method may spend; None keeps the method's default (10 s
        for the exact methods; the heuristics run to completion).
    seed
        Seed for methods that use randomness (the heuristics are deterministic).
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
    if method not in table:
        raise ValueError(f"method {method!r} is not known; choose one of {', '.join(table)}")
    function = table[method]
    accepted = inspect.signature(function).parameters
    given = {"time_limit": time_limit, "seed": seed, "initial": initial, **options}
    call: dict[str, Any] = {}
    for name, value in given.items():
        if name in accepted:
            if value is None and name in ("time_limit", "initial"):
                continue  # keep the method's own default
            call[name] = value
        elif name in options:
            valid = ", ".join(p for p in accepted if p != "problem") or "none"
            raise ValueError(
                f"option {name!r} does not apply to method {method!r}; its options: {valid}"
            )
        elif name == "initial" and value is not None:
            raise ValueError(f"method {method!r} does not take an initial solution")
    result: AllocationResult = function(problem, **call)
    return result
