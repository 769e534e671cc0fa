"""The items a cluster snapshot lists: nodes, running tasks, waiting pods, gangs, options.

Each validates itself (rules C1-C8 and K1-K7 of ``models/cluster.md`` that one
item can check alone); what needs the whole snapshot, such as a task's node
existing and having room, is checked by :class:`gpuopt.cluster.model.Cluster`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, model_validator

from gpuopt._model import MAX_ID_LENGTH
from gpuopt.cluster.devices import MAX_DEVICES, CounterSet, Device
from gpuopt.cluster.fields import (
    MAX_NODE_GPUS,
    MAX_PRIORITY,
    MAX_TASKS,
    MIN_PRIORITY,
    NODE_LEVEL,
    SWITCH_LEVEL,
    Amount,
    GpuCount,
    Interconnect,
    ItemId,
    KubeName,
    Moment,
    Priority,
    _check_resources,
    _check_selector,
    _Extended,
    active_deadline_field,
    annotations_field,
    check_share,
    namespace_of,
    priority_class_field,
    share_field,
    spread_field,
)
from gpuopt.cluster.kube import (
    HOSTNAME_KEY,
    NodeSelectorTerm,
    PinReason,
    PodAffinityTerm,
    SelectorValue,
    SpreadConstraint,
    Taint,
    Toleration,
)
from gpuopt.errors import short
from gpuopt.options import OPTIONS


def _check_pod(owner: str, pod: Task | Pending) -> None:
    """What a running task and a waiting pod check first alike: K4 resources, the C7 share
    and a 32-bit priority."""
    _check_resources(owner, pod.resources)
    check_share(owner, pod.gpus, pod.gpu_milli)
    if isinstance(pod.priority, int) and not MIN_PRIORITY <= pod.priority <= MAX_PRIORITY:
        raise ValueError(f"{owner}: priority {pod.priority} is outside the 32-bit range")


class Node(_Extended):
    """One machine: its GPUs, CPUs, optional memory, labels and place in the topology."""

    _quiet_defaults = frozenset(
        {
            "gpu_model",
            "topology",
            "interconnect",
            "bandwidth",
            "preemptions",
            "ready",
            "unschedulable",
            "taints",
            "resources",
            "locked",
            "devices",
            "counters",
        }
    )

    id: ItemId
    gpus: GpuCount
    cpus: Amount
    memory: Amount | None = Field(
        default=None, description="Memory (any unit, same as the tasks')."
    )
    asw: ItemId | None = Field(
        default=None,
        description="Access switch id (the legacy name of the 'switch' topology level).",
    )
    labels: dict[str, str] = Field(default_factory=dict)
    gpu_model: ItemId | None = Field(default=None, description="E.g. 'H100-SXM'.")
    topology: dict[str, str] = Field(
        default_factory=dict, description="Domain of this node at each topology level."
    )
    interconnect: Interconnect | None = Field(
        default=None, description="How its GPUs are joined (for node-level GPU sets)."
    )
    bandwidth: list[list[float]] | None = Field(
        default=None,
        max_length=MAX_NODE_GPUS,
        description="Its GPU-to-GPU bandwidth matrix in GB/s, one row per GPU, when it is "
        "none of the named interconnects' (node-level placement reads it before "
        "interconnect).",
    )
    preemptions: int = Field(
        default=0, ge=0, le=10**9, description="Preemptions of tasks on this node so far."
    )
    ready: bool = Field(default=True, description="K1: its Ready condition is True.")
    unschedulable: bool = Field(default=False, description="K1: cordoned (spec.unschedulable).")
    taints: list[Taint] = Field(default_factory=list, max_length=1000)
    resources: dict[str, int] = Field(
        default_factory=dict,
        description="K4: allocatable extended resources (RDMA devices, hugepages in bytes, "
        "ephemeral storage in bytes, any named resource), as integers.",
    )
    locked: bool = Field(
        default=False,
        description="Nothing moves onto or off it (e.g. its pods hold more than its "
        "allocatable); capacity rules C3 are not checked on it.",
    )
    devices: list[Device] = Field(
        default_factory=list,
        max_length=MAX_DEVICES,
        description="R1: its DRA devices (ResourceSlices naming it), as read.",
    )
    counters: list[CounterSet] = Field(
        default_factory=list,
        max_length=MAX_DEVICES,
        description="R4: the shared counter sets of its DRA pools.",
    )

    @model_validator(mode="after")
    def _check_topology(self) -> Node:
        switch = self.topology.get(SWITCH_LEVEL)
        if switch is not None and self.asw is not None and switch != self.asw:
            raise ValueError(
                f"node {self.id!r}: asw {self.asw!r} differs from its topology switch {switch!r}"
            )
        for level, domain in self.topology.items():
            if not level or not domain or len(domain) > MAX_ID_LENGTH:
                raise ValueError(
                    f"node {self.id!r}: topology {short({level: domain})} needs a non-empty "
                    f"level and a domain of 1 to {MAX_ID_LENGTH} characters"
                )
        if self.bandwidth is not None:
            from gpuopt.cluster.interconnect import bandwidth_error

            error = bandwidth_error(self.bandwidth)
            if error is None and len(self.bandwidth) != self.gpus:
                error = f"has {len(self.bandwidth)} rows but the node has {self.gpus} GPUs"
            if error is not None:
                raise ValueError(f"node {self.id!r}: bandwidth {error}")
        return self

    @model_validator(mode="after")
    def _check_resources(self) -> Node:
        _check_resources(f"node {self.id!r}", self.resources)
        return self

    @property
    def open(self) -> bool:
        """K1: a pod may be placed here now: Ready, not cordoned, not locked."""
        return self.ready and not self.unschedulable and not self.locked

    def label(self, key: str) -> str | None:
        """Its value of a node label; ``kubernetes.io/hostname`` defaults to the id."""
        found = self.labels.get(key)
        if found is None and key == HOSTNAME_KEY:
            return self.id
        return found

    def domain(self, level: str) -> str | None:
        """Its domain at ``level`` (``switch`` falls back to ``asw``; ``node`` is the id)."""
        if level == NODE_LEVEL:
            return self.id
        found = self.topology.get(level)
        if found is None and level in (SWITCH_LEVEL, "asw"):
            return self.asw
        return found


class Task(_Extended):
    """One running task (pod): where it runs and what it holds."""

    _quiet_defaults = frozenset(
        {
            "gpu_indices",
            "start_time",
            "deletion_time",
            "disruption",
            "last_checkpoint",
            "namespace",
            "labels",
            "tolerations",
            "node_affinity",
            "pod_affinity",
            "pod_anti_affinity",
            "resources",
            "pinned",
            "gang",
            "uid",
            "annotations",
            "active_deadline",
            "priority_class",
        }
    )

    id: ItemId
    node: ItemId
    gpus: GpuCount
    cpus: Amount = 0.0
    memory: Amount | None = None
    gpu_milli: int | None = share_field(
        "C7: it takes this share of one GPU, in thousandths (gpus=1); other shares may use "
        "the rest of that GPU."
    )
    gpu_indices: list[int] | None = Field(
        default=None,
        max_length=MAX_NODE_GPUS,
        description="Which GPUs of its node it holds (default: the lowest free ones, "
        "in task order).",
    )
    locked: bool = False
    priority: Priority = Field(
        default="LP",
        description="'HP', 'LP', or an integer (higher wins; HP from the cluster's hp_priority).",
    )
    node_selector: dict[str, SelectorValue] = Field(default_factory=dict)
    anti_affinity: ItemId | None = Field(
        default=None, description="Group: at most one task of it per node."
    )
    start_time: Moment | None = None
    deletion_time: Moment | None = Field(
        default=None,
        description="Kubernetes metadata.deletionTimestamp: the pod is terminating, and "
        "its kubelet stops it by then at the latest (the end of its grace period).",
    )
    disruption: str | None = Field(
        default=None,
        max_length=128,
        description="The reason of its Kubernetes DisruptionTarget condition, when that is "
        "True: PreemptionByScheduler when kube-scheduler preempted it (K10), "
        "EvictionByEvictionAPI, DeletionByTaintManager, ...",
    )
    last_checkpoint: Moment | None = Field(
        default=None,
        description="Time of its last checkpoint (work since then is lost when it stops); "
        "default: its start_time.",
    )
    namespace: KubeName | None = Field(
        default=None,
        description="Kubernetes namespace (default: the part of the id before '/', "
        "else 'default').",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Pod labels.")
    tolerations: list[Toleration] = Field(default_factory=list, max_length=1000)
    node_affinity: list[NodeSelectorTerm] = Field(
        default_factory=list,
        max_length=1000,
        description="K3: required node affinity terms (ORed; none: every node).",
    )
    pod_affinity: list[PodAffinityTerm] = Field(default_factory=list, max_length=1000)
    pod_anti_affinity: list[PodAffinityTerm] = Field(default_factory=list, max_length=1000)
    resources: dict[str, int] = Field(
        default_factory=dict, description="K4: extended resource requests, as integers."
    )
    pinned: PinReason | None = Field(
        default=None, description="K6: why it is never moved (a DaemonSet pod, ...)."
    )
    gang: ItemId | None = Field(
        default=None,
        description="C8: the running gang it belongs to (its min_member in the cluster's "
        "gangs; a gang not listed there is all or nothing).",
    )
    uid: KubeName | None = Field(
        default=None,
        description="Kubernetes metadata.uid (the scheduler names preemption victims by it).",
    )
    annotations: dict[str, str] = annotations_field()
    active_deadline: float | None = active_deadline_field()
    priority_class: KubeName | None = priority_class_field()

    @model_validator(mode="after")
    def _check_task(self) -> Task:
        _check_pod(f"task {self.id!r}", self)
        if self.gpu_indices is not None:
            if len(self.gpu_indices) != self.gpus:
                raise ValueError(
                    f"task {self.id!r}: gpu_indices lists {len(self.gpu_indices)} GPUs "
                    f"but it holds {self.gpus}"
                )
            if len(set(self.gpu_indices)) != len(self.gpu_indices):
                raise ValueError(f"task {self.id!r}: gpu_indices repeats a GPU")
        _check_selector(f"task {self.id!r}", self.node_selector)
        return self

    @property
    def fixed(self) -> bool:
        """Never moved: locked (by the user) or pinned (by a Kubernetes rule, K6)."""
        return self.locked or self.pinned is not None

    @property
    def space(self) -> str:
        """Its namespace: as given, else the part of the id before '/', else 'default'."""
        return namespace_of(self.id, self.namespace)

    @property
    def checkpoint(self) -> float | None:
        """The time since which its work is lost when it stops: last checkpoint, else start."""
        return self.last_checkpoint if self.last_checkpoint is not None else self.start_time


class Pending(_Extended):
    """A waiting request (an unbound pod or a queued job): the demand a plan makes room for."""

    _quiet_defaults = frozenset(
        {
            "namespace",
            "labels",
            "tolerations",
            "node_affinity",
            "resources",
            "preemption_policy",
            "gpu_milli",
            "pod_affinity",
            "pod_anti_affinity",
            "gang",
            "nominated_node",
            "topology_spread",
            "uid",
            "annotations",
            "active_deadline",
            "priority_class",
        }
    )

    id: ItemId
    gpus: GpuCount
    cpus: Amount = 0.0
    memory: Amount | None = None
    gpu_milli: int | None = share_field(
        "C7: it asks for this share of one GPU, in thousandths (gpus=1)."
    )
    priority: Priority = "LP"
    node_selector: dict[str, SelectorValue] = Field(default_factory=dict)
    since: Moment | None = Field(default=None, description="When it started waiting.")
    namespace: KubeName | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=1000)
    node_affinity: list[NodeSelectorTerm] = Field(default_factory=list, max_length=1000)
    resources: dict[str, int] = Field(default_factory=dict)
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = Field(
        default="PreemptLowerPriority",
        description="K8: 'Never' waits for room and evicts nobody.",
    )
    pod_affinity: list[PodAffinityTerm] = Field(
        default_factory=list,
        max_length=1000,
        description="K5: required pod affinity (judged against the running pods).",
    )
    pod_anti_affinity: list[PodAffinityTerm] = Field(
        default_factory=list,
        max_length=1000,
        description="K5: required pod anti-affinity (judged against the running pods).",
    )
    topology_spread: list[SpreadConstraint] = spread_field(
        "K11: its DoNotSchedule topology spread constraints (judged against the running pods)."
    )
    gang: ItemId | None = Field(
        default=None,
        description="C8: the gang it names (its waiting pods start together or not at all).",
    )
    nominated_node: ItemId | None = Field(
        default=None,
        description="K10: status.nominatedNodeName, the node kube-scheduler holds room on "
        "for it (after preempting there) against pods of its priority and below: node "
        "placement and preemption leave that room to it, and it is tried there first.",
    )
    uid: KubeName | None = Field(default=None, description="Kubernetes metadata.uid.")
    annotations: dict[str, str] = annotations_field()
    active_deadline: float | None = active_deadline_field()
    priority_class: KubeName | None = priority_class_field()

    @property
    def space(self) -> str:
        """Its namespace: as given, else the part of the id before '/', else 'default'."""
        return namespace_of(self.id, self.namespace)

    def as_task(self, node: str, **fields: Any) -> Task:
        """This pod bound to ``node``: a running task with its request, rules and uid
        (``fields``: more of the task's, such as ``start_time``)."""
        return Task(
            id=self.id,
            node=node,
            gpus=self.gpus,
            cpus=self.cpus,
            memory=self.memory,
            gpu_milli=self.gpu_milli,
            priority=self.priority,
            node_selector=self.node_selector,
            namespace=self.namespace,
            labels=self.labels,
            tolerations=self.tolerations,
            node_affinity=self.node_affinity,
            pod_affinity=self.pod_affinity,
            pod_anti_affinity=self.pod_anti_affinity,
            resources=self.resources,
            uid=self.uid,
            **fields,
        )

    @model_validator(mode="after")
    def _check_pending(self) -> Pending:
        _check_pod(f"pending {self.id!r}", self)
        _check_selector(f"pending {self.id!r}", self.node_selector)
        return self


class WorkloadShape(_Extended):
    """One shape of a target workload (``gpuopt.cluster.workload``'s JSON list item)."""

    _quiet_defaults = frozenset({"memory_mib", "tolerations"})

    cpu_milli: int = Field(ge=0, le=10**12, description="CPU in thousandths of a core.")
    gpu_milli: int = Field(
        ge=0, le=1000, description="Share of each GPU in thousandths (1000: whole GPUs)."
    )
    gpus: int = Field(ge=0, le=8, description="GPUs (0: a CPU-only pod; a share pod has 1).")
    models: list[str] = Field(
        default_factory=list, max_length=100, description="GPU models it may run on (any)."
    )
    weight: float = Field(gt=0, le=1e12, description="Relative frequency.")
    memory_mib: int = Field(
        default=0, ge=0, le=10**12, description="Memory it asks for, in MiB (0: none stated)."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=1000,
        description="K2: the taints its pods tolerate (none: a tainted node is closed to it).",
    )


#: What defragmentation maximises first (``models/defrag.md``): nodes emptied, or the
#: frequency-weighted slots of a target workload (X9).
Objective = Literal["emptied", "workload"]


class ClusterOptions(_Extended):
    """Defragmentation options a snapshot may carry (CLI flags and arguments override them)."""

    _quiet_defaults = frozenset({"objective", "workload"})

    # bounds and meaning from gpuopt.options, where every option is declared once
    partition_size: int = OPTIONS["partition_size"].field(500)
    depth: int = OPTIONS["depth"].field(3)
    rounds: int = OPTIONS["rounds"].field(5)
    time_limit: float | None = OPTIONS["time_limit"].field(None)
    max_moves: int | None = OPTIONS["max_moves"].field(None)
    group_budget: int | None = OPTIONS["group_budget"].field(None)
    seed: int = OPTIONS["seed"].field(0)
    min_node_gpus: GpuCount = Field(
        default=0,
        description="Only nodes with at least this many GPUs are emptied (e.g. 8 to free "
        "whole 8-GPU nodes); smaller nodes still take tasks.",
    )
    objective: Objective | None = Field(
        default=None,
        description="What defragmentation maximises first: 'emptied' (nodes emptied) or "
        "'workload' (weighted slots of the target workload); default: 'workload' when a "
        "workload is given, else 'emptied'.",
    )
    workload: list[WorkloadShape] | None = Field(
        default=None,
        max_length=10_000,
        description="The target workload: shapes with weights (the JSON list of "
        "gpuopt.sharing.Workload).",
    )

    @model_validator(mode="after")
    def _check_workload(self) -> ClusterOptions:
        if self.workload is not None:
            from gpuopt.errors import ProblemError

            try:
                self.target_workload()
            except ProblemError as exc:
                raise ValueError(str(exc).rstrip(".")) from None
        return self

    def target_workload(self) -> Any:
        """The workload as a :class:`gpuopt.sharing.Workload` (None when none is given)."""
        if self.workload is None:
            return None
        from gpuopt.cluster.workload import Workload

        return Workload.from_json(
            json.dumps([item.model_dump(exclude_none=True) for item in self.workload]),
            source="options.workload",
        )

    @property
    def chosen_objective(self) -> Objective:
        """``objective``, or its default: 'workload' with a workload, else 'emptied'."""
        if self.objective is not None:
            return self.objective
        return "workload" if self.workload is not None else "emptied"


class Gang(_Extended):
    """C8: a gang (a job of several pods, all or nothing down to ``min_member``), running
    or waiting (its pods among the cluster's ``pending``: then ``min_member`` and
    ``level`` are what its waiting pods must start with).

    Stopping pods of it so that fewer than ``min_member`` keep running stops
    every pod of it (``models/gang.md``, P2). ``min_member`` may exceed the
    pods the snapshot shows running (a gang caught while its pods start, or
    after some were lost): then stopping any one of its pods stops them all.
    A task may name a gang that ``gangs`` does not list: its ``min_member`` is
    then the number of its running pods (all or nothing).
    """

    _quiet_defaults = frozenset({"level"})

    id: ItemId
    min_member: int = Field(ge=1, le=MAX_TASKS, description="Fewest pods it runs with.")
    level: ItemId | None = Field(
        default=None,
        description="R9: the topology level all its pods share one domain of (a Workload "
        "API PodGroup's topology constraint), when it states one.",
    )
