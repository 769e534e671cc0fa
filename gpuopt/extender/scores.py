"""The extender's scores: 0 to 10 per candidate node from weighted parts (E5).

Each part is in [0, 1] per node: binpack (always), FGD's fragmentation
change for a target workload (:class:`Fragmentation`, with ``--workload``),
and the topology level the pod prefers for its gang (with the pod
annotation ``gpuopt.io/preferred-level``); :func:`combine` weighs them.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

import numpy as np

from gpuopt.cluster.model import scaled
from gpuopt.cluster.shares import MILLI
from gpuopt.errors import ProblemError
from gpuopt.extender.claims import Choice, choose_devices, resolve
from gpuopt.extender.pod import Ask
from gpuopt.extender.state import State
from gpuopt.extender.wire import MAX_SCORE

log = logging.getLogger("gpuopt.extender")

#: Score weights (E5): binpack, fragmentation (with a workload), topology (with a level),
#: and the devices chosen for a pod with DRA claims (E9).
WEIGHTS = {"binpack": 1.0, "fragmentation": 2.0, "topology": 1.0, "devices": 2.0}


def binpack_scores(state: State, ask: Ask, positions: np.ndarray) -> np.ndarray:
    """E5 binpack in [0, 1]: the share of the node's GPUs in use after placing the pod;
    0 on a node whose GPUs are all free unless the pod takes every one of them (a whole
    free node is kept for a whole-node job); CPU-only pods favour nodes without free GPUs."""
    gpus = state.gpus[positions].astype(np.float64)
    free = state.free_whole[positions].astype(np.float64)
    size = np.maximum(gpus, 1.0)
    untouched = (free == gpus) & (gpus > 0)
    if ask.gpus == 0 and ask.milli is None:  # CPU-only
        return np.where(gpus == 0, 1.0, 1.0 - free / size)
    if ask.milli is not None:
        left = state.left[positions]
        room = np.where(left >= ask.milli, left, MILLI + 1)
        after = room.min(axis=1) - ask.milli  # best fit: what its GPU keeps
        took_free = room.min(axis=1) == MILLI
        free_after = free - took_free
        score = 0.5 * (1.0 - after / MILLI) + 0.5 * (1.0 - free_after / size)
        return np.asarray(np.where(untouched, 0.0, score))
    after = free - ask.gpus
    score = 1.0 - after / size
    whole = gpus == ask.gpus
    return np.asarray(np.where(untouched & ~whole, 0.0, score))


def topology_scores(state: State, ask: Ask, positions: np.ndarray) -> np.ndarray | None:
    """E5 topology in [0, 1]: the pod's preferred level (annotation ``gpuopt.io/preferred-level``):
    the share of its running gang-mates in the node's domain there, or, with none running, the
    domain's free GPUs against the roomiest domain's. None when the pod states no level."""
    if ask.level is None:
        return None
    domains = state.level_domains(ask.level)
    gang = ask.pending.gang
    mates = [t for t in state.cluster.tasks if gang is not None and t.gang == gang]
    if mates:
        counts = Counter(domains[state.node_pos[t.node]] for t in mates)
        return np.array(
            [
                0.0 if domains[p] is None else counts.get(domains[p], 0) / len(mates)
                for p in positions.tolist()
            ]
        )
    room: Counter[str] = Counter()
    for pos, domain in enumerate(domains):
        if domain is not None:
            room[domain] += int(state.free_whole[pos])
    top = max(room.values(), default=0)
    if top <= 0:
        return np.zeros(len(positions))
    return np.array(
        [0.0 if domains[p] is None else room[domains[p]] / top for p in positions.tolist()]
    )


class Fragmentation:
    """E5 fragmentation in [0, 1] for one target workload: FGD's score of the node's
    fragmentation change (``gpuopt.sharing.policies.FgdPolicy``), over 100.

    The policy and the share state it reads are built once per :class:`State` and kept
    until :meth:`clear` (a new snapshot, or a binding counted in the state).
    """

    def __init__(self, workload: Any) -> None:
        self.workload = workload
        self._lock = threading.Lock()
        self._cached: tuple[State, Any, Any] | None = None

    def clear(self) -> None:
        """Forget the policy built for the last state (its tasks changed)."""
        with self._lock:
            self._cached = None

    def scores(self, state: State, ask: Ask, positions: np.ndarray) -> np.ndarray | None:
        """Per node at ``positions`` its score in [0, 1]; None when the snapshot has no
        share state (logged once per state)."""
        from gpuopt.cluster.workload import Shape
        from gpuopt.sharing.policies import FgdPolicy
        from gpuopt.sharing.state import Pod, ShareState

        with self._lock:
            cached = self._cached
        if cached is None or cached[0] is not state:
            try:
                share_state = ShareState.from_cluster(state.cluster)
            except ProblemError as exc:
                log.warning("fragmentation score off for this snapshot: %s", exc)
                share_state = None
            rank = np.arange(len(state.cluster.nodes))
            policy = FgdPolicy(rank, np.random.default_rng(0), self.workload)
            cached = (state, share_state, policy)
            with self._lock:
                self._cached = cached
        _, share_state, policy = cached
        if share_state is None:
            return None
        gpus = ask.gpus if ask.milli is None else 1
        shape = Shape(
            cpu_milli=scaled(ask.pending.cpus),
            gpu_milli=0 if gpus == 0 else (ask.milli or MILLI),
            gpus=gpus,
        )
        found = policy.scores(share_state, Pod(shape), positions)
        return np.asarray(found, dtype=np.float64) / 100.0


def device_scores(
    state: State, ask: Ask, positions: np.ndarray, passed: np.ndarray
) -> tuple[np.ndarray, dict[int, Choice]]:
    """E9 in [0, 1] for a pod with DRA claims: per node that passed, the devices
    :func:`~gpuopt.extender.claims.choose_devices` chooses there and what they take from
    the node's servable count (:attr:`Choice.lost`); a node scores the least of those
    over the candidates divided by its own (1: it costs the least; 1 where nothing is
    lost), 0 where nothing was chosen. Also the choices, by node position."""
    found = np.zeros(len(positions))
    choices: dict[int, Choice] = {}
    resolved = resolve(state, ask.pending, ask.claim_refs)
    if resolved.missing is not None:
        return found, choices
    selection = state.selection()
    lost: dict[int, float] = {}
    for order, pos in enumerate(positions.tolist()):
        if not passed[order]:
            continue
        choice = choose_devices(state, ask.pending, resolved.claims, pos, selection)
        if choice is not None:
            choices[pos] = choice
            lost[order] = float(choice.lost)
    least = min(lost.values(), default=0.0)
    for order, cost in lost.items():
        found[order] = 1.0 if cost <= 0 else least / cost
    return found, choices


def combine(parts: list[tuple[float, np.ndarray]], passed: np.ndarray) -> np.ndarray:
    """``round(10 * sum_i w_i s_i / sum_i w_i)`` per node over the ``(w_i, s_i)`` that apply;
    0 where the filter refused the node (``passed`` False)."""
    total = sum(weight * part for weight, part in parts) / sum(w for w, _ in parts)
    scores: np.ndarray = np.rint(np.clip(total, 0.0, 1.0) * MAX_SCORE).astype(np.int64)
    scores[~passed] = 0
    return scores


__all__ = [
    "WEIGHTS",
    "Fragmentation",
    "binpack_scores",
    "combine",
    "device_scores",
    "topology_scores",
]
