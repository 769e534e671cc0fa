"""The one entry point and the top-level exports."""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import gpuopt
from gpuopt.plot import plot_results
from tests.conftest import assert_legal


def test_top_level_exports(tiny: gpuopt.AllocationProblem) -> None:
    result = gpuopt.solve(tiny)
    assert isinstance(result, gpuopt.AllocationResult)
    assert result.method == "heuristic"
    assert gpuopt.violations(tiny, result.grid) == []
    assert gpuopt.evaluate(tiny, result.grid).objective == pytest.approx(result.objective)


def test_unknown_method_lists_valid_ones(tiny: gpuopt.AllocationProblem) -> None:
    with pytest.raises(ValueError, match="choose one of heuristic, fifo"):
        gpuopt.solve(tiny, "annealing")


def test_unknown_option_names_method(tiny: gpuopt.AllocationProblem) -> None:
    with pytest.raises(ValueError, match="option 'improve' does not apply to method 'fifo'"):
        gpuopt.solve(tiny, "fifo", improve=False)
    with pytest.raises(ValueError, match="does not take an initial solution"):
        gpuopt.solve(tiny, "fifo", initial=[[None] * 4] * 4)


def test_not_a_problem() -> None:
    with pytest.raises(TypeError, match="problem: expected one of AllocationProblem"):
        gpuopt.solve({"gpus": 4}, "greedy")  # type: ignore[arg-type]


def test_greedy_options(tiny: gpuopt.AllocationProblem) -> None:
    result = gpuopt.solve(tiny, "greedy", improve=False, time_limit=0.5, max_attempts=0)
    assert_legal(tiny, result)


def test_plot_writes_png_atomically(tiny: gpuopt.AllocationProblem, tmp_path: Path) -> None:
    path = tmp_path / "grid.png"
    plot_results(tiny, [gpuopt.solve(tiny), gpuopt.solve(tiny, "fifo")], path)
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir()] == ["grid.png"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
    svg = tmp_path / "grid.svg"
    plot_results(tiny, [gpuopt.solve(tiny)], svg)
    assert svg.read_text().lstrip().startswith("<?xml")


def test_solve_dispatches_snapshots() -> None:
    from gpuopt.defrag.generator import random_snapshot
    from gpuopt.defrag.solution import violations as plan_violations

    snapshot = random_snapshot(2, nodes=20)
    plan = gpuopt.solve(snapshot)
    assert plan.method == "heuristic" and plan_violations(snapshot, plan) == []
    assert gpuopt.solve(snapshot, "onehop").method == "onehop"
    exact = gpuopt.solve(snapshot, "milp", time_limit=5, threads=1)
    assert exact.metrics.emptied >= plan.metrics.emptied
    with pytest.raises(ValueError, match="heuristic, onehop, milp, cpsat"):
        gpuopt.solve(snapshot, "greedy")
    with pytest.raises(ValueError, match="option 'solver' does not apply"):
        gpuopt.solve(snapshot, "ipc", solver="highs")


# ---------------------------------------------------------------- one gap rule (issue 31)
# Every method of every problem reachable through gpuopt.solve reports status, bound
# and gap by one rule (models/allocation.md section 16): gap is None exactly when
# bound is None or the objective is unusable, equals the formula below otherwise, and
# a missing bound or gap always carries a note saying why.

#: Which way each problem's objective goes, known from the problems' definitions
#: (allocation value, nodes emptied and jobs placed are maximised; the victims' lost
#: work and a gang's cost or domains are minimised; a node-level placement has none).
SENSE = {
    "AllocationProblem": "max",
    "Cluster": "max",
    "TopologyProblem": "max",
    "NodePlacementProblem": None,
    "PreemptionProblem": "min",
    "GangProblem": "min",
    "CalendarProblem": "min",
    "MigProblem": "max",
}


def expected_gap(objective: float | None, bound: float | None, sense: str) -> float | None:
    """The gap written out: how much of the larger magnitude lies between objective and bound."""
    if objective is None or bound is None or not math.isfinite(objective):
        return None
    missing = bound - objective if sense == "max" else objective - bound
    larger = max(abs(bound), abs(objective))
    return 0.0 if missing <= 0 or larger == 0 else missing / larger


def _gap_instances(kind: str) -> list[tuple[str, Any]]:
    """(label, problem) pairs of a problem type: small ones, some without an answer."""
    from gpuopt.defrag.generator import random_snapshot
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.placement.switch.problem import TopologyProblem
    from gpuopt.preemption.problem import PreemptionProblem
    from tests.cluster.test_views import snapshot
    from tests.conftest import BIG_OVER_SMALL
    from tests.gang.helpers import random_small

    scenarios = Path(gpuopt.__file__).parent / "scenarios"
    if kind == "AllocationProblem":
        mixed = gpuopt.load_problem(scenarios / "mixed-control.json")
        return [("big-over-small", BIG_OVER_SMALL), ("mixed-control", mixed)]
    if kind == "Cluster":
        return [(f"snapshot-{seed}", random_snapshot(seed, nodes=10)) for seed in (0, 1)]
    cluster = snapshot(1)
    if kind == "TopologyProblem":
        return [
            (shape, TopologyProblem.from_cluster(cluster, shape, level="switch"))
            for shape in ("12G24C", "1000G")  # the second cannot be placed
        ]
    if kind == "NodePlacementProblem":
        return [
            (shape, NodePlacementProblem.from_cluster(cluster, shape)) for shape in ("2G8C", "16G")
        ]
    if kind == "PreemptionProblem":
        return [
            (
                f"priority-{priority}",
                PreemptionProblem.from_cluster(cluster, "8G16C", priority=priority),
            )
            for priority in (5000, 0)
        ]
    if kind == "GangProblem":
        return [
            (f"gang-{seed}-{preemption}", random_small(seed, preemption=preemption))
            for seed in (0, 3, 7)
            for preemption in (True, False)
        ]
    if kind == "CalendarProblem":
        from tests.calendar import two_nodes

        return [("two-nodes", two_nodes())]
    if kind == "MigProblem":
        from gpuopt.mig.generator import random_problem

        return [(f"mig-{seed}", random_problem(seed, gpus=2)) for seed in (0, 1)]
    raise AssertionError(f"no instances for {kind}: add some so the gap rule covers it")


def _every_method() -> list[Any]:
    from gpuopt.api import METHODS

    return [
        pytest.param(problem_type.__name__, method, id=f"{problem_type.__name__}-{method}")
        for problem_type, methods in METHODS.items()
        for method in methods
    ]


def _options(kind: str, method: str) -> dict[str, Any]:
    if method in ("cpsat", "milp", "lns"):
        return {"time_limit": 5.0 if method != "lns" else 2.0}
    return {}


def assert_gap_rule(result: gpuopt.Result, sense: str | None) -> None:
    """The one gap rule, checked on one result against :func:`expected_gap`."""
    objective, bound, gap = result.objective, result.bound, result.gap
    usable = objective is not None and math.isfinite(objective)
    assert (gap is None) == (bound is None or not usable), (objective, bound, gap)
    if sense is None:
        assert objective is None and gap is None
    else:
        assert gap == pytest.approx(expected_gap(objective, bound, sense), abs=1e-12)
    why = [note for note in result.notes if note.startswith(("no bound: ", "no gap: "))]
    if gap is None:
        assert why, f"{result.method}: bound {bound}, gap None and no note says why"
    else:
        assert why == [], why  # a note saying there is no bound, beside a bound
    if bound is not None and usable and sense is not None:
        assert objective is not None
        slack = 1e-6 * max(1.0, abs(objective))
        assert bound >= objective - slack if sense == "max" else bound <= objective + slack
    if result.status == gpuopt.Status.OPTIMAL:  # within the solvers' tolerance (section 16)
        assert gap is not None and gap <= 1e-5
    # the rule holds again after a JSON round trip, with no note added twice
    again = type(result).model_validate_json(result.to_json())
    assert (again.gap, again.notes) == (gap, result.notes)


@pytest.mark.parametrize(("kind", "method"), _every_method())
def test_one_gap_rule_for_every_method(kind: str, method: str) -> None:
    for label, problem in _gap_instances(kind):
        result = gpuopt.solve(problem, method, **_options(kind, method))
        assert result.method == method, label
        assert type(result).sense == (SENSE[kind] or "max"), label
        assert_gap_rule(result, SENSE[kind])


def test_every_problem_has_gap_instances() -> None:
    from gpuopt.api import METHODS

    assert {problem_type.__name__ for problem_type in METHODS} == set(SENSE)


@pytest.mark.parametrize("method", ["cpsat", "milp"])
def test_exact_without_a_bound_says_why(method: str) -> None:
    # 64 GPUs x 30 tasks: far more than 0.3 s of model, so no solver runs and no bound is
    # proven; below 128 GPUs no step-capacity bound stands in (section 13)
    scenario = Path(gpuopt.__file__).parent / "scenarios" / "scale.json"
    problem = gpuopt.load_problem(scenario)
    result = gpuopt.solve(problem, method, time_limit=0.3)
    assert (result.status, result.bound, result.gap) == ("time_limit", None, None)
    solver = "CP-SAT" if method == "cpsat" else "highs"
    assert any(note.startswith("no bound: ") and solver in note for note in result.notes)
    assert_gap_rule(result, "max")


def test_lns_reports_the_exact_bound_on_small_instances() -> None:
    # mixed-control: CP-SAT proves the greedy's 174.32 optimal (tests/allocation/test_exact.py);
    # the step-capacity LP alone bounds it only by 317.15, a 45 % gap
    problem = gpuopt.load_problem(Path(gpuopt.__file__).parent / "scenarios" / "mixed-control.json")
    exact = gpuopt.solve(problem, "cpsat", time_limit=10)
    assert exact.status == "optimal"
    result = gpuopt.solve(problem, "lns", time_limit=4, seed=0)
    assert result.objective == pytest.approx(exact.objective)
    assert (result.status, result.gap) == ("optimal", 0.0)
    assert result.notes and result.notes[0].startswith("bound: CP-SAT's bound on the exact model")


def test_gap_rule_unit() -> None:
    from gpuopt.result import relative_gap

    assert relative_gap(90.0, 100.0) == pytest.approx(0.1)
    assert relative_gap(10.0, 8.0, "min") == pytest.approx(0.2)
    assert relative_gap(-10.0, 5.0) == pytest.approx(15 / 10)  # larger magnitude: |objective|
    assert relative_gap(100.0, 90.0) == 0.0  # a bound met (or passed) is a gap of 0
    assert relative_gap(0.0, 0.0, "min") == 0.0
    assert relative_gap(None, 3.0) is None and relative_gap(3.0, None) is None
    assert relative_gap(math.inf, 3.0) is None


def test_gap_is_recomputed_and_notes_follow_the_bound(tiny: gpuopt.AllocationProblem) -> None:
    greedy = gpuopt.solve(tiny)
    assert greedy.notes == ["no bound: the heuristic computes none"]
    # a gap passed in is not trusted: it follows from objective and bound
    forged = gpuopt.AllocationResult.model_validate({**greedy.model_dump(), "gap": 0.5})
    assert forged.gap is None
    bounded = greedy.model_copy(update={"bound": greedy.objective * 2, "method": "cpsat"})
    assert bounded.gap == pytest.approx(0.5) and bounded.notes == []
    assert greedy.notes == ["no bound: the heuristic computes none"]  # not shared
    unbounded = bounded.model_copy(update={"bound": None, "status": "time_limit"})
    assert unbounded.notes == ["no bound: cpsat stopped at its time limit before proving one"]


def test_a_result_of_another_problem_is_refused_in_one_sentence() -> None:
    # finding 09.6 of the second review: a TypeError or AttributeError naming nothing
    from importlib.resources import files

    from gpuopt.calendar.problem import CalendarProblem
    from gpuopt.errors import ProblemTypeError

    grid_problem = gpuopt.load_problem(files("gpuopt") / "scenarios" / "mixed-control.json")
    grid = gpuopt.solve(grid_problem)
    calendar = CalendarProblem(
        nodes=[{"id": "a", "capacity": [8]}],
        jobs=[{"id": "j", "use": [8], "duration": 2}],
        horizon=10,
    )
    plan = gpuopt.solve(calendar)
    expected = (
        "result: CalendarPlan is not the grid of AllocationProblem "
        "(its methods answer with AllocationResult)."
    )
    with pytest.raises(ProblemTypeError) as caught:
        gpuopt.violations(grid_problem, plan)
    assert str(caught.value) == expected
    with pytest.raises(
        ProblemTypeError, match="AllocationResult is not the plan of CalendarProblem"
    ):
        gpuopt.evaluate(calendar, grid)
    assert gpuopt.violations(grid_problem, grid) == [] == gpuopt.violations(calendar, plan)
    assert gpuopt.violations(grid_problem, grid.grid) == []  # its grid as plain data still goes
