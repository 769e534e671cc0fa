"""The exact defragmentation model (``models/defrag.md``): columns and labelled row families.

Columns are ``x[t, n]`` (movable task ``t`` ends on eligible node ``n``) and
``e[n]`` (candidate node ``n`` ends empty), and for the workload objective the
slot columns of X9 (free GPUs ``y[n]``, free CPUs ``z[n]``, movable shares by
size ``u[n, s]`` and slots ``k[n, m]``); each family of rows (X1-X5, X7-X9) is
built by one private method of :class:`DefragRows` citing its label. The rows
are written once and fed to both solvers by :mod:`gpuopt.defrag.exact` (HiGHS
in two lexicographic phases, X0; CP-SAT with every row an integer linear
constraint): one model, never two formulations. This module also answers what
the model's size and a capacity bound are before anything is solved
(:func:`model_columns`, :func:`capacity_bound`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gpuopt.cluster.model import Objective
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import DefragResult
from gpuopt.defrag.workload import CPU_ONLY, SHARE, WHOLE, SlotModel
from gpuopt.errors import ProblemError
from gpuopt.solvers.highs import RowCounts, RowFamily, csr_family, row_family

#: Most x columns the exact model may have (memory and time grow with it); above it,
#: ``milp`` and ``cpsat`` solve ipc's partitions exactly instead of the whole snapshot.
MAX_COLUMNS = 2_000_000
#: Seconds per (movable task, node) pair of building the rows (numpy, not interruptible) on
#: the busy 2-core machine: 0.3 us at a load average of 4, up to 2.6 us at 7.
ROWS_SECONDS_PER_PAIR = 2.5e-6


@dataclass
class DefragRows(RowCounts):
    """Columns and labelled row families of the exact model for one snapshot.

    x column ``k < num_x`` is ``x[col_task[k], col_node[k]]`` (grouped by
    task); column ``num_x + j`` is ``e[candidates[j]]``. The objective,
    maximised, is ``weight * primary - moves``: ``weight`` exceeds the largest
    possible move count, so no number of saved moves is worth one unit of the
    primary objective: ``sum(e)`` (nodes emptied), or with ``slots`` the
    integer-weighted workload slots ``sum w_m k[n, m]`` plus the slots of the
    nodes no task can reach (``primary_offset``; X9, the e columns then fixed
    at 0). ``primary`` holds the primary objective's column costs.
    """

    problem: Cluster
    col_task: np.ndarray
    col_node: np.ndarray
    candidates: np.ndarray
    weight: int
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    cost: np.ndarray
    offset: float
    families: list[RowFamily] = field(default_factory=list)
    movable: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    stay: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    e_col: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    max_moves: int | None = None
    group_budget: int | None = None
    slots: SlotModel | None = None
    primary: np.ndarray = field(default_factory=lambda: np.zeros(0))
    primary_offset: float = 0.0
    #: X9 columns: node -> y (free GPUs) and z (free milli-CPUs) column (-1: none)
    y_col: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    z_col: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: X9: (node, shape, column) of each slot column k[n, m]
    k_cols: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    #: X9: (node, share in thousandths, column) of each u[n, s]
    u_cols: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    #: X9: most slots of each shape over the whole snapshot (for the rounding slack)
    most_slots: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def objective(self) -> Objective:
        return "emptied" if self.slots is None else "workload"

    @property
    def num_x(self) -> int:
        return int(self.col_task.size)

    @classmethod
    def build(
        cls,
        problem: Cluster,
        *,
        max_moves: int | None = None,
        group_budget: int | None = None,
        slots: SlotModel | None = None,
    ) -> DefragRows:
        """The rows of ``problem``; with ``slots``, for the workload objective (X9)."""
        index = problem.index
        used = _node_use(problem)
        candidates = candidate_nodes(problem)
        movable, eligible = _eligible(problem)
        if eligible is None or int(eligible.sum()) > MAX_COLUMNS:
            raise ProblemError(
                f"the exact model would need more than {MAX_COLUMNS:,} task-node columns "
                f"({index.num_nodes} nodes, {movable.size} movable tasks); solve its "
                "partitions exactly instead (the heuristic with exact='milp', gpuopt defrag "
                "--exact milp)."
            )
        rows_of, col_node = np.nonzero(eligible)  # row-major: grouped by task
        col_task = movable[rows_of]
        num_x, num_e = col_task.size, candidates.size
        stay = np.flatnonzero(col_node == index.task_node[col_task])
        weight = movable.size + 1
        cost = np.zeros(num_x + num_e)
        cost[stay] = 1.0  # moves = |movable| - sum of stays
        cost[num_x:] = weight
        e_col = np.full(index.num_nodes, -1, dtype=np.int64)
        e_col[candidates] = num_x + np.arange(num_e)
        rows = cls(
            problem=problem,
            col_task=col_task,
            col_node=col_node,
            candidates=candidates,
            weight=weight,
            col_lower=np.zeros(num_x + num_e),
            col_upper=np.ones(num_x + num_e),
            integer=np.ones(num_x + num_e, dtype=bool),
            cost=cost,
            offset=-float(movable.size),
            movable=movable,
            stay=stay,
            e_col=e_col,
            max_moves=max_moves,
            group_budget=group_budget,
            slots=slots,
        )
        rows.primary = np.zeros(num_x + num_e)
        rows.primary[num_x:] = 1.0
        extra_families = []
        if slots is not None:
            extra_families = rows._x9_workload_slots(used)
        rows.families = [
            rows._x1_assign_once(),
            *rows._x2_capacity(used),
            *rows._x8_extended_resources(used),
            rows._x3_empty_nodes_hold_nothing(),
            rows._x4_anti_affinity(),
            *rows._x5_budgets(),
            *rows._x7_small_nodes_keep_a_task(),
            *extra_families,
        ]
        return rows

    def _add_columns(self, count: int, upper: np.ndarray) -> np.ndarray:
        """Append ``count`` integer columns in [0, upper]; return their positions."""
        first = self.num_cols
        self.col_lower = np.concatenate([self.col_lower, np.zeros(count)])
        self.col_upper = np.concatenate([self.col_upper, upper.astype(float)])
        self.integer = np.concatenate([self.integer, np.ones(count, dtype=bool)])
        self.cost = np.concatenate([self.cost, np.zeros(count)])
        self.primary = np.concatenate([self.primary, np.zeros(count)])
        return first + np.arange(count, dtype=np.int64)

    def _x9_workload_slots(self, used: dict[str, np.ndarray]) -> list[RowFamily]:
        """X9: the slots ``k[n, m]`` of every shape on every node a movable task can reach.

        Free GPUs ``y[n] = G_n - L_n - sum g_t x[t, n]`` and free milli-CPUs
        ``z[n]`` (equalities); movable shares alone on their GPU counted by size
        ``u[n, s] = sum_{t: share s} x[t, n]``; then per shape ``g_m k <= y``
        (whole GPUs), ``k <= (1000 // s_m) y + sum_s ((1000 - s) // s_m) u[n, s]
        + F[n, m]`` (shares: free GPUs and what the partly used GPUs leave),
        ``c_m k <= z`` (CPU). The e columns are fixed at 0 and cost nothing;
        the objective's primary part is ``sum w_m k`` plus the constant slots of
        the nodes without x columns.
        """
        slots = self.slots
        assert slots is not None
        index = self.problem.index
        self.col_upper[self.num_x :] = 0.0  # e: emptying earns nothing here
        self.cost[self.num_x :] = 0.0
        self.primary[self.num_x :] = 0.0
        gpu_room = np.maximum(index.node_gpus - used["x2_gpus"], 0)
        cpu_room = np.maximum(index.node_cpus - used["x2_cpus"], 0)
        reached = np.zeros(index.num_nodes, dtype=bool)
        reached[self.col_node] = True
        # constant slots of the nodes no movable task can reach (tasks there stay)
        start_slots = slots.slots(
            index.node_gpus - index.node_used_gpus,
            index.node_cpus - index.node_used_cpus,
            slots.partial_of(index.task_node.copy(), index.num_nodes),
        )
        constant = start_slots[~reached]
        self.primary_offset = float((constant @ slots.weights).sum())
        nodes = np.flatnonzero(reached)
        families = self._x9_free_room(nodes, gpu_room, cpu_room)
        shares_on, share_family = self._x9_alone_shares()
        families.append(share_family)
        k_upper = self._x9_slot_columns(nodes, gpu_room, cpu_room)
        families.extend(self._x9_slot_rows(shares_on))
        shape_weight = slots.weights[self.k_cols[:, 1]].astype(float)
        self.primary[self.k_cols[:, 2]] = shape_weight
        self.cost[self.k_cols[:, 2]] = self.weight * shape_weight
        self.offset += self.weight * self.primary_offset
        most = np.zeros(slots.num_shapes)
        np.add.at(most, self.k_cols[:, 1], k_upper)
        self.most_slots = most + constant.sum(axis=0)
        return families

    def _x9_free_room(
        self, nodes: np.ndarray, gpu_room: np.ndarray, cpu_room: np.ndarray
    ) -> list[RowFamily]:
        """X9's free GPUs ``y[n]`` and milli-CPUs ``z[n]`` of the reached ``nodes``: their
        columns and the equalities ``y[n] + sum g_t x[t, n] = room`` (``z`` likewise)."""
        index = self.problem.index
        num_nodes = index.num_nodes
        self.y_col = np.full(num_nodes, -1, dtype=np.int64)
        self.z_col = np.full(num_nodes, -1, dtype=np.int64)
        self.y_col[nodes] = self._add_columns(nodes.size, gpu_room[nodes])
        self.z_col[nodes] = self._add_columns(nodes.size, cpu_room[nodes])
        families: list[RowFamily] = []
        for label, room, demand, col_of in (
            ("x9_free_gpus", gpu_room, index.task_gpus, self.y_col),
            ("x9_free_cpus", cpu_room, index.task_cpus, self.z_col),
        ):
            coef = demand[self.col_task].astype(float)
            keep = np.flatnonzero(coef > 0)
            order = keep[np.argsort(self.col_node[keep], kind="stable")]
            counts = np.bincount(self.col_node[order], minlength=num_nodes)[nodes]
            starts = np.concatenate([[0], np.cumsum(counts)])
            cols, coefs = [], []
            for row, node in enumerate(nodes.tolist()):
                part = order[starts[row] : starts[row + 1]]
                cols.append([*part.tolist(), int(col_of[node])])
                coefs.append([*coef[part].tolist(), 1.0])
            families.append(
                row_family(label, list(zip(cols, coefs, strict=True)), room[nodes], room[nodes])
            )
        return families

    def _x9_alone_shares(self) -> tuple[dict[int, list[tuple[int, int]]], RowFamily]:
        """X9's ``u[n, s]``, the movable shares of size ``s`` alone on their GPU on node
        ``n``: their columns, the rows that count them, and per node its (share, u column)."""
        slots = self.slots
        assert slots is not None
        index = self.problem.index
        share_cols = np.flatnonzero(slots.task_slots[self.col_task].any(axis=1))
        keys = sorted(
            {
                (int(n), int(index.task_milli[t]))
                for n, t in zip(
                    self.col_node[share_cols].tolist(),
                    self.col_task[share_cols].tolist(),
                    strict=True,
                )
            }
        )
        u_pos = self._add_columns(len(keys), np.full(len(keys), float(index.num_tasks)))
        u_of = {key: int(col) for key, col in zip(keys, u_pos.tolist(), strict=True)}
        self.u_cols = np.array(
            [(n, share, u_of[n, share]) for n, share in keys], dtype=np.int64
        ).reshape(-1, 3)
        members: dict[int, list[int]] = {}
        for col in share_cols.tolist():
            key = (int(self.col_node[col]), int(index.task_milli[self.col_task[col]]))
            members.setdefault(u_of[key], []).append(col)
        u_rows = [([*cols, u_col], [1.0] * len(cols) + [-1.0]) for u_col, cols in members.items()]
        shares_on: dict[int, list[tuple[int, int]]] = {}
        for n, share in keys:
            shares_on.setdefault(n, []).append((share, u_of[n, share]))
        return shares_on, row_family("x9_shares", u_rows, 0.0, 0.0)

    def _x9_slot_columns(
        self, nodes: np.ndarray, gpu_room: np.ndarray, cpu_room: np.ndarray
    ) -> np.ndarray:
        """X9's slot columns ``k[n, m]`` (``k_cols``: node, shape, column) of the shapes a
        reached node admits and has room for; returns their upper bounds."""
        slots = self.slots
        assert slots is not None
        k_keys: list[tuple[int, int]] = []
        k_upper: list[float] = []
        fixed = slots.fixed_slots
        for node in nodes.tolist():
            for shape in range(slots.num_shapes):
                if not slots.admit[node, shape]:
                    continue
                upper = _slot_upper(slots, shape, gpu_room[node], cpu_room[node], fixed[node])
                if upper > 0:
                    k_keys.append((node, shape))
                    k_upper.append(float(upper))
        upper_bounds = np.array(k_upper, dtype=float)
        k_pos = self._add_columns(len(k_keys), upper_bounds)
        self.k_cols = np.array(
            [(n, m, c) for (n, m), c in zip(k_keys, k_pos.tolist(), strict=True)], dtype=np.int64
        ).reshape(-1, 3)
        return upper_bounds

    def _x9_slot_rows(self, shares_on: dict[int, list[tuple[int, int]]]) -> list[RowFamily]:
        """X9's rows of each slot column: whole GPUs ``g_m k <= y``, shares ``k <= (1000 //
        s_m) y + sum_s ((1000 - s) // s_m) u[n, s] + F[n, m]``, CPU ``c_m k <= z``."""
        slots = self.slots
        assert slots is not None
        fixed = slots.fixed_slots
        gpu_rows: list[tuple[list[int], list[float]]] = []
        gpu_upper: list[float] = []
        cpu_rows: list[tuple[list[int], list[float]]] = []
        for node, shape, col in self.k_cols.tolist():
            kind = int(slots.kind[shape])
            if kind == WHOLE:
                gpu_rows.append(([col, int(self.y_col[node])], [float(slots.gpus[shape]), -1.0]))
                gpu_upper.append(0.0)
            elif kind == SHARE:
                per_gpu = int(slots.per_gpu[shape])
                row_cols = [col, int(self.y_col[node])]
                row_coefs = [1.0, -float(per_gpu)]
                # what a movable share's GPU leaves: (1000 - s) // s_m, as SlotModel.task_slots
                size = int(slots.milli[shape])
                for share, u_col in shares_on.get(node, ()):
                    leave = (1000 - share) // size
                    if leave:
                        row_cols.append(u_col)
                        row_coefs.append(-float(leave))
                gpu_rows.append((row_cols, row_coefs))
                gpu_upper.append(float(fixed[node, shape]))
            if int(slots.cpus[shape]) > 0 or kind == CPU_ONLY:
                cpu_rows.append(([col, int(self.z_col[node])], [float(slots.cpus[shape]), -1.0]))
        return [
            row_family("x9_slots_gpus", gpu_rows, -math.inf, gpu_upper),
            row_family("x9_slots_cpus", cpu_rows, -math.inf, 0.0),
        ]

    def _x1_assign_once(self) -> RowFamily:
        """X1: every movable task ends on exactly one eligible node."""
        counts = np.bincount(
            np.searchsorted(self.movable, self.col_task), minlength=self.movable.size
        )
        return csr_family("x1", np.arange(self.num_x), np.ones(self.num_x), counts, 1.0, 1.0)

    def _x2_capacity(self, used: dict[str, np.ndarray]) -> list[RowFamily]:
        """X2: GPUs, CPUs and memory fit on every node; a node that ends empty holds nothing.

        Per node and resource: sum of the movable tasks' use + locked use
        <= capacity * (1 - e[n]), the aggregated form of "emptied => nothing
        on it" (no locked task sits on a candidate node). Rows that cannot
        bind are left out.
        """
        index = self.problem.index
        return [
            self._capacity_rows(label, capacity, demand, used[label])
            for label, capacity, demand in (
                ("x2_gpus", index.node_gpus, index.task_gpus),
                ("x2_cpus", index.node_cpus, index.task_cpus),
                ("x2_memory", index.node_memory, index.task_memory),
            )
        ]

    def _x8_extended_resources(self, used: dict[str, np.ndarray]) -> list[RowFamily]:
        """X8: every extended resource fits on every node, in X2's form (one family per name).

        The rows of a resource are divided by the greatest common divisor of
        its requests (exact: both sides are integers), so that bytes of
        hugepages or storage do not make huge coefficients.
        """
        index = self.problem.index
        families = []
        for col, name in enumerate(index.resource_names):
            demand = index.task_extra[:, col]
            unit = max(1, int(np.gcd.reduce(demand[self.movable])))
            label = f"x8_{name}"
            families.append(
                self._capacity_rows(label, index.node_extra[:, col], demand, used[label], unit)
            )
        return families

    def _capacity_rows(
        self,
        label: str,
        capacity: np.ndarray,
        demand: np.ndarray,
        used: np.ndarray,
        unit: int = 1,
    ) -> RowFamily:
        """One row per node where it can bind: movable use + ``used`` (locked) <= ``capacity``
        (capacity * (1 - e[n]) on a candidate node); a negative capacity is no limit.

        Every movable task's demand is a multiple of ``unit``: the row is divided
        by it and its right side rounded down (exact in integers).
        """
        index = self.problem.index
        coef = (demand[self.col_task] // unit).astype(float)
        keep = (coef > 0) & (capacity[self.col_node] >= 0)
        cols, nodes, coef = np.flatnonzero(keep), self.col_node[keep], coef[keep]
        load = np.bincount(nodes, weights=coef, minlength=index.num_nodes)
        is_candidate = self.e_col >= 0
        room = (np.where(is_candidate, capacity, capacity - used) // unit).astype(float)
        # a row binds only where movable tasks may land: on a node they cannot reach, the
        # locked use alone decides, and it may exceed capacity (an over-committed node the
        # reader locked) without any plan being able to change it
        binding = ((load > room) | is_candidate) & (load > 0) & (capacity >= 0)
        take = binding[nodes]
        cols, nodes, coef = cols[take], nodes[take], coef[take]
        # append the e column of each binding candidate node, with coefficient = capacity
        e_nodes = np.flatnonzero(binding & is_candidate)
        cols = np.concatenate([cols, self.e_col[e_nodes]])
        coef = np.concatenate([coef, (capacity[e_nodes] // unit).astype(float)])
        nodes = np.concatenate([nodes, e_nodes])
        order = np.argsort(nodes, kind="stable")
        row_nodes = np.flatnonzero(binding)
        counts = np.bincount(nodes, minlength=index.num_nodes)[row_nodes]
        return csr_family(label, cols[order], coef[order], counts, -math.inf, room[row_nodes])

    def _x3_empty_nodes_hold_nothing(self) -> RowFamily:
        """X3: a task that uses no GPU, CPU, memory or extended resource cannot end on an
        emptied node."""
        index = self.problem.index
        task, node = self.col_task, self.col_node
        weightless = (
            (index.task_gpus[task] == 0)
            & (index.task_cpus[task] == 0)
            & (index.task_memory[task] == 0)
            & (self.e_col[node] >= 0)
        )
        if index.resource_names:
            weightless &= ~index.task_extra[task].any(axis=1)
        cols = np.flatnonzero(weightless)
        pairs = np.stack([cols, self.e_col[node[cols]]], axis=1).ravel()
        return csr_family("x3", pairs, np.ones(pairs.size), np.full(cols.size, 2), -math.inf, 1.0)

    def _x4_anti_affinity(self) -> RowFamily:
        """X4: at most one task of an anti-affinity group per node (locked members count)."""
        index = self.problem.index
        group = index.task_group[self.col_task]
        cols = np.flatnonzero(group >= 0)
        key = group[cols] * index.num_nodes + self.col_node[cols]
        locked = np.flatnonzero(index.task_locked & (index.task_group >= 0))
        locked_keys = set(
            (index.task_group[locked] * index.num_nodes + index.task_node[locked]).tolist()
        )
        order = np.argsort(key, kind="stable")
        cols, key = cols[order], key[order]
        unique, counts = np.unique(key, return_counts=True)
        room = np.array([0.0 if k in locked_keys else 1.0 for k in unique.tolist()])
        binding = counts > room
        take = np.repeat(binding, counts)
        return csr_family(
            "x4", cols[take], np.ones(int(take.sum())), counts[binding], -math.inf, room[binding]
        )

    def _x5_budgets(self) -> list[RowFamily]:
        """X5: at most ``max_moves`` moves, and ``group_budget`` moved tasks per group.

        A task moves when its stay column is 0: moves = |tasks| - sum of stays,
        so "moves <= B" is "sum of stays >= |tasks| - B".
        """
        index = self.problem.index
        families = []
        if self.max_moves is not None:
            lower = float(self.stay.size - self.max_moves)
            families.append(
                csr_family(
                    "x5_moves",
                    self.stay,
                    np.ones(self.stay.size),
                    np.array([self.stay.size]),
                    lower,
                    math.inf,
                )
            )
        if self.group_budget is not None:
            group = index.task_group[self.col_task[self.stay]]
            cols = self.stay[group >= 0]
            group = group[group >= 0]
            order = np.argsort(group, kind="stable")
            cols, group = cols[order], group[order]
            _, counts = np.unique(group, return_counts=True)
            binding = counts > self.group_budget
            take = np.repeat(binding, counts)
            families.append(
                csr_family(
                    "x5_groups",
                    cols[take],
                    np.ones(int(take.sum())),
                    counts[binding],
                    (counts[binding] - self.group_budget).astype(float),
                    math.inf,
                )
            )
        return families

    def _x7_small_nodes_keep_a_task(self) -> list[RowFamily]:
        """X7: a node with fewer GPUs than ``min_node_gpus`` keeps at least one of its tasks.

        Only nodes that run movable tasks alone need the row (a locked task
        stays); no family when there are none.
        """
        index = self.problem.index
        small = index.node_gpus < self.problem.options.min_node_gpus
        small[index.task_node[index.task_locked]] = False
        small &= index.node_task_count > 0
        if not small.any():
            return []
        take = small[self.col_node]
        cols, nodes = np.flatnonzero(take), self.col_node[take]
        order = np.argsort(nodes, kind="stable")
        counts = np.bincount(nodes, minlength=index.num_nodes)[np.flatnonzero(small)]
        return [csr_family("x7", cols[order], np.ones(cols.size), counts, 1.0, math.inf)]

    def start_values(self, plan: DefragResult) -> np.ndarray:
        """Column values of a plan's final placement (a MIP start / hint)."""
        index = self.problem.index
        final = index.task_node.copy()
        for move in plan.moves:
            final[index.task_pos[move.task]] = index.node_pos[move.to]
        values = np.zeros(self.num_cols)
        values[: self.num_x] = (final[self.col_task] == self.col_node).astype(float)
        num_e = self.candidates.size
        if self.slots is None:
            emptied = np.zeros(index.num_nodes, dtype=bool)
            emptied[[index.node_pos[n] for n in plan.emptied]] = True
            values[self.num_x : self.num_x + num_e] = emptied[self.candidates].astype(float)
        else:
            self._slot_values(final, values)
        return values

    def _slot_values(self, final: np.ndarray, values: np.ndarray) -> None:
        """The X9 columns' values for tasks on ``final`` (written into ``values``)."""
        slots = self.slots
        assert slots is not None
        index = self.problem.index
        free_gpus = index.node_gpus - np.bincount(
            final, weights=index.task_gpus, minlength=index.num_nodes
        ).astype(np.int64)
        used_cpus = np.zeros(index.num_nodes, dtype=np.int64)
        np.add.at(used_cpus, final, index.task_cpus)
        free_cpus = index.node_cpus - used_cpus
        reached = self.y_col >= 0
        values[self.y_col[reached]] = free_gpus[reached]
        values[self.z_col[reached]] = free_cpus[reached]
        for node, share, col in self.u_cols.tolist():
            on = (final == node) & (index.task_milli == share) & slots.task_slots.any(axis=1)
            on &= ~index.task_locked
            values[col] = float(np.count_nonzero(on))
        table = slots.slots(free_gpus, free_cpus, slots.partial_of(final, index.num_nodes))
        values[self.k_cols[:, 2]] = table[self.k_cols[:, 0], self.k_cols[:, 1]]

    def primary_value(self, values: np.ndarray) -> float:
        """The primary objective (emptied nodes, or integer-weighted slots) of column values."""
        return float(self.primary @ values) + self.primary_offset

    def final_nodes(self, values: np.ndarray) -> np.ndarray:
        """Each task's final node (global positions) from column values."""
        final: np.ndarray = self.problem.index.task_node.copy()
        chosen = np.flatnonzero(values[: self.num_x] > 0.5)
        final[self.col_task[chosen]] = self.col_node[chosen]
        return final

    def emptied_bound(self, objective_bound: float) -> int:
        """A proven bound on the primary objective (nodes emptied, or integer-weighted slots),
        from a bound on the weighted objective.

        objective = weight * primary - moves and moves <= weight - 1, so
        primary <= (bound + weight - 1) / weight.
        """
        return math.floor((objective_bound + self.weight - 1) / self.weight + 1e-9)

    def workload_bound(self, primary_bound: float) -> float:
        """A proven bound on the weighted slots (frequencies, not integer weights) from a
        bound on ``sum w_m slots_m``: divided by the weight scale, plus what rounding the
        frequencies to integer weights may hide (0 when they are exact)."""
        assert self.slots is not None
        slack = self.slots.rounding_slack(self.most_slots)
        return round(self.slots.weighted(primary_bound + slack), 6)


def _slot_upper(
    slots: SlotModel, shape: int, gpu_room: int, cpu_room: int, fixed: np.ndarray
) -> int:
    """Most slots of ``shape`` on a node with this room (no movable task on it) (X9)."""
    kind = int(slots.kind[shape])
    big = 2**40
    by_cpu = cpu_room // int(slots.cpus[shape]) if int(slots.cpus[shape]) > 0 else big
    if kind == WHOLE:
        by_gpu = gpu_room // int(slots.gpus[shape])
    elif kind == SHARE:
        by_gpu = gpu_room * int(slots.per_gpu[shape]) + int(fixed[shape])
    else:
        by_gpu = big
    return int(min(by_gpu, by_cpu))


def candidate_nodes(problem: Cluster) -> np.ndarray:
    """The nodes that may be emptied: GPUs >= max(1, ``min_node_gpus``), tasks, none locked."""
    index = problem.index
    locked_on = np.zeros(index.num_nodes, dtype=bool)
    locked_on[index.task_node[index.task_locked]] = True
    smallest = max(1, problem.options.min_node_gpus)
    occupied = index.node_task_count > 0
    return np.flatnonzero(occupied & ~locked_on & (index.node_gpus >= smallest))


def _eligible(problem: Cluster) -> tuple[np.ndarray, np.ndarray | None]:
    """The movable tasks and their eligible nodes (``E_t``; None: too many pairs to count)."""
    index = problem.index
    occupied = index.node_task_count > 0
    movable = np.flatnonzero(~index.task_locked)
    if movable.size * index.num_nodes > 50 * MAX_COLUMNS:
        return movable, None
    eligible: np.ndarray = (
        index.selector_masks[index.task_selector[movable]]
        & occupied[None, :]
        & (index.node_gpus[None, :] >= index.task_gpus[movable, None])
        & (index.node_cpus[None, :] >= index.task_cpus[movable, None])
        & (
            (index.node_memory[None, :] < 0)
            | (index.node_memory[None, :] >= index.task_memory[movable, None])
        )
    )
    for col in range(len(index.resource_names)):  # K4: nodes with the allocatable asked for
        request = index.task_extra[movable, col]
        asking = np.flatnonzero(request)
        eligible[asking] &= index.node_extra[None, :, col] >= request[asking, None]
    eligible[np.arange(movable.size), index.task_node[movable]] = True
    return movable, eligible


def model_columns(problem: Cluster) -> int:
    """The x columns the exact model of ``problem`` has (at least this many when too many to count).

    Depends on the snapshot alone, never on a time limit, so the choice between
    the whole model and its partitions is the same at every limit.
    """
    movable, eligible = _eligible(problem)
    if eligible is None:
        return int(movable.size * np.count_nonzero(problem.index.node_task_count))
    return int(eligible.sum())


def capacity_bound(problem: Cluster) -> int:
    """A proven upper bound on the nodes any legal plan empties, from capacity alone.

    Every task ends on a node that is not emptied, so the emptied nodes' GPUs
    (and CPUs) sum to at most what the whole cluster has free: the bound is the
    most candidate nodes, smallest first, whose capacities fit in the free
    GPUs, and likewise for CPUs (the smaller count), and at most ``max_moves``
    (each emptied node needs a move).

    >>> problem = Cluster(
    ...     nodes=[{"id": n, "gpus": 8, "cpus": 64} for n in ("a", "b", "c")],
    ...     tasks=[{"id": "t1", "node": "a", "gpus": 4}, {"id": "t2", "node": "b", "gpus": 4},
    ...            {"id": "t3", "node": "c", "gpus": 4}])
    >>> capacity_bound(problem)
    1
    """
    index = problem.index
    candidates = candidate_nodes(problem)
    bound = int(candidates.size)
    for capacity, demand in (
        (index.node_gpus, index.task_gpus),
        (index.node_cpus, index.task_cpus),
    ):
        free = int(capacity.sum()) - int(demand.sum())
        sizes = np.cumsum(np.sort(capacity[candidates]))
        bound = min(bound, int(np.searchsorted(sizes, free, side="right")))
    max_moves = problem.options.max_moves
    return bound if max_moves is None else min(bound, max_moves)


def _node_use(problem: Cluster) -> dict[str, np.ndarray]:
    """What the locked tasks use on every node (the movable ones are columns)."""
    index = problem.index
    locked = index.task_locked
    out = {}
    for label, amounts in (
        ("x2_gpus", index.task_gpus),
        ("x2_cpus", index.task_cpus),
        ("x2_memory", index.task_memory),
    ):
        use = np.zeros(index.num_nodes, dtype=np.int64)
        np.add.at(use, index.task_node[locked], amounts[locked])
        out[label] = use
    for col, name in enumerate(index.resource_names):
        use = np.zeros(index.num_nodes, dtype=np.int64)
        np.add.at(use, index.task_node[locked], index.task_extra[locked, col])
        out[f"x8_{name}"] = use
    return out


__all__ = [
    "MAX_COLUMNS",
    "ROWS_SECONDS_PER_PAIR",
    "DefragRows",
    "candidate_nodes",
    "capacity_bound",
    "model_columns",
]
