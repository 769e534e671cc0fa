"""The dynamic MIG layout problem: GPUs with their MIG placements, and waiting pods' claims.

With NVIDIA's dynamic MIG under DRA every valid placement of every MIG profile
is a device of its own, and all placements of one physical GPU draw on one
shared-counter set (memory slices, multiprocessors, memory). Choosing a
device is choosing where a partition will be created. :class:`MigProblem`
holds what that choice needs and nothing else:

- :class:`MigGpu`: a physical GPU on a node, its counters (the counter set's
  values) and its :class:`Placement` devices (the MIG placements and, when
  published, the whole GPU), each with what it draws and whether it is in use
  already (allocated to a running pod);
- :class:`MigPod`: a waiting pod, its weight and its :class:`MigClaim`
  claims; each claim has requests (:class:`MigRequest`), each served by one of
  its :class:`Alternative` (``exactly`` is one alternative, ``firstAvailable``
  several), ``count`` devices of one profile; ``same_gpu`` is the claim's
  ``matchAttribute`` on the parent GPU.

The rules an answer keeps (M1-M7) and the objective are written in
``models/mig.md``; :class:`MigIndex` is the view the methods and the checker
read. Amounts are integers (a read cluster's quantities are scaled per counter,
:mod:`gpuopt.mig.cluster`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuopt._model import MAX_ID_LENGTH, IndexedModel
from gpuopt.errors import short

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True)

#: An id of a GPU, device, pod, claim or request.
MigId = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]
#: The profile name of a whole-GPU device (a MIG profile is written as NVIDIA does, ``3g.40gb``).
WHOLE_GPU = "gpu"
#: Most devices one request asks.
MAX_COUNT = 64
#: Most GPUs, placements or pods in one problem.
MAX_ITEMS = 100_000


class Placement(BaseModel):
    """One device of a GPU: a MIG placement (``profile`` at memory slice ``start``, ``size``
    slices) or the whole GPU (``whole``), and what it draws of the GPU's counters."""

    model_config = _CONFIG

    device: MigId = Field(description="The device's name (``driver/pool/name`` when read).")
    profile: MigId = Field(description="The MIG profile, or 'gpu' for the whole GPU.")
    start: int | None = Field(default=None, ge=0, le=64, description="First memory slice.")
    size: int | None = Field(default=None, ge=1, le=64, description="Memory slices covered.")
    whole: bool = Field(default=False, description="The whole GPU, not a MIG placement.")
    draws: dict[str, Annotated[int, Field(ge=0, le=2**40)]] = Field(
        description="Counter -> amount it draws when allocated (DF5)."
    )
    in_use: bool = Field(default=False, description="Allocated already (a running pod's).")


class MigGpu(BaseModel):
    """A physical GPU: its node, its counters and its devices."""

    model_config = _CONFIG

    id: MigId
    node: MigId
    model: str | None = Field(default=None, max_length=200, description="e.g. NVIDIA A100.")
    counters: dict[str, Annotated[int, Field(ge=0, le=2**40)]] = Field(min_length=1)
    placements: list[Placement] = Field(min_length=1, max_length=10_000)


class Alternative(BaseModel):
    """``count`` devices of ``profile``; ``name`` is the ``firstAvailable`` subrequest's name
    (None for a request made ``exactly``)."""

    model_config = _CONFIG

    profile: MigId
    count: int = Field(default=1, ge=1, le=MAX_COUNT)
    name: MigId | None = None


class MigRequest(BaseModel):
    """A claim's request: served by exactly one of its alternatives (in any order)."""

    model_config = _CONFIG

    name: MigId
    alternatives: list[Alternative] = Field(min_length=1, max_length=8)

    def alternative_name(self, alternative: Alternative) -> str:
        """How Kubernetes names the request served by ``alternative`` (``req`` or ``req/sub``)."""
        return self.name if alternative.name is None else f"{self.name}/{alternative.name}"


class MigClaim(BaseModel):
    """A ResourceClaim to allocate: its requests, and whether all its devices share a GPU."""

    model_config = _CONFIG

    id: MigId
    requests: list[MigRequest] = Field(min_length=1, max_length=32)
    same_gpu: bool = Field(
        default=False, description="matchAttribute on the parent GPU over every request (M6)."
    )


class MigPod(BaseModel):
    """A waiting pod: served when all its claims are, on one node."""

    model_config = _CONFIG

    id: MigId
    weight: int = Field(default=1, ge=1, le=1_000_000, description="Value of serving it.")
    claims: list[MigClaim] = Field(min_length=1, max_length=32)
    nodes: list[MigId] | None = Field(
        default=None, description="The nodes it may go to (None: every node)."
    )


class MigProblem(IndexedModel):
    """GPUs with their MIG placements, and the waiting pods whose claims ask for them.

    Examples
    --------
    >>> from gpuopt.mig.generator import gpu
    >>> problem = MigProblem(gpus=[gpu("g0", "n0", "A100-80GB")], pods=[
    ...     {"id": "p", "claims": [{"id": "c", "requests": [
    ...         {"name": "r", "alternatives": [{"profile": "3g.40gb", "count": 2}]}]}]}])
    >>> len(problem.gpus[0].placements), problem.index.gpus
    (19, 1)
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    document: ClassVar[str] = "a MIG layout problem"

    name: str = Field(default="mig", max_length=200)
    gpus: list[MigGpu] = Field(max_length=MAX_ITEMS)
    pods: list[MigPod] = Field(default_factory=list, max_length=MAX_ITEMS)

    @model_validator(mode="after")
    def _check_problem(self) -> MigProblem:
        _unique("gpus", (gpu.id for gpu in self.gpus))
        _unique("device", (item.device for gpu in self.gpus for item in gpu.placements))
        _unique("pods", (pod.id for pod in self.pods))
        _unique("claim", (claim.id for pod in self.pods for claim in pod.claims))
        nodes = {gpu.node for gpu in self.gpus}
        for gpu in self.gpus:
            used: dict[str, int] = {}
            for item in gpu.placements:
                unknown = set(item.draws) - set(gpu.counters)
                if unknown:
                    raise ValueError(
                        f"gpus {gpu.id!r}: placement {item.device!r} draws counter "
                        f"{short(sorted(unknown)[0])}, which the GPU does not have"
                    )
                if item.in_use:
                    for name, value in item.draws.items():
                        used[name] = used.get(name, 0) + value
            for name, value in used.items():
                if value > gpu.counters[name]:
                    raise ValueError(
                        f"gpus {gpu.id!r}: placements in use draw {value} of counter {name!r}, "
                        f"more than its {gpu.counters[name]}"
                    )
        for pod in self.pods:
            for node in pod.nodes or ():
                if node not in nodes:
                    raise ValueError(f"pods {pod.id!r}: nodes names {node!r}, which has no GPU")
            for claim in pod.claims:
                _unique(f"claim {claim.id!r} request", (r.name for r in claim.requests))
                for request in claim.requests:
                    names = [alt.name for alt in request.alternatives]
                    if len(names) > 1 and None in names:
                        raise ValueError(
                            f"claim {claim.id!r} request {request.name!r}: several alternatives "
                            "need a name each (firstAvailable)"
                        )
        return self

    @cached_property
    def index(self) -> MigIndex:
        """The view the methods and the checker read (built once)."""
        return MigIndex.build(self)


def _unique(what: str, ids: object) -> None:
    seen: set[str] = set()
    for item in ids:  # type: ignore[attr-defined]
        if item in seen:
            raise ValueError(f"{what}: id {short(item)} appears twice")
        seen.add(item)


@dataclass(frozen=True)
class MigIndex:
    """Flat view of a problem.

    Placements are numbered ``0..P-1`` in the problem's order (GPU by GPU): per
    placement its ``gpu`` (position), ``node`` (position in ``node_ids``),
    ``profile``, ``whole``, ``in_use``, ``draws`` (counter position -> amount,
    counters numbered per GPU as in ``counter_names[g]``) and ``keys``. Per GPU:
    ``capacity`` (list by counter), ``residual`` (capacity minus what placements
    in use draw), ``cut_before`` (a MIG placement is in use) and ``members`` (its
    placements). ``free[(node, profile)]`` lists the placements not in use of
    that profile on that node, in order. ``pod_nodes[q]`` are the nodes pod
    ``q`` (at ``pod_position[id]``) may use.
    """

    node_ids: list[str]
    gpu_ids: list[str]
    keys: list[str]
    gpu: list[int]
    node: list[int]
    profile: list[str]
    whole: list[bool]
    in_use: list[bool]
    draws: list[dict[int, int]]
    counter_names: list[list[str]]
    capacity: list[list[int]]
    residual: list[list[int]]
    cut_before: list[bool]
    members: list[list[int]]
    free: dict[tuple[int, str], list[int]]
    pod_nodes: list[list[int]]
    pod_position: dict[str, int]
    device_of: dict[str, int]

    @property
    def gpus(self) -> int:
        """How many GPUs."""
        return len(self.gpu_ids)

    @property
    def placements(self) -> int:
        """How many placements (devices)."""
        return len(self.keys)

    @classmethod
    def build(cls, problem: MigProblem) -> MigIndex:
        """The view of ``problem``."""
        node_ids = sorted({gpu.node for gpu in problem.gpus})
        node_pos = {node: k for k, node in enumerate(node_ids)}
        keys: list[str] = []
        gpu_of: list[int] = []
        node_of: list[int] = []
        profile: list[str] = []
        whole: list[bool] = []
        in_use: list[bool] = []
        draws: list[dict[int, int]] = []
        counter_names: list[list[str]] = []
        capacity: list[list[int]] = []
        residual: list[list[int]] = []
        cut_before: list[bool] = []
        members: list[list[int]] = []
        free: dict[tuple[int, str], list[int]] = {}
        for g, gpu in enumerate(problem.gpus):
            names = list(gpu.counters)
            position = {name: k for k, name in enumerate(names)}
            counter_names.append(names)
            capacity.append([gpu.counters[name] for name in names])
            left = list(capacity[-1])
            mine = []
            cut = False
            for item in gpu.placements:
                p = len(keys)
                mine.append(p)
                keys.append(item.device)
                gpu_of.append(g)
                node_of.append(node_pos[gpu.node])
                profile.append(item.profile)
                whole.append(item.whole)
                in_use.append(item.in_use)
                drawn = {position[name]: value for name, value in item.draws.items() if value}
                draws.append(drawn)
                if item.in_use:
                    cut = cut or not item.whole
                    for k, value in drawn.items():
                        left[k] -= value
                else:
                    free.setdefault((node_pos[gpu.node], item.profile), []).append(p)
            residual.append(left)
            cut_before.append(cut)
            members.append(mine)
        pod_nodes = [
            sorted(node_pos[node] for node in pod.nodes)
            if pod.nodes is not None
            else list(range(len(node_ids)))
            for pod in problem.pods
        ]
        return cls(
            node_ids=node_ids,
            gpu_ids=[gpu.id for gpu in problem.gpus],
            keys=keys,
            gpu=gpu_of,
            node=node_of,
            profile=profile,
            whole=whole,
            in_use=in_use,
            draws=draws,
            counter_names=counter_names,
            capacity=capacity,
            residual=residual,
            cut_before=cut_before,
            members=members,
            free=free,
            pod_nodes=pod_nodes,
            pod_position={pod.id: q for q, pod in enumerate(problem.pods)},
            device_of={key: p for p, key in enumerate(keys)},
        )


__all__ = [
    "MAX_COUNT",
    "WHOLE_GPU",
    "Alternative",
    "MigClaim",
    "MigGpu",
    "MigIndex",
    "MigPod",
    "MigProblem",
    "MigRequest",
    "Placement",
]
