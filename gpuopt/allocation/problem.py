"""The allocation problem: a scenario (GPUs x steps x tasks) and its index view.

The scenario JSON of DESIGN.md section 5 maps one to one onto
:class:`AllocationProblem`. Validation rejects every inconsistency with one
sentence that names the field and value; a problem that validates always has at
least one legal grid (see ``models/allocation.md``, lemma "feasibility").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpuopt._model import MAX_ID_LENGTH, IndexedModel
from gpuopt.errors import problem_error_from

BatchKind = Literal["training", "batch_inference", "quantization"]
TaskKind = Literal["training", "batch_inference", "quantization", "realtime"]
BATCH_KINDS: tuple[str, ...] = ("training", "batch_inference", "quantization")
#: A plan: ``grid[t][g]`` is the id of the task on GPU ``g`` at step ``t``, or None.
Grid = list[list[str | None]]

#: Largest cluster and horizon a scenario may describe (a grid of 2^16 GPUs x
#: 10,000 steps is already far beyond what the methods are meant for).
MAX_GPUS = 65_536
MAX_HORIZON = 10_000
#: Largest grid (GPUs x steps) and realtime demand table (realtime tasks x
#: steps): every method holds a few grids of this size (the greedy about 25
#: bytes a cell, 0.5 GB at the limit; the result JSON 150 MB). At 65,536 GPUs
#: x 300 steps x 100,000 tasks the greedy and FIFO each take about 6.5 minutes.
MAX_CELLS = 20_000_000
#: Most tasks a scenario may list.
MAX_TASKS = 100_000
#: Largest duration, arrival or age (in steps) a task may state.
MAX_STEPS = 1_000_000

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


def node_rule(first: int, size: int, node: int) -> bool:
    """A3 with nodes of ``node`` GPUs: a block of at most a node lies inside one node; a
    larger block (a multi-node job, a whole number of nodes) starts at a node boundary, so
    it takes whole consecutive nodes."""
    if size <= node:
        return first // node == (first + size - 1) // node
    return first % node == 0 and size % node == 0


def is_power_of_two(value: int) -> bool:
    """Return True when ``value`` is 1, 2, 4, 8, ..."""
    return value > 0 and value & (value - 1) == 0


class Running(BaseModel):
    """An inherited task: it started at ``start`` (<= 0) on GPUs ``[first_gpu, first_gpu+gpus)``."""

    model_config = _CONFIG

    start: int = Field(ge=-MAX_STEPS, le=0, description="Step at which it started (<= 0).")
    first_gpu: int = Field(ge=0, le=MAX_GPUS, description="First GPU of its block.")


class Task(BaseModel):
    """One task of a scenario: batch-like (training, batch_inference, quantization) or realtime."""

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    kind: TaskKind
    priority: float = Field(ge=0, le=1e9)
    # batch-like fields
    gpus: int | None = Field(default=None, ge=1, le=MAX_GPUS)
    duration: int | None = Field(default=None, ge=1, le=MAX_STEPS)
    arrival: int = Field(default=0, ge=0, le=MAX_STEPS)
    deadline: int | None = Field(default=None, ge=1, le=2 * MAX_STEPS)
    running: Running | None = None
    # realtime fields
    demand: list[int] | None = None
    max_swap: int | None = Field(default=None, ge=0, le=MAX_GPUS)
    initial: int | None = Field(default=None, ge=0, le=MAX_GPUS)
    history: list[float] | None = Field(
        default=None,
        max_length=MAX_STEPS,
        description="Realtime demand (GPUs) in the steps before step 0, oldest first; read "
        "only by forecasters (gpuopt rolling --forecast seasonal).",
    )

    @property
    def is_realtime(self) -> bool:
        return self.kind == "realtime"

    @property
    def initial_gpus(self) -> int:
        """GPUs a realtime task holds just before step 0 (``initial``, default ``demand[0]``)."""
        if self.initial is not None:
            return self.initial
        return self.demand[0] if self.demand else 0

    @model_validator(mode="after")
    def _check_kind_fields(self) -> Task:
        name = f"task {self.id!r}"
        if self.is_realtime:
            for field in ("gpus", "duration", "deadline", "running"):
                if getattr(self, field) is not None:
                    raise ValueError(f"{name}: {field} does not apply to a realtime task")
            if self.arrival != 0:
                raise ValueError(
                    f"{name}: arrival does not apply to a realtime task (got {self.arrival})"
                )
            if self.demand is None:
                raise ValueError(f"{name}: demand is required for a realtime task")
            for step, value in enumerate(self.demand):
                if value < 0:
                    raise ValueError(f"{name}: demand[{step}] must be >= 0 (got {value})")
            for step, past in enumerate(self.history or ()):
                if past < 0:
                    raise ValueError(f"{name}: history[{step}] must be >= 0 (got {past})")
        else:
            for field in ("demand", "max_swap", "initial", "history"):
                if getattr(self, field) is not None:
                    raise ValueError(f"{name}: {field} applies only to realtime tasks")
            if self.gpus is None:
                raise ValueError(f"{name}: gpus is required for a {self.kind} task")
            if self.duration is None:
                raise ValueError(f"{name}: duration is required for a {self.kind} task")
            if not is_power_of_two(self.gpus):
                raise ValueError(f"{name}: gpus must be a power of two (got {self.gpus})")
            late = self.deadline is not None and self.deadline < self.arrival + self.duration
            if late and self.running is None:  # a running task's arrival and deadline are history
                raise ValueError(
                    f"{name}: deadline {self.deadline} is before arrival + duration "
                    f"({self.arrival} + {self.duration})"
                )
            if self.running is not None and self.running.start + self.duration <= 0:
                raise ValueError(
                    f"{name}: running.start {self.running.start} plus duration {self.duration} "
                    "ends before step 0, so the task has already finished"
                )
        return self


class AllocationProblem(IndexedModel):
    """A cluster of ``gpus`` GPUs planned over ``horizon`` steps, and the tasks that compete for it.

    Examples
    --------
    >>> problem = AllocationProblem(gpus=4, horizon=3, tasks=[
    ...     {"id": "a", "kind": "training", "priority": 2, "gpus": 2, "duration": 2}])
    >>> problem.index.num_batch
    1
    """

    model_config = _CONFIG
    document: ClassVar[str] = "a scenario"

    name: str = "scenario"
    gpus: int = Field(ge=1, le=MAX_GPUS)
    horizon: int = Field(default=24, ge=1, le=MAX_HORIZON)
    step_minutes: int = Field(default=60, ge=1, le=7 * 24 * 60)
    decay: float = Field(default=0.97, gt=0, le=1)
    realtime_penalty: float = Field(default=8.0, ge=0, le=1e6)
    align_blocks: bool = False
    gpus_per_node: int | None = Field(default=None, ge=1)
    tasks: list[Task] = Field(default_factory=list, max_length=MAX_TASKS)

    @model_validator(mode="before")
    @classmethod
    def _tasks_from_dicts(cls, data: Any) -> Any:
        # Strict mode keeps numbers honest; nested task dicts are still welcome.
        if isinstance(data, dict) and isinstance(data.get("tasks"), list):
            tasks = []
            for position, item in enumerate(data["tasks"]):
                if isinstance(item, dict):
                    try:
                        item = Task.model_validate(item)
                    except ValidationError as exc:
                        raise _nested_error(exc, f"tasks[{position}]") from None
                tasks.append(item)
            data = {**data, "tasks": tasks}
        return data

    @model_validator(mode="after")
    def _check_consistency(self) -> AllocationProblem:
        gpus, horizon, node = self.gpus, self.horizon, self.gpus_per_node
        if gpus * horizon > MAX_CELLS:
            raise ValueError(
                f"gpus {gpus} x horizon {horizon} is {gpus * horizon:,} GPU-steps, more than "
                f"the {MAX_CELLS:,} a scenario may plan (use fewer GPUs or a shorter horizon)"
            )
        realtime = sum(task.is_realtime for task in self.tasks)
        if realtime * horizon > MAX_CELLS:
            raise ValueError(
                f"tasks: {realtime} realtime tasks x horizon {horizon} is more than the "
                f"{MAX_CELLS:,} demand values a scenario may hold"
            )
        if node is not None and gpus % node != 0:
            raise ValueError(f"gpus_per_node {node} does not divide gpus {gpus}")
        seen: set[str] = set()
        for task in self.tasks:
            if task.id in seen:
                raise ValueError(f"tasks: duplicate id {task.id!r}")
            seen.add(task.id)
            name = f"task {task.id!r}"
            if task.is_realtime:
                assert task.demand is not None
                if len(task.demand) != horizon:
                    raise ValueError(
                        f"{name}: demand has {len(task.demand)} values but horizon is {horizon}"
                    )
                for step, value in enumerate(task.demand):
                    if value > gpus:
                        raise ValueError(
                            f"{name}: demand[{step}] = {value} exceeds the cluster's {gpus} GPUs"
                        )
                if task.initial is not None and task.initial > gpus:
                    raise ValueError(
                        f"{name}: initial {task.initial} exceeds the cluster's {gpus} GPUs"
                    )
                continue
            assert task.gpus is not None
            if task.gpus > gpus:
                raise ValueError(f"{name}: gpus {task.gpus} exceeds the cluster's {gpus} GPUs")
            if node is not None and task.gpus > node and task.gpus % node:
                raise ValueError(
                    f"{name}: gpus {task.gpus} exceeds gpus_per_node {node} without being a "
                    "multiple of it, and a job larger than a node takes whole nodes"
                )
            if task.running is not None:
                first = task.running.first_gpu
                if first + task.gpus > gpus:
                    raise ValueError(
                        f"{name}: running block [{first}, {first + task.gpus}) "
                        f"lies outside the cluster's {gpus} GPUs"
                    )
                if node is not None and not node_rule(first, task.gpus, node):
                    where = (
                        "crosses a node boundary"
                        if task.gpus <= node
                        else ("does not start at a node boundary")
                    )
                    raise ValueError(
                        f"{name}: running block [{first}, {first + task.gpus}) "
                        f"{where} (gpus_per_node {node})"
                    )
                if self.align_blocks and first % task.gpus != 0:
                    raise ValueError(
                        f"{name}: running.first_gpu {first} is not aligned to its "
                        f"{task.gpus} GPUs while align_blocks is true"
                    )
        self._check_running_overlap()
        self._check_realtime_ramp_down()
        return self

    def _check_running_overlap(self) -> None:
        owner: dict[int, str] = {}
        for task in self.tasks:
            if task.running is None or task.gpus is None:
                continue
            for gpu in range(task.running.first_gpu, task.running.first_gpu + task.gpus):
                if gpu in owner:
                    raise ValueError(
                        f"task {task.id!r}: running block overlaps task {owner[gpu]!r} on GPU {gpu}"
                    )
                owner[gpu] = task.id

    def _check_realtime_ramp_down(self) -> None:
        """Lemma "feasibility": realtime can ramp down from ``initial`` beside running tasks."""
        horizon = self.horizon
        need = np.zeros(horizon, dtype=np.int64)
        for task in self.tasks:
            if task.running is not None and task.gpus is not None and task.duration is not None:
                end = min(horizon, task.running.start + task.duration)
                need[:end] += task.gpus
        steps = np.arange(1, horizon + 1, dtype=np.int64)
        for task in self.tasks:
            if task.is_realtime:
                swap = _swap_of(task, self.gpus)
                need += np.maximum(0, task.initial_gpus - swap * steps)
        before = sum(t.initial_gpus for t in self.tasks if t.is_realtime) + sum(
            t.gpus or 0 for t in self.tasks if t.running is not None and t.running.start < 0
        )
        if before > self.gpus:
            raise ValueError(
                f"tasks: just before step 0 the realtime initial counts and the running tasks "
                f"hold {before} GPUs but the cluster has {self.gpus}"
            )
        over = np.flatnonzero(need > self.gpus)
        if over.size:
            step = int(over[0])
            raise ValueError(
                f"tasks: at step {step} running tasks and the realtime ramp-down allowed by "
                f"max_swap from initial need {int(need[step])} GPUs but the cluster has {self.gpus}"
            )

    # ------------------------------------------------------------------ views
    @cached_property
    def index(self) -> AllocationIndex:
        """Numpy arrays and id maps for the algorithms (built once, then cached)."""
        return AllocationIndex.build(self)

    def task(self, task_id: str) -> Task:
        """Return the task with id ``task_id`` (``KeyError`` if unknown)."""
        return self.tasks[self.index.id2idx[task_id]]

    def to_json(self, *, indent: int | None = 1) -> str:
        """The scenario JSON (fields that are unset stay out)."""
        return self.model_dump_json(indent=indent, exclude_none=True)


def _swap_of(task: Task, gpus: int) -> int:
    """``max_swap``, where unset or above the cluster size means no limit (``gpus``)."""
    return gpus if task.max_swap is None else min(gpus, task.max_swap)


def _nested_error(exc: ValidationError, prefix: str) -> ValueError:
    text = str(problem_error_from(exc)).rstrip(".")
    if not text.startswith("task "):
        text = f"{prefix}.{text}"
    return ValueError(text)


@dataclass(frozen=True)
class BatchTable:
    """Batch-like tasks as lists indexed by batch position (see :class:`AllocationIndex`)."""

    task_idx: list[int]
    size: list[int]
    duration: list[int]
    arrival: list[int]
    last_start: list[int]
    running: list[bool]
    first_gpu: list[int]
    remaining: list[int]
    priority: list[float]


@dataclass(frozen=True)
class AllocationIndex:
    """Array view of a problem for hot loops (never pydantic objects there).

    Tasks keep their scenario order: ``ids[i]`` is task ``i``. Batch arrays are
    indexed by batch position ``b`` with ``batch_idx[b]`` the task index;
    realtime arrays by realtime position ``r`` with ``realtime_idx[r]``.
    """

    gpus: int
    horizon: int
    node_size: int  # gpus_per_node, or gpus when unset
    align: bool
    penalty: float
    weights: np.ndarray  # (T,) decay**t
    ids: tuple[str, ...]
    id2idx: dict[str, int]
    is_realtime: np.ndarray  # (N,) bool
    priority: np.ndarray  # (N,) float
    batch_idx: np.ndarray  # (B,) task index of each batch-like task
    batch_gpus: np.ndarray  # (B,)
    batch_duration: np.ndarray  # (B,)
    batch_arrival: np.ndarray  # (B,)
    batch_last_start: np.ndarray  # (B,) last legal start step (deadline and horizon)
    batch_running: np.ndarray  # (B,) bool
    batch_first_gpu: np.ndarray  # (B,) running tasks' first GPU, else -1
    batch_remaining: np.ndarray  # (B,) running tasks' steps left from step 0, else duration
    realtime_idx: np.ndarray  # (R,)
    demand: np.ndarray  # (R, T)
    max_swap: np.ndarray  # (R,)
    initial: np.ndarray  # (R,)

    @cached_property
    def batch(self) -> BatchTable:
        """The batch arrays as plain Python lists (faster than numpy for scalar access)."""
        return BatchTable(
            task_idx=self.batch_idx.tolist(),
            size=self.batch_gpus.tolist(),
            duration=self.batch_duration.tolist(),
            arrival=self.batch_arrival.tolist(),
            last_start=self.batch_last_start.tolist(),
            running=self.batch_running.tolist(),
            first_gpu=self.batch_first_gpu.tolist(),
            remaining=self.batch_remaining.tolist(),
            priority=self.priority[self.batch_idx].tolist(),
        )

    @cached_property
    def realtime_floor(self) -> np.ndarray:
        """``(R, T)`` GPUs each realtime task must still hold: its fastest ramp-down from
        ``initial`` (``ymin`` of the formal model; every legal curve stays at or above it)."""
        steps = np.arange(1, self.horizon + 1, dtype=np.int64)
        return np.maximum(0, self.initial[:, None] - self.max_swap[:, None] * steps[None, :])

    @property
    def num_batch(self) -> int:
        return int(self.batch_idx.size)

    @property
    def num_realtime(self) -> int:
        return int(self.realtime_idx.size)

    @classmethod
    def build(cls, problem: AllocationProblem) -> AllocationIndex:
        horizon, gpus = problem.horizon, problem.gpus
        tasks = problem.tasks
        batch = [i for i, t in enumerate(tasks) if not t.is_realtime]
        realtime = [i for i, t in enumerate(tasks) if t.is_realtime]
        last_start = []
        for i in batch:
            task = tasks[i]
            assert task.duration is not None
            last = horizon - 1
            if task.deadline is not None:
                last = min(last, task.deadline - task.duration)
            last_start.append(last)
        demand = np.zeros((len(realtime), horizon), dtype=np.int64)
        for r, i in enumerate(realtime):
            demand[r] = tasks[i].demand or 0
        return cls(
            gpus=gpus,
            horizon=horizon,
            node_size=problem.gpus_per_node or gpus,
            align=problem.align_blocks,
            penalty=problem.realtime_penalty,
            weights=problem.decay ** np.arange(horizon, dtype=np.float64),
            ids=tuple(t.id for t in tasks),
            id2idx={t.id: i for i, t in enumerate(tasks)},
            is_realtime=np.array([t.is_realtime for t in tasks], dtype=bool),
            priority=np.array([t.priority for t in tasks], dtype=np.float64),
            batch_idx=np.array(batch, dtype=np.int64),
            batch_gpus=np.array([tasks[i].gpus for i in batch], dtype=np.int64),
            batch_duration=np.array([tasks[i].duration for i in batch], dtype=np.int64),
            batch_arrival=np.array([tasks[i].arrival for i in batch], dtype=np.int64),
            batch_last_start=np.array(last_start, dtype=np.int64),
            batch_running=np.array([tasks[i].running is not None for i in batch], dtype=bool),
            batch_first_gpu=np.array([_running_first(tasks[i]) for i in batch], dtype=np.int64),
            batch_remaining=np.array([_remaining(tasks[i]) for i in batch], dtype=np.int64),
            realtime_idx=np.array(realtime, dtype=np.int64),
            demand=demand,
            max_swap=np.array([_swap_of(tasks[i], gpus) for i in realtime], dtype=np.int64),
            initial=np.array([tasks[i].initial_gpus for i in realtime], dtype=np.int64),
        )


def _running_first(task: Task) -> int:
    return -1 if task.running is None else task.running.first_gpu


def _remaining(task: Task) -> int:
    assert task.duration is not None
    if task.running is None:
        return task.duration
    return task.running.start + task.duration


parse_problem = AllocationProblem.parse
load_problem = AllocationProblem.load


__all__ = [
    "BATCH_KINDS",
    "MAX_CELLS",
    "MAX_GPUS",
    "MAX_HORIZON",
    "MAX_TASKS",
    "AllocationIndex",
    "AllocationProblem",
    "Grid",
    "Running",
    "Task",
    "is_power_of_two",
    "load_problem",
    "node_rule",
    "parse_problem",
]
