"""Event-driven replay of a job stream on a cluster, to compare placement and preemption policies.

Events: arrivals, completions, standby windows (an HP job lends its GPUs and
takes them back), grace expiries. Jobs hold whole GPUs (a set of GPU indices
on one node) and CPUs. The rules:

- **Arrival.** A job is placed at once if a node has the GPUs (a set with the
  required pairwise bandwidth when ``topology`` is on and the job needs more
  than one GPU) and CPUs; ``placement`` picks the node: ``"spread"`` the node
  with the most free GPUs (what a least-allocated scheduler does),
  ``"binpack"`` the node with the fewest free GPUs after placement, keeping
  completely free nodes for 8-GPU (whole-node) jobs.
- **Preemption.** An HP job that does not fit may stop LP jobs (LP jobs never
  preempt, HP jobs are never stopped). ``victims="cost"``: per node the
  cheapest-first prefix of LP jobs by work to redo, ``gpus * (now -
  last_checkpoint)``, that frees enough, on the cheapest node (the heuristic
  of :mod:`gpuopt.preemption`); ``victims="random"``: a random node where
  stopping LP jobs frees enough, and LP jobs in random order until enough.
  A stopped LP job loses the work since its last checkpoint (LP jobs
  checkpoint every ``checkpoint_minutes`` of running) and waits again.
- **Waiting.** Jobs that cannot start wait in a queue (HP first, then
  arrival); after every release the queue is scanned and every job that fits
  starts (backfilling), HP jobs preempting as above.
- **Standby.** An HP job with a standby window lends its GPUs for the window:
  LP jobs may use them (HP jobs may not). When the window ends, the LP jobs on
  them get ``grace_seconds`` (default 60) to write a checkpoint and are then
  stopped (no work lost, but they wait again); the HP job resumes after the
  grace period.

Metrics: LP GPU-hours wasted by preemption, LP completion time (finish -
arrival), HP waiting time (start - arrival), the share of 8-GPU jobs placed
on arrival, time-averaged fragmented nodes (some but not all GPUs used),
preemptions (HP stopping LP), standby stops (LP jobs stopped when a lender
returns), GPU-hours lent by standby and used by LP jobs. After the last event
every GPU and CPU is free again (checked: a replay that leaks raises).
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Placement = Literal["spread", "binpack"]
Victims = Literal["cost", "random"]


@dataclass(frozen=True)
class ClusterNode:
    """A node of the replayed cluster (``topology`` names a bandwidth matrix, or None)."""

    id: str
    gpus: int
    cpus: float
    topology: str | None = None


@dataclass(frozen=True)
class Job:
    """A job of the stream: ``duration`` seconds of work on ``gpus`` GPUs."""

    id: str
    arrival: float
    duration: float
    gpus: int
    cpus: float
    hp: bool
    standby: tuple[float, float] | None = None  # (start, length) in seconds of its own run


@dataclass(frozen=True)
class Policy:
    """One policy to replay."""

    name: str
    placement: Placement = "binpack"
    topology: bool = True
    victims: Victims = "cost"
    checkpoint_minutes: float = 30.0
    grace_seconds: float = 60.0
    min_bandwidth: float = 32.0  # GB/s between every pair of a 2..7-GPU job (topology on)
    seed: int = 0


@dataclass
class Metrics:
    """What one replay measured."""

    policy: str
    jobs: int
    finished: int
    lp_wasted_gpu_hours: float
    lp_mean_completion_hours: float
    hp_mean_wait_minutes: float
    eight_gpu_on_arrival: float
    mean_fragmented_nodes: float
    preemptions: int
    standby_stops: int
    lent_gpu_hours_used: float
    seconds: float

    def as_dict(self) -> dict[str, float | int | str]:
        return dict(self.__dict__)


@dataclass
class _Run:
    """A job while it is known to the replay."""

    job: Job
    done: float = 0.0  # seconds of work saved (at the last checkpoint or stop)
    start: float = math.nan  # start of the current run
    node: int = -1
    gpus: tuple[int, ...] = ()
    first_start: float = math.nan
    finish: float = math.nan
    version: int = 0  # invalidates the finish event of an earlier run
    on_lent: bool = False
    lent: bool = False  # its standby window has begun (it lends once)


@dataclass
class _State:
    nodes: Sequence[ClusterNode]
    topologies: dict[str, Any]  # name -> gpuopt.placement.nodes.GpuTopology
    free: list[int]  # bitmask of free GPUs per node
    lent: list[int]  # bitmask of GPUs lent by standby HP jobs (LP only)
    reserved: list[int]  # bitmask of lent GPUs whose lender is coming back (no one starts there)
    free_cpus: np.ndarray
    free_count: np.ndarray
    running: list[set[int]]  # job positions per node
    fragmented: int = 0
    runs: list[_Run] = field(default_factory=list)


def _popcount(mask: int) -> int:
    return bin(mask).count("1")


def _first_bits(mask: int, k: int) -> tuple[int, ...] | None:
    bits = [i for i in range(mask.bit_length()) if mask >> i & 1]
    return tuple(bits[:k]) if len(bits) >= k else None


def _gpu_set(state: _State, node: int, mask: int, k: int, policy: Policy) -> tuple[int, ...] | None:
    """k GPUs out of ``mask`` on ``node``: by bandwidth when topology is on, else the lowest.

    With topology on, a job of more than one GPU and less than a whole node
    takes a set whose every pair has ``policy.min_bandwidth`` (e.g. one PCIe
    NUMA half, or NVLink), chosen by :func:`gpuopt.placement.nodes.best_gpu_set`
    so the GPUs left stay well connected.
    """
    size = state.nodes[node].gpus
    topo = state.nodes[node].topology
    if policy.topology and topo is not None and topo in state.topologies:
        from gpuopt.placement.nodes import best_gpu_set

        need = policy.min_bandwidth if 1 < k < size else 0.0
        found = best_gpu_set(state.topologies[topo], mask, k, need)
        return None if found is None else tuple(int(g) for g in found)
    return _first_bits(mask, k)


def _topologies(bandwidth: dict[str, np.ndarray]) -> dict[str, Any]:
    if not bandwidth:
        return {}
    from gpuopt.placement.nodes import gpu_topology

    return {name: gpu_topology(matrix) for name, matrix in bandwidth.items()}


def replay(
    nodes: Sequence[ClusterNode],
    jobs: Sequence[Job],
    policy: Policy,
    *,
    bandwidth: dict[str, np.ndarray] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Metrics:
    """Replay ``jobs`` on ``nodes`` under ``policy`` until every job has finished.

    Examples
    --------
    >>> nodes = [ClusterNode("n0", 8, 64), ClusterNode("n1", 8, 64)]
    >>> jobs = [Job("a", 0, 3600, 4, 8, hp=False), Job("b", 60, 3600, 8, 8, hp=True)]
    >>> m = replay(nodes, jobs, Policy("binpack"))
    >>> m.finished, m.preemptions, m.eight_gpu_on_arrival
    (2, 0, 1.0)
    """
    started = time.perf_counter()
    rng = random.Random(policy.seed)
    state = _State(
        nodes=nodes,
        topologies=_topologies(bandwidth or {}),
        free=[(1 << n.gpus) - 1 for n in nodes],
        lent=[0 for _ in nodes],
        reserved=[0 for _ in nodes],
        free_cpus=np.array([n.cpus for n in nodes], dtype=float),
        free_count=np.array([n.gpus for n in nodes], dtype=np.int64),
        running=[set() for _ in nodes],
    )
    node_gpus = np.array([n.gpus for n in nodes], dtype=np.int64)
    state.runs = [_Run(job) for job in jobs]
    events: list[tuple[float, int, str, int, int]] = []
    sequence = 0

    def push(at: float, kind: str, job: int, version: int = 0) -> None:
        nonlocal sequence
        heapq.heappush(events, (at, sequence, kind, job, version))
        sequence += 1

    for position, job in enumerate(jobs):
        push(job.arrival, "arrive", position)
    waiting: list[int] = []
    lent_nodes: set[int] = set()  # nodes with GPUs lent by a standby HP job
    period = policy.checkpoint_minutes * 60.0
    wasted = 0.0
    preemptions = 0
    standby_stops = 0
    lent_used = 0.0
    eight_total = eight_on_arrival = 0
    frag_area = 0.0
    last_time = jobs[0].arrival if jobs else 0.0
    first_time = last_time
    finished = 0
    handled = 0

    def is_fragmented(node: int) -> bool:
        used = int(node_gpus[node] - state.free_count[node])
        return bool(0 < used < node_gpus[node])

    def occupy(position: int, node: int, gpus: tuple[int, ...], now: float) -> None:
        run = state.runs[position]
        before = is_fragmented(node)
        mask = sum(1 << g for g in gpus)
        run.on_lent = bool(mask & state.lent[node])
        state.free[node] &= ~mask
        state.free_count[node] -= len(gpus)
        state.free_cpus[node] -= run.job.cpus
        state.running[node].add(position)
        state.fragmented += int(is_fragmented(node)) - int(before)
        run.node, run.gpus, run.start = node, gpus, now
        if math.isnan(run.first_start):
            run.first_start = now
        run.version += 1
        push(now + run.job.duration - run.done, "finish", position, run.version)
        standby = run.job.standby
        if standby is not None and run.job.hp and not run.lent:
            push(now + standby[0] - run.done, "lend", position, run.version)

    def release(position: int, now: float, *, lent_gpus: bool = False) -> None:
        run = state.runs[position]
        node = run.node
        before = is_fragmented(node)
        mask = sum(1 << g for g in run.gpus)
        state.free[node] |= mask
        if lent_gpus:
            state.lent[node] |= mask
            lent_nodes.add(node)
        state.free_count[node] += len(run.gpus)
        state.free_cpus[node] += run.job.cpus
        state.running[node].discard(position)
        state.fragmented += int(is_fragmented(node)) - int(before)
        run.node, run.gpus = -1, ()

    def candidates(run: _Run, allow_lent: bool) -> list[tuple[int, tuple[int, ...]]]:
        k = run.job.gpus
        free_count = state.free_count.copy()
        for node in lent_nodes:
            closed = state.reserved[node] | (0 if allow_lent else state.lent[node])
            free_count[node] -= _popcount(closed & state.free[node])
        fits = np.flatnonzero((free_count >= k) & (state.free_cpus >= run.job.cpus - 1e-9))
        if fits.size == 0:
            return []
        after = free_count[fits] - k
        if policy.placement == "spread":
            order = fits[np.lexsort((fits, -state.free_cpus[fits], -after))]
        else:
            whole = (free_count[fits] == node_gpus[fits]) & (k < node_gpus[fits])
            order = fits[np.lexsort((fits, state.free_cpus[fits], after, whole))]
        out = []
        for node in order.tolist():
            closed = state.reserved[node] | (0 if allow_lent else state.lent[node])
            mask = state.free[node] & ~closed
            gpus = _gpu_set(state, node, mask, k, policy)
            if gpus is not None:
                out.append((node, gpus))
                break
        return out

    def lost_work(position: int, now: float) -> float:
        run = state.runs[position]
        ran = now - run.start
        return ran - math.floor(ran / period) * period if period > 0 else 0.0

    def preempt_for(position: int, now: float) -> bool:
        nonlocal wasted, preemptions
        run = state.runs[position]
        k, cpus = run.job.gpus, run.job.cpus
        options: list[tuple[float, int, int, list[int]]] = []
        for node in range(len(nodes)):
            if node_gpus[node] < k:
                continue
            lp = [
                p
                for p in state.running[node]
                if not state.runs[p].job.hp and not state.runs[p].on_lent
            ]
            if not lp:
                continue
            closed = state.lent[node] | state.reserved[node]
            spare = int(state.free_count[node] - _popcount(closed & state.free[node]))
            spare_cpus = float(state.free_cpus[node])
            total = spare + sum(len(state.runs[p].gpus) for p in lp)
            if total < k or spare_cpus + sum(state.runs[p].job.cpus for p in lp) < cpus - 1e-9:
                continue
            if policy.victims == "cost":
                lp.sort(key=lambda p: (len(state.runs[p].gpus) * lost_work(p, now), p))
            else:
                rng.shuffle(lp)
            chosen, gpus, cpu = [], spare, spare_cpus
            for p in lp:
                if gpus >= k and cpu >= cpus - 1e-9:
                    break
                chosen.append(p)
                gpus += len(state.runs[p].gpus)
                cpu += state.runs[p].job.cpus
            cost = sum(len(state.runs[p].gpus) * lost_work(p, now) for p in chosen)
            options.append((cost, len(chosen), node, chosen))
        if not options:
            return False
        if policy.victims == "cost":
            _, _, node, chosen = min(options, key=lambda o: (o[0], o[1], o[2]))
        else:
            _, _, node, chosen = options[rng.randrange(len(options))]
        for p in chosen:
            victim = state.runs[p]
            lost = lost_work(p, now)
            wasted += len(victim.gpus) * lost
            victim.done += (now - victim.start) - lost
            release(p, now)
            victim.version += 1
            waiting.append(p)
            preemptions += 1
        mask = state.free[node] & ~(state.lent[node] | state.reserved[node])
        gpus_set = _gpu_set(state, node, mask, k, policy) or _first_bits(mask, k)
        if gpus_set is None:
            return False
        occupy(position, node, gpus_set, now)
        return True

    def try_start(position: int, now: float) -> bool:
        run = state.runs[position]
        found = candidates(run, allow_lent=not run.job.hp)
        if found:
            occupy(position, *found[0], now)
            return True
        if run.job.hp:
            return preempt_for(position, now)
        return False

    while events:
        now, _, kind, position, version = heapq.heappop(events)
        frag_area += state.fragmented * (now - last_time)
        last_time = now
        run = state.runs[position]
        if kind == "arrive":
            if run.job.gpus >= 8:
                eight_total += 1
            if try_start(position, now):
                if run.job.gpus >= 8:
                    eight_on_arrival += 1
            else:
                waiting.append(position)
        elif kind == "finish":
            if version != run.version or run.node < 0:
                continue
            if run.on_lent:
                lent_used += len(run.gpus) * (now - run.start)
            release(position, now)
            run.finish = now
            finished += 1
            handled += 1
            if progress is not None and handled % 500 == 0:
                progress(handled, len(jobs))
        elif kind == "lend":
            if version != run.version or run.node < 0:
                continue
            assert run.job.standby is not None
            run.lent = True
            node, gpus = run.node, run.gpus
            run.done += now - run.start
            release(position, now, lent_gpus=True)
            run.version += 1
            push(now + run.job.standby[1], "return", position, run.version)
            run.node, run.gpus = node, gpus  # remembered for the return
        elif kind == "return":
            if version != run.version:
                continue
            node, gpus = run.node, run.gpus
            mask = sum(1 << g for g in gpus)
            state.reserved[node] |= mask
            lent_nodes.add(node)
            for p in list(state.running[node]):
                other = state.runs[p]
                if sum(1 << g for g in other.gpus) & mask:
                    push(now + policy.grace_seconds, "stop", p, other.version)
            push(now + policy.grace_seconds, "resume", position, run.version)
        elif kind == "stop":
            if version != run.version or run.node < 0:
                continue
            lent_used += len(run.gpus) * (now - run.start)
            run.done += now - run.start  # it wrote a checkpoint during the grace period
            release(position, now)
            run.version += 1
            standby_stops += 1
            waiting.append(position)
        elif kind == "resume":
            if version != run.version:
                continue
            node, gpus = run.node, run.gpus
            mask = sum(1 << g for g in gpus)
            state.lent[node] &= ~mask
            state.reserved[node] &= ~mask
            if not state.lent[node] and not state.reserved[node]:
                lent_nodes.discard(node)
            if state.free[node] & mask == mask:
                run.node = -1
                occupy(position, node, gpus, now)
            else:  # a lent GPU is still busy (should not happen after the grace stops)
                run.node, run.gpus = -1, ()
                waiting.append(position)
        if waiting and kind in ("finish", "stop", "resume", "lend", "arrive"):
            waiting.sort(key=lambda p: (not state.runs[p].job.hp, state.runs[p].job.arrival, p))
            still = []
            for p in waiting:
                if state.runs[p].node < 0 and not try_start(p, now):
                    still.append(p)
            waiting[:] = still
    leaked = [n.id for i, n in enumerate(nodes) if state.free[i] != (1 << n.gpus) - 1]
    if leaked or finished != len(jobs):
        raise RuntimeError(f"replay ended with busy nodes {leaked[:3]} or unfinished jobs")
    lp = [r for r in state.runs if not r.job.hp and not math.isnan(r.finish)]
    hp = [r for r in state.runs if r.job.hp and not math.isnan(r.first_start)]
    span = max(last_time - first_time, 1e-9)
    return Metrics(
        policy=policy.name,
        jobs=len(jobs),
        finished=finished,
        lp_wasted_gpu_hours=wasted / 3600.0,
        lp_mean_completion_hours=(
            sum(r.finish - r.job.arrival for r in lp) / len(lp) / 3600.0 if lp else 0.0
        ),
        hp_mean_wait_minutes=(
            sum(r.first_start - r.job.arrival for r in hp) / len(hp) / 60.0 if hp else 0.0
        ),
        eight_gpu_on_arrival=eight_on_arrival / eight_total if eight_total else 1.0,
        mean_fragmented_nodes=frag_area / span,
        preemptions=preemptions,
        standby_stops=standby_stops,
        lent_gpu_hours_used=lent_used / 3600.0,
        seconds=time.perf_counter() - started,
    )


__all__ = ["ClusterNode", "Job", "Metrics", "Policy", "replay"]
