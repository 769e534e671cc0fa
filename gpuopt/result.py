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
    methods; None where nothing is proven).
``seconds``
    Wall time of the method.
``notes``
    Plain sentences about what happened (a fallback taken, a partition left
    out, ...).
"""

from __future__ import annotations

from enum import Enum
from typing import ClassVar

from pydantic import ConfigDict, Field

from gpuopt._model import Document


class Status(str, Enum):
    """How a result was reached; the same vocabulary for every problem.

    It compares equal to its value (``Status.OPTIMAL == "optimal"``), hashes
    like it, and is written to JSON and shown as the plain string.

    >>> Status("optimal") == "optimal", Status.TIME_LIMIT
    (True, 'time_limit')
    """

    #: Proven optimal (the bound equals the objective).
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


class Result(Document):
    """Fields every problem's result carries (see the module docstring)."""

    model_config = ConfigDict(extra="ignore")
    document: ClassVar[str] = "a result"

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


def count_gap(achieved: float, bound: float | None) -> float | None:
    """The gap of a count to a proven upper bound: ``(bound - achieved) / bound``.

    0 when the bound is met, None without a bound (a maximised count: nodes
    emptied, jobs placed).

    >>> count_gap(3, 4), count_gap(4, 4), count_gap(2, None)
    (0.25, 0.0, None)
    """
    if bound is None:
        return None
    return 0.0 if bound <= achieved else (bound - achieved) / bound


__all__ = ["Result", "Status", "count_gap"]
