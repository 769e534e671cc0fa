"""The allocation optimum of tiny batch-only instances by plain enumeration.

It knows nothing about the methods: every batch task is left out or put at
every (start, first GPU) in turn, each complete choice becomes a grid, and the
independent checker (:func:`gpuopt.allocation.solution.violations`) and
evaluator decide what is legal and what it is worth. Overlapping cells,
blocks that break alignment or cross a node, and starts past a deadline are
pruned on the way (the checker still passes every grid that counts), so a
few tasks on 4 GPUs x 4 steps take well under a second.
"""

from __future__ import annotations

from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import evaluate, violations

Cell = tuple[int, int]  # (step, gpu)


def brute_force_optimum(problem: AllocationProblem) -> float:
    """The best objective of a legal grid of ``problem`` (no realtime tasks allowed)."""
    assert not any(task.is_realtime for task in problem.tasks), "batch-like tasks only"
    horizon, gpus = problem.horizon, problem.gpus
    options: list[list[tuple[str, list[Cell]] | None]] = []
    base: dict[Cell, str] = {}
    for task in problem.tasks:
        assert task.gpus is not None and task.duration is not None
        if task.running is not None:  # inherited: one way only
            end = min(horizon, task.running.start + task.duration)
            first = task.running.first_gpu
            for step in range(0, end):
                for gpu in range(first, first + task.gpus):
                    base[(step, gpu)] = task.id
            continue
        choices: list[tuple[str, list[Cell]] | None] = [None]
        for start in range(task.arrival, horizon):
            end = min(horizon, start + task.duration)
            if task.deadline is not None and start + task.duration > task.deadline:
                continue  # pruned here for speed; the checker below has the last word
            for first in range(0, gpus - task.gpus + 1):
                if problem.align_blocks and first % task.gpus:
                    continue
                node = problem.gpus_per_node
                if node and task.gpus <= node and first // node != (first + task.gpus - 1) // node:
                    continue
                cells = [(s, g) for s in range(start, end) for g in range(first, first + task.gpus)]
                choices.append((task.id, cells))
        options.append(choices)
    best = -float("inf")
    best_grid: list[list[str | None]] | None = None
    used: dict[Cell, str] = dict(base)

    def walk(position: int) -> None:
        nonlocal best, best_grid
        if position == len(options):
            grid = [[used.get((step, gpu)) for gpu in range(gpus)] for step in range(horizon)]
            value = evaluate(problem, grid).objective
            if value > best + 1e-12 and not violations(problem, grid):
                best, best_grid = value, grid
            return
        for choice in options[position]:
            if choice is None:
                walk(position + 1)
                continue
            task_id, cells = choice
            if any(cell in used for cell in cells):
                continue
            for cell in cells:
                used[cell] = task_id
            walk(position + 1)
            for cell in cells:
                del used[cell]

    walk(0)
    assert best_grid is not None and violations(problem, best_grid) == []
    return best
