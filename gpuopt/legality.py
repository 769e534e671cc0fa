"""Legality at scale: every method on seeded random instances of varied size and shape.

Each *case* is one method of one problem (``"allocation/heuristic"``,
``"allocation/models-heuristic"`` (the same on scenarios with GPU models),
``"defrag/heuristic"``, ``"node/spread"`` (node-level placement on a cluster
snapshot's view), ... and ``"rolling/heuristic"``, the rolling-horizon replay
of :mod:`gpuopt.planning.rolling`); the cases named after the methods' old
names (``"allocation/greedy"``, ``"defrag/ipc"``, ...; :data:`OLD_CASES`) are
still accepted. Instance ``k`` of a case is drawn from a random generator
seeded with ``"<case>:<k>"``, a renamed case under its old name so that its
instances stay what they were (string seeds hash with
SHA-512, so the instance is the same in every process whatever
``PYTHONHASHSEED``): first the size and shape (number of GPUs, nodes,
switches, tasks, horizon, node sizes, fill, shares of locked / HP / selector /
anti-affinity tasks, budgets, method options), then the problem's own
generator (:mod:`gpuopt.allocation.generator`,
:mod:`gpuopt.defrag.generator`, :mod:`gpuopt.placement.switch.generator`,
:mod:`gpuopt.preemption.generator`) with a seed drawn from it. Half the
instances of the cluster-side cases (defrag, node, preemption, gang) carry DRA
facts (:func:`gpuopt.dragen.with_dra`), drawn from a generator of their own
(``"<case>:<k>:dra"``) so that the other half are the instances they were; on
that half node placement and preemption may ask for a waiting pod with claims
and a gang's pods ask their GPUs by a claim. Heuristics see
instances from tiny to medium; the exact methods tiny to small ones, with
``threads=1`` and a short time limit (:data:`EXACT_TIME_LIMIT`), so that a
sweep of thousands finishes in reasonable time. Every output goes through its
problem's independent checker (``violations``); a method that raises counts
as an error.

Used by ``benchmarks/legality_sweep.py`` and ``tests/test_legality.py``.

Examples
--------
>>> outcome = check("preemption/heuristic", 0)
>>> outcome.violations, outcome.error
([], None)
"""

from __future__ import annotations

import random
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Seconds the exact methods get per instance in the sweep (all in: warm start, model, search).
EXACT_TIME_LIMIT = 2.0
#: Failures described per case (the lowest-numbered; every failing number is kept).
KEPT_EXAMPLES = 5
#: What an instance's shape says when it carries DRA facts (:func:`_dra`).
DRA_MARK = ", DRA on "


@dataclass(frozen=True)
class Instance:
    """One instance of a case: the problem, the method's options and a short shape label."""

    problem: Any
    options: dict[str, Any]
    shape: str


@dataclass
class Outcome:
    """What one instance gave: the checker's violations, or the error raised."""

    case: str
    number: int
    shape: str = ""
    violations: list[str] = field(default_factory=list)
    error: str | None = None
    status: str | None = None
    seconds: float = 0.0

    @property
    def legal(self) -> bool:
        return not self.violations and self.error is None


@dataclass
class Tally:
    """Counts over many outcomes of one case (merge tallies of chunks with :meth:`merge`)."""

    case: str
    instances: int = 0
    illegal: int = 0
    errors: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    slowest: float = 0.0
    examples: list[dict[str, Any]] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)  # every illegal or failing instance
    dra: int = 0  # instances with DRA facts (devices, claims; :func:`_dra`)

    def add(self, outcome: Outcome) -> None:
        self.instances += 1
        self.dra += DRA_MARK in outcome.shape
        self.illegal += bool(outcome.violations)
        self.errors += outcome.error is not None
        if outcome.status is not None:
            self.statuses[outcome.status] += 1
        self.seconds += outcome.seconds
        self.slowest = max(self.slowest, outcome.seconds)
        if outcome.legal:
            return
        self.failed.append(outcome.number)
        if len(self.examples) < KEPT_EXAMPLES:
            self.examples.append(
                {
                    "instance": outcome.number,
                    "shape": outcome.shape,
                    "violations": outcome.violations[:3],
                    "error": outcome.error,
                }
            )

    def merge(self, other: Tally) -> None:
        self.instances += other.instances
        self.dra += other.dra
        self.illegal += other.illegal
        self.errors += other.errors
        self.statuses.update(other.statuses)
        self.seconds += other.seconds
        self.slowest = max(self.slowest, other.slowest)
        examples = sorted(self.examples + other.examples, key=lambda e: e["instance"])
        self.examples = examples[:KEPT_EXAMPLES]  # the lowest-numbered failures
        self.failed = sorted(self.failed + other.failed)

    @classmethod
    def from_dict(cls, case: str, data: dict[str, Any]) -> Tally:
        """The tally :meth:`to_dict` wrote (to resume a sweep)."""
        return cls(
            case=case,
            instances=int(data["instances"]),
            illegal=int(data["illegal"]),
            errors=int(data["errors"]),
            statuses=Counter(data["statuses"]),
            seconds=float(data["seconds"]),
            slowest=float(data["slowest_seconds"]),
            examples=list(data["examples"]),
            failed=[int(k) for k in data.get("failed_instances", [])],
            dra=int(data.get("with_dra", 0)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "with_dra": self.dra,
            "illegal": self.illegal,
            "errors": self.errors,
            "statuses": dict(sorted(self.statuses.items())),
            "seconds": round(self.seconds, 3),
            "mean_seconds": round(self.seconds / self.instances, 5) if self.instances else None,
            "slowest_seconds": round(self.slowest, 3),
            "examples": self.examples,
            "failed_instances": self.failed,
        }


# --------------------------------------------------------------------------- instances
def _pick_size(rng: random.Random, exact: bool) -> str:
    if exact:
        return rng.choice(("tiny", "small"))
    return rng.choice(("tiny", "small", "medium"))


def _allocation(rng: random.Random, exact: bool, models: bool = False) -> Instance:
    from gpuopt.allocation.generator import ScenarioDetails, random_problem

    size = _pick_size(rng, exact)
    if exact:
        gpus = rng.choice((1, 2, 2, 4, 4, 8) if size == "tiny" else (4, 8, 8))
        tasks = rng.randint(0, 4) if size == "tiny" else rng.randint(3, 8)
        horizon = rng.choice((1, 2, 3, 4, 6) if size == "tiny" else (6, 8, 12, 24))
    elif size == "tiny":
        gpus, tasks, horizon = rng.choice((1, 2, 3, 4)), rng.randint(0, 4), rng.randint(1, 6)
    elif size == "small":
        gpus = rng.choice((4, 6, 8, 12, 16))
        tasks, horizon = rng.randint(3, 16), rng.choice((6, 8, 12, 24))
    else:
        gpus = rng.choice((16, 24, 32, 48, 64))
        tasks, horizon = rng.randint(12, 48), rng.choice((12, 24, 36, 48))
    divisors = [d for d in (1, 2, 4, 8, 16) if d <= gpus and gpus % d == 0]
    node = rng.choice(divisors) if rng.random() < 0.5 else None
    # drawn in the order of random_problem's old keyword arguments (the same instances)
    seed = rng.randrange(2**31)
    realtime = None if rng.random() < 0.6 else rng.randint(0, min(3, tasks))
    load = rng.uniform(0.3, 2.5)
    running_fraction = rng.uniform(0.0, 0.5)
    deadline_fraction = rng.uniform(0.0, 0.7)
    align_blocks = rng.random() < 0.4
    details = ScenarioDetails(
        running_fraction=running_fraction,
        deadline_fraction=deadline_fraction,
        max_swap=rng.choice((None, None, 1, 2, 4)),
        uniform_priority=rng.random() < 0.15,
        step_minutes=rng.choice((60, 60, 30)),
        multi_node=rng.choice((0.0, 0.0, 0.5)) if node else 0.0,  # jobs of whole nodes
    )
    problem = random_problem(
        seed,
        gpus=gpus,
        tasks=tasks,
        horizon=horizon,
        realtime=realtime,
        load=load,
        align_blocks=align_blocks,
        gpus_per_node=node,
        models=models,
        details=details,
    )
    shape = f"{size} {gpus} GPUs x {tasks} tasks, {horizon} steps, node {node}"
    if problem.pools is not None:
        shape += f", {len(problem.pools)} GPU pools"
    return Instance(problem, {}, shape)


def _solver_options(number: int) -> dict[str, Any]:
    """An exact method's options for instance ``number``: short, one thread, seeded."""
    return {"time_limit": EXACT_TIME_LIMIT, "threads": 1, "seed": number % 7}


def _exact_options(rng: random.Random, number: int) -> dict[str, Any]:
    """:func:`_solver_options`, started from the heuristic nine times in ten."""
    return {**_solver_options(number), "warm": rng.random() >= 0.1}


def _allocation_case(method: str, models: bool = False) -> Callable[[random.Random, int], Instance]:
    exact = method in ("cpsat", "milp", "lns")

    def build(rng: random.Random, number: int) -> Instance:
        instance = _allocation(rng, exact, models)
        options: dict[str, Any] = {}
        if method == "lns":  # a fixed number of windows: the same plan on every machine
            options = {"time_limit": 600.0, "seed": number % 7, "max_windows": 3, "threads": 1}
        elif exact:
            options = _exact_options(rng, number)
        elif method == "heuristic" and rng.random() < 0.2:
            options = {"improve": rng.random() < 0.5, "max_attempts": rng.choice((0, 1, 5))}
        return Instance(instance.problem, options, instance.shape)

    return build


def _rolling(rng: random.Random, number: int) -> Instance:
    from gpuopt.allocation.generator import ScenarioDetails, random_problem

    size = rng.choice(("tiny", "small", "small", "medium"))
    gpus = rng.choice({"tiny": (1, 2, 4), "small": (4, 8, 16), "medium": (16, 32)}[size])
    tasks = rng.randint(*{"tiny": (0, 4), "small": (3, 12), "medium": (10, 24)}[size])
    horizon = rng.choice({"tiny": (2, 4, 6), "small": (8, 12, 24), "medium": (12, 24)}[size])
    forecast = rng.choice(("oracle", "oracle", "noisy:0.2", "noisy:0.5", "seasonal"))
    divisors = [d for d in (2, 4, 8) if d <= gpus and gpus % d == 0]
    # drawn in the order of random_problem's old keyword arguments (the same instances)
    seed = rng.randrange(2**31)
    load = rng.uniform(0.5, 2.0)
    running_fraction = rng.uniform(0.0, 0.4)
    deadline_fraction = rng.uniform(0.0, 0.5)
    align_blocks = rng.random() < 0.3
    gpus_per_node = rng.choice(divisors) if divisors and rng.random() < 0.4 else None
    details = ScenarioDetails(
        running_fraction=running_fraction,
        deadline_fraction=deadline_fraction,
        history_days=rng.choice((0, 1, 2)) if forecast == "seasonal" else 0,
    )
    problem = random_problem(
        seed,
        gpus=gpus,
        tasks=tasks,
        horizon=horizon,
        load=load,
        align_blocks=align_blocks,
        gpus_per_node=gpus_per_node,
        details=details,
    )
    options = {
        "forecast": forecast,
        "seed": number % 11,
        "replan_every": rng.choice((1, 1, 2, 3)),
    }
    return Instance(problem, options, f"{size} {gpus}x{tasks}, {horizon} steps, {forecast}")


def _defrag_case(method: str) -> Callable[[random.Random, int], Instance]:
    exact = method in ("milp", "cpsat")

    def build(rng: random.Random, number: int) -> Instance:
        from gpuopt.defrag.generator import TaskShares, random_snapshot
        from gpuopt.defrag.problem import Cluster

        size = _pick_size(rng, exact)
        if exact:
            nodes = rng.randint(1, 4) if size == "tiny" else rng.randint(5, 10)
        else:
            nodes = rng.randint(*{"tiny": (1, 5), "small": (6, 40), "medium": (41, 300)}[size])
        gpus_per_node = rng.choice((1, 2, 4, 8, 8, 8, 16))
        snapshot = random_snapshot(
            rng.randrange(2**31),
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            cpus_per_node=rng.choice((16, 64, 128, 192)),
            memory_per_node=rng.choice((None, 512, 2048)),
            fill=rng.uniform(0.0, 1.0),
            shares=TaskShares(
                locked_fraction=rng.uniform(0.0, 0.4),
                hp_fraction=rng.uniform(0.0, 0.6),
                selector_fraction=rng.uniform(0.0, 0.6),
                group_fraction=rng.uniform(0.0, 0.6),
                groups=rng.choice((None, 1, 2, 3, 5)),
                cpu_only_fraction=rng.uniform(0.0, 0.2),
            ),
            asw_size=rng.choice((2, 8, 32)),
            idle_fraction=rng.uniform(0.0, 0.3),
        )
        data = snapshot.model_dump(mode="json", exclude_none=True)
        if rng.random() < 0.3:  # mixed node sizes: some nodes twice as large
            for row in data["nodes"]:
                if rng.random() < 0.4:
                    row["gpus"] *= 2
                    row["cpus"] *= 2
                    if "memory" in row:
                        row["memory"] *= 2
        largest = max((row["gpus"] for row in data["nodes"]), default=0)
        data["options"] = {
            "partition_size": rng.choice((500, 2, 3, 5, 10, 25, 100)),
            "depth": rng.randint(1, 4),
            "rounds": rng.randint(1, 5),
            "max_moves": None if rng.random() < 0.6 else rng.randint(0, 30),
            "group_budget": None if rng.random() < 0.7 else rng.randint(0, 3),
            # a size some node has (a larger one is refused: no node could be emptied)
            "min_node_gpus": rng.choice((0, 0, 0, gpus_per_node, largest)),
            "seed": rng.randrange(1000),
        }
        problem = _dra(f"defrag/{method}", number, _kubernetes(rng, Cluster.model_validate(data)))
        largest = max((node.gpus for node in problem.nodes), default=0)
        if problem.options.min_node_gpus > largest:  # DRA GPUs cut, shared or tainted
            options_now = problem.options.model_copy(update={"min_node_gpus": largest})
            problem = problem.model_copy(update={"options": options_now})
        options: dict[str, Any] = {}
        if exact:
            options = _exact_options(rng, number)
        elif method == "heuristic":
            if number % 97 == 5:
                options["workers"] = 2  # a local process pool (partitions in other processes)
            elif number % 50 == 3 and nodes <= 40:
                options["exact"] = rng.choice(("milp", "cpsat"))
                options["exact_seconds"] = 1.0
        shape = f"{size} {nodes} nodes x {gpus_per_node} GPUs, {len(problem.tasks)} tasks"
        if problem.budgets or any(node.taints for node in problem.nodes):
            shape += ", Kubernetes rules"
        return Instance(problem, options, shape + _dra_shape(problem))

    return build


def _topology_case(method: str) -> Callable[[random.Random, int], Instance]:
    exact = method in ("milp", "cpsat")

    def build(rng: random.Random, number: int) -> Instance:
        from gpuopt.placement.switch.generator import JobShares, NodeListing, random_topology

        size = _pick_size(rng, exact)
        if exact:
            switches = rng.randint(1, 4) if size == "tiny" else rng.randint(4, 10)
            jobs: int | None = rng.randint(0, 4) if size == "tiny" else rng.randint(3, 12)
            max_nodes = rng.randint(1, 4)
        else:
            switches = rng.randint(*{"tiny": (1, 3), "small": (4, 16), "medium": (17, 64)}[size])
            jobs = None if rng.random() < 0.5 else rng.randint(0, 40)
            max_nodes = rng.randint(1, 8)
        problem = random_topology(
            rng.randrange(2**31),
            switches=switches,
            jobs=jobs,
            listing=NodeListing(
                node_fraction=rng.choice((0.0, 1.0, rng.uniform(0.0, 1.0))),
                max_nodes=max_nodes,
                gpus_per_node=rng.choice((2, 4, 8, 8, 16)),
                free_node_fraction=rng.uniform(0.0, 0.6),
                cpus_per_node=rng.choice((None, 32, 96, 192)),
            ),
            load=rng.uniform(0.3, 2.0),
            shares=JobShares(
                one_switch_fraction=rng.uniform(0.0, 0.5),
                whole_nodes_fraction=rng.uniform(0.0, 0.3),
                cpu_fraction=rng.uniform(0.0, 0.5),
            ),
        )
        options = _solver_options(number) if exact else {}
        shape = f"{size} {switches} switches, {len(problem.jobs)} jobs"
        return Instance(problem, options, shape)

    return build


def _cluster_shape(
    rng: random.Random,
    tiny: tuple[int, int],
    small: tuple[int, int],
    medium: tuple[int, int],
    exact: bool = False,
) -> tuple[str, int, int]:
    """An instance size (an exact method's: tiny or small), its node count in that size's
    range, and GPUs per node."""
    size = _pick_size(rng, exact)
    nodes = rng.randint(*{"tiny": tiny, "small": small, "medium": medium}[size])
    return size, nodes, rng.choice((1, 2, 4, 8, 8, 16))


def _preemption_case(method: str) -> Callable[[random.Random, int], Instance]:
    def build(rng: random.Random, number: int) -> Instance:
        from gpuopt.preemption.generator import Clock, RequestShape, random_state
        from gpuopt.preemption.problem import PreemptionProblem

        exact = method in ("milp", "cpsat")  # the models of P11: at most 50 nodes
        size, nodes, gpus_per_node = _cluster_shape(rng, (1, 3), (4, 50), (51, 1000), exact)
        cpus_per_node = rng.choice((8, 32, 96, 192))
        # drawn in the order of random_state's old keyword arguments (same instances)
        seed = rng.randrange(2**31)
        occupancy = None if rng.random() < 0.5 else rng.uniform(0.0, 1.0)
        hp_fraction = None if rng.random() < 0.5 else rng.uniform(0.0, 1.0)
        clock = Clock(
            max_age=rng.choice((0, 60, 7200, 86_400)),
            now=rng.choice((7200, 86_400)),
            checkpoint_period=rng.choice((None, None, 60, 600, 3600)),
        )
        request = RequestShape(
            gpus=None if rng.random() < 0.5 else rng.randint(0, gpus_per_node),
            cpus=None if rng.random() < 0.6 else rng.randint(0, 2 * cpus_per_node) / 2,
            priority="HP" if rng.random() < 0.8 else "LP",
        )
        state = random_state(
            seed,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            cpus_per_node=cpus_per_node,
            occupancy=occupancy,
            hp_fraction=hp_fraction,
            clock=clock,
            request=request,
            contended=rng.random() < 0.5,
        )
        data = state.model_dump(mode="json")
        if rng.random() < 0.3:  # mixed node sizes and fractional CPUs
            for row in data["cluster"]["nodes"]:
                if rng.random() < 0.3:
                    row["gpus"] += rng.choice((0, gpus_per_node))
                    row["cpus"] += rng.choice((0.5, cpus_per_node))
            for task in data["cluster"]["tasks"]:
                if rng.random() < 0.2:
                    task["cpus"] = task["cpus"] / 2
        problem = PreemptionProblem.model_validate(data)
        cluster = _dra(f"preemption/{method}", number, problem.cluster)
        if cluster is not problem.cluster:
            largest = max(node.gpus for node in cluster.nodes)  # DRA GPUs cut, shared, tainted
            request_data = {**data["request"], "gpus": min(data["request"]["gpus"], largest)}
            problem = PreemptionProblem.model_validate(
                {**data, "cluster": cluster, "request": request_data}
            )
            problem = _waiting_dra_request(rng, problem)
        options: dict[str, Any] = {}
        if method == "dp" and rng.random() < 0.3:
            options["enumerate_limit"] = rng.choice((4, 10))  # the subset enumeration path
        if exact:
            options = _solver_options(number)
        shape = f"{size} {nodes} nodes x {gpus_per_node} GPUs, {problem.request.priority}"
        return Instance(problem, options, shape + _dra_shape(problem.cluster))

    return build


def _gang_claim(rng: random.Random, gpus: int) -> dict[str, Any]:
    """A gang pod's claim of ``gpus`` whole GPUs of the DRA generator's class, sometimes all
    under one PCIe root."""
    from gpuopt.dragen import GPU_CLASS

    claim: dict[str, Any] = {
        "id": "gang/gpus",
        "requests": [
            {"name": "gpus", "exactly": {"name": "gpus", "device_class": GPU_CLASS, "count": gpus}}
        ],
    }
    if gpus > 1 and rng.random() < 0.3:
        claim["constraints"] = [{"match_attribute": "resource.kubernetes.io/pcieRoot"}]
    return claim


def _waiting_dra_request(rng: random.Random, problem: Any) -> Any:
    """Most of the time, the preemption question of a waiting pod with DRA claims of the
    cluster (an HP request), when one may use some node; else ``problem``."""
    from gpuopt.cluster.request import pending_request
    from gpuopt.errors import ProblemError
    from gpuopt.preemption.problem import PreemptionProblem

    cluster = problem.cluster
    waiting = [pod.id for pod in cluster.pending if any(pod.id in c.pods for c in cluster.claims)]
    if not waiting or rng.random() >= 0.6:
        return problem
    pod = rng.choice(waiting)
    request = pending_request(cluster, pod)[0]
    try:
        return PreemptionProblem.from_cluster(
            cluster, request, priority="HP", now=problem.now, pending=pod
        )
    except ProblemError:  # its claims fit no node, or it is larger than every node
        return problem


def _gang_case(method: str) -> Callable[[random.Random, int], Instance]:
    exact = method in ("milp", "cpsat")

    def build(rng: random.Random, number: int) -> Instance:
        from gpuopt.gang.generator import RequestShape, random_gang_problem

        size = _pick_size(rng, exact)
        domains = rng.randint(*{"tiny": (1, 2), "small": (2, 6), "medium": (6, 40)}[size])
        nodes_per_domain = rng.choice((2, 4, 8, 18))
        slices = rng.random() < 0.3 and nodes_per_domain % 2 == 0
        problem = random_gang_problem(
            rng.randrange(2**31),
            domains=domains,
            nodes_per_domain=nodes_per_domain,
            domains_per_block=rng.choice((1, 2)),
            occupancy=rng.uniform(0.0, 1.0),
            lp_share=rng.uniform(0.0, 1.0),
            gang_share=rng.uniform(0.0, 1.0),
            request_shape=RequestShape(
                pods=None if rng.random() < 0.5 else rng.randint(1, 2 * nodes_per_domain),
                gpus=rng.choice((1, 2, 4, 4)),
                slice_size=rng.choice((2, 4)) if slices else None,
                preferred=rng.random() < 0.5,
                preemption=rng.random() < 0.7,
                min_runtime=rng.choice((0.0, 0.0, 600.0)),
            ),
        )
        cluster = _dra(f"gang/{method}", number, problem.cluster)
        if cluster is not problem.cluster:
            data = problem.model_dump(mode="json", exclude={"cluster"})
            if rng.random() < 0.6:  # DRA half only: each pod asks its GPUs by a claim
                data["request"]["claims"] = [_gang_claim(rng, data["request"]["gpus"])]
            problem = type(problem).model_validate({**data, "cluster": cluster})
        options = _solver_options(number) if exact else {}
        shape = f"{size} {domains} domains x {nodes_per_domain} nodes"
        return Instance(problem, options, shape + _dra_shape(problem.cluster))

    return build


def _kubernetes(rng: random.Random, cluster: Any) -> Any:
    """Half the clusters carry the Kubernetes facts of rules K1-K7, at random shares."""
    if rng.random() < 0.5:
        return cluster
    from gpuopt.defrag.generator import KubeFacts, with_kubernetes

    seed = rng.randrange(2**31)
    facts = KubeFacts(
        tainted=rng.uniform(0.0, 0.5),
        cordoned=rng.uniform(0.0, 0.2),
        not_ready=rng.uniform(0.0, 0.1),
        tolerating=rng.uniform(0.0, 1.0),
        affinity=rng.uniform(0.0, 0.5),
        services=rng.randint(0, 4),
        replicas=rng.uniform(0.0, 0.5),
        zone_spread=rng.uniform(0.0, 1.0),
        pod_affinity=rng.uniform(0.0, 0.1),
        pinned=rng.uniform(0.0, 0.2),
        extended=rng.uniform(0.0, 0.5),
        budgets=rng.random() < 0.7,
    )
    return with_kubernetes(cluster, seed, facts)


def _dra(case: str, number: int, cluster: Any) -> Any:
    """Half the clusters of a case carry DRA facts (:func:`gpuopt.dragen.with_dra`).

    Drawn from a generator of their own, seeded with ``"<case>:<number>:dra"`` (the old
    name of a renamed case), so the instance's own draws, and the half without DRA
    facts, are what they were before DRA facts were added.
    """
    rng = random.Random(f"{_SEEDED_AS.get(case, case)}:{number}:dra")
    if rng.random() < 0.5:
        return cluster
    from gpuopt.dragen import DraFacts, with_dra

    facts = DraFacts(
        nodes=rng.uniform(0.2, 1.0),
        mig=rng.uniform(0.0, 0.6),
        shared=rng.uniform(0.0, 0.5),
        apart=rng.uniform(0.0, 0.3),
        selector=rng.uniform(0.0, 0.2),
        cut=rng.uniform(0.0, 0.5),
        tainted=rng.uniform(0.0, 0.2),
        waiting=rng.randint(0, 4),
    )
    return with_dra(cluster, rng.randrange(2**31), facts)


def _dra_shape(cluster: Any) -> str:
    """The shape label's note of DRA facts (empty without)."""
    nodes = sum(bool(node.devices) for node in cluster.nodes)
    return f"{DRA_MARK}{nodes} nodes, {len(cluster.claims)} claims" if nodes else ""


def _node_case(method: str) -> Callable[[random.Random, int], Instance]:
    def build(rng: random.Random, number: int) -> Instance:
        from gpuopt.cluster.kube import Toleration
        from gpuopt.cluster.model import Cluster
        from gpuopt.cluster.request import Request, pending_request
        from gpuopt.defrag.generator import random_snapshot
        from gpuopt.placement.node.problem import NodePlacementProblem

        size, nodes, gpus_per_node = _cluster_shape(rng, (1, 5), (6, 40), (41, 300))
        snapshot = random_snapshot(
            rng.randrange(2**31),
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            cpus_per_node=rng.choice((16, 64, 128)),
            memory_per_node=rng.choice((None, 512, 2048)),
            fill=rng.uniform(0.0, 1.0),
            idle_fraction=rng.uniform(0.0, 0.3),
        )
        data = snapshot.model_dump(mode="json", exclude_none=True)
        for row in data["nodes"]:  # every interconnect, and nodes that state none
            kind = rng.choice(("nvswitch", "nvlink-pairs", "pcie-two-numa", None))
            if kind is not None:
                row["interconnect"] = kind
        cluster = _dra(f"node/{method}", number, _kubernetes(rng, Cluster.model_validate(data)))
        request = Request(
            gpus=rng.choice([g for g in (1, 2, 3, 4, 8, 16) if g <= gpus_per_node]),
            cpus=rng.choice((0.0, 4.0, 16.0)),
            memory=rng.choice((None, 64.0)),
            tolerations=[Toleration(key="dedicated", operator="Exists")]
            if rng.random() < 0.5
            else [],
        )
        waiting = [
            pod.id for pod in cluster.pending if any(pod.id in c.pods for c in cluster.claims)
        ]
        pending = None
        if waiting and rng.random() < 0.6:  # DRA half only: a waiting pod with claims asks
            pending = rng.choice(waiting)
            request = pending_request(cluster, pending)[0]
        problem = NodePlacementProblem.from_cluster(
            cluster,
            request,
            min_bandwidth=rng.choice((0.0, 0.0, 16.0, 32.0, 300.0)),
            # (a pod of claims only, gpus = 0, takes no whole GPU: never a whole node)
            whole_node=rng.random() < 0.1 and request.gpus > 0,
            pending=pending,
        )
        shape = f"{size} {nodes} nodes x {gpus_per_node} GPUs, request {request}"
        return Instance(problem, {}, shape + _dra_shape(cluster))

    return build


#: case name -> instance builder(rng, number)
BUILDERS: dict[str, Callable[[random.Random, int], Instance]] = {
    **{
        f"allocation/{m}": _allocation_case(m)
        for m in ("heuristic", "fifo", "cpsat", "milp", "lns")
    },
    # GPU models (models/allocation.md section 15): pools, speed factors, tasks' models
    **{
        f"allocation/models-{m}": _allocation_case(m, models=True)
        for m in ("heuristic", "fifo", "cpsat", "milp", "lns")
    },
    **{f"defrag/{m}": _defrag_case(m) for m in ("heuristic", "onehop", "milp", "cpsat")},
    **{f"topology/{m}": _topology_case(m) for m in ("heuristic", "milp", "cpsat")},
    **{f"node/{m}": _node_case(m) for m in ("heuristic", "spread")},
    **{f"preemption/{m}": _preemption_case(m) for m in ("heuristic", "dp", "milp", "cpsat")},
    **{f"gang/{m}": _gang_case(m) for m in ("heuristic", "cpsat", "milp")},
    "rolling/heuristic": _rolling,
}
#: old case name -> case: the cases named after the methods' old names (still accepted;
#: their instances are seeded with the old name, so they are the instances they were).
OLD_CASES: dict[str, str] = {
    "allocation/greedy": "allocation/heuristic",
    "allocation/models-greedy": "allocation/models-heuristic",
    "defrag/ipc": "defrag/heuristic",
    "topology/greedy": "topology/heuristic",
    "node/binpack": "node/heuristic",
    "preemption/exact": "preemption/dp",
    "rolling/greedy": "rolling/heuristic",
}
_SEEDED_AS = {case: old for old, case in OLD_CASES.items()}
#: Every case, in the order of the table.
CASES: tuple[str, ...] = tuple(BUILDERS)
#: Cases whose method is exact (small instances, time limits).
EXACT_CASES: frozenset[str] = frozenset(
    {
        "allocation/cpsat",
        "allocation/milp",
        "allocation/models-cpsat",
        "allocation/models-milp",
        "defrag/milp",
        "defrag/cpsat",
        "topology/milp",
        "topology/cpsat",
        "preemption/milp",
        "preemption/cpsat",
        "gang/cpsat",
        "gang/milp",
    }
)


def method_of(case: str) -> tuple[str, str]:
    """The problem family and the method of a case (``"allocation/models-cpsat"``:
    ``("allocation", "cpsat")``, on instances with GPU models)."""
    family, method = case.split("/")
    return family, method.removeprefix("models-")


def case_name(case: str) -> str:
    """The name of ``case`` (an old name, such as ``"defrag/ipc"``, gives the new one).

    Raises
    ------
    ValueError
        For a case that is not known, listing the cases.
    """
    case = OLD_CASES.get(case, case)
    if case not in BUILDERS:
        raise ValueError(f"case {case!r} is not known; choose from {', '.join(CASES)}")
    return case


def instance(case: str, number: int) -> Instance:
    """Instance ``number`` of ``case`` (the same in every process)."""
    case = case_name(case)
    rng = random.Random(f"{_SEEDED_AS.get(case, case)}:{number}")
    return BUILDERS[case](rng, number)


def _solve_and_check(case: str, built: Instance) -> tuple[list[str], str | None]:
    """Run the case's method on the instance and its problem's checker on the output."""
    family, method = method_of(case)
    problem, options = built.problem, built.options
    if family == "rolling":
        from gpuopt.allocation.solution import violations as allocation_violations
        from gpuopt.planning.rolling import rolling_replay

        try:
            report = rolling_replay(problem, method=method, **options)
        except RuntimeError as exc:  # the replay's own check refused an illegal row
            if "broke a rule" in str(exc):
                return [str(exc)], "illegal"
            raise
        return allocation_violations(problem, report.rolling.grid), report.rolling.status
    from gpuopt.api import solve, violations

    output = solve(problem, method, **options)
    if family == "preemption":
        return violations(problem, output), (
            "none" if output.node is None else f"stage {output.stage}"
        )
    return violations(problem, output), str(output.status)


def check(case: str, number: int) -> Outcome:
    """Build instance ``number`` of ``case``, solve it and check the output."""
    case = OLD_CASES.get(case, case)  # an unknown case is the outcome's error
    outcome = Outcome(case=case, number=number)
    try:
        built = instance(case, number)
    except Exception as exc:  # a generator that fails is a finding too
        outcome.error = f"instance: {type(exc).__name__}: {exc}"
        return outcome
    outcome.shape = built.shape
    started = time.perf_counter()
    try:
        outcome.violations, outcome.status = _solve_and_check(case, built)
    except Exception as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        outcome.error = f"{type(exc).__name__}: {exc} ({last.filename}:{last.lineno})"
    outcome.seconds = time.perf_counter() - started
    return outcome


def check_range(case: str, start: int, stop: int) -> Tally:
    """Check instances ``start .. stop - 1`` of ``case`` and count (picklable: for pools)."""
    case = OLD_CASES.get(case, case)
    tally = Tally(case)
    for number in range(start, stop):
        tally.add(check(case, number))
    return tally


__all__ = [
    "CASES",
    "EXACT_CASES",
    "EXACT_TIME_LIMIT",
    "OLD_CASES",
    "Instance",
    "Outcome",
    "Tally",
    "case_name",
    "check",
    "check_range",
    "instance",
    "method_of",
]
