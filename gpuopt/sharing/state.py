"""A cluster's free resources per GPU, for pods that share GPUs (numpy arrays, kept incrementally).

:class:`ShareState` is the hot-loop view of a cluster for the FGD-style
policies (:mod:`gpuopt.sharing.policies`) and the replay
(:mod:`gpuopt.simulate.pods`). Per node it holds the CPU (milli-cores) and
memory (MiB) left, the GPU model and ``left``: one row of
:data:`~gpuopt.cluster.workload.MAX_GPUS` integers, the thousandths of each GPU
still free (``-1`` = the node has no such GPU, else 0 to 1000).

Sharing rules (as the FGD simulator's ``Open-Gpu-Share`` plugin):

- a share pod (one GPU, ``gpu_milli`` < 1000) takes ``gpu_milli`` of one GPU;
  several may sit on one GPU while their shares sum to at most 1000;
- a pod of ``k`` whole GPUs needs ``k`` fully free GPUs (``left == 1000``): a
  GPU holding any share is not free for it;
- a CPU-only pod takes CPU and memory only.

Derived arrays are updated on every :meth:`~ShareState.place` and
:meth:`~ShareState.remove`, so that a policy tests feasibility on all nodes
with a few vectorised comparisons: the total left per node, the number of
fully free GPUs, the largest share left, the counts of the pods' GPU tags (for
GpuClustering) and an interned **state id** per node: nodes with the same GPU
model, CPU left, memory left and multiset of GPU shares left have the same
id, so a score that depends on nothing else (FGD's) is computed once per id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuopt.cluster.workload import MAX_GPUS, MILLI, Shape
from gpuopt.errors import ProblemError

#: GpuClustering's pod tags: column 0 = a share of one GPU, column k = k whole GPUs.
TAG_COLUMNS = MAX_GPUS + 1
#: Memory of a node or task that states none (never binding).
UNLIMITED = 2**62


@dataclass(frozen=True, slots=True)
class Pod:
    """An arriving pod: its :class:`~gpuopt.cluster.workload.Shape` and memory (MiB)."""

    shape: Shape
    memory_mib: int = 0

    @property
    def tag(self) -> int:
        """GpuClustering's tag column (0 share, k for k whole GPUs), -1 for CPU-only."""
        if self.shape.gpus == 0:
            return -1
        return 0 if self.shape.is_share else self.shape.gpus


#: Where a pod goes: (node position, GPU indices on that node; empty for CPU-only pods).
Placement = tuple[int, tuple[int, ...]]


class StateTable:
    """Interned node states: id -> (model code, CPU left, memory left, GPU shares left sorted
    descending).

    Append-only and shared by copies of a :class:`ShareState`, so that memos
    keyed by state id stay valid across copies. Memory is part of the state
    because a memory-aware target workload (:attr:`Workload.memory_mib
    <gpuopt.cluster.workload.Workload.memory_mib>`) reads it.
    """

    def __init__(self) -> None:
        self.ids: dict[tuple[int, ...], int] = {}
        self.left = np.full((64, MAX_GPUS), -1, dtype=np.int64)
        self.cpu = np.zeros(64, dtype=np.int64)
        self.mem = np.zeros(64, dtype=np.int64)
        self.model = np.zeros(64, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.ids)

    def intern(self, model: int, cpu: int, left: np.ndarray, mem: int = 0) -> int:
        """The id of the state (``left``: one node's row, any order)."""
        ordered = sorted(left.tolist(), reverse=True)
        key = (model, cpu, mem, *ordered)
        found = self.ids.get(key)
        if found is not None:
            return found
        state_id = len(self.ids)
        if state_id == len(self.cpu):
            self.left = np.concatenate([self.left, np.full_like(self.left, -1)])
            self.cpu = np.concatenate([self.cpu, np.zeros_like(self.cpu)])
            self.mem = np.concatenate([self.mem, np.zeros_like(self.mem)])
            self.model = np.concatenate([self.model, np.zeros_like(self.model)])
        self.ids[key] = state_id
        self.left[state_id] = ordered
        self.cpu[state_id] = cpu
        self.mem[state_id] = mem
        self.model[state_id] = model
        return state_id


class ShareState:
    """Free CPU, memory and GPU shares of every node (see the module docstring).

    Build it with :meth:`from_nodes`, :meth:`from_node_dicts` (an openb node CSV:
    :func:`gpuopt.readers.openb.share_state`) or :meth:`from_cluster`.

    >>> state = ShareState.from_nodes(["a", "b"], gpus=[2, 1], cpu_milli=[8000, 4000],
    ...                               memory_mib=[1000, 1000], models=["T4", "P100"])
    >>> state.place(Pod(Shape(1000, 300, 1), 10), (0, (1,)))
    >>> state.left[0].tolist()[:2], int(state.max_left[0]), int(state.free_count[0])
    ([1000, 700], 1000, 1)
    """

    def __init__(
        self,
        node_ids: Sequence[str],
        model_names: Sequence[str],
        model_code: np.ndarray,
        cpu_capacity: np.ndarray,
        memory_capacity: np.ndarray,
        gpus: np.ndarray,
    ) -> None:
        n = len(node_ids)
        self.node_ids = list(node_ids)
        self.node_pos = {node_id: i for i, node_id in enumerate(self.node_ids)}
        if len(self.node_pos) != n:
            raise ProblemError("share state: two nodes have the same id.")
        #: model names; code 0 is "" (no model stated)
        self.model_names = list(model_names)
        self.model_code = np.asarray(model_code, dtype=np.int64)
        self.cpu_capacity = np.asarray(cpu_capacity, dtype=np.int64)
        self.memory_capacity = np.asarray(memory_capacity, dtype=np.int64)
        self.gpus = np.asarray(gpus, dtype=np.int64)
        if self.gpus.size and (self.gpus.min() < 0 or self.gpus.max() > MAX_GPUS):
            raise ProblemError(
                f"share state: a node has more than {MAX_GPUS} GPUs or fewer than 0."
            )
        self.cpu_left = self.cpu_capacity.copy()
        self.mem_left = self.memory_capacity.copy()
        slots = np.arange(MAX_GPUS)[None, :]
        self.left = np.where(slots < self.gpus[:, None], MILLI, -1).astype(np.int64)
        self.total_left = self.gpus * MILLI
        self.free_count = self.gpus.copy()
        self.max_left = np.where(self.gpus > 0, MILLI, -1).astype(np.int64)
        self.tags = np.zeros((n, TAG_COLUMNS), dtype=np.int64)
        self.tag_kinds = np.zeros(n, dtype=np.int64)  # distinct tags present
        self.table = StateTable()
        self.state_id = np.array(
            [
                self.table.intern(
                    int(self.model_code[i]),
                    int(self.cpu_left[i]),
                    self.left[i],
                    int(self.mem_left[i]),
                )
                for i in range(n)
            ],
            dtype=np.int64,
        )
        self.gpu_capacity_milli = int(self.gpus.sum()) * MILLI
        #: Units of memory per MiB of a workload's ``memory_mib`` (1; 1000 from a snapshot,
        #: whose memory is kept in thousandths of its unit).
        self.memory_scale = 1
        self._model_masks: dict[tuple[str, ...], np.ndarray] = {}

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_nodes(
        cls,
        node_ids: Sequence[str],
        *,
        gpus: Sequence[int],
        cpu_milli: Sequence[int],
        memory_mib: Sequence[int] | None = None,
        models: Sequence[str | None] | None = None,
    ) -> ShareState:
        """An empty cluster from per-node lists (``memory_mib`` None: unlimited)."""
        n = len(node_ids)
        for name, values in (("gpus", gpus), ("cpu_milli", cpu_milli), ("memory_mib", memory_mib)):
            if values is not None and len(values) != n:
                raise ProblemError(f"share state: {len(values)} {name} for {n} nodes.")
        names = [m or "" for m in (models or [""] * n)]
        if len(names) != n:
            raise ProblemError(f"share state: {len(names)} models for {n} nodes.")
        model_names = ["", *sorted(set(names) - {""})]
        code = {name: i for i, name in enumerate(model_names)}
        memory = [UNLIMITED] * n if memory_mib is None else list(memory_mib)
        return cls(
            node_ids,
            model_names,
            np.array([code[m] for m in names], dtype=np.int64),
            np.array(cpu_milli, dtype=np.int64),
            np.array(memory, dtype=np.int64),
            np.array(gpus, dtype=np.int64),
        )

    @classmethod
    def from_node_dicts(cls, nodes: Sequence[dict[str, Any]]) -> ShareState:
        """An empty cluster from node dicts (``id``, ``gpus``, ``cpus`` in cores, ``memory``,
        ``labels``/``gpu_model``), such as :func:`gpuopt.readers.openb.read_openb_nodes` gives."""
        return cls.from_nodes(
            [n["id"] for n in nodes],
            gpus=[int(n["gpus"]) for n in nodes],
            cpu_milli=[round(float(n["cpus"]) * 1000) for n in nodes],
            memory_mib=[UNLIMITED if n.get("memory") is None else int(n["memory"]) for n in nodes],
            models=[n.get("gpu_model") or n.get("labels", {}).get("gpu_model") for n in nodes],
        )

    @classmethod
    def from_cluster(cls, cluster: Any) -> ShareState:
        """The state of a :class:`gpuopt.cluster.model.Cluster`: its nodes with its tasks placed.

        Node: GPUs, CPUs (cores -> milli), memory, model = ``gpu_model`` or the
        label ``gpu_model``. Task: a task with ``gpu_milli`` takes that share of
        one GPU (its ``gpu_indices`` if given, else the GPU with the smallest
        share left that fits, lowest index on ties); other tasks take whole GPUs
        (their ``gpu_indices``, else the lowest-index free ones), in task order.
        A task that does not fit raises :class:`~gpuopt.errors.ProblemError`.
        """
        nodes = [
            {
                "id": node.id,
                "gpus": node.gpus,
                "cpus": node.cpus,
                # memory in thousandths of the snapshot's unit, exact like its checks
                "memory": None if node.memory is None else round(float(node.memory) * 1000),
                "gpu_model": node.gpu_model or node.labels.get("gpu_model"),
            }
            for node in cluster.nodes
        ]
        state = cls.from_node_dicts(nodes)
        state.memory_scale = 1000
        locked = {node.id for node in cluster.nodes if getattr(node, "locked", False)}
        index = getattr(cluster, "index", None)
        layouts = getattr(index, "devices", None) or {}
        # shares named by index first, so that the ones placed best-fit see them
        tasks = sorted(cluster.tasks, key=lambda t: getattr(t, "gpu_indices", None) is None)
        for task in tasks:
            node = state.node_pos[task.node]
            milli = getattr(task, "gpu_milli", None)
            gpus = int(task.gpus)
            shape = Shape(
                cpu_milli=round(float(task.cpus) * 1000),
                gpu_milli=0 if gpus == 0 else (int(milli) if milli else MILLI),
                gpus=gpus,
            )
            memory = 0 if task.memory is None else round(float(task.memory) * 1000)
            pod = Pod(shape, memory)
            indices = getattr(task, "gpu_indices", None)
            laid_out = layouts.get(task.node)
            if indices is None and laid_out is not None and task.id in laid_out.holders:
                indices = list(laid_out.holders[task.id][0])  # C7: as the cluster lays it out
            devices = tuple(indices) if indices is not None else state.default_devices(node, shape)
            problem = state.why_not(node, pod, devices)
            if problem and task.node in locked:
                continue  # a locked node may hold more than it has (C3); nothing goes there
            if problem:
                raise ProblemError(f"task {task.id!r} on node {task.node!r}: {problem}.")
            state.place(pod, (node, devices))
        return state

    # ------------------------------------------------------------------ queries
    @property
    def node_count(self) -> int:
        return len(self.node_ids)

    @property
    def allocated_milli(self) -> int:
        """GPU thousandths held by pods, over all nodes."""
        return self.gpu_capacity_milli - int(self.total_left.sum())

    def model_mask(self, models: tuple[str, ...]) -> np.ndarray:
        """Nodes whose GPU model is one of ``models`` (all nodes when empty); cached."""
        if not models:
            return np.ones(self.node_count, dtype=bool)
        mask = self._model_masks.get(models)
        if mask is None:
            codes = [i for i, name in enumerate(self.model_names) if name and name in models]
            mask = self._model_masks[models] = np.isin(self.model_code, codes)
        return mask

    def feasible(self, pod: Pod) -> np.ndarray:
        """Boolean mask of the nodes ``pod`` fits on now (CPU, memory, model, GPUs)."""
        shape = pod.shape
        fits = (self.cpu_left >= shape.cpu_milli) & (self.mem_left >= pod.memory_mib)
        if shape.gpus:
            if shape.models:
                fits &= self.model_mask(shape.models)
            if shape.gpu_milli >= MILLI:
                fits &= self.free_count >= shape.gpus
            else:
                fits &= self.max_left >= shape.gpu_milli
        return np.asarray(fits, dtype=bool)

    def default_devices(self, node: int, shape: Shape) -> tuple[int, ...]:
        """The simulator's ``best`` GPU choice: for a share, the GPU with the least share left
        that fits (lowest index on ties); for whole GPUs, the lowest-index free ones."""
        if shape.gpus == 0:
            return ()
        row = self.left[node]
        if shape.is_share:
            fitting = np.where(row >= shape.gpu_milli, row, MILLI + 1)
            best = int(np.argmin(fitting))
            return (best,) if fitting[best] <= MILLI else ()
        return tuple(int(g) for g in np.flatnonzero(row == MILLI)[: shape.gpus])

    def why_not(self, node: int, pod: Pod, devices: tuple[int, ...]) -> str | None:
        """Why ``pod`` cannot go on (``node``, ``devices``), or None when it can."""
        shape = pod.shape
        if self.cpu_left[node] < shape.cpu_milli:
            return f"{self.cpu_left[node]} milli-CPUs left, {shape.cpu_milli} asked"
        if self.mem_left[node] < pod.memory_mib:
            return f"{self.mem_left[node]} MiB of memory left, {pod.memory_mib} asked"
        if shape.gpus == 0:
            return None if not devices else "a CPU-only pod takes no GPU"
        if shape.models and self.model_names[int(self.model_code[node])] not in shape.models:
            return (
                f"GPU model {self.model_names[int(self.model_code[node])]!r} not in {shape.spec!r}"
            )
        if len(devices) != shape.gpus or len(set(devices)) != len(devices):
            return f"{shape.gpus} distinct GPUs needed, {len(devices)} given"
        for gpu in devices:
            if not 0 <= gpu < MAX_GPUS or self.left[node, gpu] < 0:
                return f"the node has no GPU {gpu}"
            if self.left[node, gpu] < shape.gpu_milli:
                left = self.left[node, gpu]
                return f"GPU {gpu} has {left} thousandths left, {shape.gpu_milli} asked"
        return None

    # ------------------------------------------------------------------ changes
    def place(self, pod: Pod, placement: Placement) -> None:
        """Put ``pod`` on ``placement`` (not checked: see :meth:`why_not`)."""
        self._apply(pod, placement, 1)

    def remove(self, pod: Pod, placement: Placement) -> None:
        """Take ``pod`` off ``placement``, where it was placed (for defragmentation)."""
        self._apply(pod, placement, -1)

    def _apply(self, pod: Pod, placement: Placement, sign: int) -> None:
        node, devices = placement
        shape = pod.shape
        self.cpu_left[node] -= sign * shape.cpu_milli
        self.mem_left[node] -= sign * pod.memory_mib
        row = self.left[node]
        for gpu in devices:
            row[gpu] -= sign * shape.gpu_milli
        if devices:
            self.total_left[node] -= sign * shape.gpu_milli * len(devices)
            self.free_count[node] = int((row == MILLI).sum())
            self.max_left[node] = int(row.max())
            tag = pod.tag
            before = self.tags[node, tag]
            self.tags[node, tag] = before + sign
            if before == 0 and sign > 0:
                self.tag_kinds[node] += 1
            elif before == 1 and sign < 0:
                self.tag_kinds[node] -= 1
        self.state_id[node] = self.table.intern(
            int(self.model_code[node]), int(self.cpu_left[node]), row, int(self.mem_left[node])
        )

    def copy(self) -> ShareState:
        """An independent copy (the state table is shared: it only grows)."""
        other = object.__new__(ShareState)
        other.__dict__.update(self.__dict__)
        for name in (
            "cpu_left",
            "mem_left",
            "left",
            "total_left",
            "free_count",
            "max_left",
            "tags",
            "tag_kinds",
            "state_id",
        ):
            setattr(other, name, getattr(self, name).copy())
        return other


__all__ = ["TAG_COLUMNS", "UNLIMITED", "Placement", "Pod", "ShareState", "StateTable"]
