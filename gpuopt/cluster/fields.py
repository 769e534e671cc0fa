"""What every item of a cluster snapshot shares: bounds, field types and checks.

The bounds keep a snapshot within a few GB; the field types (ids, GPU counts,
amounts, moments) are the bounded fields that nodes, tasks and waiting pods
declare alike; the checks are the one-sentence errors each of them raises
(C3 capacity, C7 shares, K4 resources). :class:`_Extended` is the frozen,
strict base every item derives from, which leaves the fields added after the
first snapshot format out of its JSON while they are at their default.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from gpuopt._model import MAX_ID_LENGTH
from gpuopt.cluster.kube import MAX_KEY, SelectorValue
from gpuopt.errors import short
from gpuopt.options import MAX_NODES as MAX_NODES
from gpuopt.options import MAX_TASKS as MAX_TASKS

#: MAX_NODES and MAX_TASKS (declared in gpuopt.options, which bounds the options
#: that count nodes and tasks) are the largest snapshot the models accept.
#: Most (distinct node selector, node) pairs: the index keeps one boolean per pair.
MAX_SELECTOR_CELLS = 200_000_000
#: Largest GPU count of one node or task, and largest CPU / memory figure.
MAX_NODE_GPUS = 1024
MAX_AMOUNT = 1e12
#: Largest amount of an extended resource (bytes of hugepages or storage fit easily).
MAX_RESOURCE = 10**18
#: Largest time (any unit; 4e12 leaves room for Unix times in milliseconds).
MAX_TIME = 4e12
#: Most topology levels (zone > block > rack > switch > ... fits easily).
MAX_LEVELS = 16
#: Kubernetes priorities are 32-bit integers.
MIN_PRIORITY, MAX_PRIORITY = -(2**31), 2**31 - 1
#: Default threshold of the HP class: an integer priority at or above it is HP.
HP_PRIORITY = 1000
#: CPU and memory are compared as integers in units of 1/SCALE.
SCALE = 1000

PriorityClass = Literal["HP", "LP"]
#: A class name, or a Kubernetes-style integer priority (higher wins).
Priority = PriorityClass | int
#: How a node's GPUs are joined, for node-level GPU sets (``gpuopt.cluster.interconnect``):
#: every pair through an NVSwitch, NVLink bridges between neighbours, or PCIe in two
#: NUMA halves. None: unknown, every pair treated alike.
Interconnect = Literal["nvswitch", "nvlink-pairs", "pcie-two-numa"]

#: The legacy name of the switch level (``asw`` on nodes) and the levels every cluster has.
SWITCH_LEVEL = "switch"
NODE_LEVEL = "node"

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

# The bounded field types that nodes, tasks and waiting pods share.
#: An id (of a node, a task, a switch, ...).
ItemId = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]
#: GPUs of a node or a task.
GpuCount = Annotated[int, Field(ge=0, le=MAX_NODE_GPUS)]
#: CPUs or memory.
Amount = Annotated[float, Field(ge=0, le=MAX_AMOUNT)]
#: A time on the snapshot's clock.
Moment = Annotated[float, Field(ge=0, le=MAX_TIME)]
#: A Kubernetes name (a namespace).
KubeName = Annotated[str, Field(min_length=1, max_length=MAX_KEY)]


#: K9: the extended resources that stand for one host port of a node,
#: ``hostport.gpuopt.io/<protocol>-<port>``: every node offers one of each (more only where
#: its pods already hold more), listed or not.
HOST_PORT_PREFIX = "hostport.gpuopt.io/"

#: K12: the extended resource that stands for a node's pod slots (Kubernetes'
#: ``status.allocatable.pods``): every pod holds or asks one.
POD_SLOTS = "pods"


def offered(resources: Mapping[str, int], name: str) -> int:
    """How much of extended resource ``name`` a node with allocatable ``resources`` offers
    (K4): what it lists, else one of a host port (K9), else no limit of pod slots (K12: a
    node that states no pod-count limit has none), else none.

    >>> offered({}, "hostport.gpuopt.io/TCP-8080"), offered({"example.com/fpga": 2}, "x/y")
    (1, 0)
    >>> offered({}, "pods") == MAX_RESOURCE
    True
    """
    found = resources.get(name)
    if found is not None:
        return found
    if name == POD_SLOTS:
        return MAX_RESOURCE
    return 1 if name.startswith(HOST_PORT_PREFIX) else 0


def scaled(amount: float) -> int:
    """``amount`` in thousandths, rounded to the nearest integer (exact for milli-units)."""
    return round(amount * SCALE)


def priority_value(priority: Priority, hp_priority: int = HP_PRIORITY) -> int:
    """An integer priority: ``"LP"`` is 0, ``"HP"`` is ``hp_priority``, integers as given.

    >>> priority_value("HP"), priority_value("LP"), priority_value(7)
    (1000, 0, 7)
    """
    if priority == "HP":
        return hp_priority
    if priority == "LP":
        return 0
    return int(priority)


def is_hp(priority: Priority, hp_priority: int = HP_PRIORITY) -> bool:
    """The class of a priority: ``"HP"``, or an integer at or above ``hp_priority``.

    >>> is_hp("HP"), is_hp(999), is_hp(1000), is_hp(5, hp_priority=5)
    (True, False, True, True)
    """
    return priority_value(priority, hp_priority) >= hp_priority


class _Extended(BaseModel):
    """A model whose fields added after the first snapshot format are left out while at default.

    Snapshots written before those fields existed stay byte for byte the same
    when read and written again. Frozen and strict, with no unknown field.
    """

    model_config = _CONFIG
    #: Fields written only when they differ from their default.
    _quiet_defaults: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _drop_quiet_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        defaults = _quiet_defaults_of(type(self))
        for name, default in defaults.items():
            if name in data and getattr(self, name) == default:
                del data[name]
        return data


@cache
def _quiet_defaults_of(model: type[_Extended]) -> dict[str, Any]:
    """The default of each quiet field of ``model``, built once (a default factory's
    resolution inspects its signature, far too slow to repeat for every task)."""
    fields = model.model_fields
    return {
        name: fields[name].get_default(call_default_factory=True)
        for name in sorted(model._quiet_defaults)
    }


def check_unique(what: str, ids: Iterable[str]) -> None:
    """Raise a one-sentence ``ValueError`` naming the first id that ``ids`` repeats.

    >>> check_unique("nodes", ["a", "b", "a"])
    Traceback (most recent call last):
    ...
    ValueError: nodes: id 'a' appears 2 times
    """
    for item, count in Counter(ids).items():
        if count > 1:
            raise ValueError(f"{what}: id {item!r} appears {count} times")


def check_node_use(
    nodes: Iterable[Any],
    gpus: Counter[str],
    cpus: Counter[str],
    memory: Counter[str] | None = None,
) -> None:
    """C3: what the tasks hold on each node (CPU and memory in thousandths) fits the node.

    ``nodes`` have ``id``, ``gpus``, ``cpus`` (and ``memory``, not checked
    where None); the counters map a node id to what its tasks hold.
    """
    for node in nodes:
        if gpus[node.id] > node.gpus:
            raise ValueError(
                f"node {node.id!r}: its tasks hold {gpus[node.id]} GPUs but it has {node.gpus}"
            )
        if cpus[node.id] > scaled(node.cpus):
            raise ValueError(
                f"node {node.id!r}: its tasks hold {cpus[node.id] / SCALE:g} CPUs "
                f"but it has {node.cpus:g}"
            )
        limit = getattr(node, "memory", None)
        if memory is not None and limit is not None and memory[node.id] > scaled(limit):
            raise ValueError(
                f"node {node.id!r}: its tasks hold {memory[node.id] / SCALE:g} memory "
                f"but it has {limit:g}"
            )


def namespace_of(item_id: str, namespace: str | None) -> str:
    """A pod's namespace: as given, else the part of ``item_id`` before '/', else 'default'."""
    if namespace is not None:
        return namespace
    head, slash, _ = item_id.partition("/")
    return head if slash and head else "default"


def _check_resources(owner: str, resources: dict[str, int]) -> None:
    for name, amount in resources.items():
        if not name or len(name) > MAX_KEY:
            raise ValueError(f"{owner}: resource name {short(name)} must have 1 to {MAX_KEY} chars")
        if not 0 <= amount <= MAX_RESOURCE:
            raise ValueError(
                f"{owner}: resources.{short(name)[1:-1]} = {amount} is outside 0 to {MAX_RESOURCE}"
            )


def share_field(description: str) -> Any:
    """The ``gpu_milli`` field of a task, a waiting pod or a request (C7): a share of one
    GPU in thousandths, 1 to 999, or None for whole GPUs."""
    return Field(default=None, ge=1, le=999, description=description)


#: The prefix of the pod annotations a snapshot keeps (``annotations`` of a task or a
#: waiting pod): gpuopt's own, which the calendar reads its times from.
ANNOTATION_PREFIX = "gpuopt.io/"


def annotations_field() -> Any:
    """The ``annotations`` of a task or a waiting pod: its ``gpuopt.io/`` annotations as
    written, which the job calendar reads (expected end, walltime, ...)."""
    return Field(
        default_factory=dict,
        max_length=1000,
        description="The pod's gpuopt.io/ annotations, as written (the job calendar reads "
        "its expected end, walltime and other times from them: models/calendar.md F3, F6).",
    )


def active_deadline_field() -> Any:
    """The ``active_deadline`` of a task or a waiting pod: Kubernetes'
    ``spec.activeDeadlineSeconds``."""
    return Field(
        default=None,
        gt=0,
        le=MAX_TIME,
        description="Seconds it may run from its start (spec.activeDeadlineSeconds).",
    )


def spread_field(description: str) -> Any:
    """The ``topology_spread`` of a waiting pod, a request or a gang's pods (K11): their
    DoNotSchedule topology spread constraints."""
    return Field(default_factory=list, max_length=1000, description=description)


def priority_class_field() -> Any:
    """The ``priority_class`` of a task or a waiting pod: its PriorityClass name."""
    return Field(
        default=None,
        description="Its PriorityClass name (spec.priorityClassName; the job calendar's "
        "weights are per class).",
    )


def check_share(owner: str, gpus: int, gpu_milli: int | None) -> None:
    """C7: a share is of one GPU."""
    if gpu_milli is not None and gpus != 1:
        raise ValueError(f"{owner}: gpu_milli is a share of one GPU, not of gpus={gpus}")


def _check_selector(owner: str, selector: dict[str, SelectorValue]) -> None:
    for key, wanted in selector.items():
        if isinstance(wanted, list) and not wanted:
            raise ValueError(f"{owner}: node_selector.{key} is an empty list")
