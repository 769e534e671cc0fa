"""The pod of a request as the extender's rules read it (``models/extender.md``, E1).

:func:`read_pod` reads a ``v1.Pod`` with the kubectl reader (strict) and the
two annotations only the extender reads: the GPU bandwidth a pod's GPU set
must reach (N3) and the topology level its gang prefers (E5).
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, TypeAdapter, ValidationError

from gpuopt.cluster.fields import ItemId, KubeName, Moment
from gpuopt.cluster.model import Cluster, Pending, priority_value
from gpuopt.errors import ProblemError
from gpuopt.extender.wire import BadRequest

if TYPE_CHECKING:
    from gpuopt.readers.kubectl.dra_state import PodClaimRef

#: Pod annotation: the lowest bandwidth (GB/s) every pair of its GPUs must reach (N3).
BANDWIDTH_ANNOTATION = "gpuopt.io/min-gpu-bandwidth"
#: Pod annotation: the topology level its gang prefers to share (a level of the snapshot).
LEVEL_ANNOTATION = "gpuopt.io/preferred-level"


def claim_refs(pod: Mapping[str, Any]) -> tuple[PodClaimRef, ...]:
    """The entries of a v1.Pod's ``spec.resourceClaims`` (each naming its claim, from
    ``resourceClaimName`` or ``status.resourceClaimStatuses``, or its template), read by
    the kubectl reader's :func:`~gpuopt.readers.kubectl.dra.pod_claims`; empty (and
    nothing read) for a pod with none."""
    spec = pod.get("spec")
    if not isinstance(spec, dict) or not spec.get("resourceClaims"):
        return ()
    from gpuopt.readers.kubectl.context import Context, KubectlOptions
    from gpuopt.readers.kubectl.dra import pod_claims
    from gpuopt.readers.kubectl.fields import Reader

    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default")
    pod_id = f"{namespace}/{metadata.get('name')}"
    status = pod.get("status")
    ctx = Context(KubectlOptions(strict=True))
    try:
        pod_claims(
            ctx,
            Reader(f"Pod {pod_id}"),
            spec,
            status if isinstance(status, dict) else {},
            namespace,
            pod_id,
        )
    except ProblemError as exc:
        raise BadRequest(f"Pod: {exc}", reason="pod") from None
    return tuple(ctx.dra.pod_claims.get(pod_id, ()))


@dataclass(frozen=True)
class Ask:
    """The pod being scheduled, as the rules read it."""

    pending: Pending
    priority: int
    min_bandwidth: float
    level: str | None
    #: the reader's report keys for fields of this pod that are not modelled (counted)
    ignored: tuple[str, ...]
    #: its ``spec.resourceClaims`` entries (E8), resolved against the state per request
    claim_refs: tuple[PodClaimRef, ...] = ()

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
    refs = claim_refs(item)
    unmodelled = {
        key
        for key, count in report.unmodelled.items()
        if count and not (refs and key == "resource-claims")  # judged by E8 here
    }
    if pending.topology_spread:  # K11: kube-scheduler's own filter judges it, not this one
        unmodelled.add("topology-spread")
    ignored = tuple(sorted(unmodelled))
    return Ask(
        pending=pending,
        priority=priority_value(pending.priority, hp),
        min_bandwidth=bandwidth,
        level=level if isinstance(level, str) and level else None,
        ignored=ignored,
        claim_refs=refs,
    )


#: The fields of a pod's metadata that name this one pod (the replicas of one template
#: differ in these alone): :class:`Templates` reads them for each pod.
IDENTITY = ("name", "uid", "resourceVersion", "creationTimestamp")
#: Templates a :class:`Templates` keeps (the least recently used goes first).
TEMPLATES = 1024


class Templates:
    """:func:`read_pod` once per pod template: pods whose JSON is the same but for the
    fields of :data:`IDENTITY` (the replicas of a Job, a Deployment, a LeaderWorkerSet,
    which kube-scheduler asks about one by one) are read as the same :class:`Ask`, with
    the pod's own id, uid and creation time.

    Only what the full read gives exactly is taken from a template: a pod whose identity
    fields are not plain (a name that is not a string, a time that does not read, an id
    the model refuses) is read in full, so it is refused with the full read's sentence.
    """

    def __init__(self, size: int = TEMPLATES) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._asks: OrderedDict[tuple[str, int | None], Ask] = OrderedDict()

    def read(
        self, pod: Mapping[str, Any], cluster: Cluster | None, reader_options: Mapping[str, Any]
    ) -> Ask:
        """:func:`read_pod` of ``pod``, from its template when one was read before."""
        text = template_key(pod)
        key = None
        if text is not None:
            key = (text, cluster.hp_priority if cluster is not None else None)
            with self._lock:
                template = self._asks.get(key)
                if template is not None:
                    self._asks.move_to_end(key)
            if template is not None:
                found = renamed(template, pod)
                if found is not None:
                    return found
        ask = read_pod(pod, cluster, reader_options)
        if key is not None:
            with self._lock:
                self._asks[key] = ask
                while len(self._asks) > self.size:
                    self._asks.popitem(last=False)
        return ask

    def clear(self) -> None:
        """Forget every template (the reader's options or the snapshot changed)."""
        with self._lock:
            self._asks.clear()


def template_key(pod: Mapping[str, Any]) -> str | None:
    """The JSON text of ``pod`` without the fields of :data:`IDENTITY` (keys in their
    order; ``NaN`` written as such): pods with the same key differ in those fields alone.
    None when the pod has no metadata object or cannot be written."""
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict):
        return None
    rest = {key: value for key, value in metadata.items() if key not in IDENTITY}
    try:
        return json.dumps({**pod, "metadata": rest}, separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def renamed(template: Ask, pod: Mapping[str, Any]) -> Ask | None:
    """``template`` (the :class:`Ask` of a pod of the same template) with ``pod``'s id, uid
    and creation time, read as the full read reads them; None when any of them is not
    plain or the model refuses the result (then the full read says why)."""
    from gpuopt.readers.kubectl.fields import Reader

    metadata = pod["metadata"]
    name = metadata.get("name")
    uid = metadata.get("uid")
    stamp = metadata.get("creationTimestamp")
    if not isinstance(name, str) or not name or not isinstance(uid, str | None):
        return None
    if stamp is not None and not isinstance(stamp, str):
        return None
    try:
        since = Reader("pod").time(metadata, "creationTimestamp", "metadata.creationTimestamp")
    except ProblemError:
        return None
    pending = template.pending
    pod_id = f"{pending.namespace or 'default'}/{name}"
    try:  # the three fields as the model checks them (the rest is the template's, checked)
        _ID.validate_python(pod_id)
        if uid:
            _UID.validate_python(uid)
        if since is not None:
            _SINCE.validate_python(since)
    except ValidationError:
        return None
    values = {**pending.__dict__, "id": pod_id, "uid": uid or None, "since": since}
    given = pending.model_fields_set - {"uid", "since"}
    given |= {"id"} | ({"uid"} if uid else set()) | ({"since"} if since is not None else set())
    fresh = Pending.model_construct(_fields_set=given, **values)
    return replace(template, pending=fresh)


_STRICT = ConfigDict(strict=True, allow_inf_nan=False)  # the cluster models' own
_ID: TypeAdapter[str] = TypeAdapter(ItemId, config=_STRICT)
_UID: TypeAdapter[str] = TypeAdapter(KubeName, config=_STRICT)
_SINCE: TypeAdapter[float] = TypeAdapter(Moment, config=_STRICT)


__all__ = [
    "BANDWIDTH_ANNOTATION",
    "IDENTITY",
    "LEVEL_ANNOTATION",
    "TEMPLATES",
    "Ask",
    "Templates",
    "claim_refs",
    "read_pod",
    "renamed",
    "template_key",
]
