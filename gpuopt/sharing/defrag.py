"""Defragmentation for a target workload over GPU shares (rules M1-M3 of ``models/sharing.md``).

:class:`ShareDefrag` moves running pods (GPU shares, one-GPU pods and CPU-only
pods) between nodes so that the cluster's workload-aware fragmentation
(:mod:`gpuopt.sharing.fragmentation`) falls, within a move budget. It is the
replay's periodic defragmentation (``gpuopt replay openb --defrag-every K``)
and works on any :class:`~gpuopt.sharing.state.ShareState`.

One call (a *round*):

1. The candidates are the running pods of at most one GPU (with ``nodes``
   set, only those on the ``nodes`` most fragmented nodes).
2. For each candidate ``q`` on node ``a``: the change of ``F_a`` when ``q``
   leaves, plus the least change of ``F_b`` over the nodes ``b != a`` where
   ``q`` fits now (for a share, over the GPUs of ``b`` that hold it), computed
   exactly (no rounding, unlike FGD's score) with the memo of node states.
3. Apply the moves with the largest decrease, at most one per node touched
   (a node's state changes when a move touches it), while the decrease is at
   least ``min_gain`` thousandths of a GPU and the budget lasts.

Every move keeps the rules of :meth:`ShareState.why_not` (CPU, memory, GPU
model, the share fits the GPU, whole GPUs free), checked before it is applied.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuopt.cluster.workload import MILLI, Shape, Workload
from gpuopt.errors import ProblemError
from gpuopt.sharing.fragmentation import (
    FragmentMemo,
    Measure,
    NodeRows,
    TargetArrays,
    fragment_matrix,
)
from gpuopt.sharing.state import Placement, Pod, ShareState


@dataclass(frozen=True)
class Move:
    """One pod moved: its arrival key, where it was, where it goes, the fragmentation change."""

    key: int
    pod: Pod
    source: Placement
    target: Placement
    gain: float


class ShareDefrag:
    """Lower a cluster's fragmentation for ``workload`` with at most ``budget`` moves a round.

    Parameters
    ----------
    workload
        The target workload (memory counts when it states memory).
    budget
        Moves per round.
    nodes
        How many of the most fragmented nodes give candidates each round (None: all).
    min_gain
        Least decrease of the cluster's fragmentation (GPU thousandths) a move must bring.
    """

    def __init__(
        self,
        workload: Workload,
        *,
        budget: int = 16,
        nodes: int | None = None,
        min_gain: float = 1.0,
        tries: int = 16,
        measure: Measure | None = None,
    ) -> None:
        if budget < 0 or (nodes is not None and nodes < 1) or min_gain < 0:
            raise ProblemError(
                f"defragmentation: budget {budget} must be >= 0, nodes {nodes} >= 1 and "
                f"min_gain {min_gain} >= 0."
            )
        self.workload = workload
        self.budget = budget
        self.nodes = nodes
        self.min_gain = min_gain
        self.tries = tries
        #: The node measure the moves lower (F1/F2 by default; gpuopt's policy measure,
        #: :func:`~gpuopt.sharing.fragmentation.gpuopt_matrix`, also works).
        self.measure: Measure = measure or fragment_matrix
        self.moves = 0
        self._held: _Holdings | None = None
        self._table: object = None
        self._target: TargetArrays | None = None
        self._memo: FragmentMemo | None = None
        #: (pod key, state id) -> (least fragmentation change, GPU share left chosen or -1)
        self._best: dict[tuple[tuple[int, int, int, int], int], tuple[float, int]] = {}

    def _bind(self, state: ShareState) -> tuple[TargetArrays, FragmentMemo]:
        if self._table is not state.table:
            self._target = TargetArrays.build(self.workload, state.model_names)
            self._memo = FragmentMemo(self._target, self.measure)
            self._best.clear()
            self._table = state.table
        assert self._target is not None and self._memo is not None
        return self._target, self._memo

    def fragmentation(self, state: ShareState, ids: np.ndarray) -> np.ndarray:
        """F of the node states ``ids`` (GPU thousandths)."""
        target, memo = self._bind(state)
        return np.asarray(memo.of(state, ids) @ target.frequency, dtype=np.float64)

    def _without(self, state: ShareState, pod: Pod, placement: Placement) -> int:
        """The state id of ``placement``'s node once ``pod`` has left it."""
        node, devices = placement
        row = state.left[node].copy()
        for gpu in devices:
            row[gpu] += pod.shape.gpu_milli
        return state.table.intern(
            int(state.model_code[node]),
            int(state.cpu_left[node] + pod.shape.cpu_milli),
            row,
            int(state.mem_left[node] + pod.memory_mib),
        )

    def _arrival(
        self, state: ShareState, pod: Pod, ids: np.ndarray
    ) -> tuple[np.ndarray, list[int]]:
        """Per state id: the least change of F when ``pod`` arrives, and the GPU share left
        of the GPU a share takes (-1 for other pods)."""
        target, memo = self._bind(state)
        shape = pod.shape
        key = (shape.cpu_milli, shape.gpu_milli, shape.gpus, pod.memory_mib)
        missing = [int(i) for i in np.unique(ids) if (key, int(i)) not in self._best]
        if missing:
            todo = np.array(missing, dtype=np.int64)
            before = memo.of(state, todo) @ target.frequency
            rows, taken, frag = memo.after_arrival(state, todo, shape, pod.memory_mib)
            change = frag @ target.frequency - before[rows]
            options = zip(rows.tolist(), taken.tolist(), change.tolist(), strict=True)
            for row, left, delta in options:
                entry = (key, missing[row])
                if entry not in self._best or delta < self._best[entry][0]:
                    self._best[entry] = (delta, left)
        found = [self._best[(key, int(i))] for i in ids]
        return np.array([f[0] for f in found], dtype=np.float64), [f[1] for f in found]

    def best_target(
        self, state: ShareState, pod: Pod, source: int
    ) -> tuple[Placement, float] | None:
        """Where ``pod`` lowers F most off node ``source``, and the change there (None: nowhere)."""
        return next((best for best in self._two_best(state, pod) if best[0][0] != source), None)

    def _two_best(self, state: ShareState, pod: Pod) -> list[tuple[Placement, float]]:
        """The two nodes (with the pod's GPUs) where ``pod``'s arrival lowers F most."""
        candidates = np.flatnonzero(state.feasible(pod))
        if candidates.size == 0:
            return []
        change, lefts = self._arrival(state, pod, state.state_id[candidates])
        best: list[tuple[Placement, float]] = []
        for pick in np.argsort(change, kind="stable")[:2].tolist():
            node = int(candidates[pick])
            if pod.shape.is_share:
                devices: tuple[int, ...] = (
                    int(np.flatnonzero(state.left[node] == lefts[pick])[0]),
                )
            else:
                devices = state.default_devices(node, pod.shape)
            best.append(((node, devices), float(change[pick])))
        return best

    def __call__(self, state: ShareState, running: dict[int, tuple[Pod, Placement]]) -> int:
        """One round on ``state``; moves are applied to it and to ``running``. Returns moves."""
        if self.budget == 0 or not running:
            return 0
        frag = self.fragmentation(state, state.state_id)
        worst = set(np.argsort(-frag, kind="stable")[: self.nodes or len(frag)].tolist())
        chosen = [
            (key, pod, placement)
            for key, (pod, placement) in running.items()
            if placement[0] in worst and pod.shape.gpus <= 1
        ]
        if not chosen:
            return 0
        # F of each source once its candidate has left, in one batch
        gone = np.array([self._without(state, pod, placement) for _, pod, placement in chosen])
        leave = self.fragmentation(state, gone)
        # per kind of pod (shape and memory), the two best targets over all nodes: a
        # candidate takes the best unless it is its own node, then the second
        targets: dict[tuple[Shape, int], list[tuple[Placement, float]]] = {}
        proposals: list[Move] = []
        for number, (key, pod, placement) in enumerate(chosen):
            kind = (pod.shape, pod.memory_mib)
            if kind not in targets:
                targets[kind] = self._two_best(state, pod)
            source = placement[0]
            found = next((t for t in targets[kind] if t[0][0] != source), None)
            if found is None:
                continue
            destination, arrive_change = found
            gain = -(float(leave[number] - frag[source]) + arrive_change)
            if gain >= self.min_gain:
                proposals.append(Move(key, pod, placement, destination, gain))
        proposals.sort(key=lambda move: -move.gain)
        touched: set[int] = set()
        made = 0
        for move in proposals:
            if made >= self.budget:
                break
            source, target = move.source[0], move.target[0]
            if source in touched or target in touched:
                continue
            if state.why_not(target, move.pod, move.target[1]) is not None:  # pragma: no cover
                continue
            state.remove(move.pod, move.source)
            state.place(move.pod, move.target)
            running[move.key] = (move.pod, move.target)
            touched.update((source, target))
            made += 1
        self.moves += made
        return made

    def _free_cpu(
        self, state: ShareState, running: dict[int, tuple[Pod, Placement]], pod: Pod
    ) -> tuple[Placement | None, int]:
        """Place ``pod`` where its GPUs fit but CPU or memory is short, by moving CPU-only
        pods off that node (fewest moves first; at most :attr:`tries` nodes tried)."""
        shape = pod.shape
        fits = (
            (state.max_left >= shape.gpu_milli)
            if shape.is_share
            else (state.free_count >= shape.gpus)
        )
        if shape.gpus and shape.models:
            fits &= state.model_mask(shape.models)
        fits &= (state.cpu_left < shape.cpu_milli) | (state.mem_left < pod.memory_mib)
        candidates = np.flatnonzero(fits)
        if candidates.size == 0:
            return None, 0
        cpu_only: dict[int, list[tuple[int, int, int]]] = {}
        wanted = set(candidates.tolist())
        for key, (other, (node, _)) in running.items():
            if other.shape.gpus == 0 and node in wanted:
                cpu_only.setdefault(node, []).append((other.shape.cpu_milli, other.memory_mib, key))
        plans: list[tuple[int, int, list[int]]] = []
        for node, pods in cpu_only.items():
            cpu_short = shape.cpu_milli - int(state.cpu_left[node])
            mem_short = pod.memory_mib - int(state.mem_left[node])
            chosen: list[int] = []
            for cpu, mem, key in sorted(pods, reverse=True):
                if cpu_short <= 0 and mem_short <= 0:
                    break
                chosen.append(key)
                cpu_short -= cpu
                mem_short -= mem
            if cpu_short <= 0 and mem_short <= 0:
                plans.append((len(chosen), node, chosen))
        plans.sort(key=lambda plan: plan[:2])
        return self._first_room(
            state, running, pod, ((keys, node, None) for _, node, keys in plans)
        )

    def _room_by_moving(
        self,
        state: ShareState,
        running: dict[int, tuple[Pod, Placement]],
        keys: list[int],
        node: int,
        pod: Pod,
        devices: tuple[int, ...] | None,
        room: tuple[int, int] | None = None,
    ) -> tuple[Placement, int] | None:
        """Move the pods ``keys`` off ``node`` (only as many as ``room`` needs, as in
        :func:`_move_all`) and give ``pod`` its ``devices`` there (its default GPUs when
        None): the placement and the moves, or None and no change."""
        moved = _move_all(self, state, running, keys, node, room)
        if moved is None:
            return None
        chosen = state.default_devices(node, pod.shape) if devices is None else devices
        if state.why_not(node, pod, chosen) is not None:
            _undo(state, moved)
            return None
        for key, other, _, new in moved:
            running[key] = (other, new)
        self.moves += len(moved)
        return (node, chosen), len(moved)

    def _holdings(self, state: ShareState, running: dict[int, tuple[Pod, Placement]]) -> _Holdings:
        """Who holds each GPU, brought up to date with ``running`` (built once per replay)."""
        if self._held is None or self._held.running is not running:
            self._held = _Holdings(running, *state.left.shape)
        self._held.sync()
        return self._held

    def make_room(
        self, state: ShareState, running: dict[int, tuple[Pod, Placement]], pod: Pod
    ) -> tuple[Placement | None, int]:
        """Place ``pod``, which fits nowhere now, by emptying one GPU for it (the repair).

        The GPU is one whose pods (GPU shares or a one-GPU pod) can all move to
        other nodes (each where fragmentation grows least) and whose node then
        has the CPU and memory ``pod`` asks; GPUs holding fewest pods are tried
        first, at most :attr:`tries` of them. Returns the pod's placement (None
        when no GPU can be emptied; nothing changes then) and the moves made.
        Only one-GPU pods (whole or a share) are repaired this way.
        """
        shape = pod.shape
        placed = self._free_cpu(state, running, pod)
        if placed[0] is not None or shape.gpus != 1:
            return placed
        held = self._holdings(state, running)
        if shape.is_share:
            placed = self._share_room(state, running, pod, held)
            if placed[0] is not None:
                return placed
        rows, slots = _emptiable(state, pod, held, True)
        count = held.count[rows, slots]
        order = np.lexsort((count * MILLI - state.left[rows, slots], count))
        cells = ((int(rows[pick]), int(slots[pick])) for pick in order.tolist())
        attempts = ((sorted(held.on_gpu[(node, gpu)]), node, (gpu,)) for node, gpu in cells)
        return self._first_room(state, running, pod, attempts)

    def _first_room(
        self,
        state: ShareState,
        running: dict[int, tuple[Pod, Placement]],
        pod: Pod,
        attempts: Iterable[tuple[Any, ...]],
    ) -> tuple[Placement | None, int]:
        """Place ``pod`` by the first of ``attempts`` that makes room, at most :attr:`tries` of
        them tried (each the pods to move, their node and the rest of
        :meth:`_room_by_moving`'s arguments); ``(None, 0)`` when none does."""
        for keys, node, *room in itertools.islice(attempts, self.tries):
            done = self._room_by_moving(state, running, keys, node, pod, *room)
            if done is not None:
                return done
        return None, 0

    def _share_room(
        self,
        state: ShareState,
        running: dict[int, tuple[Pod, Placement]],
        pod: Pod,
        held: _Holdings,
    ) -> tuple[Placement | None, int]:
        """Place the share ``pod`` on a GPU that lacks room for it, by moving some of that
        GPU's pods (M3): the pods whose share alone makes the room first (smallest of
        them first), then the others largest first, each where F grows least, until
        the GPU has room. GPUs that lack least are tried first, at most :attr:`tries`.
        """
        milli = pod.shape.gpu_milli
        short = milli - state.left
        rows, slots = _emptiable(state, pod, held, short > 0)
        order = np.lexsort((held.count[rows, slots], short[rows, slots]))
        cells = ((int(rows[pick]), int(slots[pick])) for pick in order.tolist())
        attempts = (
            (_share_order(held, node, gpu, int(short[node, gpu])), node, (gpu,), (gpu, milli))
            for node, gpu in cells
        )
        return self._first_room(state, running, pod, attempts)


def _emptiable(
    state: ShareState, pod: Pod, held: _Holdings, also: np.ndarray | bool
) -> tuple[np.ndarray, np.ndarray]:
    """The rows and slots of the GPUs holding only one-GPU pods (and where ``also`` holds)
    whose node has the CPU, memory and GPU model ``pod`` asks once those pods left."""
    shape = pod.shape
    ok = (held.count > 0) & (held.wide == 0) & (state.left >= 0) & also
    ok &= (state.cpu_left[:, None] + held.cpu) >= shape.cpu_milli
    ok &= (state.mem_left[:, None] + held.mem) >= pod.memory_mib
    if shape.models:
        ok &= state.model_mask(shape.models)[:, None]
    rows, slots = np.nonzero(ok)
    return rows, slots


def _share_order(held: _Holdings, node: int, gpu: int, lack: int) -> list[int]:
    """The pods of a GPU ``lack`` milli-GPU short, in the order a share repair moves them:
    those whose share alone makes the room first (smallest first), then largest first."""
    sizes = {key: held.pods[key].shape.gpu_milli for key in held.on_gpu[(node, gpu)]}
    return sorted(
        sizes,
        key=lambda key: (sizes[key] < lack, sizes[key] * (-1 if sizes[key] < lack else 1), key),
    )


class _Holdings:
    """The pods on each GPU of a replay's running pods, kept up to date incrementally."""

    def __init__(self, running: dict[int, tuple[Pod, Placement]], nodes: int, gpus: int) -> None:
        self.running = running
        self.count = np.zeros((nodes, gpus), dtype=np.int64)
        self.cpu = np.zeros((nodes, gpus), dtype=np.int64)
        self.mem = np.zeros((nodes, gpus), dtype=np.int64)
        self.wide = np.zeros((nodes, gpus), dtype=np.int64)  # pods of several GPUs here
        self.on_gpu: dict[tuple[int, int], set[int]] = {}
        self.where: dict[int, Placement] = {}
        self.pods: dict[int, Pod] = {}

    def _change(self, key: int, pod: Pod, placement: Placement, sign: int) -> None:
        node, devices = placement
        for gpu in devices:
            self.count[node, gpu] += sign
            self.cpu[node, gpu] += sign * pod.shape.cpu_milli
            self.mem[node, gpu] += sign * pod.memory_mib
            self.wide[node, gpu] += sign * (len(devices) > 1)
            holders = self.on_gpu.setdefault((node, gpu), set())
            if sign > 0:
                holders.add(key)
            else:
                holders.discard(key)

    def sync(self) -> None:
        """Follow the pods that arrived, moved or left since the last call."""
        for key, (pod, placement) in self.running.items():
            known = self.where.get(key)
            if known == placement:
                continue
            if known is not None:
                self._change(key, pod, known, -1)
            self._change(key, pod, placement, 1)
            self.where[key] = placement
            self.pods[key] = pod
        if len(self.where) > len(self.running):
            for key in [k for k in self.where if k not in self.running]:
                self._gone(key)

    def _gone(self, key: int) -> None:  # pragma: no cover - the replay never removes pods
        self._change(key, self.pods.pop(key), self.where.pop(key), -1)


def _move_all(
    defrag: ShareDefrag,
    state: ShareState,
    running: dict[int, tuple[Pod, Placement]],
    keys: list[int],
    source: int,
    room: tuple[int, int] | None = None,
) -> list[tuple[int, Pod, Placement, Placement]] | None:
    """Move the pods ``keys`` off node ``source``, each where F grows least; None (and no
    change) when one of them fits nowhere else.

    With ``room = (gpu, share)``, only as many as ``source``'s GPU ``gpu`` needs to have
    ``share`` thousandths left, in the order given: a pod that fits nowhere else stays,
    and None (no change) comes when the GPU cannot get that room.
    """
    moved: list[tuple[int, Pod, Placement, Placement]] = []
    for key in keys:
        if room is not None and state.left[source, room[0]] >= room[1]:
            break
        other, placement = running[key]
        state.remove(other, placement)
        found = defrag.best_target(state, other, source)
        if found is None:
            state.place(other, placement)
            if room is not None:
                continue
            _undo(state, moved)
            return None
        state.place(other, found[0])
        moved.append((key, other, placement, found[0]))
    if room is not None and state.left[source, room[0]] < room[1]:
        _undo(state, moved)
        return None
    return moved


def _undo(state: ShareState, moved: list[tuple[int, Pod, Placement, Placement]]) -> None:
    """Put the pods :func:`_move_all` moved back where they were, last first."""
    for _, other, old, new in reversed(moved):
        state.remove(other, new)
        state.place(other, old)


def total_fragmentation(state: ShareState, workload: Workload) -> float:
    """The cluster's fragmentation for ``workload`` (GPU thousandths)."""
    target = TargetArrays.build(workload, state.model_names)
    matrix = fragment_matrix(target, NodeRows.of_state(state))
    return float((matrix @ target.frequency).sum())


__all__ = ["MILLI", "Move", "ShareDefrag", "total_fragmentation"]
