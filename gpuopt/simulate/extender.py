"""The scheduler extender driven by the openb trace, every answer checked (issue 19).

The openb GPU nodes, empty, are the snapshot of an extender served in-process
(``gpuopt.extender.app.create_app`` over httpx's ASGI transport; no socket).
The pods of the trace arrive in creation order as ``v1.Pod`` objects (whole
GPUs as ``nvidia.com/gpu``, a share of one GPU as ``alibabacloud.com/gpu-milli``,
``cpu`` in millicores, ``memory`` in MiB, ``gpu_spec`` as a node selector on
``gpu_model`` or, for several models, a required node affinity ``In``,
``spec.priority`` 1000 for qos LS and Guaranteed and 0 otherwise). Pods whose
``deletion_time`` has come end before the next arrival (``Extender.forget``;
:mod:`gpuopt.simulate.events`, ends before arrivals at equal times); with
``keep`` every pod stays for good, as the FGD simulator does, so that the
cluster fills up. For each pod:

1. ``POST /filter`` with every node's name; the answer is checked by
   ``gpuopt.extender.check.filter_violations`` against the cluster of that
   moment: every passed node (or, with ``check_passed`` K, a seeded sample
   of K of them, the bound node among them) and every failed one (or a seeded
   sample of ``check_nodes`` of them): the checker builds the cluster model
   per node, so a check of every node costs about 0.1-0.5 s per pod;
2. ``POST /prioritize`` with the passed nodes (``score_violations``); the pod
   is bound to the highest score, the first on ties (``Extender.assume``);
3. a pod no node passes is unplaced; when its priority is high, ``POST
   /preempt`` proposes, on up to ``preempt_nodes`` of the nodes that failed
   it (not the unresolvable ones), every lower-priority pod there as victims;
   the answer is checked by ``preemption_violations`` (every node it keeps,
   or a sample of ``check_nodes``, the chosen one among them), and the pod
   is bound to the agreed node kube-scheduler would pick (fewest PDB
   violations, lowest highest victim priority, lowest priority sum, fewest
   victims, first), whose victims end (counted as evicted).

:func:`run_harness` returns a :class:`HarnessResult`: pods, placed, unplaced,
preemptions, checker violations, filter and prioritize latency (in-process,
request to parsed answer), GPU allocation (thousandths of all GPUs held) at
the end and at its peak, wall time. ``benchmarks/extender_openb.py`` is its
command line.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from gpuopt.cluster.model import Cluster, Node, Task, priority_value
from gpuopt.cluster.shares import MILLI
from gpuopt.extender.app import create_app
from gpuopt.extender.check import filter_violations, preemption_violations, score_violations
from gpuopt.extender.engine import Extender
from gpuopt.extender.pod import Ask
from gpuopt.readers.openb import (
    MODEL_LABEL,
    OpenbPod,
    read_openb_nodes,
    read_openb_pods,
    trace_pods,
)
from gpuopt.simulate.events import ARRIVAL, END, Event, EventQueue, Simulation, run_async
from gpuopt.simulate.pods import trace_workload

#: The pods' namespace (the reader's task id is ``"openb/<name>"``).
NAMESPACE = "openb"
#: ``spec.priority`` of qos LS and Guaranteed pods (the others get 0); the cluster model's
#: default ``hp_priority``, so they are its HP class too.
HIGH_PRIORITY = 1000
HIGH_QOS = frozenset({"LS", "Guaranteed"})
GPU_RESOURCE = "nvidia.com/gpu"
GPU_MILLI_RESOURCE = "alibabacloud.com/gpu-milli"
#: kube-scheduler's minCandidateNodesAbsolute: nodes proposed per preemption by default.
PREEMPT_NODES = 100
#: Violations kept (and printed) in full.
KEEP_VIOLATIONS = 20


def openb_cluster(nodes_csv: str | Path) -> Cluster:
    """The openb nodes as a cluster with no tasks (``read_openb_nodes``, plus ``gpu_model``)."""
    nodes = []
    for row in read_openb_nodes(nodes_csv):
        model = row["labels"].get(MODEL_LABEL)
        nodes.append(Node(**row, gpu_model=model or None))
    return Cluster(nodes=nodes)


def pod_uid(name: str) -> str:
    """A stable ``metadata.uid`` for the pod ``name``."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"openb/{name}"))


def pod_object(pod: OpenbPod) -> dict[str, Any]:
    """The trace's pod as a pending ``v1.Pod`` (see the module docstring)."""
    requests = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    if pod.fractional:
        requests[GPU_MILLI_RESOURCE] = str(pod.gpu_milli)
    elif pod.gpus > 0:
        requests[GPU_RESOURCE] = str(pod.gpus)
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "openb", "resources": {"requests": requests}}],
        "priority": HIGH_PRIORITY if pod.qos in HIGH_QOS else 0,
    }
    if len(pod.spec) == 1:
        spec["nodeSelector"] = {MODEL_LABEL: pod.spec[0]}
    elif pod.spec:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": MODEL_LABEL, "operator": "In", "values": list(pod.spec)}
                            ]
                        }
                    ]
                }
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": NAMESPACE,
            "uid": pod_uid(pod.name),
            "resourceVersion": "1",
            "labels": {"app": "openb", "qos": pod.qos or "none"},
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def bound_task(ask: Ask, node: str, start: float) -> Task:
    """The pod read by the extender, running on ``node`` since ``start``."""
    return ask.pending.as_task(node, start_time=max(0.0, start))


def held_milli(task: Task) -> int:
    """Thousandths of GPUs ``task`` holds."""
    return task.gpus * MILLI if task.gpu_milli is None else task.gpu_milli


@dataclass
class HarnessResult:
    """What one run did and found."""

    pods: int
    nodes: int
    gpus: int
    check: str
    keep: bool
    placed: int = 0
    unplaced: int = 0
    departed: int = 0
    preempt_requests: int = 0
    preempt_nodes_proposed: int = 0
    preempt_nodes_agreed: int = 0
    victims_proposed: int = 0
    victims_agreed: int = 0
    preempted_placed: int = 0
    evicted: int = 0
    nodes_checked: int = 0
    violation_count: int = 0
    violations: list[str] = field(default_factory=list)
    #: violation counts by kind (the sentence with names and numbers blanked)
    violation_kinds: dict[str, int] = field(default_factory=dict)
    filter_ms: list[float] = field(default_factory=list, repr=False)
    prioritize_ms: list[float] = field(default_factory=list, repr=False)
    preempt_ms: list[float] = field(default_factory=list, repr=False)
    check_seconds: float = 0.0
    gpu_allocation_end: float = 0.0
    gpu_allocation_peak: float = 0.0
    final_cluster_valid: bool = True
    wall_seconds: float = 0.0

    def violate(self, found: Sequence[str], where: str) -> None:
        self.violation_count += len(found)
        for line in found:
            rule, _, sentence = line.partition(": ")
            kind = f"{rule}: {_KIND.sub('#', sentence)[:120]}"
            self.violation_kinds[kind] = self.violation_kinds.get(kind, 0) + 1
            if len(self.violations) < KEEP_VIOLATIONS:
                self.violations.append(f"{where}: {line}")

    def summary(self) -> dict[str, Any]:
        """The figures (latencies as median and p99 in ms), without the raw samples."""
        out = {
            k: v
            for k, v in asdict(self).items()
            if k not in ("filter_ms", "prioritize_ms", "preempt_ms")
        }
        for name in ("filter_ms", "prioritize_ms", "preempt_ms"):
            samples: list[float] = getattr(self, name)
            verb = name.removesuffix("_ms")
            out[f"{verb}_requests"] = len(samples)
            out[f"{verb}_ms_median"] = round(statistics.median(samples), 3) if samples else None
            out[f"{verb}_ms_p99"] = round(_quantile(samples, 0.99), 3) if samples else None
        return out


#: What :meth:`HarnessResult.violate` blanks: names, numbers (not rule labels), quoted values.
_KIND = re.compile(
    r"(?<=\bnode )[^\s,:()]+|(?<=\btask )[^\s,:()]+|(?<=\bvictim )[^\s,:()]+"
    r"|openb[\w/.-]*|\b\d[\d,]*(\.\d+)?\b|'[^']*'"
)


def _quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def _check_words(check_nodes: int | None, check_passed: int | None) -> str:
    if check_nodes is None and check_passed is None:
        return "every node"
    passed = "every passed node" if check_passed is None else f"{check_passed} passed nodes"
    failed = "every failed node" if check_nodes is None else f"{check_nodes} failed nodes"
    return f"{passed} (the bound one among them) + {failed} per pod"


async def _post(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> tuple[Any, float]:
    content = json.dumps(body, separators=(",", ":")).encode()
    started = time.perf_counter()
    response = await client.post(
        path, content=content, headers={"content-type": "application/json"}
    )
    answer = response.json() if response.status_code == 200 else None
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{path} answered {response.status_code}: {response.text.strip()}")
    return answer, elapsed


@dataclass(frozen=True)
class HarnessOptions:
    """How :func:`run_harness` drives and checks the extender (module docstring).

    Attributes
    ----------
    pods
        The first ``pods`` pods in creation order arrive (None: all).
    check_nodes
        Check a seeded sample of this many failed nodes per answer (None: every one).
    check_passed
        Check a seeded sample of this many passed nodes, the bound one among
        them (None: every passed node); at least 1.
    keep
        No pod leaves (the FGD simulator's protocol).
    preempt
        Ask ``/preempt`` for high-priority pods no node passes.
    preempt_nodes
        Nodes proposed per preemption.
    seed
        Seed of the check samples.
    fgd
        Score with FGD's fragmentation for the trace's workload too.
    """

    pods: int | None = 2000
    check_nodes: int | None = None
    check_passed: int | None = None
    keep: bool = False
    preempt: bool = True
    preempt_nodes: int = PREEMPT_NODES
    seed: int = 0
    fgd: bool = False


class _ExtenderReplay(Simulation):
    """The harness on :func:`~gpuopt.simulate.events.run_async`: pods arrive (subject: their
    arrival number) and end (subject: their task id); at equal times ends come first.

    The replay stops with the last arrival: pods still running then do not end.
    """

    def __init__(
        self,
        cluster: Cluster,
        pods: list[OpenbPod],
        options: HarnessOptions,
        workload: Any,
        progress: Callable[[int, HarnessResult], None] | None,
    ) -> None:
        super().__init__(EventQueue(order=(END, ARRIVAL)))
        self.pods, self.options, self.progress = pods, options, progress
        self.pod_clock = 0.0  # the extender's clock: the creation time of the last arrival
        self.extender = Extender(
            cluster, workload=workload, now=lambda: self.pod_clock, source="openb"
        )
        self.names = [node.id for node in cluster.nodes]
        self.rng = random.Random(options.seed)
        self.total_milli = sum(node.gpus for node in cluster.nodes) * MILLI
        self.result = HarnessResult(
            pods=len(pods),
            nodes=len(self.names),
            gpus=self.total_milli // MILLI,
            check=_check_words(options.check_nodes, options.check_passed),
            keep=options.keep,
        )
        self.running: dict[str, Task] = {}
        self.held = 0
        self.last_created = max((pod.created for pod in pods), default=-math.inf)
        self.client: httpx.AsyncClient | None = None
        for arrival, pod in enumerate(pods):
            self.queue.push(pod.created, ARRIVAL, arrival, tie=(arrival,))

    async def post(self, path: str, body: dict[str, Any]) -> tuple[Any, float]:
        """The extender's answer to ``body`` at ``path`` and the milliseconds it took."""
        assert self.client is not None
        return await _post(self.client, path, body)

    def end(self, task_id: str) -> None:
        """Pod ``task_id`` leaves the extender's cluster."""
        self.extender.forget(task_id)
        self.held -= held_milli(self.running.pop(task_id))

    def bind(self, task: Task, deleted: float, arrival: int) -> None:
        """Pod ``task`` runs where it was bound, until ``deleted`` (not with ``keep``)."""
        self.extender.assume(task)
        self.running[task.id] = task
        self.held += held_milli(task)
        result = self.result
        result.gpu_allocation_peak = max(result.gpu_allocation_peak, self.held / self.total_milli)
        if not self.options.keep and math.isfinite(deleted) and deleted <= self.last_created:
            self.queue.push(deleted, END, task.id, tie=(arrival, task.id))

    def on_end(self, event: Event) -> bool:
        if event.subject in self.running:  # not evicted meanwhile
            self.end(event.subject)
            self.result.departed += 1
        return False

    async def on_arrival(self, event: Event) -> bool:
        """Filter, prioritize and bind pod ``event.subject`` (or preempt for it), checking."""
        arrival, result = event.subject, self.result
        pod = self.pods[arrival]
        self.pod_clock = pod.created
        obj = pod_object(pod)
        where = f"pod {pod.name}"
        state = self.extender.state
        assert state is not None
        before = state.cluster
        answer, ms = await self.post("/filter", {"Pod": obj, "NodeNames": self.names})
        result.filter_ms.append(ms)
        ask = self.extender.ask(obj, state)
        passed: list[str] = list(answer.get("NodeNames") or [])
        chosen: str | None = None
        if passed:
            scores, ms = await self.post("/prioritize", {"Pod": obj, "NodeNames": passed})
            result.prioritize_ms.append(ms)
            result.violate(score_violations(passed, scores), where)
            chosen = max(scores, key=lambda entry: entry["Score"])["Host"]  # first on ties
        self.check_filter(before, ask, answer, chosen, where)
        if chosen is not None:
            self.bind(bound_task(ask, chosen, pod.created), pod.deleted, arrival)
            result.placed += 1
        else:
            result.unplaced += 1
            if self.options.preempt and ask.priority > 0:
                failed: dict[str, str] = dict(answer.get("FailedNodes") or {})
                await self.preempt(obj, ask, failed, arrival, where)
        if self.progress is not None:
            self.progress(arrival + 1, result)
        return False

    def check_filter(
        self, before: Cluster, ask: Ask, answer: Any, chosen: str | None, where: str
    ) -> None:
        """Check the filter's answer on every node, or on the seeded samples (step 1)."""
        result, names, options = self.result, self.names, self.options
        passed: list[str] = list(answer.get("NodeNames") or [])
        failed: dict[str, str] = dict(answer.get("FailedNodes") or {})
        hard: dict[str, str] = dict(answer.get("FailedAndUnresolvableNodes") or {})
        started = time.perf_counter()
        if options.check_nodes is None and options.check_passed is None:
            checked_names, checked = names, answer
        else:
            seen = passed + list(failed) + list(hard)
            if len(seen) != len(set(seen)) or set(seen) != set(names):
                result.violate(
                    [f"E2: the answer names {len(seen)} nodes for {len(names)} candidates"],
                    where,
                )
            rest = sorted([*failed, *hard])
            if options.check_nodes is not None:
                rest = self.rng.sample(rest, min(options.check_nodes, len(rest)))
            keep_passed = passed
            if options.check_passed is not None and len(passed) > options.check_passed:
                others = [name for name in passed if name != chosen]
                keep_passed = [*self.rng.sample(others, options.check_passed - 1), str(chosen)]
            sample = {*rest, *keep_passed}
            checked = {
                "NodeNames": [name for name in passed if name in sample],
                "FailedNodes": {k: v for k, v in failed.items() if k in sample},
                "FailedAndUnresolvableNodes": {k: v for k, v in hard.items() if k in sample},
            }
            checked_names = [name for name in names if name in sample]
        result.nodes_checked += len(checked_names)
        result.violate(filter_violations(before, ask, checked_names, checked), where)
        result.check_seconds += time.perf_counter() - started

    def proposal(self, ask: Ask, failed: dict[str, str]) -> dict[str, list[str]]:
        """Every lower-priority pod (by UID) of up to ``preempt_nodes`` failed nodes."""
        state = self.extender.state
        assert state is not None
        hp = state.cluster.hp_priority
        proposed: dict[str, list[str]] = {}
        for name in failed:  # the answer's order: the candidates' order
            victims = [
                task.uid
                for task in state.on_node[state.node_pos[name]]
                if task.uid and priority_value(task.priority, hp) < ask.priority
            ]
            if victims:
                proposed[name] = victims
                if len(proposed) >= self.options.preempt_nodes:
                    break
        return proposed

    async def preempt(
        self, obj: dict[str, Any], ask: Ask, failed: dict[str, str], arrival: int, where: str
    ) -> None:
        """Propose every lower-priority pod of the failed nodes as victims (step 3)."""
        state, result = self.extender.state, self.result
        assert state is not None
        cluster = state.cluster
        proposed = self.proposal(ask, failed)
        if not proposed:
            return
        body = {
            "Pod": obj,
            "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}
                for node, uids in proposed.items()
            },
        }
        answer, ms = await self.post("/preempt", body)
        result.preempt_ms.append(ms)
        result.preempt_requests += 1
        result.preempt_nodes_proposed += len(proposed)
        result.victims_proposed += sum(len(uids) for uids in proposed.values())
        kept: dict[str, Any] = dict(answer.get("NodeNameToMetaVictims") or {})
        result.preempt_nodes_agreed += len(kept)
        result.victims_agreed += sum(len(entry.get("Pods") or []) for entry in kept.values())
        by_uid = {task.uid: task for task in cluster.tasks if task.uid}
        usable = {  # victims among those proposed (the checker reports any other)
            node: entry
            for node, entry in kept.items()
            if node in proposed
            and {pod.get("UID") for pod in entry.get("Pods") or []} <= set(proposed[node])
        }
        chosen = _scheduler_pick(usable, by_uid, cluster.hp_priority)
        self.check_preemption(cluster, ask, proposed, kept, chosen, where)
        if chosen is None:
            return
        for pod in usable[chosen].get("Pods") or []:
            self.end(by_uid[pod["UID"]].id)
            result.evicted += 1
        pod_row = self.pods[arrival]
        self.bind(bound_task(ask, chosen, pod_row.created), pod_row.deleted, arrival)
        result.preempted_placed += 1

    def check_preemption(
        self,
        cluster: Cluster,
        ask: Ask,
        proposed: dict[str, list[str]],
        kept: dict[str, Any],
        chosen: str | None,
        where: str,
    ) -> None:
        """Check the nodes ``/preempt`` kept: all, or a sample with the chosen one."""
        check_nodes = self.options.check_nodes
        started = time.perf_counter()
        checked = kept
        if check_nodes is not None and len(kept) > check_nodes:
            others = sorted(node for node in kept if node != chosen)
            size = max(0, check_nodes - (chosen is not None))
            sample = set(self.rng.sample(others, size)) | {chosen}
            checked = {node: entry for node, entry in kept.items() if node in sample}
        self.result.violate(
            preemption_violations(cluster, ask, proposed, {"NodeNameToMetaVictims": checked}),
            where,
        )
        self.result.check_seconds += time.perf_counter() - started


def _scheduler_pick(usable: dict[str, Any], by_uid: dict[str, Task], hp: int) -> str | None:
    """The node kube-scheduler would pick among those agreed: fewest PDB violations, lowest
    highest victim priority, lowest priority sum, fewest victims, first."""

    def rank(item: tuple[str, Any]) -> tuple[int, int, int, int]:
        victims = [by_uid[pod["UID"]] for pod in item[1].get("Pods") or []]
        values = [priority_value(task.priority, hp) for task in victims]
        return (
            int(item[1].get("NumPDBViolations") or 0),
            max(values, default=-1),
            sum(values),
            len(values),
        )

    return min(usable.items(), key=rank)[0] if usable else None


async def _replay(
    cluster: Cluster,
    pods: list[OpenbPod],
    options: HarnessOptions,
    workload: Any,
    progress: Callable[[int, HarnessResult], None] | None,
) -> HarnessResult:
    simulation = _ExtenderReplay(cluster, pods, options, workload, progress)
    transport = httpx.ASGITransport(app=create_app(simulation.extender))
    async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
        simulation.client = client
        await run_async(simulation)
    result = simulation.result
    state = simulation.extender.state
    assert state is not None
    result.gpu_allocation_end = simulation.held / simulation.total_milli
    final = state.cluster
    try:
        Cluster.model_validate(final.model_dump(mode="json"))
    except ValueError as exc:
        result.final_cluster_valid = False
        result.violate([f"the final snapshot is not legal: {str(exc).splitlines()[0]}"], "end")
    return result


def run_harness(
    nodes_csv: str | Path,
    pods_csv: str | Path,
    options: HarnessOptions | None = None,
    *,
    progress: Callable[[int, HarnessResult], None] | None = None,
) -> HarnessResult:
    """Drive an extender on the openb nodes with the first ``options.pods`` pods of
    ``pods_csv`` in creation order, checking every answer (see the module docstring).

    Raises
    ------
    ValueError
        When ``options.check_passed`` is below 1 (the bound node is always checked).
    """
    options = options or HarnessOptions()
    if options.check_passed is not None and options.check_passed < 1:
        raise ValueError("check_passed must be at least 1 (the bound node is always checked)")
    started = time.perf_counter()
    cluster = openb_cluster(nodes_csv)
    rows = read_openb_pods(pods_csv)
    order = sorted(range(len(rows)), key=lambda i: (rows[i].created, i))
    chosen = [rows[i] for i in order][: options.pods]
    workload = None
    if options.fgd:
        workload = trace_workload(trace_pods(pods_csv))
    result = asyncio.run(_replay(cluster, chosen, options, workload, progress))
    result.wall_seconds = time.perf_counter() - started
    return result


__all__ = [
    "HIGH_PRIORITY",
    "HarnessOptions",
    "HarnessResult",
    "openb_cluster",
    "pod_object",
    "pod_uid",
    "run_harness",
]
