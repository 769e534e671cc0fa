"""GPU shares: which GPU of a node each task holds, and what each GPU has left (rule C7).

A task asks for whole GPUs, or for a *share* of one GPU in thousandths
(``gpu_milli`` 1-999, with ``gpus=1``), as GPU-sharing device plugins offer
(Alibaba's ``alibabacloud.com/gpu-milli``, the openb trace's ``gpu_milli``).
Several shares may sit on one GPU while they sum to at most 1000; a GPU that
holds any share is not free for a whole-GPU task. :class:`Devices` is the
state of one node's GPUs; :func:`layout` lays a node's tasks out on it:

1. tasks that name their GPUs (``gpu_indices``) take them, in task order;
2. whole-GPU tasks take the lowest-index fully free GPUs, in task order;
3. shares take, largest first, the GPU with the least left that still
   holds them (best fit, lowest index on ties): what GPU-sharing schedulers
   do (the openb simulator's ``best`` choice, Alibaba's binpack).

When step 3 leaves a share out, an exact search over the node's shares
(GPUs with equal room are not tried twice; at most :data:`EXACT_STEPS`
steps) decides whether some other packing fits, so a legal snapshot is not
refused for a heuristic's sake.

>>> devices = Devices(2)
>>> devices.take("a", 1, 600), devices.take("b", 1, 300), devices.take("c", 1, 500)
((0,), (0,), (1,))
>>> devices.left, devices.free, devices.used
([100, 500], 0, 2)
>>> devices.take("d", 1, 1000) is None  # no fully free GPU left
True
>>> devices.release("a"); devices.left
[700, 500]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

#: Thousandths of one GPU.
MILLI = 1000
#: Steps of the exact search :func:`layout` runs when best fit leaves a share out (a node
#: whose shares need more is treated as if they did not fit; none has been seen).
EXACT_STEPS = 200_000


class Holder(Protocol):
    """What :func:`layout` reads of a task."""

    @property
    def id(self) -> str: ...
    @property
    def gpus(self) -> int: ...
    @property
    def gpu_milli(self) -> int | None: ...
    @property
    def gpu_indices(self) -> list[int] | None: ...


def share_of(task: Holder) -> int:
    """The thousandths a task takes on each of its GPUs (1000 for a whole-GPU task)."""
    return MILLI if task.gpu_milli is None else task.gpu_milli


@dataclass
class Devices:
    """One node's GPUs: what each has left (thousandths) and which tasks hold which."""

    gpus: int
    left: list[int] = field(default_factory=list)
    #: task id -> (its GPU indices, thousandths on each).
    holders: dict[str, tuple[tuple[int, ...], int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.left:
            self.left = [MILLI] * self.gpus

    @property
    def free(self) -> int:
        """Fully free GPUs."""
        return sum(1 for left in self.left if left == MILLI)

    @property
    def used(self) -> int:
        """GPUs holding anything (a GPU with one share counts as used)."""
        return self.gpus - self.free

    @property
    def idle(self) -> int:
        """Unallocated thousandths over all GPUs."""
        return sum(self.left)

    def best_share(self) -> int:
        """The largest share one more task could take on a single GPU."""
        return max(self.left, default=0)

    def choose(
        self, gpus: int, milli: int, indices: Sequence[int] | None = None
    ) -> tuple[int, ...] | None:
        """The GPUs a task of ``gpus`` x ``milli`` would take (None: it does not fit)."""
        if gpus == 0:
            return ()
        if indices is not None:
            chosen = tuple(indices)
            if len(chosen) != gpus or any(
                not 0 <= gpu < self.gpus or self.left[gpu] < milli for gpu in chosen
            ):
                return None
            return chosen
        if milli >= MILLI or gpus > 1:
            whole = [gpu for gpu, left in enumerate(self.left) if left == MILLI][:gpus]
            return tuple(whole) if len(whole) == gpus else None
        best: int | None = None
        for gpu, left in enumerate(self.left):
            if left >= milli and (best is None or left < self.left[best]):
                best = gpu
        return None if best is None else (best,)

    def take(
        self, task: str, gpus: int, milli: int, indices: Sequence[int] | None = None
    ) -> tuple[int, ...] | None:
        """Give ``task`` its GPUs (see :meth:`choose`); None and no change if it does not fit."""
        chosen = self.choose(gpus, milli, indices)
        if chosen is None:
            return None
        for gpu in chosen:
            self.left[gpu] -= milli
        self.holders[task] = (chosen, milli)
        return chosen

    def release(self, task: str) -> None:
        """Give back what ``task`` holds (nothing if it holds nothing here)."""
        chosen, milli = self.holders.pop(task, ((), 0))
        for gpu in chosen:
            self.left[gpu] += milli

    def sharing(self) -> dict[int, list[str]]:
        """GPU index -> the tasks holding a share of it, for GPUs held by two or more."""
        on: dict[int, list[str]] = {}
        for task, (chosen, milli) in self.holders.items():
            if milli < MILLI:
                for gpu in chosen:
                    on.setdefault(gpu, []).append(task)
        return {gpu: tasks for gpu, tasks in on.items() if len(tasks) > 1}

    def copy(self) -> Devices:
        return Devices(self.gpus, list(self.left), dict(self.holders))


def layout(gpus: int, tasks: Iterable[Holder]) -> tuple[Devices, list[Holder]]:
    """Lay ``tasks`` out on a node of ``gpus`` GPUs; return the GPUs and the tasks left out.

    Order: named GPUs, then whole GPUs, then shares best fit largest first;
    when shares are left out, an exact search (at most :data:`EXACT_SHARES`
    shares) tries every packing of the node's unnamed shares before giving up.
    """
    devices = Devices(gpus)
    named: list[Holder] = []
    whole: list[Holder] = []
    shares: list[Holder] = []
    for task in tasks:
        if task.gpu_indices is not None:
            named.append(task)
        elif share_of(task) < MILLI and task.gpus == 1:
            shares.append(task)
        else:
            whole.append(task)
    out: list[Holder] = []
    for task in named:
        if devices.take(task.id, task.gpus, share_of(task), task.gpu_indices) is None:
            out.append(task)
    for task in whole:
        if devices.take(task.id, task.gpus, share_of(task)) is None:
            out.append(task)
    shares.sort(key=share_of, reverse=True)
    before = devices.copy()
    missed = [task for task in shares if devices.take(task.id, 1, share_of(task)) is None]
    if missed:
        packed = _pack_exactly(before.left, [share_of(task) for task in shares])
        if packed is not None:
            devices = before
            for task, gpu in zip(shares, packed, strict=True):
                devices.take(task.id, 1, share_of(task), (gpu,))
            missed = []
    return devices, out + missed


def _pack_exactly(left: list[int], sizes: list[int]) -> list[int] | None:
    """A GPU for each share (sizes largest first) within ``left``, or None if none exists."""
    room = list(left)
    chosen: list[int] = []
    if sum(sizes) > sum(max(free, 0) for free in room):
        return None
    steps = [EXACT_STEPS]

    def place(item: int) -> bool:
        if item == len(sizes):
            return True
        steps[0] -= 1
        if steps[0] < 0:
            return False
        tried: set[int] = set()
        for gpu, free in enumerate(room):
            if free >= sizes[item] and free not in tried:  # GPUs with equal room are alike
                tried.add(free)
                room[gpu] -= sizes[item]
                chosen.append(gpu)
                if place(item + 1):
                    return True
                chosen.pop()
                room[gpu] += sizes[item]
        return False

    return chosen if place(0) else None


def gpus_needed(tasks: Sequence[Holder]) -> int:
    """The fewest GPUs ``tasks`` fit on (whole GPUs plus shares packed; named GPUs ignored)."""
    whole = sum(task.gpus for task in tasks if share_of(task) >= MILLI or task.gpus != 1)
    shares = [share_of(task) for task in tasks if share_of(task) < MILLI and task.gpus == 1]
    if not shares:
        return whole
    largest = sorted(shares, reverse=True)
    for count in range(-(-sum(shares) // MILLI), len(shares) + 1):
        devices = Devices(count)
        if all(devices.take(str(i), 1, size) is not None for i, size in enumerate(largest)):
            return whole + count
        if _pack_exactly([MILLI] * count, largest):
            return whole + count
    return whole + len(shares)


class _Node(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def gpus(self) -> int: ...


class _Placed(Holder, Protocol):
    @property
    def node(self) -> str: ...


P = TypeVar("P", bound=_Placed)


def on_sharing_nodes(tasks: Iterable[P]) -> dict[str, list[P]]:
    """The tasks of every node that runs a GPU share, by node id, in task order."""
    listed = list(tasks)
    on: dict[str, list[P]] = {task.node: [] for task in listed if task.gpu_milli is not None}
    for task in listed:
        if task.node in on:
            on[task.node].append(task)
    return on


def share_layouts(nodes: Iterable[_Node], tasks: Iterable[_Placed]) -> dict[str, Devices]:
    """:func:`layout` of every node that runs a GPU share, by node id (others: none)."""
    on = on_sharing_nodes(tasks)
    return {node.id: layout(node.gpus, on[node.id])[0] for node in nodes if node.id in on}


__all__ = [
    "EXACT_STEPS",
    "MILLI",
    "Devices",
    "Holder",
    "gpus_needed",
    "layout",
    "on_sharing_nodes",
    "share_layouts",
    "share_of",
]
