"""The scheduler extender driven by the openb trace, every answer checked (issue 19).

The openb GPU nodes, empty, are the snapshot of an extender served in-process
(``gpuopt.extender.app.create_app`` over httpx's ASGI transport; no socket).
The pods of the trace arrive in creation order as ``v1.Pod`` objects (whole
GPUs as ``nvidia.com/gpu``, a share of one GPU as ``alibabacloud.com/gpu-milli``,
``cpu`` in millicores, ``memory`` in MiB, ``gpu_spec`` as a node selector on
``gpu_model`` or, for several models, a required node affinity ``In``,
``spec.priority`` 1000 for qos LS and Guaranteed and 0 otherwise). Before each
arrival the pods whose ``deletion_time`` has come end (``Extender.forget``);
``--keep`` keeps every pod for good, as the FGD simulator does, so that the
cluster fills up. For each pod:

1. ``POST /filter`` with every node's name; the answer is checked by
   ``gpuopt.extender.check.filter_violations`` against the cluster of that
   moment: every passed node (or, with ``--check-passed K``, a seeded sample
   of K of them, the bound node among them) and every failed one (or a seeded
   sample of ``--check-nodes`` of them): the checker builds the cluster model
   per node, so a check of every node costs about 0.1-0.5 s per pod;
2. ``POST /prioritize`` with the passed nodes (``score_violations``); the pod
   is bound to the highest score, the first on ties (``Extender.assume``);
3. a pod no node passes is unplaced; when its priority is high, ``POST
   /preempt`` proposes, on up to ``--preempt-nodes`` of the nodes that failed
   it (not the unresolvable ones), every lower-priority pod there as victims;
   the answer is checked by ``preemption_violations`` (every node it keeps,
   or a sample of ``--check-nodes``, the chosen one among them), and the pod
   is bound to the agreed node kube-scheduler would pick (fewest PDB
   violations, lowest highest victim priority, lowest priority sum, fewest
   victims, first), whose victims end (counted as evicted).

Reported: pods, placed, unplaced, preemptions, checker violations (the run
exits with 1 when there are any, printing the first few), filter and
prioritize latency (in-process, request to parsed answer), GPU allocation
(thousandths of all GPUs held) at the end and at its peak, wall time.

    nice python benchmarks/extender_openb.py                           # 2,000 pods
    nice python benchmarks/extender_openb.py --pods 8152 --check-nodes 20
    nice python benchmarks/extender_openb.py --keep --pods 8152 --check-nodes 20 \
        --check-passed 20 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import math
import random
import re
import statistics
import sys
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
from gpuopt.extender.engine import Ask, Extender
from gpuopt.readers.openb import MODEL_LABEL, OpenbPod, read_openb_nodes, read_openb_pods

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


async def _run(
    cluster: Cluster,
    pods: list[OpenbPod],
    *,
    check_nodes: int | None,
    check_passed: int | None,
    keep: bool,
    preempt: bool,
    preempt_nodes: int,
    seed: int,
    workload: Any,
    progress: Callable[[int, HarnessResult], None] | None,
) -> HarnessResult:
    clock = [0.0]
    extender = Extender(cluster, workload=workload, now=lambda: clock[0], source="openb")
    app = create_app(extender)
    names = [node.id for node in cluster.nodes]
    rng = random.Random(seed)
    total_milli = sum(node.gpus for node in cluster.nodes) * MILLI
    result = HarnessResult(
        pods=len(pods),
        nodes=len(names),
        gpus=total_milli // MILLI,
        check=_check_words(check_nodes, check_passed),
        keep=keep,
    )
    running: dict[str, Task] = {}
    leaving: list[tuple[float, int, str]] = []  # (deletion time, arrival, task id)
    held = 0

    def end(task_id: str) -> None:
        nonlocal held
        extender.forget(task_id)
        held -= held_milli(running.pop(task_id))

    def bind(task: Task, deleted: float, arrival: int) -> None:
        nonlocal held
        extender.assume(task)
        running[task.id] = task
        held += held_milli(task)
        result.gpu_allocation_peak = max(result.gpu_allocation_peak, held / total_milli)
        if not keep and math.isfinite(deleted):
            heapq.heappush(leaving, (deleted, arrival, task.id))

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
        for arrival, pod in enumerate(pods):
            clock[0] = pod.created
            while leaving and leaving[0][0] <= pod.created:
                _, _, task_id = heapq.heappop(leaving)
                if task_id in running:  # not evicted meanwhile
                    end(task_id)
                    result.departed += 1
            obj = pod_object(pod)
            where = f"pod {pod.name}"
            state = extender.state
            assert state is not None
            before = state.cluster
            answer, ms = await _post(client, "/filter", {"Pod": obj, "NodeNames": names})
            result.filter_ms.append(ms)
            ask = extender.ask(obj, state)
            passed: list[str] = list(answer.get("NodeNames") or [])
            failed: dict[str, str] = dict(answer.get("FailedNodes") or {})
            hard: dict[str, str] = dict(answer.get("FailedAndUnresolvableNodes") or {})
            chosen: str | None = None
            if passed:
                scores, ms = await _post(client, "/prioritize", {"Pod": obj, "NodeNames": passed})
                result.prioritize_ms.append(ms)
                result.violate(score_violations(passed, scores), where)
                chosen = max(scores, key=lambda entry: entry["Score"])["Host"]  # first on ties
            started = time.perf_counter()
            if check_nodes is None and check_passed is None:
                checked_names, checked = names, answer
            else:
                seen = passed + list(failed) + list(hard)
                if len(seen) != len(set(seen)) or set(seen) != set(names):
                    result.violate(
                        [f"E2: the answer names {len(seen)} nodes for {len(names)} candidates"],
                        where,
                    )
                rest = sorted([*failed, *hard])
                if check_nodes is not None:
                    rest = rng.sample(rest, min(check_nodes, len(rest)))
                keep_passed = passed
                if check_passed is not None and len(passed) > check_passed:
                    others = [name for name in passed if name != chosen]
                    keep_passed = [*rng.sample(others, check_passed - 1), str(chosen)]
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
            if chosen is not None:
                bind(bound_task(ask, chosen, pod.created), pod.deleted, arrival)
                result.placed += 1
            else:
                result.unplaced += 1
                if preempt and ask.priority > 0:
                    await _preempt(
                        client,
                        extender,
                        obj,
                        ask,
                        failed,
                        preempt_nodes,
                        check_nodes,
                        rng,
                        result,
                        where,
                        end,
                        lambda task, p=pod, a=arrival: bind(task, p.deleted, a),
                        pod.created,
                    )
            if progress is not None:
                progress(arrival + 1, result)
    state = extender.state
    assert state is not None
    result.gpu_allocation_end = held / total_milli
    final = state.cluster
    try:
        Cluster.model_validate(final.model_dump(mode="json"))
    except ValueError as exc:
        result.final_cluster_valid = False
        result.violate([f"the final snapshot is not legal: {str(exc).splitlines()[0]}"], "end")
    return result


async def _preempt(
    client: httpx.AsyncClient,
    extender: Extender,
    obj: dict[str, Any],
    ask: Ask,
    failed: dict[str, str],
    preempt_nodes: int,
    check_nodes: int | None,
    rng: random.Random,
    result: HarnessResult,
    where: str,
    end: Callable[[str], None],
    bind: Callable[[Task], None],
    now: float,
) -> None:
    """Propose every lower-priority pod of the failed nodes as victims (step 3)."""
    state = extender.state
    assert state is not None
    cluster = state.cluster
    hp = cluster.hp_priority
    proposed: dict[str, list[str]] = {}
    for name in failed:  # the answer's order: the candidates' order
        victims = [
            task.uid
            for task in state.on_node[state.node_pos[name]]
            if task.uid and priority_value(task.priority, hp) < ask.priority
        ]
        if victims:
            proposed[name] = victims
            if len(proposed) >= preempt_nodes:
                break
    if not proposed:
        return
    body = {
        "Pod": obj,
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}
            for node, uids in proposed.items()
        },
    }
    answer, ms = await _post(client, "/preempt", body)
    result.preempt_ms.append(ms)
    result.preempt_requests += 1
    result.preempt_nodes_proposed += len(proposed)
    result.victims_proposed += sum(len(uids) for uids in proposed.values())
    kept: dict[str, Any] = dict(answer.get("NodeNameToMetaVictims") or {})
    result.preempt_nodes_agreed += len(kept)
    result.victims_agreed += sum(len(entry.get("Pods") or []) for entry in kept.values())
    by_uid = {task.uid: task for task in cluster.tasks if task.uid}

    def rank(item: tuple[str, Any]) -> tuple[int, int, int, int]:
        victims = [by_uid[pod["UID"]] for pod in item[1].get("Pods") or []]
        values = [priority_value(task.priority, hp) for task in victims]
        return (
            int(item[1].get("NumPDBViolations") or 0),
            max(values, default=-1),
            sum(values),
            len(values),
        )

    usable = {  # victims among those proposed (the checker reports any other)
        node: entry
        for node, entry in kept.items()
        if node in proposed
        and {pod.get("UID") for pod in entry.get("Pods") or []} <= set(proposed[node])
    }
    chosen = min(usable.items(), key=rank)[0] if usable else None
    started = time.perf_counter()
    checked = kept
    if check_nodes is not None and len(kept) > check_nodes:
        others = sorted(node for node in kept if node != chosen)
        size = max(0, check_nodes - (chosen is not None))
        sample = set(rng.sample(others, size)) | {chosen}
        checked = {node: entry for node, entry in kept.items() if node in sample}
    result.violate(
        preemption_violations(cluster, ask, proposed, {"NodeNameToMetaVictims": checked}), where
    )
    result.check_seconds += time.perf_counter() - started
    if chosen is None:
        return
    for pod in usable[chosen].get("Pods") or []:
        end(by_uid[pod["UID"]].id)
        result.evicted += 1
    bind(bound_task(ask, chosen, now))
    result.preempted_placed += 1


def run_harness(
    nodes_csv: str | Path,
    pods_csv: str | Path,
    *,
    pods: int | None = 2000,
    check_nodes: int | None = None,
    check_passed: int | None = None,
    keep: bool = False,
    preempt: bool = True,
    preempt_nodes: int = PREEMPT_NODES,
    seed: int = 0,
    fgd: bool = False,
    progress: Callable[[int, HarnessResult], None] | None = None,
) -> HarnessResult:
    """Drive an extender on the openb nodes with the first ``pods`` pods of ``pods_csv`` in
    creation order, checking every answer (see the module docstring)."""
    if check_passed is not None and check_passed < 1:
        raise ValueError("check_passed must be at least 1 (the bound node is always checked)")
    started = time.perf_counter()
    cluster = openb_cluster(nodes_csv)
    rows = read_openb_pods(pods_csv)
    order = sorted(range(len(rows)), key=lambda i: (rows[i].created, i))
    chosen = [rows[i] for i in order][:pods]
    workload = None
    if fgd:
        from gpuopt.readers.openb import trace_pods
        from gpuopt.sharing.replay import trace_workload

        workload = trace_workload(trace_pods(pods_csv))
    result = asyncio.run(
        _run(
            cluster,
            chosen,
            check_nodes=check_nodes,
            check_passed=check_passed,
            keep=keep,
            preempt=preempt,
            preempt_nodes=preempt_nodes,
            seed=seed,
            workload=workload,
            progress=progress,
        )
    )
    result.wall_seconds = time.perf_counter() - started
    return result


def table(result: HarnessResult) -> str:
    """The figures as a markdown table."""
    s = result.summary()

    def ms(verb: str) -> str:
        if not s[f"{verb}_requests"]:
            return "-"
        return f"{s[f'{verb}_ms_median']:.2f} / {s[f'{verb}_ms_p99']:.2f}"

    rows = [
        ("nodes (GPUs)", f"{result.nodes:,} ({result.gpus:,})"),
        ("pods arrived", f"{result.pods:,}"),
        ("departures", "none (--keep)" if result.keep else f"{result.departed:,}"),
        ("placed", f"{result.placed:,}"),
        ("unplaced (no node passed)", f"{result.unplaced:,}"),
        ("preempt requests", f"{result.preempt_requests:,}"),
        (
            "preempt nodes agreed / proposed",
            f"{result.preempt_nodes_agreed:,} / {result.preempt_nodes_proposed:,}",
        ),
        ("victims agreed / proposed", f"{result.victims_agreed:,} / {result.victims_proposed:,}"),
        (
            "placed by preemption (pods evicted)",
            f"{result.preempted_placed:,} ({result.evicted:,})",
        ),
        ("checked", f"{result.check}: {result.nodes_checked:,} node verdicts"),
        ("checker violations", f"{result.violation_count:,}"),
        ("filter ms, median / p99", ms("filter")),
        ("prioritize ms, median / p99", ms("prioritize")),
        ("preempt ms, median / p99", ms("preempt")),
        (
            "GPU allocation at the end / peak",
            f"{100 * result.gpu_allocation_end:.1f} % / {100 * result.gpu_allocation_peak:.1f} %",
        ),
        ("final snapshot legal", "yes" if result.final_cluster_valid else "NO"),
        ("checker time s", f"{result.check_seconds:.1f}"),
        ("wall time s", f"{result.wall_seconds:.1f}"),
    ]
    lines = ["| figure | value |", "| --- | --- |"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from gpuopt.io.data import trace_folder
    from gpuopt.sharing.replay import OPENB_NODES, OPENB_TRACES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", help="folder of the traces (docs/data.md; default: $GPUOPT_DATA, ../shared/data)"
    )
    parser.add_argument(
        "--trace",
        default="default",
        choices=OPENB_TRACES,
        help="pod list openb_pod_list_TRACE.csv (default: default)",
    )
    parser.add_argument(
        "--pods", type=int, default=2000, help="pods that arrive (default 2000; 0: all)"
    )
    parser.add_argument(
        "--check-nodes",
        type=int,
        default=None,
        metavar="K",
        help="check every passed node and a seeded sample of K failed ones (default: every node)",
    )
    parser.add_argument(
        "--check-passed",
        type=int,
        default=None,
        metavar="K",
        help="check only a seeded sample of K passed nodes, the bound one among them "
        "(default: every passed node; for --keep runs)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="no pod leaves (the FGD simulator's protocol): the cluster fills up",
    )
    parser.add_argument("--no-preempt", action="store_true", help="never ask /preempt")
    parser.add_argument(
        "--preempt-nodes",
        type=int,
        default=PREEMPT_NODES,
        help=f"nodes proposed per preemption (default {PREEMPT_NODES})",
    )
    parser.add_argument(
        "--fgd",
        action="store_true",
        help="score with FGD's fragmentation for the trace's workload too",
    )
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.check_passed is not None and args.check_passed < 1:
        parser.error("--check-passed must be at least 1 (the bound node)")
    if args.check_nodes is not None and args.check_nodes < 0:
        parser.error("--check-nodes must not be negative")
    folder = trace_folder("openb", args.data)
    started = time.perf_counter()

    def progress(done: int, result: HarnessResult) -> None:
        if done % 500 == 0:
            print(
                f"{done:,} pods: {result.placed:,} placed, {result.unplaced:,} unplaced, "
                f"{result.violation_count} violations, {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    result = run_harness(
        folder / OPENB_NODES,
        folder / f"openb_pod_list_{args.trace}.csv",
        pods=args.pods or None,
        check_nodes=args.check_nodes,
        check_passed=args.check_passed,
        keep=args.keep,
        preempt=not args.no_preempt,
        preempt_nodes=args.preempt_nodes,
        seed=args.seed,
        fgd=args.fgd,
        progress=progress,
    )
    print(f"openb trace {args.trace!r}, extender in-process, checked: {result.check}\n")
    print(table(result))
    if result.violations:
        print(f"\nfirst {len(result.violations)} of {result.violation_count} violations:")
        for line in result.violations:
            print(f"- {line}")
        print("\nby kind:")
        for kind, count in sorted(result.violation_kinds.items(), key=lambda kv: -kv[1]):
            print(f"- {count:,}: {kind}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        summary = {"trace": args.trace, **result.summary()}
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if result.violation_count else 0


if __name__ == "__main__":
    sys.exit(main())
