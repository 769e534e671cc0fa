"""Migration plans: the result type, the independent checker and the metrics.

A plan is an ordered list of moves ``task: from -> to`` (DESIGN.md section 5).
Execution is make-before-break: while a task moves, its new instance starts on
the target while the old one still holds the source, so the target needs room
at that moment. :func:`violations` replays the moves in order, knows nothing
about the methods, and reports every breach of the rules D1-D8 of
``models/defrag.md``, of the Kubernetes rules K1-K7 and of the device-fit rules
DF1-DF8 of ``models/cluster.md`` (a moving pod's DRA claims go with it, whole,
and must fit the target's devices as the plan has left them); :func:`evaluate`
recomputes the metrics.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from gpuopt._compat import old_result_names
from gpuopt._model import MAX_ID_LENGTH
from gpuopt.cluster.devicecheck import DeviceLedger
from gpuopt.cluster.model import Node, Objective, Task
from gpuopt.cluster.rules import PodTerms, budget_allowance, budget_cover, gang_sizes, refusal
from gpuopt.cluster.shares import MILLI, Devices, layout, share_of
from gpuopt.defrag.problem import Cluster, scaled, selector_matches
from gpuopt.result import Result
from gpuopt.result import Status as ResultStatus

#: The statuses defragmentation methods report (values of :class:`gpuopt.Status`).
Status = Literal["optimal", "feasible", "time_limit", "heuristic", "partial", "infeasible"]


class Move(BaseModel):
    """One migration: ``task`` leaves node ``from`` for node ``to`` in wave ``wave``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    task: str = Field(max_length=MAX_ID_LENGTH)
    source: str = Field(alias="from", max_length=MAX_ID_LENGTH)
    to: str = Field(max_length=MAX_ID_LENGTH)
    wave: int = Field(default=0, ge=0)


class ShapeSlots(BaseModel):
    """Slots of one shape of the target workload before and after a plan (X9)."""

    model_config = ConfigDict(extra="ignore")

    shape: str
    frequency: float
    before: int
    after: int


class PlanMetrics(BaseModel):
    """What a plan achieves (recomputed by :func:`evaluate`).

    With a target workload (``options.workload``), ``workload_slots_before``
    and ``workload_slots_after`` are its weighted slots (``models/defrag.md``,
    X9: the sum over shapes of frequency x copies that fit at once, counted on
    the C7 layout) and ``shapes`` the slots of each shape; None otherwise.
    """

    model_config = ConfigDict(extra="ignore")

    fragmented_before: int
    fragmented_after: int
    emptied: int
    moves: int
    moved_gpus: int = 0
    idle_nodes_before: int = 0
    idle_nodes_after: int = 0
    waves: int = 0
    workload_slots_before: float | None = None
    workload_slots_after: float | None = None
    shapes: list[ShapeSlots] | None = None


class DefragResult(Result):
    """The plan JSON of DESIGN.md section 5: a :class:`gpuopt.Result` with moves and metrics.

    ``maximises`` names the objective: ``emptied`` (nodes emptied, then
    fewest moves) or ``workload`` (weighted slots of the target workload, then
    fewest moves). ``objective`` is its value (nodes emptied, or
    ``metrics.workload_slots_after``); ``bound`` is a proven upper bound on it
    (exact methods only) and ``gap`` = (bound - objective) / bound.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    document: ClassVar[str] = "a plan"
    no_objective: ClassVar[str] = (
        "the plan maximises workload slots, which a snapshot without options.workload "
        "does not define"
    )

    status: ResultStatus = ResultStatus.HEURISTIC
    maximises: Objective = Field(
        default="emptied", description="What the method maximised first: 'emptied' or 'workload'."
    )
    objective: int | float | None = Field(
        default=None,
        description="Nodes emptied, or the weighted workload slots after the plan (maximises).",
    )
    bound: int | float | None = None
    moves: list[Move] = Field(default_factory=list)
    emptied: list[str] = Field(default_factory=list)
    metrics: PlanMetrics

    def to_json(self, *, indent: int | None = 1) -> str:
        return self.model_dump_json(indent=indent, by_alias=True)

    def summary(self) -> str:
        m = self.metrics
        text = (
            f"{self.method}: emptied {m.emptied} nodes with {m.moves} moves in {m.waves} waves, "
            f"fragmented nodes {m.fragmented_before} -> {m.fragmented_after} "
            f"({self.seconds:.2f} s)"
        )
        if m.workload_slots_before is not None and m.workload_slots_after is not None:
            text += (
                f", workload slots {m.workload_slots_before:.1f} -> {m.workload_slots_after:.1f}"
            )
        if self.bound is not None:
            unit = "workload slots" if self.maximises == "workload" else "nodes"
            shown = f"{self.bound:.1f}" if isinstance(self.bound, float) else str(self.bound)
            text += f", bound {shown} {unit}"
        return text


class _Placed(NamedTuple):
    """What the GPU layout reads of a task at a new place (its old GPU indices dropped)."""

    id: str
    gpus: int
    gpu_milli: int | None
    gpu_indices: list[int] | None = None


def _layouts(
    problem: Cluster, where: Mapping[str, str], moved: set[str]
) -> tuple[dict[str, Devices], Counter[str]]:
    """C7: each node's GPUs with the tasks ``where`` puts there; GPUs held beyond a node's.

    A task that moved takes its GPUs as :func:`~gpuopt.cluster.shares.layout`
    gives them (best fit for a share); one that stayed keeps the GPUs it names.
    """
    on: defaultdict[str, list[Any]] = defaultdict(list)
    for task in problem.tasks:
        on[where[task.id]].append(
            _Placed(task.id, task.gpus, task.gpu_milli) if task.id in moved else task
        )
    devices: dict[str, Devices] = {}
    over: Counter[str] = Counter()
    for node in problem.nodes:
        devices[node.id], out = layout(node.gpus, on.get(node.id, ()))
        over[node.id] = sum(task.gpus for task in out)
    return devices, over


@dataclass
class _Replay:
    """Plain-dict state of a cluster under replay (independent of the methods' views)."""

    devices: dict[str, Devices]
    over: Counter[str]
    tasks: dict[str, Task]
    nodes: dict[str, Node]
    moved: set[str]
    cpus: dict[str, int]
    memory: dict[str, int]
    tasks_on: dict[str, set[str]]
    where: dict[str, str]
    extra: defaultdict[str, Counter[str]]

    @classmethod
    def start(cls, problem: Cluster) -> _Replay:
        where = {task.id: task.node for task in problem.tasks}
        devices, over = _layouts(problem, where, set())
        state = cls(
            devices=devices,
            over=over,
            tasks={task.id: task for task in problem.tasks},
            nodes={node.id: node for node in problem.nodes},
            moved=set(),
            cpus={n.id: 0 for n in problem.nodes},
            memory={n.id: 0 for n in problem.nodes},
            tasks_on={n.id: set() for n in problem.nodes},
            where={},
            extra=defaultdict(Counter),
        )
        for task in problem.tasks:
            state.add(task.id, task.node, scaled(task.cpus), _memory_of(task.memory))
            state.extra[task.node].update(task.resources)
        return state

    def move_gpus(self, task: Task, source: str, target: Node) -> str | None:
        """``task``'s GPUs leave ``source`` for ``target``; why ``target`` could not take
        them (None: it could).

        C7 decides: both nodes are laid out anew with the tasks on them (the tasks
        that moved, ``task`` too, take GPUs anew), so the order of the moves does
        not matter, only what is on each node. The move is applied either way, as
        the replay goes on with the plan.
        """
        before, over = self.devices[target.id], self.over[target.id]
        self.moved.add(task.id)
        for node_id, joining in ((source, None), (target.id, task.id)):
            ids = sorted(self.tasks_on[node_id] - {task.id})
            if joining is not None:
                ids.append(joining)
            holders = [self._holder(other) for other in ids]
            self.devices[node_id], out = layout(self.nodes[node_id].gpus, holders)
            self.over[node_id] = sum(other.gpus for other in out)
        if over:
            return f"needs {task.gpus}, its pods already hold {over} over"
        if not self.over[target.id]:
            return None
        milli = share_of(task)
        if milli < MILLI:
            return (
                f"needs {milli} thousandths of one GPU, the most one has left is "
                f"{before.best_share()}"
            )
        return f"needs {task.gpus}, has {before.free} free"

    def _holder(self, task_id: str) -> Any:
        task = self.tasks[task_id]
        if task_id in self.moved:
            return _Placed(task.id, task.gpus, task.gpu_milli)
        return task

    def add(self, task: str, node: str, cpus: int, memory: int) -> None:
        self.cpus[node] += cpus
        self.memory[node] += memory
        self.tasks_on[node].add(task)
        self.where[task] = node

    def remove(self, task: str, node: str, cpus: int, memory: int) -> None:
        self.cpus[node] -= cpus
        self.memory[node] -= memory
        self.tasks_on[node].discard(task)


def _memory_of(memory: float | None) -> int:
    return 0 if memory is None else scaled(memory)


def _as_moves(plan: DefragResult | Sequence[Move]) -> list[Move]:
    return list(plan.moves) if isinstance(plan, DefragResult) else list(plan)


def violations(problem: Cluster, plan: DefragResult | Sequence[Move]) -> list[str]:
    """Every breach of D1-D8 (``models/defrag.md``), K1-K7 and DF1-DF8 (``models/cluster.md``).

    The plan is replayed in order. Returns an empty list when the plan is
    legal. Each message starts with its rule label, e.g. ``"D3: move 4 (t7
    n3->n4): node n4 lacks GPUs (needs 2, has 1 free)"``.
    """
    found: list[str] = []
    moves = _as_moves(plan)
    check = _MoveCheck.start(problem)
    for number, move in enumerate(moves, start=1):
        found.extend(check.move(f"move {number} ({move.task} {move.source}->{move.to})", move))
    found.extend(_plan_violations(problem, moves, check.moved_in_group))
    found.extend(_wave_violations(moves))
    found.extend(_budget_violations(problem, moves))
    found.extend(_emptied_violations(problem, plan, check.state))
    return found


@dataclass
class _MoveCheck:
    """The replay of a plan, move by move, with what the per-move rules need."""

    nodes: dict[str, Node]
    tasks: dict[str, Task]
    state: _Replay
    terms: PodTerms
    group_on: dict[str, Counter[str]]  # node -> anti-affinity group -> tasks there
    moved_in_group: dict[str, set[str]]  # group -> its tasks the plan moves
    devices: DeviceLedger  # DF1-DF8: the claims allocated, as the plan moves their pods
    gang_size: Counter[str]  # C8: running gang -> its members running

    @classmethod
    def start(cls, problem: Cluster) -> _MoveCheck:
        group_on: dict[str, Counter[str]] = defaultdict(Counter)
        for held in problem.tasks:
            if held.anti_affinity is not None:
                group_on[held.node][held.anti_affinity] += 1
        return cls(
            nodes={n.id: n for n in problem.nodes},
            tasks={t.id: t for t in problem.tasks},
            state=_Replay.start(problem),
            terms=PodTerms(problem),
            group_on=group_on,
            moved_in_group=defaultdict(set),
            devices=DeviceLedger(problem),
            gang_size=gang_sizes(problem.tasks),
        )

    def move(self, label: str, move: Move) -> list[str]:
        """The breaches of one move (D1 stops there), then the move replayed."""
        task = self.tasks.get(move.task)
        broken = self._unknown(label, move, task)
        if broken is not None or task is None:
            return [broken] if broken is not None else []
        found = self._source_breaches(label, move, task)
        found.extend(self._target_breaches(label, move, task))
        if task.anti_affinity is not None:
            group = task.anti_affinity
            if self.group_on[move.to][group] > 0:
                found.append(
                    f"D5: {label}: node {move.to} already runs a task of anti_affinity group "
                    f"{group!r}"
                )
            self.group_on[move.to][group] += 1
            self.group_on[move.source][group] -= 1
            self.moved_in_group[group].add(task.id)
        if self.terms.active:
            found.extend(
                f"{text[:3]} {label}: {text[4:]}"
                for text in self.terms.move(task.id, move.source, move.to)
            )
        if self.devices.active:  # DF1-DF8: its claims go with it and fit the target
            found.extend(
                f"{text[:3]} {label}: {text[5:]}" for text in self.devices.move(task.id, move.to)
            )
        cpus, memory = scaled(task.cpus), _memory_of(task.memory)
        self.state.add(task.id, move.to, cpus, memory)
        self.state.remove(task.id, move.source, cpus, memory)
        self.state.extra[move.to].update(task.resources)
        self.state.extra[move.source].subtract(task.resources)
        return found

    def _unknown(self, label: str, move: Move, task: Task | None) -> str | None:
        """D1: the task and both nodes exist, the task is on the source, the target differs."""
        if task is None:
            return f"D1: {label}: task {move.task!r} is not in the snapshot"
        if move.source not in self.nodes or move.to not in self.nodes:
            missing = move.source if move.source not in self.nodes else move.to
            return f"D1: {label}: node {missing!r} is not in the snapshot"
        if self.state.where[task.id] != move.source:
            return f"D1: {label}: the task is on {self.state.where[task.id]!r}, not on the source"
        if move.to == move.source:
            return f"D1: {label}: source and target are the same node"
        return None

    def _source_breaches(self, label: str, move: Move, task: Task) -> list[str]:
        """D2 and K6: the task may move and its node lets it go."""
        found = []
        if task.locked:
            found.append(f"D2: {label}: the task is locked")
        if task.pinned is not None:
            found.append(f"K6: {label}: the task is pinned ({task.pinned})")
        if task.gang is not None and self.gang_size[task.gang] > 1:
            found.append(
                f"C8: {label}: the task is a member of the running gang {task.gang} (a move "
                "evicts it, which stops its gang: P2)"
            )
        if self.nodes[move.source].locked:
            found.append(f"K6: {label}: its node {move.source} is locked")
        if not self.nodes[move.source].ready:
            found.append(
                f"K6: {label}: its node {move.source} is NotReady (the eviction would never "
                "complete)"
            )
        return found

    def _target_breaches(self, label: str, move: Move, task: Task) -> list[str]:
        """K1-K5 of the target node, D3 (room) and D4 (node selector); moves the GPUs."""
        found = []
        target = self.nodes[move.to]
        state = self.state
        refused = refusal(target, task, selector=False)
        if refused is not None:
            found.append(f"{refused[:3]} {label}: {refused[4:]}")
        for name, amount in task.resources.items():
            free = target.resources.get(name, 0) - state.extra[target.id][name]
            if amount > free:
                found.append(
                    f"K4: {label}: node {target.id} lacks {name} (needs {amount}, has {free})"
                )
        cpus, memory = scaled(task.cpus), _memory_of(task.memory)
        short_of_gpus = state.move_gpus(task, move.source, target)
        if short_of_gpus is not None:
            found.append(f"D3: {label}: node {target.id} lacks GPUs ({short_of_gpus})")
        if state.cpus[target.id] + cpus > scaled(target.cpus):
            free_cpus = (scaled(target.cpus) - state.cpus[target.id]) / 1000
            found.append(
                f"D3: {label}: node {target.id} lacks CPUs (needs {task.cpus:g}, has {free_cpus:g})"
            )
        if target.memory is not None and state.memory[target.id] + memory > scaled(target.memory):
            found.append(f"D3: {label}: node {target.id} lacks memory")
        if not selector_matches(task.node_selector, target.labels):
            found.append(f"D4: {label}: node {target.id} does not match the task's node_selector")
        return found


def _plan_violations(
    problem: Cluster, moves: Sequence[Move], moved_in_group: dict[str, set[str]]
) -> list[str]:
    """D6: the move budget and the anti-affinity groups' budgets."""
    found = []
    options = problem.options
    if options.max_moves is not None and len(moves) > options.max_moves:
        found.append(f"D6: the plan has {len(moves)} moves, over max_moves={options.max_moves}")
    if options.group_budget is not None:
        for group, moved in sorted(moved_in_group.items()):
            if len(moved) > options.group_budget:
                found.append(
                    f"D6: {len(moved)} tasks of anti_affinity group {group!r} move, over "
                    f"group_budget={options.group_budget}"
                )
    return found


def _emptied_violations(
    problem: Cluster, plan: DefragResult | Sequence[Move], state: _Replay
) -> list[str]:
    """D8 (no small node emptied) and D1 (the plan's emptied list is the replay's)."""
    found = []
    nodes = {n.id: n for n in problem.nodes}
    options = problem.options
    occupied_before = {t.node for t in problem.tasks}
    emptied = {n for n in occupied_before if not state.tasks_on[n]}
    small = sorted(n for n in emptied if nodes[n].gpus < options.min_node_gpus)
    if small:
        found.append(
            f"D8: the plan empties {len(small)} node(s) with fewer GPUs than min_node_gpus="
            f"{options.min_node_gpus}, e.g. {small[0]} ({nodes[small[0]].gpus} GPUs)"
        )
    if isinstance(plan, DefragResult):
        claimed = set(plan.emptied)
        if claimed != emptied:
            wrong = sorted(claimed ^ emptied)[:5]
            found.append(
                f"D1: the plan's emptied list differs from the replay's on nodes {wrong} "
                f"(claims {len(claimed)}, replay empties {len(emptied)})"
            )
    return found


def _budget_violations(problem: Cluster, moves: Sequence[Move]) -> list[str]:
    """K7: no wave evicts more pods of a PodDisruptionBudget than it allows."""
    found: list[str] = []
    allowances = budget_allowance(problem)
    covered = budget_cover(allowances)
    for move in moves:
        if covered[move.task] > 1:
            found.append(
                f"K7: {move.task} is selected by {covered[move.task]} budgets; the Eviction API "
                "refuses to evict such a pod"
            )
    for budget, members, allowed in allowances:
        selected = set(members)
        per_wave = Counter(move.wave for move in moves if move.task in selected)
        for wave, count in sorted(per_wave.items()):
            if count > allowed:
                found.append(
                    f"K7: wave {wave} evicts {count} pods of budget {budget.id!r}, "
                    f"which allows {allowed} at a time"
                )
    return found


def _wave_violations(moves: Sequence[Move]) -> list[str]:
    """D7: waves never decrease, and the moves of one wave touch pairwise distinct nodes."""
    found: list[str] = []
    touched: set[str] = set()
    wave = 0
    for number, move in enumerate(moves, start=1):
        if move.wave < wave:
            found.append(f"D7: move {number} is in wave {move.wave} after a move of wave {wave}")
            continue
        if move.wave > wave:
            wave, touched = move.wave, set()
        shared = {move.source, move.to} & touched
        if shared:
            found.append(
                f"D7: move {number} ({move.task}) shares node {sorted(shared)[0]} with another "
                f"move of wave {wave}, so the two cannot run concurrently"
            )
        touched |= {move.source, move.to}
    return found


def assign_waves(
    moves: Iterable[tuple[str, str, str]], problem: Cluster | None = None
) -> list[Move]:
    """Group ordered moves ``(task, source, target)`` into concurrent waves.

    A move goes one wave after the latest earlier move that touches one of its
    two nodes, so the order between dependent moves is kept and the moves of a
    wave touch pairwise distinct nodes (rule D7); with ``problem``, a move
    whose PodDisruptionBudget is used up in that wave goes to the first later
    wave with room (rule K7). The result is sorted by wave.

    >>> [m.wave for m in assign_waves([("a", "n1", "n2"), ("b", "n3", "n4"), ("c", "n2", "n5")])]
    [0, 0, 1]
    """
    budgets: defaultdict[str, list[int]] = defaultdict(list)
    allowed: list[int] = []
    for position, (_, members, count) in enumerate(
        budget_allowance(problem) if problem is not None else ()
    ):
        allowed.append(count)
        for task_id in members:
            budgets[task_id].append(position)
    used: Counter[tuple[int, int]] = Counter()  # (wave, budget) -> evictions
    last: dict[str, int] = {}
    placed: list[tuple[int, int, Move]] = []
    for number, (task, source, target) in enumerate(moves):
        wave = max(last.get(source, -1), last.get(target, -1)) + 1
        mine = [b for b in budgets.get(task, ()) if allowed[b] > 0]  # 0: the task is fixed
        while any(used[wave, b] >= allowed[b] for b in mine):
            wave += 1
        used.update((wave, b) for b in mine)
        last[source] = last[target] = wave
        placed.append((wave, number, Move(task=task, source=source, to=target, wave=wave)))
    placed.sort(key=lambda item: (item[0], item[1]))
    return [move for _, _, move in placed]


class _GpuState(NamedTuple):
    used: dict[str, int]  # GPUs in use per node (C7: a shared GPU counts once)
    occupied: set[str]  # nodes running a task
    devices: dict[str, Devices] | None  # the laid-out GPUs (None: no task holds a share)
    cpus: dict[str, int]  # milli-CPUs in use per node


def _gpu_state(problem: Cluster, moves: Sequence[Move]) -> _GpuState:
    """GPUs and CPUs in use on each node after ``moves``; nodes in use; the GPU layout."""
    index = problem.index
    where = {t.id: t.node for t in problem.tasks}
    for move in moves:
        where[move.task] = move.to
    used = {n.id: 0 for n in problem.nodes}
    cpus = {n.id: 0 for n in problem.nodes}
    for task in problem.tasks:
        cpus[where[task.id]] += scaled(task.cpus)
    occupied = set(where.values())
    if index.task_milli.size and int(index.task_milli.min()) < MILLI:
        devices, over = _layouts(problem, where, {move.task for move in moves})
        for node_id, node_devices in devices.items():
            used[node_id] = node_devices.used + over[node_id]
        return _GpuState(used, occupied, devices, cpus)
    for task in problem.tasks:
        used[where[task.id]] += task.gpus
    return _GpuState(used, occupied, None, cpus)


def workload_slots(problem: Cluster, states: Sequence[_GpuState]) -> list[tuple[float, list[int]]]:
    """Weighted slots of the target workload and the slots of each shape, per state (X9)."""
    from gpuopt.cluster.admits import shape_admits
    from gpuopt.defrag.workload import layout_slots

    workload = problem.options.target_workload()
    admits = shape_admits(problem, workload)
    out = []
    for state in states:
        free_gpus = {n.id: n.gpus - state.used[n.id] for n in problem.nodes}
        free_cpus = {n.id: scaled(n.cpus) - state.cpus[n.id] for n in problem.nodes}
        table = layout_slots(problem, workload, admits, state.devices, free_gpus, free_cpus)
        per_shape = [int(v) for v in table.sum(axis=1)]
        weighted = sum(f * v for f, v in zip(workload.frequencies, per_shape, strict=True))
        out.append((round(weighted, 6), per_shape))
    return out


def count_fragmented(problem: Cluster, used: dict[str, int]) -> int:
    """Nodes with some but not all of their GPUs in use."""
    return sum(1 for n in problem.nodes if 0 < used[n.id] < n.gpus)


def evaluate(problem: Cluster, moves: Sequence[Move]) -> tuple[PlanMetrics, list[str]]:
    """Metrics of a (legal) move list and the nodes it empties, in snapshot order."""
    state_before = _gpu_state(problem, ())
    state_after = _gpu_state(problem, moves)
    before, occupied_before = state_before.used, state_before.occupied
    after, occupied_after = state_after.used, state_after.occupied
    emptied = [
        n.id for n in problem.nodes if n.id in occupied_before and n.id not in occupied_after
    ]
    metrics = PlanMetrics(
        fragmented_before=count_fragmented(problem, before),
        fragmented_after=count_fragmented(problem, after),
        emptied=len(emptied),
        moves=len(moves),
        moved_gpus=sum(problem.index.task_gpus[problem.index.task_pos[m.task]] for m in moves),
        idle_nodes_before=sum(1 for n in problem.nodes if n.id not in occupied_before),
        idle_nodes_after=sum(1 for n in problem.nodes if n.id not in occupied_after),
        waves=(max(m.wave for m in moves) + 1) if moves else 0,
    )
    if problem.options.workload is not None:
        (slots_before, shapes_before), (slots_after, shapes_after) = workload_slots(
            problem, (state_before, state_after)
        )
        workload = problem.options.target_workload()
        metrics = metrics.model_copy(
            update={
                "workload_slots_before": slots_before,
                "workload_slots_after": slots_after,
                "shapes": [
                    ShapeSlots(shape=str(shape), frequency=f, before=b, after=a)
                    for shape, f, b, a in zip(
                        workload.shapes,
                        workload.frequencies,
                        shapes_before,
                        shapes_after,
                        strict=True,
                    )
                ],
            }
        )
    return metrics, emptied


def make_plan(
    problem: Cluster,
    method: str,
    moves: Iterable[tuple[str, str, str]],
    *,
    seconds: float,
    status: Status = "heuristic",
    bound: int | float | None = None,
    notes: Sequence[str] = (),
    maximises: Objective = "emptied",
) -> DefragResult:
    """Build a :class:`DefragResult` from ordered ``(task, source, target)`` moves.

    With ``maximises="workload"`` the objective is the weighted workload slots
    after the plan (the snapshot must carry ``options.workload``).
    """
    waved = assign_waves(moves, problem)
    metrics, emptied = evaluate(problem, waved)
    objective: int | float | None = metrics.emptied
    if maximises == "workload":  # None on a snapshot without options.workload
        objective = metrics.workload_slots_after
    return DefragResult(
        method=method,
        status=status,
        maximises=maximises,
        objective=objective,
        moves=waved,
        emptied=emptied,
        seconds=seconds,
        metrics=metrics,
        bound=bound,
        notes=list(notes),
    )


def apply_plan(problem: Cluster, plan: DefragResult | Sequence[Move]) -> Cluster:
    """The snapshot after ``plan`` (which must be legal: see :func:`violations`)."""
    where = {t.id: t.node for t in problem.tasks}
    for move in _as_moves(plan):
        where[move.task] = move.to
    # a moved task's GPU indices named GPUs of its old node: it takes GPUs anew (C7 layout)
    tasks = [
        t
        if where[t.id] == t.node
        else t.model_copy(update={"node": where[t.id], "gpu_indices": None})
        for t in problem.tasks
    ]
    return problem.model_copy(update={"tasks": tasks})


parse_plan = DefragResult.parse
load_plan = DefragResult.load


#: The result's old name, one release, with a ``DeprecationWarning``.
__getattr__ = old_result_names(__name__, "MigrationPlan")

__all__ = [
    "DefragResult",
    "Move",
    "PlanMetrics",
    "ShapeSlots",
    "apply_plan",
    "assign_waves",
    "count_fragmented",
    "evaluate",
    "load_plan",
    "make_plan",
    "parse_plan",
    "violations",
]
