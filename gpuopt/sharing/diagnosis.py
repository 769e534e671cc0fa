"""Workload-aware fragmentation of a cluster snapshot (``gpuopt diagnose --workload``).

:func:`workload_fragmentation` lays a :class:`~gpuopt.cluster.model.Cluster`'s
tasks out on its GPUs (rule C7 of ``models/cluster.md``) and measures FGD's
fragmentation (rule F1 of ``models/sharing.md``) for a target workload: for
each node and shape, all of the node's idle GPU when the shape cannot run
there, else the idle share of the GPUs too small for it; weighted by the
shapes' frequencies and summed. "Cannot run" is the real rule set: the GPUs
(count, share), CPU, memory (when the workload states it), the GPU model, and
the Kubernetes rules K1-K3 (a closed, cordoned or tainted node runs none).

>>> from gpuopt.cluster.model import Cluster
>>> from gpuopt.cluster.workload import Shape, Workload
>>> cluster = Cluster.model_validate({
...     "nodes": [{"id": "a", "gpus": 2, "cpus": 16}, {"id": "b", "gpus": 1, "cpus": 16}],
...     "tasks": [{"id": "s", "node": "a", "gpus": 1, "gpu_milli": 700, "cpus": 2}]})
>>> report = workload_fragmentation(cluster, Workload((Shape(4000, 500, 1),), (1.0,)))
>>> report.fragmented_gpus, report.idle_gpus, round(report.share_of_idle, 3)
(0.3, 2.3, 0.13)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from gpuopt.cluster.workload import MILLI, Workload
from gpuopt.sharing.fragmentation import NodeRows, TargetArrays, fragment_matrix
from gpuopt.sharing.state import ShareState


@dataclass(frozen=True)
class ShapeFragment:
    """One target shape: its frequency and the GPUs it cannot use (unweighted, over nodes)."""

    shape: str
    frequency: float
    fragment_gpus: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WorkloadFragmentation:
    """A snapshot's fragmentation for a workload, in GPUs and as a share of its idle GPU."""

    fragmented_gpus: float
    idle_gpus: float
    nodes: int
    shapes: list[ShapeFragment]

    @property
    def share_of_idle(self) -> float:
        """Fragmented share of the idle GPU (0 when nothing is idle)."""
        return self.fragmented_gpus / self.idle_gpus if self.idle_gpus else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "fragmented_gpus": self.fragmented_gpus,
            "idle_gpus": self.idle_gpus,
            "share_of_idle": self.share_of_idle,
            "nodes": self.nodes,
            "shapes": [shape.to_dict() for shape in self.shapes],
        }


def workload_fragmentation(cluster: Any, workload: Workload) -> WorkloadFragmentation:
    """FGD's fragmentation of ``cluster`` for ``workload`` (rule F1), with the K1-K3 rules."""
    from gpuopt.cluster.admits import shape_admits

    state = ShareState.from_cluster(cluster)
    scaled = tuple(memory * state.memory_scale for memory in workload.memory_mib)
    target = TargetArrays.build(
        Workload(workload.shapes, workload.frequencies, scaled), state.model_names
    )
    matrix = fragment_matrix(target, NodeRows.of_state(state))
    idle = np.asarray(state.total_left, dtype=np.int64)
    admits = shape_admits(cluster, workload).T  # nodes x shapes
    matrix = np.where(admits, matrix, idle[:, None])
    weighted = matrix @ target.frequency
    shapes = [
        ShapeFragment(str(shape), round(float(f), 6), round(int(matrix[:, t].sum()) / MILLI, 3))
        for t, (shape, f) in enumerate(zip(workload.shapes, workload.frequencies, strict=True))
    ]
    return WorkloadFragmentation(
        fragmented_gpus=round(float(weighted.sum()) / MILLI, 3),
        idle_gpus=round(int(idle.sum()) / MILLI, 3),
        nodes=state.node_count,
        shapes=shapes,
    )


__all__ = ["ShapeFragment", "WorkloadFragmentation", "workload_fragmentation"]
