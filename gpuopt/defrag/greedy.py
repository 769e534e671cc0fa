"""IPC: partitioned search with eviction chains and rounds (the fast path).

The nodes are split at random into disjoint partitions (``partition_size``
nodes each); each partition, with every task on its nodes, is solved on its
own, so partitions run in parallel on any ``concurrent.futures``-style
executor (local processes by default, or a Dask ``distributed.Client``).
Inside a partition, nodes are tried easiest first (no HP task, then fewest
tasks, then fewest used GPUs); every task of a node must move away, directly
(best fit) or through an eviction chain of at most ``depth`` moves, to a node
that is neither being emptied nor idle, or the node is left as it was. Rounds
repeat with fresh partitions while they still empty nodes. How each rule of
``models/defrag.md`` holds is written in :mod:`gpuopt.defrag._shard`.

For the workload objective (``options.objective``, X9 of ``models/defrag.md``)
the same engine keeps a node's evacuation only when it raises the workload's
weighted slots, places each task where the fewest slots are lost (then best
fit), tries first the nodes whose evacuation would gain most, and replaces the
fill pass by single moves that raise the slots; rounds go on while they gain.
Every step it keeps raises the slots (as X9 counts them), so the plan never
lowers them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

import gpuopt.progress
from gpuopt.cluster.model import Objective
from gpuopt.defrag._shard import NO_LIMIT, Shard, empty_nodes
from gpuopt.defrag.problem import Cluster, ClusterOptions, check_options
from gpuopt.defrag.solution import DefragResult, make_plan
from gpuopt.defrag.workload import SlotModel, resolve
from gpuopt.options import Keywords
from gpuopt.solvers.deadline import Deadline
from gpuopt.solvers.executors import executor_or_pool

#: Called after each partition with (partitions done, partitions in the round, round).
Progress = Callable[[int, int, int], None]
Ranking = Literal["easiest", "least_used", "gain"]
#: The node orders ipc tries in every partition (the best result is kept).
IPC_RANKINGS: tuple[Ranking, ...] = ("easiest", "least_used")
#: ... for the workload objective: the nodes whose evacuation gains most slots first.
WORKLOAD_RANKINGS: tuple[Ranking, ...] = ("gain", "easiest")

#: Below this many nodes per worker, extra processes cost more than they save.
MIN_NODES_PER_WORKER = 2000
#: Seconds :func:`make_plan` takes per task of the snapshot and per move of the plan (waves,
#: metrics, validation) on the 2-core machine: 7 us and 40 us at a load average of 5, up to
#: 38 us and 110 us at 8. Under a time limit the search stops early enough to leave this much
#: for the plan (a load above 6 can take more: ``docs/reliability.md``).
PLAN_SECONDS_PER_TASK = 20e-6
PLAN_SECONDS_PER_MOVE = 80e-6
#: Moves a round is expected to add, as a share of the snapshot's tasks (about 0.3 measured
#: on random snapshots), for the time reserved for the plan.
ROUND_MOVES_SHARE = 1 / 3


@dataclass(frozen=True)
class Search:
    """How one run of the partitioned search searches; ``ipc`` and ``onehop`` differ only here.

    ``rankings`` are the node orders tried in every partition (the best result
    is kept); ``fill`` fills fragmented nodes after emptying (ipc); with
    ``exact``, every partition of at most ``exact_nodes`` nodes is improved
    with the exact model (``"milp"`` or ``"cpsat"``) for at most
    ``exact_seconds``. The snapshot's own options (partition size, depth,
    rounds, time limit, budgets, seed) travel in a :class:`ClusterOptions`.
    """

    method: str
    rankings: tuple[Ranking, ...]
    fill: bool = True
    objective: Objective = "emptied"
    exact: Literal["milp", "cpsat"] | None = None
    exact_nodes: int = 100
    exact_seconds: float = 5.0


#: The index's per-task arrays a shard carries, restricted to its tasks.
SHARD_TASK_ARRAYS = (
    "task_gpus",
    "task_cpus",
    "task_memory",
    "task_extra",
    "task_locked",
    "task_hp",
    "task_group",
    "task_selector",
)


class ClusterState:
    """Where every task is now and what every node has free (global positions)."""

    def __init__(self, problem: Cluster, slots: SlotModel | None = None) -> None:
        index = problem.index
        self.slots = slots
        self.partial = None if slots is None else slots.partial_of(index.task_node, index.num_nodes)
        self.index = index
        self.task_node = index.task_node.copy()
        self.free_gpus = index.node_gpus - _bincount(index.task_node, index.task_gpus, index)
        self.free_cpus = index.node_cpus - _bincount(index.task_node, index.task_cpus, index)
        used_memory = _bincount(index.task_node, index.task_memory, index)
        self.free_memory = np.where(
            index.node_memory < 0, NO_LIMIT, index.node_memory - used_memory
        )
        self.free_extra = index.node_extra - index.node_used_extra  # K4; no columns: none asked
        self.moves: list[tuple[int, int, int]] = []
        self.min_node_gpus = max(1, problem.options.min_node_gpus)

    def apply(self, moves: list[tuple[int, int, int]]) -> None:
        index = self.index
        for task, source, target in moves:
            if self.task_node[task] != source:
                raise RuntimeError(f"move of task {index.task_ids[task]} from the wrong node")
            self.task_node[task] = target
            for free, amount in (
                (self.free_gpus, index.task_gpus[task]),
                (self.free_cpus, index.task_cpus[task]),
                (self.free_memory, index.task_memory[task]),
            ):
                free[source] += amount
                free[target] -= amount
            if self.free_extra.shape[1]:
                self.free_extra[source] += index.task_extra[task]
                self.free_extra[target] -= index.task_extra[task]
            if self.slots is not None and self.partial is not None:
                self.partial[source] -= self.slots.task_slots[task]
                self.partial[target] += self.slots.task_slots[task]
        self.moves.extend(moves)

    def value(self) -> int:
        """Integer-weighted workload slots now (X9's count; 0 without a workload)."""
        if self.slots is None or self.partial is None:
            return 0
        return self.slots.value(self.free_gpus, self.free_cpus, self.partial)

    def shard(
        self,
        nodes: np.ndarray,
        search: Search,
        *,
        depth: int,
        rng: np.random.Generator,
        max_moves: int | None = None,
        group_budget: dict[int, int] | None = None,
        seconds: float | None = None,
        deadline: float | None = None,
    ) -> Shard:
        """The payload for one partition (``nodes`` are global positions), searched as
        ``search`` says (solved exactly too when it has at most ``search.exact_nodes``)."""
        index = self.index
        local = np.full(index.num_nodes, -1, dtype=np.int64)
        local[nodes] = np.arange(nodes.size)
        tasks = np.flatnonzero(local[self.task_node] >= 0)
        task_node = local[self.task_node[tasks]]
        orders = [_rank(self, nodes, tasks, task_node, ranking, rng) for ranking in search.rankings]
        return Shard(
            node_pos=nodes,
            node_gpus=index.node_gpus[nodes],
            node_cpus=index.node_cpus[nodes],
            free_gpus=self.free_gpus[nodes],
            free_cpus=self.free_cpus[nodes],
            free_memory=self.free_memory[nodes],
            node_extra=index.node_extra[nodes],
            free_extra=self.free_extra[nodes],
            selector_masks=index.selector_masks[:, nodes],
            task_pos=tasks,
            task_node=task_node,
            **{name: getattr(index, name)[tasks] for name in SHARD_TASK_ARRAYS},
            orders=orders,
            depth=depth,
            max_moves=max_moves,
            group_budget=group_budget or {},
            seconds=seconds,
            deadline=deadline,
            fill=search.fill,
            exact=search.exact if nodes.size <= search.exact_nodes else None,
            exact_seconds=search.exact_seconds,
            min_node_gpus=self.min_node_gpus,
            slots=None if self.slots is None else self.slots.take(nodes, tasks),
            partial=None if self.partial is None else self.partial[nodes],
        )


def _bincount(where: np.ndarray, amounts: np.ndarray, index: Any) -> np.ndarray:
    out = np.zeros(index.num_nodes, dtype=np.int64)
    np.add.at(out, where, amounts)
    return out


def _rank(
    state: ClusterState,
    nodes: np.ndarray,
    tasks: np.ndarray,
    task_node: np.ndarray,
    ranking: Ranking,
    rng: np.random.Generator,
) -> np.ndarray:
    """Local node order: candidates only (GPU nodes with tasks and no locked task)."""
    index = state.index
    size = nodes.size
    count = np.bincount(task_node, minlength=size)
    used = index.node_gpus[nodes] - state.free_gpus[nodes]
    locked = np.bincount(task_node, weights=index.task_locked[tasks], minlength=size) > 0
    has_hp = np.bincount(task_node, weights=index.task_hp[tasks], minlength=size) > 0
    candidate = (count > 0) & ~locked & (index.node_gpus[nodes] >= state.min_node_gpus)
    tie = rng.permutation(size)
    # easiest: no HP task, fewest tasks, fewest GPUs; least_used: as a descheduler's pass;
    # gain: most workload slots gained when the node is free of its tasks, then fewest tasks
    keys: list[np.ndarray]
    if ranking == "gain" and state.slots is not None and state.partial is not None:
        slots = state.slots
        now = slots.node_values(
            state.free_gpus[nodes], state.free_cpus[nodes], state.partial[nodes], nodes
        )
        freed = slots.node_values(
            index.node_gpus[nodes], index.node_cpus[nodes], slots.fixed_slots[nodes], nodes
        )
        keys = [tie, count, now - freed]
    elif ranking == "easiest":
        keys = [tie, used, count, has_hp]
    else:
        keys = [tie, count, used]
    order: np.ndarray = np.lexsort(keys)
    ranked: np.ndarray = order[candidate[order]]
    return ranked


def _split_budget(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _workers_wanted(workers: int | None, num_nodes: int, partitions: int) -> int:
    """Local processes for ipc: ``workers`` (at most one per partition), else one per core
    when the snapshot is large enough to gain from it."""
    if workers is not None:
        return min(workers, partitions)
    return min(os.cpu_count() or 1, partitions, num_nodes // MIN_NODES_PER_WORKER)


@dataclass(frozen=True, slots=True, kw_only=True)
class IpcOptions:
    """How :func:`solve_ipc` runs. The first seven (``partition_size`` to ``seed``) left
    as None come from the snapshot's ``options`` (:meth:`for_snapshot`).

    Attributes
    ----------
    partition_size
        Nodes per partition (default 500).
    depth
        Longest eviction chain, in moves (default 3; 1 = direct moves only).
    rounds
        Most rounds with fresh partitions (default 5); stops early when a round
        empties no node.
    time_limit
        Seconds for the whole call, counted from its start: partitions stop
        trying new nodes early enough to leave time for building the plan
        (:data:`PLAN_SECONDS_PER_TASK`, :data:`PLAN_SECONDS_PER_MOVE`), no new
        round starts after that, and the plan then has status ``time_limit``.
    max_moves, group_budget
        Most moves in the plan, and most moved tasks per anti-affinity group.
    seed
        Seeds the partitions and the tie-breaking (same seed, same plan).
    workers
        Worker processes (default: one per core, when the snapshot is large
        enough to gain from them).
    executor
        Any ``concurrent.futures``-style executor with ``submit(fn, arg)``,
        e.g. a ``distributed.Client``; overrides ``workers``.
    progress
        Called after each partition with (done, partitions, round).
    exact, exact_nodes, exact_seconds
        Improve every partition of at most ``exact_nodes`` nodes with the exact
        model (``"milp"`` or ``"cpsat"``), warm-started from the heuristic's
        result, for at most ``exact_seconds`` each (not with ``group_budget``).
    """

    partition_size: int | None = None
    depth: int | None = None
    rounds: int | None = None
    time_limit: float | None = None
    max_moves: int | None = None
    group_budget: int | None = None
    seed: int | None = None
    workers: int | None = None
    executor: Any = None
    progress: Progress | None = None
    exact: Literal["milp", "cpsat"] | None = None
    exact_nodes: int = 100
    exact_seconds: float = 5.0

    def for_snapshot(self, options: ClusterOptions) -> ClusterOptions:
        """A snapshot's ``options`` with those given here in place of its own."""
        given = {name: getattr(self, name) for name in SNAPSHOT_OPTIONS}
        return overridden(options, **given)


#: The options of :class:`IpcOptions` that a snapshot's ``options`` also carry.
SNAPSHOT_OPTIONS = (
    "partition_size",
    "depth",
    "rounds",
    "time_limit",
    "max_moves",
    "group_budget",
    "seed",
)
#: :func:`solve_ipc`'s keywords: every field of :class:`IpcOptions`.
IPC_KEYWORDS = Keywords.of(IpcOptions)


def overridden(options: ClusterOptions, **given: Any) -> ClusterOptions:
    """``options`` with each value of ``given`` that is not None in place of its own."""
    return options.model_copy(update={k: value for k, value in given.items() if value is not None})


@IPC_KEYWORDS.signature
def solve_ipc(problem: Cluster, options: IpcOptions | None = None, **settings: Any) -> DefragResult:
    """Plan migrations with IPC; options left as None come from ``problem.options``.

    Parameters
    ----------
    problem
        The snapshot.

    Examples
    --------
    >>> problem = Cluster(
    ...     nodes=[{"id": n, "gpus": 8, "cpus": 64} for n in ("a", "b", "c")],
    ...     tasks=[{"id": "t1", "node": "a", "gpus": 4}, {"id": "t2", "node": "b", "gpus": 2},
    ...            {"id": "t3", "node": "c", "gpus": 2}])
    >>> plan = solve_ipc(problem)
    >>> plan.metrics.emptied, plan.metrics.fragmented_after
    (2, 0)

    The exact model (:func:`gpuopt.defrag.milp.solve_milp`) proves that no plan
    empties more: all 8 GPUs in use fit on one node, never on none.

    >>> from gpuopt.defrag.milp import solve_milp
    >>> proof = solve_milp(problem)
    >>> proof.status, proof.metrics.emptied, proof.bound
    ('optimal', 2, 2)
    """
    run = IPC_KEYWORDS.resolve(options, settings)
    problem, objective = resolve(problem)
    search = Search(
        "heuristic",
        WORKLOAD_RANKINGS if objective == "workload" else IPC_RANKINGS,
        objective=objective,
        exact=run.exact,
        exact_nodes=run.exact_nodes,
        exact_seconds=run.exact_seconds,
    )
    chosen = run.for_snapshot(problem.options)
    return _run(
        problem, chosen, search, workers=run.workers, executor=run.executor, progress=run.progress
    )


def _run(
    problem: Cluster,
    options: ClusterOptions,
    search: Search,
    *,
    workers: int | None,
    executor: Any,
    progress: Progress | None,
) -> DefragResult:
    """Rounds of partitions of ``problem`` searched as ``search`` says, with the partition
    size, depth, rounds, time limit, budgets and seed of ``options`` (not ``problem.options``:
    the caller's, already resolved)."""
    method, objective = search.method, search.objective
    time_limit, max_moves = options.time_limit, options.max_moves
    group_budget = options.group_budget
    deadline = Deadline(time_limit)
    started = deadline.started
    check_options(problem)
    index = problem.index
    slots = None
    if objective == "workload":
        slots = SlotModel.build(problem, problem.options.target_workload())
    state = ClusterState(problem, slots)
    rng = np.random.default_rng(options.seed)
    num_nodes = index.num_nodes
    parts = max(1, -(-num_nodes // options.partition_size))
    status: Any = "heuristic"
    notes = _exact_notes(search.exact, search.exact_nodes, group_budget, num_nodes, parts)
    moved_in_group: dict[int, set[int]] = {}
    with (
        executor_or_pool(executor, _workers_wanted(workers, num_nodes, parts)) as pool,
        gpuopt.progress.task(method, time_limit=time_limit) as shown,
    ):
        for round_number in range(options.rounds):
            remaining = _search_seconds(deadline, index.num_tasks, len(state.moves))
            if remaining is not None and remaining <= 0:
                status = "time_limit" if status == "heuristic" else status
                break
            search_end = deadline.elapsed() + (remaining or 0.0)
            moves_left = None if max_moves is None else max_moves - len(state.moves)
            if moves_left is not None and moves_left <= 0:
                break
            partitions = _partition(state, options.partition_size, round_number == 0, rng)
            parts = len(partitions)
            budgets = _split_budget(moves_left, parts) if moves_left is not None else None
            group_left = _group_budgets(state, partitions, group_budget, moved_in_group)
            shards = [
                state.shard(
                    np.sort(nodes),
                    search,
                    depth=options.depth,
                    rng=rng,
                    max_moves=None if budgets is None else budgets[i],
                    group_budget=group_left[i],
                    seconds=remaining,
                    deadline=None if remaining is None else time.time() + remaining,
                )
                for i, nodes in enumerate(partitions)
            ]
            jobs = [_submit(pool, shard) for shard in shards]
            description = f"{method} round {round_number + 1}: partitions"
            shown.update(description=description, completed=0, total=len(jobs))
            gained = 0
            for done, (job, shard) in enumerate(zip(jobs, shards, strict=True), start=1):
                moves = _result(job, shard, round_number + 1, done, notes)
                shown.advance()
                if moves is None:
                    status = "partial"
                    continue
                before = _emptied_count(state) if slots is None else state.value()
                state.apply(moves)
                gained += (_emptied_count(state) if slots is None else state.value()) - before
                for task, _, _ in moves:
                    group = int(index.task_group[task])
                    if group >= 0:
                        moved_in_group.setdefault(group, set()).add(task)
                if progress is not None:
                    progress(done, len(jobs), round_number + 1)
            if remaining is not None and deadline.elapsed() >= search_end:
                status = "time_limit" if status == "heuristic" else status  # cut short
                break
            if gained <= 0:
                break
    named = [
        (index.task_ids[task], index.node_ids[source], index.node_ids[target])
        for task, source, target in state.moves
    ]
    return make_plan(
        problem,
        method,
        named,
        seconds=time.perf_counter() - started,
        status=status,
        notes=notes,
        maximises=objective,
    )


def _exact_notes(
    exact: str | None, exact_nodes: int, group_budget: int | None, num_nodes: int, parts: int
) -> list[str]:
    """Why ``exact`` partitions will not be solved exactly, if they will not."""
    if exact is None:
        return []
    if group_budget is not None:
        return [f"exact={exact!r} is not used with group_budget; the partitions are heuristic"]
    if num_nodes // parts > exact_nodes:
        return [
            f"the first round's partitions have {num_nodes // parts}+ nodes, over exact_nodes="
            f"{exact_nodes}: only smaller partitions of later rounds are solved with {exact} "
            f"(set partition_size <= {exact_nodes})"
        ]
    return []


def _search_seconds(deadline: Deadline, tasks: int, moves: int) -> float | None:
    """Seconds a round may search: the time left less what the plan is expected to take."""
    left = deadline.remaining()
    if left is None:
        return None
    expected_moves = moves + ROUND_MOVES_SHARE * tasks
    return left - PLAN_SECONDS_PER_TASK * tasks - PLAN_SECONDS_PER_MOVE * expected_moves


def _submit(pool: Any, shard: Any) -> Any:
    """Submit one partition; an executor that cannot take it (shut down, broken) gives None."""
    try:
        return pool.submit(empty_nodes, shard)
    except Exception:
        return None


def _result(
    job: Any, shard: Any, round_number: int, position: int, notes: list[str]
) -> list[tuple[int, int, int]] | None:
    """A partition's moves; a failed worker's partition is re-run in this process once.

    Partitions touch disjoint nodes, so one that fails twice is left out and
    the others' moves stand (the caller marks the plan ``partial``).
    """
    if job is not None:
        try:
            moves: list[tuple[int, int, int]] = job.result()
            return moves
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}".strip()
    else:
        failure = "the executor did not accept it"
    try:
        moves = empty_nodes(shard)
    except Exception as exc:
        notes.append(
            f"round {round_number}, partition {position}: failed ({failure}) and again in "
            f"this process ({type(exc).__name__}: {exc}); its nodes are left as they were"
        )
        return None
    notes.append(
        f"round {round_number}, partition {position}: the worker failed ({failure[:200]}); "
        "re-run in this process"
    )
    return moves


def _partition(
    state: ClusterState, partition_size: int, first: bool, rng: np.random.Generator
) -> list[np.ndarray]:
    """Random disjoint partitions of about ``partition_size`` nodes.

    The first round deals all nodes at random but *stratified*: nodes are
    shuffled, sorted by (candidate to empty or not, free GPUs) and dealt
    round-robin, so every partition gets its share of nodes to empty and of
    room to fill (a purely random split leaves some partitions with room to
    spare and others with nodes they cannot empty). Later rounds split only
    the nodes that still matter: the *open* ones (running tasks, some GPUs
    free), which are both the candidates to empty and the direct targets,
    dealt at random into partitions filled to half their size, then topped up
    with random full nodes (chain targets). Idle nodes are never targets, so
    they are left out.
    """
    index = state.index
    num_nodes = index.num_nodes
    occupied = np.zeros(num_nodes, dtype=bool)
    occupied[state.task_node] = True
    if first:
        parts = max(1, -(-num_nodes // partition_size))
        if parts == 1:
            return [np.arange(num_nodes)]
        locked = np.zeros(num_nodes, dtype=bool)
        locked[state.task_node[index.task_locked]] = True
        candidate = occupied & ~locked & (index.node_gpus >= state.min_node_gpus)
        shuffled = rng.permutation(num_nodes)
        dealt = shuffled[np.lexsort((state.free_gpus[shuffled], candidate[shuffled]))]
        return [np.sort(dealt[part::parts]) for part in range(parts)]
    used = index.node_gpus - state.free_gpus
    open_nodes = np.flatnonzero(occupied & (state.free_gpus > 0) & (used > 0))
    full_nodes = np.flatnonzero(occupied & (state.free_gpus == 0))
    half = max(1, partition_size // 2)
    parts = max(1, -(-open_nodes.size // half))
    partitions = np.array_split(rng.permutation(open_nodes), parts)
    extra = np.array_split(rng.permutation(full_nodes), parts)
    return [
        np.concatenate([nodes, more[: max(0, partition_size - nodes.size)]])
        for nodes, more in zip(partitions, extra, strict=True)
    ]


def _emptied_count(state: ClusterState) -> int:
    occupied = np.zeros(state.index.num_nodes, dtype=bool)
    occupied[state.task_node] = True
    return int(np.count_nonzero(~occupied))


def _group_budgets(
    state: ClusterState,
    partitions: list[np.ndarray],
    group_budget: int | None,
    moved_in_group: dict[int, set[int]],
) -> list[dict[int, int]]:
    """Share each group's remaining budget among the partitions that hold its tasks."""
    budgets: list[dict[int, int]] = [{} for _ in partitions]
    if group_budget is None:
        return budgets
    index = state.index
    part_of = np.full(index.num_nodes, -1, dtype=np.int64)
    for number, nodes in enumerate(partitions):
        part_of[nodes] = number
    holders: dict[int, list[int]] = {}
    for task in np.flatnonzero(index.task_group >= 0).tolist():
        group = int(index.task_group[task])
        part = int(part_of[state.task_node[task]])
        if part < 0:
            continue  # on a node outside this round's partitions (later rounds take only some)
        held = holders.setdefault(group, [])
        if part not in held:
            held.append(part)
    for group, parts in holders.items():
        left = max(0, group_budget - len(moved_in_group.get(group, ())))
        for part, share in zip(sorted(parts), _split_budget(left, len(parts)), strict=True):
            budgets[part][group] = share
    return budgets


__all__ = [
    "IPC_KEYWORDS",
    "ClusterState",
    "IpcOptions",
    "Progress",
    "Search",
    "overridden",
    "solve_ipc",
]
