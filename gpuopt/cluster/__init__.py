"""The one cluster model every cluster-side question reads (see :mod:`gpuopt.cluster.model`).

A :class:`Cluster` snapshot lists nodes, the tasks on them, the pods and gangs
waiting, and options; defragmentation solves it as it is, and placement,
preemption and gangs build their problem from it (``from_cluster``) with a
:class:`Request` shape. Beside it: ``items.py`` and ``fields.py`` (the items
and their field rules), ``request.py`` (request shapes), ``shares.py`` (GPU
shares), ``kube.py`` / ``rules.py`` (Kubernetes placement facts and rules
K1-K7), ``interconnect.py`` (how a node's GPUs are joined), ``devices.py``,
``cel.py`` and ``quantity.py`` (Dynamic Resource Allocation devices, claims and
their CEL selectors, rules R1-R9), ``devicerules.py``, ``devicefit.py`` and
``devicecheck.py`` (what one device gives one request, whether a pod's claims fit a
node's devices, DF1-DF8, and the checker), ``servable.py`` (E9's measure), each
imported from its module; the formal model is ``models/cluster.md``.
"""

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
