"""The Kubernetes rules K1-K7 over the cluster model, for the checker and for the methods.

Two views of the same rules (``models/cluster.md`` states them):

- **Judging** a placement: :func:`refusal` says why a node cannot take a pod
  (K1 readiness and cordons, K2 taints, K3 node selector and required node
  affinity); :class:`PodTerms` follows where every pod is while moves are
  replayed and says which required pod affinity or anti-affinity (K5) a move
  breaks, in either direction; :func:`budget_allowance` gives each
  PodDisruptionBudget's allowed disruptions (K7).
- **Planning** under them: :func:`constraints` turns the rules into what every
  method already understands, once per snapshot: one eligibility class per
  distinct (node selector, node affinity, tolerations) with a node mask
  (K1-K3), anti-affinity groups (at most one task of a group per node) for
  required anti-affinity on the hostname, and the tasks that never move with
  the reason (K6, plus pods whose rules the methods cannot yet keep while
  moving them, which are then kept in place so the rules hold).

A pod arriving now (K1-K4 per node, and K5 and K11 against the pods around it, also with
some of them gone) is judged in :mod:`gpuopt.cluster.arrival`, on this module's protocols.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuopt._compat import moved_names
from gpuopt.cluster.fields import offered as offered_amount
from gpuopt.cluster.kube import (
    HOSTNAME_KEY,
    MIG_LABEL,
    Budget,
    NodeSelectorTerm,
    PodAffinityTerm,
    SelectorValue,
    Taint,
    Toleration,
    affinity_matches,
    selector_matches,
    untolerated,
)
from gpuopt.cluster.shares import Devices, Holder, share_layouts

# The rules read the cluster model through these protocols (``gpuopt.cluster.model``
# imports this module, so it cannot be imported here).


class PodSpec(Protocol):
    """What decides where a pod may go: a running task or a pending request."""

    @property
    def node_selector(self) -> dict[str, SelectorValue]: ...
    @property
    def tolerations(self) -> list[Toleration]: ...
    @property
    def node_affinity(self) -> list[NodeSelectorTerm]: ...


class Node(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def resources(self) -> dict[str, int]: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def ready(self) -> bool: ...
    @property
    def unschedulable(self) -> bool: ...
    @property
    def locked(self) -> bool: ...
    @property
    def taints(self) -> list[Taint]: ...
    def label(self, key: str) -> str | None: ...
    @property
    def gpus(self) -> int: ...


class Arriving(Protocol):
    """A pod as K5 judges it, waiting or running: its namespace, labels, required terms."""

    @property
    def space(self) -> str: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def pod_affinity(self) -> list[PodAffinityTerm]: ...
    @property
    def pod_anti_affinity(self) -> list[PodAffinityTerm]: ...


class Task(PodSpec, Holder, Arriving, Protocol):
    @property
    def node(self) -> str: ...
    @property
    def locked(self) -> bool: ...
    @property
    def pinned(self) -> str | None: ...
    @property
    def resources(self) -> dict[str, int]: ...
    @property
    def anti_affinity(self) -> str | None: ...
    @property
    def gang(self) -> str | None: ...


class Pending(Protocol):
    @property
    def space(self) -> str: ...
    @property
    def labels(self) -> dict[str, str]: ...


class Gang(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def min_member(self) -> int: ...


class Cluster(Protocol):
    @property
    def nodes(self) -> Sequence[Node]: ...
    @property
    def tasks(self) -> Sequence[Task]: ...
    @property
    def budgets(self) -> Sequence[Budget]: ...
    @property
    def pending(self) -> Sequence[Pending]: ...


def refusal(node: Node, pod: PodSpec, *, selector: bool = True) -> str | None:
    """Why ``node`` cannot take ``pod`` by rules K1-K3 (None: it can, resources aside).

    With ``selector=False`` the node selector is not checked (a checker that
    reports it under a rule of its own).

    >>> from gpuopt.cluster.model import Node, Task
    >>> node = Node(id="n", gpus=8, cpus=64, taints=[{"key": "gpu", "effect": "NoSchedule"}])
    >>> refusal(node, Task(id="t", node="n", gpus=1))
    'K2: node n has the taint gpu:NoSchedule, which the pod does not tolerate'
    """
    if not node.ready:
        return f"K1: node {node.id} is NotReady"
    if node.unschedulable:
        return f"K1: node {node.id} is cordoned (unschedulable)"
    if node.locked:
        return f"K1: node {node.id} is locked"
    if node.labels.get(MIG_LABEL) == "single":
        return f"K1: node {node.id} is in MIG single strategy (its GPUs are slices, not GPUs)"
    refused = untolerated(pod.tolerations, node.taints)
    if refused:
        taint = refused[0]
        shown = taint.key if taint.value is None else f"{taint.key}={taint.value}"
        return (
            f"K2: node {node.id} has the taint {shown}:{taint.effect}, "
            "which the pod does not tolerate"
        )
    if selector and not selector_matches(pod.node_selector, node.labels):
        return f"K3: node {node.id} does not match the pod's node_selector"
    if not affinity_matches(pod.node_affinity, node.id, node.labels):
        return f"K3: node {node.id} does not satisfy the pod's required node affinity"
    return None


def short_of(
    node_id: str, offered: Mapping[str, int], used: Mapping[str, int], wanted: Mapping[str, int]
) -> str | None:
    """K4 for extended resources: why ``node_id`` lacks room for ``wanted`` (None: it has it).

    ``offered`` is its allocatable (a host port it does not list: one, K9), ``used`` what
    its pods hold.
    """
    for name, amount in wanted.items():
        free = offered_amount(offered, name) - used.get(name, 0)
        if amount > free:
            return f"K4: node {node_id} lacks {name} (needs {amount}, has {free})"
    return None


class Asking(PodSpec, Protocol):
    """A request a view places: its pod rules and extended resources."""

    @property
    def resources(self) -> dict[str, int]: ...


def is_pod(request: Any) -> bool:
    """Whether ``request`` stands for a pod: a waiting pod, or a request read from one (its
    ``namespace`` set; a request shape has none)."""
    return getattr(request, "namespace", None) is not None and hasattr(request, "pod_affinity")


def term_key(request: Any) -> str:
    """One key per distinct (namespace, labels, required pod terms) of a request that stands
    for a pod: requests alike for K5 (:func:`term_refusals`); '' for a request shape."""
    if not is_pod(request):
        return ""
    return json.dumps(
        [
            request.space,
            sorted(request.labels.items()),
            [term.model_dump(mode="json") for term in request.pod_affinity],
            [term.model_dump(mode="json") for term in request.pod_anti_affinity],
            [c.model_dump(mode="json") for c in getattr(request, "topology_spread", ())],
            # (K11 also reads the node selector, affinity and tolerations: placement_key)
        ],
        sort_keys=True,
    )


#: The reason of the DisruptionTarget condition kube-scheduler writes on a pod it preempts
#: (``Task.disruption``, K10).
PREEMPTED_BY_SCHEDULER = "PreemptionByScheduler"


def terminating(task: Any) -> bool:
    """Whether a running ``task`` is being deleted (``deletion_time`` stated, or pinned
    ``terminating`` by the reader): kube-scheduler counts it for no spread and waits for it
    after preempting."""
    return getattr(task, "deletion_time", None) is not None or task.pinned == "terminating"


def gang_sizes(tasks: Iterable[Task]) -> Counter[str]:
    """C8: each running gang's members running, by gang id."""
    return Counter(task.gang for task in tasks if task.gang is not None)


def gang_needs(
    gangs: Iterable[Gang], tasks: Iterable[Task], members: Mapping[str, Sequence[Any]]
) -> dict[str, int]:
    """C8: how many waiting pods (``members``, by gang id) each waiting gang needs to
    start together: all of them, or what the ``min_member`` of a gang listed in ``gangs``
    still lacks beside its running pods among ``tasks`` (more than its waiting pods when it
    has too few pods to start: coscheduling and Volcano keep it waiting then)."""
    listed = {gang.id: gang.min_member for gang in gangs}
    running = gang_sizes(tasks)
    return {
        gang: max(0, listed[gang] - running[gang]) if gang in listed else len(at)
        for gang, at in members.items()
    }


def placement_key(pod: PodSpec) -> str:
    """One key per distinct (node selector, node affinity, tolerations): pods alike for K1-K3."""
    if not pod.node_selector and not pod.node_affinity and not pod.tolerations:
        return "{}"
    return json.dumps(
        [
            sorted(pod.node_selector.items()),
            [term.model_dump(mode="json") for term in pod.node_affinity],
            [toleration.model_dump(mode="json") for toleration in pod.tolerations],
        ],
        sort_keys=True,
    )


def budget_allowance(cluster: Cluster) -> list[tuple[Budget, list[str], int]]:
    """K7: each budget, the tasks it selects, and the disruptions it allows.

    Expected pods are the tasks and the waiting pods it selects (the
    disruption controller expects every replica its controller wants, and a
    waiting replica is one of them); healthy ones are the tasks not pinned as
    terminating, not running or not ready, and not on a NotReady node.
    """
    unhealthy = ("terminating", "not-running", "not-ready")
    ready = {node.id: node.ready for node in cluster.nodes}
    found = []
    for budget in cluster.budgets:
        members = [t for t in cluster.tasks if budget.selects(t.space, t.labels)]
        waiting = sum(budget.selects(p.space, p.labels) for p in cluster.pending)
        healthy = sum(t.pinned not in unhealthy and ready[t.node] for t in members)
        allowed = budget.allowed(len(members) + waiting, healthy)
        found.append((budget, [t.id for t in members], allowed))
    return found


def budget_cover(allowances: Iterable[tuple[Budget, list[str], int]]) -> Counter[str]:
    """How many budgets select each task (of :func:`budget_allowance`'s answer); the
    Eviction API refuses to evict a pod more than one budget selects."""
    covered: Counter[str] = Counter()
    for _, members, _ in allowances:
        covered.update(members)
    return covered


def _term_key(owner: Task, term: PodAffinityTerm) -> str:
    namespaces = ["*"] if term.all_namespaces else sorted(term.namespaces or [owner.space])
    return json.dumps(
        [namespaces, term.selector.model_dump(mode="json"), term.topology_key], sort_keys=True
    )


def domain_of(node: Node, key: str) -> str | None:
    """The domain of ``node`` for a topology key (a node label; the hostname is the node)."""
    return node.label(key)


class PodTerms:
    """K5 while moves are replayed: where every pod is, and which pod terms a move breaks.

    Only moves are judged: a rule already broken in the snapshot (labels
    changed after scheduling) is not reported until a move touches it.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.nodes = {node.id: node for node in cluster.nodes}
        self.tasks = {task.id: task for task in cluster.tasks}
        self.where = {task.id: task.node for task in cluster.tasks}
        self.keys = {
            term.topology_key
            for task in cluster.tasks
            for term in (*task.pod_affinity, *task.pod_anti_affinity)
        }
        self.owners = [t for t in cluster.tasks if t.pod_affinity or t.pod_anti_affinity]
        owning = {t.id for t in self.owners}
        # (topology key, domain) -> tasks there, and those of them that carry terms,
        # for the keys some term uses
        self.members: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
        self.holders: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
        self.owning = owning
        for task in cluster.tasks:
            self._enter(task.id, task.node)

    @property
    def active(self) -> bool:
        """True when some pod has a required pod (anti-)affinity term."""
        return bool(self.owners)

    def _enter(self, task_id: str, node_id: str) -> None:
        for key in self.keys:
            domain = domain_of(self.nodes[node_id], key)
            if domain is not None:
                self.members[key, domain].add(task_id)
                if task_id in self.owning:
                    self.holders[key, domain].add(task_id)

    def _leave(self, task_id: str, node_id: str) -> None:
        for key in self.keys:
            domain = domain_of(self.nodes[node_id], key)
            if domain is not None:
                self.members[key, domain].discard(task_id)
                self.holders[key, domain].discard(task_id)

    def _near(self, node_id: str, key: str, but: str, *, holders: bool = False) -> Iterable[Task]:
        """The tasks in the domain of ``node_id`` at ``key`` but ``but`` (``holders``: those
        that carry terms)."""
        domain = domain_of(self.nodes[node_id], key)
        if domain is None:
            return ()
        found = (self.holders if holders else self.members)[key, domain]
        return (self.tasks[t] for t in found if t != but)

    def _satisfied(self, owner: Task, term: PodAffinityTerm, node_id: str) -> bool:
        """An affinity term of ``owner`` holds with ``owner`` on ``node_id``."""
        near = self._near(node_id, term.topology_key, owner.id)
        if any(term.selects(owner.space, t.space, t.labels) for t in near):
            return True
        # Kubernetes lets the first pod of a group that selects itself go anywhere.
        others = any(
            term.selects(owner.space, t.space, t.labels)
            for t in self.tasks.values()
            if t.id != owner.id
        )
        return not others and term.selects(owner.space, owner.space, owner.labels)

    def move(self, task_id: str, source: str, target: str) -> list[str]:
        """Replay one move and return the K5 breaches it causes (each one sentence)."""
        task = self.tasks[task_id]
        found: list[str] = []
        for term in task.pod_anti_affinity:
            for other in self._near(target, term.topology_key, task_id):
                if term.selects(task.space, other.space, other.labels):
                    found.append(
                        f"K5: {task_id} requires anti-affinity on {term.topology_key} with "
                        f"{other.id}, which is in the same domain as node {target}"
                    )
                    break
        for term in task.pod_affinity:
            if not self._satisfied(task, term, target):
                found.append(
                    f"K5: {task_id} requires affinity on {term.topology_key} with pods that are "
                    f"not in the domain of node {target}"
                )
        for key in self.keys:
            for other in self._near(target, key, task_id, holders=True):
                for term in other.pod_anti_affinity:
                    if term.topology_key == key and term.selects(
                        other.space, task.space, task.labels
                    ):
                        found.append(
                            f"K5: {other.id} requires anti-affinity on {key} with {task_id}, "
                            f"which moves into its domain (node {target})"
                        )
        self._leave(task_id, source)
        self.where[task_id] = target
        self._enter(task_id, target)
        for key in self.keys:
            for other in self._near(source, key, task_id, holders=True):
                for term in other.pod_affinity:
                    if (
                        term.topology_key == key
                        and term.selects(other.space, task.space, task.labels)
                        and not self._satisfied(other, term, self.where[other.id])
                    ):
                        found.append(
                            f"K5: {other.id} requires affinity on {key} with pods like "
                            f"{task_id}, which leaves its domain (node {source})"
                        )
        return found


@dataclass
class Constraints:
    """The K rules as the methods read them (see :func:`constraints`)."""

    #: Per task: index of its eligibility class in ``masks``.
    task_class: list[int]
    #: One row per eligibility class: True on the nodes that may take its pods (K1-K3).
    masks: list[list[bool]]
    #: Per task: its anti-affinity group (explicit or from a hostname anti-affinity), or None.
    task_group: list[str | None]
    #: Tasks never moved nor stopped, with the reason.
    fixed: dict[str, str] = field(default_factory=dict)
    #: Tasks never moved, with the reason: ``fixed``, and the members of running gangs
    #: (``gang``, C8): a move evicts its pod, and a member evicted stops its gang (P2) or
    #: makes every rank restart, so only preemption, which stops a gang whole, takes them.
    kept: dict[str, str] = field(default_factory=dict)
    #: C7: the GPUs of each node that runs a GPU share, laid out (other nodes: none).
    devices: dict[str, Devices] = field(default_factory=dict)


def constraints(cluster: Cluster) -> Constraints:
    """The K rules in the terms every method knows: node masks, groups, fixed tasks.

    - K1-K3: tasks alike for them share an eligibility class whose mask admits
      the open nodes they tolerate and match.
    - K6: locked and pinned tasks, and every task on a locked node, are fixed.
    - K5: a required anti-affinity on the hostname becomes an anti-affinity
      group holding the pod and every pod its term selects (at most one per
      node: stricter than the rule when the selected pods may share a node,
      never looser); when a task would belong to two groups, the term's pods
      are fixed instead. Required anti-affinity on a wider topology key and
      required pod affinity fix the pods they involve (kept in place, the
      rule holds).
    - K4 is not here: the methods plan every extended resource in the index
      (``resource_names``, ``node_extra``, ``task_extra``) like CPUs.
    - K7: the pods of a budget that allows no disruption are fixed.
    - C8: the members of a running gang of two or more pods are kept (``kept``:
      never moved; preemption may still stop the gang whole, P2).
    - C7: a GPU share that shares its GPU with another task is fixed
      (``shared-gpu``): the methods move a share only when it is alone on its
      GPU, as a one-GPU task, so that a move frees exactly what they count;
      :mod:`gpuopt.sharing` moves shares between GPUs.
    """
    nodes = {node.id: node for node in cluster.nodes}
    fixed: dict[str, str] = {}
    for task in cluster.tasks:
        if task.pinned is not None:
            fixed[task.id] = task.pinned
        elif task.locked:
            fixed[task.id] = "locked"
        elif nodes[task.node].locked:
            fixed[task.id] = "node-locked"
        elif not nodes[task.node].ready:  # its kubelet would never confirm the eviction
            fixed[task.id] = "node-not-ready"
    allowances = budget_allowance(cluster)
    for _, members, allowed in allowances:
        if allowed == 0:
            for task_id in members:
                fixed.setdefault(task_id, "budget")
    for task_id, budgets in budget_cover(
        allowances
    ).items():  # the Eviction API refuses such a pod (500)
        if budgets > 1:
            fixed.setdefault(task_id, "two-budgets")
    devices = share_layouts(cluster.nodes, cluster.tasks)
    for node_devices in devices.values():
        for tasks in node_devices.sharing().values():
            for task_id in tasks:
                fixed.setdefault(task_id, "shared-gpu")
    groups = _groups(cluster, fixed)
    kept = dict(fixed)
    running = gang_sizes(cluster.tasks)
    for task in cluster.tasks:
        if task.gang is not None and running[task.gang] > 1:
            kept.setdefault(task.id, "gang")
    keys: dict[str, int] = {}
    first: list[Task] = []  # the first task of each class
    task_class: list[int] = []
    for task in cluster.tasks:
        key = placement_key(task)
        row = keys.get(key)
        if row is None:
            row = keys[key] = len(first)
            first.append(task)
        task_class.append(row)
    return Constraints(
        task_class=task_class,
        masks=_masks(cluster, first),
        task_group=groups,
        fixed=fixed,
        kept=kept,
        devices=devices,
    )


def _masks(cluster: Cluster, pods: Sequence[PodSpec]) -> list[list[bool]]:
    """K1-K3 for each of ``pods`` on every node, judged once per kind of node.

    Nodes alike in everything the rules read (open or not, taints, the labels
    some selector or affinity names, and the name when a term matches on it)
    share one verdict, so the cost follows the kinds of nodes, not their number
    (real nodes all differ by their hostname label).
    """
    named = {key for pod in pods for key in pod.node_selector}
    by_name = False
    for pod in pods:
        for term in pod.node_affinity:
            named.update(requirement.key for requirement in term.match_expressions)
            by_name = by_name or bool(term.match_fields)
    names = sorted(named)
    kinds: dict[tuple[object, ...], int] = {}
    kind_of: list[int] = []
    sample: list[Node] = []
    for node in cluster.nodes:
        signature = (
            node.ready,
            node.unschedulable,
            node.locked,
            tuple((t.key, t.value, t.effect) for t in node.taints),
            tuple(node.labels.get(name) for name in names),
            node.id if by_name else None,
        )
        kind = kinds.get(signature)
        if kind is None:
            kind = kinds[signature] = len(sample)
            sample.append(node)
        kind_of.append(kind)
    masks = []
    for pod in pods:
        verdict = [refusal(node, pod) is None for node in sample]
        masks.append([verdict[kind] for kind in kind_of])
    return masks


def _groups(cluster: Cluster, fixed: dict[str, str]) -> list[str | None]:
    """K5 as groups and fixed tasks (see :func:`constraints`); fills ``fixed``."""
    tasks = {t.id: t for t in cluster.tasks}
    group: dict[str, str] = {t.id: t.anti_affinity for t in cluster.tasks if t.anti_affinity}
    # each distinct term (by namespaces, selector and key; "+" marks affinity), its first
    # owner, and every task that carries it
    terms: dict[str, tuple[Task, PodAffinityTerm, bool]] = {}
    owners: defaultdict[str, list[str]] = defaultdict(list)
    for task in cluster.tasks:
        for anti, held in ((True, task.pod_anti_affinity), (False, task.pod_affinity)):
            for term in held:
                key = _term_key(task, term) + ("" if anti else "+")
                terms.setdefault(key, (task, term, anti))
                owners[key].append(task.id)
    pods = _PodIndex(cluster.tasks) if terms else None
    for key, (owner, term, anti) in terms.items():
        assert pods is not None
        selected = pods.selected(owner, term)
        involved = list(dict.fromkeys([*owners[key], *selected]))
        name = f"k8s:{key}"
        on_node = Counter(tasks[t].node for t in involved)
        if (
            anti
            and term.topology_key == HOSTNAME_KEY
            and all(group.get(t, name) == name for t in involved)
            and max(on_node.values(), default=0) <= 1
        ):
            for task_id in involved:
                group[task_id] = name
            continue
        reason = "pod-anti-affinity" if anti else "pod-affinity"
        for task_id in involved:
            fixed.setdefault(task_id, reason)
    return [group.get(task.id) for task in cluster.tasks]


class _PodIndex:
    """Tasks by label, so that a term's selector scans only the tasks that can match it."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        self.tasks = list(tasks)
        self.spaces = [task.space for task in self.tasks]
        self.by_label: defaultdict[tuple[str, str], list[int]] = defaultdict(list)
        for position, task in enumerate(self.tasks):
            for item in task.labels.items():
                self.by_label[item].append(position)

    def selected(self, owner: Task, term: PodAffinityTerm) -> list[str]:
        """The ids of the tasks ``term`` of ``owner`` selects, in task order."""
        wanted = term.selector.match_labels
        candidates: Sequence[int] = range(len(self.tasks))
        for item in wanted.items():
            posting = self.by_label.get(item, [])
            if len(posting) < len(candidates):
                candidates = posting
        space = owner.space
        return [
            self.tasks[p].id
            for p in candidates
            if term.selects(space, self.spaces[p], self.tasks[p].labels)
        ]


def fixed_counts(fixed: Mapping[str, str]) -> Counter[str]:
    """How many tasks are fixed for each reason."""
    return Counter(fixed.values())


def describe(counts: Mapping[str, int]) -> str:
    """``"3 daemonset, 2 critical"``: counts by reason, largest first."""
    return ", ".join(f"{count} {reason}" for reason, count in Counter(counts).most_common())


def describe_fixed(fixed: Mapping[str, str]) -> str:
    """``"5 tasks (3 daemonset, 2 critical)"``: the fixed tasks, by reason."""
    return f"{len(fixed)} tasks ({describe(fixed_counts(fixed))})"


__all__ = [
    "Constraints",
    "PodSpec",
    "PodTerms",
    "budget_allowance",
    "budget_cover",
    "constraints",
    "describe",
    "describe_fixed",
    "domain_of",
    "fixed_counts",
    "gang_sizes",
    "placement_key",
    "refusal",
]

#: A pod arriving now is judged in :mod:`gpuopt.cluster.arrival`: the old names resolve
#: there for one release, with a ``DeprecationWarning``.
__getattr__ = moved_names(
    __name__,
    "gpuopt.cluster.arrival",
    names={
        "Arrival",
        "Spread",
        "Terms",
        "admitted",
        "arrival_refusals",
        "refusals",
        "spread_refusals",
        "term_refusals",
    },
)
