"""DRA objects resolved into the cluster: pools, devices on nodes, claims on pods, GPUs.

Rules R1-R9 of ``models/cluster.md``; :func:`finish_dra` applies them once
every object is read, before the cluster's own checks:

1. only the newest generation of each pool counts (R1); a pool with fewer
   slices at that generation than ``resourceSliceCount`` is reported;
2. DeviceTaintRules add their taint to the devices they select;
3. devices go to the node their slice (or, with ``perDeviceNodeSelection``,
   the device) names; a pool reaching several nodes stays on the cluster with
   the nodes it reaches (``nodeSelector``, ``allNodes``);
4. each DeviceClass selects devices by its CEL selectors; an expression that
   cannot be evaluated is reported, and the class is then unknown (R5);
5. a node's GPUs gain its free and wholly held DRA GPUs (R2): a whole GPU a
   MIG placement draws on (counters, R4), a shareable GPU, a tainted free GPU,
   and a GPU held by a claim no bound pod of the node accounts for are not
   offered;
6. a pod's claims give GPU demand where it is unambiguous (R7, R8); every
   other claim is counted, and a bound pod holding devices not read as whole
   GPUs is pinned (``dra-claim``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpuopt.cluster.cel import CelError, DeviceCel
from gpuopt.cluster.devices import (
    DRA_RESOURCE_PREFIX,
    PLUGIN_GPUS,
    CounterSet,
    Device,
    DeviceClass,
    DeviceTaint,
    ResourceClaim,
    amount,
)
from gpuopt.cluster.kube import NodeSelectorTerm, affinity_matches
from gpuopt.cluster.model import Node, Pending, Task
from gpuopt.errors import ProblemError, short
from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.dra_state import SliceRead, TaintRule

#: Taint effects that keep a new claim off a device.
_REFUSING = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class DraFacts:
    """What :func:`finish_dra` gives the cluster."""

    tasks: list[Task]
    pending: list[Pending]
    devices: list[Device]
    device_classes: list[DeviceClass]
    claims: list[ResourceClaim]


def _newest(ctx: Context) -> list[SliceRead]:
    """R1: the slices of each pool's newest generation (older ones are reported)."""
    newest: dict[tuple[str, str], int] = {}
    for found in ctx.dra.slices:
        key = (found.driver, found.pool)
        newest[key] = max(newest.get(key, found.generation), found.generation)
    kept = []
    for found in ctx.dra.slices:
        if found.generation < newest[found.driver, found.pool]:
            ctx.note("dra-stale", found.name)
        else:
            kept.append(found)
    counts = Counter((found.driver, found.pool) for found in kept)
    for found in kept:
        if counts[found.driver, found.pool] < found.slice_count:
            ctx.note("dra-incomplete", found.name)
    ctx.dra.counts["pools"] = len(counts)
    ctx.dra.counts["slices"] = len(kept)
    return kept


class _Selection:
    """Which devices each DeviceClass (and each CEL expression) selects, evaluated once."""

    def __init__(self, ctx: Context, devices: list[Device]) -> None:
        self.ctx = ctx
        self.devices = devices
        self.cel = DeviceCel()
        self.variables = {device.key: device.cel() for device in devices}
        self._classes: dict[str, frozenset[str] | None] = {}
        self.reported: set[tuple[str, str]] = set()
        #: (expression, device key) -> its answer, or why it has none.
        self.results: dict[tuple[str, str], bool | CelError] = {}

    def _answer(self, expression: str, key: str) -> bool | CelError:
        found = self.results.get((expression, key))
        if found is None:
            try:
                found = self.cel.evaluate(expression, self.variables[key])
            except CelError as error:
                found = error
            self.results[expression, key] = found
        return found

    def precompute(self, expressions: Iterable[str]) -> None:
        """Every expression on every device, device by device: the library converts a
        device into its CEL value once for all the expressions."""
        todo = [item for item in dict.fromkeys(expressions)]
        for key in self.variables:
            for expression in todo:
                self._answer(expression, key)

    def expression(self, expression: str, where: str, keys: Iterable[str]) -> set[str] | None:
        """The keys among ``keys`` that ``expression`` selects; None when it cannot be
        evaluated on one of them (reported once, R5)."""
        chosen = set()
        for key in keys:
            error = self._answer(expression, key)
            if error is True:
                chosen.add(key)
            elif isinstance(error, CelError):
                if (where, expression) not in self.reported:
                    self.reported.add((where, expression))
                    problem = ProblemError(
                        f"{where}: CEL selector {short(expression, 160)} cannot be evaluated "
                        f"on device {key} ({error}), so what it selects is unknown."
                    )
                    self.ctx.problem("dra-cel", where, problem)
                return None
        return chosen

    def of_class(self, name: str) -> frozenset[str] | None:
        """The devices DeviceClass ``name`` selects (None: not read, or unknown)."""
        if name in self._classes:
            return self._classes[name]
        found = self.ctx.dra.classes.get(name)
        selected: frozenset[str] | None = None
        if found is not None:
            keys: set[str] | None = set(self.variables)
            for expression in found.selectors:
                assert keys is not None
                keys = self.expression(expression, f"DeviceClass {name}", keys)
                if keys is None:
                    break
            selected = None if keys is None else frozenset(keys)
        self._classes[name] = selected
        return selected


def _taint(
    ctx: Context, rules: list[TaintRule], devices: list[Device], selection: _Selection
) -> list[Device]:
    """Every device with the taints of the DeviceTaintRules that select it."""
    if not rules:
        return devices
    added: defaultdict[str, list[DeviceTaint]] = defaultdict(list)
    for rule in rules:
        keys: set[str] | None = {
            device.key
            for device in devices
            if (rule.driver is None or device.driver == rule.driver)
            and (rule.pool is None or device.pool == rule.pool)
            and (rule.device is None or device.name == rule.device)
        }
        if rule.device_class is not None:
            of_class = selection.of_class(rule.device_class)
            keys = None if of_class is None or keys is None else keys & of_class
        for expression in rule.selectors:
            if keys is not None:
                keys = selection.expression(expression, f"DeviceTaintRule {rule.name}", keys)
        if keys is None:
            ctx.note("dra-taint-rule", rule.name)  # which devices it taints is unknown
            continue
        for key in keys:
            added[key].append(rule.taint)
        ctx.dra.counts["tainted by rules"] += len(keys)
    return [
        device.model_copy(update={"taints": [*device.taints, *added[device.key]]})
        if device.key in added
        else device
        for device in devices
    ]


def _reach(ctx: Context, place: tuple[str, Any], nodes: dict[str, Node]) -> list[str]:
    """The nodes read that a slice's (or device's) place reaches."""
    kind, value = place
    if kind == "node":
        return [value] if value in nodes else []
    if kind == "all":
        return list(nodes)
    terms = [NodeSelectorTerm.model_validate(term) for term in value]
    return [node.id for node in nodes.values() if affinity_matches(terms, node.id, node.labels)]


def _attach(
    ctx: Context, slices: list[SliceRead]
) -> tuple[dict[str, list[Device]], dict[str, list[CounterSet]], list[Device]]:
    """R1, R4: each node's devices and counter sets, and the devices of pools that reach
    several nodes (with the nodes they reach)."""
    on_node: defaultdict[str, list[Device]] = defaultdict(list)
    counters: defaultdict[str, list[CounterSet]] = defaultdict(list)
    shared: list[Device] = []
    seen: set[str] = set()
    for found in slices:
        for device in found.devices:
            if device.key in seen:  # R1: a device is named once in its pool
                ctx.problem(
                    "dra-duplicate-device",
                    device.key,
                    ProblemError(
                        f"ResourceSlice {found.name!r}: device {device.key!r} is published "
                        "twice in its pool (two slices of its newest generation name it)."
                    ),
                )
                continue
            seen.add(device.key)
            place = found.device_places.get(device.name, found.place)
            if place[0] == "node":
                if place[1] in ctx.nodes:
                    on_node[place[1]].append(device)
                else:
                    ctx.note("dra-unknown-node", device.key)
                continue
            reach = _reach(ctx, place, ctx.nodes)
            shared.append(device.model_copy(update={"nodes": reach}))
            ctx.note("dra-shared-device", device.key)
        if found.place[0] == "node" and found.place[1] in ctx.nodes:
            counters[found.place[1]].extend(found.counters)
        elif found.counters:
            ctx.dra.counts["unmodelled:sharedCounters of pools on several nodes"] += 1
    return on_node, counters, shared


def resolve_claims(ctx: Context, pods: Iterable[Task | Pending]) -> dict[str, list[str]]:
    """R7: every pod's claims by id; the claim a waiting pod's template will make is made
    here from the template (``template`` set). Adds the pods to each claim's users."""
    dra = ctx.dra
    by_pod: dict[str, list[str]] = {}
    users: defaultdict[str, list[str]] = defaultdict(list)
    for pod in pods:
        refs = dra.pod_claims.get(pod.id)
        if not refs:
            continue
        claims = []
        for ref in refs:
            if ref.claim is not None and ref.claim in dra.claims:
                claims.append(ref.claim)
            elif ref.claim is None and ref.template is not None and isinstance(pod, Pending):
                template = dra.templates.get(ref.template)
                if template is None:
                    ctx.note("dra-template-unread", pod.id)
                    claims.append("")
                    continue
                made = f"{pod.id}-{ref.name}"  # Kubernetes adds a random suffix
                dra.claims[made] = template.model_copy(
                    update={"id": made, "template": ref.template.partition("/")[2]}
                )
                claims.append(made)
            else:
                ctx.note("dra-claim-unread", pod.id)
                claims.append("")
                continue
            users[claims[-1]].append(pod.id)
        by_pod[pod.id] = claims
    for claim_id, pod_ids in users.items():
        claim = dra.claims[claim_id]
        named = [*claim.pods, *(pod for pod in pod_ids if pod not in claim.pods)]
        dra.claims[claim_id] = claim.model_copy(update={"pods": named})
    return by_pod


class _Gpus:
    """R2, R7: which classes are whole-GPU classes and how many GPUs a claim asks for."""

    def __init__(self, ctx: Context, selection: _Selection, kinds: Mapping[str, str]) -> None:
        self.ctx = ctx
        self.selection = selection
        self.kinds = kinds
        self._whole: dict[str, bool] = {}

    def whole_gpu_class(self, name: str) -> bool:
        """:meth:`_whole_gpu_class`, remembered."""
        if name not in self._whole:
            self._whole[name] = self._whole_gpu_class(name)
        return self._whole[name]

    def _whole_gpu_class(self, name: str) -> bool:
        """A class whose devices are whole GPUs: every device it selects is one (and it
        selects some, or serves a GPU extended resource such as ``nvidia.com/gpu``)."""
        found = self.ctx.dra.classes.get(name)
        if found is None:
            return False
        selected = self.selection.of_class(name)
        if selected is None:
            return False
        if selected:
            return all(self.kinds[key] == "gpu" for key in selected)
        extended = found.extended_resource_name
        return extended is not None and self.ctx.options.is_gpu(extended)

    def whole_gpu_classes(self, device: str) -> list[str]:
        """The whole-GPU classes that select ``device``."""
        return [
            name
            for name in self.ctx.dra.classes
            if self.whole_gpu_class(name) and device in (self.selection.of_class(name) or ())
        ]

    def asked(self, claim: ResourceClaim) -> Counter[str] | None:
        """R7: the whole GPUs ``claim`` asks for, by class, or None when that is not
        unambiguous (MIG, shares, other devices, ``All``, alternatives that differ in class
        or count, unknown classes)."""
        total: Counter[str] = Counter()
        for request in claim.requests:
            asks = set()
            for alternative in request.alternatives:
                if (
                    alternative.allocation_mode != "ExactCount"
                    or alternative.capacity
                    or alternative.admin_access
                    or not self.whole_gpu_class(alternative.device_class)
                ):
                    return None
                asks.add((alternative.device_class, alternative.count))
            if len(asks) != 1:
                return None
            device_class, count = asks.pop()
            total[device_class] += count
        return total


def _consumed(
    claims: Iterable[ResourceClaim], devices: dict[str, Device]
) -> Counter[tuple[str, str, str, str]]:
    """R4: (driver, pool, counter set, counter) -> what the allocated devices draw."""
    drawn: Counter[tuple[str, str, str, str]] = Counter()
    seen = set()
    for claim in claims:
        for result in claim.allocated or ():
            device = devices.get(result.key)
            if device is None or result.key in seen:
                continue
            seen.add(result.key)
            for consumption in device.consumes_counters:
                for counter, text in consumption.counters.items():
                    key = (device.driver, device.pool, consumption.counter_set, counter)
                    drawn[key] += amount(text)  # type: ignore[assignment]
    return drawn


def finish_dra(ctx: Context, tasks: list[Task], pending: list[Pending]) -> DraFacts:
    """R1-R9 applied: devices on nodes, node GPUs, pods' GPU demand from claims, pins."""
    dra = ctx.dra
    ctx.report.dra = dra.counts  # the report says what was counted, during the read too
    if not (dra.slices or dra.classes or dra.claims or dra.templates or dra.pod_claims) and not (
        dra.locked_nodes
    ):
        return DraFacts(tasks, pending, [], [], [])
    slices = _newest(ctx)
    on_node, counter_sets, shared = _attach(ctx, slices)
    every = [device for devices in on_node.values() for device in devices] + shared
    selection = _Selection(ctx, every)  # taints do not change what CEL sees of a device
    claims_of = resolve_claims(ctx, [*tasks, *pending])
    selection.precompute(
        [
            *(expression for item in dra.classes.values() for expression in item.selectors),
            *(expression for rule in dra.taint_rules for expression in rule.selectors),
            *(
                expression
                for claim in dra.claims.values()
                for request in claim.requests
                for alternative in request.alternatives
                for expression in alternative.selectors
            ),
        ]
    )
    every = _taint(ctx, dra.taint_rules, every, selection)
    by_key = {device.key: device for device in every}
    kinds = {key: device.kind for key, device in by_key.items()}
    for kind, count in Counter(kinds.values()).items():
        dra.counts[f"devices:{kind}"] = count
    gpus = _Gpus(ctx, selection, kinds)
    for name in dra.classes:
        selection.of_class(name)  # every class's expressions evaluated (and reported) once
    claims = dra.claims
    evaluable: set[tuple[str, str]] = set()  # (expression, class) found evaluable
    for claim in claims.values():
        for request in claim.requests:
            for alternative in request.alternatives:
                for expression in alternative.selectors:  # R5: reported when not evaluable
                    pair = (expression, alternative.device_class)
                    if pair in evaluable:
                        continue
                    of_class = selection.of_class(alternative.device_class) or ()
                    where = f"ResourceClaim {claim.id}"
                    if selection.expression(expression, where, of_class) is not None:
                        evaluable.add(pair)
    node_of = {task.id: task.node for task in tasks}
    # R8: the devices each bound pod accounts for as whole GPUs (a claim's GPUs count once,
    # on its first pod), and the pods that hold other devices
    accounted: defaultdict[str, set[str]] = defaultdict(set)
    extra_gpus: Counter[str] = Counter()
    held_by: defaultdict[str, list[str]] = defaultdict(list)  # task -> whole GPUs it holds
    pins: set[str] = set()
    local = {node_id: {device.key for device in devices} for node_id, devices in on_node.items()}
    for task in tasks:
        if any(ref.template is None for ref in dra.pod_claims.get(task.id, ())):
            # a claim made apart from the pod stays allocated on this node's devices: the pod
            # recreated elsewhere would wait for them (a template's claim goes with its pod)
            pins.add(task.id)
        for claim_id in claims_of.get(task.id, ()):
            held = claims.get(claim_id)
            if held is None or held.allocated is None:
                pins.add(task.id)
                if claim_id:  # an unread claim was noted when it was looked for
                    ctx.note("dra-unallocated", task.id)
                continue
            whole = [
                result.key
                for result in held.allocated
                if kinds.get(result.key) == "gpu" and result.key in local.get(task.node, ())
            ]
            first = next((pod for pod in held.pods if pod in node_of), task.id)
            if first == task.id:
                accounted[task.node].update(whole)
                extra_gpus[task.id] += len(whole)
                held_by[task.id].extend(whole)
            plain = (
                not any(
                    alternative.selectors
                    for request in held.requests
                    for alternative in request.alternatives
                )
                and not held.constraints
                and gpus.asked(held) is not None  # every request a whole-GPU class's
            )
            if len(whole) < len(held.allocated) or len(held.pods) > 1 or not plain:
                pins.add(task.id)
        extended = claims.get(dra.extended_claims.get(task.id, ""))
        if extended is not None:  # its request counts the GPUs; the devices are its own
            ctx.note("dra-extended", task.id)
            whole = [
                result.key
                for result in extended.allocated or ()
                if kinds.get(result.key) == "gpu" and result.key in local.get(task.node, ())
            ]
            accounted[task.node].update(whole)
            held_by[task.id].extend(whole)
    drawn = _consumed(claims.values(), by_key)
    allocated = {result.key for claim in claims.values() for result in claim.allocated or ()}
    nodes = {}
    plugin = {node_id: node.gpus for node_id, node in ctx.nodes.items()}  # a device plugin's
    for node_id, node in ctx.nodes.items():
        devices = [by_key[device.key] for device in on_node.get(node_id, ())]
        sets = counter_sets.get(node_id, [])
        if not devices and not sets and node_id not in dra.locked_nodes:
            continue
        offered = 0
        by_class: Counter[str] = Counter()
        capacity = {
            (found.driver, found.pool, found.name, counter): amount(text)
            for found in sets
            for counter, text in found.counters.items()
        }
        for device in devices:
            if device.kind != "gpu":
                continue
            if device.key in accounted[node_id]:
                offered += 1
                by_class.update(gpus.whole_gpu_classes(device.key))
            elif device.key in allocated:
                ctx.note("dra-held-unread", device.key)
            elif any(
                drawn[key] + amount(text) > capacity.get(key, Fraction(0))
                for consumption in device.consumes_counters
                for counter, text in consumption.counters.items()
                for key in [(device.driver, device.pool, consumption.counter_set, counter)]
            ):
                ctx.note("dra-cut", device.key)  # R4: a MIG placement draws on it
            elif any(taint.effect in _REFUSING for taint in device.taints):
                ctx.note("dra-tainted", device.key)
            else:
                offered += 1
                by_class.update(gpus.whole_gpu_classes(device.key))
        dra.counts["gpus offered"] += offered
        update: dict[str, Any] = {"devices": devices, "counters": sets, "gpus": node.gpus + offered}
        if node_id in dra.locked_nodes:
            update["locked"] = True
        if by_class:  # R2: what each whole-GPU class can still serve here (K4 keeps it)
            update["resources"] = {**node.resources, **_class_resources(by_class)}
        nodes[node_id] = node.model_copy(update=update)
    ctx.nodes.update(nodes)
    serves_gpus = bool(dra.extended_claims) or any(  # a claim made for it shows it served
        item.extended_resource_name is not None and ctx.options.is_gpu(item.extended_resource_name)
        for item in dra.classes.values()
    )
    # R2: with no DeviceClass serving the GPU extended resource, a pod asking it takes only a
    # device plugin's GPUs: those are counted apart (PLUGIN_GPUS), on nodes and on pods
    apart = not serves_gpus and any(
        device.kind == "gpu" for node in nodes.values() for device in node.devices
    )
    if apart:
        for node_id, node in nodes.items():
            if any(device.kind == "gpu" for device in node.devices):
                ctx.note("dra-plugin-apart", node_id)
        for node_id, count in plugin.items():
            if count:
                node = ctx.nodes[node_id]
                resources = {**node.resources, PLUGIN_GPUS: count}
                ctx.nodes[node_id] = node.model_copy(update={"resources": resources})
    # R7: demand of waiting pods and of bound pods
    settled_tasks = []
    for task in tasks:
        update = {}
        if extra_gpus[task.id]:
            update["gpus"] = task.gpus + extra_gpus[task.id]
        if held_by[task.id]:
            classes = Counter(
                name for key in held_by[task.id] for name in gpus.whole_gpu_classes(key)
            )
            update["resources"] = {**task.resources, **_class_resources(classes)}
        if task.id in pins and task.pinned is None:
            update["pinned"] = "dra-claim"
        if claims_of.get(task.id):
            dra.counts["pods with claims"] += 1
            if task.id not in pins:
                dra.counts["pods mapped to GPUs"] += 1
            else:
                ctx.report.unmodelled["resource-claims"] += 1
        if apart and task.gpus:
            _plugin_gpus(ctx, task, update)
        settled_tasks.append(task.model_copy(update=update) if update else task)
    settled_pending = []
    for item in pending:
        if apart and item.gpus:
            plugin_update: dict[str, Any] = {}
            _plugin_gpus(ctx, item, plugin_update)
            item = item.model_copy(update=plugin_update) if plugin_update else item
        ids = claims_of.get(item.id)
        if not ids:
            settled_pending.append(item)
            continue
        dra.counts["pods with claims"] += 1
        asked = [gpus.asked(claims[claim_id]) if claim_id in claims else None for claim_id in ids]
        if any(count is None for count in asked):
            ctx.report.unmodelled["resource-claims"] += 1
        else:
            dra.counts["pods mapped to GPUs"] += 1
            if any(_narrowed(claims[claim_id]) for claim_id in ids):
                # which GPUs may serve it is narrower than its count says (next: device fit)
                dra.counts["unmodelled:selectors or constraints of waiting GPU claims"] += 1
        by_class = sum((count for count in asked if count is not None), Counter())
        if by_class:
            resources = {**item.resources, **_class_resources(by_class)}
            update = {"gpus": item.gpus + sum(by_class.values()), "resources": resources}
            item = item.model_copy(update=update)
        settled_pending.append(item)
    _count_claims(ctx, claims.values(), kinds)
    return DraFacts(
        tasks=settled_tasks,
        pending=settled_pending,
        devices=[by_key[device.key] for device in shared],
        device_classes=list(dra.classes.values()),
        claims=list(claims.values()),
    )


def _plugin_gpus(ctx: Context, pod: Task | Pending, update: dict[str, Any]) -> None:
    """R2: the device plugin's GPUs a pod asks (before its claims' are added), counted
    apart. A share of a GPU is not: it is noted, and may still be placed on a DRA node."""
    if pod.gpu_milli is not None:
        ctx.note("dra-plugin-share", pod.id)
        return
    resources = update.get("resources", pod.resources)
    update["resources"] = {**resources, PLUGIN_GPUS: pod.gpus}


def _narrowed(claim: ResourceClaim) -> bool:
    """Whether a claim's selectors, constraints or tolerations narrow the devices it takes."""
    return bool(claim.constraints) or any(
        alternative.selectors or alternative.tolerations
        for request in claim.requests
        for alternative in request.alternatives
    )


def _class_resources(counts: Mapping[str, int]) -> dict[str, int]:
    """R2, R7: whole GPUs of DeviceClasses as extended resources (``dra.gpuopt.io/<class>``),
    so that a pod whose claim asks a class goes only where that class has free GPUs."""
    return {f"{DRA_RESOURCE_PREFIX}{name}": count for name, count in counts.items() if count}


def _count_claims(ctx: Context, claims: Iterable[ResourceClaim], kinds: Mapping[str, str]) -> None:
    """The report's counts of claims and of what they hold."""
    counts = ctx.dra.counts
    for claim in claims:
        if claim.template is not None:
            counts["claims to be made from templates"] += 1
        elif claim.allocated is None:
            counts["claims waiting"] += 1
        else:
            counts["claims allocated"] += 1
        for result in claim.allocated or ():
            counts[f"allocated:{kinds.get(result.key, 'unread')}"] += 1
