"""Scheduler extender, closed loop: the most pairs a second ``gpuopt serve --workers N`` answers.

The snapshot and the pods are ``extender_load.py``'s (1,000 openb nodes, a new pod per
pair). ``--clients`` asyncio connections each send filter + prioritize pairs back to
back (the next pair as soon as the last is answered) for ``--seconds``, after a warm-up;
the answers are checked as ``extender_load.py`` checks them. Printed: pairs answered a
second, the pair's p50 and p99, and the CPU the service (its workers included) and the
client used. Run it with ``--workers 1`` and ``--workers 2`` to see how the service
scales with processes (on a machine whose cores are free: the client needs CPU too).

    python benchmarks/extender_throughput.py --workers 1 --seconds 20
    python benchmarks/extender_throughput.py --workers 2 --seconds 20 --json out/t2.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import extender_load as load

from gpuopt.errors import ProblemError
from gpuopt.io.data import trace_folder
from gpuopt.io.files import write_text_atomic


async def drive(
    url: str, pods: list[bytes], names_json: bytes, clients: int, seconds: float
) -> tuple[list[float], int]:
    """Pairs back to back on ``clients`` connections for ``seconds`` (or until every pod of
    ``pods`` was asked about): each pair's seconds, and the errors."""
    client = load.RawClient(url, clients)
    pairs: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds
    pending = iter(pods)

    async def one() -> None:
        nonlocal errors
        while time.perf_counter() < stop:
            pod = next(pending, None)
            if pod is None:  # every pod asked about
                break
            started = time.perf_counter()
            body = load.args_body(pod, names_json)
            status, content = await client.post("/filter", body)
            passed = json.loads(content).get("NodeNames") or [] if status == 200 else None
            if passed is None:
                errors += 1
                continue
            body = load.args_body(pod, passed)
            status, content = await client.post("/prioritize", body)
            if status != 200 or content.count(b'{"Host":') != len(passed):
                errors += 1
                continue
            pairs.append(time.perf_counter() - started)

    try:
        await asyncio.gather(*(one() for _ in range(clients)))
    finally:
        await client.close()
    return pairs, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="folder of the traces (default: $GPUOPT_DATA)")
    parser.add_argument("--nodes", type=int, default=1000, help="nodes (default 1000)")
    parser.add_argument("--fill", type=float, default=0.7, help="share of GPUs held (default 0.7)")
    parser.add_argument("--workers", type=int, default=1, help="service workers (default 1)")
    parser.add_argument(
        "--clients", type=int, default=8, help="connections, each a pair at a time (default 8)"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pods (default 0)")
    parser.add_argument(
        "--perf",
        action="store_true",
        help="count the service's software events with perf stat, per pair",
    )
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="gpuopt-throughput-") as scratch:
        tmp = Path(scratch)
        try:
            folder = trace_folder("openb", args.data)
            cluster, what = load.openb_snapshot(folder, args.nodes, args.fill, tmp)
            shapes = load.openb_shapes(folder)
        except ProblemError as exc:
            print(f"extender_throughput: {exc} Using a synthetic cluster.", file=sys.stderr)
            cluster, what = load.synthetic_snapshot(args.nodes, args.fill, args.seed)
            shapes = load.synthetic_shapes(10_000, args.seed + 1)
        snapshot = tmp / "snapshot.json"
        snapshot.write_text(load.with_uids(cluster).to_json(indent=None))
        names_json = json.dumps([n.id for n in cluster.nodes], separators=(",", ":")).encode()
        # more pods than any run answers: each pair a new pod
        pods = [load.pod_json(i, rng.choice(shapes), "t") for i in range(60_000)]
        extra = ["--workers", str(args.workers)] if args.workers > 1 else []
        with load.service(snapshot, load.free_port(), tmp / "serve.log", extra) as served:
            asyncio.run(drive(served.url, pods[:400], names_json, args.clients, 3.0))  # warm
            load_before = os.getloadavg()[0]
            cpu = (load.cpu_seconds(), load.cpu_seconds(served.pid))
            busy = load.busy_seconds()
            began = time.perf_counter()
            with load.perf_stat(load.service_pids(served.pid), args.perf) as counted:
                pairs, errors = asyncio.run(
                    drive(served.url, pods[400:], names_json, args.clients, args.seconds)
                )
            wall = time.perf_counter() - began
            used_client = load.cpu_seconds() - cpu[0]
            used_server = load.cpu_seconds(served.pid) - cpu[1]
            used_machine = load.busy_seconds() - busy
    ms = np.asarray(pairs) * 1000
    result = {
        "workers": args.workers,
        "clients": args.clients,
        "seconds": wall,
        "pairs": len(pairs),
        "errors": errors,
        "pairs_per_s": len(pairs) / wall,
        "pair_p50_ms": float(np.percentile(ms, 50)) if len(ms) else None,
        "pair_p99_ms": float(np.percentile(ms, 99)) if len(ms) else None,
        "server_cpu_cores": used_server / wall,
        "client_cpu_cores": used_client / wall,
        # everything else that ran: other users' jobs, the kernel's threads
        "other_cpu_cores": (used_machine - used_server - used_client) / wall,
        "server_cpu_ms_per_pair": 1000 * used_server / max(1, len(pairs)),
        "load_average": [load_before, os.getloadavg()[0]],
        "snapshot": what,
    }
    if counted:
        result["perf_per_pair"] = {
            name: value / max(1, len(pairs)) for name, value in counted.items()
        }
    print(
        f"{args.workers} worker(s), {args.clients} connections, {wall:.1f} s: "
        f"{result['pairs_per_s']:.1f} pairs/s, {errors} errors, pair p50 "
        f"{result['pair_p50_ms']:.2f} ms, p99 {result['pair_p99_ms']:.2f} ms; CPU: service "
        f"{result['server_cpu_cores']:.2f} cores ({result['server_cpu_ms_per_pair']:.2f} ms per "
        f"pair), client {result['client_cpu_cores']:.2f}, anything else "
        f"{result['other_cpu_cores']:.2f}; load average {load_before:.1f} before, "
        f"{result['load_average'][1]:.1f} after"
    )
    if counted:
        print(
            "  perf stat of the service, per pair: "
            + ", ".join(f"{k} {v:.3g}" for k, v in result["perf_per_pair"].items())
        )
    if args.json:
        write_text_atomic(Path(args.json), json.dumps(result, indent=1) + "\n")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
