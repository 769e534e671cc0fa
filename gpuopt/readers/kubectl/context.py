"""What every kind's reader shares: the options and one :class:`Context` per read.

:func:`gpuopt.readers.kubectl.read_kubernetes` makes one :class:`Context`;
the readers of each kind (:mod:`.nodes`, :mod:`.pods`, :mod:`.objects`,
:mod:`.gangs`) take it first, note what they skip or simplify in its report
and leave what they read in its tables; :mod:`.finish` turns the tables into
the cluster.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gpuopt.cluster.kube import CRITICAL_PRIORITY, Budget, LabelSelector
from gpuopt.cluster.model import Node, Pending, Task
from gpuopt.errors import ProblemError, short
from gpuopt.readers.kubectl.dra_state import DraState
from gpuopt.readers.kubectl.names import GPU_NAME, KUBE_HP_PRIORITY, ZONE_LABEL
from gpuopt.readers.kubectl.report import KubectlReport


@dataclass(frozen=True)
class KubectlOptions:
    """How :func:`~gpuopt.readers.kubectl.read_kubernetes` reads: its options as one object.

    Each field is the keyword of the same name (see its parameters); a read
    takes this object, the keywords, or both (the keywords override its fields).
    ``gpu_resources`` is kept as a frozenset and ``topology_labels`` as a tuple,
    read into :attr:`levels` (a bad entry is refused when the object is made).

    >>> KubectlOptions(topology_labels=["rack=example.com/rack"]).levels[1]
    ('rack', 'example.com/rack')
    """

    gpu_resources: Collection[str] | None = None
    topology_labels: Sequence[str] = ()
    critical_priority: int = CRITICAL_PRIORITY
    hp_priority: int = KUBE_HP_PRIORITY
    allow_emptydir: bool = False
    pin_unresolved_claims: bool = False
    strict: bool = False
    asw_label: str = "gpuopt.io/asw"
    lock_annotation: str = "gpuopt.io/locked"
    group_label: str = "gpuopt.io/anti-affinity"
    priority_label: str = "gpuopt.io/priority"
    name: str | None = None
    #: (level name, node label), coarse to fine, the zone first: from ``topology_labels``.
    levels: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.gpu_resources is not None:
            object.__setattr__(self, "gpu_resources", frozenset(self.gpu_resources))
        object.__setattr__(self, "topology_labels", tuple(self.topology_labels))
        object.__setattr__(self, "levels", topology_levels(self.topology_labels))

    def is_gpu(self, name: str) -> bool:
        """Whether the resource ``name`` counts as GPUs."""
        if self.gpu_resources is not None:
            return name in self.gpu_resources
        return GPU_NAME.fullmatch(name) is not None


@dataclass(frozen=True)
class PriorityClass:
    """A PriorityClass read: what a pod naming it (or none, for the default) gets."""

    value: int
    global_default: bool
    preemption_policy: str | None


@dataclass
class Context:
    """One read: its options, its report, and what the objects read so far left behind."""

    options: KubectlOptions
    report: KubectlReport = field(default_factory=KubectlReport)
    #: (kind, "<namespace>/<name>") of every object read: a second copy is skipped.
    seen: set[tuple[str, str]] = field(default_factory=set)
    # --- read first (PriorityClasses, volumes, claims, PodGroups), used by pods
    classes: dict[str, PriorityClass] = field(default_factory=dict)
    #: (namespace, claim) -> its volume's name.
    claims: dict[tuple[str, str], str | None] = field(default_factory=dict)
    #: PersistentVolume -> whether it is node-local.
    local_volumes: dict[str, bool] = field(default_factory=dict)
    #: PersistentVolume -> its required node affinity terms.
    volume_affinity: dict[str, list[Any]] = field(default_factory=dict)
    #: Gang id ("<namespace>/<name>") of every PodGroup read -> its minMember (None: none
    #: valid, or the PodGroup could not be read: the gang is all or nothing, reported once).
    pod_groups: dict[str, int | None] = field(default_factory=dict)
    # --- nodes
    nodes: dict[str, Node] = field(default_factory=dict)
    #: Node -> MiB per GPU, when labelled.
    gpu_memory: dict[str, Fraction] = field(default_factory=dict)
    #: (node, GPU memory resource) -> its amount per GPU of the node.
    gpu_memory_pool: dict[tuple[str, str], Fraction] = field(default_factory=dict)
    #: Nodes locked because a pod on them could not be read.
    locked_nodes: set[str] = field(default_factory=set)
    # --- pods and budgets
    tasks: list[Task] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    budgets: list[Budget] = field(default_factory=list)
    #: Pod id -> the host ports its containers bind (K9: ``hostport.gpuopt.io/<protocol>-<port>``).
    host_ports: dict[str, set[str]] = field(default_factory=dict)
    #: K12: each node's pod-count limit (``status.allocatable.pods``), settled by
    #: :func:`.finish.finish` once every pod is read
    pod_limits: dict[str, int] = field(default_factory=dict)
    #: K12 decided already (a watched cluster settling one node as its full read decided):
    #: None, the limits a plan could reach decide
    pod_slots_on: bool | None = None
    #: K12: how far the read is from turning it on or off: the least, over the nodes with a
    #: limit, of their free slots plus their pods that may move, less the pods that could
    #: come (on below 0); None without limits
    pod_slot_margin: int | None = None
    #: Namespaces whose pods are pinned because a budget of theirs could not be read.
    pinned_namespaces: set[str] = field(default_factory=set)
    #: (namespace, selector) of every DoNotSchedule topology spread constraint read.
    spread: list[tuple[str, LabelSelector]] = field(default_factory=list)
    #: Kueue group id -> the pod-group-total-count annotation of each of its running pods.
    group_counts: dict[str, list[str | None]] = field(default_factory=dict)
    #: Every time read (start and creation times, Ready heartbeats): the cluster's now.
    times: list[float] = field(default_factory=list)
    #: Exact bytes of node allocatable and pod requests: memory is read in MiB rounded
    #: to a thousandth (nodes down, pods up), and a node its pods fill exactly in bytes
    #: is set to their rounded sum (:func:`.finish.lock_overcommitted`).
    memory_bytes: dict[str, Fraction] = field(default_factory=dict)
    pod_bytes: dict[str, Fraction] = field(default_factory=dict)
    #: DRA objects and Workload API gangs (:mod:`.dra`, :mod:`.workloads`, :mod:`.dra_finish`).
    dra: DraState = field(default_factory=DraState)

    def note(self, reason: str, name: str) -> None:
        """Count the object ``name`` under ``reason`` in the report."""
        self.report.reasons.setdefault(reason, []).append(name)

    def problem(self, reason: str, name: str, error: ProblemError) -> None:
        """A problem: ``strict`` refuses the input with it, else it is counted."""
        if self.options.strict:
            raise error
        self.note(reason, name)
        self.report.first.setdefault(reason, str(error))


def topology_levels(topology_labels: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """(level, node label) pairs from ``LABEL`` or ``NAME=LABEL`` entries, the zone first."""
    levels = [("zone", ZONE_LABEL)]
    for entry in topology_labels:
        level, equals, label = entry.partition("=")
        if not equals:
            level, label = entry, entry
        if not level or not label or level == "node":
            raise ProblemError(
                f"topology label {short(entry)}: give LABEL or NAME=LABEL (the level 'node' is "
                "implied)."
            )
        if any(level == known for known, _ in levels):
            raise ProblemError(f"topology label {short(entry)}: level {level!r} is given twice.")
        levels.append((level, label))
    return tuple(levels)
