"""gpuopt in a live cluster: state watched from the API server, and a controller that acts.

``models/live.md`` states the rules (L1-L9) the modules cite:
:mod:`~gpuopt.live.api` is the Kubernetes API as these parts use it (L1),
:mod:`~gpuopt.live.watch` lists and watches it (L2-L3),
:mod:`~gpuopt.live.cluster` keeps the cluster model current from what it sees
and assumes what the extender chose (L4-L6),
:mod:`~gpuopt.live.controller` acts on it (L7-L9), and
:mod:`~gpuopt.live.fake` is an in-process API server for the tests. Needs the
extra ``live`` (``pip install 'gpuopt[live]'``).
"""

from gpuopt.live.api import (
    Api,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    KubeApi,
    NotFound,
    Resource,
    TooManyRequests,
)
from gpuopt.live.cluster import LiveCluster
from gpuopt.live.controller import Controller, ControllerOptions, ListedCluster
from gpuopt.live.fake import FakeApiServer
from gpuopt.live.lease import LeaderLease
from gpuopt.live.watch import Sink, Store, Watcher

__all__ = [
    "Api",
    "ApiError",
    "Conflict",
    "Controller",
    "ControllerOptions",
    "FakeApiServer",
    "Forbidden",
    "Gone",
    "KubeApi",
    "LeaderLease",
    "ListedCluster",
    "LiveCluster",
    "NotFound",
    "Resource",
    "Sink",
    "Store",
    "TooManyRequests",
    "Watcher",
]
