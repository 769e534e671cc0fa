"""The pod of a request as the extender's rules read it (``models/extender.md``, E1).

:func:`read_pod` reads a ``v1.Pod`` with the kubectl reader (strict) and the
two annotations only the extender reads: the GPU bandwidth a pod's GPU set
must reach (N3) and the topology level its gang prefers (E5).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuopt.cluster.model import Cluster, Pending, priority_value
from gpuopt.errors import ProblemError
from gpuopt.extender.wire import BadRequest

#: Pod annotation: the lowest bandwidth (GB/s) every pair of its GPUs must reach (N3).
BANDWIDTH_ANNOTATION = "gpuopt.io/min-gpu-bandwidth"
#: Pod annotation: the topology level its gang prefers to share (a level of the snapshot).
LEVEL_ANNOTATION = "gpuopt.io/preferred-level"


@dataclass(frozen=True)
class Ask:
    """The pod being scheduled, as the rules read it."""

    pending: Pending
    priority: int
    min_bandwidth: float
    level: str | None
    #: the reader's report keys for fields of this pod that are not modelled (counted)
    ignored: tuple[str, ...]

    @property
    def gpus(self) -> int:
        return self.pending.gpus

    @property
    def milli(self) -> int | None:
        return self.pending.gpu_milli


def read_pod(
    pod: Mapping[str, Any], cluster: Cluster | None, reader_options: Mapping[str, Any]
) -> Ask:
    """The pod of a request as the cluster model reads it (the kubectl reader, strict)."""
    from gpuopt.readers.kubectl import read_kubernetes

    item = dict(pod)
    item.setdefault("kind", "Pod")
    metadata = item.get("metadata")
    if not isinstance(metadata, dict):
        raise BadRequest("Pod.metadata is missing.", reason="field")
    if not metadata.get("name"):
        raise BadRequest("Pod.metadata.name is missing.", reason="field")
    spec = item.get("spec")
    if isinstance(spec, dict) and spec.get("nodeName"):
        spec = {key: value for key, value in spec.items() if key != "nodeName"}
        item["spec"] = spec  # a bound pod (full-mode victims): read its request alone
        item["status"] = {**(item.get("status") or {}), "phase": "Pending"}
    wanted = ("gpu_resources", "topology_labels", "critical_priority", "hp_priority")
    options = {key: value for key, value in reader_options.items() if key in wanted}
    try:
        read, report = read_kubernetes(item, strict=True, **options)
    except ProblemError as exc:
        raise BadRequest(f"Pod: {exc}", reason="pod") from None
    if not read.pending:
        skipped = ", ".join(report.reasons) or "not read"
        raise BadRequest(
            f"Pod {metadata.get('name')!r} is not a pod waiting to be scheduled ({skipped}).",
            reason="pod",
        )
    pending = read.pending[0]
    annotations = metadata.get("annotations") or {}
    bandwidth = 0.0
    raw = annotations.get(BANDWIDTH_ANNOTATION) if isinstance(annotations, dict) else None
    if raw is not None:
        try:
            bandwidth = float(raw)
        except (TypeError, ValueError):
            bandwidth = -1.0
        if not (math.isfinite(bandwidth) and bandwidth >= 0):
            raise BadRequest(
                f"Pod annotation {BANDWIDTH_ANNOTATION} must be a number of GB/s (got {raw!r}).",
                reason="pod",
            )
    level = annotations.get(LEVEL_ANNOTATION) if isinstance(annotations, dict) else None
    hp = cluster.hp_priority if cluster is not None else read.hp_priority
    ignored = tuple(sorted(key for key, count in report.unmodelled.items() if count))
    return Ask(
        pending=pending,
        priority=priority_value(pending.priority, hp),
        min_bandwidth=bandwidth,
        level=level if isinstance(level, str) and level else None,
        ignored=ignored,
    )


__all__ = ["BANDWIDTH_ANNOTATION", "LEVEL_ANNOTATION", "Ask", "read_pod"]
