"""Read the Alibaba ``openb`` GPU trace into a defragmentation snapshot.

The trace (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC '23) lists nodes
and pods but not where the pods ran, so :func:`read_openb` *replays* the pods
onto the nodes with a stated placement policy and returns the resulting
:class:`~gpuopt.cluster.Cluster` and an :class:`OpenbReport`.

Files
-----
Node CSV, columns ``sn,cpu_milli,memory_mib,gpu,model`` (``model`` may be
missing or blank). Pod CSV, columns ``name,cpu_milli,memory_mib,num_gpu,
gpu_milli`` and optionally ``gpu_spec,qos,pod_phase,creation_time,
deletion_time,scheduled_time`` (the ``multigpu50`` variant has only the first
five). Other columns are ignored. A missing file, a missing column, a row with
the wrong number of fields or a value that is not a number raises
:class:`~gpuopt.errors.ProblemError` naming the file, line and column.

Nodes
-----
One node per row, in file order: ``id`` = ``sn``, ``gpus`` = ``gpu``,
``cpus`` = ``cpu_milli / 1000``, ``memory`` = ``memory_mib`` (MiB, the same
unit as the tasks'), ``labels`` = ``{"gpu_model": model}`` when the model is
not blank. Nodes without GPUs are kept when the file has them (the
``all_node`` variant); they can take CPU-only pods. The trace has no network
topology, so access switches are made up: node ``i`` (file order) gets
``asw = f"asw-{i // asw_size}"``; ``asw_size=None`` gives no switches.

Pods
----
A pod becomes a task with ``id`` = ``name`` (names must be unique),
``gpus`` = ``num_gpu``, ``cpus`` = ``cpu_milli / 1000``, ``memory`` =
``memory_mib``, ``priority`` = ``"HP"`` for qos ``LS`` (latency-sensitive)
and ``Guaranteed``, ``"LP"`` otherwise (also when there is no qos column),
``locked`` when its qos is in ``lock_qos``, and ``node_selector`` =
``{"gpu_model": ...}`` from ``gpu_spec`` (``"V100M16|V100M32"`` gives the
list ``["V100M16", "V100M32"]``, one model gives a string, blank gives no
selector).

* CPU-only pods (``num_gpu == 0``) are kept as tasks with ``gpus=0``: they
  hold CPUs and memory on GPU nodes, which is how GPUs end up idle for want of
  CPUs.
* Fractional pods (``num_gpu == 1`` and ``0 < gpu_milli < 1000``): with
  ``fractional="share"`` (default) each takes ``gpu_milli`` thousandths of
  one GPU (rule C7 of ``models/cluster.md``): it fits a node when one GPU
  has that much left, goes to the GPU with the least room that holds it
  (best fit), and the task records the share and that GPU
  (``gpu_indices``); with ``fractional="round"`` each holds one whole GPU
  and the task records ``gpu_milli`` and that GPU (so it is not packed with
  other shares); with ``fractional="drop"`` they are
  left out and counted in :attr:`OpenbReport.dropped_fractional`.
  ``gpu_milli`` is ignored for pods that do not ask for exactly one GPU.
* Pods that were never scheduled (blank ``scheduled_time``; in the trace these
  are exactly the ``Pending`` pods) are skipped. All other pods are replayed by
  their times whatever their final ``pod_phase`` (``Failed`` and
  ``Succeeded`` pods held resources while they lived).

Replay
------
Pods arrive in order of ``creation_time`` (ties and files without times: file
order). Each arriving pod goes to one node chosen by ``policy`` among the nodes
with enough free GPUs, CPUs and memory whose ``gpu_model`` satisfies its
``gpu_spec``; a pod that fits nowhere is dropped and counted in
:attr:`OpenbReport.dropped_unfit` (no later retry, no preemption). Ties go to
the node first in the file.

* ``"spread"`` (default, like the Kubernetes default scheduler's
  least-allocated scoring): the node with the most free GPUs after placing the
  pod, then the most free CPUs.
* ``"binpack"`` (most-allocated): the node with the fewest free GPUs after
  placing the pod, then the fewest free CPUs.
* ``"random"``: a uniformly random fitting node (``numpy`` generator seeded
  with ``seed``).

Time: with ``at=T`` the replay honours departures. A pod is alive at time
``t`` when ``creation_time <= t < deletion_time`` (a blank ``deletion_time``
means it never leaves); before each arrival the pods that left by then free
their resources, pods created after ``T`` are not replayed, and the snapshot
holds the pods alive at ``T`` (the ones that left are counted in
:attr:`OpenbReport.departed`). With ``at=None`` (default) every pod is
replayed and none leaves, as in the FGD simulator: in the default openb pod
list at most 71 of the 6212 GPUs are held at any one instant, so honouring the
times yields an almost empty cluster (35 pods alive at the last creation time,
which ``at=12901761`` reproduces). ``fill`` (a share of all GPUs, 0..1) stops
the replay as soon as that share is allocated; the pods not replayed count as
skipped. ``at`` needs the time columns.

Examples
--------
>>> problem, report = read_openb(  # doctest: +SKIP
...     "openb_node_list_gpu_node.csv", "openb_pod_list_default.csv", fill=0.9)
>>> report.placed, report.gpus_allocated, report.gpus_total  # doctest: +SKIP
(6575, 5591, 6212)
"""

from __future__ import annotations

import csv
import heapq
import math
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from gpuopt.cluster.model import MAX_AMOUNT, MAX_NODE_GPUS, Cluster
from gpuopt.cluster.shares import MILLI, Devices
from gpuopt.errors import ProblemError, short, validate_object
from gpuopt.io.csvfile import finite_number, open_csv
from gpuopt.io.files import gc_paused
from gpuopt.options import Keywords

if TYPE_CHECKING:
    from gpuopt.sharing.state import Pod, ShareState

Policy = Literal["spread", "binpack", "random"]
Fractional = Literal["share", "round", "drop"]
StopReason = Literal["end", "at", "fill"]

POLICIES: tuple[str, ...] = ("spread", "binpack", "random")
FRACTIONAL_MODES: tuple[str, ...] = ("share", "round", "drop")
#: Node label that carries the GPU model (the key of the pods' node selectors).
MODEL_LABEL = "gpu_model"
#: Quality-of-service classes whose pods become high-priority tasks.
HP_QOS = frozenset({"LS", "Guaranteed"})
#: The openb pod lists of the FGD paper's experiments (``openb_pod_list_<trace>.csv``).
OPENB_TRACES = ("default", "multigpu50", "gpushare100", "gpuspec33")
#: The openb node list (the 1,213 GPU nodes).
OPENB_NODES = "openb_node_list_gpu_node.csv"
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


@dataclass(frozen=True)
class OpenbReport:
    """What :func:`read_openb` did with the trace.

    Every pod read falls in exactly one of ``placed``, ``departed``,
    ``dropped_unfit``, ``dropped_fractional`` and ``skipped``.

    Attributes
    ----------
    pods_read
        Rows of the pod file.
    placed
        Pods in the snapshot (placed and still alive).
    departed
        Pods placed that left before the snapshot time (only with ``at``).
    dropped_unfit
        Pods that fitted on no node when they arrived.
    dropped_fractional
        Fractional pods left out by ``fractional="drop"``.
    skipped
        Pods not replayed: never scheduled, created after ``at``, never alive
        (``deletion_time <= creation_time`` with ``at``), or not reached because
        ``fill`` was met.
    skipped_unscheduled
        Pods of the file that were never scheduled (blank ``scheduled_time``);
        they are among ``skipped``.
    gpus_allocated
        GPUs held by the snapshot's tasks.
    gpus_total
        GPUs of all nodes.
    time
        Trace time of the snapshot: ``at``, else the creation time of the last
        pod replayed; None when the pod file has no times.
    stopped_by
        ``"fill"`` when ``fill`` was met, else ``"at"`` when ``at`` was given,
        else ``"end"``.
    seconds
        Wall-clock seconds the reader took (not compared by ``==``).
    """

    pods_read: int
    placed: int
    departed: int
    dropped_unfit: int
    dropped_fractional: int
    skipped: int
    skipped_unscheduled: int
    gpus_allocated: int
    gpus_total: int
    time: float | None
    stopped_by: StopReason
    seconds: float = field(default=0.0, compare=False)

    @property
    def gpu_share(self) -> float:
        """Share of all GPUs the snapshot's tasks hold (0 when there are none)."""
        return self.gpus_allocated / self.gpus_total if self.gpus_total else 0.0

    def summary(self) -> str:
        """One line for people: the counts, the GPU share and the time taken."""
        at = "" if self.time is None else f" at t={self.time:g}"
        return (
            f"{self.pods_read} pods read: {self.placed} placed, {self.departed} departed, "
            f"{self.dropped_unfit} dropped (fit nowhere), {self.dropped_fractional} dropped "
            f"(fractional), {self.skipped} skipped ({self.skipped_unscheduled} never scheduled); "
            f"{self.gpus_allocated}/{self.gpus_total} GPUs allocated "
            f"({100 * self.gpu_share:.1f}%){at}, stopped by {self.stopped_by}, "
            f"{self.seconds:.2f} s"
        )


@dataclass(frozen=True, slots=True)
class _Pod:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    gpu_milli: int
    spec: tuple[str, ...]
    qos: str
    created: float
    deleted: float
    scheduled: bool
    phase: str = ""

    @property
    def fractional(self) -> bool:
        return self.gpus == 1 and 0 < self.gpu_milli < 1000


#: One row of an openb pod CSV: ``name``, ``cpu_milli``, ``memory_mib``, ``gpus``
#: (``num_gpu``), ``gpu_milli``, ``spec`` (the allowed GPU models of ``gpu_spec``,
#: empty = any), ``qos``, ``created``, ``deleted``, ``scheduled``.
OpenbPod = _Pod


@dataclass(frozen=True)
class _Table:
    """A CSV file: its header positions and its rows with their line numbers."""

    path: Path
    columns: dict[str, int]
    rows: list[tuple[int, list[str]]]

    def cell(self, row: list[str], column: str) -> str:
        return row[self.columns[column]].strip()

    def identifier(
        self, line: int, row: list[str], column: str, what: str, lines: dict[str, int]
    ) -> str:
        """The row's id in ``column``: not blank and not on an earlier line (kept in ``lines``)."""
        name = self.cell(row, column)
        if not name:
            raise ProblemError(f"{self.path}: line {line}, column {column!r} is blank.")
        if name in lines:
            raise ProblemError(
                f"{self.path}: line {line}, column {column!r}: {what} {short(name)} already "
                f"appears on line {lines[name]}."
            )
        lines[name] = line
        return name

    def whole(self, line: int, row: list[str], column: str, limit: float = MAX_AMOUNT) -> int:
        text = self.cell(row, column)
        if not (text.isascii() and text.isdigit()):
            what = "is blank" if not text else f"is {short(text)}"
            raise ProblemError(
                f"{self.path}: line {line}, column {column!r} {what}, expected a whole number >= 0."
            )
        if len(text) > 20 or int(text) > limit:  # int() refuses 4,300 digits and more
            shown = text if len(text) <= 20 else f"a number of {len(text)} digits"
            raise ProblemError(
                f"{self.path}: line {line}, column {column!r} is {shown}, more than the most "
                f"allowed ({limit:g})."
            )
        return int(text)

    def moment(self, line: int, row: list[str], column: str) -> float | None:
        text = self.cell(row, column)
        if not text:
            return None
        value = finite_number(text)
        if value is None:
            raise ProblemError(
                f"{self.path}: line {line}, column {column!r} is {short(text)}, expected a time in "
                "seconds."
            )
        return value


def _read_table(path: str | Path, required: tuple[str, ...]) -> _Table:
    path = Path(path)
    with open_csv(path, encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = [name.strip() for name in next(reader, [])]
        if not header:
            raise ProblemError(f"{path}: the file is empty, expected a CSV header line.")
        rows: list[tuple[int, list[str]]] = []
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != len(header):
                raise ProblemError(
                    f"{path}: line {reader.line_num} has {len(row)} fields but the header "
                    f"has {len(header)}."
                )
            rows.append((reader.line_num, row))
    columns: dict[str, int] = {}
    for position, name in enumerate(header):
        columns.setdefault(name, position)
    missing = [name for name in required if name not in columns]
    if missing:
        raise ProblemError(
            f"{path}: line 1 lacks the column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(name) for name in missing)}."
        )
    return _Table(path, columns, rows)


def _read_nodes(path: str | Path, asw_size: int | None) -> list[dict[str, Any]]:
    table = _read_table(path, NODE_COLUMNS)
    nodes: list[dict[str, Any]] = []
    lines: dict[str, int] = {}
    for position, (line, row) in enumerate(table.rows):
        node_id = table.identifier(line, row, "sn", "node", lines)
        node: dict[str, Any] = {
            "id": node_id,
            "gpus": table.whole(line, row, "gpu", MAX_NODE_GPUS),
            "cpus": table.whole(line, row, "cpu_milli") / 1000,
            "memory": float(table.whole(line, row, "memory_mib")),
        }
        model = table.cell(row, "model") if "model" in table.columns else ""
        node["labels"] = {MODEL_LABEL: model} if model else {}
        if asw_size is not None:
            node["asw"] = f"asw-{position // asw_size}"
        nodes.append(node)
    return nodes


def _read_pods(path: str | Path) -> tuple[list[_Pod], bool]:
    """The pods in file order, and whether the file has times."""
    table = _read_table(path, POD_COLUMNS)
    has_times = "creation_time" in table.columns
    lines: dict[str, int] = {}
    pods: list[_Pod] = []
    for line, row in table.rows:
        name = table.identifier(line, row, "name", "pod", lines)
        gpu_milli = table.whole(line, row, "gpu_milli")
        if gpu_milli > 1000:
            raise ProblemError(
                f"{table.path}: line {line}, column 'gpu_milli' is {gpu_milli}, expected 0 to 1000."
            )
        created = 0.0
        deleted = math.inf
        scheduled = True
        if has_times:
            moment = table.moment(line, row, "creation_time")
            if moment is None:
                raise ProblemError(f"{table.path}: line {line}, column 'creation_time' is blank.")
            created = moment
            if "deletion_time" in table.columns:
                moment = table.moment(line, row, "deletion_time")
                deleted = math.inf if moment is None else moment
        if "scheduled_time" in table.columns:
            scheduled = table.moment(line, row, "scheduled_time") is not None
        spec = ""
        if "gpu_spec" in table.columns:
            spec = table.cell(row, "gpu_spec")
        models = tuple(dict.fromkeys(m.strip() for m in spec.split("|") if m.strip()))
        pods.append(
            _Pod(
                name=name,
                cpu_milli=table.whole(line, row, "cpu_milli"),
                memory_mib=table.whole(line, row, "memory_mib"),
                gpus=table.whole(line, row, "num_gpu"),
                gpu_milli=gpu_milli,
                spec=models,
                qos=table.cell(row, "qos") if "qos" in table.columns else "",
                created=created,
                deleted=deleted,
                scheduled=scheduled,
                phase=table.cell(row, "pod_phase") if "pod_phase" in table.columns else "",
            )
        )
    return pods, has_times


def read_openb_nodes(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an openb node CSV as node dicts, validated (see the module docstring).

    Each dict has ``id``, ``gpus``, ``cpus`` (cores), ``memory`` (MiB) and
    ``labels`` (``{"gpu_model": model}`` when the model is not blank); bad
    rows raise :class:`~gpuopt.errors.ProblemError` naming the file, line and
    column. No access switches are made up.
    """
    return _read_nodes(path, None)


def read_openb_pods(path: str | Path) -> list[OpenbPod]:
    """The rows of an openb pod CSV as :class:`OpenbPod` records, in file order, validated."""
    return _read_pods(path)[0]


def _check_options(
    at: float | None,
    fill: float | None,
    policy: str,
    fractional: str,
    asw_size: int | None,
    seed: int,
) -> None:
    if policy not in POLICIES:
        raise ProblemError(f"policy: expected 'spread', 'binpack' or 'random' (got {policy!r}).")
    if fractional not in FRACTIONAL_MODES:
        raise ProblemError(f"fractional: expected 'share', 'round' or 'drop' (got {fractional!r}).")
    if fill is not None and (
        isinstance(fill, bool) or not isinstance(fill, int | float) or not 0 <= fill <= 1
    ):
        raise ProblemError(f"fill: expected a share from 0 to 1 (got {fill!r}).")
    if at is not None and (
        isinstance(at, bool) or not isinstance(at, int | float) or math.isnan(at)
    ):
        raise ProblemError(f"at: expected a time in seconds (got {at!r}).")
    if asw_size is not None and (
        isinstance(asw_size, bool) or not isinstance(asw_size, int) or asw_size < 1
    ):
        raise ProblemError(f"asw_size: expected a whole number >= 1 or None (got {asw_size!r}).")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ProblemError(f"seed: expected a whole number >= 0 (got {seed!r}).")


class _Cluster:
    """Free resources per node (numpy arrays, each node's GPUs) and the placement policies."""

    def __init__(self, nodes: list[dict[str, Any]], policy: str, seed: int, shares: bool) -> None:
        self.devices = [Devices(n["gpus"]) for n in nodes]
        self.free_gpus = np.array([n["gpus"] for n in nodes], dtype=np.int64)
        # the largest share one GPU of each node can still take (0 without GPUs)
        self.best_share = np.where(self.free_gpus > 0, MILLI, 0).astype(np.int64)
        self.free_cpus = np.array([round(n["cpus"] * 1000) for n in nodes], dtype=np.int64)
        self.free_memory = np.array([int(n["memory"]) for n in nodes], dtype=np.int64)
        self.models = np.array([n["labels"].get(MODEL_LABEL, "") for n in nodes], dtype=object)
        self.policy = policy
        self.shares = shares
        self.rng = np.random.default_rng(seed)
        self._spec_masks: dict[tuple[str, ...], np.ndarray] = {}

    def _milli(self, pod: _Pod) -> int:
        return pod.gpu_milli if self.shares and pod.fractional else MILLI

    def choose(self, pod: _Pod) -> int | None:
        """The node ``pod`` goes to, or None when it fits nowhere."""
        milli = self._milli(pod)
        fits = self.best_share >= milli if milli < MILLI else self.free_gpus >= pod.gpus
        fits &= self.free_cpus >= pod.cpu_milli
        fits &= self.free_memory >= pod.memory_mib
        if pod.spec:
            mask = self._spec_masks.get(pod.spec)
            if mask is None:
                mask = self._spec_masks[pod.spec] = np.isin(self.models, list(pod.spec))
            fits &= mask
        candidates = np.flatnonzero(fits)
        if candidates.size == 0:
            return None
        if self.policy == "random":
            return int(candidates[self.rng.integers(candidates.size)])
        gpus = self.free_gpus[candidates]
        best = gpus.max() if self.policy == "spread" else gpus.min()
        candidates = candidates[gpus == best]
        cpus = self.free_cpus[candidates]
        pick = cpus.argmax() if self.policy == "spread" else cpus.argmin()
        return int(candidates[pick])

    def take(self, node: int, pod: _Pod, sign: int = 1) -> tuple[int, ...]:
        """Give ``pod`` (sign 1) or take back (-1) its resources; its GPUs and the change in use."""
        devices = self.devices[node]
        used = devices.used
        if sign > 0:
            chosen = devices.take(pod.name, pod.gpus, self._milli(pod))
            assert chosen is not None  # choose() checked it
        else:
            chosen = ()
            devices.release(pod.name)
        self.free_gpus[node] = devices.free
        self.best_share[node] = devices.best_share()
        self.free_cpus[node] -= sign * pod.cpu_milli
        self.free_memory[node] -= sign * pod.memory_mib
        self.change = devices.used - used
        return chosen


def _task(
    pod: _Pod, node_id: str, locked_qos: frozenset[str], timed: bool, gpu: int | None
) -> dict[str, Any]:
    task: dict[str, Any] = {
        "id": pod.name,
        "node": node_id,
        "gpus": pod.gpus,
        "cpus": pod.cpu_milli / 1000,
        "memory": float(pod.memory_mib),
        "priority": "HP" if pod.qos in HP_QOS else "LP",
        "locked": pod.qos in locked_qos,
    }
    if pod.fractional:
        task["gpu_milli"] = pod.gpu_milli
    if gpu is not None:
        task["gpu_indices"] = [gpu]
    if pod.spec:
        task["node_selector"] = {MODEL_LABEL: pod.spec[0] if len(pod.spec) == 1 else list(pod.spec)}
    if timed and pod.created >= 0:
        task["start_time"] = pod.created
    return task


@dataclass(frozen=True)
class OpenbOptions:
    """How :func:`read_openb` replays a trace: its options as one object, checked when made.

    Each field is the keyword of the same name (see its parameters); ``lock_qos``
    is kept as a frozenset (one string is one class).

    >>> OpenbOptions(policy="binpack", lock_qos="LS").lock_qos
    frozenset({'LS'})
    """

    at: float | None = None
    fill: float | None = None
    policy: Policy = "spread"
    fractional: Fractional = "share"
    asw_size: int | None = 16
    lock_qos: Collection[str] = ()
    seed: int = 0
    name: str | None = None
    workload: bool = True

    def __post_init__(self) -> None:
        _check_options(self.at, self.fill, self.policy, self.fractional, self.asw_size, self.seed)
        qos = self.lock_qos
        object.__setattr__(self, "lock_qos", frozenset([qos] if isinstance(qos, str) else qos))


#: :func:`read_openb`'s keywords: the fields of :class:`OpenbOptions`.
OPENB_KEYWORDS = Keywords.of(OpenbOptions)


@OPENB_KEYWORDS.signature
def read_openb(
    nodes_csv: str | Path,
    pods_csv: str | Path,
    options: OpenbOptions | None = None,
    **settings: Any,
) -> tuple[Cluster, OpenbReport]:
    """Replay an openb trace onto its nodes and return the snapshot and a report.

    The mapping and the replay rules are in the module docstring.

    Parameters
    ----------
    nodes_csv
        Node list, e.g. ``openb_node_list_gpu_node.csv``.
    pods_csv
        Pod list, e.g. ``openb_pod_list_default.csv``.
    options
        The options below as one :class:`OpenbOptions` (keywords given as well
        override its fields).
    at
        Trace time (seconds) of the snapshot; departures are honoured up to it.
        None replays every pod and lets none leave.
    fill
        Stop the replay once this share (0..1) of all GPUs is allocated.
    policy
        ``"spread"`` (least-allocated, default), ``"binpack"`` (most-allocated)
        or ``"random"``.
    fractional
        ``"share"`` (default) gives a fractional pod its ``gpu_milli`` of
        one GPU (rule C7); ``"round"`` gives it one whole GPU (recording its
        ``gpu_milli``); ``"drop"`` leaves fractional pods out.
    asw_size
        Nodes per made-up access switch (file order); None for no switches.
    lock_qos
        QoS classes (e.g. ``{"LS"}``) whose pods are locked (may not move).
    seed
        Seed of the ``"random"`` policy.
    name
        Snapshot name; default ``openb-<pod file name without extension>``.
    workload
        Record the trace's typical workload (FGD's most common shapes covering
        95 % of the pod file's pods, :func:`gpuopt.sharing.typical_workload`)
        as the snapshot's ``options.workload``, so that defragmentation
        maximises their slots by default (``models/defrag.md``, X9).

    Returns
    -------
    tuple of Cluster and OpenbReport
        The validated snapshot and the counts of what happened to the pods.

    Raises
    ------
    ProblemError
        For a missing or malformed file (naming the file, line and column) or a
        bad option.
    """
    started = time.perf_counter()
    run = OPENB_KEYWORDS.resolve(options, settings)
    with gc_paused():  # (hundreds of thousands of objects that live on)
        nodes = _read_nodes(nodes_csv, run.asw_size)
        pods, has_times = _read_pods(pods_csv)
        if run.at is not None and not has_times:
            raise ProblemError(f"{pods_csv}: has no creation_time column, so at= cannot be used.")
        replay = _Replay(nodes, pods, run)
        replay.replay(has_times)
        problem = replay.snapshot(pods_csv, has_times)
        return problem, replay.report(time.perf_counter() - started)


class _Replay:
    """The trace replayed onto the nodes: the pods placed where, and what happened to the rest."""

    def __init__(
        self, nodes: list[dict[str, Any]], pods: list[_Pod], options: OpenbOptions
    ) -> None:
        self.nodes = nodes
        self.pods = pods
        self.options = options
        self.cluster = _Cluster(nodes, options.policy, options.seed, options.fractional == "share")
        self.gpus_total = sum(node["gpus"] for node in nodes)
        self.placed_at: dict[int, int] = {}  # pod position -> node position, in placement order
        self.share_gpu: dict[int, int] = {}  # pod position -> the GPU its share sits on
        self.leaving: list[tuple[float, int]] = []  # (deletion time, pod position) of placed pods
        self.allocated = self.departed = self.dropped_unfit = self.dropped_fractional = 0
        self.snapshot_time: float | None = None
        self.stopped_by: StopReason = "at" if options.at is not None else "end"

    def leave(self, until: float) -> None:
        """Take back the resources of the placed pods deleted by ``until``."""
        while self.leaving and self.leaving[0][0] <= until:
            _, k = heapq.heappop(self.leaving)
            self.cluster.take(self.placed_at.pop(k), self.pods[k], sign=-1)
            self.share_gpu.pop(k, None)
            self.allocated += self.cluster.change
            self.departed += 1

    def replay(self, has_times: bool) -> None:
        """Place the pods in creation order up to ``at`` or ``fill``, letting them leave."""
        at, fill, pods = self.options.at, self.options.fill, self.pods
        target = None if fill is None else fill * self.gpus_total
        order = (
            sorted(range(len(pods)), key=lambda k: pods[k].created)
            if has_times
            else range(len(pods))
        )
        for k in order:
            if target is not None and self.allocated >= target:
                self.stopped_by = "fill"
                break
            pod = pods[k]
            if at is not None and pod.created > at:
                break
            if not pod.scheduled or (at is not None and pod.deleted <= pod.created):
                continue
            if at is not None:
                self.leave(pod.created)
            if has_times:
                self.snapshot_time = pod.created
            self.place(k)
        else:
            if target is not None and self.allocated >= target:
                self.stopped_by = "fill"
        if at is not None and self.stopped_by == "at":
            self.leave(at)
            self.snapshot_time = float(at)

    def place(self, k: int) -> None:
        """Place pod ``k`` by the policy, or count it dropped (fractional or fitting nowhere)."""
        pod = self.pods[k]
        if self.options.fractional == "drop" and pod.fractional:
            self.dropped_fractional += 1
            return
        node = self.cluster.choose(pod)
        if node is None:
            self.dropped_unfit += 1
            return
        chosen = self.cluster.take(node, pod)
        self.placed_at[k] = node
        if pod.fractional:  # its GPU: shared (share) or its own (round), as the replay put it
            self.share_gpu[k] = chosen[0]
        self.allocated += self.cluster.change
        if self.options.at is not None and math.isfinite(pod.deleted):
            heapq.heappush(self.leaving, (pod.deleted, k))

    def snapshot(self, pods_csv: str | Path, has_times: bool) -> Cluster:
        """The validated snapshot of the pods placed, with its clock when the trace has times."""
        options, nodes, pods = self.options, self.nodes, self.pods
        # the snapshot's clock and the tasks' start times, when the trace has (non-negative) times
        snapshot_time = self.snapshot_time
        timed = has_times and snapshot_time is not None and snapshot_time >= 0
        locked_qos = frozenset(options.lock_qos)
        tasks = [
            _task(pods[k], nodes[node]["id"], locked_qos, timed, self.share_gpu.get(k))
            for k, node in self.placed_at.items()
        ]
        name = options.name if options.name is not None else f"openb-{Path(pods_csv).stem}"
        snapshot: dict[str, Any] = {"name": name, "nodes": nodes, "tasks": tasks}
        if timed:
            snapshot["now"] = snapshot_time
        typical = _typical_items(pods) if options.workload else None
        if typical:
            snapshot["options"] = {"workload": typical}
        return validate_object(Cluster, snapshot, what="a snapshot", source=str(pods_csv))

    def report(self, seconds: float) -> OpenbReport:
        """The counts of what happened to the pods."""
        pods, placed = self.pods, len(self.placed_at)
        dropped = self.dropped_unfit + self.dropped_fractional
        return OpenbReport(
            pods_read=len(pods),
            placed=placed,
            departed=self.departed,
            dropped_unfit=self.dropped_unfit,
            dropped_fractional=self.dropped_fractional,
            skipped=len(pods) - placed - self.departed - dropped,
            skipped_unscheduled=sum(1 for pod in pods if not pod.scheduled),
            gpus_allocated=self.allocated,
            gpus_total=self.gpus_total,
            time=self.snapshot_time,
            stopped_by=self.stopped_by,
            seconds=seconds,
        )


def _typical_items(pods: list[_Pod]) -> list[dict[str, Any]] | None:
    """The typical workload of ``pods`` as ``options.workload`` items (FGD's shapes); pods
    asking for neither CPU nor GPU are left out (they fit anywhere). None: no such pod."""
    from gpuopt.cluster.workload import Shape, typical_workload

    shapes = []
    for pod in pods:
        try:
            shapes.append(
                Shape(pod.cpu_milli, pod.gpu_milli if pod.gpus else 0, pod.gpus, pod.spec)
            )
        except ProblemError:
            continue  # a shape the simulator could not run either (e.g. over 8 GPUs)
    shapes = [s for s in shapes if s.gpus or s.cpu_milli]
    if not shapes:
        return None
    typical = typical_workload(shapes)
    return [
        {
            "cpu_milli": s.cpu_milli,
            "gpu_milli": s.gpu_milli,
            "gpus": s.gpus,
            "models": list(s.models),
            "weight": f,
        }
        for s, f in zip(typical.shapes, typical.frequencies, strict=True)
    ]


def share_state(nodes_csv: str | Path) -> ShareState:
    """An empty :class:`~gpuopt.sharing.state.ShareState` of the nodes of an openb node CSV
    (``sn,cpu_milli,memory_mib,gpu,model``), for the FGD replay."""
    from gpuopt.sharing.state import ShareState

    return ShareState.from_node_dicts(read_openb_nodes(nodes_csv))


def trace_pods(path: str | Path, notes: list[str] | None = None) -> list[Pod]:
    """The pods of an openb pod CSV, in file order, as the FGD replay takes them.

    When ``notes`` is a list, one sentence per column the replay reads but does not use
    (``qos``, ``pod_phase``, the times), with its counts, is appended to it: the FGD
    protocol (R1) places every pod of the trace alike, in a random order, for good.
    """
    from gpuopt.cluster.workload import Shape
    from gpuopt.sharing.state import Pod

    rows = read_openb_pods(path)
    pods: list[Pod] = []
    for row in rows:
        try:
            shape = Shape(
                row.cpu_milli, row.gpu_milli if row.gpus else 0, row.gpus, tuple(row.spec)
            )
        except ProblemError as exc:
            raise ProblemError(
                f"{path}: pod {row.name!r}: {str(exc).removeprefix('shape: ')}"
            ) from None
        pods.append(Pod(shape, row.memory_mib))
    if notes is not None:
        notes.extend(_unused_columns(path, rows))
    return pods


def _counted(values: Sequence[str]) -> str:
    """``'LS 3,837, BE 1,330'``: each value with its count, most common first."""
    counts = Counter(value or "blank" for value in values)
    return ", ".join(f"{value} {count:,}" for value, count in counts.most_common())


def _unused_columns(path: str | Path, rows: Sequence[Any]) -> list[str]:
    """Sentences on the columns of the pod CSV ``path`` that the replay does not use."""
    with open(path, encoding="utf-8", newline="") as handle:
        header = {name.strip() for name in next(csv.reader(handle), [])}
    notes = []
    if "qos" in header:
        notes.append(
            f"qos is not used ({_counted([row.qos for row in rows])}): "
            "the FGD protocol places every pod alike."
        )
    if "pod_phase" in header:
        notes.append(
            f"pod_phase is not used ({_counted([row.phase for row in rows])}): "
            "every pod of the trace arrives, as in the FGD simulator."
        )
    times = [
        name for name in ("creation_time", "deletion_time", "scheduled_time") if name in header
    ]
    if times:
        notes.append(
            f"{', '.join(times)} {'is' if len(times) == 1 else 'are'} not used for "
            f"{len(rows):,} pods: they arrive in a seeded random order and never leave (R1)."
        )
    return notes


def load_openb(
    folder: str | Path, trace: str, notes: list[str] | None = None
) -> tuple[ShareState, list[Pod]]:
    """The openb GPU nodes (empty) and the pods of ``trace`` (one of
    :data:`OPENB_TRACES`), for the FGD replay
    (:func:`gpuopt.simulate.pods.replay`); ``notes`` as in :func:`trace_pods`."""
    if trace not in OPENB_TRACES:
        raise ProblemError(
            f"trace {trace!r} is unknown; expected one of {', '.join(OPENB_TRACES)}."
        )
    folder = Path(folder)
    return share_state(folder / OPENB_NODES), trace_pods(
        folder / f"openb_pod_list_{trace}.csv", notes
    )


__all__ = [
    "HP_QOS",
    "MODEL_LABEL",
    "OPENB_KEYWORDS",
    "OPENB_NODES",
    "OPENB_TRACES",
    "OpenbOptions",
    "OpenbPod",
    "OpenbReport",
    "load_openb",
    "read_openb",
    "read_openb_nodes",
    "read_openb_pods",
    "share_state",
    "trace_pods",
]
