"""The array view the preemption methods read (:class:`PreemptionIndex`), built by
:func:`gpuopt.preemption.problem.preemption_view`: nodes and tasks by position, CPUs and
times as exact integers, the items the methods may stop (P13) and, cached on first use,
what the methods derive from the state alone (free capacity, node classes of P8, the items
in their per-node orders of P9 and P10 with prefix sums, :class:`LPSegments`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np

from gpuopt.cluster.model import NodesAndTasks
from gpuopt.preemption.gangs import Items

#: Which LP tasks can help cover a deficit: those holding GPUs, CPUs, or either.
Holding = Literal["gpus", "cpus", "any"]

#: Node classes in the index view (``models/preemption.md``, P8).
IDLE, LP_NODE, HP_NODE = 0, 1, 2


@dataclass(frozen=True)
class LPSegments:
    """The LP items (P13: tasks, and gangs closed whole) sorted by node, then by a per-node
    order, with prefix sums.

    Entries ``start[n]:end[n]`` of ``items`` are the items of node ``n`` in that order
    (positions in :attr:`PreemptionIndex.items`). ``cum_gpus``, ``cum_cpus``, ``cum_cost``
    and ``cum_count`` (pods stopped) have one entry more than ``items`` (a leading 0): the
    sum over the first ``j`` items of node ``n`` is ``cum[start[n] + j] - cum[start[n]]``.
    The sums run over the whole cluster, whose task costs validation keeps inside int64
    (``MAX_TOTAL_COST``); a gang's closure adds its whole cost again on each node it has
    members on (int64 holds twice ``MAX_TOTAL_COST``; real costs are far below it).
    """

    items: np.ndarray
    start: np.ndarray
    end: np.ndarray
    cum_gpus: np.ndarray
    cum_cpus: np.ndarray
    cum_cost: np.ndarray
    cum_count: np.ndarray

    @classmethod
    def build(cls, index: PreemptionIndex, order: np.ndarray) -> LPSegments:
        items = order.astype(np.int64)
        found = index.items
        nodes = found.node[items]
        positions = np.arange(index.num_nodes)
        zero = np.zeros(1, dtype=np.int64)
        return cls(
            items=items,
            start=np.searchsorted(nodes, positions, side="left"),
            end=np.searchsorted(nodes, positions, side="right"),
            cum_gpus=np.concatenate([zero, np.cumsum(found.gpus[items])]),
            cum_cpus=np.concatenate([zero, np.cumsum(found.cpus[items])]),
            cum_cost=np.concatenate([zero, np.cumsum(found.cost[items])]),
            cum_count=np.concatenate([zero, np.cumsum(found.count[items])]),
        )


@dataclass(frozen=True)
class PreemptionIndex(NodesAndTasks):
    """Numpy view of a state: nodes and tasks by position, CPUs and times as integers.

    CPUs are milli-CPUs; ``task_age`` is ``now - last_checkpoint`` and
    ``task_cost`` is ``gpus * task_age``, both in thousandths of the time
    unit. The request's fields are ``request_gpus``, ``request_cpus``
    (milli-CPUs) and ``request_hp``. ``items`` are what the methods may stop
    (P13: the LP tasks, a running gang's members within its allowance, and
    gangs closed whole). What the methods derive from the state alone (free
    capacity, node classes, the items in their three per-node orders with
    prefix sums) is cached, built on first use, so a decision only does the
    work that depends on the request's size.
    """

    node_ids: list[str]
    node_pos: dict[str, int]
    node_gpus: np.ndarray
    node_cpus: np.ndarray
    node_preemptions: np.ndarray
    task_ids: list[str]
    task_pos: dict[str, int]
    task_node: np.ndarray
    task_gpus: np.ndarray
    task_cpus: np.ndarray
    task_hp: np.ndarray
    task_age: np.ndarray
    task_cost: np.ndarray
    request_gpus: int
    request_cpus: int
    request_hp: bool
    items: Items
    _lp_segments: dict[str, LPSegments] = field(default_factory=dict, repr=False, compare=False)

    def _per_node(self, values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        nodes = self.task_node if mask is None else self.task_node[mask]
        values = values if mask is None else values[mask]
        # Per-node sums of GPUs and milli-CPUs stay below 2**53 (validated capacities), so the
        # float weights of bincount add them exactly.
        total = np.bincount(nodes, weights=values, minlength=self.num_nodes)
        return total.astype(np.int64)

    @cached_property
    def node_free_gpus(self) -> np.ndarray:
        free: np.ndarray = self.node_gpus - self._per_node(self.task_gpus)
        return free

    @cached_property
    def node_free_cpus(self) -> np.ndarray:
        free: np.ndarray = self.node_cpus - self._per_node(self.task_cpus)
        return free

    @cached_property
    def _freeable(self) -> tuple[np.ndarray, np.ndarray]:
        return self.items.freeable(self.num_nodes)

    @cached_property
    def node_lp_gpus(self) -> np.ndarray:
        """GPUs the items of each node free at most (stopping all its LP tasks, P13: but the
        members of a gang that cannot be closed beyond its allowance; an over-estimate on
        :meth:`Items.unsure_nodes`)."""
        return self._freeable[0]

    @cached_property
    def node_lp_cpus(self) -> np.ndarray:
        return self._freeable[1]

    @cached_property
    def node_class(self) -> np.ndarray:
        """``HP_NODE`` runs an HP task, ``LP_NODE`` runs only LP tasks, ``IDLE`` runs none."""
        runs = np.zeros(self.num_nodes, dtype=bool)
        runs[self.task_node] = True
        runs_hp = np.zeros(self.num_nodes, dtype=bool)
        runs_hp[self.task_node[self.task_hp]] = True
        return np.where(runs_hp, HP_NODE, np.where(runs, LP_NODE, IDLE)).astype(np.int64)

    @cached_property
    def node_class_rank(self) -> np.ndarray:
        """0 for the request's own class, 1 for idle, 2 for the other class (P8)."""
        own = HP_NODE if self.request_hp else LP_NODE
        node_class = self.node_class
        return np.where(node_class == own, 0, np.where(node_class == IDLE, 1, 2)).astype(np.int64)

    @cached_property
    def _lp_cost_order(self) -> np.ndarray:
        items = self.items
        every = np.arange(items.size)
        order: np.ndarray = np.lexsort((every, -items.cpus, -items.gpus, items.cost, items.node))
        return order

    def lp_by_cost(self, holding: Holding = "any") -> LPSegments:
        """Items per node by cost, then more GPUs, more CPUs, item order (P9).

        Only the items that can help are kept: those holding GPUs
        (``holding="gpus"``), CPUs (``"cpus"``) or either (``"any"``). Each of
        the three is built once, by filtering one sorted order.
        """
        segments = self._lp_segments.get(holding)
        if segments is None:
            order = self._lp_cost_order
            gpus, cpus = self.items.gpus[order] > 0, self.items.cpus[order] > 0
            keep = {"gpus": gpus, "cpus": cpus, "any": gpus | cpus}[holding]
            segments = self._lp_segments[holding] = LPSegments.build(self, order[keep])
        return segments

    def _lp_sorted_by(self, key: np.ndarray) -> LPSegments:
        """Items per node in increasing ``key`` (ties: item order)."""
        every = np.arange(self.items.size)
        order = np.lexsort((every, key, self.items.node))
        return LPSegments.build(self, order)

    @cached_property
    def item_gpu_price(self) -> np.ndarray:
        """Cost per GPU of each item: a task's age (an exact integer), and with a gang's
        closure among the items, every item's cost over its GPUs in floating point
        (infinite for an item without GPUs)."""
        items = self.items
        if not items.closures:
            ages: np.ndarray = self.task_age[items.task]
            return ages
        with np.errstate(divide="ignore", invalid="ignore"):
            price = items.cost / items.gpus
        return np.where(items.gpus > 0, price, np.inf)

    @cached_property
    def lp_by_age(self) -> LPSegments:
        """Items per node by cost per GPU (a task's age), for the exact method's lower bound
        (P10)."""
        return self._lp_sorted_by(self.item_gpu_price)

    @cached_property
    def item_cpu_price(self) -> np.ndarray:
        """Cost per milli-CPU of each item (infinite for an item without CPUs)."""
        items = self.items
        with np.errstate(divide="ignore", invalid="ignore"):
            price = items.cost / items.cpus
        return np.where(items.cpus > 0, price, np.inf)

    @cached_property
    def lp_by_cpu_price(self) -> LPSegments:
        """Items per node by cost per CPU, for the exact method's lower bound (P10)."""
        return self._lp_sorted_by(self.item_cpu_price)


__all__ = ["HP_NODE", "IDLE", "LP_NODE", "Holding", "LPSegments", "PreemptionIndex"]
