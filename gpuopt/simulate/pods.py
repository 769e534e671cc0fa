"""Replay a pod trace with the FGD simulator's protocol (rules R1-R3) and measure allocation.

The protocol (``benchmarks/fgd/NOTES.md`` sections 3 and 6; Weng et al., ATC'23,
``hkust-adsl/kubernetes-scheduler-simulator``), per seed:

1. **Order**: the trace's pods in a random order (``numpy`` generator seeded
   with the seed). If their GPU request (``gpu_milli x gpus`` summed) is below
   ``inflation`` x the cluster's GPU capacity, pods drawn uniformly with
   replacement from the trace are appended until the next draw would overshoot
   (tested with its per-GPU ``gpu_milli``, as the simulator does, so the total
   may end a little over; CPU-only draws always pass). If it is above, random
   pods are removed until it is at most the target.
2. **Ranking**: a random permutation of the nodes breaks score ties (smallest
   position wins).
3. **Arrivals**: every pod goes where the policy says
   (:mod:`gpuopt.sharing.policies`); a pod that fits nowhere fails (no queue,
   no retry, nothing leaves). After each pod (and once before any) the arrived
   GPU request (failed pods included) and the allocated GPU thousandths are
   recorded.
4. **Curve**: events are bucketed by ``round(arrived / capacity x 100)`` (half
   to even); bucket k's value is the mean allocation (% of capacity, each
   rounded to 2 decimals) of its events; an empty bucket takes the events of
   buckets k-1..k+1; if those are empty too it has no value. The published
   curve is the mean over the seeds of these per-seed curves.

The random draws of the simulator (Go's ``math/rand``) are not reproduced, so
single seeds differ from the published ones; the means over ten seeds agree
(``benchmarks/fgd/README.md``).

Each seed is one run of :mod:`gpuopt.simulate.events`: pod k of the order
arrives at time k (nothing ends).

A **hook** may act on the cluster every K arrivals (for defragmentation): it is
called as ``hook(state, running)`` after arrival K, 2K, ..., where
``running`` maps a pod's arrival number to its (pod, placement); it may move
pods (updating both) and returns the number of moves it made, which the result
counts. No hook runs by default.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from gpuopt.cluster.workload import Workload, typical_workload
from gpuopt.errors import ProblemError, check_arguments
from gpuopt.progress import Task, task
from gpuopt.sharing.policies import Policy, make_policy
from gpuopt.sharing.state import Placement, Pod, ShareState
from gpuopt.simulate.events import ARRIVAL, Event, EventQueue, Simulation, run


class RepairHook(Protocol):
    """Asked to make room when a pod fits nowhere (:meth:`ShareDefrag.make_room
    <gpuopt.sharing.defrag.ShareDefrag.make_room>`): the pod's placement or None, and the
    moves made."""

    def make_room(
        self, state: ShareState, running: dict[int, tuple[Pod, Placement]], pod: Pod
    ) -> tuple[Placement | None, int]: ...


class ReplayHook(Protocol):
    """Called every K arrivals with the state and the running pods; returns the moves made."""

    def __call__(self, state: ShareState, running: dict[int, tuple[Pod, Placement]]) -> int: ...


@dataclass(frozen=True)
class ReplayResult:
    """The allocation curve of one policy over seeds.

    Attributes
    ----------
    policy, trace
        What was replayed.
    seeds
        The seeds, in order.
    arrived
        Arrived workload buckets, % of GPU capacity: 0, 1, ..., 100 x inflation.
    allocated
        Mean over the seeds of the allocation ratio (% of GPU capacity) at each
        arrived bucket (None where no seed has a value).
    per_seed
        Each seed's curve, in the order of ``seeds``.
    failed_per_seed
        Pods that fitted nowhere, per seed.
    pods_per_seed
        Pods that arrived, per seed.
    moves
        Moves made by the hook, over all seeds (0 without a hook).
    seconds
        Wall-clock seconds of the whole replay.
    decision_ms
        Median milliseconds the policy took to decide one pod (all seeds).
    """

    policy: str
    trace: str
    seeds: tuple[int, ...]
    arrived: list[int]
    allocated: list[float | None]
    per_seed: list[list[float | None]]
    failed_per_seed: list[int]
    pods_per_seed: list[int]
    moves: int = 0
    seconds: float = field(default=0.0, compare=False)
    decision_ms: float = field(default=0.0, compare=False)

    @property
    def failed_pods(self) -> float:
        """Mean number of failed pods per seed."""
        return statistics.fmean(self.failed_per_seed) if self.failed_per_seed else 0.0

    def at(self, percent: int) -> float | None:
        """The mean allocation ratio at arrived ``percent`` (None when out of range or empty)."""
        if 0 <= percent < len(self.allocated):
            return self.allocated[percent]
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of ``gpuopt replay openb --out``, plus details."""
        return {
            "policy": self.policy,
            "trace": self.trace,
            "seeds": list(self.seeds),
            "arrived": self.arrived,
            "allocated": self.allocated,
            "failed_pods": self.failed_pods,
            "moves": self.moves,
            "seconds": round(self.seconds, 3),
            "decision_ms_median": (
                round(self.decision_ms, 4) if math.isfinite(self.decision_ms) else None
            ),
            "failed_per_seed": self.failed_per_seed,
            "pods_per_seed": self.pods_per_seed,
            "allocated_per_seed": self.per_seed,
        }

    def summary(self) -> str:
        """One line: the allocation at 100 % and at the last bucket, failures, time."""
        last = self.arrived[-1]

        def shown(value: float | None) -> str:
            return "-" if value is None else f"{value:.2f}"

        return (
            f"{self.policy} on {self.trace}, {len(self.seeds)} seed(s): allocation "
            f"{shown(self.at(100))} % at 100 % arrived, {shown(self.at(last))} % at {last} %; "
            f"{self.failed_pods:.0f} failed pods per seed, {self.moves} moves, "
            f"{self.decision_ms:.3f} ms per pod (median), {self.seconds:.1f} s"
        )


def trace_workload(pods: Sequence[Pod]) -> Workload:
    """A trace's target workload: :func:`typical_workload` of its pods, each shape with the
    median memory of the trace's pods of that shape (which only the ``gpuopt`` policy reads)."""
    return typical_workload(p.shape for p in pods).with_memory(
        (p.shape, p.memory_mib) for p in pods
    )


def arrival_order(
    pods: Sequence[Pod], capacity_milli: int, inflation: float, rng: np.random.Generator
) -> list[int]:
    """Indices into ``pods`` in arrival order (step 1 of the module docstring)."""
    order: list[int] = rng.permutation(len(pods)).tolist()
    target = inflation * capacity_milli
    total = sum(p.shape.total_milli for p in pods)
    if total < target:
        while True:
            drawn = int(rng.integers(len(pods)))
            if total + pods[drawn].shape.gpu_milli > target:
                break
            order.append(drawn)
            total += pods[drawn].shape.total_milli
    else:
        while total > target and order:
            removed = order.pop(int(rng.integers(len(order))))
            total -= pods[removed].shape.total_milli
    return order


def bucket_curve(
    arrived: np.ndarray, allocated: np.ndarray, capacity_milli: int, last: int
) -> list[float | None]:
    """Mean allocation (%) per arrived bucket 0..``last`` (step 4 of the module docstring)."""
    gpus = capacity_milli / 1000
    buckets = np.rint(arrived / gpus / 10)
    ratios = np.round(allocated / gpus / 10, 2)
    curve: list[float | None] = []
    for k in range(last + 1):
        chosen = ratios[buckets == k]
        if chosen.size == 0:
            chosen = ratios[(buckets >= k - 1) & (buckets <= k + 1)]
        curve.append(round(float(chosen.mean()), 2) if chosen.size else None)
    return curve


class _PodReplay(Simulation):
    """One seed of the protocol: the pods of ``order`` arrive, pod k at time k (steps 3, 4)."""

    hook: ReplayHook | None = None
    hook_every: int = 0
    repair: RepairHook | None = None

    def __init__(
        self,
        state: ShareState,
        pods: Sequence[Pod],
        order: Sequence[int],
        chooser: Policy,
        decisions: list[float],
        shown: Task,
    ) -> None:
        super().__init__(EventQueue())
        self.current = state.copy()
        self.pods, self.order, self.chooser = pods, order, chooser
        self.decisions, self.shown = decisions, shown
        # after arrival k (0: before any): GPU request arrived, thousandths allocated
        self.arrived = np.zeros(len(order) + 1, dtype=np.int64)
        self.allocated = np.zeros(len(order) + 1, dtype=np.int64)
        self.running: dict[int, tuple[Pod, Placement]] = {}
        self.total_arrived = 0
        self.base = self.current.allocated_milli
        self.used = 0
        self.fails = 0
        self.moves = 0
        for step in range(1, len(order) + 1):
            self.queue.push(float(step), ARRIVAL, step)

    def on_arrival(self, event: Event) -> bool:
        """Place pod ``event.subject`` of the order (or count it failed), then record."""
        step = event.subject
        pod = self.pods[self.order[step - 1]]
        self.total_arrived += pod.shape.total_milli
        tick = time.perf_counter()
        placement = self.chooser.choose(self.current, pod)
        self.decisions.append(time.perf_counter() - tick)
        if placement is None and self.repair is not None:
            placement, made = self.repair.make_room(self.current, self.running, pod)
            self.moves += made
        if placement is None:
            self.fails += 1
        else:
            self.current.place(pod, placement)
            self.running[step] = (pod, placement)
            self.used += pod.shape.total_milli
        if self.hook is not None and self.hook_every and step % self.hook_every == 0:
            self.moves += self.hook(self.current, self.running)
            self.used = self.current.allocated_milli - self.base
        self.arrived[step] = self.total_arrived
        self.allocated[step] = self.used + self.base
        if step % 256 == 0:
            self.shown.advance(256)
        return False  # nothing waits: a pod that fits nowhere has failed


def _check_replay(
    state: ShareState, pods: Sequence[Pod], seeds: Sequence[int], inflation: float, every: int
) -> None:
    """One sentence for the first bad argument of :func:`replay`."""
    check_arguments(
        {"inflation": inflation, "hook_every": every},
        numbers={"inflation": (0.01, 100.0)},
        whole={"hook_every": (0, 2**31)},
    )
    if not pods:
        raise ProblemError("replay: the trace has no pods.")
    if not seeds:
        raise ProblemError("replay: give at least one seed.")
    if state.gpu_capacity_milli == 0:
        raise ProblemError("replay: the cluster has no GPUs.")


def _rng(seed: int) -> np.random.Generator:
    """The seed's generator: it draws the arrival order, then the node ranking and the policy's
    choices (steps 1-3)."""
    return np.random.default_rng(seed)


def _mean_curve(curves: list[list[float | None]], last: int) -> list[float | None]:
    """The mean over the seeds of each bucket's value (None where no seed has one)."""
    mean: list[float | None] = []
    for k in range(last + 1):
        values = [curve[k] for curve in curves if curve[k] is not None]
        mean.append(
            round(statistics.fmean(v for v in values if v is not None), 4) if values else None
        )
    return mean


def replay(
    state: ShareState,
    pods: Sequence[Pod],
    policy: str,
    seeds: Sequence[int],
    *,
    inflation: float = 1.3,
    workload: Workload | None = None,
    trace: str = "trace",
    hook: ReplayHook | None = None,
    hook_every: int = 0,
    repair: RepairHook | None = None,
) -> ReplayResult:
    """Replay ``pods`` on (a copy of) ``state`` with ``policy`` for each seed.

    Parameters
    ----------
    state
        The cluster before any arrival (not changed).
    pods
        The trace, in file order.
    policy
        A name of :data:`gpuopt.sharing.policies.POLICIES`.
    seeds
        One replay per seed; the curves are averaged.
    inflation
        Arrived GPU request to reach, as a multiple of the GPU capacity.
    workload
        The target workload (default: :func:`trace_workload` of ``pods``: typical shapes with
        each shape's median memory, which only the ``gpuopt`` policy reads).
    hook, hook_every
        Called every ``hook_every`` arrivals (module docstring); off by default.

    Examples
    --------
    >>> from gpuopt.cluster.workload import Shape
    >>> state = ShareState.from_nodes(["a", "b"], gpus=[1, 1], cpu_milli=[4000, 4000])
    >>> pods = [Pod(Shape(1000, 500, 1)), Pod(Shape(1000, 1000, 1))]
    >>> result = replay(state, pods, "bestfit", [1, 2])
    >>> result.arrived[-1], result.allocated[100] is not None
    (130, True)
    """
    _check_replay(state, pods, seeds, inflation, hook_every)
    if workload is None:
        workload = trace_workload(pods)
    make_policy(policy, rank=np.arange(1), rng=np.random.default_rng(0), workload=workload)
    started = time.perf_counter()
    last = round(inflation * 100)
    capacity = state.gpu_capacity_milli
    plans = [(rng, arrival_order(pods, capacity, inflation, rng)) for rng in map(_rng, seeds)]
    curves: list[list[float | None]] = []
    failed: list[int] = []
    decisions: list[float] = []
    moves = 0
    with task(f"replay {policy} on {trace}", total=sum(len(o) for _, o in plans)) as shown:
        for rng, order in plans:
            rank = rng.permutation(state.node_count)
            chooser = make_policy(policy, rank=rank, rng=rng, workload=workload)
            seed_run = _PodReplay(state, pods, order, chooser, decisions, shown)
            seed_run.hook, seed_run.hook_every, seed_run.repair = hook, hook_every, repair
            run(seed_run)
            shown.advance(len(order) % 256)
            curves.append(bucket_curve(seed_run.arrived, seed_run.allocated, capacity, last))
            failed.append(seed_run.fails)
            moves += seed_run.moves
    return ReplayResult(
        policy=policy,
        trace=trace,
        seeds=tuple(seeds),
        arrived=list(range(last + 1)),
        allocated=_mean_curve(curves, last),
        per_seed=curves,
        failed_per_seed=failed,
        pods_per_seed=[len(order) for _, order in plans],
        moves=moves,
        seconds=time.perf_counter() - started,
        decision_ms=1000 * statistics.median(decisions) if decisions else math.nan,
    )


__all__ = [
    "RepairHook",
    "ReplayHook",
    "ReplayResult",
    "arrival_order",
    "bucket_curve",
    "replay",
    "trace_workload",
]
