"""One entry point for every problem: :func:`solve`, :func:`violations` and :func:`evaluate`.

Each dispatches on the problem's type through a plain table
(:data:`METHODS`, :data:`CHECKERS`), so one call serves allocation,
defragmentation (the :class:`~gpuopt.cluster.Cluster` itself), switch- and
node-level placement and preemption.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, overload

import gpuopt.progress
from gpuopt.allocation.cpsat import solve_cpsat
from gpuopt.allocation.fifo import solve_fifo
from gpuopt.allocation.greedy import solve_greedy
from gpuopt.allocation.lns import solve_lns
from gpuopt.allocation.milp import solve_milp
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult
from gpuopt.allocation.solution import evaluate as allocation_evaluate
from gpuopt.allocation.solution import violations as allocation_violations
from gpuopt.calendar.cpsat import solve_cpsat as calendar_cpsat
from gpuopt.calendar.greedy import solve_conservative as calendar_conservative
from gpuopt.calendar.greedy import solve_easy as calendar_easy
from gpuopt.calendar.greedy import solve_fifo as calendar_fifo
from gpuopt.calendar.greedy import solve_heuristic as calendar_heuristic
from gpuopt.calendar.milp import solve_milp as calendar_milp
from gpuopt.calendar.problem import CalendarProblem
from gpuopt.calendar.solution import CalendarPlan
from gpuopt.calendar.solution import evaluate as calendar_evaluate
from gpuopt.calendar.solution import violations as calendar_violations
from gpuopt.defrag.methods import ALIASES as DEFRAG_ALIASES
from gpuopt.defrag.methods import METHODS as DEFRAG_METHODS
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import DefragResult
from gpuopt.defrag.solution import evaluate as defrag_evaluate
from gpuopt.defrag.solution import violations as defrag_violations
from gpuopt.errors import ProblemError, ProblemTypeError, short
from gpuopt.gang.cpsat import solve_cpsat as gang_cpsat
from gpuopt.gang.greedy import solve_heuristic as gang_heuristic
from gpuopt.gang.milp import solve_milp as gang_milp
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import GangResult
from gpuopt.gang.solution import evaluate as gang_evaluate
from gpuopt.gang.solution import violations as gang_violations
from gpuopt.mig.cpsat import solve_cpsat as mig_cpsat
from gpuopt.mig.greedy import solve_first_fit as mig_first_fit
from gpuopt.mig.greedy import solve_heuristic as mig_heuristic
from gpuopt.mig.problem import MigProblem
from gpuopt.mig.solution import MigResult
from gpuopt.mig.solution import evaluate as mig_evaluate
from gpuopt.mig.solution import violations as mig_violations
from gpuopt.options import OPTIONS, check_option
from gpuopt.placement.node.greedy import solve_binpack, solve_spread
from gpuopt.placement.node.problem import NodePlacementProblem
from gpuopt.placement.node.solution import NodePlacementResult
from gpuopt.placement.node.solution import violations as node_violations
from gpuopt.placement.switch.cpsat import solve_cpsat as topology_cpsat
from gpuopt.placement.switch.greedy import solve_greedy as topology_greedy
from gpuopt.placement.switch.milp import solve_milp as topology_milp
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.placement.switch.solution import TopologyResult
from gpuopt.placement.switch.solution import violations as topology_violations
from gpuopt.preemption.cpsat import solve_cpsat as preemption_cpsat
from gpuopt.preemption.dp import solve_exact
from gpuopt.preemption.greedy import solve_heuristic
from gpuopt.preemption.milp import solve_milp as preemption_milp
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.preemption.solution import ALIASES as PREEMPTION_ALIASES
from gpuopt.preemption.solution import PreemptionResult
from gpuopt.preemption.solution import evaluate as preemption_evaluate
from gpuopt.preemption.solution import violations as preemption_violations
from gpuopt.result import Result

Solver = Callable[..., Any]

#: problem type -> method name -> function(problem, **options). The first is the
#: default, and is every problem's ``"heuristic"``.
METHODS: dict[type, dict[str, Solver]] = {
    AllocationProblem: {
        "heuristic": solve_greedy,
        "fifo": solve_fifo,
        "cpsat": solve_cpsat,
        "milp": solve_milp,
        "lns": solve_lns,
    },
    Cluster: dict(DEFRAG_METHODS),
    TopologyProblem: {"heuristic": topology_greedy, "milp": topology_milp, "cpsat": topology_cpsat},
    NodePlacementProblem: {"heuristic": solve_binpack, "spread": solve_spread},
    PreemptionProblem: {
        "heuristic": solve_heuristic,
        "dp": solve_exact,
        "milp": preemption_milp,
        "cpsat": preemption_cpsat,
    },
    GangProblem: {"heuristic": gang_heuristic, "cpsat": gang_cpsat, "milp": gang_milp},
    CalendarProblem: {
        "heuristic": calendar_heuristic,
        "conservative": calendar_conservative,
        "easy": calendar_easy,
        "fifo": calendar_fifo,
        "cpsat": calendar_cpsat,
        "milp": calendar_milp,
    },
    MigProblem: {"heuristic": mig_heuristic, "first-fit": mig_first_fit, "cpsat": mig_cpsat},
}

#: problem type -> old name -> method name: the names of earlier releases, still
#: accepted wherever a method is named (:func:`solve`, the CLI's ``--method``, JSON
#: inputs) and answered under the new name. The one alias table: add entries here.
ALIASES: dict[type, dict[str, str]] = {
    AllocationProblem: {"greedy": "heuristic"},
    Cluster: DEFRAG_ALIASES,
    TopologyProblem: {"greedy": "heuristic"},
    NodePlacementProblem: {"binpack": "heuristic"},
    PreemptionProblem: PREEMPTION_ALIASES,
    GangProblem: {"exact": "cpsat"},
    CalendarProblem: {},
    MigProblem: {},
}

#: problem type -> (the problem's independent checker, its evaluator or None).
#: A checker takes ``(problem, result)`` and returns rule breaches (empty when
#: legal); an evaluator recomputes what the result claims, from the problem alone.
CHECKERS: dict[type, tuple[Callable[[Any, Any], list[str]], Callable[[Any, Any], Any] | None]] = {
    AllocationProblem: (allocation_violations, allocation_evaluate),
    Cluster: (defrag_violations, defrag_evaluate),
    TopologyProblem: (topology_violations, None),
    NodePlacementProblem: (node_violations, None),
    PreemptionProblem: (preemption_violations, preemption_evaluate),
    GangProblem: (gang_violations, gang_evaluate),
    CalendarProblem: (calendar_violations, calendar_evaluate),
    MigProblem: (mig_violations, mig_evaluate),
}

#: problem type -> what its answer is called in messages.
ANSWER_NAMES: dict[type, str] = {
    AllocationProblem: "grid",
    Cluster: "plan",
    TopologyProblem: "placement",
    NodePlacementProblem: "placement",
    PreemptionProblem: "decision",
    GangProblem: "answer",
    CalendarProblem: "plan",
    MigProblem: "layout",
}


#: Options checked by :func:`solve` before any method runs: name -> (accept, what it must be).
#: Made from :data:`gpuopt.options.OPTIONS`, where each option is declared once.
#: None always means "the method's default".
OPTION_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    name: (option.accepts, option.what) for name, option in OPTIONS.items()
}


def check_options(options: dict[str, Any]) -> None:
    """Raise a one-sentence :class:`ProblemError` for an option value no method can take."""
    for name, value in options.items():
        message = check_option(name, value)
        if message is not None:
            raise ProblemError(message)


def _problem_type(problem: object) -> type:
    for problem_type in METHODS:
        if isinstance(problem, problem_type):
            return problem_type
    known = ", ".join(t.__name__ for t in METHODS)
    hint = " (build one from a dict with, e.g., AllocationProblem(**data))"
    raise ProblemTypeError(
        f"problem: expected one of {known}, got {type(problem).__name__}"
        + (hint if isinstance(problem, dict) else "")
        + "."
    )


def methods_for(problem: object) -> dict[str, Solver]:
    """The methods that can solve ``problem``, by name (the new names; see :data:`ALIASES`)."""
    return METHODS[_problem_type(problem)]


def aliases_for(problem: object) -> dict[str, str]:
    """The old method names ``problem`` still accepts: old name -> method name."""
    return ALIASES.get(_problem_type(problem), {})


def method_name(problem: object, method: str | None) -> str:
    """The name of the method ``method`` asks for on ``problem``: an old name (an alias)
    gives the new one, None the problem's default.

    >>> from gpuopt.allocation.problem import AllocationProblem
    >>> problem = AllocationProblem(gpus=1, horizon=1, tasks=[])
    >>> method_name(problem, "greedy"), method_name(problem, None), method_name(problem, "milp")
    ('heuristic', 'heuristic', 'milp')

    Raises
    ------
    ValueError
        For a method the problem does not have (an old name of another problem's
        method included), listing the names it has.
    """
    table = methods_for(problem)
    if method is None:
        return next(iter(table))
    if isinstance(method, str):
        method = aliases_for(problem).get(method, method)
    if not isinstance(method, str) or method not in table:
        raise ValueError(f"method {short(method)} is not known; choose one of {', '.join(table)}.")
    return method


def options_of(problem: object, method: str) -> list[str]:
    """The keyword options ``method`` (a name or an old name) takes for ``problem``
    (``time_limit``, ``seed``, ...).

    >>> from gpuopt.allocation.problem import AllocationProblem
    >>> problem = AllocationProblem(gpus=1, horizon=1, tasks=[])
    >>> options_of(problem, "fifo"), "time_limit" in options_of(problem, "cpsat")
    ([], True)
    """
    function = method_function(problem, method)
    return [name for name in inspect.signature(function).parameters if name != "problem"]


def method_function(problem: object, method: str | None) -> Solver:
    """The function of ``method`` (a name or an old name; None: the problem's default)
    for ``problem``.

    Raises
    ------
    ValueError
        For a method the problem does not have, listing those it has.
    """
    return methods_for(problem)[method_name(problem, method)]


def answer_name(problem: object) -> str:
    """What an answer to ``problem`` is called: ``"grid"``, ``"plan"``, ``"placement"``, ..."""
    return ANSWER_NAMES[_problem_type(problem)]


def _result_grid(result: Any) -> Any:
    return result.grid if isinstance(result, AllocationResult) else result


def violations(problem: object, result: Any) -> list[str]:
    """Every rule ``result`` breaks for ``problem`` (an empty list when it is legal).

    Dispatches on the problem's type to its independent checker (rules A, D,
    T, N and P of ``models/``). An allocation result's schedule is checked
    against its grid too (rules S); an allocation result may also be given as
    its grid, a migration plan as its list of moves.

    >>> from gpuopt.allocation.problem import AllocationProblem
    >>> problem = AllocationProblem(gpus=2, horizon=1, tasks=[
    ...     {"id": "a", "kind": "training", "priority": 1, "gpus": 2, "duration": 1}])
    >>> violations(problem, solve(problem)), violations(problem, [["a", None]])[0][:3]
    ([], 'A2:')
    """
    check, _ = CHECKERS[_problem_type(problem)]
    return check(problem, result)


def evaluate(problem: object, result: Any) -> Any:
    """What ``result`` achieves, recomputed from ``problem`` alone by the problem's evaluator.

    Allocation: an :class:`~gpuopt.allocation.solution.Evaluation` (objective
    and metrics); defragmentation: ``(metrics, emptied node ids)``;
    preemption: the victims' lost work. Placement results carry no objective
    beyond what :func:`violations` checks, so they have no evaluator.

    Raises
    ------
    ValueError
        For a problem type without an evaluator.
    """
    problem_type = _problem_type(problem)
    _, measure = CHECKERS[problem_type]
    if measure is None:
        raise ValueError(f"{problem_type.__name__} results have no evaluator; use violations.")
    if isinstance(problem, AllocationProblem):
        result = _result_grid(result)
    elif isinstance(problem, Cluster) and isinstance(result, DefragResult):
        result = result.moves
    return measure(problem, result)


# One overload per problem type, so that a caller gets its answer's type. time_limit, seed
# and initial are keywords of **options here, checked when solve runs (check_options).
@overload
def solve(
    problem: AllocationProblem, method: str | None = ..., **options: Any
) -> AllocationResult: ...
@overload
def solve(
    problem: PreemptionProblem, method: str | None = ..., **options: Any
) -> PreemptionResult: ...
@overload
def solve(problem: GangProblem, method: str | None = ..., **options: Any) -> GangResult: ...
@overload
def solve(problem: TopologyProblem, method: str | None = ..., **options: Any) -> TopologyResult: ...
@overload
def solve(
    problem: NodePlacementProblem, method: str | None = ..., **options: Any
) -> NodePlacementResult: ...
@overload
def solve(problem: Cluster, method: str | None = ..., **options: Any) -> DefragResult: ...
@overload
def solve(problem: CalendarProblem, method: str | None = ..., **options: Any) -> CalendarPlan: ...
@overload
def solve(problem: MigProblem, method: str | None = ..., **options: Any) -> MigResult: ...


def solve(
    problem: AllocationProblem
    | Cluster
    | TopologyProblem
    | NodePlacementProblem
    | PreemptionProblem
    | GangProblem
    | CalendarProblem
    | MigProblem,
    method: str | None = None,
    *,
    time_limit: float | None = None,
    seed: int | None = None,
    initial: Any = None,
    **options: Any,
) -> Result:
    """Solve ``problem`` with ``method`` and return the problem's :class:`~gpuopt.Result`.

    Parameters
    ----------
    problem
        A validated problem: :class:`gpuopt.AllocationProblem`, a
        :class:`gpuopt.Cluster` (defragmentation; ``gpuopt.Cluster`` is
        the same class), :class:`gpuopt.TopologyProblem` (switch level),
        :class:`gpuopt.NodePlacementProblem` (node level) or
        :class:`gpuopt.PreemptionProblem`; the last three are built from a
        cluster with their ``from_cluster``.
    method
        Every problem's default is ``"heuristic"`` (valid by construction,
        milliseconds). Allocation: ``"heuristic"``, ``"fifo"`` (the baseline),
        ``"lns"``, or the exact ``"cpsat"`` (OR-Tools) and ``"milp"`` (Pyomo;
        ``solver="highs"`` by default), which start from the heuristic's grid
        and report a bound. Defragmentation: ``"heuristic"`` (IPC),
        ``"onehop"`` (the baseline), ``"milp"`` (HiGHS) and ``"cpsat"``, which
        start from the heuristic and report a bound. Switch-level placement:
        ``"heuristic"`` (minimum entropy), ``"milp"`` and ``"cpsat"``.
        Node-level placement: ``"heuristic"`` (binpack), ``"spread"``.
        Preemption: ``"heuristic"``, ``"dp"`` (an exact dynamic programme),
        ``"milp"`` (HiGHS) and ``"cpsat"``, which give dp's decision with a
        proof. Gangs (:class:`gpuopt.gang.GangProblem`): ``"heuristic"``,
        ``"cpsat"`` and ``"milp"``. Job calendars
        (:class:`gpuopt.calendar.CalendarProblem`): ``"heuristic"``, the
        baselines ``"conservative"`` and ``"fifo"``, and the exact ``"cpsat"``
        and ``"milp"`` (one time-indexed model), which start from the heuristic
        and report a bound. Dynamic MIG layouts (:class:`gpuopt.mig.MigProblem`):
        ``"heuristic"``, the baseline ``"first-fit"`` (a DRA scheduler's choice
        today) and the exact ``"cpsat"``, which starts from the heuristic and
        reports a bound on the score.
        The names of earlier releases are still accepted (:data:`ALIASES`:
        ``"greedy"``, ``"ipc"``, ``"binpack"``, and ``"exact"`` for
        preemption's ``"dp"`` and the gangs' ``"cpsat"``); the result carries
        the new name.
    time_limit
        Seconds the method may spend; None keeps the method's default (10 s
        for the exact methods; the heuristics run to completion). A method
        that takes no time limit refuses one (see :func:`options_of`).
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
        For an unknown method, or an option (``time_limit`` and ``seed``
        included) the method would ignore.
    ProblemError
        (a ``ValueError``) for an option value no method can take (see
        :data:`OPTION_RULES`), or a problem too large for the method;
        :class:`~gpuopt.errors.ProblemTypeError` (also a ``TypeError``) when
        ``problem`` is not a problem (e.g. a dict).

    Examples
    --------
    >>> import gpuopt
    >>> problem = gpuopt.AllocationProblem(gpus=4, horizon=4, tasks=[
    ...     {"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 2}])
    >>> gpuopt.solve(problem).metrics.completed
    1
    """
    method = method_name(problem, method)
    function = methods_for(problem)[method]
    accepted = inspect.signature(function).parameters
    given = {"time_limit": time_limit, "seed": seed, "initial": initial, **options}
    check_options(given)
    if isinstance(problem, Cluster) and not isinstance(initial, (DefragResult, type(None))):
        raise ProblemError(f"initial must be a DefragResult (got {type(initial).__name__}).")
    call = _method_keywords(method, accepted, given, options)
    limit = call.get("time_limit", getattr(accepted.get("time_limit"), "default", None))
    if limit is None:  # a heuristic: its long steps report themselves
        result: Result = function(problem, **call)
        return result
    with gpuopt.progress.task(method, time_limit=limit):  # time used of the limit, when shown
        result = function(problem, **call)
    return result


def _method_keywords(
    method: str,
    accepted: Mapping[str, inspect.Parameter],
    given: dict[str, Any],
    options: dict[str, Any],
) -> dict[str, Any]:
    """The keywords of ``given`` that ``method`` (whose parameters are ``accepted``) is called
    with: a None ``time_limit``, ``seed`` or ``initial`` keeps the method's default; any
    other keyword it does not take is an error (``options`` are those given by name)."""
    call: dict[str, Any] = {}
    for name, value in given.items():
        if name in accepted:
            if value is None and name in ("time_limit", "seed", "initial"):
                continue  # keep the method's own default
            call[name] = value
        elif name == "initial" and value is not None:
            raise ProblemError(f"method {method!r} does not take an initial solution.")
        elif name in options or value is not None:
            valid = ", ".join(p for p in accepted if p != "problem") or "none"
            raise ProblemError(
                f"option {name!r} does not apply to method {method!r}; its options: {valid}."
            )
    return call
