"""A pod arriving now: may it go to a node by every rule that judges one node at a time
(K1-K4) and by the rules that read the pods around it, its required pod (anti-)affinity
(K5) and its DoNotSchedule topology spread (K11), as kube-scheduler's filters judge them.

:func:`refusals` (and :func:`admitted`) say it per node; :func:`arrival_refusals` gives
K5 and K11 alone, counting the waiting pods bound before it. :class:`Terms` (K5) and
:class:`Spread` (K11) judge a node, also with some of its pods gone (preemption's victims,
rule P14 of ``models/preemption.md``); :class:`Arrival` is both, built once per cluster
and request. The rules are stated in ``models/cluster.md``.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from gpuopt.cluster.fields import priority_value
from gpuopt.cluster.kube import (
    PodAffinityTerm,
    SpreadConstraint,
    affinity_matches,
    selector_matches,
    untolerated,
)
from gpuopt.cluster.rules import (
    Arriving,
    Asking,
    Cluster,
    Node,
    Task,
    domain_of,
    is_pod,
    placement_key,
    refusal,
    short_of,
    term_key,
    terminating,
)


def admitted(cluster: Cluster, request: Asking, *, arrival: bool = True) -> list[bool]:
    """Per node: may ``request`` go there now by rules K1-K3 and, for its extended
    resources, K4 (GPUs, CPUs and memory are the views' own business), and K5 and K11
    unless ``arrival`` is False (:func:`refusals`)?"""
    return [why is None for why in refusals(cluster, request, arrival=arrival)]


def refusals(cluster: Cluster, request: Asking, *, arrival: bool = True) -> list[str | None]:
    """Per node, why rules K1-K3 or, for its extended resources, K4 keep ``request`` from
    it (:func:`refusal`, :func:`short_of`; None: they do not), and, for a request that
    stands for a waiting pod (its ``namespace`` set) unless ``arrival`` is False, K5
    (:func:`term_refusals`) and K11 (:func:`spread_refusals`), on a node where waiting pods
    are nominated also with them counted as running there (:func:`nominated_beside`)."""
    used: defaultdict[str, Counter[str]] = defaultdict(Counter)
    if request.resources:
        for task in cluster.tasks:
            if task.resources:
                used[task.node].update(task.resources)
        # K10: the waiting pods nominated to a node hold their extended resources (their pod
        # slot among them, K12) there against the request, as kube-scheduler counts them
        for other in held_by_nominated(cluster, request):
            if other.resources:
                used[other.nominated_node].update(other.resources)
    terms: dict[str, str] = {}
    if arrival and is_pod(request):
        if nominated_beside(cluster, request):  # (K10: judged with them counted there too)
            judge = Arrival.of(cluster, request)
            terms = {node.id: why for node in cluster.nodes if (why := judge.refusal(node))}
        else:
            terms = arrival_refusals(cluster, request)
    found = []
    for node in cluster.nodes:
        why = refusal(node, request)
        if why is None and request.resources:
            why = short_of(node.id, node.resources, used[node.id], request.resources)
        if why is None:
            why = terms.get(node.id)
        found.append(why)
    return found


def arrival_refusals(
    cluster: Cluster, pod: Any, bound: Sequence[tuple[Any, str]] = ()
) -> dict[str, str]:
    """Node id -> why, for each node a waiting ``pod`` arriving now may not go to by K11
    (:func:`spread_refusals`) or K5 (:func:`term_refusals`, said first where both refuse),
    counting the waiting pods ``bound`` before it (as (pod, node)) with the running pods."""
    return {**spread_refusals(cluster, pod, bound), **term_refusals(cluster, pod, bound)}


def spread_refusals(
    cluster: Cluster, pod: Any, bound: Sequence[tuple[Any, str]] = ()
) -> dict[str, str]:
    """K11 for a waiting ``pod`` arriving now, as kube-scheduler's PodTopologySpread filter
    judges its DoNotSchedule constraints (``topology_spread``) against the running pods:
    node id -> why, for each node it refuses.

    Per constraint, the nodes eligible for counting are those with the labels of every
    constraint's topology key that match the pod's node selector and required node
    affinity (unless ``node_affinity_policy`` is ``Ignore``) and, when
    ``node_taints_policy`` is ``Honor``, whose taints it tolerates; each of their domains
    counts the running pods (and the waiting pods ``bound`` so far, as (pod, node)) of the
    pod's namespace that the constraint's selector matches (terminating pods not counted;
    an empty selector counts none, though the pod matches it itself). A node without the
    label is refused; another when its domain's count, plus one if the pod matches its own
    selector, exceeds the fewest of an eligible domain (0 while there are fewer domains
    than ``min_domains``) by more than ``max_skew``.

    >>> from gpuopt.cluster.model import Cluster
    >>> spread = {"max_skew": 1, "topology_key": "zone",
    ...           "selector": {"match_labels": {"app": "web"}}}
    >>> cluster = Cluster(nodes=[
    ...     {"id": "a", "gpus": 8, "cpus": 8, "labels": {"zone": "z1"}},
    ...     {"id": "b", "gpus": 8, "cpus": 8, "labels": {"zone": "z2"}},
    ...     {"id": "c", "gpus": 8, "cpus": 8}],
    ...     tasks=[{"id": "ns/web-0", "node": "a", "gpus": 1, "labels": {"app": "web"}}],
    ...     pending=[{"id": "ns/web-1", "gpus": 1, "labels": {"app": "web"},
    ...               "topology_spread": [spread]}])
    >>> sorted(spread_refusals(cluster, cluster.pending[0]))
    ['a', 'c']
    """
    constraints = getattr(pod, "topology_spread", None)
    if not constraints:
        return {}
    views = None if bound else getattr(cluster, "views", None)
    key = None
    if views is not None:  # (the replicas of one template share their verdicts)
        key = json.dumps(
            [
                pod.space,
                sorted(pod.labels.items()),
                [c.model_dump(mode="json") for c in constraints],
                placement_key(pod),
            ],
            sort_keys=True,
        )
        memo = views.setdefault(_SPREAD_VERDICTS, {})
        if key in memo:
            return dict(memo[key])
    judge = Spread(cluster, pod, bound)
    found = {node.id: why for node in cluster.nodes if (why := judge.refusal(node)) is not None}
    if views is not None and key is not None:
        memo = views[_SPREAD_VERDICTS]
        if len(memo) >= _MAX_SPREAD_VERDICTS:
            memo.clear()
        memo[key] = dict(found)
    return found


@dataclass
class _Counted:
    """One DoNotSchedule constraint of :class:`Spread`: the nodes eligible for counting,
    the matching pods per eligible domain, the fewest, and whether the pod matches its
    own selector."""

    constraint: SpreadConstraint
    eligible: set[str]
    counts: Counter[str]
    fewest: int
    own: int


def _fewest(constraint: SpreadConstraint, counts: Counter[str]) -> int:
    """The fewest pods of an eligible domain that ``constraint`` counts (``counts``), 0 while
    there are fewer domains than its ``min_domains``."""
    if constraint.min_domains is not None and len(counts) < constraint.min_domains:
        return 0
    return min(counts.values(), default=0)


class Spread:
    """K11 for one waiting ``pod`` (:func:`spread_refusals` states the rule): the counts of
    each of its DoNotSchedule constraints, built once, judging one node at a time as the
    cluster stands or with some of that node's running pods gone (kube-scheduler's
    preemption removes the pods it may stop from a node before it filters it)."""

    def __init__(self, cluster: Cluster, pod: Any, bound: Sequence[tuple[Any, str]] = ()) -> None:
        self.pod = pod
        self.counted: list[_Counted] = []
        constraints = getattr(pod, "topology_spread", None) or ()
        keys = [constraint.topology_key for constraint in constraints]
        labelled = [node for node in cluster.nodes if all(domain_of(node, k) for k in keys)]
        for constraint in constraints:
            topology = constraint.topology_key
            counts: Counter[str] = Counter()
            eligible: set[str] = set()
            for node in labelled:  # (kube-scheduler counts nodes with every key only)
                if constraint.node_affinity_policy == "Honor" and not (
                    selector_matches(pod.node_selector, node.labels)
                    and affinity_matches(pod.node_affinity, node.id, node.labels)
                ):
                    continue
                if constraint.node_taints_policy == "Honor" and untolerated(
                    pod.tolerations, node.taints
                ):
                    continue
                eligible.add(node.id)
                counts[str(domain_of(node, topology))] += 0  # (an eligible domain counts 0)
            selector = constraint.selector
            if selector is not None and (selector.match_labels or selector.match_expressions):
                domains = {node.id: domain_of(node, topology) for node in labelled}
                for task in cluster.tasks:
                    if task.node in eligible and self.counts(constraint, task):
                        counts[str(domains[task.node])] += 1
                for other, node_id in bound:
                    if (
                        node_id in eligible
                        and other.space == pod.space
                        and selector.matches(other.labels)
                    ):
                        counts[str(domains[node_id])] += 1
            own = int(selector is not None and selector.matches(pod.labels))
            self.counted.append(
                _Counted(constraint, eligible, counts, _fewest(constraint, counts), own)
            )

    def plus(self, node: Node, others: Sequence[Any]) -> Spread:
        """These counts with the waiting pods ``others`` counted as running on ``node``: the
        same judge as ``Spread(cluster, pod, [(other, node.id) for other in others])``, built
        from this one without a pass over the running pods, except that an empty selector
        counts them (kube-scheduler's ``AddPod`` matches it, as every selector, against
        their labels; its count of the pods on a node counts none for it)."""
        pod = self.pod
        copy = object.__new__(Spread)
        copy.pod, copy.counted = pod, []
        for counted in self.counted:
            constraint = counted.constraint
            selector = constraint.selector
            added = 0
            # (an empty selector too: kube-scheduler's AddPod matches it against the pod's
            # labels, though its count of the running pods counts none for it)
            if node.id in counted.eligible and selector is not None:
                added = sum(
                    other.space == pod.space and selector.matches(other.labels) for other in others
                )
            if not added:
                copy.counted.append(counted)
                continue
            counts = Counter(counted.counts)
            counts[str(domain_of(node, constraint.topology_key))] += added
            fewest = _fewest(constraint, counts)
            copy.counted.append(_Counted(constraint, counted.eligible, counts, fewest, counted.own))
        return copy

    def counts(self, constraint: SpreadConstraint, task: Task) -> bool:
        """Whether ``constraint`` counts the running ``task`` (on an eligible node): of the
        pod's namespace, not terminating, its labels matched by a selector that is not
        empty."""
        selector = constraint.selector
        return (
            selector is not None
            and bool(selector.match_labels or selector.match_expressions)
            and not terminating(task)
            and task.space == self.pod.space
            and selector.matches(task.labels)
        )

    def refusal(self, node: Node, gone: Sequence[Task] = ()) -> str | None:
        """Why K11 keeps the pod from ``node`` once its running pods ``gone`` are gone
        (None: it does not)."""
        for counted in self.counted:
            constraint = counted.constraint
            topology = constraint.topology_key
            domain = domain_of(node, topology)
            if domain is None:
                return (
                    f"K11: node {node.id} has no label {topology}, which the pod's topology "
                    "spread constraint spreads over"
                )
            count, fewest = counted.counts.get(domain, 0), counted.fewest
            if gone and node.id in counted.eligible:
                count -= sum(self.counts(constraint, task) for task in gone)
                if constraint.min_domains is None or len(counted.counts) >= constraint.min_domains:
                    fewest = min(fewest, count)
            skew = count + counted.own - fewest
            if skew > constraint.max_skew:
                return (
                    f"K11: the pod's topology spread constraint on {topology} would leave a "
                    f"skew of {skew} in {domain} (max_skew {constraint.max_skew})"
                )
        return None


#: The key of :func:`spread_refusals`' verdicts in a cluster's ``views``, and how many it
#: keeps (a waiting pod's spread constraints are judged against the running pods, which a
#: cluster's ``views`` last as long as).
_SPREAD_VERDICTS = "k11-spread-verdicts"
_MAX_SPREAD_VERDICTS = 4096


#: The key of :meth:`Arrival.of`'s judges in a cluster's ``views``.
_ARRIVAL_JUDGES = "k5-k11-judges"

#: The key of the waiting pods nominated to a node in a cluster's ``views``.
_NOMINATED = "k10-nominated"

#: The key of the running pods' required anti-affinity terms in a cluster's ``views``.
_ANTI_TERMS = "k5-anti-terms"


def term_refusals(
    cluster: Cluster, pod: Arriving, bound: Sequence[tuple[Any, str]] = ()
) -> dict[str, str]:
    """K5 for a waiting ``pod`` arriving now, as kube-scheduler's InterPodAffinity filter
    judges it against the running pods: node id -> why, for each node it refuses (the
    others are open). A node is refused when a term of the pod's required anti-affinity
    selects a running pod in the node's domain, when a term of its required affinity
    selects none there (unless no running pod matches it and it selects the pod itself:
    the first of a group goes anywhere), or when a running pod's required anti-affinity
    term selects the pod and that pod is in the node's domain (symmetry). A node without
    the term's topology label is no domain: refused by affinity, open to anti-affinity.
    The waiting pods ``bound`` before it (as (pod, node), in the fit of waiting pods) count
    as running pods there: kube-scheduler, placing one pod at a time, sees them.

    >>> from gpuopt.cluster.model import Cluster
    >>> term = {"selector": {"match_labels": {"app": "web"}},
    ...         "topology_key": "kubernetes.io/hostname"}
    >>> cluster = Cluster(nodes=[{"id": "a", "gpus": 8, "cpus": 8},
    ...                          {"id": "b", "gpus": 8, "cpus": 8}],
    ...     tasks=[{"id": "ns/web-0", "node": "a", "gpus": 1, "labels": {"app": "web"},
    ...             "pod_anti_affinity": [term]}],
    ...     pending=[{"id": "ns/web-1", "gpus": 1, "labels": {"app": "web"}}])
    >>> found = term_refusals(cluster, cluster.pending[0])
    >>> list(found), found["a"][:50]
    (['a'], 'K5: the running pod ns/web-0 requires anti-affinit')
    """
    judge = Terms(cluster, pod, bound)
    if not judge:
        return {}
    return {node.id: why for node in cluster.nodes if (why := judge.refusal(node)) is not None}


class Terms:
    """K5 for one waiting ``pod`` (:func:`term_refusals` states the rule): the running pods
    its terms select and those whose anti-affinity selects it, counted per domain once,
    judging one node at a time as the cluster stands or with some of that node's running
    pods gone (kube-scheduler's preemption removes the pods it may stop from a node before
    it filters it). False when no term applies."""

    def __init__(
        self, cluster: Cluster, pod: Arriving, bound: Sequence[tuple[Any, str]] = ()
    ) -> None:
        self.pod = pod
        views = getattr(cluster, "views", None)
        holders = None if views is None else views.get(_ANTI_TERMS)
        if holders is None:
            holders = [(task, term) for task in cluster.tasks for term in task.pod_anti_affinity]
            if views is not None:
                views[_ANTI_TERMS] = holders
        #: the pods whose anti-affinity term selects the pod, by (key, domain), in the order
        #: of the cluster's tasks, then of the waiting pods ``bound`` (with whether it waits)
        self.selecting: dict[tuple[str, str], list[tuple[int, Any, bool]]] = {}
        self.keys: list[str] = []
        self.anti: list[tuple[PodAffinityTerm, Counter[str]]] = []
        self.affinity: list[PodAffinityTerm] = list(pod.pod_affinity)
        selecting = [
            (task, term, task.node, False)
            for task, term in holders
            if term.selects(task.space, pod.space, pod.labels)
        ]
        selecting += [
            (other, term, node_id, True)
            for other, node_id in bound
            for term in other.pod_anti_affinity
            if term.selects(other.space, pod.space, pod.labels)
        ]
        self.applies = bool(pod.pod_affinity or pod.pod_anti_affinity or selecting)
        self.pairs: Counter[tuple[str, str]] = Counter()
        self._next = len(selecting)  # (the order of a pod counted later, :meth:`plus`)
        if not self.applies:
            return
        nodes = {node.id: node for node in cluster.nodes}
        for order, (task, term, node_id, waits) in enumerate(selecting):
            domain = domain_of(nodes[node_id], term.topology_key)
            if domain is not None:
                key = (term.topology_key, domain)
                self.selecting.setdefault(key, []).append((order, task, waits))
        self.keys = list(dict.fromkeys(key for key, _ in self.selecting))
        placed = [(task, task.node) for task in cluster.tasks] + list(bound)
        for term in pod.pod_anti_affinity:
            held: Counter[str] = Counter()
            for task, node_id in placed:
                if term.selects(pod.space, task.space, task.labels):
                    domain = domain_of(nodes[node_id], term.topology_key)
                    if domain is not None:
                        held[domain] += 1
            self.anti.append((term, held))
        # required affinity counts only the pods every term selects (kube-scheduler's
        # affinityCounts), per term's (key, domain)
        for task, node_id in placed:
            if self._all(task):
                for term in pod.pod_affinity:
                    domain = domain_of(nodes[node_id], term.topology_key)
                    if domain is not None:
                        self.pairs[term.topology_key, domain] += 1

    def __bool__(self) -> bool:
        return self.applies

    def plus(self, node: Node, others: Sequence[Any]) -> Terms:
        """These counts with the waiting pods ``others`` counted as running on ``node``: the
        same judge as ``Terms(cluster, pod, [(other, node.id) for other in others])``, built
        from this one without a pass over the running pods (what kube-scheduler's
        ``AddPod`` does when it filters a node with the pods nominated there)."""
        pod = self.pod
        copy = object.__new__(Terms)
        copy.pod, copy.affinity = pod, self.affinity
        copy.selecting = {key: list(found) for key, found in self.selecting.items()}
        copy.keys = list(self.keys)
        copy.anti = [(term, Counter(held)) for term, held in self.anti]
        copy.pairs = Counter(self.pairs)
        order, selects = self._next, False
        for other in others:
            for term in other.pod_anti_affinity:
                if term.selects(other.space, pod.space, pod.labels):
                    selects = True
                    domain = domain_of(node, term.topology_key)
                    if domain is not None:
                        key = (term.topology_key, domain)
                        copy.selecting.setdefault(key, []).append((order, other, True))
                        if term.topology_key not in copy.keys:
                            copy.keys.append(term.topology_key)
                    order += 1
        copy._next = order
        copy.applies = self.applies or selects
        for term, held in copy.anti:
            domain = domain_of(node, term.topology_key)
            if domain is not None:
                held[domain] += sum(
                    term.selects(pod.space, other.space, other.labels) for other in others
                )
        together = sum(self._all(other) for other in others)
        if together:
            for term in pod.pod_affinity:
                domain = domain_of(node, term.topology_key)
                if domain is not None:
                    copy.pairs[term.topology_key, domain] += together
        return copy

    def refusal(self, node: Node, gone: Sequence[Task] = ()) -> str | None:
        """Why K5 keeps the pod from ``node`` once its running pods ``gone`` are gone (None:
        it does not): a running pod's anti-affinity first, then the pod's anti-affinity,
        then its affinity."""
        if not self.applies:
            return None
        pod, left = self.pod, {task.id for task in gone}
        first: tuple[int, Any, bool, str] | None = None
        for key in self.keys:
            domain = domain_of(node, key)
            for order, task, waits in self.selecting.get((key, domain), ()) if domain else ():
                if waits or task.id not in left:
                    if first is None or order < first[0]:
                        first = (order, task, waits, key)
                    break
        if first is not None:
            _, task, waits, key = first
            if waits:
                return (
                    f"K5: the waiting pod {task.id}, counted there before it, requires "
                    f"anti-affinity on {key} with this pod in the domain of node {node.id}"
                )
            return (
                f"K5: the running pod {task.id} requires anti-affinity on {key} "
                f"with this pod, and it runs in the domain of node {node.id}"
            )
        for term, held in self.anti:
            domain = domain_of(node, term.topology_key)
            if domain is not None and held[domain] - self._gone(term, gone) > 0:
                return (
                    f"K5: the pod requires anti-affinity on {term.topology_key} with running "
                    f"pods in the domain of node {node.id}"
                )
        if pod.pod_affinity:
            return self.affinity_refusal(node, gone)
        return None

    def _all(self, task: Any) -> bool:
        """Whether every required affinity term of the pod selects ``task``."""
        pod = self.pod
        return all(term.selects(pod.space, task.space, task.labels) for term in pod.pod_affinity)

    def affinity_refusal(self, node: Node, gone: Sequence[Task] = ()) -> str | None:
        """The pod's required affinity on ``node`` once ``gone`` are gone, as kube-scheduler's
        ``satisfyPodAffinity``: the node has every term's key, and each term's domain there
        holds a pod that every term selects; or no such pod runs anywhere and the pod itself
        matches every term (the first pod of a group that selects itself)."""
        pod = self.pod
        lost = sum(self._all(task) for task in gone)
        pairs = self.pairs
        if lost:
            pairs = Counter(pairs)
            for term in pod.pod_affinity:
                domain = domain_of(node, term.topology_key)
                if domain is not None:
                    pairs[term.topology_key, domain] -= lost
        failed = None
        for term in pod.pod_affinity:
            domain = domain_of(node, term.topology_key)
            if domain is None:  # (every key must be on the node, first pod or not)
                return (
                    f"K5: the pod requires affinity on {term.topology_key}, a label node "
                    f"{node.id} does not have"
                )
            if failed is None and pairs[term.topology_key, domain] <= 0:
                failed = term
        if failed is None:
            return None
        if not any(count > 0 for count in pairs.values()) and self._all(pod):
            return None  # the first pod of a group that selects itself goes anywhere
        return (
            f"K5: the pod requires affinity on {failed.topology_key} with running pods "
            f"that are not in the domain of node {node.id}"
        )

    def touches(self, task: Task) -> bool:
        """Whether the running ``task`` counts in a verdict of K5: a term of the pod selects
        it, or its anti-affinity selects the pod."""
        pod = self.pod
        return any(
            term.selects(pod.space, task.space, task.labels)
            for term in (*(term for term, _ in self.anti), *self.affinity)
        ) or any(task is other for found in self.selecting.values() for _, other, _ in found)

    def _gone(self, term: PodAffinityTerm, gone: Sequence[Task]) -> int:
        """How many of the running pods ``gone`` (of one node) ``term`` of the pod selects."""
        pod = self.pod
        return sum(term.selects(pod.space, task.space, task.labels) for task in gone)


def nominated_pods(cluster: Any, asking: str | None, rank: int | None = None) -> list[Any]:
    """K10: the waiting pods nominated to a node (``nominated_node``) that kube-scheduler
    counts there when it judges the waiting pod ``asking`` (``addGENominatedPods``): those
    of its priority (or of ``rank``, an integer priority, when given) and above, not itself.
    A request that stands for no waiting pod and states no rank counts as the lowest
    priority, so every nomination counts against it."""
    views = getattr(cluster, "views", None)
    nominated = None if views is None else views.get(_NOMINATED)
    if nominated is None:
        nominated = [pod for pod in cluster.pending if pod.nominated_node is not None]
        if views is not None:
            views[_NOMINATED] = nominated
    if not nominated:
        return []
    floor: int | None = rank
    if floor is None and asking is not None:
        me = next((pod for pod in cluster.pending if pod.id == asking), None)
        if me is not None:
            floor = priority_value(me.priority, cluster.hp_priority)
    return [
        pod
        for pod in nominated
        if pod.id != asking
        and (floor is None or priority_value(pod.priority, cluster.hp_priority) >= floor)
    ]


def held_by_nominated(cluster: Any, request: Any) -> list[Any]:
    """K10: the waiting pods nominated to a node whose room holds against ``request`` (as
    :func:`nominated_pods`, by its ``pending`` and ``rank``; a request shape: every one)."""
    if not getattr(cluster, "pending", None):
        return []
    pending, rank = getattr(request, "pending", None), getattr(request, "rank", None)
    return nominated_pods(cluster, pending, rank)


def nominated_beside(cluster: Any, pod: Any) -> dict[str, list[Any]]:
    """Per node, the waiting pods nominated there (:func:`nominated_pods`) that count as
    running there when ``pod``, a request that stands for a waiting pod, is judged on that
    node by K5 and K11: kube-scheduler filters a node with them added (and again without;
    the node must pass both). Its ``pending`` and ``rank`` decide which count, as for the
    room they hold (K10); empty for a request shape."""
    if not is_pod(pod):
        return {}
    found: dict[str, list[Any]] = {}
    for other in held_by_nominated(cluster, pod):
        found.setdefault(other.nominated_node, []).append(other)
    return found


class Arrival:
    """K5 then K11 for one waiting ``pod`` (:class:`Terms`, :class:`Spread`), judging one
    node at a time, as the cluster stands or once some of that node's running pods are
    gone: kube-scheduler's preemption filters a node after removing the pods it may stop
    there (``SelectVictimsOnNode``). False when neither rule applies to the pod."""

    def __init__(
        self, cluster: Cluster, pod: Any, beside: dict[str, list[Any]] | None = None
    ) -> None:
        self.terms = Terms(cluster, pod)
        self.spread = Spread(cluster, pod)
        #: per node, the waiting pods nominated there that count as running there when
        #: the node is judged (:func:`nominated_beside`); only where they can change a
        #: verdict: they add pods, which lifts no anti-affinity or spread refusal and
        #: breaks no affinity, so the pod must have anti-affinity or spread constraints,
        #: or one of them anti-affinity
        found = nominated_beside(cluster, pod) if beside is None else beside
        if not (
            pod.pod_anti_affinity
            or getattr(pod, "topology_spread", None)
            or any(other.pod_anti_affinity for pods in found.values() for other in pods)
        ):
            found = {}
        self.beside = found
        self._with: dict[str, tuple[Terms, Spread]] = {}

    @classmethod
    def of(cls, cluster: Cluster, pod: Any) -> Arrival:
        """The judge of ``pod`` in ``cluster``, remembered in the cluster's ``views`` for the
        pods alike (the same namespace, labels, pod terms, spread constraints and placement
        rules: the replicas of one template; and the same waiting pods nominated beside
        it)."""
        views = getattr(cluster, "views", None)
        beside = nominated_beside(cluster, pod)
        if views is None:
            return cls(cluster, pod, beside)
        memo = views.setdefault(_ARRIVAL_JUDGES, {})
        key = (
            term_key(pod),
            placement_key(pod),
            tuple((node, tuple(other.id for other in pods)) for node, pods in beside.items()),
        )
        found = memo.get(key)
        if found is None:
            if len(memo) >= _MAX_SPREAD_VERDICTS:
                memo.clear()
            found = memo[key] = cls(cluster, pod, beside)
        return cast(Arrival, found)

    def __bool__(self) -> bool:
        return bool(self.terms) or bool(self.spread.counted) or bool(self.beside)

    def refusal(self, node: Node, gone: Sequence[Task] = ()) -> str | None:
        """Why K5 or K11 keeps the pod from ``node`` once its running pods ``gone`` are
        gone (K5 said first, as :func:`arrival_refusals`); None: neither does. As
        kube-scheduler filters a node (``RunFilterPluginsWithNominatedPods``), the verdict
        must hold both without and with the waiting pods nominated there counted as
        running there (:attr:`beside`)."""
        why = self.terms.refusal(node, gone) or self.spread.refusal(node, gone)
        if why is not None or node.id not in self.beside:
            return why
        judges = self._with.get(node.id)
        if judges is None:
            others = self.beside[node.id]
            judges = self._with[node.id] = (
                self.terms.plus(node, others),
                self.spread.plus(node, others),
            )
        why = judges[0].refusal(node, gone) or judges[1].refusal(node, gone)
        if why is None:
            return None
        names = ", ".join(other.id for other in self.beside[node.id][:3])
        return f"{why.rstrip('.')} (counting the pods nominated to node {node.id}: {names})"

    def touches(self, task: Task) -> bool:
        """Whether the running ``task`` counts in a verdict: its being gone can change one
        (a pod the pod's terms select, one whose anti-affinity selects the pod, one a
        spread constraint counts)."""
        return self.terms.touches(task) or any(
            task.node in counted.eligible and self.spread.counts(counted.constraint, task)
            for counted in self.spread.counted
        )


__all__ = [
    "Arrival",
    "Spread",
    "Terms",
    "admitted",
    "arrival_refusals",
    "held_by_nominated",
    "nominated_beside",
    "nominated_pods",
    "refusals",
    "spread_refusals",
    "term_refusals",
]
