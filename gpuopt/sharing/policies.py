"""Where one arriving pod goes: the FGD simulator's six policies and gpuopt's (P1-P5).

Every policy answers ``choose(state, pod) -> (node, GPU indices)`` or None
when the pod fits nowhere, over a :class:`~gpuopt.sharing.state.ShareState`.
The arithmetic follows ``benchmarks/fgd/NOTES.md`` section 2 (the
simulator ``hkust-adsl/kubernetes-scheduler-simulator``, commit ``8f3d641``):

1. **Filter**: the nodes where the pod fits (CPU, memory, GPU model among the
   pod's models, a GPU with enough share left for a share pod, ``k`` fully
   free GPUs for ``k`` whole GPUs; :meth:`ShareState.feasible`).
2. **Score** each feasible node with the policy's integer score (one node
   feasible: no scoring); the highest wins, **ties go to the smallest position
   in ``rank``**, a per-seed random node ranking (the simulator's random name
   prefixes and its smallest-name rule).
3. **GPU choice** on the node: ``best`` (a share goes to the GPU with the
   least share left that fits, lowest index on ties; whole GPUs to the
   lowest-index free ones), ``random`` (a share goes to a uniformly random GPU
   that fits) or FGD's own choice.

========== ============================================================ ==========
policy     score (higher is better)                                     GPU choice
========== ============================================================ ==========
random     none: a uniformly random feasible node                       random
bestfit    int(100 (1 - s)), s = 0.5 (cpu left - cpu)/128000 + 0.5      best
           (GPU left - asked)/8000, then min-max normalised to 0..100
           with integer arithmetic
packing    GpuPacking: 100 - share left/10 on a used GPU (>= 50), 50 -  best
           free GPUs used (>= 33), max(33 - free, free) on an empty node
clustering GpuClustering: 25 (8000 - GPU left)/8000 + 75 (only this tag  best
           here), + 50 (this tag among others), + 25 (no GPU pod), + 0
dotprod    int(100 (1 - d/2)), d = the dot product of (cpu left/128000, best
           GPU left/8000) and (cpu/128000, asked/8000)
fgd        int(100 sigmoid((F_before - F_after)/1000)), F the node's     FGD
           fragmentation for the target workload
========== ============================================================ ==========

Adding a policy: subclass :class:`Policy`, set ``name`` and write ``scores``
(or ``choose``), and decorate it with :func:`register_policy`; the replay and
the command line then offer it by name.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from gpuopt.cluster.workload import MILLI, Shape, Workload
from gpuopt.errors import ProblemError
from gpuopt.sharing.fragmentation import (
    FragmentMemo,
    Measure,
    TargetArrays,
    fragment_matrix,
    gpuopt_matrix,
)
from gpuopt.sharing.state import Placement, Pod, ShareState

#: What an FGD score depends on besides the node's state: (CPU, share, GPUs, memory or 0).
ShapeKey = tuple[int, int, int, int]
#: The simulator's normalisers (``MaxSpecCpu``, ``MaxSpecGpu``).
MAX_SPEC_CPU = 128_000
MAX_SPEC_GPU = 8_000
GpuChoice = Literal["best", "random", "fgd"]


class Policy:
    """One arriving pod -> (node, GPU indices), or None when it fits nowhere.

    Parameters
    ----------
    rank
        Position of each node in the tie-break ranking (smallest wins ties).
    rng
        The random generator (random node and GPU choices).
    workload
        The target workload (FGD; others ignore it).
    """

    #: The name the replay and the command line know the policy by.
    name: ClassVar[str] = ""
    #: How the policy picks GPUs on the chosen node.
    gpu_choice: ClassVar[GpuChoice] = "best"

    def __init__(
        self, rank: np.ndarray, rng: np.random.Generator, workload: Workload | None = None
    ) -> None:
        self.rank = np.asarray(rank)
        self.rng = rng
        self.workload = workload

    def scores(self, state: ShareState, pod: Pod, candidates: np.ndarray) -> np.ndarray:
        """Integer score of each candidate node (higher is better)."""
        raise NotImplementedError

    def choose(self, state: ShareState, pod: Pod) -> Placement | None:
        """Where ``pod`` goes, or None when it fits on no node."""
        candidates = np.flatnonzero(state.feasible(pod))
        if candidates.size == 0:
            return None
        if candidates.size == 1:
            node = int(candidates[0])
        else:
            node = self.pick(candidates, self.scores(state, pod, candidates))
        return node, self.devices(state, pod, node)

    def pick(self, candidates: np.ndarray, scores: np.ndarray) -> int:
        """The candidate with the highest score, the smallest rank among ties."""
        winners = candidates[scores == scores.max()]
        if winners.size == 1:
            return int(winners[0])
        return int(winners[np.argmin(self.rank[winners])])

    def devices(self, state: ShareState, pod: Pod, node: int) -> tuple[int, ...]:
        """The GPUs ``pod`` takes on ``node`` (by :attr:`gpu_choice`)."""
        shape = pod.shape
        if shape.is_share and self.gpu_choice == "random":
            fitting = np.flatnonzero(state.left[node] >= shape.gpu_milli)
            return (int(fitting[self.rng.integers(fitting.size)]),)
        return state.default_devices(node, shape)


#: Policy name -> class (see :func:`register_policy`).
POLICIES: dict[str, type[Policy]] = {}


def register_policy(cls: type[Policy]) -> type[Policy]:
    """Class decorator: offer ``cls`` under ``cls.name`` to the replay and the command line."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    POLICIES[cls.name] = cls
    return cls


def make_policy(
    name: str,
    *,
    rank: np.ndarray,
    rng: np.random.Generator,
    workload: Workload | None = None,
) -> Policy:
    """The policy called ``name`` (a key of :data:`POLICIES`)."""
    cls = POLICIES.get(name)
    if cls is None:
        raise ProblemError(f"policy {name!r} is unknown; expected one of {', '.join(POLICIES)}.")
    return cls(rank, rng, workload)


# --------------------------------------------------------------------------- baselines
@register_policy
class RandomPolicy(Policy):
    """A uniformly random feasible node; a share goes to a random GPU that fits (NOTES 2.1)."""

    name = "random"
    gpu_choice = "random"

    def choose(self, state: ShareState, pod: Pod) -> Placement | None:
        candidates = np.flatnonzero(state.feasible(pod))
        if candidates.size == 0:
            return None
        node = int(candidates[self.rng.integers(candidates.size)])
        return node, self.devices(state, pod, node)


@register_policy
class BestFitPolicy(Policy):
    """The node left with the least CPU and GPU (weights 0.5/0.5), normalised (NOTES 2.2)."""

    name = "bestfit"

    def scores(self, state: ShareState, pod: Pod, candidates: np.ndarray) -> np.ndarray:
        shape = pod.shape
        cpu = (state.cpu_left[candidates] - shape.cpu_milli) / MAX_SPEC_CPU * 0.5
        gpu = (state.total_left[candidates] - shape.total_milli) / MAX_SPEC_GPU * 0.5
        raw = ((1.0 - (cpu + gpu)) * 100).astype(np.int64)  # int64() truncates toward 0
        low, high = int(raw.min()), int(raw.max())
        if high == low:
            return np.zeros_like(raw)
        return np.asarray((raw - low) * 100 // (high - low), dtype=np.int64)


@register_policy
class PackingPolicy(Policy):
    """GpuPacking: shared GPUs first, then free GPUs of used nodes, then empty nodes (NOTES 2.3)."""

    name = "packing"

    def scores(self, state: ShareState, pod: Pod, candidates: np.ndarray) -> np.ndarray:
        shape = pod.shape
        if shape.gpus == 0:
            return np.zeros(candidates.size, dtype=np.int64)
        free = state.free_count[candidates]
        empty = free == state.gpus[candidates]
        case3 = np.maximum(33 - free, free)
        if shape.is_share:
            rows = state.left[candidates]
            smallest = np.where(rows >= shape.gpu_milli, rows, MILLI + 1).min(axis=1)
            used = np.maximum(100 - (smallest * 100 // MILLI) // 10, 50)
            others = np.where(smallest == MILLI, 49, used)
        else:
            others = np.full(candidates.size, max(50 - shape.gpus, 33), dtype=np.int64)
        return np.where(empty, case3, others)


@register_policy
class ClusteringPolicy(Policy):
    """GpuClustering: nodes already running pods of the same GPU tag (NOTES 2.4)."""

    name = "clustering"

    def scores(self, state: ShareState, pod: Pod, candidates: np.ndarray) -> np.ndarray:
        tag = pod.tag
        if tag < 0:
            return np.zeros(candidates.size, dtype=np.int64)
        base = 25 * (MAX_SPEC_GPU - state.total_left[candidates]) // MAX_SPEC_GPU
        has = state.tags[candidates, tag] > 0
        kinds = state.tag_kinds[candidates]
        bonus = np.where(has, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
        return np.asarray(base + bonus, dtype=np.int64)


@register_policy
class DotProductPolicy(Policy):
    """DotProd (merge, max): the node whose free vector has the smallest dot product with
    the request (NOTES 2.5)."""

    name = "dotprod"

    def scores(self, state: ShareState, pod: Pod, candidates: np.ndarray) -> np.ndarray:
        shape = pod.shape
        dot = (state.cpu_left[candidates] / MAX_SPEC_CPU) * (shape.cpu_milli / MAX_SPEC_CPU) + (
            state.total_left[candidates] / MAX_SPEC_GPU
        ) * (shape.total_milli / MAX_SPEC_GPU)
        return np.asarray(100 * (1 - dot / 2), dtype=np.float64).astype(np.int64)


# --------------------------------------------------------------------------- FGD
def sigmoid_score(delta_milli: np.ndarray) -> np.ndarray:
    """FGD's score of a fragmentation decrease (GPU thousandths): ``int(100 sigmoid(x/1000))``.

    >>> sigmoid_score(np.array([0.0, 1000.0, -2000.0])).tolist()
    [50, 73, 11]
    """
    return ((1.0 / (1.0 + np.exp(-(delta_milli / 1000.0)))) * 100).astype(np.int64)


@register_policy
class FgdPolicy(Policy):
    """Fragmentation gradient descent: the node whose fragmentation grows least (NOTES 1.5).

    Fast path: the score of a node depends only on its interned state (model,
    CPU left, GPU shares left as a multiset) and the pod's (CPU, share, GPUs),
    so it is kept per (state id, shape) in arrays; a decision looks the scores
    of all feasible nodes up at once and computes only the states not seen yet
    with this shape, in one vectorised batch.
    """

    name = "fgd"
    gpu_choice = "fgd"
    #: Whether the target's memory counts (FGD's does not: its shapes have no memory).
    reads_memory: ClassVar[bool] = False

    def __init__(
        self, rank: np.ndarray, rng: np.random.Generator, workload: Workload | None = None
    ) -> None:
        super().__init__(rank, rng, workload)
        if workload is None:
            raise ProblemError("policy 'fgd' needs a target workload.")
        self.target: TargetArrays | None = None
        self.memo: FragmentMemo | None = None
        #: The node measure whose decrease the score rewards (FGD: its fragmentation, F1).
        self.measure: Measure = fragment_matrix
        self._scores: dict[ShapeKey, np.ndarray] = {}
        #: (state id, shape key) -> {share left of a GPU: score of putting the share there}
        self._options: dict[tuple[int, ShapeKey], dict[int, int]] = {}
        self._table: object = None

    def _bind(self, state: ShareState) -> FragmentMemo:
        if self._table is not state.table:  # a new cluster: forget the memos
            assert self.workload is not None
            workload = self.workload
            if not self.reads_memory:
                workload = Workload(workload.shapes, workload.frequencies)
            self.target = TargetArrays.build(workload, state.model_names)
            self.memo = FragmentMemo(self.target, self.measure)
            self._scores.clear()
            self._options.clear()
            self._table = state.table
        assert self.memo is not None
        return self.memo

    def scores(self, state: ShareState, pod: Pod, candidates: np.ndarray) -> np.ndarray:
        return self.state_scores(state, pod.shape, state.state_id[candidates], pod.memory_mib)

    def _key(self, shape: Shape, memory: int) -> ShapeKey:
        """What a score depends on besides the node state (memory only for a target with it)."""
        assert self.target is not None
        reads = self.target.reads_memory
        return (shape.cpu_milli, shape.gpu_milli, shape.gpus, memory if reads else 0)

    def state_scores(
        self, state: ShareState, shape: Shape, state_ids: np.ndarray, memory: int = 0
    ) -> np.ndarray:
        """The FGD score of placing ``shape`` (``memory`` MiB) on nodes in the states
        ``state_ids``."""
        memo = self._bind(state)
        key = self._key(shape, memory)
        table = self._scores.get(key)
        if table is None or len(table) < len(state.table):
            grown = np.full(max(64, 2 * len(state.table)), -1, dtype=np.int64)
            if table is not None:
                grown[: len(table)] = table
            table = self._scores[key] = grown
        found = table[state_ids]
        if (found < 0).any():
            missing = np.unique(state_ids[found < 0])
            table[missing] = self._compute(state, memo, shape, key, missing)
            found = table[state_ids]
        return np.asarray(found, dtype=np.int64)

    def _compute(
        self,
        state: ShareState,
        memo: FragmentMemo,
        shape: Shape,
        key: ShapeKey,
        state_ids: np.ndarray,
    ) -> np.ndarray:
        assert self.target is not None
        frequency = self.target.frequency
        before = memo.of(state, state_ids)  # u x t
        rows, taken, fragments = memo.after_arrival(state, state_ids, shape, key[3])
        option_scores = sigmoid_score((before[rows] - fragments) @ frequency)
        if not shape.is_share:
            return option_scores
        # a share: one option per distinct share left that fits
        best = np.full(state_ids.size, -1, dtype=np.int64)
        np.maximum.at(best, rows, option_scores)
        for row, value, score in zip(
            rows.tolist(), taken.tolist(), option_scores.tolist(), strict=True
        ):
            self._options.setdefault((int(state_ids[row]), key), {})[value] = score
        return best

    def devices(self, state: ShareState, pod: Pod, node: int) -> tuple[int, ...]:
        shape = pod.shape
        if not shape.is_share:
            return state.default_devices(node, shape)
        state_id = int(state.state_id[node])
        best = int(self.state_scores(state, shape, np.array([state_id]), pod.memory_mib)[0])
        key = self._key(shape, pod.memory_mib)
        options = self._options[(state_id, key)]
        for gpu, left in enumerate(state.left[node].tolist()):
            if left >= shape.gpu_milli and options[left] == best:
                return (gpu,)
        raise AssertionError("no GPU has the best FGD score")  # pragma: no cover


@register_policy
class GpuoptPolicy(FgdPolicy):
    """gpuopt's own policy: FGD over a measure that also counts memory and usable shares (P5).

    Two things FGD's fragmentation (F1) does not see:

    - **memory** (F2): each target shape asks for the median memory of the
      trace's pods of that shape (:meth:`Workload.with_memory`); a shape cannot
      run where memory is short, so such a node's idle GPU is fragment;
    - **how much of a GPU's remainder shares can still use** (U1): F counts a
      remainder as fragment for a share shape only when it is smaller than the
      share; :data:`~gpuopt.sharing.fragmentation.USABLE_WEIGHT` x the GPU
      thousandths the target's share shapes could still take (copies that fit,
      times their share) is subtracted (:func:`gpuopt_matrix
      <gpuopt.sharing.fragmentation.gpuopt_matrix>`), so a placement that leaves
      remainders fitting more shares scores higher.

    The score (``int(100 sigmoid(decrease / 1000))``), the GPU choice and the
    tie-break are FGD's, and so is the speed (the measure is memoised per node
    state like F).
    """

    name = "gpuopt"
    reads_memory = True

    def __init__(
        self, rank: np.ndarray, rng: np.random.Generator, workload: Workload | None = None
    ) -> None:
        super().__init__(rank, rng, workload)
        if workload is not None and not workload.memory_mib:
            raise ProblemError(
                "policy 'gpuopt' needs a target workload with memory (Workload.with_memory)."
            )
        self.measure = gpuopt_matrix


def fgd_node_score(
    workload: Workload,
    model: str,
    cpu_left: int,
    left: list[int],
    shape: Shape,
) -> tuple[int, int | None]:
    """FGD's score and GPU for ``shape`` on one node, computed plainly (a reference).

    ``left`` lists the node's GPUs' shares left. Returns (score, GPU index;
    None for a CPU-only pod). Used by the tests to check the fast path.

    >>> from gpuopt.cluster.workload import Shape, Workload
    >>> w = Workload((Shape(1000, 500, 1),), (1.0,))
    >>> fgd_node_score(w, "T4", 8000, [1000, 600], Shape(1000, 400, 1))
    (50, 0)
    """

    def fragment(cpu: int, gpus: list[int]) -> float:
        total = 0.0
        idle = sum(gpus)
        for target, frequency in zip(workload.shapes, workload.frequencies, strict=True):
            runs = (
                target.gpus > 0
                and (not target.models or model in target.models)
                and sum(g >= target.gpu_milli for g in gpus) >= target.gpus
                and cpu >= target.cpu_milli
            )
            part = sum(g for g in gpus if g < target.gpu_milli) if runs else idle
            total += frequency * part
        return total

    def score(delta: float) -> int:
        return int(100 / (1 + np.exp(-delta / 1000)))

    before = fragment(cpu_left, left)
    if shape.is_share:
        best, chosen = -1, None
        for gpu, value in enumerate(left):
            if value >= shape.gpu_milli:
                after = list(left)
                after[gpu] -= shape.gpu_milli
                candidate = score(before - fragment(cpu_left - shape.cpu_milli, after))
                if candidate > best:
                    best, chosen = candidate, gpu
        return best, chosen
    after = list(left)
    free = [gpu for gpu, value in enumerate(left) if value == MILLI][: shape.gpus]
    for gpu in free:
        after[gpu] = 0
    return score(before - fragment(cpu_left - shape.cpu_milli, after)), (free[0] if free else None)


__all__ = [
    "POLICIES",
    "BestFitPolicy",
    "ClusteringPolicy",
    "DotProductPolicy",
    "FgdPolicy",
    "GpuoptPolicy",
    "PackingPolicy",
    "Policy",
    "RandomPolicy",
    "fgd_node_score",
    "make_policy",
    "register_policy",
    "sigmoid_score",
]
