"""The run settings every exact method (milp, cpsat) takes, as one object.

A problem's exact backends share one options object: :class:`ExactOptions`,
or a subclass of it with the problem's own knobs (the defragmentation
budgets, the allocation MILP's solver). Each backend declares which fields it
takes and its own defaults once, with :class:`gpuopt.options.Keywords`, and
takes them as that object or as the keywords of today's signature::

    solve_milp(cluster, time_limit=5.0, threads=2)
    solve_milp(cluster, DefragExactOptions(time_limit=5.0, threads=2))

Bounds of every field are declared in :data:`gpuopt.options.OPTIONS`
(checked by :meth:`Keywords.resolve <gpuopt.options.Keywords.resolve>`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuopt.options import Keywords
from gpuopt.progress import SearchProgress


@dataclass(frozen=True, slots=True, kw_only=True)
class ExactOptions:
    """How an exact method runs: its time limit, seed, start and solver settings.

    Attributes
    ----------
    time_limit
        Seconds for the whole call, counted from its start (None: no limit).
    seed
        The solver's random seed.
    initial
        A starting solution (default: the problem's heuristic's).
    threads
        Solver threads (CP-SAT: workers).
    warm
        Whether the solver starts from the heuristic's (or ``initial``'s) answer.
    log
        Whether the solver's own log is shown (on stderr).
    progress
        ``progress(seconds, incumbent, bound)`` as the search moves, where the
        backend reports it.
    """

    time_limit: float | None = 10.0
    seed: int = 0
    initial: Any = None
    threads: int = 1
    warm: bool = True
    log: bool = False
    progress: SearchProgress | None = None


#: The keywords of an exact method with no start of its own to give (gang's ``exact``,
#: switch placement's ``milp``): time limit, seed, threads and log.
SOLVER_KEYWORDS = Keywords.of(ExactOptions, omit=("initial", "warm", "progress"))


__all__ = ["SOLVER_KEYWORDS", "ExactOptions"]
