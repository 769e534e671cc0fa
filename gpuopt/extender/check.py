"""An independent checker of the extender's answers (``models/extender.md``, E2-E6).

It shares no code with the extender's decisions (:mod:`gpuopt.extender.fit`,
:mod:`~gpuopt.extender.scores`, :mod:`~gpuopt.extender.preempt`; it reads the
pod as :mod:`gpuopt.extender.pod` does): a node is
judged by building the cluster model with the pod placed on it and letting
the model's own validation (C3 capacity, C7 GPU shares, K3 node selector and
affinity, K4 extended resources) and the Kubernetes rules of
:mod:`gpuopt.cluster.rules` (K1-K2 :func:`~gpuopt.cluster.rules.refusal`,
K5 :class:`~gpuopt.cluster.rules.PodTerms`) speak, plus C7's rule for a
request (a share fits a GPU with that much left, a whole GPU is one holding
nothing, on the node's GPUs as :func:`~gpuopt.cluster.shares.layout` lays them
out now: running shares never move between GPUs, which the snapshot's
legality alone would allow) and a brute-force search for a GPU set that
meets the pod's bandwidth (N3). Slower than the engine by
orders of magnitude; the tests and ``benchmarks/extender_openb.py`` run it on
every answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuopt.cluster.devicefit import DeviceNode, Selection, claims_fit, device_node
from gpuopt.cluster.interconnect import MAX_TOPOLOGY_GPUS, node_bandwidth
from gpuopt.cluster.model import Cluster, Node, Task, gang_allowance, priority_value
from gpuopt.cluster.rules import PodTerms, budget_allowance, refusal
from gpuopt.cluster.shares import MILLI, layout
from gpuopt.extender.claims import Resolved, resolve
from gpuopt.extender.pod import Ask
from gpuopt.extender.wire import MAX_SCORE
from gpuopt.placement.node.problem import NodeRequest

#: The node the pod waits on while K5 is judged (a move from it to each candidate).
WAITING = "gpuopt.io/waiting"


class Judge:
    """Whether the pod may go on each node of ``cluster`` with ``removed`` tasks stopped."""

    def __init__(self, cluster: Cluster, ask: Ask, removed: Iterable[str] = ()) -> None:
        self.cluster = cluster
        self.ask = ask
        gone = set(removed)
        self.gone = gone
        self._selection: Selection | None = None
        self._resolved: Resolved | None = None  # the pod's claims, found once
        self.tasks = [task for task in cluster.tasks if task.id not in gone]
        self.nodes = {node.id: node for node in cluster.nodes}
        self.on: dict[str, list[Task]] = {}
        for task in self.tasks:
            self.on.setdefault(task.node, []).append(task)
        waiting = Node(id=WAITING, gpus=max(1, ask.gpus), cpus=1e6)
        view = Cluster.model_construct(
            nodes=[*cluster.nodes, waiting], tasks=[*self.tasks, ask.pending.as_task(WAITING)]
        )
        self.terms = PodTerms(view)

    def why_not(self, node_id: str) -> str | None:
        """The first rule placing the pod on ``node_id`` breaks (None: it may go there)."""
        node = self.nodes[node_id]
        pending = self.ask.pending
        why = refusal(node, pending)  # K1-K3
        if why is not None:
            return why
        mine = self.on.get(node_id, [])
        try:  # C3, C7, K3, K4 by the model's own validation of the node with the pod on it
            Cluster(
                nodes=[node],
                tasks=[*mine, self.ask.pending.as_task(node_id)],
                levels=self.cluster.levels,
            )
        except ValueError as exc:
            return f"model: {str(exc).splitlines()[0]}"
        # C7's rule for a request: the node's GPUs as laid out now (the snapshot's legality
        # alone would let the pod in by repacking running shares onto other GPUs)
        devices, _ = layout(node.gpus, mine)
        if self.ask.milli is not None:
            if max(devices.left, default=0) < self.ask.milli:
                return f"C7: no GPU of node {node_id} has {self.ask.milli} thousandths left"
        elif devices.free < self.ask.gpus:
            return f"C3: node {node_id} has {devices.free} free GPUs, not {self.ask.gpus}"
        linked = self.ask.milli is None and self.ask.gpus >= 2 and self.ask.min_bandwidth > 0
        known = node.interconnect is not None or node.bandwidth is not None
        if linked and known and node.gpus <= MAX_TOPOLOGY_GPUS:
            used = [gpu for gpu, left in enumerate(devices.left) if left < MILLI]
            matrix = node_bandwidth(node)
            request = NodeRequest(gpus=self.ask.gpus, min_bandwidth=self.ask.min_bandwidth)
            if _brute_force(matrix, used, request) is None:
                return f"N3: no {self.ask.gpus} free GPUs at {self.ask.min_bandwidth:g} GB/s"
        broken = self.terms.move(pending.id, WAITING, node_id)  # K5
        self.terms.move(pending.id, node_id, WAITING)
        if broken:
            return broken[0]
        return self._devices(node_id)

    def _devices(self, node_id: str) -> str | None:
        """E8: the pod's claims on the node as the snapshot's own pieces read it: the node
        by :func:`~gpuopt.cluster.devicefit.device_node` (no cache), a selection of its
        own, the stopped pods' claims given back."""
        if not self.ask.claim_refs:
            return None
        from gpuopt.extender.state import State

        if self._resolved is None:
            state = State(self.cluster, 0, "check")
            self._resolved = resolve(state, self.ask.pending, self.ask.claim_refs)
        resolved = self._resolved
        if resolved.missing is not None:
            return resolved.missing
        here = device_node(self.cluster, node_id)
        kept = tuple(
            claim
            for claim in here.allocated
            if claim.allocated and (not claim.pods or set(claim.pods) - self.gone)
        )
        if self._selection is None:
            self._selection = Selection(self.cluster.device_classes)
        answer = claims_fit(
            DeviceNode(here.name, here.devices, here.counters, kept),
            resolved.claims,
            self._selection,
        )
        return None if answer.fits else answer.reason or answer.status


def _brute_force(matrix: Sequence[Sequence[float]], used: list[int], request: NodeRequest) -> Any:
    from gpuopt.placement.node.solution import gpus_that_fit as _gpus_that_fit

    return _gpus_that_fit(matrix, used, request)


def filter_violations(
    cluster: Cluster, ask: Ask, names: Sequence[str], result: Mapping[str, Any]
) -> list[str]:
    """Breaches of E2-E4 in an ``ExtenderFilterResult`` for candidates ``names``."""
    found: list[str] = []
    judge = Judge(cluster, ask)
    passed = result.get("NodeNames")
    if passed is None and result.get("Nodes") is not None:
        passed = [item["metadata"]["name"] for item in result["Nodes"].get("items") or []]
    passed = list(passed or [])
    failed = dict(result.get("FailedNodes") or {})
    hard = dict(result.get("FailedAndUnresolvableNodes") or {})
    seen = passed + list(failed) + list(hard)
    if sorted(seen) != sorted(names):
        found.append(
            f"E2: the answer names {len(seen)} nodes ({len(set(seen))} distinct) for "
            f"{len(names)} candidates"
        )
    for name in passed:
        why = judge.why_not(name)
        if why is not None:
            found.append(f"E2: node {name} passed, but {why}")
    for name, said in {**failed, **hard}.items():
        if name not in judge.nodes:
            found.append(f"E2: node {name} is not a candidate")
            continue
        if judge.why_not(name) is None:
            found.append(f"E2: node {name} failed ({said}), but the pod fits there")
    if hard:
        emptied = Judge(cluster, ask, [t.id for t in cluster.tasks if t.node in hard])
        for name in hard:
            if name in emptied.nodes and emptied.why_not(name) is None:
                found.append(
                    f"E3: node {name} is unresolvable ({hard[name]}), but the pod fits there "
                    "once its pods stop"
                )
    return found


def score_violations(names: Sequence[str], result: Sequence[Mapping[str, Any]]) -> list[str]:
    """Breaches of E5's form: one integer score from 0 to 10 per candidate."""
    found = []
    hosts = [entry.get("Host") for entry in result]
    if sorted(map(str, hosts)) != sorted(names):
        found.append(f"E5: {len(hosts)} scores for {len(names)} candidates")
    for entry in result:
        score = entry.get("Score")
        if not isinstance(score, int) or isinstance(score, bool) or not 0 <= score <= MAX_SCORE:
            found.append(f"E5: node {entry.get('Host')} has score {score!r}, not 0 to {MAX_SCORE}")
    return found


def preemption_violations(
    cluster: Cluster,
    ask: Ask,
    proposed: Mapping[str, Sequence[str]],
    result: Mapping[str, Any],
) -> list[str]:
    """Breaches of E6 in an ``ExtenderPreemptionResult`` (``proposed``: node -> victim UIDs
    the scheduler sent): kept nodes were proposed, victims are among the proposed ones,
    below the pod's priority and movable, they make room, none of them is needed, and
    none stops a running gang beyond its allowance that has a member never stopped (P13:
    stopping it there stops every member)."""
    found: list[str] = []
    by_uid = {task.uid: task for task in cluster.tasks if task.uid}
    fixed = cluster.index.fixed
    budgets = budget_allowance(cluster)
    gangs = gang_allowance(cluster)
    for node, entry in (result.get("NodeNameToMetaVictims") or {}).items():
        if node not in proposed:
            found.append(f"E6: node {node} was not proposed")
            continue
        uids = [pod["UID"] for pod in entry.get("Pods") or []]
        if not set(uids) <= set(proposed[node]):
            found.append(f"E6: node {node} names victims the scheduler did not propose")
            continue
        victims = [by_uid[uid] for uid in uids]
        for task in victims:
            if priority_value(task.priority, cluster.hp_priority) >= ask.priority:
                found.append(f"E6: victim {task.id} is not below the pod's priority")
            if task.id in fixed:
                found.append(f"E6: victim {task.id} is never stopped ({fixed[task.id]})")
        why = Judge(cluster, ask, [t.id for t in victims]).why_not(node)
        if why is not None:
            found.append(f"E6: on node {node} the victims do not make room: {why}")
        for task in victims:
            rest = [t.id for t in victims if t is not task]
            if Judge(cluster, ask, rest).why_not(node) is None:
                found.append(f"E6: on node {node} victim {task.id} is not needed")
        ids = {t.id for t in victims}
        for gang, (members, allowed) in gangs.items():
            if len(ids & {t.id for t in members}) <= allowed:
                continue
            for task in members:
                if task.id in fixed or (
                    priority_value(task.priority, cluster.hp_priority) >= ask.priority
                ):
                    found.append(
                        f"E6: on node {node} the victims stop gang {gang} below its "
                        f"min_member, but its member {task.id} is never stopped (P13)"
                    )
                    break
        violations = sum(max(0, len(ids & set(members)) - n) for _, members, n in budgets)
        if entry.get("NumPDBViolations") != violations:
            found.append(
                f"E6: node {node} states {entry.get('NumPDBViolations')} PDB violations, "
                f"not {violations}"
            )
    return found


__all__ = ["Judge", "filter_violations", "preemption_violations", "score_violations"]
