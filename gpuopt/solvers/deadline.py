"""Time limits as deadlines for a whole call (``docs/reliability.md``, "Time limits").

An exact method's ``time_limit`` (and ``ipc``'s) covers everything the call
does: the warm start, building the model, every solver phase and the final
evaluation. A :class:`Deadline` starts with the call; each phase gets only the
time left, long Python loops call :meth:`Deadline.check` (which raises
:class:`DeadlineExceeded`; the method then returns its incumbent, at worst the
warm start, with status ``time_limit``), and a phase that cannot be
interrupted (a C-level sort, a solver's set-up) starts only when the time
left covers an estimate of its cost (:meth:`Deadline.require`).

The solvers read their clock only between steps of their own. HiGHS's
presolve (enumeration, probing) and root-node work can run for tens of
seconds past its limit on models of a few hundred thousand non-zeros, so
under a time limit such models run in a child process that is killed at the
deadline (:func:`gpuopt.solvers.highs.solve_rows`); small ones run here, and
CP-SAT copies, loads and presolves the model before its first check. For
those, :func:`overhead_seconds` estimates the stretch without a clock and
:func:`solver_limit` gives the solver only what is left minus it (HiGHS), or
nothing when the rest would not even cover its set-up: the method then
returns its incumbent, since such a solver could not have returned a better
solution or a bound within the limit anyway.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

#: ``(fixed seconds, seconds per non-zero, seconds per column)`` a solver may run without
#: reading its clock, measured on the project's 2-core machine at a load average of about 6
#: (``benchmarks/time_limits.py``). HiGHS: for the models it solves in this process (below
#: :data:`gpuopt.solvers.highs.ISOLATE_NONZEROS` non-zeros; larger ones run in a child
#: process killed at the deadline) it overran its limit by at most 0.1 s. CP-SAT took
#: 0.5-0.8 us per non-zero to load a model before its first check. Rounded up: skipping a
#: solver that had a second to spare costs less than overrunning the limit.
OVERHEAD = {"highs": (0.15, 1.6e-6, 4e-6), "cpsat": (0.1, 0.9e-6, 2e-6)}
#: Share of the time left that building a model in Python may take (see :meth:`Deadline.part`).
BUILD_SHARE = 0.85
#: Seconds per non-zero of building a CP-SAT model in Python, a lower bound: 1-5 us measured
#: on the busy 2-core machine. A build that cannot even reach this is not started.
CPSAT_BUILD_PER_NONZERO = 1e-6


class DeadlineExceeded(Exception):
    """The time limit passed in a phase that has no result of its own to return."""


@dataclass
class Deadline:
    """The end of a call's time limit, counted from its start (None: no limit).

    Examples
    --------
    >>> deadline = Deadline(None)
    >>> deadline.remaining() is None, deadline.expired()
    (True, False)
    >>> Deadline(0.0).expired()
    True
    """

    limit: float | None
    started: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        """Seconds since the call started."""
        return time.perf_counter() - self.started

    def remaining(self) -> float | None:
        """Seconds left (never negative), or None without a limit."""
        if self.limit is None:
            return None
        return max(0.0, self.limit - self.elapsed())

    def expired(self) -> bool:
        """True once the limit has passed."""
        return self.limit is not None and self.elapsed() >= self.limit

    def check(self) -> None:
        """Raise :class:`DeadlineExceeded` once the limit has passed (cheap: one clock read)."""
        if self.expired():
            raise DeadlineExceeded

    def affords(self, seconds: float) -> bool:
        """True when at least ``seconds`` are left (always, without a limit)."""
        left = self.remaining()
        return left is None or left >= seconds

    def require(self, seconds: float) -> None:
        """Raise :class:`DeadlineExceeded` unless ``seconds`` are left (before a phase that
        cannot be interrupted and is estimated to take that long)."""
        if not self.affords(seconds):
            raise DeadlineExceeded

    def share(self, fraction: float) -> float | None:
        """``fraction`` of the time left (None without a limit)."""
        left = self.remaining()
        return None if left is None else left * fraction

    def part(self, fraction: float) -> Deadline:
        """A deadline for a phase: ``fraction`` of the time left, from now.

        A model built in Python and abandoned at the deadline still has to be
        freed (about a seventh of its build time for CP-SAT's and Pyomo's
        models): building against ``part(BUILD_SHARE)`` leaves that time.
        """
        return Deadline(self.share(fraction))

    def wall_clock(self) -> float | None:
        """The deadline as ``time.time()`` (for other processes; None without a limit)."""
        left = self.remaining()
        return None if left is None else time.time() + left


def overhead_seconds(solver: Literal["highs", "cpsat"], nonzeros: int, columns: int) -> float:
    """Seconds ``solver`` may run past a time limit on a model of this size (:data:`OVERHEAD`)."""
    fixed, per_nonzero, per_column = OVERHEAD[solver]
    return fixed + per_nonzero * max(0, nonzeros) + per_column * max(0, columns)


def cpsat_seconds(nonzeros: int, columns: int) -> float:
    """Least seconds worth starting a CP-SAT model for: building it in Python, then loading it."""
    return CPSAT_BUILD_PER_NONZERO * max(0, nonzeros) + overhead_seconds("cpsat", nonzeros, columns)


def solver_limit(
    deadline: Deadline, solver: Literal["highs", "cpsat"], nonzeros: int, columns: int
) -> float | None:
    """The time limit to give ``solver`` now (None: no limit), or :class:`DeadlineExceeded`.

    HiGHS gets the time left minus its :func:`overhead_seconds` (the longest
    stretch it may run without reading its clock) and is not started unless
    that leaves at least the overhead again (its set-up counts against its own
    limit). CP-SAT checks its clock often once the model is loaded: it gets the
    time left, when that covers loading.
    """
    left = deadline.remaining()
    if left is None:
        return None
    overhead = overhead_seconds(solver, nonzeros, columns)
    if solver == "highs":
        if left < 2 * overhead:
            raise DeadlineExceeded
        return left - overhead
    if left < overhead:
        raise DeadlineExceeded
    return left


__all__ = [
    "BUILD_SHARE",
    "Deadline",
    "DeadlineExceeded",
    "cpsat_seconds",
    "overhead_seconds",
    "solver_limit",
]
