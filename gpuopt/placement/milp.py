"""Exact switch placement (``models/placement.md``): most jobs placed, then fewest switches.

Columns per job ``j``: ``x[j]`` (placed), ``u[j,s]`` (uses switch ``s``) and one
integer ``z[j,n]`` per node it may use (GPUs on node ``n``; for a whole-node
job a binary that takes the whole node). Rows T1-T6 are built by one
function each and solved by HiGHS through :func:`gpuopt.solvers.highs.solve_rows`,
warm-started from the greedy. The objective ``W * placed - switches spanned``
(``W`` above any possible span) is lexicographic; afterwards every placed
job's GPUs are re-concentrated within the switches it was given (largest
first), which keeps the span and lowers the entropy.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from gpuopt.placement.greedy import place_job, solve_greedy, usable_gpus
from gpuopt.placement.problem import TopologyProblem
from gpuopt.placement.solution import Status, TopologyResult, make_result
from gpuopt.solvers.highs import RowFamily, csr_family, solve_rows


@dataclass
class TopologyRows:
    """Columns (x, then u, then z) and labelled rows of the exact placement model."""

    problem: TopologyProblem
    z_job: np.ndarray
    z_node: np.ndarray
    z_size: np.ndarray  # GPUs per unit of the column (node size for whole nodes, else 1)
    u_job: np.ndarray
    u_switch: np.ndarray
    weight: int
    col_lower: np.ndarray = field(default_factory=lambda: np.zeros(0))
    col_upper: np.ndarray = field(default_factory=lambda: np.zeros(0))
    integer: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    cost: np.ndarray = field(default_factory=lambda: np.zeros(0))
    offset: float = 0.0
    families: list[RowFamily] = field(default_factory=list)

    @property
    def num_jobs(self) -> int:
        return len(self.problem.jobs)

    @property
    def num_cols(self) -> int:
        return int(self.cost.size)

    def u_col(self, k: int | np.ndarray) -> np.ndarray | int:
        return self.num_jobs + k

    def z_col(self, k: int | np.ndarray) -> np.ndarray | int:
        return self.num_jobs + self.u_job.size + k

    @classmethod
    def build(cls, problem: TopologyProblem) -> TopologyRows:
        index = problem.index
        z_job, z_node, z_size, z_upper = [], [], [], []
        for j, job in enumerate(problem.jobs):
            usable = usable_gpus(index, job, index.node_free, index.node_cpus)
            for node in np.flatnonzero(usable > 0).tolist():
                z_job.append(j)
                z_node.append(node)
                size = int(usable[node]) if job.whole_nodes else 1
                z_size.append(size)
                z_upper.append(1 if job.whole_nodes else min(int(usable[node]), job.gpus))
        z_job_a = np.array(z_job, dtype=np.int64)
        z_node_a = np.array(z_node, dtype=np.int64)
        pairs = sorted({(j, int(index.node_switch[n])) for j, n in zip(z_job, z_node, strict=True)})
        u_job = np.array([p[0] for p in pairs], dtype=np.int64)
        u_switch = np.array([p[1] for p in pairs], dtype=np.int64)
        weight = len(pairs) + 1
        rows = cls(
            problem, z_job_a, z_node_a, np.array(z_size, dtype=np.int64), u_job, u_switch, weight
        )
        num = len(problem.jobs) + len(pairs) + len(z_job)
        rows.col_lower = np.zeros(num)
        rows.col_upper = np.concatenate(
            [np.ones(len(problem.jobs) + len(pairs)), np.array(z_upper, dtype=float)]
        )
        rows.integer = np.ones(num, dtype=bool)
        rows.cost = np.concatenate(
            [np.full(len(problem.jobs), float(weight)), -np.ones(len(pairs)), np.zeros(len(z_job))]
        )
        rows.families = [
            rows._t1_whole_job(),
            rows._t2_node_gpus(),
            rows._t3_switch_link(),
            rows._t4_one_switch(),
            rows._t6_node_cpus(),
        ]
        return rows

    def _t1_whole_job(self) -> RowFamily:
        """T1: a job gets all its GPUs or none: sum of its z (in GPUs) = gpus * x[j]."""
        cols, coefs, counts = [], [], []
        for j, job in enumerate(self.problem.jobs):
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

    def _t3_switch_link(self) -> RowFamily:
        """T3: GPUs under switch s only when u[j,s] = 1: sum of z - gpus * u[j,s] <= 0."""
        index = self.problem.index
        cols, coefs, counts = [], [], []
        switch_of = index.node_switch[self.z_node]
        for k, (j, s) in enumerate(zip(self.u_job.tolist(), self.u_switch.tolist(), strict=True)):
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

    def start_values(self, result: TopologyResult) -> np.ndarray:
        """Column values of a result (a MIP start)."""
        index = self.problem.index
        node_pos = {node_id: n for n, node_id in enumerate(index.node_ids)}
        values = np.zeros(self.num_cols)
        for j, job in enumerate(self.problem.jobs):
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
        placed: dict[str, dict[int, int]] = {}
        for j, job in enumerate(self.problem.jobs):
            if values[j] < 0.5:
                continue
            parts = {}
            for k in np.flatnonzero(self.z_job == j).tolist():
                amount = round(float(values[int(self.z_col(k))])) * int(self.z_size[k])
                if amount:
                    parts[int(self.z_node[k])] = amount
            placed[job.id] = parts
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
    problem: TopologyProblem, placed: dict[str, dict[int, int]]
) -> dict[str, dict[int, int]]:
    """Re-place each job, largest first, most concentrated within the switches it spans."""
    from gpuopt.placement.greedy import job_order

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


def solve_milp(
    problem: TopologyProblem,
    *,
    time_limit: float | None = 10.0,
    seed: int = 0,
    threads: int = 1,
    log: bool = False,
) -> TopologyResult:
    """Place the jobs exactly: most jobs placed, then fewest switches spanned (HiGHS).

    Examples
    --------
    >>> problem = TopologyProblem(
    ...     switches=[{"id": "a", "free_gpus": 8}, {"id": "b", "free_gpus": 8}],
    ...     jobs=[{"id": "j1", "gpus": 6}, {"id": "j2", "gpus": 6}, {"id": "j3", "gpus": 6}])
    >>> result = solve_milp(problem)
    >>> result.status, result.metrics.placed, result.bound
    ('optimal', 2, 2)
    """
    started = time.perf_counter()
    start = solve_greedy(problem)
    rows = TopologyRows.build(problem)
    remaining = (
        None if time_limit is None else max(0.05, time_limit - (time.perf_counter() - started))
    )
    values, status, bound = solve_rows(
        rows,
        remaining,
        seed,
        threads,
        rows.start_values(start),
        log,
        None,
        {"mip_abs_gap": 0.99},
    )
    jobs_bound = (
        None if bound is None else math.floor((bound + rows.weight - 1) / rows.weight + 1e-9)
    )
    final: Status = "optimal" if status == "optimal" else "time_limit"
    if values is None:
        result = start.model_copy(update={"method": "milp", "status": final})
    else:
        placed = concentrate_each(problem, rows.read(values))
        result = make_result(problem, "milp", placed, seconds=0.0, status=final)
        if (result.metrics.placed, -result.metrics.switches_spanned) < (
            start.metrics.placed,
            -start.metrics.switches_spanned,
        ):
            result = start.model_copy(update={"method": "milp", "status": final})
    jobs_bound = None if jobs_bound is None else min(jobs_bound, len(problem.jobs))
    return result.model_copy(update={"bound": jobs_bound, "seconds": time.perf_counter() - started})


__all__ = ["TopologyRows", "concentrate_each", "solve_milp"]
