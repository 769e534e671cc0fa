"""One result contract for every problem: :class:`Result` and one :class:`Status`.

Every method of every problem returns a subclass of :class:`Result` (an
allocation grid, a migration plan, a switch-level placement, a node-level
placement, a preemption decision), so code that runs several methods reads
the same fields everywhere:

``method``
    The method's name in :data:`gpuopt.api.METHODS`.
``status``
    A :class:`Status`.
``objective``
    The value the method optimises, in the problem's own sense (allocation:
    the discounted objective; defragmentation: nodes emptied; switch-level
    placement: jobs placed; preemption: the victims' lost work, minimised;
    node-level placement: None, it ranks rather than optimises).
``bound`` / ``gap``
    A proven bound on the objective and the relative gap to it (exact
    methods; None where nothing is proven). One rule for every method of
    every problem (:func:`relative_gap`, written out in ``models/allocation.md``
    section "Bounds and gaps"): ``gap`` is computed from ``objective`` and
    ``bound`` by :func:`relative_gap` alone, whatever a method passes in; it
    is None exactly when ``bound`` is None or ``objective`` is unusable (None
    or not finite); and then a note starting ``no bound:`` or ``no gap:``
    says why (a heuristic proves none, the time limit stopped the solver
    before a bound, ...). A method that knows why writes that note itself;
    otherwise a general one is added from ``status``.
``seconds``
    Wall time of the method.
``notes``
    Plain sentences about what happened (a fallback taken, a partition left
    out, ...).
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any, ClassVar, Literal, overload

from pydantic import ConfigDict, Field, model_validator
from typing_extensions import Self

from gpuopt._model import Document


class Status(str, Enum):
    """How a result was reached; the same vocabulary for every problem.

    It compares equal to its value (``Status.OPTIMAL == "optimal"``), hashes
    like it, and is written to JSON and shown as the plain string.

    >>> Status("optimal") == "optimal", Status.TIME_LIMIT
    (True, 'time_limit')
    """

    #: Proven optimal (the bound equals the objective within the solver's tolerance:
    #: a gap of at most 1e-5, CP-SAT's integer coefficients leaving a few millionths).
    OPTIMAL = "optimal"
    #: A legal answer from an exact method that proved no optimality.
    FEASIBLE = "feasible"
    #: A legal answer from a heuristic (no proof sought).
    HEURISTIC = "heuristic"
    #: The time limit stopped an exact method; the answer is its best.
    TIME_LIMIT = "time_limit"
    #: Part of the problem was left out (e.g. a partition whose worker failed twice).
    PARTIAL = "partial"
    #: Proven that no answer exists (e.g. no node can take the request).
    INFEASIBLE = "infeasible"
    #: The solver failed; the answer is the starting solution.
    ERROR = "error"

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:  # shown as the plain string it equals, e.g. in a tuple
        return repr(self.value)


#: Whether a problem's objective is maximised (the bound lies above it) or minimised.
Sense = Literal["max", "min"]
#: The start of every note that says why a result has no bound or no gap.
NO_BOUND = "no bound: "
NO_GAP = "no gap: "


@overload
def relative_gap(objective: float, bound: float, sense: Sense = "max") -> float: ...
@overload
def relative_gap(
    objective: float | None, bound: float | None, sense: Sense = "max"
) -> float | None: ...
def relative_gap(
    objective: float | None, bound: float | None, sense: Sense = "max"
) -> float | None:
    """The one gap rule: how far ``objective`` may be from the optimum, given ``bound``.

    ``|bound - objective| / max(|bound|, |objective|)`` when the bound lies on
    the far side of the objective (above it when maximising, below when
    minimising), 0 when it is met (or both are 0), None without a bound or
    without a usable (finite) objective. For a maximised objective and a
    positive bound it is ``(bound - objective) / bound``, for a minimised
    positive one ``(objective - bound) / objective``; it always lies in
    [0, 2], and in [0, 1] when objective and bound have the same sign.

    >>> relative_gap(90.0, 100.0), relative_gap(100.0, 100.0), relative_gap(3, None)
    (0.1, 0.0, None)
    >>> relative_gap(10.0, 8.0, "min"), relative_gap(0.0, 0.0, "min")
    (0.2, 0.0)
    """
    if bound is None or objective is None:
        return None
    if not (math.isfinite(objective) and math.isfinite(bound)):
        return None
    missing = bound - objective if sense == "max" else objective - bound
    scale = max(abs(bound), abs(objective))
    if missing <= 0 or scale < 1e-12:
        return 0.0
    return missing / scale


def heuristic_note(method: str) -> str:
    """The note of a heuristic's result: it computes no bound.

    >>> heuristic_note("fifo"), heuristic_note("heuristic")
    ('no bound: fifo is a heuristic and computes none', 'no bound: the heuristic computes none')
    """
    if method == "heuristic":
        return f"{NO_BOUND}the heuristic computes none"
    return f"{NO_BOUND}{method} is a heuristic and computes none"


def is_gap_note(note: str) -> bool:
    """Whether ``note`` is one that says why a result has no bound or no gap."""
    return note.startswith((NO_BOUND, NO_GAP))


class Result(Document):
    """Fields every problem's result carries (see the module docstring)."""

    model_config = ConfigDict(extra="ignore")
    document: ClassVar[str] = "a result"
    #: Whether ``objective`` is maximised or minimised (which side ``bound`` lies on).
    sense: ClassVar[Sense] = "max"
    #: Why a result of this kind may have no objective (the note then given).
    no_objective: ClassVar[str] = "the result has no objective value"

    method: str
    status: Status = Status.HEURISTIC
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    seconds: float = 0.0
    notes: list[str] = Field(default_factory=list)

    def to_json(self, *, indent: int | None = 1) -> str:
        """The result as JSON (the output format of its command)."""
        return self.model_dump_json(indent=indent)

    @model_validator(mode="after")
    def _one_gap_rule(self) -> Self:
        """``gap`` from :func:`relative_gap`; a note saying why when it is None."""
        _apply_gap_rule(self)
        return self

    def model_copy(self, *, update: Any = None, deep: bool = False) -> Self:
        """A copy to which the gap rule is applied again (``update`` is not validated).

        When ``update`` changes what the gap or its note depends on (method,
        status, objective, bound) and brings no notes of its own, the notes
        saying why there was no bound or gap are dropped and made anew.
        """
        copy = super().model_copy(update=update, deep=deep)
        notes = list(copy.notes)  # never the original's list, which is appended to below
        changed = update is not None and not {"method", "status", "objective", "bound"}.isdisjoint(
            update
        )
        if changed and "notes" not in update:
            notes = [note for note in notes if not is_gap_note(note)]
        copy.__dict__["notes"] = notes
        _apply_gap_rule(copy)
        return copy


def _apply_gap_rule(result: Result) -> None:
    """Set ``result.gap`` by :func:`relative_gap`; keep its no-bound notes true.

    Written into ``__dict__`` since most results are frozen; the notes list is
    the result's own.
    """
    objective, bound = result.objective, result.bound
    gap = relative_gap(objective, bound, result.sense)
    result.__dict__["gap"] = gap
    notes = result.notes
    if gap is not None:
        if any(is_gap_note(note) for note in notes):
            notes[:] = [note for note in notes if not is_gap_note(note)]
        return
    if any(is_gap_note(note) for note in notes):
        return  # the method said why
    usable = objective is not None and math.isfinite(objective)
    notes.append(NO_GAP + result.no_objective if not usable else _no_bound_note(result))


def _no_bound_note(result: Result) -> str:
    """The general reason a result has no bound, read from its status."""
    method, status = result.method, result.status
    if status == Status.HEURISTIC:
        return heuristic_note(method)
    if status == Status.INFEASIBLE:
        why = "there is no answer to bound"
    elif status == Status.TIME_LIMIT:
        why = f"{method} stopped at its time limit before proving one"
    elif status == Status.ERROR:
        why = f"{method}'s solver failed; the starting solution is returned"
    else:
        why = f"{method} proved none"
    return NO_BOUND + why


def count_gap(achieved: float, bound: float | None) -> float | None:
    """The gap of a maximised count (nodes emptied, jobs placed) to a proven upper bound.

    :func:`relative_gap` with ``sense="max"``: ``(bound - achieved) / bound``.

    >>> count_gap(3, 4), count_gap(4, 4), count_gap(2, None)
    (0.25, 0.0, None)
    """
    return relative_gap(achieved, bound, "max")


__all__ = [
    "NO_BOUND",
    "NO_GAP",
    "Result",
    "Sense",
    "Status",
    "count_gap",
    "heuristic_note",
    "is_gap_note",
    "relative_gap",
]
