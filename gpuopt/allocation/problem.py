"""The allocation problem: a scenario (GPUs x steps x tasks) and its index view.

The scenario JSON of DESIGN.md section 5 maps one to one onto
:class:`AllocationProblem`. Validation rejects every inconsistency with one
sentence that names the field and value; a problem that validates always has at
least one legal grid (see ``models/allocation.md``, lemma "feasibility").
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from itertools import pairwise
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from gpuopt._model import MAX_ID_LENGTH, IndexedModel
from gpuopt.errors import problem_error_from, short

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
#: Largest speed factor of a GPU model (a smallest one follows from MAX_STEPS: a task's
#: duration on a model, ``ceil(duration / speed)``, may not exceed it).
MAX_SPEED = 1e6
#: Most GPU pools a scenario may list.
MAX_POOLS = 256

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


def node_rule(first: int, size: int, node: int) -> bool:
    """A3 with nodes of ``node`` GPUs: a block of at most a node lies inside one node; a
    larger block (a multi-node job, a whole number of nodes) starts at a node boundary, so
    it takes whole consecutive nodes."""
    if size <= node:
        return first // node == (first + size - 1) // node
    return first % node == 0 and size % node == 0


def model_duration(duration: int, speed: float) -> int:
    """``ceil(duration / speed)``: steps a task of ``duration`` reference steps runs on a GPU
    model of ``speed`` (``models/allocation.md`` section 15, rule M2).

    The speed is read as the decimal it was written as, so ``6 / 1.5`` is 4 and
    ``7 / 0.7`` is 10, never one more by a rounding error.

    >>> model_duration(6, 1.5), model_duration(7, 0.7), model_duration(5, 2.0)
    (4, 10, 3)
    """
    return max(1, math.ceil(Fraction(duration) / Fraction(repr(float(speed)))))


def is_power_of_two(value: int) -> bool:
    """Return True when ``value`` is 1, 2, 4, 8, ..."""
    return value > 0 and value & (value - 1) == 0


class Running(BaseModel):
    """An inherited task: it started at ``start`` (<= 0) on GPUs ``[first_gpu, first_gpu+gpus)``."""

    model_config = _CONFIG

    start: int = Field(ge=-MAX_STEPS, le=0, description="Step at which it started (<= 0).")
    first_gpu: int = Field(ge=0, le=MAX_GPUS, description="First GPU of its block.")
    part_of: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="The running task whose pod this block belongs to as well: a pod whose "
        "GPUs form several legal blocks is one running task per block (a cluster's time "
        "grid, G3); the metrics count the pod once.",
    )


class Pool(BaseModel):
    """A pool of ``gpus`` GPUs of one ``model``; the pools of a scenario follow each other in
    GPU order (``models/allocation.md`` section 15)."""

    model_config = _CONFIG

    model: str = Field(min_length=1, max_length=MAX_ID_LENGTH, description="GPU model name.")
    gpus: int = Field(ge=1, le=MAX_GPUS, description="GPUs of the pool.")


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
    models: list[str] | dict[str, float] | None = Field(
        default=None,
        union_mode="left_to_right",
        description="GPU models the task accepts: a list of names (speeds from the "
        "scenario's speed) or an object name -> speed factor; absent: every model.",
    )
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

    @field_validator("models", mode="before")
    @classmethod
    def _models_shape(cls, value: Any) -> Any:
        # one sentence instead of pydantic's error per member of the union
        names = isinstance(value, list) and all(isinstance(item, str) for item in value)
        speeds = isinstance(value, dict) and all(
            isinstance(speed, (int, float)) and not isinstance(speed, bool)
            for speed in value.values()
        )
        if speeds:
            for model, speed in value.items():
                if not math.isfinite(speed):
                    raise ValueError(
                        f"models[{short(model)}] is a speed factor and must be a finite number "
                        f"(got {speed})"
                    )
        if value is None or names or speeds:
            return value
        raise ValueError(
            "models must be a list of GPU model names or an object that maps model names to "
            f"speed factors (got {short(value)})"
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
            if self.models is not None:
                raise ValueError(
                    f"{name}: models does not apply to a realtime task (a realtime task may "
                    "take any free GPU at each step: rule A1b counts GPUs over the whole cluster)"
                )
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
            self._check_models(name)
            # the deadline and a running task's end depend on the GPU model's speed: the
            # scenario checks them (AllocationProblem._check_durations)
        return self

    def _check_models(self, name: str) -> None:
        models = self.models
        if models is None:
            return
        if not models:
            raise ValueError(f"{name}: models must name at least one GPU model (got {models})")
        if isinstance(models, list):
            for model in models:
                if not 1 <= len(model) <= MAX_ID_LENGTH:
                    raise ValueError(
                        f"{name}: models holds a name of {len(model)} characters, "
                        f"{short(model, 20)} (a GPU model name has 1 to {MAX_ID_LENGTH})"
                    )
                if models.count(model) > 1:
                    raise ValueError(f"{name}: models lists {model!r} twice")
            return
        for model, speed in models.items():
            if not 0 < speed <= MAX_SPEED:
                raise ValueError(
                    f"{name}: models[{short(model)}] is a speed factor and must be > 0 and "
                    f"at most {MAX_SPEED:g} (got {speed})"
                )


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
    pools: list[Pool] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_POOLS,
        description="GPU pools in GPU order, each of one model; absent: one pool of an "
        "unnamed model.",
    )
    speed: dict[str, float] | None = Field(
        default=None,
        description="Default speed factor of each GPU model (1.0 for a model not listed).",
    )
    tasks: list[Task] = Field(default_factory=list, max_length=MAX_TASKS)

    @model_validator(mode="before")
    @classmethod
    def _tasks_from_dicts(cls, data: Any) -> Any:
        # Strict mode keeps numbers honest; nested task and pool dicts are still welcome.
        if isinstance(data, dict):
            for key, model in (("tasks", Task), ("pools", Pool)):
                if not isinstance(data.get(key), list):
                    continue
                items: list[Any] = []
                for position, item in enumerate(data[key]):
                    if isinstance(item, dict):
                        try:
                            item = model.model_validate(item)
                        except ValidationError as exc:
                            raise _nested_error(exc, f"{key}[{position}]") from None
                    items.append(item)
                data = {**data, key: items}
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
        self._check_pools()
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
            self._check_task_models(task)
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
                self._check_running_pool(task)
            self._check_durations(task)
        self._check_running_overlap()
        self._check_running_parts()
        self._check_realtime_ramp_down()
        return self

    def _check_running_parts(self) -> None:
        """``running.part_of`` names another running task, itself no part, started at the
        same step, running as many steps, on a pool of the same GPU model."""
        running = {task.id: task for task in self.tasks if task.running is not None}
        for task in self.tasks:
            if task.running is None or task.running.part_of is None:
                continue
            found = running.get(task.running.part_of)
            name = f"task {task.id!r}: running.part_of {short(task.running.part_of)}"
            if found is None or found.running is None or task.running.part_of == task.id:
                raise ValueError(f"{name} is not another running task of the scenario")
            whole = found.running
            if whole.part_of is not None:
                raise ValueError(f"{name} is itself a part of {short(whole.part_of)}")
            if whole.start != task.running.start:
                raise ValueError(
                    f"{name} started at step {whole.start}, this block at {task.running.start}"
                )
            if found.duration != task.duration:
                raise ValueError(
                    f"{name} runs {found.duration} steps, this block {task.duration} (one pod "
                    "ends at once)"
                )
            if self.pools:  # (M2: on pools of other models the blocks would end apart)
                mine = self.pools[self.pool_of(task.running.first_gpu)].model
                theirs = self.pools[self.pool_of(whole.first_gpu)].model
                if mine != theirs:
                    raise ValueError(
                        f"{name} runs on GPU model {short(theirs)}, this block on "
                        f"{short(mine)} (one pod's blocks share a node, so a model)"
                    )

    def _check_pools(self) -> None:
        """Section 15: pools cover the cluster in whole nodes; speeds name pools' models."""
        gpus, node = self.gpus, self.gpus_per_node
        names = self.model_names
        if self.pools is not None:
            held = sum(pool.gpus for pool in self.pools)
            if held != gpus:
                raise ValueError(f"pools: the pools hold {held} GPUs but gpus is {gpus}")
            for position, pool in enumerate(self.pools):
                if node is not None and pool.gpus % node:
                    raise ValueError(
                        f"pools[{position}]: gpus {pool.gpus} is not a multiple of "
                        f"gpus_per_node {node} (a node is never split between pools)"
                    )
        for model, speed in (self.speed or {}).items():
            if model not in names:
                raise ValueError(
                    f"speed: {short(model)} is not the model of any pool ({_pool_list(names)})"
                )
            if not 0 < speed <= MAX_SPEED:
                raise ValueError(
                    f"speed: {short(model)} must be > 0 and at most {MAX_SPEED:g} (got {speed})"
                )

    @property
    def parts(self) -> dict[str, str]:
        """Task id -> the running task whose pod it is a further block of
        (``running.part_of``): the metrics and summaries count that pod once."""
        return {
            task.id: task.running.part_of
            for task in self.tasks
            if task.running is not None and task.running.part_of is not None
        }

    @property
    def model_names(self) -> tuple[str, ...]:
        """The GPU models of the pools, in order of their first pool (``("",)``: no pools)."""
        if self.pools is None:
            return ("",)
        return tuple(dict.fromkeys(pool.model for pool in self.pools))

    @property
    def pool_bounds(self) -> tuple[int, ...]:
        """First GPU of each pool, then ``gpus`` (``(0, gpus)``: no pools)."""
        bounds = [0]
        for pool in self.pools or ():
            bounds.append(bounds[-1] + pool.gpus)
        return tuple(bounds) if self.pools else (0, self.gpus)

    def task_speeds(self, task: Task) -> dict[str, float]:
        """GPU model -> speed factor of a batch-like task, for the models it accepts (M1)."""
        defaults = self.speed or {}
        models = task.models
        if models is None:
            return {name: defaults.get(name, 1.0) for name in self.model_names}
        if isinstance(models, dict):
            return dict(models)
        return {name: defaults.get(name, 1.0) for name in models}

    def task_durations(self, task: Task) -> dict[str, int]:
        """GPU model -> steps the batch-like task runs on it, ``ceil(duration / speed)`` (M2)."""
        assert task.duration is not None
        return {
            model: task.duration if speed == 1.0 else _duration_on(task.duration, speed)
            for model, speed in self.task_speeds(task).items()
        }

    def pool_of(self, gpu: int) -> int:
        """Index of the pool holding GPU ``gpu`` (0 without pools)."""
        return bisect_right(self.pool_bounds, gpu) - 1 if self.pools else 0

    def _check_task_models(self, task: Task) -> None:
        """M1: a task's models name pools' models, and one of them has a pool it fits in."""
        if task.models is None and self.pools is None:
            return
        names = self.model_names
        name = f"task {task.id!r}"
        for model in task.models or ():
            if model not in names:
                raise ValueError(
                    f"{name}: models names {short(model)}, which is not the model of any pool "
                    f"({_pool_list(names)})"
                )
        if self.pools is None:
            return
        assert task.gpus is not None
        accepted = self.task_speeds(task)
        largest = max(pool.gpus for pool in self.pools if pool.model in accepted)
        if task.gpus > largest:
            raise ValueError(
                f"{name}: gpus {task.gpus} exceeds the {largest} GPUs of the largest pool of "
                "a model it accepts (a block lies inside one pool)"
            )

    def _check_running_pool(self, task: Task) -> None:
        """M1 for a running task: its block lies inside one pool of a model it accepts."""
        if self.pools is None:
            return
        assert task.running is not None and task.gpus is not None
        first, last = task.running.first_gpu, task.running.first_gpu + task.gpus - 1
        pool, other = self.pool_of(first), self.pool_of(last)
        block = f"running block [{first}, {last + 1})"
        if pool != other:
            raise ValueError(
                f"task {task.id!r}: {block} spans pools {pool} ({self.pools[pool].model!r}) "
                f"and {other} ({self.pools[other].model!r})"
            )
        model = self.pools[pool].model
        if model not in self.task_speeds(task):
            raise ValueError(
                f"task {task.id!r}: {block} lies in pool {pool} of model {model!r}, which "
                "its models do not accept"
            )

    def _check_durations(self, task: Task) -> None:
        """M2: the deadline leaves room on some accepted model; a running task has not ended."""
        assert task.duration is not None
        running, deadline = task.running, task.deadline
        if self.pools is None:  # one unnamed model at speed 1, the stated duration (15.4)
            if running is not None and running.start + task.duration <= 0:
                raise ValueError(_finished(task, "", task.duration))
            late = deadline is not None and deadline < task.arrival + task.duration
            if late and running is None:
                raise ValueError(_too_late(task, "", task.duration))
            return
        durations = self.task_durations(task)
        for model, steps in durations.items():
            if steps > MAX_STEPS:
                raise ValueError(
                    f"task {task.id!r}: duration {task.duration} on model {model!r} at speed "
                    f"{self.task_speeds(task)[model]:g} is {steps:,} steps, more than the "
                    f"{MAX_STEPS:,} a task may run"
                )
        if running is not None:  # its arrival and deadline are history
            model = self.pools[self.pool_of(running.first_gpu)].model
            if running.start + durations[model] <= 0:
                raise ValueError(_finished(task, model, durations[model]))
        elif deadline is not None:
            fastest = min(durations, key=durations.__getitem__)
            if deadline < task.arrival + durations[fastest]:
                raise ValueError(_too_late(task, fastest, durations[fastest]))

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


def _finished(task: Task, model: str, steps: int) -> str:
    """V1's message for a running task that has ended before step 0 on its model."""
    assert task.running is not None
    what = f"duration {task.duration}"
    if steps != task.duration:
        what = f"its duration on model {model!r} ({steps} steps)"
    return (
        f"task {task.id!r}: running.start {task.running.start} plus {what} ends before step 0, "
        "so the task has already finished"
    )


def _too_late(task: Task, model: str, steps: int) -> str:
    """The message for a deadline before arrival plus the duration on the fastest model."""
    if steps == task.duration:
        return (
            f"task {task.id!r}: deadline {task.deadline} is before arrival + duration "
            f"({task.arrival} + {task.duration})"
        )
    return (
        f"task {task.id!r}: deadline {task.deadline} is before arrival + duration on its "
        f"fastest model {model!r} ({task.arrival} + {steps})"
    )


def _pool_list(names: tuple[str, ...]) -> str:
    """The GPU models a message may name, or that there are none."""
    if names == ("",):
        return "the scenario lists no pools"
    return (
        "pool models: "
        + ", ".join(short(name, 40) for name in names[:8])
        + (", ..." if len(names) > 8 else "")
    )


_DURATIONS: dict[tuple[int, float], int] = {}


def _duration_on(duration: int, speed: float) -> int:
    """:func:`model_duration`, remembered (a scenario has few distinct pairs)."""
    found = _DURATIONS.get((duration, speed))
    if found is None:
        if len(_DURATIONS) > 100_000:
            _DURATIONS.clear()
        found = _DURATIONS[(duration, speed)] = model_duration(duration, speed)
    return found


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
class ModelTable:
    """Batch-like tasks per GPU model (section 15) as lists: ``durations[b][m]`` is the steps
    task ``b`` (batch position) runs on model ``m`` (index into ``model_names``), 0 where it
    does not accept it; ``rates[b][m]`` is ``duration / steps`` (0.0 there) and
    ``last_starts[b][m]`` its last legal start there (-1)."""

    durations: list[list[int]]
    rates: list[list[float]]
    last_starts: list[list[int]]


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
    # GPU models (section 15); without pools one unnamed model "" over the whole cluster
    model_names: tuple[str, ...]
    pool_bounds: tuple[int, ...]  # first GPU of each pool, then gpus
    pool_model: tuple[int, ...]  # model index of each pool
    batch_durations: np.ndarray  # (B, M) steps on each model, 0 where not accepted
    batch_rates: np.ndarray  # (B, M) duration / steps on each model, 0 where not accepted
    batch_last_starts: np.ndarray  # (B, M) last legal start on each model, -1 where not accepted
    #: One pool, every duration as stated: the problem of the sections before 15, on which
    #: every method runs exactly as it did before GPU models existed.
    plain: bool

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
    def legal_masks(self) -> dict[int, int]:
        """Size -> bitmask of the legal first GPUs of a block of that size (A3), filled by
        :meth:`gpuopt.allocation._board.Board.legal_firsts` as sizes are asked for and
        shared by every board of this index (a pure function of the index and the size)."""
        return {}

    @cached_property
    def per_model(self) -> ModelTable:
        """The per-model arrays as lists (built on first use: plain problems never need them)."""
        return ModelTable(
            durations=self.batch_durations.tolist(),
            rates=self.batch_rates.tolist(),
            last_starts=self.batch_last_starts.tolist(),
        )

    @property
    def num_models(self) -> int:
        return len(self.model_names)

    def pool_of(self, gpu: int) -> int:
        """Index of the pool holding GPU ``gpu``."""
        return bisect_right(self.pool_bounds, gpu) - 1

    def model_of(self, gpu: int) -> int:
        """Model index of GPU ``gpu``."""
        return self.pool_model[bisect_right(self.pool_bounds, gpu) - 1]

    @cached_property
    def gpu_model(self) -> np.ndarray:
        """``(G,)`` model index of every GPU."""
        bounds = self.pool_bounds
        sizes = [high - low for low, high in pairwise(bounds)]
        return np.repeat(np.array(self.pool_model, dtype=np.int64), sizes)

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
        names = problem.model_names
        bounds = problem.pool_bounds
        pool_model = tuple(names.index(pool.model) for pool in problem.pools or ()) or (0,)
        reference = np.array([tasks[i].duration for i in batch], dtype=np.int64)
        if problem.pools is None:  # one unnamed model at speed 1 (section 15.4)
            durations = reference[:, None].copy()
        else:
            durations = np.zeros((len(batch), len(names)), dtype=np.int64)
            for b, i in enumerate(batch):
                for name, steps in problem.task_durations(tasks[i]).items():
                    durations[b, names.index(name)] = steps
        remaining = reference.copy()  # steps left from step 0: the duration, or for a
        for b, i in enumerate(batch):  # running task its end on the model of its block
            running = tasks[i].running
            if running is not None:
                model = pool_model[bisect_right(bounds, running.first_gpu) - 1]
                remaining[b] = running.start + durations[b, model]
        last_starts = np.full((len(batch), len(names)), -1, dtype=np.int64)
        accepted = durations > 0
        last_starts[accepted] = horizon - 1
        deadlines = [tasks[i].deadline for i in batch]
        if any(deadline is not None for deadline in deadlines):
            cap = np.array([horizon - 1 if d is None else d for d in deadlines], dtype=np.int64)
            due = np.array([d is not None for d in deadlines], dtype=bool)[:, None] & accepted
            last_starts[due] = np.minimum(last_starts, cap[:, None] - durations)[due]
        rates = np.zeros(durations.shape, dtype=np.float64)
        np.divide(reference[:, None], durations, out=rates, where=accepted)
        plain = len(bounds) == 2 and bool((durations == reference[:, None]).all())
        last_start = (
            last_starts.max(axis=1) if len(batch) else np.zeros(0, dtype=np.int64)
        ).tolist()
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
            batch_duration=reference,
            batch_arrival=np.array([tasks[i].arrival for i in batch], dtype=np.int64),
            batch_last_start=np.array(last_start, dtype=np.int64),
            batch_running=np.array([tasks[i].running is not None for i in batch], dtype=bool),
            batch_first_gpu=np.array([_running_first(tasks[i]) for i in batch], dtype=np.int64),
            batch_remaining=remaining,
            realtime_idx=np.array(realtime, dtype=np.int64),
            demand=demand,
            max_swap=np.array([_swap_of(tasks[i], gpus) for i in realtime], dtype=np.int64),
            initial=np.array([tasks[i].initial_gpus for i in realtime], dtype=np.int64),
            model_names=names,
            pool_bounds=bounds,
            pool_model=pool_model,
            batch_durations=durations,
            batch_rates=rates,
            batch_last_starts=last_starts,
            plain=plain,
        )


def _running_first(task: Task) -> int:
    return -1 if task.running is None else task.running.first_gpu


parse_problem = AllocationProblem.parse
load_problem = AllocationProblem.load


__all__ = [
    "BATCH_KINDS",
    "MAX_CELLS",
    "MAX_GPUS",
    "MAX_HORIZON",
    "MAX_POOLS",
    "MAX_SPEED",
    "MAX_TASKS",
    "AllocationIndex",
    "AllocationProblem",
    "Grid",
    "ModelTable",
    "Pool",
    "Running",
    "Task",
    "is_power_of_two",
    "load_problem",
    "model_duration",
    "node_rule",
    "parse_problem",
]
