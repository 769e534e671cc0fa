"""Scheduler extender, one process: where a filter + prioritize pair spends its CPU (issue 32).

The snapshot is ``extender_load.py``'s (the first ``--nodes`` openb GPU nodes with the
default pod list replayed to ``--fill``, or the synthetic cluster without the trace),
and so are the pods: v1.Pod JSON drawn (seeded) from the openb pod list's shapes, a new
pod per pair. Every fifth pod also carries a node selector on ``gpu_model``, every
seventh a required pod anti-affinity on ``kubernetes.io/hostname`` against the other
load pods (so the K5 path runs: the snapshot's running pods get that label too, on
every tenth), every eleventh the bandwidth annotation (N3), every thirteenth the
preferred-level annotation.

Each pair is sent to the ASGI app of ``gpuopt serve`` in this process (no socket, no
HTTP parser: the app's handlers as uvicorn calls them): ``POST /filter`` with every node
name (nodeCacheCapable), then ``POST /prioritize`` with the nodes that passed. It
prints the median CPU time of each stage (the JSON read, the arguments, the pod,
the filter's rules, its answer as JSON, the scores, their JSON) measured on the
engine's own functions, and the handlers' time per request.

    python benchmarks/extender_profile.py                           # stages, medians
    python benchmarks/extender_profile.py --capture out/answers.jsonl   # every answer's bytes
    python benchmarks/extender_profile.py --compare out/answers.jsonl   # the same bytes?
    python benchmarks/extender_profile.py --profile out/pairs.prof      # cProfile of the app
    python benchmarks/extender_profile.py --gap 8       # idle 8 ms before each pair
    python benchmarks/extender_profile.py --assume-ttl 30   # pods assumed (L5)
    python benchmarks/extender_profile.py --full --pairs 100    # v1.Node objects sent

``--capture`` writes, per request, the verb, the status and the answer's bytes; a later
``--compare`` with the same options sends the same requests and exits 1 at the first
answer that differs (byte for byte), so a change to the service can be shown to answer
as before.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import extender_load as load

from gpuopt.cluster.model import Cluster
from gpuopt.errors import ProblemError
from gpuopt.extender.app import create_app
from gpuopt.extender.engine import Extender
from gpuopt.io.data import trace_folder


def labelled(cluster: Cluster) -> Cluster:
    """Every tenth running pod labelled ``app=load`` (what the anti-affinity pods avoid)."""
    tasks = [
        task.model_copy(update={"labels": {"app": "load"}, "namespace": "default"})
        if i % 10 == 0
        else task
        for i, task in enumerate(cluster.tasks)
    ]
    return cluster.model_copy(update={"tasks": tasks})


def pod_body(serial: int, shape: load.Shape, run: str, models: list[str]) -> bytes:
    """``extender_load.pod_json`` with, for some pods, a selector, a pod anti-affinity
    term, the bandwidth annotation or the preferred-level annotation."""
    pod = json.loads(load.pod_json(serial, shape, run))
    spec, metadata = pod["spec"], pod["metadata"]
    if serial % 5 == 0 and models:
        spec["nodeSelector"] = {"gpu_model": models[serial % len(models)]}
    if serial % 7 == 0:
        term = {
            "labelSelector": {"matchLabels": {"app": "load"}},
            "topologyKey": "kubernetes.io/hostname",
        }
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    if serial % 11 == 0:
        metadata["annotations"]["gpuopt.io/min-gpu-bandwidth"] = "20"
    if serial % 13 == 0:
        metadata["annotations"]["gpuopt.io/preferred-level"] = "asw"
    return json.dumps(pod, separators=(",", ":")).encode()


def snapshot(args: argparse.Namespace) -> tuple[Cluster, list[load.Shape], str]:
    folder = None
    if not args.synthetic:
        try:
            folder = trace_folder("openb", args.data)
        except ProblemError as exc:
            print(f"extender_profile: {exc} Using a synthetic cluster.", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="gpuopt-profile-") as scratch:
        if folder is not None:
            cluster, what = load.openb_snapshot(folder, args.nodes, args.fill, Path(scratch))
            shapes = load.openb_shapes(folder)
        else:
            cluster, what = load.synthetic_snapshot(args.nodes, args.fill, args.seed)
            shapes = load.synthetic_shapes(10_000, args.seed + 1)
    return labelled(load.with_uids(cluster)), shapes, what


class AppClient:
    """POST to an ASGI app in this process, as uvicorn would call it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"127.0.0.1"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 8990),
        }
        sent = False
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, b"".join(chunks)


def pairs(
    client: AppClient,
    pods: list[bytes],
    names_json: bytes,
    gap: float = 0.0,
    objects: dict[str, bytes] | None = None,
) -> tuple[list[tuple[str, int, bytes]], list[float], list[float]]:
    """Every pod's pair through the app, ``gap`` seconds apart (idle between pairs, as the
    service is in an open loop): the answers and each verb's handler seconds (full mode
    with ``objects``, the nodes' v1.Node JSON by name)."""
    answers: list[tuple[str, int, bytes]] = []
    filter_s: list[float] = []
    prioritize_s: list[float] = []

    async def run() -> None:
        for pod in pods:
            if gap > 0:
                await asyncio.sleep(gap)
            body = load.args_body(pod, names_json, objects)
            started = time.process_time()
            status, content = await client.post("/filter", body)
            filter_s.append(time.process_time() - started)
            answers.append(("filter", status, content))
            passed = load.passed_names(json.loads(content)) if status == 200 else []
            body = load.args_body(pod, passed, objects)
            started = time.process_time()
            status, content = await client.post("/prioritize", body)
            prioritize_s.append(time.process_time() - started)
            answers.append(("prioritize", status, content))

    asyncio.run(run())
    return answers, filter_s, prioritize_s


def stages(
    extender: Extender,
    pods: list[bytes],
    names_json: bytes,
    gap: float = 0.0,
    objects: dict[str, bytes] | None = None,
) -> dict[str, float]:
    """Median ms of each stage of a pair, on the engine's own functions (CPU time), the
    process idle ``gap`` seconds before each pair (full mode with ``objects``)."""
    from gpuopt.extender import wire

    timings: dict[str, list[float]] = {}
    clock = time.process_time

    def lap(name: str, started: float) -> float:
        now = clock()
        timings.setdefault(name, []).append(now - started)
        return now

    dumps: Callable[[Any], Any] = getattr(
        wire, "dumps", lambda value: json.dumps(value, separators=(",", ":"))
    )
    for pod in pods:
        if gap > 0:
            time.sleep(gap)
        body = load.args_body(pod, names_json, objects)
        started = clock()
        decoded = wire.decode(body)
        started = lap("filter: JSON read", started)
        args = wire.read_args(decoded)
        started = lap("filter: arguments", started)
        extender.ask(args.pod, extender.state)
        started = lap("filter: pod read (new pod)", started)
        result = extender.filter(args)
        started = lap("filter: rules + sentences", started)
        dumps(result)
        lap("filter: answer JSON", started)
        passed = load.passed_names(result)
        body = load.args_body(pod, passed, objects)
        started = clock()
        decoded = wire.decode(body)
        started = lap("prioritize: JSON read", started)
        args = wire.read_args(decoded)
        started = lap("prioritize: arguments", started)
        if hasattr(extender, "priority_text"):  # the scores and their JSON in one step
            extender.priority_text(args)
            lap("prioritize: scores + answer JSON", started)
        else:
            scores = extender.scores(args)
            started = lap("prioritize: scores", started)
            wire.priority_json(scores)
            lap("prioritize: answer JSON", started)
    return {name: 1000 * statistics.median(values) for name, values in timings.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="folder of the traces (default: $GPUOPT_DATA)")
    parser.add_argument("--synthetic", action="store_true", help="synthetic cluster even with data")
    parser.add_argument("--nodes", type=int, default=1000, help="nodes (default 1000)")
    parser.add_argument("--fill", type=float, default=0.7, help="share of GPUs held (default 0.7)")
    parser.add_argument("--pairs", type=int, default=300, help="pairs (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pods (default 0)")
    parser.add_argument(
        "--gap",
        type=float,
        default=0.0,
        help="ms the process idles before each pair (default 0: back to back; 8 is about "
        "an open loop of 100 pairs/s)",
    )
    parser.add_argument("--capture", help="write every answer here (JSON lines)")
    parser.add_argument("--compare", help="compare every answer with this capture")
    parser.add_argument("--profile", help="cProfile the pairs through the app; write it here")
    parser.add_argument(
        "--full",
        action="store_true",
        help="full mode: the requests carry the nodes' v1.Node objects, not their names",
    )
    parser.add_argument(
        "--assume-ttl",
        type=float,
        help="assume each prioritized pod on its best node for this many seconds (L5)",
    )
    args = parser.parse_args()
    cluster, shapes, what = snapshot(args)
    rng = random.Random(args.seed)
    models = sorted({node.labels.get("gpu_model", "") for node in cluster.nodes} - {""})
    pods = [pod_body(i, rng.choice(shapes), "p", models) for i in range(args.pairs)]
    names_json = json.dumps([n.id for n in cluster.nodes], separators=(",", ":")).encode()
    print(f"snapshot: {what}; {len(cluster.tasks)} tasks; {args.pairs} pairs", file=sys.stderr)

    objects = load.node_objects(cluster) if args.full else None
    options = {} if args.assume_ttl is None else {"assume_ttl": args.assume_ttl}
    client = AppClient(create_app(Extender(cluster, **options)))
    pairs(client, pods[:20], names_json, 0.0, objects)  # warm: imports, caches of the snapshot
    client = AppClient(create_app(Extender(cluster, **options)))
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    answers, filter_s, prioritize_s = pairs(client, pods, names_json, args.gap / 1000, objects)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    if args.capture:
        with open(args.capture, "w") as out:
            for verb, status, content in answers:
                out.write(json.dumps([verb, status, content.decode()]) + "\n")
    if args.compare:
        with open(args.compare) as given:
            before = [json.loads(line) for line in given]
        if len(before) != len(answers):
            print(f"{len(before)} answers captured, {len(answers)} now", file=sys.stderr)
            return 1
        for k, (old, (verb, status, content)) in enumerate(zip(before, answers, strict=True)):
            if old != [verb, status, content.decode()]:
                print(f"answer {k} ({verb}) differs:\n{old}\n{content[:500]!r}", file=sys.stderr)
                return 1
        print(f"{len(answers)} answers identical to {args.compare}", file=sys.stderr)
    fails = sum(1 for verb, status, _ in answers if status != 200)
    print(f"{len(answers)} answers, {fails} not 200")
    pair_s = [a + b for a, b in zip(filter_s, prioritize_s, strict=True)]
    print(
        f"handler CPU ms, median (p99): filter {1000 * statistics.median(filter_s):.2f} "
        f"({1000 * sorted(filter_s)[int(0.99 * len(filter_s))]:.2f}), prioritize "
        f"{1000 * statistics.median(prioritize_s):.2f} "
        f"({1000 * sorted(prioritize_s)[int(0.99 * len(prioritize_s))]:.2f}), pair "
        f"{1000 * statistics.median(pair_s):.2f} "
        f"({1000 * sorted(pair_s)[int(0.99 * len(pair_s))]:.2f})"
    )
    extender = Extender(cluster, **options)
    for name, ms in stages(extender, pods, names_json, args.gap / 1000, objects).items():
        print(f"  {name}: {ms:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
