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
from gpuopt.allocation.solution import AllocationResult, violations
from gpuopt.api import options_of, solve
from gpuopt.errors import ProblemError

BASELINE = "fifo"


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

    def gap_to_bound(self, method: str) -> float | None:
        """``(best bound - objective) / |best bound|`` of ``method``, None without a bound."""
        bound = self.best_bound()
        if bound is None:
            return None
        return max(0.0, bound - self.results[method].objective) / max(abs(bound), 1e-9)

    def to_dict(self) -> dict[str, object]:
        return {
            "scenario": self.problem.name,
            "gpus": self.problem.gpus,
            "tasks": len(self.problem.tasks),
            "methods": {
                name: {
                    "objective": result.objective,
                    "bound": result.bound,
                    "gap": result.gap,
                    "status": result.status,
                    "median_seconds": self.median_seconds[name],
                    "gap_to_best_bound": self.gap_to_bound(name),
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
    methods: Sequence[str] = (BASELINE, "greedy", "cpsat"),
    *,
    repeat: int = 20,
    time_limit: float | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> list[BenchRow]:
    """Run every method on every scenario; check every grid with the independent checker.

    Raises
    ------
    RuntimeError
        If any method returns a grid that breaks a rule (a bug, never expected).
    """
    rows = []
    for path in paths:
        problem = load_problem(path)
        row = BenchRow(problem, Path(path))
        for method in methods:
            if on_progress:
                on_progress(f"{problem.name}: {method}")
            runs = max(1, repeat if method in (BASELINE, "greedy") else 1)
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
