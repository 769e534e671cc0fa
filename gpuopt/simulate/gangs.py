"""Replay of gang jobs on a GB200-like cluster: whom to stop when a guaranteed gang cannot start.

Cluster: ``blocks`` blocks of ``domains_per_block`` NVLink domains (a GB200
NVL72 rack) of ``nodes_per_domain`` 4-GPU nodes; levels ``block > nvl``.
Jobs (:func:`gang_jobs`, seeded): spot (LP, priority 0-99) and guaranteed
(HP, priority 1000) gangs of ``pods`` pods of 2 or 4 GPUs, all required
inside one NVLink domain, Poisson arrivals, log-normal durations, all or
nothing (``min_member`` = pods). A running gang writes a checkpoint every
``checkpoint_minutes`` of its run; when it stops, the work since then is
lost (its cost, ``models/gang.md``) and it waits again with the rest.

Events are arrivals and completions (:mod:`gpuopt.simulate.events`; at equal
times arrivals first, then by gang id). After each, the queue (HP first, then
arrival order) is scanned and every gang that fits starts (placement by
:func:`gpuopt.gang.solve_heuristic` without preemption). An HP gang that does
not fit chooses victims among the running LP gangs by ``method``:

- ``"cpsat"`` / ``"heuristic"``: :func:`gpuopt.gang.solve_cpsat` /
  :func:`gpuopt.gang.solve_heuristic` on the whole state (victims and the
  domain together); ``"exact"``, the old name of ``"cpsat"``, is still accepted;
- ``"victims-first"`` (baseline): the cheapest LP gangs cluster-wide, by cost
  per GPU, until the cluster has enough free GPUs in total, then a placement
  in one domain is tried; when it fails the gang waits and those evictions
  are **wasted evictions**;
- ``"random"`` (baseline): a random NVLink domain where the gang fits once
  every LP pod there stops, and random LP gangs with a member there until it
  fits (those the placement does not use keep running).

Every decision of every method goes through :func:`gpuopt.gang.violations`:
ours and the random baseline must be legal; the victims-first baseline may
break only P3 (victims off the gang's nodes) when it places, and G1 (victims
but no placement) when its evictions are wasted, which is what it measures.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuopt.cluster.model import Cluster
from gpuopt.errors import check_arguments
from gpuopt.gang.cpsat import solve_cpsat
from gpuopt.gang.greedy import solve_heuristic
from gpuopt.gang.problem import GangProblem
from gpuopt.gang.solution import GangResult, evaluate, make_answer, pods_per_node, violations
from gpuopt.result import Status
from gpuopt.simulate import events
from gpuopt.simulate.events import ARRIVAL, END, Event, EventQueue, Simulation

GangMethod = Literal["cpsat", "heuristic", "victims-first", "random", "exact"]
METHODS: tuple[GangMethod, ...] = ("cpsat", "heuristic", "victims-first", "random")
#: old method name -> its name now (as :data:`gpuopt.api.ALIASES` for gangs).
OLD_METHODS: dict[str, GangMethod] = {"exact": "cpsat"}
GPUS = 4  # per node
HP_PRIORITY = 1000


@dataclass(frozen=True)
class GangJob:
    """A gang of the stream: ``pods`` pods of ``gpus`` GPUs, ``duration`` minutes of work."""

    id: str
    arrival: float
    duration: float
    pods: int
    gpus: int
    hp: bool
    priority: int


@dataclass
class GangMetrics:
    """What one replay measured (times in minutes unless named hours)."""

    method: str
    jobs: int
    finished: int
    gpu_allocation: float  # time-averaged share of GPUs held, over [0, window]
    hp_gpu_allocation: float  # the same, HP gangs only
    lp_mean_completion_hours: float  # arrival -> end, LP gangs that finished
    lp_finished: int
    hp_mean_wait_minutes: float
    wasted_gpu_hours: float  # work lost since the last checkpoints of stopped pods
    preemptions: int  # decisions that stopped pods
    evicted_pods: int
    wasted_evictions: int  # pods stopped by decisions after which the HP gang could not start
    checked: int  # decisions through the checker
    decision_ms_median: float
    seconds: float

    def as_dict(self) -> dict[str, float | int | str]:
        return dict(self.__dict__)


def gang_jobs(
    seed: int,
    *,
    jobs: int = 400,
    gpus_total: int = 576,
    load: float = 1.3,
    hp_share: float = 0.35,
    hp_load_only: bool = False,
) -> list[GangJob]:
    """A seeded stream of gangs; ``load`` is the offered GPU-time over capacity.

    ``hp_load_only``: keep only the HP gangs of the same stream (for the
    allocation rate with HP alone).
    """
    check_arguments(
        locals(),
        whole={"seed": (0, 2**63 - 1), "jobs": (1, 1_000_000), "gpus_total": (1, 10**7)},
        numbers={"load": (0.01, 100.0), "hp_share": (0.0, 1.0)},
    )
    rng = random.Random(seed)
    drafts = []
    for pos in range(jobs):
        hp = rng.random() < hp_share
        pods = rng.choice([2, 4, 8, 16] if hp else [1, 2, 4, 8])
        gpus = 4 if hp or rng.random() < 0.6 else 2
        duration = min(24 * 60.0, rng.lognormvariate(math.log(120.0), 0.8))
        priority = HP_PRIORITY if hp else rng.randint(0, 99)
        drafts.append((pos, hp, pods, gpus, duration, priority))
    work = sum(p * g * d for _, _, p, g, d, _ in drafts)
    span = work / (load * gpus_total)  # minutes over which the jobs arrive
    rate = jobs / span
    now = 0.0
    stream = []
    for pos, hp, pods, gpus, duration, priority in drafts:
        now += rng.expovariate(rate)
        if hp_load_only and not hp:
            continue
        stream.append(GangJob(f"j{pos:05d}", now, duration, pods, gpus, hp, priority))
    return stream


@dataclass
class _Running:
    job: GangJob
    nodes: list[int]  # node of each pod
    start: float
    done_before: float  # minutes of work done (checkpointed) before this run


@dataclass
class _GangReplay(Simulation):
    """The cluster, the running and waiting gangs, and what was measured."""

    method: GangMethod
    blocks: int
    domains_per_block: int
    nodes_per_domain: int
    checkpoint_minutes: float
    time_limit: float
    rng: random.Random
    window: float
    free: list[int] = field(default_factory=list)
    running: dict[str, _Running] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)  # job -> checkpointed work
    version: dict[str, int] = field(default_factory=dict)
    waiting: list[GangJob] = field(default_factory=list)
    finished: dict[str, float] = field(default_factory=dict)  # job -> end time
    started: dict[str, float] = field(default_factory=dict)  # job -> first start
    allocated: float = 0.0  # GPU-minutes held
    hp_allocated: float = 0.0
    counted_until: float = 0.0  # GPUs held are counted up to here
    wasted_gpu_minutes: float = 0.0
    preemptions: int = 0
    evicted_pods: int = 0
    wasted_evictions: int = 0
    checked: int = 0
    decisions: list[float] = field(default_factory=list)
    by_id: dict[str, GangJob] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(EventQueue(order=(ARRIVAL, END)))
        self.free = [GPUS] * (self.blocks * self.domains_per_block * self.nodes_per_domain)

    # -- the state as a gang problem --------------------------------------------------------

    def _node_id(self, n: int) -> str:
        return f"d{n // self.nodes_per_domain:03d}-n{n % self.nodes_per_domain:02d}"

    def _checkpoint(self, run: _Running, now: float) -> float:
        ran = now - run.start
        period = self.checkpoint_minutes
        return run.start + math.floor(ran / period) * period

    def problem(self, job: GangJob, now: float, *, preemption: bool) -> GangProblem:
        nodes = []
        for n in range(len(self.free)):
            d = n // self.nodes_per_domain
            nodes.append(
                {
                    "id": self._node_id(n),
                    "gpus": GPUS,
                    "cpus": 144.0,
                    "topology": {
                        "block": f"b{d // self.domains_per_block:03d}",
                        "nvl": f"d{d:03d}",
                    },
                }
            )
        tasks: list[dict[str, Any]] = []
        gangs = []
        for job_id in sorted(self.running):
            run = self.running[job_id]
            for pod, n in enumerate(run.nodes):
                tasks.append(
                    {
                        "id": f"{job_id}-p{pod:02d}",
                        "node": self._node_id(n),
                        "gpus": run.job.gpus,
                        "cpus": 8.0 * run.job.gpus,
                        "priority": run.job.priority,
                        "start_time": run.start,
                        "last_checkpoint": self._checkpoint(run, now),
                        "gang": job_id,
                    }
                )
            gangs.append({"id": job_id, "min_member": len(run.nodes)})
        cluster = Cluster(levels=["block", "nvl"], now=now, nodes=nodes, tasks=tasks, gangs=gangs)
        request = {
            "id": job.id,
            "pods": job.pods,
            "gpus": job.gpus,
            "cpus": 8.0 * job.gpus,
            "priority": job.priority,
            "required": "nvl",
        }
        return GangProblem(cluster=cluster, request=request, options={"preemption": preemption})

    def _fits_now(self, job: GangJob) -> bool:
        per = self.nodes_per_domain
        for d in range(len(self.free) // per):
            if sum(f // job.gpus for f in self.free[d * per : (d + 1) * per]) >= job.pods:
                return True
        return False

    def _check(self, problem: GangProblem, answer: GangResult, allowed: tuple[str, ...]) -> None:
        broken = [m for m in violations(problem, answer) if not m.startswith(allowed)]
        self.checked += 1
        if broken:
            raise AssertionError(
                f"{self.method}: illegal answer for {problem.request.id}: {broken}"
            )

    # -- events --------------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Count the GPUs held from the last event to ``now`` (within the window)."""
        upto = min(now, self.window)
        if upto > self.counted_until:
            held = sum(GPUS - f for f in self.free)
            hp_held = sum(len(r.nodes) * r.job.gpus for r in self.running.values() if r.job.hp)
            self.allocated += held * (upto - self.counted_until)
            self.hp_allocated += hp_held * (upto - self.counted_until)
            self.counted_until = upto
        super().advance(now)

    def on_arrival(self, event: Event) -> bool:
        self.waiting.append(self.by_id[event.subject])
        return True

    def on_end(self, event: Event) -> bool:
        job_id = event.subject
        if self.version.get(job_id) != event.version or job_id not in self.running:
            return False
        self.finish(job_id, event.time)
        return True

    def settle(self, event: Event) -> None:
        """Start every waiting gang that fits (HP first, then by arrival), HP ones preempting."""
        now = event.time
        self.waiting.sort(key=lambda j: (not j.hp, j.arrival, j.id))
        for job in list(self.waiting):
            if job not in self.waiting:
                continue
            placed = self.try_place(job, now) or (job.hp and self.preempt(job, now))
            if placed:
                self.waiting.remove(job)

    def start(self, job: GangJob, node_ids: list[str], now: float) -> None:
        pos = {self._node_id(n): n for n in range(len(self.free))}
        nodes = [pos[n] for n in node_ids]
        for n in nodes:
            self.free[n] -= job.gpus
            assert self.free[n] >= 0
        done = self.done.get(job.id, 0.0)
        self.running[job.id] = _Running(job, nodes, now, done)
        self.started.setdefault(job.id, now)
        self.version[job.id] = self.version.get(job.id, 0) + 1
        version = self.version[job.id]
        self.queue.push(now + job.duration - done, END, job.id, version, tie=(job.id, version))

    def stop(self, job_id: str, now: float) -> None:
        run = self.running.pop(job_id)
        for n in run.nodes:
            self.free[n] += run.job.gpus
        saved = self._checkpoint(run, now) - run.start
        self.wasted_gpu_minutes += (now - run.start - saved) * run.job.gpus * len(run.nodes)
        self.done[job_id] = run.done_before + saved
        self.evicted_pods += len(run.nodes)
        self.waiting.append(run.job)

    def finish(self, job_id: str, now: float) -> None:
        run = self.running.pop(job_id)
        for n in run.nodes:
            self.free[n] += run.job.gpus
        self.finished[job_id] = now

    def try_place(self, job: GangJob, now: float) -> bool:
        if not self._fits_now(job):
            return False
        problem = self.problem(job, now, preemption=False)
        answer = solve_heuristic(problem)
        self._check(problem, answer, ())
        if answer.nodes is None:
            return False
        self.start(job, answer.nodes, now)
        return True

    def preempt(self, job: GangJob, now: float) -> bool:
        """Choose victims for HP ``job`` by the method; True when it starts."""
        problem = self.problem(job, now, preemption=True)
        started = time.perf_counter()
        if self.method in ("cpsat", "heuristic"):
            answer = (
                solve_cpsat(problem, time_limit=self.time_limit)
                if self.method == "cpsat"
                else solve_heuristic(problem)
            )
            self.decisions.append(time.perf_counter() - started)
            self._check(problem, answer, ())
            if answer.nodes is None:
                return False
            return self._apply(job, problem, answer.nodes, answer.victims, now)
        if self.method == "victims-first":
            return self._victims_first(job, problem, now, started)
        return self._random_victims(job, problem, now, started)

    def _victims_first(
        self, job: GangJob, problem: GangProblem, now: float, started: float
    ) -> bool:
        """The baseline: the cheapest LP gangs per GPU until enough GPUs are free, then place."""
        index = problem.index
        gang_of = {t: index.task_ids[t].rsplit("-p", 1)[0] for t in range(len(index.task_ids))}
        lp_gangs = sorted({gang_of[t] for t in range(len(index.task_ids)) if index.candidate[t]})
        cost = {g: 0 for g in lp_gangs}
        gpus = {g: 0 for g in lp_gangs}
        for t in range(len(index.task_ids)):
            if gang_of[t] in cost:
                cost[gang_of[t]] += int(index.task_cost[t])
                gpus[gang_of[t]] += int(index.task_hold[t, 0])
        order = sorted(lp_gangs, key=lambda g: (cost[g] / max(gpus[g], 1), g))
        need = job.pods * job.gpus - sum(self.free)
        chosen = []
        for g in order:
            if need <= 0:
                break
            chosen.append(g)
            need -= gpus[g]
        if need > 0 or not chosen:
            self.decisions.append(time.perf_counter() - started)
            return False  # not enough LP work, or enough GPUs already: nobody is stopped
        victims = [f"{g}-p{p:02d}" for g in chosen for p in range(len(self.running[g].nodes))]
        for g in chosen:
            self.stop(g, now)
        placed = self.try_place(job, now)
        self.decisions.append(time.perf_counter() - started)
        self.preemptions += 1
        if not placed:
            self.wasted_evictions += len(victims)
            wasted = GangResult(method="victims-first", status="heuristic", victims=sorted(victims))
            self._check(problem, wasted, ("G1",))
            return False
        run = self.running[job.id]
        done = GangResult(
            method="victims-first",
            status="heuristic",
            nodes=[self._node_id(n) for n in run.nodes],
            victims=sorted(victims),
        )
        self._check(problem, _completed(problem, done), ("P3",))
        return True

    def _random_victims(
        self, job: GangJob, problem: GangProblem, now: float, started: float
    ) -> bool:
        """The baseline: a random domain that can hold the gang; its LP gangs, shuffled."""
        per = self.nodes_per_domain
        lp_held = [0] * len(self.free)
        for run in self.running.values():
            if not run.job.hp:
                for n in run.nodes:
                    lp_held[n] += run.job.gpus
        domains = [
            d
            for d in range(len(self.free) // per)
            if sum((self.free[n] + lp_held[n]) // job.gpus for n in range(d * per, (d + 1) * per))
            >= job.pods
        ]
        if not domains:
            self.decisions.append(time.perf_counter() - started)
            return False
        d = self.rng.choice(domains)
        inside = set(range(d * per, (d + 1) * per))
        pool = sorted(g for g, r in self.running.items() if not r.job.hp and inside & set(r.nodes))
        self.rng.shuffle(pool)
        free = list(self.free)
        chosen = []
        for g in pool:
            if sum(free[n] // job.gpus for n in inside) >= job.pods:
                break
            chosen.append(g)
            for n in self.running[g].nodes:
                free[n] += self.running[g].job.gpus
        hosts = _fill_domain(free, sorted(inside), job)
        used = set(hosts)
        chosen = [g for g in chosen if used & set(self.running[g].nodes)]  # P3: others keep on
        victims = [f"{g}-p{p:02d}" for g in chosen for p in range(len(self.running[g].nodes))]
        self.decisions.append(time.perf_counter() - started)
        return self._apply(
            job, problem, [self._node_id(n) for n in hosts], victims, now, check=True
        )

    def _apply(
        self,
        job: GangJob,
        problem: GangProblem,
        nodes: list[str],
        victims: list[str],
        now: float,
        *,
        check: bool = False,
    ) -> bool:
        if check:
            answer = GangResult(
                method=self.method, status="heuristic", nodes=nodes, victims=sorted(victims)
            )
            self._check(problem, _completed(problem, answer), ())
        gangs = sorted({v.rsplit("-p", 1)[0] for v in victims})
        for g in gangs:
            self.stop(g, now)
        if gangs:
            self.preemptions += 1
        self.start(job, nodes, now)
        return True


def _completed(problem: GangProblem, answer: GangResult) -> GangResult:
    """``answer`` with its topology and cost recomputed (G6), for answers built by hand."""
    key = evaluate(problem, answer)
    assert key is not None and answer.nodes is not None
    pos = {t: i for i, t in enumerate(problem.index.task_ids)}
    return make_answer(
        problem,
        answer.method,
        Status.HEURISTIC,
        pods_per_node(problem.index, answer.nodes),
        [pos[v] for v in answer.victims],
        bound=None,
        seconds=0.0,
    )


def _fill_domain(free: list[int], nodes: list[int], job: GangJob) -> list[int]:
    """The node of each pod: fullest nodes first (best fit), in node order."""
    order = sorted(nodes, key=lambda n: (free[n], n))
    hosts: list[int] = []
    for n in order:
        for _ in range(free[n] // job.gpus):
            if len(hosts) < job.pods:
                hosts.append(n)
    assert len(hosts) == job.pods
    return hosts


def replay_gangs(
    jobs: list[GangJob],
    method: GangMethod,
    *,
    blocks: int = 4,
    domains_per_block: int = 2,
    nodes_per_domain: int = 18,
    checkpoint_minutes: float = 30.0,
    time_limit: float = 5.0,
    seed: int = 0,
    window: float | None = None,
) -> GangMetrics:
    """Replay ``jobs`` with ``method`` choosing the victims of HP gangs (module docstring).

    Allocation rates are time averages over ``[0, window]`` (default: up to the
    last arrival, while the load is offered), so that a stream and its HP
    gangs alone are compared over the same time; ``time_limit`` is the exact
    method's per decision.

    Examples
    --------
    >>> jobs = gang_jobs(1, jobs=30, gpus_total=288)
    >>> metrics = replay_gangs(jobs, "heuristic", blocks=1)
    >>> metrics.finished == len(jobs), metrics.wasted_evictions
    (True, 0)
    """
    method = OLD_METHODS.get(method, method)
    if method not in METHODS:
        raise ValueError(f"method {method!r} is not one of {', '.join(METHODS)}.")
    began = time.perf_counter()
    state = _GangReplay(
        method,
        blocks,
        domains_per_block,
        nodes_per_domain,
        checkpoint_minutes,
        time_limit,
        random.Random(seed),
        max((job.arrival for job in jobs), default=0.0) if window is None else window,
        by_id={job.id: job for job in jobs},
    )
    for pos, job in enumerate(jobs):
        state.queue.push(job.arrival, ARRIVAL, job.id, -1 - pos, tie=(job.id, -1 - pos))
    events.run(state)
    gpus = len(state.free) * GPUS
    lp_done = [
        state.finished[j.id] - j.arrival for j in jobs if not j.hp and j.id in state.finished
    ]
    decisions = sorted(state.decisions)
    waits = [state.started[j.id] - j.arrival for j in jobs if j.hp and j.id in state.started]
    return GangMetrics(
        method=method,
        jobs=len(jobs),
        finished=len(state.finished),
        gpu_allocation=state.allocated / (gpus * state.window) if state.window else 0.0,
        hp_gpu_allocation=state.hp_allocated / (gpus * state.window) if state.window else 0.0,
        lp_mean_completion_hours=(sum(lp_done) / len(lp_done) / 60) if lp_done else 0.0,
        lp_finished=len(lp_done),
        hp_mean_wait_minutes=sum(waits) / len(waits) if waits else 0.0,
        wasted_gpu_hours=state.wasted_gpu_minutes / 60,
        preemptions=state.preemptions,
        evicted_pods=state.evicted_pods,
        wasted_evictions=state.wasted_evictions,
        checked=state.checked,
        decision_ms_median=decisions[len(decisions) // 2] * 1e3 if decisions else 0.0,
        seconds=time.perf_counter() - began,
    )


__all__ = ["METHODS", "GangJob", "GangMethod", "GangMetrics", "gang_jobs", "replay_gangs"]
