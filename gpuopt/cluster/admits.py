"""Which nodes admit each shape of a target workload (rules K1-K3 and the GPU model).

Shared by defragmentation's workload objective (``gpuopt.defrag.workload``)
and the fragmentation diagnosis (``gpuopt.sharing.diagnosis``), so it lives
with the cluster model they both read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuopt.cluster.arrival import admitted
from gpuopt.cluster.model import Cluster
from gpuopt.cluster.request import Request
from gpuopt.cluster.workload import Workload

#: The label that names a node's GPU model when ``gpu_model`` is not set (openb's).
MODEL_LABEL = "gpu_model"


def node_model(node: Any) -> str | None:
    """A node's GPU model: ``gpu_model``, else its label ``gpu_model``."""
    model: str | None = node.gpu_model or node.labels.get(MODEL_LABEL)
    return model


def shape_admits(cluster: Cluster, workload: Workload) -> np.ndarray:
    """Per shape and node (shapes x nodes): may a request of the shape go there?

    Rules K1-K3 for a request without selector, with the shape's tolerations (none
    unless the workload states them), and the shape's GPU models.
    """
    opened: dict[tuple[Any, ...], np.ndarray] = {}
    models = [node_model(node) for node in cluster.nodes]
    out = np.zeros((len(workload), len(cluster.nodes)), dtype=bool)
    for row, shape in enumerate(workload.shapes):
        tolerations = workload.tolerations_of(row)
        if tolerations not in opened:
            request = Request(gpus=1, tolerations=list(tolerations))
            opened[tolerations] = np.array(admitted(cluster, request), dtype=bool)
        open_nodes = opened[tolerations]
        if shape.models:
            allowed = set(shape.models)
            out[row] = open_nodes & np.array([m in allowed for m in models], dtype=bool)
        else:
            out[row] = open_nodes
    return out
