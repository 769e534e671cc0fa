"""Shared fixtures: tiny hand-checkable allocation problems."""

from __future__ import annotations

from typing import Any

import pytest

from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import AllocationResult, evaluate, violations


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """With pytest-xdist's workers (``-n``) and no ``--dist`` given, the tests of one
    ``xdist_group`` run in one worker (``loadgroup``). Set here, not in ``addopts``, so
    that a run without the plugin (``-p no:xdist``, or plain pytest) still starts."""
    option = config.option
    if getattr(option, "numprocesses", None) and getattr(option, "dist", "no") == "no":
        option.dist = "loadgroup"


def make_problem(tasks: list[dict[str, Any]], **fields: Any) -> AllocationProblem:
    """A problem from task dicts; unspecified top-level fields take small defaults."""
    data: dict[str, Any] = {
        "name": "tiny",
        "gpus": 4,
        "horizon": 4,
        "decay": 0.5,
        "realtime_penalty": 2.0,
    }
    data.update(fields)
    data["tasks"] = tasks
    return AllocationProblem.model_validate(data)


# Tiny instances with hand-computed optima (4 GPUs, 4 steps, decay 0.5).
BIG_OVER_SMALL = make_problem(
    [
        {"id": "small", "kind": "quantization", "priority": 3, "gpus": 1, "duration": 4},
        {"id": "big", "kind": "training", "priority": 1, "gpus": 4, "duration": 4},
    ]
)  # big alone: 1*4*(1+.5+.25+.125) = 7.5 beats small alone (3*1.875 = 5.625); both never fit
LATE_HIGH = make_problem(
    [
        {"id": "early-low", "kind": "training", "priority": 1, "gpus": 4, "duration": 2},
        {
            "id": "late-high",
            "kind": "training",
            "priority": 9,
            "gpus": 4,
            "duration": 2,
            "arrival": 1,
        },
    ]
)  # late-high at 1: 9*4*(.5+.25) = 27, early-low squeezed into step 3: 4*.125 -> 27.5


def assert_legal(problem: AllocationProblem, result: AllocationResult) -> None:
    """A result passes the independent checker and reports what ``evaluate`` computes."""
    broken = violations(problem, result.grid)
    assert broken == [], broken
    evaluation = evaluate(problem, result.grid)
    assert result.objective == pytest.approx(evaluation.objective)
    assert result.metrics == evaluation.metrics


@pytest.fixture
def tiny() -> AllocationProblem:
    """4 GPUs x 4 steps: one 2-GPU training task and one realtime service."""
    return make_problem(
        [
            {"id": "a", "kind": "training", "priority": 2, "gpus": 2, "duration": 2},
            {
                "id": "r",
                "kind": "realtime",
                "priority": 1,
                "demand": [1, 1, 2, 2],
                "max_swap": 1,
                "initial": 1,
            },
        ]
    )


# ---------------------------------------------------------------- one run per method
# As PyJobShop runs each behaviour test once per solver: a test that takes one
# of these fixtures runs once per method of its problem in gpuopt.api.METHODS,
# restricted by ``--methods`` and skipped where the method's backend is missing.
def _per_method_fixtures() -> dict[str, type]:
    from gpuopt.allocation.problem import AllocationProblem as Allocation
    from gpuopt.cluster import Cluster
    from gpuopt.gang.problem import GangProblem
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.placement.switch.problem import TopologyProblem
    from gpuopt.preemption.problem import PreemptionProblem

    return {
        "allocation_method": Allocation,
        "defrag_method": Cluster,
        "topology_method": TopologyProblem,
        "node_method": NodePlacementProblem,
        "preemption_method": PreemptionProblem,
        "gang_method": GangProblem,
    }


#: Modules a method needs, by (problem fixture, method); methods not listed need nothing extra.
BACKENDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("allocation_method", "cpsat"): ("ortools",),
    ("allocation_method", "milp"): ("pyomo", "highspy"),
    ("defrag_method", "cpsat"): ("ortools",),
    ("defrag_method", "milp"): ("highspy",),
    ("topology_method", "milp"): ("highspy",),
    ("gang_method", "cpsat"): ("ortools",),
    ("gang_method", "milp"): ("highspy",),
    ("topology_method", "cpsat"): ("ortools",),
    ("preemption_method", "milp"): ("highspy",),
    ("preemption_method", "cpsat"): ("ortools",),
}
#: Methods that prove a bound (their tests get a time limit and check the proof).
EXACT = frozenset({"cpsat", "milp", "dp"})
#: Methods that search under a time limit (the exact ones and lns): tested on few instances.
SEARCHING = EXACT | {"lns"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--methods",
        default="all",
        help="comma-separated method names: per-method behaviour tests run only these "
        "(default: every method of each problem in gpuopt.api.METHODS)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    import importlib.util

    from gpuopt.api import METHODS

    wanted = metafunc.config.getoption("--methods")
    chosen = None if wanted == "all" else {name.strip() for name in wanted.split(",")}
    for fixture, problem_type in _per_method_fixtures().items():
        if fixture not in metafunc.fixturenames:
            continue
        params = []
        for method in METHODS[problem_type]:
            if chosen is not None and method not in chosen:
                continue
            missing = [
                module
                for module in BACKENDS.get((fixture, method), ())
                if importlib.util.find_spec(module) is None
            ]
            marks = [pytest.mark.skip(reason=f"needs {', '.join(missing)}")] if missing else []
            params.append(pytest.param(method, marks=marks, id=method))
        metafunc.parametrize(fixture, params)
