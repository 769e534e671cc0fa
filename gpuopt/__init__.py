"""gpuopt: decide how a shared GPU cluster's capacity is spent.

One call per question: build a problem (an allocation scenario, or a
:class:`Cluster` snapshot and the question asked of it), then
:func:`solve`, :func:`violations` and :func:`evaluate` dispatch on its type;
every method returns a :class:`Result`.

The top level holds what a user needs to build a problem, solve it and check
it. Everything else lives in the subpackages, each reachable as an attribute
(``gpuopt.planning.RollingPlanner``) and imported on first use, so
``import gpuopt`` stays light:

- problems: :mod:`~gpuopt.allocation`, :mod:`~gpuopt.defrag`,
  :mod:`~gpuopt.placement`, :mod:`~gpuopt.preemption`, :mod:`~gpuopt.gang`,
  :mod:`~gpuopt.mig` (dynamic MIG layouts);
- what they share: :mod:`~gpuopt.cluster` (the snapshot), :mod:`~gpuopt.solvers`;
- around them: :mod:`~gpuopt.planning` (rolling horizon),
  :mod:`~gpuopt.simulate` (replays of jobs, gangs and pods on one event loop),
  :mod:`~gpuopt.forecast`, :mod:`~gpuopt.estimate`, :mod:`~gpuopt.sharing`
  (GPU sharing and FGD), :mod:`~gpuopt.extender` (kube-scheduler extender),
  :mod:`~gpuopt.live` (a watched cluster and a controller that acts);
- data: :mod:`~gpuopt.readers` (kubectl, openb, traffic traces),
  :mod:`~gpuopt.io` (plain files); the command line: :mod:`~gpuopt.cli`.

>>> import gpuopt
>>> problem = gpuopt.load_problem("gpuopt/scenarios/mixed-control.json")  # doctest: +SKIP
>>> result = gpuopt.solve(problem, method="heuristic")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpuopt._compat import OLD_RESULT_NAMES, old_result_names
from gpuopt._native import prefer_sources
from gpuopt.errors import ProblemError, ProblemTypeError

prefer_sources()  # (GPUOPT_PURE_PYTHON, or an edited source in a checkout: the source runs)

#: The top-level names, each imported from its module on first use (``gpuopt.solve`` imports
#: every method; ``import gpuopt``, and the command line's start, import none of them).
NAMES: dict[str, str] = {
    "progress": "gpuopt.progress",
    "AllocationProblem": "gpuopt.allocation",
    "AllocationResult": "gpuopt.allocation",
    "load_problem": "gpuopt.allocation",
    "parse_problem": "gpuopt.allocation",
    "METHODS": "gpuopt.api",
    "evaluate": "gpuopt.api",
    "options_of": "gpuopt.api",
    "solve": "gpuopt.api",
    "violations": "gpuopt.api",
    "Cluster": "gpuopt.cluster",
    "Request": "gpuopt.cluster",
    "load_cluster": "gpuopt.cluster",
    "parse_cluster": "gpuopt.cluster",
    "parse_request": "gpuopt.cluster",
    "DefragResult": "gpuopt.defrag",
    "GangProblem": "gpuopt.gang",
    "GangResult": "gpuopt.gang",
    "NodePlacementProblem": "gpuopt.placement",
    "NodePlacementResult": "gpuopt.placement",
    "TopologyProblem": "gpuopt.placement",
    "TopologyResult": "gpuopt.placement",
    "PreemptionProblem": "gpuopt.preemption",
    "PreemptionResult": "gpuopt.preemption",
    "Result": "gpuopt.result",
    "Status": "gpuopt.result",
}

# What the lazy attributes below are, for type checkers. Not the command line:
# gpuopt.cli.app reads __version__ from here, and the two must not import each other.
if TYPE_CHECKING:
    from gpuopt import allocation as allocation
    from gpuopt import cluster as cluster
    from gpuopt import defrag as defrag
    from gpuopt import estimate as estimate
    from gpuopt import extender as extender
    from gpuopt import forecast as forecast
    from gpuopt import gang as gang
    from gpuopt import io as io
    from gpuopt import live as live
    from gpuopt import mig as mig
    from gpuopt import placement as placement
    from gpuopt import planning as planning
    from gpuopt import preemption as preemption
    from gpuopt import progress as progress
    from gpuopt import readers as readers
    from gpuopt import sharing as sharing
    from gpuopt import simulate as simulate
    from gpuopt import solvers as solvers
    from gpuopt.allocation import AllocationProblem, AllocationResult, load_problem, parse_problem
    from gpuopt.api import METHODS, evaluate, options_of, solve, violations
    from gpuopt.cluster import Cluster, Request, load_cluster, parse_cluster, parse_request
    from gpuopt.defrag import DefragResult
    from gpuopt.gang import GangProblem, GangResult
    from gpuopt.placement import (
        NodePlacementProblem,
        NodePlacementResult,
        TopologyProblem,
        TopologyResult,
    )
    from gpuopt.preemption import PreemptionProblem, PreemptionResult
    from gpuopt.result import Result, Status

#: The version of this gpuopt.
__version__ = "0.1.0"

#: The subpackages, each an attribute of :mod:`gpuopt` imported on first use.
SUBPACKAGES: tuple[str, ...] = (
    "allocation",
    "calendar",
    "cli",
    "cluster",
    "defrag",
    "estimate",
    "extender",
    "forecast",
    "gang",
    "io",
    "live",
    "mig",
    "placement",
    "planning",
    "preemption",
    "readers",
    "sharing",
    "simulate",
    "solvers",
)


def __getattr__(name: str) -> Any:
    """A subpackage, imported on first use (``gpuopt.planning`` after ``import gpuopt``), or an
    old name of the cluster model (``DefragProblem``) or of a result (``MigrationPlan``),
    with a ``DeprecationWarning``."""
    where = NAMES.get(name)
    if where is not None:
        found = importlib.import_module(where)
        value = found if where == f"gpuopt.{name}" else getattr(found, name)
        globals()[name] = value  # the next use is a plain attribute
        return value
    if name in SUBPACKAGES:
        return importlib.import_module(f"gpuopt.{name}")
    from gpuopt.cluster.model import DEPRECATED_NAMES, deprecated_name

    if name in DEPRECATED_NAMES:  # old names of the cluster model, one release
        return deprecated_name("gpuopt", name)
    if name in OLD_RESULT_NAMES:  # old names of the results, one release
        return old_result_names("gpuopt", name)(name)
    raise AttributeError(f"module 'gpuopt' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and its subpackages, imported or not."""
    return sorted(set(globals()) | set(NAMES) | set(SUBPACKAGES))


__all__ = [
    "METHODS",
    "AllocationProblem",
    "AllocationResult",
    "Cluster",
    "DefragResult",
    "GangProblem",
    "GangResult",
    "NodePlacementProblem",
    "NodePlacementResult",
    "PreemptionProblem",
    "PreemptionResult",
    "ProblemError",
    "ProblemTypeError",
    "Request",
    "Result",
    "Status",
    "TopologyProblem",
    "TopologyResult",
    "__version__",
    "evaluate",
    "load_cluster",
    "load_problem",
    "options_of",
    "parse_cluster",
    "parse_problem",
    "parse_request",
    "progress",
    "solve",
    "violations",
]
