"""From what was read to the cluster: groups settled, over-committed nodes locked, pods pinned.

After every object is read, :func:`finish` drops a legacy anti-affinity group
held twice on a node, locks the nodes whose pods hold more than they have (or
whose pods could not be read), pins the pods that no longer match their node
or that a budget or spread constraint covers, and validates the cluster.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from fractions import Fraction
from typing import TypeVar

from gpuopt.cluster.fields import MAX_RESOURCE, POD_SLOTS
from gpuopt.cluster.kube import affinity_matches, selector_matches
from gpuopt.cluster.model import Cluster, Gang, Node, Pending, Task, scaled
from gpuopt.cluster.shares import gpus_needed, layout, on_sharing_nodes
from gpuopt.errors import ProblemError, validate_object
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.dra_finish import finish_dra
from gpuopt.readers.kubectl.gangs import running_gangs

_P = TypeVar("_P", Task, Pending)


def finish(ctx: Context, name: str, levels: list[str], hp_priority: int) -> Cluster:
    """The cluster: legacy groups, over-committed and misplaced pods settled, then validated."""
    _host_ports(ctx)  # K9, before anything counts resources
    _pod_slots(ctx)  # K12, likewise
    dra = finish_dra(ctx, ctx.tasks, ctx.pending)  # R1-R9: devices on nodes, claims on pods
    tasks = _settle_groups(ctx, dra.tasks)
    nodes = _lock_overcommitted(ctx, tasks)
    settled = []
    for task in tasks:
        node = nodes[task.node]
        if not task.fixed and not (
            selector_matches(task.node_selector, node.labels)
            and affinity_matches(task.node_affinity, node.id, node.labels)
        ):
            error = ProblemError(
                f"pod {task.id!r}: its node {node.id!r} no longer matches its node selector "
                "or required node affinity."
            )
            ctx.problem("misplaced", task.id, error)
            task = task.model_copy(update={"pinned": "misplaced"})
        elif not task.fixed and task.space in ctx.pinned_namespaces:
            task = task.model_copy(update={"pinned": "budget"})
        elif not task.fixed and any(
            space == task.space and selector.matches(task.labels) for space, selector in ctx.spread
        ):
            task = task.model_copy(update={"pinned": "topology-spread"})
        if task.pinned is not None:
            ctx.report.pinned[task.pinned] += 1
        settled.append(task)
    snapshot = {
        "name": name,
        "levels": levels,
        "nodes": list(nodes.values()),
        "tasks": settled,
        "pending": dra.pending,
        "budgets": ctx.budgets,
        "gangs": _gang_levels(ctx, running_gangs(ctx, settled), levels),
        "hp_priority": hp_priority,
        "now": max(ctx.times, default=None),
        "devices": dra.devices,
        "device_classes": dra.device_classes,
        "claims": dra.claims,
    }
    return validate_object(Cluster, snapshot, what="a snapshot", source=None)


def _host_ports(ctx: Context) -> None:
    """K9: a host port is an extended resource (K4) of its own: every running pod that
    binds it holds 1, a waiting pod that binds it asks 1, and every node offers one
    (:func:`~gpuopt.cluster.fields.offered`), or as many as its pods hold, so none is
    over-committed by it. Nodes list the ports their pods hold and those a waiting pod
    asks; a pod read later (the extender's) finds one of any other port on every node.
    Running pods that bind ports are pinned (host-port)."""
    asked = {name for pod in ctx.pending for name in ctx.host_ports.get(pod.id, ())}
    held: defaultdict[str, Counter[str]] = defaultdict(Counter)
    tasks = []
    for task in ctx.tasks:
        ports = ctx.host_ports.get(task.id, set())
        if ports:
            held[task.node].update(ports)
            task = task.model_copy(
                update={"resources": {**task.resources, **dict.fromkeys(sorted(ports), 1)}}
            )
        tasks.append(task)
    ctx.tasks = tasks
    for node_id, node in ctx.nodes.items():
        names = sorted(asked | set(held[node_id]))
        if names:
            offered = {name: max(1, held[node_id][name]) for name in names}
            ctx.nodes[node_id] = node.model_copy(
                update={"resources": {**node.resources, **offered}}
            )
    pending = []
    for pod in ctx.pending:
        ports = ctx.host_ports.get(pod.id, set())
        if ports:
            ctx.note("host-port-pending", pod.id)
            pod = pod.model_copy(update={"resources": {**pod.resources, **dict.fromkeys(ports, 1)}})
        pending.append(pod)
    ctx.pending = pending


def _pod_slots(ctx: Context) -> None:
    """K12: a node's pod-count limit (``status.allocatable.pods``, kube-scheduler's
    NodeResourcesFit "Too many pods") is the extended resource ``pods`` (K4) of its own
    when a plan could reach it: when some node has fewer free pod slots than the pods that
    could come to it (the waiting pods and the running pods of other nodes that may move),
    or as ``pod_slots_on`` says. Then every node offers its limit (a node without one: no
    limit), every
    running pod holds one and every waiting pod asks one; a limit no plan can reach is
    left out (it changes no answer). A node holding more pods than its limit is locked with
    the other over-committed nodes."""
    limits = ctx.pod_limits
    if ctx.pod_slots_on is None:
        running = Counter(task.node for task in ctx.tasks)
        movable = Counter(task.node for task in ctx.tasks if not task.fixed)
        coming = sum(movable.values()) + len(ctx.pending)
        margins = {
            node_id: limit - running[node_id] + movable[node_id] - coming
            for node_id, limit in limits.items()
            if node_id in ctx.nodes
        }
        for node_id, margin in margins.items():
            if margin < 0:  # (fewer free slots than the pods that could come)
                ctx.note("pod-limit", node_id)
        ctx.pod_slot_margin = min(margins.values(), default=None)
        ctx.pod_slots_on = ctx.pod_slot_margin is not None and ctx.pod_slot_margin < 0
    if not ctx.pod_slots_on:
        return
    for node_id, node in ctx.nodes.items():
        offered = limits.get(node_id, MAX_RESOURCE)  # (no limit stated: none)
        ctx.nodes[node_id] = node.model_copy(
            update={"resources": {**node.resources, POD_SLOTS: offered}}
        )
    ctx.tasks = [one_slot(task) for task in ctx.tasks]
    ctx.pending = [one_slot(pod) for pod in ctx.pending]


#: The resources of a pod that asks for no extended resource, once K12 is on (one object
#: for all of them: models are frozen and nothing changes their fields in place).
_SLOT_ONLY = {POD_SLOTS: 1}


def one_slot(pod: _P) -> _P:
    """``pod`` (a task or a waiting pod) holding or asking one pod slot (K12)."""
    if pod.resources.get(POD_SLOTS) == 1:
        return pod
    slots = {**pod.resources, POD_SLOTS: 1} if pod.resources else _SLOT_ONLY
    return pod.model_copy(update={"resources": slots})


def _gang_levels(ctx: Context, gangs: list[Gang], levels: list[str]) -> list[Gang]:
    """R9: a gang keeps its level only when the cluster has it (else reported)."""
    known = {*levels, "node"}
    settled = []
    for gang in gangs:
        if gang.level is not None and gang.level not in known:
            ctx.note("gang-topology", gang.id)
            gang = gang.model_copy(update={"level": None})
        settled.append(gang)
    return settled


def _settle_groups(ctx: Context, tasks: list[Task]) -> list[Task]:
    """At most one pod of a legacy anti-affinity group per node: later ones lose the group."""
    held: set[tuple[str, str]] = set()
    settled = []
    for task in tasks:
        if task.anti_affinity is not None:
            key = (task.anti_affinity, task.node)
            if key in held:
                error = ProblemError(
                    f"pod {task.id!r}: node {task.node!r} already runs a pod of "
                    f"{ctx.options.group_label} group {task.anti_affinity!r}."
                )
                ctx.problem("group-clash", task.id, error)
                task = task.model_copy(update={"anti_affinity": None})
            held.add(key)
        settled.append(task)
    return settled


def _lock_overcommitted(ctx: Context, tasks: Iterable[Task]) -> dict[str, Node]:
    """The nodes, those whose pods hold more than they have (or could not be read) locked."""
    tasks = list(tasks)
    used: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for task in tasks:
        held = used[task.node]
        held["GPUs"] += task.gpus
        held["CPUs"] += scaled(task.cpus)
        held["memory"] += scaled(task.memory or 0)
        held.update(task.resources)
    unpacked = _pack_shares(ctx, tasks, used)
    nodes = dict(ctx.nodes)
    held_bytes: defaultdict[str, Fraction] = defaultdict(Fraction)
    for task in tasks:
        held_bytes[task.node] += ctx.pod_bytes.get(task.id, Fraction(0))
    for node_id, node in ctx.nodes.items():
        allocatable = ctx.memory_bytes.get(node_id)
        rounded = used[node_id]["memory"]
        if (
            node.memory is not None
            and allocatable is not None
            and rounded > scaled(node.memory)
            and held_bytes[node_id] <= allocatable
        ):  # full in bytes, over by rounding: the node is as full as its pods say
            node = node.model_copy(update={"memory": rounded / 1000})
            ctx.nodes[node_id] = nodes[node_id] = node
    for node_id, node in ctx.nodes.items():
        have = {"GPUs": node.gpus, "CPUs": scaled(node.cpus), **node.resources}
        if node.memory is not None:
            have["memory"] = scaled(node.memory)
        over = [
            (key, amount, have.get(key, 0))
            for key, amount in used[node_id].items()
            if amount > have.get(key, 0) and (key != "memory" or node.memory is not None)
        ]
        if over:
            key, amount, limit = over[0]
            unit = 1000 if key in ("CPUs", "memory") else 1  # CPU and memory in thousandths
            error = ProblemError(
                f"node {node_id!r}: its pods hold {amount / unit:g} {key} but it has "
                f"{limit / unit:g}."
            )
            ctx.problem("overcommitted", node_id, error)
        elif node_id in unpacked:
            error = ProblemError(
                f"node {node_id!r}: its GPU shares could not be laid out on its {node.gpus} "
                "GPUs by rule C7."
            )
            ctx.problem("overcommitted", node_id, error)
        elif node_id in ctx.locked_nodes:
            ctx.note("unreadable-pod", node_id)
        else:
            continue
        nodes[node_id] = node.model_copy(update={"locked": True})
    return nodes


def _pack_shares(ctx: Context, tasks: list[Task], used: dict[str, Counter[str]]) -> set[str]:
    """C7: on nodes with GPU shares, the GPUs in use are the shares packed, not one per
    share pod (the cluster's C3 counts the same); returns the nodes whose shares fit in no
    more GPUs than they have yet were not laid out (the exact search's step cap)."""
    unpacked = set()
    for node_id, on_node in on_sharing_nodes(tasks).items():
        node = ctx.nodes.get(node_id)
        if node is None:
            continue
        devices, out = layout(node.gpus, on_node)
        if not out:
            used[node_id]["GPUs"] = devices.used
            continue
        used[node_id]["GPUs"] = gpus_needed(on_node)
        if used[node_id]["GPUs"] <= node.gpus:
            unpacked.add(node_id)
    return unpacked
