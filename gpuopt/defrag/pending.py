"""Waiting pods: which fit now, which a plan makes fit, and plans made for them.

A cluster's ``pending`` requests (unbound Pending pods, queued jobs) are the
demand a defragmentation plan should make room for. :func:`fit_pending` places
them one by one, highest priority first (then longest waiting), each on the
fullest node that can take it by the Kubernetes rules (K1-K3: an open node it
tolerates and matches; K4: room for its GPUs, CPUs, memory and extended
resources; K5: its required pod (anti-)affinity and the running pods'
anti-affinity that selects it, against the pods running now); the room one takes is
no longer free for the next. This is how a scheduler would bind them in one
pass, so "fits" means "fits together with the waiting pods before it". A pod
nominated to a node (K10: kube-scheduler preempted there for it) comes first among
the pods of its priority and goes to that node whenever it takes it; when it does not
fit yet (its victims still terminating), its room there stays held against the pods
after it. A gang with fewer pods, running and waiting, than its ``min_member`` does not
fit (coscheduling and Volcano keep it waiting). The
waiting pods of one gang (``Pending.gang``) fit all together or not at all
(C8, as coscheduling binds them): when the first of them comes, it and the
others are bound together, and if fewer than the gang needs fit, none is, and
their room stays free for the pods after them. A gang needs all its waiting
pods, or, when the cluster lists it with pods running already, what its
``min_member`` still lacks.

:func:`plan_for_pending` plans defragmentation for the pods that do not fit:
it runs a method on the cluster with the tasks locked on every node that none
of them could use once empty (too small, or closed to them by rules K1-K3:
such nodes still take tasks, they are just never emptied for nothing), then
keeps the shortest prefix of the plan after which the waiting pods fit best
(more of the highest priority first, then more pods), so no move is made that
the waiting pods do not need.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuopt.cluster.arrival import Spread, Terms, arrival_refusals
from gpuopt.cluster.fields import POD_SLOTS, offered
from gpuopt.cluster.model import Cluster, Node, Pending, priority_value, scaled
from gpuopt.cluster.request import add_held, held_short, keeps_pod_slots, with_pod_slot
from gpuopt.cluster.rules import gang_needs, refusal
from gpuopt.cluster.shares import MILLI, Devices
from gpuopt.defrag.solution import DefragResult, apply_plan, make_plan
from gpuopt.errors import ProblemError

#: Longest plan whose every prefix is tried; longer plans are cut only at wave ends.
MAX_PREFIXES = 200


@dataclass(frozen=True)
class PendingFit:
    """Where a waiting pod would go (``node`` None: nowhere), and why not."""

    pod: Pending
    node: str | None
    reason: str | None = None


def fit_pending(cluster: Cluster) -> list[PendingFit]:
    """Bind the waiting pods one by one (highest priority first) where they fit now.

    Examples
    --------
    >>> cluster = Cluster(
    ...     nodes=[{"id": "a", "gpus": 8, "cpus": 64}, {"id": "b", "gpus": 8, "cpus": 64}],
    ...     tasks=[{"id": "t", "node": "a", "gpus": 4, "cpus": 8},
    ...            {"id": "u", "node": "b", "gpus": 4, "cpus": 8}],
    ...     pending=[{"id": "p", "gpus": 8, "cpus": 8}, {"id": "q", "gpus": 4}])
    >>> [(f.pod.id, f.node) for f in fit_pending(cluster)]
    [('p', None), ('q', 'a')]
    """
    index = cluster.index
    devices = _devices(cluster)
    free_cpus = {
        n.id: scaled(n.cpus) - int(index.node_used_cpus[p]) for p, n in enumerate(cluster.nodes)
    }
    free_memory = {
        n.id: None if n.memory is None else scaled(n.memory) - int(index.node_used_memory[p])
        for p, n in enumerate(cluster.nodes)
    }
    free_extra: dict[str, Counter[str]] = {n.id: Counter(n.resources) for n in cluster.nodes}
    slots = keeps_pod_slots(cluster)
    if slots:  # (K12: a node that states no pod-count limit has none)
        for node in cluster.nodes:
            free_extra[node.id][POD_SLOTS] = offered(node.resources, POD_SLOTS)
    for task in cluster.tasks:
        free_extra[task.node].subtract(task.resources)
    order = sorted(
        range(len(cluster.pending)),
        key=lambda i: (
            -priority_value(cluster.pending[i].priority, cluster.hp_priority),
            cluster.pending[i].nominated_node is None,  # K10: a nominated pod first
            cluster.pending[i].since if cluster.pending[i].since is not None else float("inf"),
            i,
        ),
    )
    found: dict[int, PendingFit] = {}
    members: dict[str, list[int]] = {}
    for position in order:
        gang = cluster.pending[position].gang
        if gang is not None:
            members.setdefault(gang, []).append(position)
    needed = gang_needs(cluster.gangs, cluster.tasks, members)
    room = _Room(devices, free_cpus, free_memory, free_extra, slots=slots)
    for position in order:
        if position in found:
            continue
        pod = cluster.pending[position]
        gang = pod.gang
        if gang is not None and needed[gang] > len(members[gang]):
            why = (
                f"its gang {gang} needs {needed[gang]} waiting pods to start (its min_member) "
                f"and has {len(members[gang])}"
            )
            for at in members[gang]:
                found[at] = PendingFit(cluster.pending[at], None, why)
            continue
        if gang is None or needed[gang] <= 1:
            found[position] = room.bind(cluster, pod)
            if found[position].node is None and pod.nominated_node is not None:
                room.hold(pod)  # K10: its room stays held against the pods after it
            continue
        # the gang's waiting pods, together: all bound, or none (their room given back)
        saved = room.copy()
        fits = {at: room.bind(cluster, cluster.pending[at]) for at in members[gang]}
        placed = sum(fit.node is not None for fit in fits.values())
        if placed >= needed[gang]:
            found.update(fits)
            continue
        room = saved
        why = (
            f"its gang {gang} needs {needed[gang]} of its waiting pods together and only "
            f"{placed} fit"
        )
        for at in members[gang]:
            found[at] = PendingFit(cluster.pending[at], None, why)
    return [found[position] for position in range(len(cluster.pending))]


@dataclass
class _Room:
    """What the waiting pods bound so far leave free on each node."""

    devices: dict[str, Devices]
    cpus: dict[str, int]
    memory: dict[str, int | None]
    extra: dict[str, Counter[str]]
    #: K10: per node, the GPUs, CPUs and memory of nominated pods that did not fit yet
    held: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    #: the waiting pods bound so far, with their nodes (K11 counts them)
    bound: list[tuple[Pending, str]] = field(default_factory=list)
    #: K10: per node, the nominated pods that did not fit yet: counted there for K5 and
    #: K11 when a pod after them is judged on that node (as kube-scheduler's filters do)
    waiting: dict[str, list[Pending]] = field(default_factory=dict)
    #: K12: whether the cluster keeps pod slots (every pod then asks one)
    slots: bool = False

    def copy(self) -> _Room:
        return _Room(
            {node: devices.copy() for node, devices in self.devices.items()},
            dict(self.cpus),
            dict(self.memory),
            {node: Counter(extra) for node, extra in self.extra.items()},
            dict(self.held),
            list(self.bound),
            {node: list(pods) for node, pods in self.waiting.items()},
            self.slots,
        )

    def hold(self, pod: Pending) -> None:
        """K10: the room of ``pod``, nominated to a node it does not fit yet (its victims
        still terminating), held there against the pods bound after it (of its priority
        and below: the order)."""
        node = str(pod.nominated_node)
        self.held[node] = add_held(self.held.get(node, (0, 0, 0)), pod)
        self.extra[node].subtract(
            with_pod_slot(pod.resources, self.slots)
        )  # (its extended resources and slot too)
        self.waiting.setdefault(node, []).append(pod)

    def _beside(self, cluster: Cluster, pod: Pending, terms: dict[str, str]) -> None:
        """K5 and K11 on each node where nominated pods wait (:meth:`hold`), judged with them
        counted there too (the node must take ``pod`` with and without them); ``terms``
        (node id -> why) updated."""
        judges: tuple[Terms, Spread] | None = None
        nodes = cluster.index.node_pos
        for node_id, pods in self.waiting.items():
            if node_id in terms:
                continue
            if judges is None:
                judges = (Terms(cluster, pod, self.bound), Spread(cluster, pod, self.bound))
            node = cluster.nodes[nodes[node_id]]
            why = judges[0].plus(node, pods).refusal(node) or judges[1].plus(node, pods).refusal(
                node
            )
            if why is not None:
                names = ", ".join(other.id for other in pods[:3])
                terms[node_id] = (
                    f"{why.rstrip('.')} (counting the pods nominated to node {node_id}: {names})"
                )

    def _held_fit(self, node: str, pod: Pending, chosen: tuple[int, ...]) -> bool:
        """Whether what ``pod`` takes on ``node`` (its GPUs ``chosen``) leaves the room held
        there (K10), for each resource it asks."""
        held = self.held.get(node)
        if held is None:
            return True
        devices = self.devices[node]
        taken = sum(1 for gpu in chosen if devices.left[gpu] == MILLI)
        cpus, memory = scaled(pod.cpus), scaled(pod.memory or 0.0)
        room = self.memory[node]
        left = (
            devices.free - taken,
            self.cpus[node] - cpus,
            None if room is None else room - memory,
        )
        return not held_short(held, left, (taken, cpus, memory))

    def bind(self, cluster: Cluster, pod: Pending) -> PendingFit:
        """``pod`` on the fullest node that takes it (its room then taken), or why none; a
        nominated pod on its nominated node whenever that takes it (K10: kube-scheduler
        tries it first)."""
        cpus = scaled(pod.cpus)
        memory = 0 if pod.memory is None else scaled(pod.memory)
        asked = with_pod_slot(pod.resources, self.slots)  # (K4, K12)
        best: str | None = None
        why: Counter[str] = Counter()
        # K5 and K11 against the running pods and the waiting pods bound before
        terms = arrival_refusals(cluster, pod, self.bound)
        if self.waiting:  # (and the nominated pods that wait, on their nodes)
            self._beside(cluster, pod, terms)
        if pod.nominated_node is not None:  # K10: its nominated node first, when it takes it
            own = [node for node in cluster.nodes if node.id == pod.nominated_node]
            if own and self._refused(pod, own[0], terms, cpus, memory, asked) is None:
                best = own[0].id
        if best is None:
            for node in cluster.nodes:
                refused = self._refused(pod, node, terms, cpus, memory, asked)
                if refused is not None:
                    why[refused] += 1
                    continue
                if best is None or self.devices[node.id].free < self.devices[best].free:
                    best = node.id
        if best is None:
            return PendingFit(pod, None, _reason(why, len(cluster.nodes)))
        self.devices[best].take(pod.id, pod.gpus, pod.gpu_milli or MILLI)
        self.cpus[best] -= cpus
        room = self.memory[best]
        if room is not None:
            self.memory[best] = room - memory
        self.extra[best].subtract(asked)
        self.bound.append((pod, best))
        return PendingFit(pod, best)

    def _refused(
        self,
        pod: Pending,
        node: Node,
        terms: dict[str, str],
        cpus: int,
        memory: int,
        asked: dict[str, int],
    ) -> str | None:
        """The rule that keeps ``pod`` (asking ``cpus``, ``memory`` and ``asked``) off
        ``node`` now (K1-K5, K11, K10), or None when the node takes it."""
        refused = refusal(node, pod) or terms.get(node.id)
        if refused is not None:
            return refused.split(":")[0]
        room = self.memory[node.id]
        chosen = self.devices[node.id].choose(pod.gpus, pod.gpu_milli or MILLI)
        if (
            chosen is None
            or self.cpus[node.id] < cpus
            or (room is not None and room < memory)
            or any(self.extra[node.id][r] < amount for r, amount in asked.items())
        ):
            return "K4"
        if not self._held_fit(node.id, pod, chosen):
            return "K10"
        return None


def _devices(cluster: Cluster) -> dict[str, Devices]:
    """Each node's GPUs with the share each has left (C7 layouts; on a node without shares
    the used GPUs first), to be taken by the waiting pods."""
    index = cluster.index
    found = {}
    for pos, node in enumerate(cluster.nodes):
        laid = index.devices.get(node.id)
        if laid is not None:
            found[node.id] = laid.copy()
        else:
            used = min(int(index.node_used_gpus[pos]), node.gpus)
            found[node.id] = Devices(node.gpus, [0] * used + [MILLI] * (node.gpus - used))
    return found


def _reason(why: Counter[str], nodes: int) -> str:
    """Why no node took the pod: the rules that refused, with node counts."""
    names = {
        "K1": "closed (NotReady, cordoned or locked)",
        "K2": "an untolerated taint",
        "K3": "its selector or node affinity",
        "K4": "too little free room",
        "K5": "pod (anti-)affinity",
        "K11": "its topology spread",
        "K10": "room nominated waiting pods hold",
    }
    parts = [f"{count} {names.get(rule, rule)}" for rule, count in why.most_common()]
    return f"no node of {nodes} takes it: " + ", ".join(parts) if parts else "no nodes"


def plan_for_pending(
    cluster: Cluster,
    method: str = "heuristic",
    *,
    time_limit: float | None = None,
    **options: Any,
) -> tuple[DefragResult, list[PendingFit], list[PendingFit]]:
    """A plan that makes room for the waiting pods that do not fit now.

    ``options`` go to the method (one of ``gpuopt.defrag.methods.METHODS``, or an old
    name of one; values
    checked as :func:`gpuopt.solve` checks them). Returns the plan (the
    shortest prefix of waves after which the most waiting pods fit; no moves
    when all fit already or none can be helped), and the fit of every
    waiting pod before and after it.
    """
    import inspect

    from gpuopt.defrag.methods import METHODS, method_name
    from gpuopt.options import check_option

    method = method_name(method)
    if method not in METHODS:
        raise ValueError(f"method {method!r} is not known; choose one of {', '.join(METHODS)}.")
    for name, value in {"time_limit": time_limit, **options}.items():
        message = check_option(name, value)
        if message is not None:
            raise ProblemError(message)
    function = METHODS[method]
    before = fit_pending(cluster)
    largest = max((node.gpus for node in cluster.nodes), default=0)
    # a pod larger than every node, or asking no GPU, is not helped by emptying nodes
    unfit = [f.pod for f in before if f.node is None and 0 < f.pod.gpus <= largest]
    empty = make_plan(cluster, method, [], seconds=0.0)
    if not unfit:
        return empty, before, before
    if time_limit is not None and "time_limit" in inspect.signature(function).parameters:
        options["time_limit"] = time_limit
    plan: DefragResult = function(_focused(cluster, unfit), **options)
    best_plan, best_after = _best_prefix(cluster, method, plan, empty, before)
    return best_plan, before, best_after


def _focused(cluster: Cluster, unfit: Sequence[Pending]) -> Cluster:
    """``cluster`` with the tasks locked on every node no pod of ``unfit`` could use once empty."""
    # only nodes that one of them could use once empty are worth emptying: the tasks on
    # the others stay (they are still targets), so no move serves nothing
    worth = {
        node.id
        for node in cluster.nodes
        if any(
            refusal(node, pod) is None
            and node.gpus >= pod.gpus
            and scaled(node.cpus) >= scaled(pod.cpus)
            and (node.memory is None or pod.memory is None or node.memory >= pod.memory)
            for pod in unfit
        )
    }
    return cluster.model_copy(
        update={
            "tasks": [
                task if task.node in worth else task.model_copy(update={"locked": True})
                for task in cluster.tasks
            ]
        }
    )


def _best_prefix(
    cluster: Cluster,
    method: str,
    plan: DefragResult,
    empty: DefragResult,
    before: list[PendingFit],
) -> tuple[DefragResult, list[PendingFit]]:
    """The shortest prefix of ``plan`` after which the most waiting pods fit, and their fit."""
    best_plan, best_after = empty, before
    # every prefix of the move list is a legal plan (moves depend only on earlier moves
    # that touch their nodes); try each (each wave's end on long plans)
    ends = [
        number
        for number in range(1, len(plan.moves) + 1)
        if len(plan.moves) <= MAX_PREFIXES
        or number == len(plan.moves)
        or plan.moves[number].wave != plan.moves[number - 1].wave
    ]
    for end in ends:
        prefix = plan.moves[:end]
        after = fit_pending(apply_plan(cluster, prefix))
        if _score(after, cluster.hp_priority) > _score(best_after, cluster.hp_priority):
            best_plan = make_plan(
                cluster,
                method,
                [(m.task, m.source, m.to) for m in prefix],
                seconds=plan.seconds,
                status="heuristic" if method in ("heuristic", "onehop") else "feasible",
                notes=[*plan.notes, f"for pending: kept {end} of {len(plan.moves)} moves"],
            )
            best_after = after
    return best_plan, best_after


def _score(fits: Sequence[PendingFit], hp_priority: int) -> list[int]:
    """The priorities of the pods that fit, highest first: compared as lists, more
    high-priority pods win, then more pods."""
    return sorted(
        (priority_value(f.pod.priority, hp_priority) for f in fits if f.node is not None),
        reverse=True,
    )


__all__ = ["PendingFit", "fit_pending", "plan_for_pending"]
