"""Defragmentation for a target workload: how many requests of each shape fit (X9).

A target workload (:class:`gpuopt.sharing.Workload`: shapes with their
frequencies) says what the cluster should be able to start next. The
*slots* of shape ``m`` on node ``n`` are the copies of ``m`` that fit on
``n`` at the same time (``models/defrag.md``, X9):

- a whole-GPU shape (``gpus`` GPUs of 1000 thousandths): ``min(free GPUs //
  gpus, free CPU // cpu)``;
- a share shape (``gpu_milli`` < 1000 of one GPU): the sum over the node's
  GPUs of ``left // gpu_milli`` (a free GPU gives ``1000 // gpu_milli``),
  at most ``free CPU // cpu``;
- a CPU-only shape: ``free CPU // cpu`` (a shape asking for neither is
  refused: it would fit without limit). CPU-only shapes count with their
  weight like any other: a workload that should not count them leaves them
  out;
- 0 on a node the shape may not use: its GPU model (``gpu_model``, else the
  label ``gpu_model``) is not among the shape's models, or a request of the
  shape would be refused there by rules K1-K3 (closed, cordoned, tainted).

Memory is not part of a shape and is not counted. The objective is
``sum_m f_m sum_n slots(n, m)`` (``f_m`` the frequencies), the *weighted
slots*.

:class:`SlotModel` is the array view the methods read: it counts GPUs as the
index does (a share alone on its GPU is a one-GPU task that moves to a GPU of
its own; shares that share a GPU are fixed), so the slots of a final
placement are linear in where the movable tasks end. The plan's metrics are
recomputed from the C7 layout instead (:func:`gpuopt.defrag.solution.evaluate`),
which may put a moved share on a partly used GPU (best fit).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from gpuopt._native import compiled
from gpuopt.cluster.admits import shape_admits
from gpuopt.cluster.kube import Toleration, tolerates
from gpuopt.cluster.model import Cluster, Objective
from gpuopt.cluster.shares import MILLI, Devices
from gpuopt.cluster.workload import MAX_GPUS, Shape, Workload
from gpuopt.errors import ProblemError

#: The integer weight of a shape in the exact models is ``round(f * WEIGHT_SCALE)``
#: (at least 1): the frequencies to 1e-4; the bound adds back what the rounding may hide.
WEIGHT_SCALE = 10_000

#: Shape kinds in :attr:`SlotModel.kind`.
CPU_ONLY, WHOLE, SHARE = 0, 1, 2


def check_workload(workload: Workload) -> None:
    """Refuse a shape that asks for neither CPU nor GPU (its slots would have no limit)."""
    for shape in workload.shapes:
        if shape.gpus == 0 and shape.cpu_milli == 0:
            raise ProblemError(
                f"workload: the shape ({shape}) asks for no CPU and no GPU, so it fits "
                "without limit; give it a CPU request or leave it out."
            )


def pending_workload(cluster: Cluster) -> Workload | None:
    """The waiting pods' shapes weighted by how many wait (None: nobody waits).

    A waiting pod's shape is its CPUs and GPUs (a share of one GPU as its thousandths); a
    shape tolerates each taint of the cluster's nodes that every waiting pod of it
    tolerates (K2: the GPU taints GPU pods tolerate leave the tainted GPU nodes open to
    it), as a toleration of exactly that taint; the pods' node selectors and affinity are
    not part of a shape; pods of more than 8 GPUs (the most a shape has) or asking for
    nothing are left out.
    """
    counts: Counter[Shape] = Counter()
    pods: dict[Shape, list[Any]] = {}
    for pod in cluster.pending:
        shape = _shape_of(pod)
        if shape is None:
            continue
        counts[shape] += 1
        pods.setdefault(shape, []).append(pod)
    if not counts:
        return None
    taints = list(dict.fromkeys(taint for node in cluster.nodes for taint in node.taints))
    shapes = list(counts)
    kept = [
        tuple(
            Toleration(
                key=taint.key,
                operator="Exists" if taint.value is None else "Equal",
                value=taint.value,
                effect=taint.effect,
            )
            for taint in taints
            if all(tolerates(pod.tolerations, taint) for pod in pods[shape])
        )
        for shape in shapes
    ]
    return Workload.from_weights(
        shapes, [float(counts[s]) for s in shapes], (), kept if any(kept) else ()
    )


def _shape_of(pod: Any) -> Shape | None:
    """A waiting pod's shape (None: it has none, :func:`pending_workload`)."""
    if pod.gpus > MAX_GPUS or not (pod.gpus or pod.cpus):
        return None
    if pod.gpu_milli is not None:  # a share of one GPU
        return Shape(round(pod.cpus * 1000), pod.gpu_milli, 1)
    return Shape(round(pod.cpus * 1000), MILLI if pod.gpus else 0, pod.gpus)


def resolve(cluster: Cluster) -> tuple[Cluster, Objective]:
    """The snapshot with its objective decided and, for ``workload``, its workload set.

    ``options.objective`` given as ``workload`` without a workload takes the
    waiting pods' shapes (:func:`pending_workload`); without waiting pods it
    is refused. Left unset, the objective is ``workload`` when the snapshot
    carries a workload, else ``emptied``.
    """
    options = cluster.options
    objective = options.chosen_objective
    if objective == "emptied":
        return cluster, objective
    workload = options.target_workload()
    if workload is None:
        workload = pending_workload(cluster)
        if workload is None:
            raise ProblemError(
                "objective 'workload' needs a workload (options.workload, --workload FILE) or "
                "waiting pods in the snapshot; it has neither."
            )
        items = workload.to_items()
        update = {"workload": items, "objective": "workload"}
        cluster = cluster.model_copy(
            update={"options": options.model_validate({**options.model_dump(), **update})}
        )
    check_workload(workload)
    return cluster, objective


@dataclass(frozen=True)
class SlotModel:
    """The slots of a target workload as arrays (positions as in the index view).

    ``fixed_slots[n, m]``: what the partly used GPUs of node ``n`` that hold
    only fixed tasks leave for share shape ``m`` (sum of ``left // milli``);
    ``task_slots[t, m]``: what the GPU of a movable share ``t`` alone on its
    GPU leaves for share shape ``m`` (``(1000 - share) // milli``), wherever
    ``t`` ends (it holds a GPU of its own). Free GPUs and CPUs come from the
    index's counts, so the slots of a placement are those of X9.
    """

    frequencies: np.ndarray  # shape -> f_m (sums to 1)
    weights: np.ndarray  # shape -> integer weight round(f_m * WEIGHT_SCALE), at least 1
    kind: np.ndarray  # shape -> CPU_ONLY, WHOLE or SHARE
    gpus: np.ndarray  # shape -> GPUs asked (whole shapes)
    cpus: np.ndarray  # shape -> milli-CPUs asked (0: no CPU limit)
    per_gpu: np.ndarray  # shape -> copies on one free GPU (share shapes; else 0)
    milli: np.ndarray  # shape -> thousandths of each GPU asked (at least 1)
    admit: np.ndarray  # node x shape -> may use the node
    fixed_slots: np.ndarray  # node x shape
    task_slots: np.ndarray  # task x shape
    labels: tuple[str, ...]  # shape -> description

    @property
    def num_shapes(self) -> int:
        return int(self.weights.size)

    @classmethod
    def build(cls, cluster: Cluster, workload: Workload) -> SlotModel:
        check_workload(workload)
        index = cluster.index
        shapes = workload.shapes
        frequencies = np.array(workload.frequencies, dtype=float)
        weights = np.maximum(1, np.rint(frequencies * WEIGHT_SCALE)).astype(np.int64)
        kind = np.array(
            [CPU_ONLY if s.gpus == 0 else SHARE if s.is_share else WHOLE for s in shapes],
            dtype=np.int64,
        )
        milli = np.array([max(1, s.gpu_milli) for s in shapes], dtype=np.int64)
        per_gpu = np.where(kind == SHARE, MILLI // milli, 0).astype(np.int64)
        fixed = np.zeros((index.num_nodes, len(shapes)), dtype=np.int64)
        task_slots = np.zeros((index.num_tasks, len(shapes)), dtype=np.int64)
        share_cols = np.flatnonzero(kind == SHARE)
        for node_id, devices in index.devices.items():
            node = index.node_pos[node_id]
            for gpu, left in _partly_used(devices):
                holders = [t for t, (held, _) in devices.holders.items() if gpu in held]
                task = index.task_pos[holders[0]] if len(holders) == 1 else -1
                if task >= 0 and not index.task_locked[task]:
                    task_slots[task, share_cols] = left // milli[share_cols]
                else:
                    fixed[node, share_cols] += left // milli[share_cols]
        return cls(
            frequencies=frequencies,
            weights=weights,
            kind=kind,
            gpus=np.array([max(1, s.gpus) for s in shapes], dtype=np.int64),
            cpus=np.array([s.cpu_milli for s in shapes], dtype=np.int64),
            per_gpu=per_gpu,
            milli=milli,
            admit=shape_admits(cluster, workload).T.copy(),
            fixed_slots=fixed,
            task_slots=task_slots,
            labels=tuple(str(s) for s in shapes),
        )

    def take(self, nodes: np.ndarray, tasks: np.ndarray) -> SlotModel:
        """The model restricted to ``nodes`` and ``tasks`` (in that order: local positions)."""
        return replace(
            self,
            admit=self.admit[nodes],
            fixed_slots=self.fixed_slots[nodes],
            task_slots=self.task_slots[tasks],
        )

    def slots(
        self,
        free_gpus: np.ndarray,
        free_cpus: np.ndarray,
        partial: np.ndarray,
        nodes: np.ndarray | None = None,
    ) -> np.ndarray:
        """Slots (nodes x shapes) of nodes with these free GPUs, milli-CPUs and partial-GPU
        slots (``fixed_slots`` plus the ``task_slots`` of the movable shares on them); with
        ``nodes``, the arguments are those nodes' rows (positions of ``admit``)."""
        admit = self.admit if nodes is None else self.admit[nodes]
        gpu_times, gpu_div, gpu_add, cpu_times, cpu_div, cpu_add = self._factors
        gpus = np.maximum(free_gpus, 0)[:, None]
        cpus = np.maximum(free_cpus, 0)[:, None]
        # whole: gpus // g; share: gpus * per_gpu + partial; CPU-only: no GPU limit (gpu_add);
        # in place: this runs once per candidate target, so temporaries cost
        by_gpu = gpus * gpu_times
        by_gpu //= gpu_div
        by_gpu = by_gpu + partial
        by_gpu += gpu_add
        by_cpu = cpus * cpu_times
        by_cpu //= cpu_div
        by_cpu += cpu_add  # a shape asking no CPU: no limit
        np.minimum(by_gpu, by_cpu, out=by_gpu)
        by_gpu *= admit
        out: np.ndarray = by_gpu
        return out

    @cached_property
    def _factors(self) -> tuple[np.ndarray, ...]:
        """Per shape, ``slots = min((gpus * a) // b + partial + c, (cpus * d) // e + f)``."""
        big = np.int64(2**40)
        whole, share = self.kind == WHOLE, self.kind == SHARE
        gpu_times = np.where(whole, 1, np.where(share, self.per_gpu, 0)).astype(np.int64)
        gpu_div = np.where(whole, self.gpus, 1).astype(np.int64)
        gpu_add = np.where(whole | share, 0, big).astype(np.int64)
        asks = self.cpus > 0
        cpu_times = asks.astype(np.int64)
        cpu_div = np.where(asks, self.cpus, 1).astype(np.int64)
        cpu_add = np.where(asks, 0, big).astype(np.int64)
        return gpu_times, gpu_div, gpu_add, cpu_times, cpu_div, cpu_add

    def node_values(
        self,
        free_gpus: np.ndarray,
        free_cpus: np.ndarray,
        partial: np.ndarray,
        nodes: np.ndarray | None = None,
    ) -> np.ndarray:
        """Integer-weighted slots of each node (see :meth:`slots`): in C where
        ``gpuopt.defrag._cslots`` is built (the same integers in one pass; IPC asks this
        tens of thousands of times a call), else ``slots(...) @ weights``."""
        kernel = self._kernel
        if kernel is not None:
            found: np.ndarray = kernel.node_values(free_gpus, free_cpus, partial, nodes)
            return found
        values: np.ndarray = self.slots(free_gpus, free_cpus, partial, nodes) @ self.weights
        return values

    def moved_values(
        self,
        free_gpus: np.ndarray,
        free_cpus: np.ndarray,
        partial: np.ndarray,
        nodes: np.ndarray,
        gpus: int,
        cpus: int,
        task: int,
        *,
        first_leaves: bool = False,
    ) -> np.ndarray:
        """:meth:`node_values` of ``nodes`` (positions in the full arrays given) once task
        ``task`` (``gpus`` GPUs, ``cpus`` milli-CPUs and its ``task_slots``) is added to
        each; with ``first_leaves`` the first of them (its node now) loses it instead. In C
        where ``gpuopt.defrag._cslots`` is built (no arrays gathered), else numpy."""
        kernel = self._kernel
        if kernel is not None:
            found: np.ndarray = kernel.moved_values(
                free_gpus,
                free_cpus,
                partial,
                nodes,
                gpus,
                cpus,
                self.task_slots[task],
                first_leaves,
            )
            return found
        sign = np.ones(nodes.size, dtype=np.int64)
        if first_leaves:
            sign[0] = -1
        return self.node_values(
            free_gpus[nodes] - sign * gpus,
            free_cpus[nodes] - sign * cpus,
            partial[nodes] + sign[:, None] * self.task_slots[task],
            nodes,
        )

    def __getstate__(self) -> dict[str, Any]:
        """What pickles (a shard sent to a worker process): the fields, without the C
        kernel (:attr:`_kernel`, built again where it is used)."""
        state = dict(self.__dict__)
        state.pop("_kernel", None)
        return state

    @cached_property
    def _kernel(self) -> Any:
        """This model's factors, admissions and weights in C (``_cslots.Slots``), or None
        without the compiled module (or with ``GPUOPT_PURE_PYTHON`` set)."""
        module = compiled("gpuopt.defrag._cslots")
        if module is None:
            return None
        return module.Slots(self._factors, self.admit, self.weights)

    def value(self, free_gpus: np.ndarray, free_cpus: np.ndarray, partial: np.ndarray) -> int:
        """Integer-weighted slots ``sum weights * slots`` of these nodes."""
        return int((self.slots(free_gpus, free_cpus, partial) @ self.weights).sum())

    def partial_of(self, task_node: np.ndarray, num_nodes: int) -> np.ndarray:
        """``fixed_slots`` plus the movable shares' ``task_slots``, per node of ``task_node``."""
        partial: np.ndarray = self.fixed_slots.copy()
        if self.task_slots.size:
            np.add.at(partial, task_node, self.task_slots)
        return partial

    def placement_value(self, cluster: Cluster, task_node: np.ndarray) -> int:
        """Integer-weighted slots of the whole snapshot with tasks on ``task_node`` (X9's count)."""
        index = cluster.index
        used_gpus = np.bincount(task_node, weights=index.task_gpus, minlength=index.num_nodes)
        used_cpus = np.zeros(index.num_nodes, dtype=np.int64)
        np.add.at(used_cpus, task_node, index.task_cpus)
        return self.value(
            index.node_gpus - used_gpus.astype(np.int64),
            index.node_cpus - used_cpus,
            self.partial_of(task_node, index.num_nodes),
        )

    def weighted(self, integer_value: float) -> float:
        """An integer-weighted slot count in weighted slots (divided by :data:`WEIGHT_SCALE`)."""
        return float(integer_value) / WEIGHT_SCALE

    def rounding_slack(self, most_slots: np.ndarray) -> float:
        """Most that the rounded weights can hide, in integer-weight units, given at most
        ``most_slots[m]`` slots of each shape: ``sum |f_m * SCALE - w_m| * most_slots[m]``."""
        error = np.abs(self.frequencies * WEIGHT_SCALE - self.weights)
        error[error < 1e-9] = 0.0
        return float(error @ most_slots)


def capacity_slots_bound(cluster: Cluster, slots: SlotModel) -> float:
    """A proven upper bound on the weighted slots (X9's count) of any plan, from capacity.

    Per shape: at most its slots on every node with all movable tasks gone,
    and at most what the cluster's free GPUs and CPUs hold in sum (every task
    ends somewhere, so the free GPUs and CPUs of all nodes sum to a constant).
    """
    index = cluster.index
    locked = index.task_locked
    gpus_locked = np.bincount(
        index.task_node[locked], weights=index.task_gpus[locked], minlength=index.num_nodes
    ).astype(np.int64)
    cpus_locked = np.zeros(index.num_nodes, dtype=np.int64)
    np.add.at(cpus_locked, index.task_node[locked], index.task_cpus[locked])
    # a movable share takes a free GPU and leaves less than it took: gone is the most
    alone = slots.slots(
        index.node_gpus - gpus_locked, index.node_cpus - cpus_locked, slots.fixed_slots
    ).sum(axis=0)
    free_gpus = max(0, int(index.node_gpus.sum() - index.task_gpus.sum()))
    free_cpus = max(0, int(index.node_cpus.sum() - index.task_cpus.sum()))
    most = alone.astype(float)
    for shape in range(slots.num_shapes):
        by_cpu = free_cpus // int(slots.cpus[shape]) if slots.cpus[shape] > 0 else None
        if slots.kind[shape] == WHOLE:
            total = free_gpus // int(slots.gpus[shape])
        elif slots.kind[shape] == SHARE:
            total = free_gpus * int(slots.per_gpu[shape]) + int(
                slots.fixed_slots[:, shape].sum() + slots.task_slots[:, shape].sum()
            )
        else:
            total = by_cpu if by_cpu is not None else int(most[shape])
        if by_cpu is not None:
            total = min(total, by_cpu)
        most[shape] = min(most[shape], total)
    return round(float(slots.frequencies @ most), 6)


def _partly_used(devices: Devices) -> list[tuple[int, int]]:
    """The GPUs of a node that hold a share and have room left: (index, thousandths left)."""
    return [(gpu, left) for gpu, left in enumerate(devices.left) if 0 < left < MILLI]


def layout_slots(
    cluster: Cluster,
    workload: Workload,
    admits: np.ndarray,
    devices: dict[str, Devices] | None,
    free_gpus: dict[str, int],
    free_cpus: dict[str, int],
) -> np.ndarray:
    """Slots (shapes x nodes) from a laid-out state: each node's GPUs (``devices``, or only
    ``free_gpus`` on nodes without shares) and free milli-CPUs (the checker's count)."""
    out = np.zeros((len(workload), len(cluster.nodes)), dtype=np.int64)
    # per shape once: (row, cpu_milli, gpus, share milli or 0, slots of one free GPU)
    shapes = [
        (
            row,
            shape.cpu_milli,
            shape.gpus,
            shape.gpu_milli if shape.is_share else 0,
            MILLI // shape.gpu_milli if shape.is_share else 0,
        )
        for row, shape in enumerate(workload.shapes)
    ]
    for col, node in enumerate(cluster.nodes):
        rows = [item for item in shapes if admits[item[0], col]]
        if not rows:
            continue
        cpus = max(0, free_cpus[node.id])
        gpus_free = free_gpus[node.id]
        node_devices = devices.get(node.id) if devices is not None else None
        for row, cpu_milli, gpus, milli, per_gpu in rows:
            by_cpu = cpus // cpu_milli if cpu_milli else None
            if gpus == 0:
                count = by_cpu if by_cpu is not None else 0
            elif milli:
                if node_devices is not None:
                    count = sum(left // milli for left in node_devices.left)
                    count -= per_gpu * (node_devices.free - gpus_free)
                else:
                    count = per_gpu * max(0, gpus_free)
                count = count if by_cpu is None else min(count, by_cpu)
            else:
                count = max(0, gpus_free) // gpus
                count = count if by_cpu is None else min(count, by_cpu)
            out[row, col] = max(0, count)
    return out


__all__ = [
    "WEIGHT_SCALE",
    "SlotModel",
    "capacity_slots_bound",
    "check_workload",
    "layout_slots",
    "pending_workload",
    "resolve",
]
