"""The one cluster model every cluster-side question reads (see :mod:`gpuopt.cluster.model`)."""

from gpuopt.cluster.model import (
    Cluster,
    ClusterOptions,
    Gang,
    Node,
    Pending,
    Task,
    load_cluster,
    parse_cluster,
)
from gpuopt.cluster.request import Request, parse_request

__all__ = [
    "Cluster",
    "ClusterOptions",
    "Gang",
    "Node",
    "Pending",
    "Request",
    "Task",
    "load_cluster",
    "parse_cluster",
    "parse_request",
]
