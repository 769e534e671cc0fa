"""What one preemption question sees of a cluster (its :class:`Scope`), and the nodes whose
victims are weighed apart from the methods' view (P12, P14).

:meth:`Scope.of` decides, for one request asked at one priority, the nodes it may use
(K1-K4), the tasks it may stop there (K8, P13), the device nodes of rule P12 (claims that
fit only once some victims free their devices), the rule nodes of P14 (K5 or K11 refuse
the request as the node stands and admit it once its victims are gone, as kube-scheduler's
``SelectVictimsOnNode`` filters a node) and the slot nodes (K12 after victims). Its
:meth:`Scope.view` is the array view the methods read. The per-cluster columns it reads
(:class:`TaskColumns`) and facts (:class:`ClusterFacts`) are built once per cluster.
The rules are written in ``models/preemption.md``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np

from gpuopt.cluster.arrival import Arrival, held_by_nominated
from gpuopt.cluster.devices import DRA_RESOURCE_PREFIX
from gpuopt.cluster.fields import POD_SLOTS, Priority
from gpuopt.cluster.items import Node as ClusterNode
from gpuopt.cluster.items import Task as ClusterTask
from gpuopt.cluster.model import (
    MAX_REMEMBERED,
    MIN_PRIORITY,
    SCALE,
    Cluster,
    priority_value,
    scaled,
)
from gpuopt.cluster.request import Request as ClusterRequest
from gpuopt.cluster.request import nominated_room
from gpuopt.cluster.rules import (
    PREEMPTED_BY_SCHEDULER,
    is_pod,
    placement_key,
    refusal,
    term_key,
    terminating,
)
from gpuopt.errors import ProblemError
from gpuopt.preemption.gangs import close_gangs, gang_facts, gang_items, task_items
from gpuopt.preemption.index import PreemptionIndex


class Asked(Protocol):
    """What the scope reads of a :class:`~gpuopt.preemption.problem.PreemptionRequest`
    (that module builds on this one, so the type is named by its fields)."""

    @property
    def gpus(self) -> int: ...
    @property
    def cpus(self) -> float: ...
    @property
    def gpu_milli(self) -> int | None: ...
    @property
    def priority(self) -> Priority: ...
    @property
    def rank(self) -> int | None: ...
    @property
    def pending(self) -> str | None: ...


def awaits_victims(cluster: Cluster, pending: str, rank: int) -> str | None:
    """K10: the nominated node of the waiting pod ``pending`` when a pod of lower priority
    than ``rank`` still terminates there because kube-scheduler preempted it (its
    ``DisruptionTarget`` condition True with reason ``PreemptionByScheduler``: the victims
    of an earlier preemption): then kube-scheduler preempts nobody else for it
    (``PodEligibleToPreemptOthers``) and it waits, as a pod whose ``preemptionPolicy`` is
    ``Never``; None otherwise (a pod deleted for another reason does not stop it)."""
    pod = next((pod for pod in cluster.pending if pod.id == pending), None)
    node = None if pod is None else pod.nominated_node
    if pod is None or node is None:
        return None
    at = cluster.index.node_pos.get(node)
    if at is None or _unresolvable(cluster, pod, cluster.nodes[at]):
        return None  # (a nominated node that no longer takes it: it may preempt again)
    for task in cluster.tasks:
        if (
            task.node == node
            and terminating(task)
            and task.disruption == PREEMPTED_BY_SCHEDULER
            and priority_value(task.priority, cluster.hp_priority) < rank
        ):
            return node
    return None


def _unresolvable(cluster: Cluster, pod: Any, node: ClusterNode) -> bool:
    """Whether ``node`` refuses the waiting ``pod`` in a way no preemption can mend
    (kube-scheduler's ``UnschedulableAndUnresolvable``): K1-K3, its required pod affinity
    (K5; its anti-affinity and spread skews are resolvable), a spread constraint's key the
    node lacks (K11)."""
    if refusal(node, pod) is not None:
        return True
    if pod.pod_affinity and Arrival.of(cluster, pod).terms.affinity_refusal(node) is not None:
        return True
    return any(node.label(constraint.topology_key) is None for constraint in pod.topology_spread)


def held_room(cluster: Cluster, request: Asked) -> dict[str, tuple[int, int]]:
    """K10: per node, the GPUs and CPUs (thousandths) the waiting pods nominated to it hold
    there against ``request`` (those of its ``rank`` and above, not the waiting pod it
    stands for), for each of the two it asks (a request that asks no CPUs is not kept
    from a node by CPUs held there, as in kube-scheduler; a share of a GPU is not kept by
    GPUs held, as node placement puts it on a used GPU where one has room)."""
    rank = request.rank
    if rank is None:  # (the class it states: HP at the cluster's hp_priority)
        rank = priority_value(request.priority, cluster.hp_priority)
    whole = request.gpus > 0 and request.gpu_milli is None  # (a share: on a used GPU, as place)
    return {
        node: (gpus if whole else 0, cpus if request.cpus > 0 else 0)
        for node, (gpus, cpus, _) in nominated_room(cluster, request.pending, rank).items()
    }


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster says of its tasks that preemption reads: the fixed ones, with why
    (K6, K7, K5, C7), and the GPUs each holds as C7 counts them (a shared GPU once)."""

    fixed: dict[str, str]
    task_gpus: np.ndarray

    @classmethod
    def of(cls, cluster: Cluster) -> ClusterFacts:
        """The facts of ``cluster``: from its index, or from the tasks alone when nothing
        but a task's own ``locked`` or ``pinned`` can fix one (no shares, budgets, pod
        (anti-)affinity, locked or NotReady nodes), which gives the same facts without
        building the index (and, when the index is built already, from it: a held cluster's
        per-request question then reads its facts without a pass over the tasks)."""
        built = "index" in cluster.__dict__  # functools.cached_property stores it there
        simple = not built and (
            not cluster.budgets
            and all(node.ready and not node.locked for node in cluster.nodes)
            and all(
                task.gpu_milli is None and not task.pod_affinity and not task.pod_anti_affinity
                for task in cluster.tasks
            )
        )
        if not simple:
            index = cluster.index
            return cls(fixed=index.fixed, task_gpus=index.task_gpus.astype(np.int64))
        fixed = {
            task.id: task.pinned if task.pinned is not None else "locked"
            for task in cluster.tasks
            if task.fixed
        }
        return cls(fixed=fixed, task_gpus=np.array([t.gpus for t in cluster.tasks], np.int64))


@dataclass(frozen=True, eq=False)  # arrays inside: equal problems compare by their fields
class Scope:
    """What one request's question sees of a cluster: the nodes it may use (K1-K4) and
    their tasks, the cluster's facts with each task's GPUs in the view of the request
    (C7), and the priority from which a task is out of its reach (K8).

    ``task_gpus[k]`` is the GPUs ``tasks[k]`` holds in the question, ``task_pos`` the
    position of each task id in ``tasks``.
    """

    nodes: list[ClusterNode]
    tasks: list[ClusterTask]
    task_pos: dict[str, int]
    task_gpus: np.ndarray
    facts: ClusterFacts
    threshold: int
    #: each of ``tasks``' position in the cluster's tasks
    task_at: np.ndarray
    #: when no node is in reach, per node of the cluster the first rule it fails (K1-K4,
    #: DF1-DF8, the node named; None for a node no rule refuses); else empty
    refusals: tuple[str | None, ...] = ()
    #: P12: the nodes of ``nodes`` where the request's claims (not counted whole GPUs) fit
    #: only once some of the tasks it may stop there free their devices; the methods' view
    #: leaves them out, and :mod:`gpuopt.preemption.devices` chooses their victims
    device_nodes: frozenset[str] = frozenset()
    #: P14: the nodes of ``nodes`` that K5 or K11 refuse the request as they stand and take
    #: it once some of the tasks it may stop there are gone; left out of the methods' view
    #: like ``device_nodes``, and their victims chosen the same way
    rule_nodes: frozenset[str] = frozenset()
    #: P14 for K12: the nodes of ``nodes`` whose pod slots (``pods``) are all held now and
    #: free enough once some of the tasks it may stop there are gone; weighed likewise
    slot_nodes: frozenset[str] = frozenset()

    @classmethod
    def of(cls, cluster: Cluster, request: ClusterRequest, rank: int | None) -> Scope:
        """The scope of ``request`` asked with priority ``rank`` (None: as the cluster's
        ``hp_priority``) in ``cluster``; it has no node when K1-K4 admit none."""
        # K8: the tasks below the request's priority are the LP class of this question (every
        # task is HP to a request that never preempts)
        if request.preemption_policy == "Never":
            threshold = MIN_PRIORITY
        else:
            threshold = cluster.hp_priority if rank is None else rank
        slots = request.resources.get(POD_SLOTS, 0) if threshold > MIN_PRIORITY else 0
        # judged with the victims, not as free now (K4): the dra.gpuopt.io/<class> resources,
        # which stand for the claims (by the devices, _devices_refusals), and the pod slots
        # (K12, _slot_nodes)
        later = {
            name
            for name in request.resources
            if (request.claims and name.startswith(DRA_RESOURCE_PREFIX))
            or (slots and name == POD_SLOTS)
        }
        if later:
            kept = {name: n for name, n in request.resources.items() if name not in later}
            request = request.model_copy(update={"resources": kept})
        allowed = cluster.admits(request)
        refused: list[str | None] = [None] * len(cluster.nodes)
        device_nodes: frozenset[str] = frozenset()
        arriving = threshold > MIN_PRIORITY and is_pod(request)  # P14: K5 and K11 after victims
        plain: list[bool] | None = None  # K1-K4 (and DF1-DF8 with victims), not K5 or K11
        if request.claims:  # DF1-DF8: only nodes where the request's claims can fit
            # (judged on the nodes K5 and K11 refuse too: victims may lift those, P14)
            base = cluster.admits(request, arrival=False) if arriving else allowed
            refused, device_nodes = _devices_refusals(cluster, request, base, threshold)
            allowed = [ok and why is None for ok, why in zip(allowed, refused, strict=True)]
            plain = [ok and why is None for ok, why in zip(base, refused, strict=True)]
        rule_nodes: frozenset[str] = frozenset()
        held: dict[str, str] = {}
        if arriving:
            allowed, rule_nodes, held = _rule_nodes(cluster, request, allowed, threshold, plain)
        slot_nodes: frozenset[str] = frozenset()
        if slots:
            allowed, slot_nodes = _slot_nodes(cluster, slots, allowed, threshold, request)
        nodes = [node for node, ok in zip(cluster.nodes, allowed, strict=True) if ok]
        if not nodes:
            from gpuopt.cluster.arrival import refusals

            refused = [
                device if device is not None else rule
                for device, rule in zip(refused, refusals(cluster, request), strict=True)
            ]
        columns = task_columns(cluster)
        if len(nodes) == len(cluster.nodes):
            tasks, task_at = cluster.tasks, np.arange(len(cluster.tasks), dtype=np.int64)
            task_pos = dict(columns.pos)
        else:
            task_at = np.flatnonzero(np.array(allowed, dtype=bool)[columns.node]).astype(np.int64)
            tasks = [cluster.tasks[pos] for pos in task_at.tolist()]
            task_pos = {columns.ids[at]: pos for pos, at in enumerate(task_at.tolist())}
        facts = ClusterFacts.of(cluster)
        if held:
            facts = ClusterFacts(fixed={**facts.fixed, **held}, task_gpus=facts.task_gpus)
        if request.gpu_milli is not None:
            shares = _share_view(cluster, cluster.index.task_gpus, request.gpu_milli)
            facts = ClusterFacts(fixed=facts.fixed, task_gpus=shares)
        return cls(
            nodes=nodes,
            tasks=tasks,
            task_pos=task_pos,
            task_gpus=facts.task_gpus[task_at],
            facts=facts,
            threshold=threshold,
            task_at=task_at,
            refusals=tuple(refused) if not nodes else (),
            device_nodes=device_nodes,
            rule_nodes=rule_nodes,
            slot_nodes=slot_nodes,
        )

    @property
    def weighed_nodes(self) -> frozenset[str]:
        """The nodes whose victims are chosen apart from the methods' view (P12, P14)."""
        return self.device_nodes | self.rule_nodes | self.slot_nodes

    def without_weighed_nodes(self) -> Scope:
        """This scope without its :attr:`weighed_nodes` and their tasks: what the methods
        see."""
        aside = self.weighed_nodes
        if not aside:
            return self
        kept = [node.id not in aside for node in self.nodes]
        on_kept = np.array([task.node not in aside for task in self.tasks], bool)
        positions = np.flatnonzero(on_kept)
        tasks = [self.tasks[pos] for pos in positions.tolist()]
        return Scope(
            nodes=[node for node, ok in zip(self.nodes, kept, strict=True) if ok],
            tasks=tasks,
            task_pos={task.id: pos for pos, task in enumerate(tasks)},
            task_gpus=self.task_gpus[positions],
            facts=self.facts,
            threshold=self.threshold,
            task_at=self.task_at[positions],
        )

    def is_hp(self, cluster: Cluster, task: ClusterTask) -> bool:
        """Whether ``task``'s priority is at or above :attr:`threshold` (K8)."""
        return priority_value(task.priority, cluster.hp_priority) >= self.threshold

    def view(self, cluster: Cluster, request: Asked, now: float) -> PreemptionIndex:
        """The array view of this scope at time ``now`` (see :func:`preemption_view`), its
        :attr:`weighed_nodes` left out (P12, P14)."""
        if self.weighed_nodes:
            return self.without_weighed_nodes().view(cluster, request, now)
        nodes, tasks, at = self.nodes, self.tasks, self.task_at
        columns = task_columns(cluster)
        node_ids = [node.id for node in nodes]
        node_pos = {node_id: pos for pos, node_id in enumerate(node_ids)}
        task_ids, task_pos = [columns.ids[k] for k in at.tolist()], self.task_pos
        gpus = self.task_gpus
        missing = columns.no_checkpoint[at]
        if missing.any():
            checkpoint_of(tasks[int(np.flatnonzero(missing)[0])])  # raises, naming the task
        age = scaled(now) - columns.checkpoint[at]
        fixed = self.facts.fixed
        task_hp = columns.priority[at] >= self.threshold
        if fixed:
            task_hp |= np.array([task_id in fixed for task_id in task_ids], dtype=bool)
        rows = np.array([columns.node_pos[node_id] for node_id in node_ids], dtype=np.int64)
        renumber = np.full(len(cluster.nodes), -1, dtype=np.int64)
        renumber[rows] = np.arange(len(rows), dtype=np.int64)
        cost = gpus * age
        renumbered = renumber[columns.node[at]]
        if columns.in_gang[at].any():
            stoppable = columns.priority < self.threshold
            if fixed:
                stoppable &= np.array([task_id not in fixed for task_id in columns.ids], bool)
            gangs = gang_facts(
                cluster,
                stoppable,
                self.facts.task_gpus,
                columns.checkpoint,
                columns.no_checkpoint,
                scaled(now),
            )
            items = gang_items(
                cluster, gangs, at, renumbered, gpus, columns.cpus[at], cost, task_hp, task_ids
            )
        else:
            items = task_items(renumbered, gpus, columns.cpus[at], cost, task_hp, task_ids)
        node_gpus, node_cpus = columns.node_gpus[rows], columns.node_cpus[rows]
        held = held_room(cluster, request)  # K10: room nominated waiting pods hold
        if held:
            for node_id, (gpus_held, cpus_held) in held.items():
                row = node_pos.get(node_id)
                if row is not None:
                    node_gpus[row] = max(0, node_gpus[row] - gpus_held)
                    node_cpus[row] = max(0, node_cpus[row] - cpus_held)
        return PreemptionIndex(
            node_ids=node_ids,
            node_pos=node_pos,
            node_gpus=node_gpus,
            node_cpus=node_cpus,
            node_preemptions=columns.node_preemptions[rows],
            task_ids=task_ids,
            task_pos=task_pos,
            task_node=renumbered,
            task_gpus=gpus,
            task_cpus=columns.cpus[at],
            task_hp=task_hp,
            task_age=age,
            task_cost=cost,
            request_gpus=request.gpus,
            request_cpus=scaled(request.cpus),
            request_hp=request.priority == "HP",
            items=items,
        )


@dataclass(frozen=True, eq=False)
class TaskColumns:
    """What preemption's views read of every task and node of a cluster, in cluster order,
    built once per cluster by :func:`task_columns` (a question takes the rows of its scope).

    ``checkpoint`` is each task's ``last_checkpoint`` (else ``start_time``) in thousandths
    (0 where it has neither: ``no_checkpoint``), ``checkpoint_time`` the same unscaled (NaN
    there); ``priority`` the integer priority (``"HP"``/``"LP"`` as ``hp_priority``/0).
    """

    ids: list[str]
    pos: dict[str, int]
    node: np.ndarray
    cpus: np.ndarray
    priority: np.ndarray
    checkpoint: np.ndarray
    checkpoint_time: np.ndarray
    no_checkpoint: np.ndarray
    #: whether the task belongs to a running gang (C8)
    in_gang: np.ndarray
    node_pos: dict[str, int]
    node_gpus: np.ndarray
    node_cpus: np.ndarray
    node_preemptions: np.ndarray


def _plain_claims(request: ClusterRequest) -> bool:
    """Whether the request's DRA claims ask only exact counts of devices of classes, with
    no selector, constraint, capacity, toleration or admin access."""
    return all(
        not claim.constraints
        and all(
            sub.allocation_mode == "ExactCount"
            and not (sub.selectors or sub.capacity or sub.tolerations or sub.admin_access)
            for item in claim.requests
            for sub in item.alternatives
        )
        for claim in request.claims
    )


def _devices_refusals(
    cluster: Cluster, request: ClusterRequest, allowed: list[bool], threshold: int
) -> tuple[list[str | None], frozenset[str]]:
    """Per node that ``allowed`` admits, why the request's claims cannot fit there
    (DF1-DF8; None: they can, and for the nodes ``allowed`` refuses), and the device nodes
    of rule P12.

    Every node where the claims fit once every task the request may stop there has
    released its claims is kept (fewer allocations never make claims fit less). Claims
    that ask only counts of whole GPUs (:func:`_plain_claims`, every device of the node
    their classes select is a whole GPU without a refusing taint, and the node's GPUs are
    all such devices, none of a device plugin) are served by victims chosen by GPU count:
    each GPU they free is a device the claims can take (their ``dra.gpuopt.io/<class>``
    resources are judged so too, not as free now). Other claims (constraints, selectors,
    MIG placements, shares, tainted GPUs) on a node where they do not fit now make it a
    device node (P12): its victims must free the very devices they need.
    """
    from gpuopt.cluster.devicecheck import DeviceLedger
    from gpuopt.cluster.devicerules import REFUSING_EFFECTS

    ledger = DeviceLedger(cluster)
    plain = _plain_claims(request)
    subs = [sub for claim in request.claims for item in claim.requests for sub in item.alternatives]
    on = {
        node: [task.id for task in tasks]
        for node, tasks in _stoppable_on(cluster, threshold).items()
    }
    found: list[str | None] = []
    device_nodes: set[str] = set()
    for node, ok in zip(cluster.nodes, allowed, strict=True):
        now = ledger.fit(request.claims, node.id)[0] if ok else []
        reason = None
        if now:
            victims = on.get(node.id, [])
            freed = ledger.fit(request.claims, node.id, victims)[0] if victims else now
            if freed:
                reason = f"node {node.id}: {freed[0]}"
                if victims:
                    reason = f"{reason.rstrip('.')} (with the pods it may stop there released)"
            else:
                devices = ledger.node(node.id).devices
                counted = (
                    plain
                    and node.gpus <= sum(device.kind == "gpu" for device in devices)
                    and all(
                        device.kind == "gpu"
                        and not any(taint.effect in REFUSING_EFFECTS for taint in device.taints)
                        for device in devices
                        if any(ledger.selection.selects(sub, device) is not False for sub in subs)
                    )
                )
                if not counted:
                    device_nodes.add(node.id)
        found.append(reason)
    return found, frozenset(device_nodes)


def _stoppable_on(
    cluster: Cluster, threshold: int, *, fixed_too: bool = False
) -> dict[str, list[ClusterTask]]:
    """Per node id, the tasks below ``threshold`` that the cluster does not fix and that may
    stop alone or with their gang (P13: not a member of a gang that cannot stop whole and
    may lose none): those a request of that priority may stop there (its LP class, K8).
    With ``fixed_too``, every task below ``threshold`` (those kube-scheduler's preemption
    removes from a node before it filters it, whatever keeps gpuopt from stopping them)."""
    facts = ClusterFacts.of(cluster)
    hp = cluster.hp_priority

    def stoppable(task: ClusterTask) -> bool:
        return task.id not in facts.fixed and priority_value(task.priority, hp) < threshold

    on: dict[str, list[ClusterTask]] = {}
    for task in cluster.tasks:
        if fixed_too:
            if priority_value(task.priority, hp) >= threshold:
                continue
        elif not stoppable(task) or (
            task.gang is not None and close_gangs(cluster, {task.id}, stoppable) is None
        ):
            continue
        on.setdefault(task.node, []).append(task)
    return on


def _rule_nodes(
    cluster: Cluster,
    request: ClusterRequest,
    allowed: list[bool],
    threshold: int,
    plain: list[bool] | None = None,
) -> tuple[list[bool], frozenset[str], dict[str, str]]:
    """P14: ``allowed`` with the nodes added that K5 or K11 refuse the request as they
    stand and admit once every task it may stop there is gone (its rule nodes, returned
    too), and the tasks fixed for it (reason ``pod-affinity``): those it may stop on a node
    whose required pod affinity (K5) holds only through pods of lower priority there.
    ``plain``: per node, whether K1-K4 (and its claims, with victims) admit the request
    (default: :meth:`Cluster.admits` without K5 and K11).

    As kube-scheduler's preemption (``SelectVictimsOnNode``): it removes every pod of lower
    priority from a node and filters the node then; a node the filters still refuse is no
    candidate, a node with room needs no preemption (a node where only the pods it would
    remove satisfy the pod's affinity takes it without victims or not at all)."""
    judge = Arrival.of(cluster, request)
    key = None
    if not request.claims:  # (the verdicts read the rules and the priority, not the shape)
        key = (
            term_key(request),
            placement_key(request),
            tuple(sorted(request.resources.items())),
            tuple(allowed),
            threshold,
            tuple((node, tuple(pod.id for pod in pods)) for node, pods in judge.beside.items()),
        )
        found = cluster.views.setdefault(_RULE_NODES, {}).get(key)
        if found is not None:
            return list(found[0]), found[1], dict(found[2])
    if not judge:
        return allowed, frozenset(), {}
    on = _stoppable_on(cluster, threshold)
    lower = _stoppable_on(cluster, threshold, fixed_too=True) if judge.terms.affinity else {}
    found, rule_nodes, held = list(allowed), set(), dict[str, str]()
    for pos, node in enumerate(cluster.nodes):
        if allowed[pos]:
            gone = lower.get(node.id)
            if gone and judge.terms.refusal(node, gone) is not None:
                held.update((task.id, "pod-affinity") for task in on.get(node.id, ()))
            continue
        gone = on.get(node.id)
        if not gone:
            continue
        if plain is None:
            plain = cluster.admits(request, arrival=False)
        if plain[pos] and judge.refusal(node, gone) is None:
            found[pos] = True
            rule_nodes.add(node.id)
    if key is not None:
        memo = cluster.views[_RULE_NODES]
        if len(memo) >= MAX_REMEMBERED:
            memo.clear()
        memo[key] = (tuple(found), frozenset(rule_nodes), dict(held))
    return found, frozenset(rule_nodes), held


def slots_of(task: ClusterTask) -> int:
    """K12: the pod slots ``task`` holds (``pods`` among its resources: one on a cluster the
    kubectl reader keeps them on), as K4 counts them everywhere."""
    return task.resources.get(POD_SLOTS, 0)


def slot_short(
    cluster: Cluster, node: ClusterNode, slots: int, freed: int = 0, request: Any = None
) -> int:
    """K12: how many more pod slots ``node`` needs for a pod asking ``slots`` once its tasks
    that hold ``freed`` slots are gone (0: it has them; a node stating no limit always
    has). The slots held are those its tasks state (:func:`slots_of`), as K4 counts them,
    and, for ``request``, those of the waiting pods nominated there that hold their room
    against it (K10: no victims, kube-scheduler counts them on the node)."""
    limit = node.resources.get(POD_SLOTS)
    if limit is None:
        return 0
    held = cluster.views.get(_SLOTS_HELD)
    if held is None:
        held = cluster.views[_SLOTS_HELD] = Counter()
        for task in cluster.tasks:
            if task.resources:
                held[task.node] += slots_of(task)
    nominated = 0
    if request is not None:
        nominated = sum(
            slots_of(other)
            for other in held_by_nominated(cluster, request)
            if other.nominated_node == node.id
        )
    return max(0, held[node.id] + nominated - freed + slots - limit)


#: The key of the pod slots each node's tasks hold in a cluster's ``views``.
_SLOTS_HELD = "k12-slots-held"


def _slot_nodes(
    cluster: Cluster, slots: int, allowed: list[bool], threshold: int, request: Any
) -> tuple[list[bool], frozenset[str]]:
    """K12 with victims (P14): of the nodes ``allowed``, those whose pod slots are short now
    are slot nodes where enough tasks it may stop are there to free them, refused where
    not (``allowed`` updated)."""
    on: dict[str, list[ClusterTask]] | None = None
    found, short_nodes = list(allowed), set()
    for pos, node in enumerate(cluster.nodes):
        if not allowed[pos]:
            continue
        short = slot_short(cluster, node, slots, request=request)
        if not short:
            continue
        if on is None:
            on = _stoppable_on(cluster, threshold)
        if sum(slots_of(task) for task in on.get(node.id, ())) >= short:
            short_nodes.add(node.id)
        else:
            found[pos] = False
    return found, frozenset(short_nodes)


#: The key of :func:`_rule_nodes`' verdicts in a cluster's ``views``.
_RULE_NODES = "p14-rule-nodes"


def task_columns(cluster: Cluster) -> TaskColumns:
    """The :class:`TaskColumns` of ``cluster``, built on first use and kept in its ``views``
    (a frozen cluster's tasks do not change)."""
    found = cluster.views.get("preemption")
    if found is None:
        found = cluster.views["preemption"] = _build_task_columns(cluster)
    return cast(TaskColumns, found)


def _build_task_columns(cluster: Cluster) -> TaskColumns:
    tasks, nodes = cluster.tasks, cluster.nodes
    node_pos = {node.id: pos for pos, node in enumerate(nodes)}
    times = [task.checkpoint for task in tasks]
    no_checkpoint = np.array([time is None for time in times], dtype=bool)
    known = [0.0 if time is None else time for time in times]
    hp_priority = cluster.hp_priority
    return TaskColumns(
        ids=[task.id for task in tasks],
        pos={task.id: pos for pos, task in enumerate(tasks)},
        node=np.array([node_pos[task.node] for task in tasks], dtype=np.int64),
        cpus=scaled_array([task.cpus for task in tasks]),
        priority=np.array(
            # the class names as integers (priority_value), inline
            [
                hp_priority if p == "HP" else 0 if p == "LP" else p
                for p in (t.priority for t in tasks)
            ],
            dtype=np.int64,
        ),
        checkpoint=scaled_array(known),
        checkpoint_time=np.where(no_checkpoint, np.nan, np.array(known, dtype=np.float64)),
        no_checkpoint=no_checkpoint,
        in_gang=np.array([task.gang is not None for task in tasks], dtype=bool),
        node_pos=node_pos,
        node_gpus=np.array([node.gpus for node in nodes], dtype=np.int64),
        node_cpus=scaled_array([node.cpus for node in nodes]),
        node_preemptions=np.array([node.preemptions for node in nodes], dtype=np.int64),
    )


def _share_view(cluster: Cluster, held: np.ndarray, milli: int) -> np.ndarray:
    """The GPUs each task holds in the view of a request for a share of ``milli``
    thousandths: 0 for the shares on a GPU that has that much left (C7)."""
    view: np.ndarray = np.array(held, dtype=np.int64)
    where = cluster.index.task_pos
    for devices in cluster.index.devices.values():
        for task_id, (gpus, _) in devices.holders.items():
            if gpus and all(devices.left[gpu] >= milli for gpu in gpus):
                view[where[task_id]] = 0
    return view


def checkpoint_of(task: ClusterTask) -> float:
    """The time since which ``task``'s work is lost when it stops: its ``last_checkpoint``,
    else its ``start_time`` (a problem's tasks have one or the other, P4)."""
    checkpoint = task.checkpoint
    if checkpoint is None:
        raise ProblemError(f"task {task.id!r} has neither last_checkpoint nor start_time.")
    return checkpoint


def scaled_array(amounts: list[float]) -> np.ndarray:
    """:func:`~gpuopt.defrag.problem.scaled` of every amount, as int64.

    ``np.rint`` rounds half to even like Python's ``round``, on the same
    float products, so the results are identical.

    >>> scaled_array([0.5, 1.0005, 96]).tolist() == [scaled(x) for x in (0.5, 1.0005, 96)]
    True
    """
    return np.rint(np.array(amounts, dtype=np.float64) * SCALE).astype(np.int64)


__all__ = [
    "ClusterFacts",
    "Scope",
    "TaskColumns",
    "awaits_victims",
    "checkpoint_of",
    "held_room",
    "scaled_array",
    "slot_short",
    "slots_of",
    "task_columns",
]
