"""Benchmark runner: methods side by side on scenario files, with median latency.

Used by ``gpuopt bench`` and by ``benchmarks/``. Each method runs ``repeat``
times on each scenario in the same process (so ratios between methods are
fair on a noisy machine); the reported latency is the median.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpuopt.allocation.problem import AllocationProblem, load_problem
from gpuopt.allocation.solution import AllocationResult, relative_gap, violations
from gpuopt.api import ALIASES, options_of, solve
from gpuopt.errors import ProblemError

BASELINE = "fifo"
#: The heuristics: run ``repeat`` times for a median time; every other method runs once.
REPEATED = (BASELINE, "heuristic")

#: A proven bound is *useful* when the best plan found on the scenario (by any
#: method) is within this share of it: the bound then certifies that plan, and
#: the gap of any method against it overstates how far that method is below the
#: optimum by at most this much. A weaker bound (an exact method stopped early,
#: far from its proof) proves little, so no gap is shown against it.
USEFUL_BOUND_GAP = 0.05


@dataclass
class BenchRow:
    """One scenario: each method's result and its median decision time in seconds.

    The decision time is the method's own ``seconds`` (validated problem to
    grid); evaluating the grid and building the result object are excluded.
    """

    problem: AllocationProblem
    source: Path
    results: dict[str, AllocationResult] = field(default_factory=dict)
    median_seconds: dict[str, float] = field(default_factory=dict)

    def gain(self, method: str, baseline: str = BASELINE) -> float:
        """Relative value gain of ``method`` over ``baseline``."""
        base = self.results[baseline].metrics.value
        return self.results[method].metrics.value / base - 1 if base > 0 else float("inf")

    def best_bound(self) -> float | None:
        """The tightest bound any exact method proved on this scenario."""
        bounds = [r.bound for r in self.results.values() if r.bound is not None]
        return min(bounds) if bounds else None

    def best_objective(self) -> float:
        """The highest objective any method reached on this scenario."""
        return max(result.objective for result in self.results.values())

    def useful_bound(self) -> float | None:
        """The best bound if it certifies the best plan (:data:`USEFUL_BOUND_GAP`), else None."""
        bound = self.best_bound()
        if bound is None or relative_gap(self.best_objective(), bound) > USEFUL_BOUND_GAP:
            return None
        return bound

    def exact_seconds(self) -> float | None:
        """The longest time a method not in :data:`REPEATED` spent; None if none ran."""
        spent = [seconds for name, seconds in self.median_seconds.items() if name not in REPEATED]
        return max(spent) if spent else None

    def gap_to_bound(self, method: str) -> float | None:
        """``(useful bound - objective) / |bound|`` of ``method``; None without a useful bound."""
        bound = self.useful_bound()
        return None if bound is None else relative_gap(self.results[method].objective, bound)

    def to_dict(self) -> dict[str, object]:
        """The figures as plain data; the gaps are None where no bound (or no useful one) exists."""
        bound = self.best_bound()
        return {
            "scenario": self.problem.name,
            "gpus": self.problem.gpus,
            "tasks": len(self.problem.tasks),
            "best_bound": bound,
            "bound_is_useful": self.useful_bound() is not None,
            "methods": {
                name: {
                    "objective": result.objective,
                    "bound": result.bound,
                    "gap": result.gap,
                    "status": result.status,
                    "median_seconds": self.median_seconds[name],
                    "gap_to_best_bound": None
                    if bound is None
                    else relative_gap(result.objective, bound),
                    "gap_to_useful_bound": self.gap_to_bound(name),
                    **result.metrics.model_dump(),
                }
                for name, result in self.results.items()
            },
        }


def default_scenario_dir() -> Path | None:
    """The seven scenarios bundled with the package (``gpuopt/scenarios``, package data)."""
    bundled = Path(__file__).resolve().parent / "scenarios"
    return bundled if bundled.is_dir() else None


def scenario_files(folder: str | Path | None) -> list[Path]:
    """The scenario JSON files of ``folder`` (sorted), or a clear error."""
    if folder is None:
        found = default_scenario_dir()
        if found is None:
            raise ProblemError("no scenario folder found; pass --scenarios DIR.")
        folder = found
    folder = Path(folder)
    if folder.is_file():
        return [folder]
    if not folder.is_dir():
        raise ProblemError(f"--scenarios: {folder} is not a file or folder.")
    files = sorted(folder.glob("*.json"))
    if not files:
        raise ProblemError(f"--scenarios: {folder} holds no .json scenario.")
    return files


def run_bench(
    paths: Sequence[Path],
    methods: Sequence[str] = (BASELINE, "heuristic", "cpsat"),
    *,
    repeat: int = 20,
    time_limit: float | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> list[BenchRow]:
    """Run every method on every scenario; check every grid with the independent checker.

    An old method name (``greedy``) is run, and keyed, under its new one (``heuristic``).

    Raises
    ------
    RuntimeError
        If any method returns a grid that breaks a rule (a bug, never expected).
    """
    renamed = ALIASES[AllocationProblem]
    methods = list(dict.fromkeys(renamed.get(method, method) for method in methods))
    rows = []
    for path in paths:
        problem = load_problem(path)
        row = BenchRow(problem, Path(path))
        for method in methods:
            if on_progress:
                on_progress(f"{problem.name}: {method}")
            runs = max(1, repeat if method in REPEATED else 1)
            times = []
            result = None
            for _ in range(runs):
                takes_limit = "time_limit" in options_of(problem, method)
                result = solve(problem, method, time_limit=time_limit if takes_limit else None)
                times.append(result.seconds)
            assert result is not None
            broken = violations(problem, result.grid)
            if broken:
                raise RuntimeError(
                    f"{problem.name}: {method} returned an illegal grid: {broken[0]}"
                )
            row.results[method] = result
            row.median_seconds[method] = statistics.median(times)
        rows.append(row)
    return rows
