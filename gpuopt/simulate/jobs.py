"""Event-driven replay of a job stream on a cluster, to compare placement and preemption policies.

Events: arrivals, completions, standby windows (an HP job lends its GPUs and
takes them back), grace expiries. Jobs hold whole GPUs (a set of GPU indices
on one node) and CPUs. The rules:

- **Arrival.** A job is placed at once if a node has the GPUs (a set with the
  required pairwise bandwidth when ``topology`` is on and the job needs more
  than one GPU and less than a whole node) and CPUs. The node and the GPUs
  are chosen by :mod:`gpuopt.placement.node`: ``placement`` is
  :func:`~gpuopt.placement.node.greedy.place`'s policy
  (:func:`~gpuopt.placement.node.greedy.rank_nodes`),
  ``"spread"`` the node with the most free GPUs after placement (what a
  least-allocated scheduler does), ``"binpack"`` the node with the fewest,
  keeping completely free nodes for 8-GPU (whole-node) jobs; the GPU set is
  :func:`~gpuopt.cluster.interconnect.best_gpu_set`'s (with ``topology`` off,
  every pair of GPUs counts as alike, which takes the lowest free GPUs).
- **Preemption.** An HP job that does not fit may stop LP jobs (LP jobs never
  preempt, HP jobs are never stopped). The replay state (GPUs that are lent
  or coming back left out, LP jobs on lent GPUs counted as not stoppable)
  becomes a :class:`~gpuopt.preemption.problem.PreemptionProblem` whose
  costs are the work to redo, ``gpus * (now - last_checkpoint)``, and
  ``victims`` names the method that decides (``models/preemption.md``):
  ``"heuristic"`` (per node the cheapest-first prefix of LP jobs that frees
  enough, on the cheapest node, P9), ``"dp"`` the minimum-cost victim set
  (P10), both through :func:`gpuopt.solve` (``"cost"`` and ``"exact"``, their
  names in earlier releases, are still accepted); ``"random"`` (the
  baseline) a random node where stopping LP jobs frees enough
  (:class:`~gpuopt.preemption.greedy.Deficits`), and its LP jobs in random
  order until enough. The preemption model counts GPUs and has no
  topology: a node whose free GPUs are enough in number but hold no set
  with the bandwidth has room (P8, taken first, without victims), and on
  the chosen node the job gets the best set with the bandwidth if there is
  one, else the best set without it. A stopped LP job loses the work since
  its last checkpoint (LP jobs checkpoint every ``checkpoint_minutes`` of
  running) and waits again.
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

The events run on :mod:`gpuopt.simulate.events` (all kinds alike at equal
times: they leave in the order pushed).
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

import gpuopt.progress
from gpuopt.api import solve
from gpuopt.cluster.interconnect import MAX_TOPOLOGY_GPUS, GpuTopology, gpu_topology
from gpuopt.defrag.problem import scaled
from gpuopt.errors import ProblemError
from gpuopt.placement.node.greedy import rank_nodes
from gpuopt.preemption.greedy import Deficits, stage_one
from gpuopt.preemption.index import PreemptionIndex
from gpuopt.preemption.problem import PreemptionProblem
from gpuopt.simulate.events import ARRIVAL, END, Event, EventQueue, Simulation, run

Placement = Literal["spread", "binpack"]
Victims = Literal["heuristic", "dp", "random", "cost", "exact"]

_NEVER = 2**63  # more milli-CPUs than any job has

#: The :func:`gpuopt.solve` method of each victims policy ("random" is the replay's baseline);
#: "cost" and "exact" are the names of earlier releases.
PREEMPTION_METHODS: dict[str, str] = {
    "heuristic": "heuristic",
    "dp": "dp",
    "cost": "heuristic",
    "exact": "dp",
}


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
    victims: Victims = "heuristic"
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
    cpus: int  # milli-CPUs
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
    # Per node: the GPU-set search (None for a node without GPUs), and whether it is a
    # measured matrix (then a job of 2..n-1 GPUs needs min_bandwidth between every pair).
    topologies: list[GpuTopology | None]
    measured: list[bool]
    free: list[int]  # bitmask of free GPUs per node
    lent: list[int]  # bitmask of GPUs lent by standby HP jobs (LP only)
    reserved: list[int]  # bitmask of lent GPUs whose lender is coming back (no one starts there)
    free_cpus: np.ndarray  # milli-CPUs per node
    free_count: np.ndarray
    node_preemptions: list[int]  # LP jobs stopped on each node so far
    running: list[set[int]]  # job positions per node
    fragmented: int = 0
    runs: list[_Run] = field(default_factory=list)


def _popcount(mask: int) -> int:
    return bin(mask).count("1")


def _node_topologies(
    nodes: Sequence[ClusterNode], bandwidth: dict[str, np.ndarray], use: bool
) -> tuple[list[GpuTopology | None], list[bool]]:
    """The GPU-set search of every node, and whether it reads a measured bandwidth matrix.

    A node without a known matrix, or every node with ``use`` off, gets the
    matrix in which all pairs are alike: :func:`~gpuopt.cluster.interconnect.best_gpu_set`
    then takes the lowest free GPUs.
    """
    measured = {name: gpu_topology(matrix) for name, matrix in bandwidth.items()} if use else {}
    topologies: list[GpuTopology | None] = []
    known: list[bool] = []
    for node in nodes:
        if not 0 <= node.gpus <= MAX_TOPOLOGY_GPUS:
            raise ValueError(
                f"node {node.id!r}: has {node.gpus} GPUs; the replay takes 0 to "
                f"{MAX_TOPOLOGY_GPUS} per node"
            )
        found = measured.get(node.topology) if node.topology is not None else None
        if found is not None and found.num_gpus != node.gpus:
            raise ValueError(
                f"node {node.id!r}: has {node.gpus} GPUs but topology {node.topology!r} "
                f"has {found.num_gpus}"
            )
        known.append(found is not None)
        if found is None and node.gpus:
            found = gpu_topology(np.ones((node.gpus, node.gpus)))
        topologies.append(found)
    return topologies, known


def _gpu_set(
    state: _State, node: int, mask: int, k: int, min_bandwidth: float
) -> tuple[int, ...] | None:
    """k GPUs out of ``mask`` on ``node``, by :func:`~gpuopt.cluster.interconnect.best_gpu_set`.

    On a node with a measured matrix, a job of more than one GPU and less
    than the whole node takes a set whose every pair has ``min_bandwidth``
    (e.g. one PCIe NUMA half, or NVLink); pass 0 to drop that need.
    """
    if k == 0:
        return ()
    topology = state.topologies[node]
    if topology is None:
        return None
    need = min_bandwidth if state.measured[node] and 1 < k < topology.num_gpus else 0.0
    return topology.best_set(mask, k, need)


def _lost_work(run: _Run, now: float, period: float) -> float:
    """Seconds of ``run``'s work since its last checkpoint (all of it is redone when stopped)."""
    ran = now - run.start
    return ran - math.floor(ran / period) * period if period > 0 else 0.0


def _preemption_problem(
    state: _State, position: int, now: float, period: float, origin: float
) -> PreemptionProblem | None:
    """The replay state as the preemption problem of job ``position``; None if no node can hold it.

    Node ids are node positions (``"3"``) and LP task ids job positions;
    times are seconds since ``origin``. GPUs that are lent or coming back
    are left out of their node. What may not be stopped on a node (HP jobs,
    LP jobs on lent GPUs) enters as one HP task holding all of it: the
    methods only read its capacity and that the node runs HP work, and the
    problem stays small.
    """
    request = state.runs[position]
    nodes: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    holds = False
    for node_pos, node in enumerate(state.nodes):
        closed = state.lent[node_pos] | state.reserved[node_pos]
        usable = node.gpus - _popcount(closed & state.free[node_pos])
        holds = holds or (usable >= request.job.gpus and scaled(node.cpus) >= request.cpus)
        node_id = str(node_pos)
        nodes.append(
            {
                "id": node_id,
                "gpus": usable,
                "cpus": node.cpus,
                "preemptions": state.node_preemptions[node_pos],
            }
        )
        kept_gpus = kept_cpus = 0
        for task_pos in sorted(state.running[node_pos]):
            run = state.runs[task_pos]
            if run.job.hp or run.on_lent:
                kept_gpus += len(run.gpus)
                kept_cpus += run.cpus
                continue
            checkpoint = now - _lost_work(run, now, period) - origin
            tasks.append(
                {
                    "id": str(task_pos),
                    "node": node_id,
                    "gpus": len(run.gpus),
                    "cpus": run.job.cpus,
                    "priority": "LP",
                    "last_checkpoint": min(max(checkpoint, 0.0), now - origin),
                }
            )
        if kept_gpus or kept_cpus:
            tasks.append(
                {
                    "id": f"kept-{node_id}",
                    "node": node_id,
                    "gpus": kept_gpus,
                    "cpus": kept_cpus / 1000,
                    "priority": "HP",
                    "last_checkpoint": now - origin,
                }
            )
    if not holds:
        return None
    return PreemptionProblem(
        now=now - origin,
        cluster={"nodes": nodes, "tasks": tasks, "now": now - origin},
        request={
            "id": f"job-{position}",
            "gpus": request.job.gpus,
            "cpus": request.job.cpus,
            "priority": "HP",
        },
    )


def _random_victims(
    index: PreemptionIndex, state: _State, rng: random.Random
) -> tuple[int, list[int]] | None:
    """The random baseline: a random node that can make room, its LP jobs in random order.

    The nodes that can make room and what each lacks are the library's
    (:class:`~gpuopt.preemption.greedy.Deficits`); victims are taken until
    both deficits are covered. Returns the node and the victims' job
    positions, or None when no node can make room.
    """
    deficits = Deficits.of(index)
    options: list[tuple[int, list[int]]] = []
    for entry, node in enumerate(deficits.nodes.tolist()):
        lp = [
            p for p in state.running[node] if not state.runs[p].job.hp and not state.runs[p].on_lent
        ]
        if not lp:
            continue
        rng.shuffle(lp)
        need_gpus, need_cpus = int(deficits.gpus[entry]), int(deficits.cpus[entry])
        chosen: list[int] = []
        gpus = cpus = 0
        for p in lp:
            if gpus >= need_gpus and cpus >= need_cpus:
                break
            chosen.append(p)
            gpus += len(state.runs[p].gpus)
            cpus += state.runs[p].cpus
        options.append((node, chosen))
    return options[rng.randrange(len(options))] if options else None


def replay(
    nodes: Sequence[ClusterNode],
    jobs: Sequence[Job],
    policy: Policy,
    *,
    bandwidth: dict[str, np.ndarray] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Metrics:
    """Replay ``jobs`` on ``nodes`` under ``policy`` until every job has finished.

    Raises
    ------
    ValueError
        For a node of more than 16 GPUs, or whose GPU count differs from its
        topology's, or an unknown ``policy.victims``;
        :class:`~gpuopt.errors.ProblemError` (a ``ValueError``) for what
        :func:`check_replay_input` refuses.

    Examples
    --------
    >>> nodes = [ClusterNode("n0", 8, 64), ClusterNode("n1", 8, 64)]
    >>> jobs = [Job("a", 0, 3600, 4, 8, hp=False), Job("b", 60, 3600, 8, 8, hp=True)]
    >>> m = replay(nodes, jobs, Policy("binpack"))
    >>> m.finished, m.preemptions, m.eight_gpu_on_arrival
    (2, 0, 1.0)
    """
    with gpuopt.progress.task(f"replay {policy.name}: jobs finished", total=len(jobs)) as shown:

        def show(done: int, total: int) -> None:
            shown.update(completed=done, total=total)

        progress = progress or (show if shown.active else None)
        return _replay(nodes, jobs, policy, bandwidth, progress)


def _replay(
    nodes: Sequence[ClusterNode],
    jobs: Sequence[Job],
    policy: Policy,
    bandwidth: dict[str, np.ndarray] | None,
    progress: Callable[[int, int], None] | None,
) -> Metrics:
    started = time.perf_counter()
    if policy.victims not in (*PREEMPTION_METHODS, "random"):
        raise ValueError(
            f"victims {policy.victims!r} is not known; choose one of heuristic, dp, random."
        )
    check_replay_input(nodes, jobs, policy)
    simulation = run(_JobReplay(nodes, jobs, policy, bandwidth or {}, progress))
    leaked = [n.id for i, n in enumerate(nodes) if simulation.state.free[i] != (1 << n.gpus) - 1]
    if leaked or simulation.finished != len(jobs):
        raise RuntimeError(f"replay ended with busy nodes {leaked[:3]} or unfinished jobs")
    return simulation.metrics(time.perf_counter() - started)


def check_replay_input(nodes: Sequence[ClusterNode], jobs: Sequence[Job], policy: Policy) -> None:
    """Refuse, in one sentence naming the field and value, what the replay cannot run: no
    node, ids given twice, a placement it does not know, a job whose times are not finite
    and at least 0 (its duration above 0), or that no node could ever hold."""
    if not nodes:
        raise ProblemError("nodes: the replay needs at least one node.")
    if policy.placement not in ("spread", "binpack"):
        raise ProblemError(
            f"placement {policy.placement!r} is not known; choose one of spread, binpack."
        )
    for what, ids in (("node", [n.id for n in nodes]), ("job", [j.id for j in jobs])):
        twice = next((i for i, count in Counter(ids).items() if count > 1), None)
        if twice is not None:
            raise ProblemError(f"{what} id {twice!r} is given twice.")
    most_gpus = max(n.gpus for n in nodes)
    most_cpus = max(n.cpus for n in nodes)
    for job in jobs:
        if not (math.isfinite(job.arrival) and job.arrival >= 0):
            raise ProblemError(
                f"job {job.id!r}: arrival {job.arrival!r} is not a time of 0 or more."
            )
        if not (math.isfinite(job.duration) and job.duration > 0):
            raise ProblemError(f"job {job.id!r}: duration {job.duration!r} is not above 0.")
        if not 0 <= job.gpus <= most_gpus:
            raise ProblemError(
                f"job {job.id!r}: gpus {job.gpus!r} is not from 0 to the largest node's "
                f"{most_gpus}."
            )
        if not (math.isfinite(job.cpus) and 0 <= job.cpus <= most_cpus):
            raise ProblemError(
                f"job {job.id!r}: cpus {job.cpus!r} is not from 0 to the largest node's "
                f"{most_cpus:g}."
            )


def _new_state(
    nodes: Sequence[ClusterNode], bandwidth: dict[str, np.ndarray], use_topology: bool
) -> _State:
    """Every node empty: all GPUs and CPUs free, nothing lent."""
    topologies, measured = _node_topologies(nodes, bandwidth, use_topology)
    return _State(
        nodes=nodes,
        topologies=topologies,
        measured=measured,
        free=[(1 << n.gpus) - 1 for n in nodes],
        lent=[0 for _ in nodes],
        reserved=[0 for _ in nodes],
        free_cpus=np.array([scaled(n.cpus) for n in nodes], dtype=np.int64),
        free_count=np.array([n.gpus for n in nodes], dtype=np.int64),
        node_preemptions=[0 for _ in nodes],
        running=[set() for _ in nodes],
    )


class _JobReplay(Simulation):
    """The replay's state and its events (module docstring), on :func:`~gpuopt.simulate.events.run`.

    Events (subject: the job's position in the stream): ``arrival``, ``end``
    (its work is done), ``lend`` (its standby window begins), ``return``
    (the window ends: the LP jobs on its GPUs get the grace period),
    ``stop`` (one of those LP jobs stops), ``resume`` (the lender runs
    again). All kinds rank alike: equal times leave in the order pushed.
    """

    def __init__(
        self,
        nodes: Sequence[ClusterNode],
        jobs: Sequence[Job],
        policy: Policy,
        bandwidth: dict[str, np.ndarray],
        progress: Callable[[int, int], None] | None,
    ) -> None:
        super().__init__(EventQueue(), start=jobs[0].arrival if jobs else 0.0)
        self.nodes, self.jobs, self.policy, self.progress = nodes, jobs, policy, progress
        self.rng = random.Random(policy.seed)
        self.state = _new_state(nodes, bandwidth, policy.topology)
        self.state.runs = [_Run(job, scaled(job.cpus)) for job in jobs]
        self.node_gpus = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.waiting: list[int] = []
        self.lent_nodes: set[int] = set()  # nodes with GPUs lent by a standby HP job
        self.period = policy.checkpoint_minutes * 60.0
        # preemption problems count time from the first arrival
        self.origin = min((job.arrival for job in jobs), default=0.0)
        self.first_time = self.clock
        self.wasted = self.lent_used = self.frag_area = 0.0
        self.preemptions = self.standby_stops = self.finished = 0
        self.eight_total = self.eight_on_arrival = 0
        for position, job in enumerate(jobs):
            self.queue.push(job.arrival, ARRIVAL, position)

    # -- the cluster ---------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Count fragmented nodes over the time since the last event."""
        self.frag_area += self.state.fragmented * (now - self.clock)
        super().advance(now)

    def is_fragmented(self, node: int) -> bool:
        used = int(self.node_gpus[node] - self.state.free_count[node])
        return bool(0 < used < self.node_gpus[node])

    def occupy(self, position: int, node: int, gpus: tuple[int, ...], now: float) -> None:
        """Start job ``position`` on ``gpus`` of ``node``; push its end (and its standby)."""
        state = self.state
        run = state.runs[position]
        before = self.is_fragmented(node)
        mask = sum(1 << g for g in gpus)
        run.on_lent = bool(mask & state.lent[node])
        state.free[node] &= ~mask
        state.free_count[node] -= len(gpus)
        state.free_cpus[node] -= run.cpus
        state.running[node].add(position)
        state.fragmented += int(self.is_fragmented(node)) - int(before)
        run.node, run.gpus, run.start = node, gpus, now
        if math.isnan(run.first_start):
            run.first_start = now
        run.version += 1
        self.queue.push(now + run.job.duration - run.done, END, position, run.version)
        standby = run.job.standby
        if standby is not None and run.job.hp and not run.lent:
            self.queue.push(now + standby[0] - run.done, "lend", position, run.version)

    def release(self, position: int, *, lent_gpus: bool = False) -> None:
        """Free job ``position``'s GPUs and CPUs (marked lent when ``lent_gpus``)."""
        state = self.state
        run = state.runs[position]
        node = run.node
        before = self.is_fragmented(node)
        mask = sum(1 << g for g in run.gpus)
        state.free[node] |= mask
        if lent_gpus:
            state.lent[node] |= mask
            self.lent_nodes.add(node)
        state.free_count[node] += len(run.gpus)
        state.free_cpus[node] += run.cpus
        state.running[node].discard(position)
        state.fragmented += int(self.is_fragmented(node)) - int(before)
        run.node, run.gpus = -1, ()

    def place(self, run: _Run, allow_lent: bool) -> tuple[int, tuple[int, ...]] | None:
        """The node and GPUs ``run`` gets without preemption (placement.node's rules), or None."""
        state, k = self.state, run.job.gpus
        free_count = state.free_count.copy()
        for node in self.lent_nodes:
            closed = state.reserved[node] | (0 if allow_lent else state.lent[node])
            free_count[node] -= _popcount(closed & state.free[node])
        fits = np.flatnonzero((free_count >= k) & (state.free_cpus >= run.cpus))
        if fits.size == 0:
            return None
        order = rank_nodes(
            self.policy.placement,
            fits,
            node_gpus=self.node_gpus,
            free_gpus=free_count,
            cpus_free=state.free_cpus,
            taken=k,
            request_cpus=run.cpus,
        )
        for node in fits[order].tolist():
            closed = state.reserved[node] | (0 if allow_lent else state.lent[node])
            gpus = _gpu_set(state, node, state.free[node] & ~closed, k, self.policy.min_bandwidth)
            if gpus is not None:
                return node, gpus
        return None

    # -- preemption ----------------------------------------------------------------------

    def choose_victims(self, position: int, now: float) -> tuple[int, list[int]] | None:
        """The node where HP job ``position`` goes and the LP jobs it stops, by the policy."""
        problem = _preemption_problem(self.state, position, now, self.period, self.origin)
        if problem is None:
            return None
        if self.policy.victims == "random":
            room = stage_one(problem.index)
            if room is not None:
                return room, []
            return _random_victims(problem.index, self.state, self.rng)
        decision = solve(problem, PREEMPTION_METHODS[self.policy.victims])
        if decision.node is None:
            return None
        return int(decision.node), [int(victim) for victim in decision.victims]

    def preempt_for(self, position: int, now: float) -> bool:
        """Start HP job ``position`` by stopping LP jobs; False when no node can make room."""
        choice = self.choose_victims(position, now)
        if choice is None:
            return False
        node, victims = choice
        state = self.state
        for p in victims:
            victim = state.runs[p]
            lost = _lost_work(victim, now, self.period)
            self.wasted += len(victim.gpus) * lost
            victim.done += (now - victim.start) - lost
            self.release(p)
            victim.version += 1
            self.waiting.append(p)
            self.preemptions += 1
            state.node_preemptions[node] += 1
        k = state.runs[position].job.gpus
        mask = state.free[node] & ~(state.lent[node] | state.reserved[node])
        min_bandwidth = self.policy.min_bandwidth
        gpus = _gpu_set(state, node, mask, k, min_bandwidth) or _gpu_set(state, node, mask, k, 0.0)
        if gpus is None:  # unreachable: the problem left the closed GPUs out
            raise AssertionError(
                f"no {k} free GPUs on node {self.nodes[node].id!r} after preemption"
            )
        self.occupy(position, node, gpus, now)
        return True

    def try_start(self, position: int, now: float, failed: dict[tuple[int, bool], int]) -> bool:
        """Start job ``position`` now if it fits (an HP job preempting), else False.

        ``failed`` maps (GPUs, may use lent GPUs) to the fewest milli-CPUs
        that found no place since resources were last freed: starting jobs
        only takes GPUs and CPUs, so a job of as many GPUs and at least as
        many CPUs finds no place either, and the waiting-queue scan skips it.
        """
        run = self.state.runs[position]
        key = (run.job.gpus, not run.job.hp)
        if run.cpus < failed.get(key, _NEVER):
            found = self.place(run, allow_lent=key[1])
            if found is not None:
                self.occupy(position, *found, now)
                return True
            failed[key] = run.cpus
        if run.job.hp and self.preempt_for(position, now):
            failed.clear()  # the victims may free more than the job takes
            return True
        return False

    # -- events --------------------------------------------------------------------------

    def on_arrival(self, event: Event) -> bool:
        position = event.subject
        eight = self.state.runs[position].job.gpus >= 8
        self.eight_total += eight
        if self.try_start(position, event.time, {}):
            self.eight_on_arrival += eight
        else:
            self.waiting.append(position)
        return True

    def on_end(self, event: Event) -> bool:
        run = self.state.runs[event.subject]
        if event.version != run.version or run.node < 0:
            return False
        if run.on_lent:
            self.lent_used += len(run.gpus) * (event.time - run.start)
        self.release(event.subject)
        run.finish = event.time
        self.finished += 1
        if self.progress is not None and self.finished % 500 == 0:
            self.progress(self.finished, len(self.jobs))
        return True

    def on_lend(self, event: Event) -> bool:
        """The standby window begins: the HP job's GPUs go to LP jobs until it returns."""
        run = self.state.runs[event.subject]
        if event.version != run.version or run.node < 0:
            return False
        assert run.job.standby is not None
        run.lent = True
        node, gpus = run.node, run.gpus
        run.done += event.time - run.start
        self.release(event.subject, lent_gpus=True)
        run.version += 1
        self.queue.push(event.time + run.job.standby[1], "return", event.subject, run.version)
        run.node, run.gpus = node, gpus  # remembered for the return
        return True

    def on_return(self, event: Event) -> bool:
        """The window ends: LP jobs on the lent GPUs stop after the grace; the lender resumes."""
        run = self.state.runs[event.subject]
        if event.version != run.version:
            return False
        mask = sum(1 << g for g in run.gpus)
        self.state.reserved[run.node] |= mask
        self.lent_nodes.add(run.node)
        grace_end = event.time + self.policy.grace_seconds
        for p in list(self.state.running[run.node]):
            other = self.state.runs[p]
            if sum(1 << g for g in other.gpus) & mask:
                self.queue.push(grace_end, "stop", p, other.version)
        self.queue.push(grace_end, "resume", event.subject, run.version)
        return False  # nothing was freed: the waiting jobs need not be scanned

    def on_stop(self, event: Event) -> bool:
        run = self.state.runs[event.subject]
        if event.version != run.version or run.node < 0:
            return False
        self.lent_used += len(run.gpus) * (event.time - run.start)
        run.done += event.time - run.start  # it wrote a checkpoint during the grace period
        self.release(event.subject)
        run.version += 1
        self.standby_stops += 1
        self.waiting.append(event.subject)
        return True

    def on_resume(self, event: Event) -> bool:
        state, run = self.state, self.state.runs[event.subject]
        if event.version != run.version:
            return False
        node, gpus = run.node, run.gpus
        mask = sum(1 << g for g in gpus)
        state.lent[node] &= ~mask
        state.reserved[node] &= ~mask
        if not state.lent[node] and not state.reserved[node]:
            self.lent_nodes.discard(node)
        if state.free[node] & mask == mask:
            run.node = -1
            self.occupy(event.subject, node, gpus, event.time)
        else:  # a lent GPU is still busy (should not happen after the grace stops)
            run.node, run.gpus = -1, ()
            self.waiting.append(event.subject)
        return True

    def settle(self, event: Event) -> None:
        """Start every waiting job that fits now, HP first, then by arrival (backfilling)."""
        if not self.waiting:
            return
        runs = self.state.runs
        self.waiting.sort(key=lambda p: (not runs[p].job.hp, runs[p].job.arrival, p))
        still = []
        failed: dict[tuple[int, bool], int] = {}
        for p in self.waiting:
            if runs[p].node < 0 and not self.try_start(p, event.time, failed):
                still.append(p)
        self.waiting[:] = still

    def metrics(self, seconds: float) -> Metrics:
        """What the replay measured, once every job has finished."""
        runs = self.state.runs
        lp = [r for r in runs if not r.job.hp and not math.isnan(r.finish)]
        hp = [r for r in runs if r.job.hp and not math.isnan(r.first_start)]
        span = max(self.clock - self.first_time, 1e-9)
        return Metrics(
            policy=self.policy.name,
            jobs=len(self.jobs),
            finished=self.finished,
            lp_wasted_gpu_hours=self.wasted / 3600.0,
            lp_mean_completion_hours=(
                sum(r.finish - r.job.arrival for r in lp) / len(lp) / 3600.0 if lp else 0.0
            ),
            hp_mean_wait_minutes=(
                sum(r.first_start - r.job.arrival for r in hp) / len(hp) / 60.0 if hp else 0.0
            ),
            eight_gpu_on_arrival=(
                self.eight_on_arrival / self.eight_total if self.eight_total else 1.0
            ),
            mean_fragmented_nodes=self.frag_area / span,
            preemptions=self.preemptions,
            standby_stops=self.standby_stops,
            lent_gpu_hours_used=self.lent_used / 3600.0,
            seconds=seconds,
        )


__all__ = [
    "PREEMPTION_METHODS",
    "ClusterNode",
    "Job",
    "Metrics",
    "Policy",
    "check_replay_input",
    "replay",
]
