"""The defragmentation problem: a cluster snapshot (nodes and the tasks on them).

The snapshot JSON of DESIGN.md section 5 maps one to one onto
:class:`DefragProblem`. Validation rejects every inconsistency with one sentence
that names the field and value (unknown node, over-committed node, duplicate
ids, a task on a node its selector excludes, two tasks of one anti-affinity
group on one node, ...), so the snapshot itself is always a legal state; the
rules a plan must keep are written in ``models/defrag.md`` (D1-D7).

CPU and memory are exact: the index view stores them as integers in
thousandths (``cpus=0.5`` is 500 milli-CPUs), so capacity checks never round.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuopt._model import MAX_ID_LENGTH, IndexedModel
from gpuopt.errors import short, validate_object
from gpuopt.io.files import read_json

#: Largest snapshot the models accept: the methods are built for tens of
#: thousands of nodes, and a snapshot costs about 3 KB of memory per task
#: while it is read and planned (125,000 nodes and 500,000 tasks: 1.5 GB with
#: ipc), so these keep a snapshot within a few GB.
MAX_NODES = 200_000
MAX_TASKS = 2_000_000
#: Most (distinct node selector, node) pairs: the index keeps one boolean per pair.
MAX_SELECTOR_CELLS = 200_000_000
#: Largest GPU count of one node or task, and largest CPU / memory figure.
MAX_NODE_GPUS = 1024
MAX_AMOUNT = 1e12
#: CPU and memory are compared as integers in units of 1/SCALE.
SCALE = 1000

Priority = Literal["HP", "LP"]
SelectorValue = str | list[str]

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


def scaled(amount: float) -> int:
    """``amount`` in thousandths, rounded to the nearest integer (exact for milli-units)."""
    return round(amount * SCALE)


def selector_matches(selector: dict[str, SelectorValue], labels: dict[str, str]) -> bool:
    """True when every selector key is among ``labels`` with an accepted value.

    A value may be one string (equality) or a list of strings (any of them,
    like Kubernetes' ``In`` operator).

    >>> selector_matches({"gpu_model": ["T4", "P100"]}, {"gpu_model": "T4"})
    True
    >>> selector_matches({"gpu_model": "H20"}, {})
    False
    """
    for key, wanted in selector.items():
        have = labels.get(key)
        if have is None:
            return False
        if isinstance(wanted, str):
            if have != wanted:
                return False
        elif have not in wanted:
            return False
    return True


class Node(BaseModel):
    """One machine: its GPUs, CPUs, optional memory, access switch and labels."""

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    gpus: int = Field(ge=0, le=MAX_NODE_GPUS)
    cpus: float = Field(ge=0, le=MAX_AMOUNT)
    memory: float | None = Field(
        default=None, ge=0, le=MAX_AMOUNT, description="Memory (any unit, same as the tasks')."
    )
    asw: str | None = Field(
        default=None, min_length=1, max_length=MAX_ID_LENGTH, description="Access switch id."
    )
    labels: dict[str, str] = Field(default_factory=dict)


class Task(BaseModel):
    """One running task (pod): where it runs and what it holds."""

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    node: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    gpus: int = Field(ge=0, le=MAX_NODE_GPUS)
    cpus: float = Field(default=0.0, ge=0, le=MAX_AMOUNT)
    memory: float | None = Field(default=None, ge=0, le=MAX_AMOUNT)
    gpu_milli: int | None = Field(
        default=None,
        ge=1,
        le=999,
        description="Share of its one GPU actually used, in thousandths (a shared GPU); "
        "the task still holds the whole GPU.",
    )
    locked: bool = False
    priority: Priority = "LP"
    node_selector: dict[str, SelectorValue] = Field(default_factory=dict)
    anti_affinity: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="Group: at most one task of it per node.",
    )

    @model_validator(mode="after")
    def _check_share(self) -> Task:
        if self.gpu_milli is not None and self.gpus != 1:
            raise ValueError(
                f"task {self.id!r}: gpu_milli applies to a one-GPU task, not gpus={self.gpus}"
            )
        for key, wanted in self.node_selector.items():
            if isinstance(wanted, list) and not wanted:
                raise ValueError(f"task {self.id!r}: node_selector.{key} is an empty list")
        return self


class DefragOptions(BaseModel):
    """Method options a snapshot may carry (the CLI flags and keyword arguments override them)."""

    model_config = _CONFIG

    partition_size: int = Field(default=500, ge=2, le=MAX_NODES)
    depth: int = Field(default=3, ge=1, le=6, description="Longest eviction chain.")
    rounds: int = Field(default=5, ge=1, le=100)
    time_limit: float | None = Field(default=None, gt=0, le=1e6)
    max_moves: int | None = Field(default=None, ge=0, le=MAX_TASKS)
    group_budget: int | None = Field(
        default=None, ge=0, le=MAX_TASKS, description="Most tasks of one anti-affinity group moved."
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="CP-SAT and HiGHS take 32 bits.")
    min_node_gpus: int = Field(
        default=0,
        ge=0,
        le=MAX_NODE_GPUS,
        description="Only nodes with at least this many GPUs are emptied (e.g. 8 to free "
        "whole 8-GPU nodes); smaller nodes still take tasks.",
    )


class DefragProblem(IndexedModel):
    """A snapshot: nodes, the tasks running on them, and optional method options.

    Examples
    --------
    >>> problem = DefragProblem(
    ...     nodes=[{"id": "a", "gpus": 8, "cpus": 64}, {"id": "b", "gpus": 8, "cpus": 64}],
    ...     tasks=[{"id": "t1", "node": "a", "gpus": 2, "cpus": 8},
    ...            {"id": "t2", "node": "b", "gpus": 4, "cpus": 8}])
    >>> problem.index.node_used_gpus.tolist()
    [2, 4]
    """

    model_config = _CONFIG

    name: str = "snapshot"
    nodes: list[Node] = Field(max_length=MAX_NODES)
    tasks: list[Task] = Field(default_factory=list, max_length=MAX_TASKS)
    options: DefragOptions = Field(default_factory=DefragOptions)

    @model_validator(mode="after")
    def _check_snapshot(self) -> DefragProblem:
        node_ids = Counter(node.id for node in self.nodes)
        for node_id, count in node_ids.items():
            if count > 1:
                raise ValueError(f"nodes: id {node_id!r} appears {count} times")
        task_ids = Counter(task.id for task in self.tasks)
        for task_id, count in task_ids.items():
            if count > 1:
                raise ValueError(f"tasks: id {task_id!r} appears {count} times")
        selectors = len({_selector_key(task.node_selector) for task in self.tasks})
        if selectors * len(self.nodes) > MAX_SELECTOR_CELLS:
            raise ValueError(
                f"tasks: {selectors:,} distinct node_selectors over {len(self.nodes):,} nodes are "
                f"more than the {MAX_SELECTOR_CELLS:,} selector-node pairs a snapshot may have"
            )
        by_id = {node.id: node for node in self.nodes}
        gpus: Counter[str] = Counter()
        cpus: Counter[str] = Counter()
        memory: Counter[str] = Counter()
        groups: set[tuple[str, str]] = set()
        for task in self.tasks:
            node = by_id.get(task.node)
            if node is None:
                raise ValueError(f"task {task.id!r}: node {task.node!r} is not in nodes")
            if not selector_matches(task.node_selector, node.labels):
                raise ValueError(
                    f"task {task.id!r}: its node {node.id!r} does not match its node_selector "
                    f"{short(task.node_selector, 120)}"
                )
            if task.anti_affinity is not None:
                key = (task.anti_affinity, node.id)
                if key in groups:
                    raise ValueError(
                        f"task {task.id!r}: node {node.id!r} already runs a task of "
                        f"anti_affinity group {task.anti_affinity!r}"
                    )
                groups.add(key)
            gpus[node.id] += task.gpus
            cpus[node.id] += scaled(task.cpus)
            if task.memory is not None:
                memory[node.id] += scaled(task.memory)
        for node in self.nodes:
            if gpus[node.id] > node.gpus:
                raise ValueError(
                    f"node {node.id!r}: its tasks hold {gpus[node.id]} GPUs but it has {node.gpus}"
                )
            if cpus[node.id] > scaled(node.cpus):
                raise ValueError(
                    f"node {node.id!r}: its tasks hold {cpus[node.id] / SCALE:g} CPUs "
                    f"but it has {node.cpus:g}"
                )
            if node.memory is not None and memory[node.id] > scaled(node.memory):
                raise ValueError(
                    f"node {node.id!r}: its tasks hold {memory[node.id] / SCALE:g} memory "
                    f"but it has {node.memory:g}"
                )
        return self

    @cached_property
    def index(self) -> DefragIndex:
        """The array view the methods and the checker read (built once)."""
        return DefragIndex.build(self)


@dataclass(frozen=True)
class DefragIndex:
    """Numpy view of a snapshot: nodes and tasks by position, resources as integers.

    ``node_memory`` is -1 where a node states no memory (memory is then not
    checked on it). ``task_selector`` indexes ``selector_masks``: one boolean
    row per distinct node selector, True on the nodes it admits.
    """

    node_ids: list[str]
    node_pos: dict[str, int]
    node_gpus: np.ndarray
    node_cpus: np.ndarray
    node_memory: np.ndarray
    node_asw: list[str | None]
    task_ids: list[str]
    task_pos: dict[str, int]
    task_node: np.ndarray
    task_gpus: np.ndarray
    task_cpus: np.ndarray
    task_memory: np.ndarray
    task_locked: np.ndarray
    task_hp: np.ndarray
    task_group: np.ndarray
    group_ids: list[str]
    task_selector: np.ndarray
    selector_masks: np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.node_ids)

    @property
    def num_tasks(self) -> int:
        return len(self.task_ids)

    @cached_property
    def node_used_gpus(self) -> np.ndarray:
        return np.bincount(self.task_node, weights=self.task_gpus, minlength=self.num_nodes).astype(
            np.int64
        )

    @cached_property
    def node_task_count(self) -> np.ndarray:
        return np.bincount(self.task_node, minlength=self.num_nodes).astype(np.int64)

    @classmethod
    def build(cls, problem: DefragProblem) -> DefragIndex:
        node_ids = [node.id for node in problem.nodes]
        node_pos = {node_id: pos for pos, node_id in enumerate(node_ids)}
        tasks = problem.tasks
        group_pos: dict[str, int] = {}  # anti-affinity group -> position, in order of first use
        selector_pos: dict[str, int] = {"{}": 0}
        selector_rows: list[np.ndarray] = [np.ones(len(node_ids), dtype=bool)]
        task_group = np.full(len(tasks), -1, dtype=np.int64)
        task_selector = np.zeros(len(tasks), dtype=np.int64)
        for pos, task in enumerate(tasks):
            if task.anti_affinity is not None:
                task_group[pos] = group_pos.setdefault(task.anti_affinity, len(group_pos))
            if task.node_selector:
                key = _selector_key(task.node_selector)
                row = selector_pos.get(key)
                if row is None:
                    row = selector_pos[key] = len(selector_rows)
                    selector_rows.append(
                        np.array(
                            [selector_matches(task.node_selector, n.labels) for n in problem.nodes],
                            dtype=bool,
                        )
                    )
                task_selector[pos] = row
        return cls(
            node_ids=node_ids,
            node_pos=node_pos,
            node_gpus=np.array([n.gpus for n in problem.nodes], dtype=np.int64),
            node_cpus=np.array([scaled(n.cpus) for n in problem.nodes], dtype=np.int64),
            node_memory=np.array(
                [-1 if n.memory is None else scaled(n.memory) for n in problem.nodes],
                dtype=np.int64,
            ),
            node_asw=[n.asw for n in problem.nodes],
            task_ids=[t.id for t in tasks],
            task_pos={t.id: pos for pos, t in enumerate(tasks)},
            task_node=np.array([node_pos[t.node] for t in tasks], dtype=np.int64),
            task_gpus=np.array([t.gpus for t in tasks], dtype=np.int64),
            task_cpus=np.array([scaled(t.cpus) for t in tasks], dtype=np.int64),
            task_memory=np.array(
                [0 if t.memory is None else scaled(t.memory) for t in tasks], dtype=np.int64
            ),
            task_locked=np.array([t.locked for t in tasks], dtype=bool),
            task_hp=np.array([t.priority == "HP" for t in tasks], dtype=bool),
            task_group=task_group,
            group_ids=list(group_pos),
            task_selector=task_selector,
            selector_masks=np.array(selector_rows, dtype=bool).reshape(
                len(selector_rows), len(node_ids)
            ),
        )


def _selector_key(selector: dict[str, SelectorValue]) -> str:
    """One key per distinct node selector (the empty one included)."""
    return repr(sorted(selector.items())) if selector else "{}"


def parse_snapshot(data: Any, *, source: str | None = None) -> DefragProblem:
    """Validate a decoded snapshot (a dict) into a :class:`DefragProblem`.

    Raises
    ------
    ProblemError
        With one sentence naming the offending field and value.
    """
    return validate_object(DefragProblem, data, what="a snapshot", source=source)


def load_snapshot(path: str | Path) -> DefragProblem:
    """Read a snapshot JSON file (DESIGN.md section 5) into a :class:`DefragProblem`.

    Raises
    ------
    ProblemError
        When the file is missing, is not JSON, or does not describe a valid snapshot.
    """
    return parse_snapshot(read_json(path), source=str(path))


__all__ = [
    "MAX_NODES",
    "SCALE",
    "DefragIndex",
    "DefragOptions",
    "DefragProblem",
    "Node",
    "Task",
    "load_snapshot",
    "parse_snapshot",
    "scaled",
    "selector_matches",
]
