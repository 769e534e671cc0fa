"""The defragmentation problem is the cluster snapshot itself (:class:`gpuopt.cluster.Cluster`).

This module keeps the names under which defragmentation code and older user
code know it.
"""

from gpuopt.cluster.model import (
    MAX_AMOUNT,
    MAX_NODE_GPUS,
    MAX_NODES,
    MAX_TASKS,
    SCALE,
    DefragIndex,
    DefragOptions,
    DefragProblem,
    Node,
    Task,
    load_snapshot,
    parse_snapshot,
    scaled,
    selector_matches,
)

__all__ = [
    "MAX_AMOUNT",
    "MAX_NODES",
    "MAX_NODE_GPUS",
    "MAX_TASKS",
    "SCALE",
    "DefragIndex",
    "DefragOptions",
    "DefragProblem",
    "Node",
    "Task",
    "load_snapshot",
    "parse_snapshot",
    "scaled",
    "selector_matches",
]
