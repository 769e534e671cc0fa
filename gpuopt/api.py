"""One entry point for every problem: :func:`solve`, :func:`violations` and :func:`evaluate`.

Each dispatches on the problem's type through one table of import paths
(:data:`KINDS`, read as :data:`METHODS`, :data:`ALIASES` and :data:`CHECKERS`),
so one call serves allocation, defragmentation (the
:class:`~gpuopt.cluster.Cluster` itself), switch- and node-level placement,
preemption, gangs, calendars and MIG layouts, and imports the modules of its own
problem only.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, overload

import gpuopt.progress
from gpuopt.errors import ProblemError, ProblemTypeError, short
from gpuopt.options import OPTIONS, check_option

if TYPE_CHECKING:
    from gpuopt.allocation.problem import AllocationProblem
    from gpuopt.allocation.solution import AllocationResult
    from gpuopt.calendar.problem import CalendarProblem
    from gpuopt.calendar.solution import CalendarPlan
    from gpuopt.defrag.problem import Cluster
    from gpuopt.defrag.solution import DefragResult
    from gpuopt.gang.problem import GangProblem
    from gpuopt.gang.solution import GangResult
    from gpuopt.mig.problem import MigProblem
    from gpuopt.mig.solution import MigResult
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.placement.node.solution import NodePlacementResult
    from gpuopt.placement.switch.problem import TopologyProblem
    from gpuopt.placement.switch.solution import TopologyResult
    from gpuopt.preemption.problem import PreemptionProblem
    from gpuopt.preemption.solution import PreemptionResult
    from gpuopt.result import Result

Solver = Callable[..., Any]


@dataclass(frozen=True, eq=False)
class Kind:
    """One problem type of :func:`solve`, as import paths (``"module:name"``), so that the
    table is read without importing any method: a call imports the modules of its own
    problem only (the command line starts without the others).

    ``methods``: method name -> its function, the first the default (every problem's
    ``"heuristic"``), or the path of such a dict; ``aliases``: old name -> method name, or
    the path of such a dict; ``checker`` and ``evaluator`` (or None) take
    ``(problem, result)``; ``answer`` is what an answer is called in messages, ``result``
    the class of the methods' answers.
    """

    problem: str
    methods: Mapping[str, str] | str
    aliases: Mapping[str, str] | str
    checker: str
    evaluator: str | None
    answer: str
    result: str


def _load(path: str) -> Any:
    """The object at ``path`` (``"module:name"``), importing its module."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


#: The problem types, in the order :func:`solve` tries them: the one table of what it
#: dispatches on (:data:`METHODS`, :data:`ALIASES`, :data:`CHECKERS` and
#: :data:`ANSWER_NAMES` are read from it, each kind's modules imported on first use).
KINDS: tuple[Kind, ...] = (
    Kind(
        "gpuopt.allocation.problem:AllocationProblem",
        {
            "heuristic": "gpuopt.allocation.greedy:solve_greedy",
            "fifo": "gpuopt.allocation.fifo:solve_fifo",
            "cpsat": "gpuopt.allocation.cpsat:solve_cpsat",
            "milp": "gpuopt.allocation.milp:solve_milp",
            "lns": "gpuopt.allocation.lns:solve_lns",
        },
        {"greedy": "heuristic"},
        "gpuopt.allocation.solution:violations",
        "gpuopt.allocation.solution:evaluate",
        "grid",
        "gpuopt.allocation.solution:AllocationResult",
    ),
    Kind(
        "gpuopt.cluster.model:Cluster",
        "gpuopt.defrag.methods:METHODS",
        "gpuopt.defrag.methods:ALIASES",
        "gpuopt.defrag.solution:violations",
        "gpuopt.defrag.solution:evaluate",
        "plan",
        "gpuopt.defrag.solution:DefragResult",
    ),
    Kind(
        "gpuopt.placement.switch.problem:TopologyProblem",
        {
            "heuristic": "gpuopt.placement.switch.greedy:solve_greedy",
            "milp": "gpuopt.placement.switch.milp:solve_milp",
            "cpsat": "gpuopt.placement.switch.cpsat:solve_cpsat",
        },
        {"greedy": "heuristic"},
        "gpuopt.placement.switch.solution:violations",
        None,
        "placement",
        "gpuopt.placement.switch.solution:TopologyResult",
    ),
    Kind(
        "gpuopt.placement.node.problem:NodePlacementProblem",
        {
            "heuristic": "gpuopt.placement.node.greedy:solve_binpack",
            "spread": "gpuopt.placement.node.greedy:solve_spread",
        },
        {"binpack": "heuristic"},
        "gpuopt.placement.node.solution:violations",
        None,
        "placement",
        "gpuopt.placement.node.solution:NodePlacementResult",
    ),
    Kind(
        "gpuopt.preemption.problem:PreemptionProblem",
        {
            "heuristic": "gpuopt.preemption.greedy:solve_heuristic",
            "dp": "gpuopt.preemption.dp:solve_exact",
            "milp": "gpuopt.preemption.milp:solve_milp",
            "cpsat": "gpuopt.preemption.cpsat:solve_cpsat",
        },
        "gpuopt.preemption.solution:ALIASES",
        "gpuopt.preemption.solution:violations",
        "gpuopt.preemption.solution:evaluate",
        "decision",
        "gpuopt.preemption.solution:PreemptionResult",
    ),
    Kind(
        "gpuopt.gang.problem:GangProblem",
        {
            "heuristic": "gpuopt.gang.greedy:solve_heuristic",
            "cpsat": "gpuopt.gang.cpsat:solve_cpsat",
            "milp": "gpuopt.gang.milp:solve_milp",
        },
        {"exact": "cpsat"},
        "gpuopt.gang.solution:violations",
        "gpuopt.gang.solution:evaluate",
        "answer",
        "gpuopt.gang.solution:GangResult",
    ),
    Kind(
        "gpuopt.calendar.problem:CalendarProblem",
        {
            "heuristic": "gpuopt.calendar.greedy:solve_heuristic",
            "conservative": "gpuopt.calendar.greedy:solve_conservative",
            "easy": "gpuopt.calendar.greedy:solve_easy",
            "fifo": "gpuopt.calendar.greedy:solve_fifo",
            "cpsat": "gpuopt.calendar.cpsat:solve_cpsat",
            "milp": "gpuopt.calendar.milp:solve_milp",
        },
        {},
        "gpuopt.calendar.solution:violations",
        "gpuopt.calendar.solution:evaluate",
        "plan",
        "gpuopt.calendar.solution:CalendarPlan",
    ),
    Kind(
        "gpuopt.mig.problem:MigProblem",
        {
            "heuristic": "gpuopt.mig.greedy:solve_heuristic",
            "first-fit": "gpuopt.mig.greedy:solve_first_fit",
            "cpsat": "gpuopt.mig.cpsat:solve_cpsat",
        },
        {},
        "gpuopt.mig.solution:violations",
        "gpuopt.mig.solution:evaluate",
        "layout",
        "gpuopt.mig.solution:MigResult",
    ),
)


#: The defragmentation kind (its problem is the cluster itself; ``initial`` is a plan).
DEFRAG = KINDS[1]


def _is_defrag_result(value: object) -> bool:
    from gpuopt.defrag.solution import DefragResult

    return isinstance(value, DefragResult)


@cache
def _methods(kind: Kind) -> dict[str, Solver]:
    if isinstance(kind.methods, str):
        return dict(_load(kind.methods))
    return {name: _load(path) for name, path in kind.methods.items()}


@cache
def _aliases(kind: Kind) -> dict[str, str]:
    return dict(_load(kind.aliases) if isinstance(kind.aliases, str) else kind.aliases)


@cache
def _checkers(
    kind: Kind,
) -> tuple[Callable[[Any, Any], list[str]], Callable[[Any, Any], Any] | None]:
    return _load(kind.checker), None if kind.evaluator is None else _load(kind.evaluator)


class _Table(Mapping[type, Any]):
    """A table by problem type read from :data:`KINDS`: a kind's entry is imported when it
    is looked up, every kind's when the table is iterated."""

    def __init__(self, entry: Callable[[Kind], Any]) -> None:
        self._entry = entry

    def __getitem__(self, problem_type: type) -> Any:
        for kind in KINDS:
            if _is_kind(problem_type, kind):
                return self._entry(kind)
        raise KeyError(problem_type)

    def __iter__(self) -> Iterator[type]:
        return (_load(kind.problem) for kind in KINDS)

    def __len__(self) -> int:
        return len(KINDS)


def _is_kind(problem_type: type, kind: Kind) -> bool:
    """Whether ``problem_type`` is ``kind``'s problem class (a class not imported yet is
    not: ``problem_type`` itself is)."""
    module, _, name = kind.problem.partition(":")
    found = sys.modules.get(module)
    return found is not None and getattr(found, name, None) is problem_type


#: problem type -> method name -> function(problem, **options). The first is the
#: default, and is every problem's ``"heuristic"``.
METHODS: Mapping[type, dict[str, Solver]] = _Table(_methods)

#: problem type -> old name -> method name: the names of earlier releases, still
#: accepted wherever a method is named (:func:`solve`, the CLI's ``--method``, JSON
#: inputs) and answered under the new name. The one alias table: add entries to :data:`KINDS`.
ALIASES: Mapping[type, dict[str, str]] = _Table(_aliases)

#: problem type -> (the problem's independent checker, its evaluator or None).
#: A checker takes ``(problem, result)`` and returns rule breaches (empty when
#: legal); an evaluator recomputes what the result claims, from the problem alone.
CHECKERS: Mapping[
    type, tuple[Callable[[Any, Any], list[str]], Callable[[Any, Any], Any] | None]
] = _Table(_checkers)

#: problem type -> what its answer is called in messages.
ANSWER_NAMES: Mapping[type, str] = _Table(lambda kind: kind.answer)


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


def _kind(problem: object) -> Kind:
    """The kind of ``problem``: the first of :data:`KINDS` whose class it is an instance of
    (a class not imported yet has no instances, and stays unimported)."""
    for kind in KINDS:
        module, _, name = kind.problem.partition(":")
        found = sys.modules.get(module)
        problem_type = getattr(found, name, None) if found is not None else None
        if problem_type is not None and isinstance(problem, problem_type):
            return kind
    known = ", ".join(kind.problem.partition(":")[2] for kind in KINDS)
    hint = " (build one from a dict with, e.g., AllocationProblem(**data))"
    raise ProblemTypeError(
        f"problem: expected one of {known}, got {type(problem).__name__}"
        + (hint if isinstance(problem, dict) else "")
        + "."
    )


def methods_for(problem: object) -> dict[str, Solver]:
    """The methods that can solve ``problem``, by name (the new names; see :data:`ALIASES`)."""
    return _methods(_kind(problem))


def aliases_for(problem: object) -> dict[str, str]:
    """The old method names ``problem`` still accepts: old name -> method name."""
    return _aliases(_kind(problem))


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
    return _kind(problem).answer


def _check_result(kind: Kind, problem: object, result: Any) -> None:
    """A result of another problem's method is refused in one sentence (a problem's own
    result, or plain data such as a grid or a list of moves, goes to its checker)."""
    from gpuopt.result import Result

    expected = _load(kind.result)
    if isinstance(result, Result) and not isinstance(result, expected):
        raise ProblemTypeError(
            f"result: {type(result).__name__} is not the {kind.answer} of "
            f"{type(problem).__name__} (its methods answer with {expected.__name__})."
        )


def _result_grid(result: Any) -> Any:
    from gpuopt.allocation.solution import AllocationResult

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
    kind = _kind(problem)
    _check_result(kind, problem, result)
    check, _ = _checkers(kind)
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
    kind = _kind(problem)
    _check_result(kind, problem, result)
    _, measure = _checkers(kind)
    if measure is None:
        raise ValueError(f"{type(problem).__name__} results have no evaluator; use violations.")
    if kind is KINDS[0]:  # allocation
        result = _result_grid(result)
    elif kind is DEFRAG:
        from gpuopt.defrag.solution import DefragResult

        if isinstance(result, DefragResult):
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
    if _kind(problem) is DEFRAG and initial is not None and not _is_defrag_result(initial):
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
