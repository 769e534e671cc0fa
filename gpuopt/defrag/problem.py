"""The defragmentation problem is the cluster snapshot itself (:class:`gpuopt.cluster.Cluster`).

This module keeps the names under which defragmentation code and older user
code know it, and the check every method makes of the snapshot's options.
"""

from gpuopt.cluster.model import (
    MAX_AMOUNT,
    MAX_NODE_GPUS,
    MAX_NODES,
    MAX_TASKS,
    SCALE,
    Cluster,
    ClusterIndex,
    ClusterOptions,
    Node,
    Task,
    load_cluster,
    old_names,
    parse_cluster,
    scaled,
    selector_matches,
)
from gpuopt.errors import ProblemError


def check_options(problem: Cluster) -> None:
    """Refuse options no node of the snapshot can satisfy, in one sentence naming the option.

    ``min_node_gpus`` above every node's GPUs leaves no node that may be
    emptied (nodes below it are never emptied, ``models/defrag.md`` D8).

    >>> check_options(Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 64}],
    ...     options={"min_node_gpus": 16}))
    Traceback (most recent call last):
    ...
    gpuopt.errors.ProblemError: min_node_gpus 16 leaves no node to empty: the largest has 8 GPUs.
    """
    wanted = problem.options.min_node_gpus
    largest = int(problem.index.node_gpus.max()) if problem.nodes else 0
    if wanted > largest:
        raise ProblemError(
            f"min_node_gpus {wanted} leaves no node to empty: the largest has {largest} GPUs."
        )


#: Old names of the cluster model, kept one release with a ``DeprecationWarning``.
__getattr__ = old_names(__name__)


__all__ = [
    "MAX_AMOUNT",
    "MAX_NODES",
    "MAX_NODE_GPUS",
    "MAX_TASKS",
    "SCALE",
    "Cluster",
    "ClusterIndex",
    "ClusterOptions",
    "Node",
    "Task",
    "check_options",
    "load_cluster",
    "parse_cluster",
    "scaled",
    "selector_matches",
]
