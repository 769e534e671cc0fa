"""The exact switch placement model (``models/placement.md``): columns and labelled rows.

Columns per job ``j``: ``x[j]`` (placed), ``u[j,s]`` (uses switch ``s``) and one
integer ``z[j,n]`` per node it may use (GPUs on node ``n``; for a whole-node
job a binary that takes the whole node). :class:`TopologyRows` builds the rows
T1-T4 and T6 once, one method per family citing its label; both exact methods
read them: :mod:`gpuopt.placement.switch.milp` hands them to HiGHS and
:mod:`gpuopt.placement.switch.cpsat` to CP-SAT (one model, never two
formulations). The objective ``W * placed - switches spanned`` (``W`` above any
possible span) is lexicographic. :func:`solve_with` is the one solve both
methods share: the greedy start, the rows, the solver, then every placed job's
GPUs re-concentrated within the switches it was given (largest first), which
keeps the span and lowers the entropy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpuopt.errors import ProblemError
from gpuopt.placement.switch.greedy import place_job, solve_greedy, usable_gpus
from gpuopt.placement.switch.problem import TopologyProblem
from gpuopt.placement.switch.solution import Status, TopologyResult, make_result
from gpuopt.solvers.deadline import Deadline, DeadlineExceeded
from gpuopt.solvers.highs import GrowingRows, RowFamily, csr_family

#: Most job-node columns (``z``) an exact model may have before it is refused (memory;
#: the same bound as the defragmentation model's task-node columns).
MAX_COLUMNS = 2_000_000


@dataclass
class TopologyRows(GrowingRows):
    """Columns (x, then u, then z) and labelled rows of the exact placement model."""

    problem: TopologyProblem
    z_job: np.ndarray
    z_node: np.ndarray
    z_size: np.ndarray  # GPUs per unit of the column (node size for whole nodes, else 1)
    u_job: np.ndarray
    u_switch: np.ndarray
    weight: int

    @property
    def num_jobs(self) -> int:
        return len(self.problem.jobs)

    def u_col(self, k: int | np.ndarray) -> np.ndarray | int:
        return self.num_jobs + k

    def z_col(self, k: int | np.ndarray) -> np.ndarray | int:
        return self.num_jobs + self.u_job.size + k

    @classmethod
    def build(cls, problem: TopologyProblem, deadline: Deadline | None = None) -> TopologyRows:
        """The columns and rows of ``problem``; with a ``deadline``, raises
        :class:`gpuopt.solvers.deadline.DeadlineExceeded` once it passes (checked per job
        and per job-switch pair)."""
        deadline = deadline or Deadline(None)
        index = problem.index
        z_job: list[np.ndarray] = []
        z_node: list[np.ndarray] = []
        z_size: list[np.ndarray] = []
        z_upper: list[np.ndarray] = []
        columns = 0
        for j, job in enumerate(problem.jobs):
            deadline.check()
            usable = usable_gpus(index, job, index.node_free, index.node_cpus)
            columns += int(np.count_nonzero(usable > 0))
            if columns > MAX_COLUMNS:  # refused before memory runs out
                raise ProblemError(
                    f"the exact model would need more than {MAX_COLUMNS:,} job-node columns "
                    f"({len(problem.jobs)} jobs, {len(index.node_ids)} nodes); "
                    "use method 'heuristic'."
                )
            nodes = np.flatnonzero(usable > 0)  # one column per node, in node order
            whole = np.ones(nodes.size, dtype=np.int64)
            z_job.append(np.full(nodes.size, j, dtype=np.int64))
            z_node.append(nodes.astype(np.int64))
            z_size.append(usable[nodes].astype(np.int64) if job.whole_nodes else whole)
            z_upper.append(whole if job.whole_nodes else np.minimum(usable[nodes], job.gpus))
        deadline.check()
        z_job_a = np.concatenate(z_job) if z_job else np.zeros(0, dtype=np.int64)
        z_node_a = np.concatenate(z_node) if z_node else np.zeros(0, dtype=np.int64)
        # the (job, switch) pairs, sorted by job then switch
        switches = int(index.node_switch.max()) + 1 if index.node_switch.size else 1
        pairs = np.unique(z_job_a * switches + index.node_switch[z_node_a].astype(np.int64))
        u_job, u_switch = pairs // switches, pairs % switches
        weight = int(pairs.size) + 1
        z_size_a = np.concatenate(z_size) if z_size else np.zeros(0, dtype=np.int64)
        rows = cls(problem, z_job_a, z_node_a, z_size_a, u_job, u_switch, weight)
        num = len(problem.jobs) + int(pairs.size) + int(z_job_a.size)
        rows.col_lower = np.zeros(num)
        z_upper_a = np.concatenate(z_upper).astype(float) if z_upper else np.zeros(0)
        rows.col_upper = np.concatenate([np.ones(len(problem.jobs) + int(pairs.size)), z_upper_a])
        rows.integer = np.ones(num, dtype=bool)
        rows.cost = np.concatenate(
            [
                np.full(len(problem.jobs), float(weight)),
                -np.ones(int(pairs.size)),
                np.zeros(int(z_job_a.size)),
            ]
        )
        rows.families = [
            rows._t1_whole_job(deadline),
            rows._t2_node_gpus(),
            rows._t3_switch_link(deadline),
            rows._t4_one_switch(),
            rows._t6_node_cpus(),
        ]
        return rows

    def _t1_whole_job(self, deadline: Deadline) -> RowFamily:
        """T1: a job gets all its GPUs or none: sum of its z (in GPUs) = gpus * x[j]."""
        cols, coefs, counts = [], [], []
        for j, job in enumerate(self.problem.jobs):
            deadline.check()
            mine = np.flatnonzero(self.z_job == j)
            cols += [*np.asarray(self.z_col(mine)).tolist(), j]
            coefs += [*self.z_size[mine].astype(float).tolist(), -float(job.gpus)]
            counts.append(mine.size + 1)
        return csr_family("t1", np.array(cols), np.array(coefs), np.array(counts), 0.0, 0.0)

    def _t2_node_gpus(self) -> RowFamily:
        """T2: the GPUs given on a node never exceed its free GPUs."""
        index = self.problem.index
        order = np.argsort(self.z_node, kind="stable")
        nodes = self.z_node[order]
        unique, counts = np.unique(nodes, return_counts=True)
        return csr_family(
            "t2",
            np.asarray(self.z_col(order)),
            self.z_size[order].astype(float),
            counts,
            -math.inf,
            index.node_free[unique].astype(float),
        )

    def _t3_switch_link(self, deadline: Deadline) -> RowFamily:
        """T3: GPUs under switch s only when u[j,s] = 1: sum of z - gpus * u[j,s] <= 0."""
        index = self.problem.index
        cols, coefs, counts = [], [], []
        switch_of = index.node_switch[self.z_node]
        for k, (j, s) in enumerate(zip(self.u_job.tolist(), self.u_switch.tolist(), strict=True)):
            if k % 64 == 0:
                deadline.check()
            mine = np.flatnonzero((self.z_job == j) & (switch_of == s))
            cols += [*np.asarray(self.z_col(mine)).tolist(), int(self.u_col(k))]
            coefs += [*self.z_size[mine].astype(float).tolist(), -float(self.problem.jobs[j].gpus)]
            counts.append(mine.size + 1)
        return csr_family("t3", np.array(cols), np.array(coefs), np.array(counts), -math.inf, 0.0)

    def _t4_one_switch(self) -> RowFamily:
        """T4: a one_switch job uses at most one switch."""
        cols, counts = [], []
        for j, job in enumerate(self.problem.jobs):
            if job.one_switch:
                mine = np.flatnonzero(self.u_job == j)
                cols += np.asarray(self.u_col(mine)).tolist()
                counts.append(mine.size)
        return csr_family(
            "t4",
            np.array(cols, dtype=np.int64),
            np.ones(len(cols)),
            np.array(counts, dtype=np.int64),
            -math.inf,
            1.0,
        )

    def _t6_node_cpus(self) -> RowFamily:
        """T6: CPUs per GPU fit on every node that states its free CPUs."""
        index = self.problem.index
        per_gpu = np.array([job.cpus_per_gpu for job in self.problem.jobs])[self.z_job]
        keep = np.flatnonzero((per_gpu > 0) & np.isfinite(index.node_cpus[self.z_node]))
        order = keep[np.argsort(self.z_node[keep], kind="stable")]
        unique, counts = np.unique(self.z_node[order], return_counts=True)
        return csr_family(
            "t6",
            np.asarray(self.z_col(order)),
            (per_gpu[order] * self.z_size[order]),
            counts,
            -math.inf,
            index.node_cpus[unique],
        )

    def start_values(self, result: TopologyResult, deadline: Deadline | None = None) -> np.ndarray:
        """Column values of a result (a MIP start)."""
        index = self.problem.index
        node_pos = {node_id: n for n, node_id in enumerate(index.node_ids)}
        values = np.zeros(self.num_cols)
        for j, job in enumerate(self.problem.jobs):
            if deadline is not None:
                deadline.check()
            if job.id not in result.placements:
                continue
            values[j] = 1.0
            parts = _node_parts(self.problem, result, job.id, node_pos)
            for k in np.flatnonzero(self.z_job == j).tolist():
                gpus = parts.get(int(self.z_node[k]), 0)
                values[int(self.z_col(k))] = gpus / int(self.z_size[k])
            for k in np.flatnonzero(self.u_job == j).tolist():
                used = any(index.node_switch[n] == self.u_switch[k] for n, g in parts.items() if g)
                values[int(self.u_col(k))] = 1.0 if used else 0.0
        return values

    def read(self, values: np.ndarray) -> dict[str, dict[int, int]]:
        """GPUs per node of every placed job (one pass over the z columns)."""
        jobs = self.problem.jobs
        placed: dict[str, dict[int, int]] = {
            job.id: {} for j, job in enumerate(jobs) if values[j] >= 0.5
        }
        z_values = np.rint(values[int(self.z_col(0)) :]).astype(np.int64) * self.z_size
        for k in np.flatnonzero(z_values).tolist():
            parts = placed.get(jobs[int(self.z_job[k])].id)
            if parts is not None:
                parts[int(self.z_node[k])] = int(z_values[k])
        return placed


def _node_parts(
    problem: TopologyProblem, result: TopologyResult, job_id: str, node_pos: dict[str, int]
) -> dict[int, int]:
    """A result's GPUs per node position for one job (pool switches are their own node)."""
    parts: dict[int, int] = {}
    for node_id, gpus in result.nodes.get(job_id, {}).items():
        parts[node_pos[node_id]] = gpus
    pools = {sw.id for sw in problem.switches if sw.nodes is None}
    for switch_id, gpus in result.placements.get(job_id, {}).items():
        if switch_id in pools:
            parts[node_pos[switch_id]] = gpus
    return parts


def concentrate_each(
    problem: TopologyProblem,
    placed: dict[str, dict[int, int]],
    deadline: Deadline | None = None,
) -> dict[str, dict[int, int]]:
    """Re-place each job, largest first, most concentrated within the switches it spans.

    Stops at the ``deadline``: the jobs not reached keep their GPUs (still legal).
    """
    from gpuopt.placement.switch.greedy import job_order

    index = problem.index
    free = index.node_free.copy()
    cpus = index.node_cpus.copy()
    for job_id, parts in placed.items():
        job = next(j for j in problem.jobs if j.id == job_id)
        for node, gpus in parts.items():
            free[node] -= gpus
            cpus[node] -= gpus * job.cpus_per_gpu
    out = dict(placed)
    for job in job_order(problem):
        if deadline is not None and deadline.expired():
            break
        if not placed.get(job.id):
            continue
        parts = placed[job.id]
        for node, gpus in parts.items():  # give this job's GPUs back
            free[node] += gpus
            cpus[node] += gpus * job.cpus_per_gpu
        spanned = {int(index.node_switch[node]) for node in parts}
        outside = ~np.isin(index.node_switch, list(spanned))
        masked = np.where(outside, 0, free)
        better = place_job(index, job, masked, cpus)
        chosen: dict[int, int] = better if better is not None else parts
        for node, gpus in chosen.items():
            free[node] -= gpus
            cpus[node] -= gpus * job.cpus_per_gpu
        out[job.id] = chosen
    return out


#: ``solver(rows, time_limit, start)``: column values (None: none found), the status
#: (``optimal``, ``time_limit``, ...) and a proven upper bound on the objective (or None).
RowSolver = Callable[
    [TopologyRows, float | None, np.ndarray], tuple[np.ndarray | None, str, float | None]
]


def solve_with(
    problem: TopologyProblem, method: str, solver: RowSolver, time_limit: float | None
) -> TopologyResult:
    """Solve the rows of ``problem`` with ``solver``, warm-started from the greedy.

    ``time_limit`` (seconds; None: no limit) counts from the call and covers the
    greedy start, building the rows, the solver and re-concentrating the jobs;
    when the rows or the solver cannot be had in time, the greedy placement
    comes back with status ``time_limit``. ``bound`` is the proven most jobs
    placeable, ``floor((B + W - 1) / W)`` from the solver's objective bound ``B``.
    A solver that returns status ``feasible`` (and no bound) proved nothing; the
    result keeps that status.
    """
    deadline = Deadline(time_limit)
    started = deadline.started
    start = solve_greedy(problem)
    try:
        rows = TopologyRows.build(problem, deadline)
        start_values = rows.start_values(start, deadline)
    except DeadlineExceeded:  # the greedy comes back, with status time_limit
        update = {"method": method, "status": "time_limit", "bound": None}
        return start.model_copy(update={**update, "seconds": time.perf_counter() - started})
    values, status, bound = solver(rows, deadline.remaining(), start_values)
    jobs_bound = (
        None if bound is None else math.floor((bound + rows.weight - 1) / rows.weight + 1e-9)
    )
    final: Status = "optimal" if status == "optimal" else "time_limit"
    if status == "feasible":  # the solver finished on a model it had to round: no proof
        final = "feasible"
    if values is None:
        result = start.model_copy(update={"method": method, "status": final})
    else:
        placed = concentrate_each(problem, rows.read(values), deadline)
        result = make_result(problem, method, placed, seconds=0.0, status=final)
        if (result.metrics.placed, -result.metrics.switches_spanned) < (
            start.metrics.placed,
            -start.metrics.switches_spanned,
        ):
            result = start.model_copy(update={"method": method, "status": final})
    jobs_bound = None if jobs_bound is None else min(jobs_bound, len(problem.jobs))
    return result.model_copy(update={"bound": jobs_bound, "seconds": time.perf_counter() - started})


__all__ = ["MAX_COLUMNS", "RowSolver", "TopologyRows", "concentrate_each", "solve_with"]
