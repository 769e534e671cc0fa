"""The schedule of an allocation result: one entry per task, read off the grid.

Every :class:`~gpuopt.allocation.solution.AllocationResult` carries a
schedule built here by :func:`build_schedule` from its grid, whatever method
made the grid, so that a reader learns when each task starts, on which GPUs,
and why a task was left out, without decoding the grid. Section 12 of
``models/allocation.md`` defines the entries, their statuses and reasons, and
the rules S1-S4 by which :func:`schedule_violations` holds a schedule to its
grid.

A reason is a claim about the grid and the problem that :func:`build_schedule`
has checked (section 12.2 of the model says how); none is a guess about what a
method intended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from gpuopt.allocation._board import Board, running_count
from gpuopt.allocation.problem import AllocationIndex, AllocationProblem, Task, TaskKind

#: What became of a task in the plan (``models/allocation.md`` section 12.1).
EntryStatus = Literal[
    "completed",
    "past_horizon",
    "running",
    "running_past_horizon",
    "not_scheduled",
    "served",
    "short",
]
#: Why a batch-like task was not scheduled (``models/allocation.md`` section 12.2).
Reason = Literal["after_horizon", "no_fit", "idle", "higher_value", "lower_value", "not_analysed"]

#: A few words per reason, for summaries that group left-out tasks by reason.
REASON_TEXT: dict[str, str] = {
    "after_horizon": "arrives after the horizon",
    "no_fit": "fits in no legal plan beside the running tasks and the realtime minimum",
    "idle": "fits in GPUs the plan leaves idle, but was not placed",
    "higher_value": "every placement overlaps a running task or work worth at least as much",
    "lower_value": "its least contested placement holds only lower-value work",
    "not_analysed": "not analysed (the reason search would exceed its budget)",
}

#: Element operations the reason search may spend on one grid (windowed maxima over
#: the cells, about 2.5 s of numpy); left-out tasks beyond it get ``not_analysed``.
REASON_BUDGET = 1_000_000_000


class ScheduleEntry(BaseModel):
    """One task of the plan: what became of it, when, where, and why not.

    Fields that do not apply are None and left out of the JSON.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    kind: TaskKind
    status: EntryStatus
    start: int | None = Field(
        default=None,
        description="Step at which the task starts; negative for a running task, which "
        "started before the plan.",
    )
    end: int | None = Field(
        default=None,
        description="start + duration: the step by which it finishes (after the horizon for "
        "the statuses past_horizon and running_past_horizon).",
    )
    first_gpu: int | None = Field(default=None, description="First GPU of its block.")
    gpus: int | None = Field(default=None, description="GPUs of its block, [first_gpu, +gpus).")
    reason: Reason | None = Field(default=None, description="Why it was not scheduled.")
    detail: str | None = Field(default=None, description="The reason in one sentence.")
    demand: int | None = Field(default=None, description="Realtime: GPU-steps demanded.")
    served: int | None = Field(default=None, description="Realtime: GPU-steps held up to demand.")
    held: int | None = Field(
        default=None, description="Realtime: GPU-steps held, reserve included."
    )
    shortfall: int | None = Field(default=None, description="Realtime: demand - served.")

    @model_serializer(mode="wrap")
    def _without_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {name: value for name, value in data.items() if value is not None}

    @property
    def left_out(self) -> bool:
        """True for a task that does not run in the plan."""
        return self.status == "not_scheduled"


# --------------------------------------------------------------------------- building
def build_schedule(
    problem: AllocationProblem, grid: Sequence[Sequence[Any]]
) -> list[ScheduleEntry]:
    """The schedule of ``grid``: one entry per task of ``problem``, in scenario order.

    The grid must have the problem's shape (``horizon`` rows of ``gpus``
    cells); cells with unknown ids count as empty. On a legal grid every
    entry is exact; on an illegal one a batch task's block is the GPUs it
    holds at its first step.

    Examples
    --------
    >>> p = AllocationProblem(gpus=2, horizon=2, tasks=[
    ...     {"id": "a", "kind": "training", "priority": 1, "gpus": 2, "duration": 3},
    ...     {"id": "b", "kind": "training", "priority": 1, "gpus": 1, "duration": 1,
    ...      "arrival": 5}])
    >>> [(e.id, e.status, e.start, e.end, e.reason) for e in build_schedule(p, [["a", "a"]] * 2)]
    [('a', 'past_horizon', 0, 3, None), ('b', 'not_scheduled', None, None, 'after_horizon')]
    """
    index = problem.index
    codes = _codes(index, grid)
    placed, first_cell, width = _blocks(index, codes)
    held = realtime_held(index, codes)
    left_out = [
        b
        for b, task_idx in enumerate(index.batch.task_idx)
        if not placed[task_idx] and not index.batch.running[b]
    ]
    why = _reasons(problem, codes, held, left_out)
    batch_of = {task_idx: b for b, task_idx in enumerate(index.batch.task_idx)}
    entries: list[ScheduleEntry] = []
    realtime_pos = 0
    for task_idx, task in enumerate(problem.tasks):
        if task.is_realtime:
            entries.append(_realtime_entry(task, index.demand[realtime_pos], held[realtime_pos]))
            realtime_pos += 1
        elif not placed[task_idx]:
            reason, detail = why.get(task_idx, (None, None))
            entries.append(
                ScheduleEntry(
                    id=task.id, kind=task.kind, status="not_scheduled", reason=reason, detail=detail
                )
            )
        else:
            first_step, first_gpu = divmod(int(first_cell[task_idx]), index.gpus)
            start, end, status = _batch_span(index, task, batch_of[task_idx], first_step, first_gpu)
            entries.append(
                ScheduleEntry(
                    id=task.id,
                    kind=task.kind,
                    status=status,
                    start=start,
                    end=end,
                    first_gpu=first_gpu,
                    gpus=int(width[task_idx]),
                )
            )
    return entries


def _blocks(index: AllocationIndex, codes: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per task: whether it holds a cell, its first cell (step * gpus + GPU; -1 if none) and
    the GPUs it holds at its first step."""
    occupied = np.flatnonzero(codes.ravel() >= 0)
    owner = codes.ravel()[occupied]
    count = np.bincount(owner, minlength=len(index.ids))
    # cells of one task in grid order (step, then GPU): the first is its start and first GPU
    by_owner = occupied[np.argsort(owner, kind="stable")]
    ends = np.cumsum(count)
    placed = count > 0
    first_cell = np.full(len(index.ids), -1, dtype=np.int64)
    first_cell[placed] = by_owner[(ends - count)[placed]]
    first_step = first_cell // index.gpus
    at_start = occupied // index.gpus == first_step[owner]
    width = np.bincount(owner[at_start], minlength=len(index.ids))
    return placed, first_cell, width


def _realtime_entry(task: Task, demand: np.ndarray, got: np.ndarray) -> ScheduleEntry:
    """The entry of a realtime task that wanted ``demand`` and held ``got`` GPUs per step."""
    served = int(np.minimum(demand, got).sum())
    short = int(demand.sum()) - served
    return ScheduleEntry(
        id=task.id,
        kind=task.kind,
        status="short" if short else "served",
        demand=int(demand.sum()),
        served=served,
        held=int(got.sum()),
        shortfall=short,
    )


def _batch_span(
    index: AllocationIndex, task: Task, batch_pos: int, first_step: int, first_gpu: int
) -> tuple[int, int, EntryStatus]:
    """Start, end and status of a placed batch-like task whose block starts at ``first_step``
    on ``first_gpu``."""
    assert task.duration is not None
    start = first_step if task.running is None else task.running.start
    duration = task.duration
    if not index.plain:  # its duration on the model of its block (section 15)
        steps = index.per_model.durations[batch_pos][index.model_of(first_gpu)]
        duration = steps or duration  # 0: a model it does not accept (an illegal grid)
    end = start + duration
    status: EntryStatus = "running" if task.running is not None else "completed"
    if end > index.horizon:
        status = "running_past_horizon" if task.running is not None else "past_horizon"
    return start, end, status


def _codes(index: AllocationIndex, grid: Sequence[Sequence[Any]]) -> np.ndarray:
    """``(T, G)`` task index of each cell, -1 where it is empty or names no task."""
    known = index.id2idx
    return np.array(
        [[known.get(cell, -1) if isinstance(cell, str) else -1 for cell in row] for row in grid],
        dtype=np.int64,
    ).reshape(index.horizon, index.gpus)


def realtime_held(index: AllocationIndex, codes: np.ndarray) -> np.ndarray:
    """``(R, T)`` GPUs each realtime task holds at each step of the grid ``codes``."""
    horizon = index.horizon
    position = np.full(len(index.ids) + 1, -1, dtype=np.int64)  # the last: empty cells (-1)
    position[index.realtime_idx] = np.arange(index.num_realtime)
    where = position[codes]
    steps = np.broadcast_to(np.arange(horizon)[:, None], codes.shape)
    mine = where >= 0
    counts = np.bincount(
        where[mine] * horizon + steps[mine], minlength=index.num_realtime * horizon
    )
    return counts.reshape(index.num_realtime, horizon)


# --------------------------------------------------------------------------- reasons
def _reasons(
    problem: AllocationProblem, codes: np.ndarray, held: np.ndarray, left_out: list[int]
) -> dict[int, tuple[Reason, str]]:
    """Task index -> (reason, sentence) for the new batch tasks (batch positions) left out.

    Section 12.2 of ``models/allocation.md``: a placement ``(f, s)`` is a legal
    block and start of the task that no legal plan rules out (it avoids the
    running blocks, and every step it covers keeps room for the realtime
    services' fastest ramp-down). The least contested placement is the one
    whose most valuable cell is cheapest (ties: earliest start, lowest GPU).
    With GPU models, the blocks and durations of every model the task accepts
    are placements alike.
    """
    index = problem.index
    batch = index.batch
    horizon = index.horizon
    board = Board(index)
    found: dict[int, tuple[Reason, str]] = {}
    # (size, steps, legal first GPUs) -> the (task, way) pairs of that shape
    shapes: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    ways: dict[int, list[tuple[int, int, float]]] = {}  # task -> (duration, last, rate) per way
    for b in left_out:
        task_idx = batch.task_idx[b]
        if batch.arrival[b] >= horizon:
            found[task_idx] = (
                "after_horizon",
                f"it arrives at step {batch.arrival[b]}, not before the horizon ends "
                f"(step {horizon})",
            )
            continue
        ways[b] = []
        for way, (duration, last, firsts, rate) in enumerate(board.variants(b)):
            ways[b].append((duration, last, rate))
            shapes.setdefault((batch.size[b], min(duration, horizon), firsts), []).append((b, way))
    if not ways:
        return found
    worth = _cell_worth(problem, codes, held)
    room = _floor_room(index)
    spent = 0
    # per task and way: the cheapest cost and its first GPU at each start, or None if not analysed
    options: dict[int, list[tuple[np.ndarray, np.ndarray] | None]] = {
        b: [None] * len(found_ways) for b, found_ways in ways.items()
    }
    unanalysed: set[int] = set()
    for (size, length, mask), group in sorted(shapes.items(), key=lambda item: -len(item[1])):
        spent += _search_cost(index, size, length)
        if spent > REASON_BUDGET:
            unanalysed.update(b for b, _ in group)
            continue
        # most valuable cell of each legal block (columns) over each start's steps (rows);
        # a start without room for the realtime minimum beside running tasks is ruled out
        cost = _window_max(_window_max(worth.T, size, pad=None).T, length, pad=-1.0)
        fits = -_window_max(-room, length, pad=-np.inf) >= size
        legal = _legal_firsts(board, mask)
        cost = np.where(fits[:, None], cost[:, legal], np.inf)
        cheapest = cost.min(axis=1, initial=np.inf)  # per start: the least contested block
        cheapest_first = legal[cost.argmin(axis=1)] if legal.size else np.zeros(horizon, int)
        for b, way in group:
            options[b][way] = (cheapest, cheapest_first)
    for b, task_ways in ways.items():
        task_idx = batch.task_idx[b]
        if b in unanalysed:
            found[task_idx] = ("not_analysed", REASON_TEXT["not_analysed"])
            continue
        analysed = [
            (*option, duration, last, rate)
            for (duration, last, rate), option in zip(task_ways, options[b], strict=True)
            if option is not None
        ]
        found[task_idx] = _reason_of(problem, codes, analysed, b)
    return found


def _reason_of(
    problem: AllocationProblem,
    codes: np.ndarray,
    ways: list[tuple[np.ndarray, np.ndarray, int, int, float]],
    b: int,
) -> tuple[Reason, str]:
    """The reason of batch task ``b``, from the least contested block at each start of each
    way it may run (``(cheapest, cheapest_first, duration, last start, rate)``: one per GPU
    model; a plain problem has one, at rate 1)."""
    index = problem.index
    batch = index.batch
    size, arrival = batch.size[b], batch.arrival[b]
    priority = batch.priority[b]
    task = problem.tasks[batch.task_idx[b]]
    until = f"its deadline (step {task.deadline})" if task.deadline is not None else "the horizon"
    # per way: (cost, start, first GPU, duration, rate) of its least contested placement
    placements: list[tuple[float, int, int, int, float]] = []
    for cheapest, cheapest_first, duration, last, rate in ways:
        starts = cheapest[arrival : last + 1]
        if starts.size == 0 or not np.isfinite(starts.min()):
            continue
        start = arrival + int(np.argmin(starts))  # ties: the earliest start, then the lowest GPU
        placements.append(
            (float(cheapest[start]), start, int(cheapest_first[start]), duration, rate)
        )
    if not placements:
        return (
            "no_fit",
            f"no block of {size} GPUs is free from its arrival (step {arrival}) to {until} "
            "beside the running tasks and the realtime services' fastest ramp-down, even in an "
            "otherwise empty plan",
        )
    # ties between ways: the earliest start, then the lowest GPU
    contested = min(placements, key=lambda option: option[:3])
    cheaper = [option for option in placements if option[0] < priority * option[4]]
    if contested[0] >= 0 and cheaper:
        contested = min(cheaper, key=lambda option: option[:3])
    worst, start, first, duration, rate = contested
    own = f"priority {priority:g}"
    if rate != 1.0:
        own = f"value {priority * rate:g} (priority {priority:g} x speed-up {rate:.3g})"
    end = min(index.horizon, start + duration)
    where = f"GPUs {first}-{first + size - 1} in steps {start}-{end - 1}"
    if worst < 0:
        note = " (priority 0: placing it adds nothing)" if priority == 0 else ""
        return "idle", f"{where} are idle, yet it was not placed{note}"
    holders = _holders(problem, codes[start:end, first : first + size])
    if cheaper:
        return (
            "lower_value",
            f"its least contested placement, {where}, holds only work worth less than its "
            f"{own} per GPU-step: {holders}",
        )
    return (
        "higher_value",
        f"every placement from its arrival (step {arrival}) to {until} overlaps a running task "
        f"or work worth at least its {own} per GPU-step; the least contested, "
        f"{where}, holds {holders}",
    )


def _holders(problem: AllocationProblem, cells: np.ndarray, limit: int = 3) -> str:
    """The tasks in ``cells``, the most valuable first, with their priorities: a few of them."""
    index = problem.index
    seen = np.zeros(len(index.ids) + 1, dtype=bool)  # the last: empty cells (-1)
    seen[cells.ravel()] = True
    found = np.flatnonzero(seen[:-1])
    found = found[np.argsort(-index.priority[found], kind="stable")]
    named = [
        f"{index.ids[i]!r} ({'realtime, ' if index.is_realtime[i] else ''}"
        f"priority {index.priority[i]:g})"
        for i in found[:limit].tolist()
    ]
    more = found.size - limit
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


def _cell_worth(problem: AllocationProblem, codes: np.ndarray, held: np.ndarray) -> np.ndarray:
    """``(T, G)`` what one GPU-step of each cell's holder is worth in the objective.

    Idle: -1. Batch: its priority (times its rate on the GPU's model, section 15).
    Realtime: ``realtime_penalty * priority``
    (the price of a missing GPU-step), or 0 at a step where the service holds
    more than its demand (reserve). Running blocks: infinite (nothing may
    displace them, A2b).
    """
    index = problem.index
    per_task = np.append(index.priority, -1.0)  # the last: empty cells (code -1)
    per_task[index.realtime_idx] *= index.penalty
    worth: np.ndarray = per_task[codes]
    if not index.plain:  # a batch GPU-step on model m is worth p_j * d_j / d_j^m (section 15)
        rates = np.ones((len(index.ids) + 1, index.num_models))
        rates[index.batch_idx] = index.batch_rates
        worth *= rates[codes, index.gpu_model[None, :]]
    if index.num_realtime:
        position = np.full(len(index.ids) + 1, -1, dtype=np.int64)
        position[index.realtime_idx] = np.arange(index.num_realtime)
        where = position[codes]
        over = np.vstack([held > index.demand, np.zeros((1, index.horizon), dtype=bool)])
        reserve = over[where, np.arange(index.horizon)[:, None]] & (where >= 0)
        worth[reserve] = 0.0
    batch = index.batch
    for b in np.flatnonzero(index.batch_running).tolist():
        end = min(index.horizon, batch.remaining[b])
        worth[:end, batch.first_gpu[b] : batch.first_gpu[b] + batch.size[b]] = np.inf
    return worth


def _floor_room(index: AllocationIndex) -> np.ndarray:
    """``(T,)`` GPUs every legal plan leaves for new batch blocks at each step (V3's slack)."""
    floor = index.realtime_floor.sum(axis=0) if index.num_realtime else 0
    return (index.gpus - running_count(index) - floor).astype(np.float64)


def _legal_firsts(board: Board, mask: int) -> np.ndarray:
    """The first GPUs of a bitmask of them (legal blocks as the board knows them), ascending."""
    packed = np.frombuffer(mask.to_bytes((board.gpus + 7) // 8, "little"), dtype=np.uint8)
    firsts: np.ndarray = np.flatnonzero(np.unpackbits(packed, bitorder="little"))
    return firsts


def _window_max(values: np.ndarray, width: int, *, pad: float | None) -> np.ndarray:
    """``out[i] = max(values[i : i + width])`` along axis 0, by doubling.

    With ``pad``, ``values`` is first extended by ``width - 1`` rows of it, so
    the output has as many rows as the input (windows cut by the end);
    without, it has ``rows - width + 1``.
    """
    if pad is not None and width > 1:
        extra = np.full((width - 1, *values.shape[1:]), pad, dtype=values.dtype)
        values = np.concatenate([values, extra])
    covered = 1
    while covered < width:
        shift = min(covered, width - covered)
        values = np.maximum(values[:-shift], values[shift:])
        covered += shift
    return values


def _search_cost(index: AllocationIndex, size: int, length: int) -> int:
    cells = index.horizon * index.gpus
    return cells * (int(size).bit_length() + int(length).bit_length() + 2)


# --------------------------------------------------------------------------- checking
#: The rule of ``models/allocation.md`` section 12.3 that each field of an entry answers to.
FIELD_RULES: dict[str, str] = {
    "kind": "S2",
    "status": "S2",
    "start": "S2",
    "end": "S2",
    "first_gpu": "S2",
    "gpus": "S2",
    "demand": "S3",
    "served": "S3",
    "held": "S3",
    "shortfall": "S3",
    "reason": "S4",
}


def schedule_violations(
    problem: AllocationProblem,
    grid: Sequence[Sequence[Any]],
    schedule: Sequence[ScheduleEntry],
) -> list[str]:
    """Every disagreement of ``schedule`` with ``grid`` (rules S1-S4), one sentence each.

    The grid must have the problem's shape (check it with
    :func:`~gpuopt.allocation.solution.violations` first). The schedule is
    compared field by field with the one :func:`build_schedule` reads off the
    grid; ``detail`` is prose and is not compared.
    """
    expected = {entry.id: entry for entry in build_schedule(problem, grid)}
    found: list[str] = []
    seen: dict[str, int] = {}
    for entry in schedule:
        seen[entry.id] = seen.get(entry.id, 0) + 1
        if entry.id not in expected:  # S1: only the scenario's tasks
            found.append(f"S1: the schedule lists task {entry.id!r}, which the scenario lacks")
            continue
        if seen[entry.id] > 1:
            continue
        truth = expected[entry.id]
        for field, rule in FIELD_RULES.items():  # S2 (batch), S3 (realtime), S4 (reason)
            given, actual = getattr(entry, field), getattr(truth, field)
            if given != actual:
                found.append(
                    f"{rule}: task {entry.id!r} has {field} {_shown(given)} in the schedule "
                    f"but {_shown(actual)} by the grid"
                )
    for task_id in expected:  # S1: every task exactly once
        times = seen.get(task_id, 0)
        if times == 0:
            found.append(f"S1: task {task_id!r} is missing from the schedule")
        elif times > 1:
            found.append(f"S1: task {task_id!r} is listed {times} times in the schedule")
    return found


def _shown(value: Any) -> str:
    return "none" if value is None else repr(value) if isinstance(value, str) else str(value)


def left_out_groups(schedule: Sequence[ScheduleEntry]) -> dict[str, list[str]]:
    """Reason -> ids of the tasks left out for it, in schedule order."""
    groups: dict[str, list[str]] = {}
    for entry in schedule:
        if entry.left_out:
            groups.setdefault(entry.reason or "unknown", []).append(entry.id)
    return groups


__all__ = [
    "FIELD_RULES",
    "REASON_BUDGET",
    "REASON_TEXT",
    "EntryStatus",
    "Reason",
    "ScheduleEntry",
    "build_schedule",
    "left_out_groups",
    "realtime_held",
    "schedule_violations",
]
