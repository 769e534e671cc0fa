"""Allocation results, the independent checker and the evaluator.

:func:`violations` checks any grid against the five rules of DESIGN.md section
1 (labels A1..A5 of ``models/allocation.md``), and a result's schedule against
its grid (S1..S4, built in :mod:`gpuopt.allocation.schedule`) and its stated
objective and metrics against its grid's (S5); :func:`evaluate` computes the
objective and metrics exactly as defined there. Neither knows
anything about the methods that produced the grid.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from gpuopt.allocation.problem import AllocationProblem, Grid, Task, node_rule
from gpuopt.allocation.schedule import ScheduleEntry, build_schedule, schedule_violations
from gpuopt.errors import short
from gpuopt.result import Result, relative_gap
from gpuopt.result import Status as ResultStatus

#: The statuses allocation methods report (values of :class:`gpuopt.Status`).
Status = Literal["optimal", "feasible", "time_limit", "infeasible", "error"]


class Metrics(BaseModel):
    """What DESIGN.md section 1 reports for a grid."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    utilization: float = Field(description="Useful GPU-steps / (gpus * horizon).")
    value: float = Field(description="Sum of priority over batch GPU-steps (undiscounted).")
    completed: int = Field(description="Batch-like tasks that finish inside the horizon.")
    shortfall: int = Field(description="Realtime GPU-steps missing against demand.")
    scheduled: int = Field(default=0, description="Batch-like tasks that run in the plan.")


class Evaluation(BaseModel):
    """Objective and metrics of a grid, as computed by :func:`evaluate`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    objective: float
    metrics: Metrics


class AllocationResult(Result):
    """The result contract of DESIGN.md section 5.

    ``grid[t][g]`` is the id of the task on GPU ``g`` at step ``t``, or None.
    ``schedule`` reads the grid task by task (one entry per task: status,
    start, end, GPUs, or why it was left out; ``models/allocation.md``
    section 12); results written before it existed load with ``schedule``
    None. ``bound`` and ``gap`` follow the one gap rule of
    :class:`gpuopt.Result` (``models/allocation.md`` section 16). Unknown
    fields in a result JSON are ignored (the contract may gain optional
    fields).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    status: ResultStatus = ResultStatus.FEASIBLE
    objective: float
    seconds: float
    name: str | None = None
    grid: Grid
    metrics: Metrics
    schedule: list[ScheduleEntry] | None = None

    def violations(self, problem: AllocationProblem) -> list[str]:
        """Rule breaches of this result's grid and schedule for ``problem`` (empty when legal)."""
        return violations(problem, self)

    def is_feasible(self, problem: AllocationProblem) -> bool:
        return not self.violations(problem)

    def summary(self) -> str:
        """A one-line human summary."""
        metrics = self.metrics
        parts = [
            f"{self.method}: objective {self.objective:,.1f}",
            f"utilization {metrics.utilization:.1%}",
            f"value {metrics.value:,.0f}",
            f"completed {metrics.completed}",
            f"shortfall {metrics.shortfall}",
            f"{self.seconds * 1000:.2f} ms",
        ]
        if self.gap is not None:
            parts.insert(1, f"gap {self.gap:.2%}")
        return ", ".join(parts)

    def to_json(self, *, indent: int | None = None) -> str:
        return self.model_dump_json(indent=indent)


# --------------------------------------------------------------------------- helpers
def _cell_ids(grid: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [list(row) for row in grid]


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive integers in a sorted list, as [start, end)."""
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and runs[-1][1] == value:
            runs[-1] = (runs[-1][0], value + 1)
        else:
            runs.append((value, value + 1))
    return runs


def _shape_violations(problem: AllocationProblem, grid: Sequence[Sequence[Any]]) -> list[str]:
    found: list[str] = []
    if len(grid) != problem.horizon:
        found.append(f"grid: has {len(grid)} steps but the horizon is {problem.horizon}")
    for step, row in enumerate(grid):
        if not isinstance(row, (list, tuple)):
            found.append(f"grid: step {step} is not a list of cells")
        elif len(row) != problem.gpus:
            found.append(
                f"grid: step {step} has {len(row)} GPUs but the cluster has {problem.gpus}"
            )
    return found


def occupancy(
    problem: AllocationProblem, grid: Sequence[Sequence[Any]]
) -> dict[str, dict[int, list[int]]]:
    """Map task id -> step -> sorted GPUs it holds (cells with unknown ids are skipped)."""
    known = problem.index.id2idx
    cells: dict[str, dict[int, list[int]]] = {}
    for step, row in enumerate(grid):
        for gpu, cell in enumerate(row):
            if isinstance(cell, str) and cell in known:
                cells.setdefault(cell, {}).setdefault(step, []).append(gpu)
    return cells


# --------------------------------------------------------------------------- checker
def violations(
    problem: AllocationProblem, solution: AllocationResult | Sequence[Sequence[Any]]
) -> list[str]:
    """Every breach of the five allocation rules in a grid (empty list when legal).

    Each message starts with the label of the broken rule (``A1``..``A5`` as in
    ``models/allocation.md``) or ``grid`` for a malformed grid. A result's
    schedule, when it has one, must also agree with its grid (``S1``..``S4``,
    section 12 there); a result without one is checked on its grid alone.

    Parameters
    ----------
    problem
        The scenario the grid claims to solve.
    solution
        An :class:`AllocationResult`, or its grid: ``grid[t][g]`` is the task
        id on GPU ``g`` at step ``t`` or None.

    Examples
    --------
    >>> p = AllocationProblem(gpus=2, horizon=2, tasks=[
    ...     {"id": "a", "kind": "training", "priority": 1, "gpus": 2, "duration": 2}])
    >>> violations(p, [["a", "a"], ["a", None]])
    ["A5: task 'a' changes GPUs from [0, 2) to [0, 1) at step 1"]
    """
    if isinstance(solution, AllocationResult):
        # (the metrics it was given: a result written before a metric existed states none)
        metrics = solution.metrics.model_dump(exclude_unset=True)
        stated = {"objective": solution.objective, "metrics": metrics}
        return result_violations(problem, solution.grid, solution.schedule, stated)
    return _grid_violations(problem, solution)


def result_violations(
    problem: AllocationProblem,
    grid: Sequence[Sequence[Any]],
    schedule: Sequence[ScheduleEntry] | None,
    stated: Mapping[str, Any] | None = None,
) -> list[str]:
    """A1..A5 on ``grid``, then S1..S4 on ``schedule`` against it (None: no schedule to
    check), then S5 on the figures a result states (``stated``: its ``objective`` and
    ``metrics``, as written; None or absent: none to check)."""
    found = _grid_violations(problem, grid)
    # S1-S5: a schedule and figures are read against a grid of the right shape only
    if not _shape_violations(problem, grid):
        if schedule is not None:
            found.extend(schedule_violations(problem, grid, schedule))
        if stated:
            found.extend(_stated_violations(problem, grid, stated))
    return found


def _stated_violations(
    problem: AllocationProblem, grid: Sequence[Sequence[Any]], stated: Mapping[str, Any]
) -> list[str]:
    """S5: the ``objective`` and the ``metrics`` a result states are those :func:`evaluate`
    reads off its grid (numbers within a millionth, relative)."""
    evaluation = evaluate(problem, grid)
    truth: dict[str, Any] = {"objective": evaluation.objective}
    truth.update({f"metrics.{k}": v for k, v in evaluation.metrics.model_dump().items()})
    given: dict[str, Any] = {"objective": stated.get("objective")}
    metrics = stated.get("metrics")
    if isinstance(metrics, Mapping):
        given.update({f"metrics.{k}": v for k, v in metrics.items() if f"metrics.{k}" in truth})
    found = []
    for name, value in given.items():
        if value is None:
            continue
        actual = truth[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isclose(value, actual, rel_tol=1e-6, abs_tol=1e-6)
        ):
            found.append(f"S5: the result states {name} {value!r} but its grid's is {actual:,.6g}")
    return found


def _grid_violations(problem: AllocationProblem, grid: Sequence[Sequence[Any]]) -> list[str]:
    """A1..A5 on a grid (``grid:`` messages alone when its shape is wrong)."""
    found = _shape_violations(problem, grid)
    if found:
        return found
    index = problem.index
    found = _cell_violations(index.id2idx, grid)
    cells = occupancy(problem, grid)
    batch_pos = {int(task_idx): b for b, task_idx in enumerate(index.batch_idx.tolist())}
    for task in problem.tasks:
        held = cells.get(task.id, {})
        if task.is_realtime:
            found.extend(_realtime_violations(problem, task.id, held))
        elif held:
            found.extend(_batch_violations(problem, task, held, batch_pos))
        elif task.running is not None:
            found.append(f"A2: running task {task.id!r} is missing from the grid")
    return found


def _cell_violations(known: Mapping[str, int], grid: Sequence[Sequence[Any]]) -> list[str]:
    """A1: one GPU serves at most one task per step; a cell holds one known id or null."""
    found = []
    for step, row in enumerate(grid):
        for gpu, cell in enumerate(row):
            if cell is None or isinstance(cell, str):
                if isinstance(cell, str) and cell not in known:
                    found.append(f"grid: unknown task id {short(cell)} on GPU {gpu} at step {step}")
                continue
            found.append(
                f"A1: GPU {gpu} at step {step} holds {short(cell)}, not a single task id or null"
            )
    return found


def _batch_violations(
    problem: AllocationProblem, task: Task, held: dict[int, list[int]], batch_pos: dict[int, int]
) -> list[str]:
    """A2, A3, A5 (and M1, M2 with GPU models) for a batch-like task that holds ``held``
    (step -> its GPUs)."""
    assert task.gpus is not None and task.duration is not None
    index = problem.index
    name = f"task {task.id!r}"
    steps = sorted(held)
    start, end = steps[0], steps[-1] + 1
    found = _moved_violations(name, held, steps)
    block = held[start]
    found.extend(_block_violations(problem, task, block, start))
    # M1, M2 (section 15): one pool of a model the task accepts, its duration there
    duration, on_model = task.duration, ""
    if problem.pools is not None:
        found.extend(_pool_violations(problem, task, block))
        model = index.model_of(block[0])
        on = int(index.batch_durations[batch_pos[index.id2idx[task.id]], model])
        if on:  # else the task does not accept the model: said above
            duration, on_model = on, f" on model {index.model_names[model]!r}"
    # A2: exactly `duration` consecutive steps inside [arrival, deadline).
    if task.running is not None:
        expected_end = min(problem.horizon, task.running.start + duration)
        if start != 0 or end != expected_end or block[0] != task.running.first_gpu:
            found.append(
                f"A2: running {name} must keep GPUs from {task.running.first_gpu} "
                f"for steps [0, {expected_end}), found {_block_text(block)} "
                f"for steps [{start}, {end})"
            )
        return found
    expected_end = min(problem.horizon, start + duration)
    if end != expected_end:
        found.append(
            f"A2: {name} runs steps [{start}, {end}) but needs {duration} "
            f"consecutive steps from {start}{on_model}"
        )
    if start < task.arrival:
        found.append(f"A2: {name} starts at step {start} before its arrival {task.arrival}")
    if task.deadline is not None and start + duration > task.deadline:
        found.append(
            f"A2: {name} finishes at step {start + duration} after its deadline "
            f"{task.deadline}{on_model}"
        )
    return found


def _moved_violations(name: str, held: dict[int, list[int]], steps: list[int]) -> list[str]:
    """A5: once started, never interrupted, and never moved (every step holds one block)."""
    found = []
    start, end = steps[0], steps[-1] + 1
    if len(steps) != end - start:
        gap = next(s for s in range(start, end) if s not in held)
        found.append(f"A5: {name} is interrupted at step {gap}")
    first_block = held[start]
    for step in steps[1:]:
        if held[step] != first_block:
            found.append(
                f"A5: {name} changes GPUs from {_block_text(first_block)} to "
                f"{_block_text(held[step])} at step {step}"
            )
            break
    return found


def _block_violations(
    problem: AllocationProblem, task: Task, block: list[int], start: int
) -> list[str]:
    """A3: one contiguous power-of-two block, aligned, inside one node (or whole nodes);
    A2: of the GPUs asked."""
    assert task.gpus is not None
    name = f"task {task.id!r}"
    node = problem.index.node_size
    found = []
    runs = _runs(block)
    if len(runs) != 1:
        found.append(f"A3: {name} holds non-contiguous GPUs {block} at step {start}")
    first = block[0]
    if len(block) != task.gpus:
        found.append(f"A2: {name} holds {len(block)} GPUs at step {start}, asked {task.gpus}")
    elif len(runs) == 1:
        if problem.align_blocks and first % task.gpus != 0:
            found.append(f"A3: {name} block {_block_text(block)} is not aligned to {task.gpus}")
        if not node_rule(first, task.gpus, node):
            what = "does not take whole nodes"
            if task.gpus <= node:
                what = "crosses a node boundary"
            found.append(f"A3: {name} block {_block_text(block)} {what}")
    return found


def _pool_violations(problem: AllocationProblem, task: Task, block: list[int]) -> list[str]:
    """A3 with GPU models (M1): the block lies inside one pool of a model the task accepts."""
    index = problem.index
    name = f"task {task.id!r}"
    pools = problem.pools or []
    first, last = block[0], block[-1]
    pool = index.pool_of(first)
    if index.pool_of(last) != pool:
        other = index.pool_of(last)
        return [
            f"A3: {name} block {_block_text(block)} spans pools {pool} ({pools[pool].model!r}) "
            f"and {other} ({pools[other].model!r})"
        ]
    if pools[pool].model not in problem.task_speeds(task):
        return [
            f"A3: {name} block {_block_text(block)} lies in pool {pool} of model "
            f"{pools[pool].model!r}, which the task does not accept"
        ]
    return []


def _block_text(block: list[int]) -> str:
    if block and block == list(range(block[0], block[-1] + 1)):
        return f"[{block[0]}, {block[-1] + 1})"
    return str(block)


def _realtime_violations(
    problem: AllocationProblem, task_id: str, held: dict[int, list[int]]
) -> list[str]:
    """A4: the GPU count changes by at most ``max_swap`` per step and from ``initial``."""
    index = problem.index
    r = int(np.flatnonzero(index.realtime_idx == index.id2idx[task_id])[0])
    swap, previous = int(index.max_swap[r]), int(index.initial[r])
    found = []
    for step in range(problem.horizon):
        count = len(held.get(step, ()))
        if abs(count - previous) > swap:
            where = "initial" if step == 0 else f"step {step - 1}"
            found.append(
                f"A4: realtime task {task_id!r} goes from {previous} GPUs ({where}) to {count} "
                f"at step {step}, more than max_swap {swap}"
            )
        previous = count
    return found


# --------------------------------------------------------------------------- evaluator
def evaluate(problem: AllocationProblem, grid: Sequence[Sequence[Any]]) -> Evaluation:
    """Objective and metrics of ``grid`` exactly as DESIGN.md section 1 defines them.

    The grid is not checked (call :func:`violations` for that); cells with
    unknown ids count as empty.
    """
    index = problem.index
    horizon, gpus = problem.horizon, problem.gpus
    weights = index.weights
    counts = np.zeros((len(index.ids), horizon), dtype=np.int64)
    known = index.id2idx
    for step, row in enumerate(grid[:horizon]):
        for cell in row:
            if isinstance(cell, str):
                task_idx = known.get(cell)
                if task_idx is not None:
                    counts[task_idx, step] += 1
    batch_counts = counts[index.batch_idx]  # (B, T)
    batch_priority = index.priority[index.batch_idx]
    durations = index.batch_duration
    if index.plain:
        work = batch_counts
    else:  # GPU models (section 15): a GPU-step on model m is d_j / d_j^m steps of work
        on_model = _model_counts(problem, grid)  # (B, M, T)
        work = (on_model * index.batch_rates[:, :, None]).sum(axis=1)
        model = on_model.sum(axis=2).argmax(axis=1)  # a legal block lies on one model
        steps = index.batch_durations[np.arange(index.num_batch), model]
        durations = np.where(steps > 0, steps, durations)
    batch_value_w = float(batch_priority @ (work @ weights)) if index.num_batch else 0.0
    value = float(batch_priority @ work.sum(axis=1)) if index.num_batch else 0.0
    useful = int(batch_counts.sum())
    shortfall_total = 0
    penalty_w = 0.0
    if index.num_realtime:
        held = counts[index.realtime_idx]  # (R, T)
        short = np.maximum(0, index.demand - held)
        shortfall_total = int(short.sum())
        useful += int(np.minimum(held, index.demand).sum())
        realtime_priority = index.priority[index.realtime_idx]
        penalty_w = float(realtime_priority @ (short @ weights))
    completed = 0
    scheduled = 0
    parts = problem.parts
    for b in range(index.num_batch):
        if index.ids[int(index.batch_idx[b])] in parts:
            continue  # a further block of a running pod: the pod counts once (its first block)
        occupied = np.flatnonzero(batch_counts[b])
        if occupied.size == 0:
            continue
        scheduled += 1
        if index.batch_running[b]:
            end = int(index.batch_remaining[b])
        else:
            end = int(occupied[0]) + int(durations[b])
        if end <= horizon:
            completed += 1
    objective = batch_value_w - problem.realtime_penalty * penalty_w
    metrics = Metrics(
        utilization=useful / (gpus * horizon),
        value=value,
        completed=completed,
        shortfall=shortfall_total,
        scheduled=scheduled,
    )
    return Evaluation(objective=objective, metrics=metrics)


def _model_counts(problem: AllocationProblem, grid: Sequence[Sequence[Any]]) -> np.ndarray:
    """``(B, M, T)`` cells of each batch-like task on each GPU model at each step."""
    index = problem.index
    batch_of = {index.ids[i]: b for b, i in enumerate(index.batch_idx.tolist())}
    gpu_model = index.gpu_model.tolist()
    counts = np.zeros((index.num_batch, index.num_models, index.horizon), dtype=np.int64)
    for step, row in enumerate(grid[: index.horizon]):
        for gpu, cell in enumerate(row[: index.gpus]):
            if isinstance(cell, str):
                b = batch_of.get(cell)
                if b is not None:
                    counts[b, gpu_model[gpu], step] += 1
    return counts


def make_result(
    problem: AllocationProblem,
    grid: Grid,
    *,
    method: str,
    seconds: float,
    status: Status = "feasible",
    bound: float | None = None,
    notes: Sequence[str] = (),
) -> AllocationResult:
    """Build an :class:`AllocationResult`, computing objective and metrics with :func:`evaluate`.

    ``gap`` follows from ``bound`` by the one gap rule (:func:`gpuopt.result.relative_gap`);
    ``notes`` should say why when ``bound`` is None (a general note is added otherwise).
    """
    evaluation = evaluate(problem, grid)
    return AllocationResult(
        method=method,
        name=problem.name,
        grid=grid,
        objective=evaluation.objective,
        bound=bound,
        status=status,
        seconds=seconds,
        metrics=evaluation.metrics,
        schedule=build_schedule(problem, grid),
        notes=list(notes),
    )


def load_result(text: str) -> AllocationResult:
    """Parse a result JSON string."""
    return AllocationResult.model_validate(json.loads(text))


__all__ = [
    "AllocationResult",
    "Evaluation",
    "Grid",
    "Metrics",
    "ScheduleEntry",
    "Status",
    "evaluate",
    "load_result",
    "make_result",
    "occupancy",
    "relative_gap",
    "result_violations",
    "violations",
]
