"""A first, standalone prototype of the FGD simulator's protocol (issue 16), to check
that the notes in NOTES.md reproduce the published allocation ratios before the
real implementation goes into the cluster model. Not part of the package.

    python benchmarks/fgd/prototype.py --data ../shared/data --policy fgd --seeds 42
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from collections import Counter
from pathlib import Path

import numpy as np

MILLI = 1000
MAX_GPUS = 8


def read(folder: Path, trace: str) -> tuple[dict[str, np.ndarray], list[dict[str, object]]]:
    with open(folder / "openb_node_list_gpu_node.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    nodes = {
        "cpu": np.array([int(r["cpu_milli"]) for r in rows], dtype=np.int64),
        "mem": np.array([int(r["memory_mib"]) for r in rows], dtype=np.int64),
        "gpus": np.array([int(r["gpu"]) for r in rows], dtype=np.int64),
        "model": np.array([r["model"] for r in rows]),
    }
    with open(folder / f"openb_pod_list_{trace}.csv", newline="") as handle:
        pods = [
            {
                "cpu": int(r["cpu_milli"]),
                "mem": int(r["memory_mib"]),
                "num": int(r["num_gpu"]),
                "milli": int(r["gpu_milli"]) if int(r["num_gpu"]) else 0,
                "spec": r.get("gpu_spec") or "",
            }
            for r in csv.DictReader(handle)
        ]
    return nodes, pods


def typical(pods: list[dict[str, object]]) -> list[tuple[int, int, int, str, float]]:
    """Shapes covering 95 % of pods by count, most common first (ties: larger shape first)."""
    counts = Counter((p["cpu"], p["milli"], p["num"], p["spec"]) for p in pods)
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    expected = 95 * len(pods) / 100
    kept, total = [], 0
    for shape, count in ranked:
        if total >= expected:
            break
        kept.append((shape, count))
        total += count
    return [(*shape, count / total) for shape, count in kept]  # type: ignore[misc]


class Cluster:
    def __init__(self, nodes: dict[str, np.ndarray], shapes: list) -> None:
        n = len(nodes["cpu"])
        self.cpu = nodes["cpu"].copy()
        self.mem = nodes["mem"].copy()
        self.model = nodes["model"]
        self.left = np.full((n, MAX_GPUS), -1, dtype=np.int64)  # -1: no such GPU
        for i, g in enumerate(nodes["gpus"]):
            self.left[i, :g] = MILLI
        self.total = int(nodes["gpus"].sum()) * MILLI
        self.t_cpu = np.array([s[0] for s in shapes])
        self.t_milli = np.array([s[1] for s in shapes])
        self.t_num = np.array([s[2] for s in shapes])
        self.t_p = np.array([s[4] for s in shapes], dtype=float)
        specs = [s[3] for s in shapes]
        # access[t, n]: shape t may run on node n's GPU model
        self.access = np.array(
            [[(not sp) or (m in sp.split("|")) for m in self.model] for sp in specs], dtype=bool
        )

    def frag(self, left: np.ndarray, cpu: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """F_n for ``left`` (k x 8) and ``cpu`` (k) of ``nodes`` (k positions)."""
        valid = left >= 0
        idle = np.where(valid, left, 0).sum(axis=1)  # k
        m = self.t_milli[:, None, None]  # t,1,1
        fits = (left[None] >= m) & valid[None]  # t,k,8
        count = fits.sum(axis=2)  # t,k
        small = np.where(valid[None] & (left[None] < m), left[None], 0).sum(axis=2)  # t,k
        ok = (
            (self.t_milli[:, None] > 0)
            & self.access[:, nodes]
            & (count >= self.t_num[:, None])
            & (cpu[None] >= self.t_cpu[:, None])
        )
        f = np.where(ok, small, idle[None])
        return (self.t_p[:, None] * f).sum(axis=0)


def sigmoid_score(delta_milli: np.ndarray) -> np.ndarray:
    x = delta_milli / 1000.0
    return np.floor(100.0 / (1.0 + np.exp(-x))).astype(np.int64)


def run(nodes: dict[str, np.ndarray], pods: list, policy: str, seed: int) -> dict[int, float]:
    rng = np.random.default_rng(seed)
    shapes = typical(pods)
    cluster = Cluster(nodes, shapes)
    order = [pods[i] for i in rng.permutation(len(pods))]
    target = 1.3 * cluster.total
    total = sum(p["milli"] * p["num"] for p in pods)
    while total < target:
        extra = pods[int(rng.integers(len(pods)))]
        if total + extra["milli"] > target:
            break
        order.append(extra)
        total += extra["milli"] * extra["num"]
    rank = rng.permutation(len(nodes["cpu"]))  # tie-break: smallest rank wins
    arrived = 0
    buckets: dict[int, list[float]] = {}
    used = 0
    for pod in order:
        arrived += pod["milli"] * pod["num"]
        placed = place(cluster, pod, policy, rank, rng)
        if placed:
            used += pod["milli"] * pod["num"]
        bucket = round(arrived / cluster.total * 100)
        buckets.setdefault(bucket, []).append(used / cluster.total * 100)
    return {k: float(np.mean(v)) for k, v in buckets.items()}


def place(cluster: Cluster, pod: dict, policy: str, rank: np.ndarray, rng) -> bool:
    cpu, mem, num, milli = pod["cpu"], pod["mem"], pod["num"], pod["milli"]
    feasible = (cluster.cpu >= cpu) & (cluster.mem >= mem)
    if pod["spec"]:
        allowed = pod["spec"].split("|")
        feasible &= np.isin(cluster.model, allowed)
    left = cluster.left
    if num > 0:
        enough = (left >= milli).sum(axis=1)
        feasible &= enough >= num
    cand = np.flatnonzero(feasible)
    if cand.size == 0:
        return False
    share = num == 1 and milli < MILLI
    if policy == "fgd":
        before = cluster.frag(left[cand], cluster.cpu[cand], cand)
        if share:
            best_score = np.full(cand.size, -1)
            best_gpu = np.zeros(cand.size, dtype=int)
            for g in range(MAX_GPUS):
                can = left[cand, g] >= milli
                if not can.any():
                    continue
                new = left[cand].copy()
                new[:, g] -= milli
                after = cluster.frag(new, cluster.cpu[cand] - cpu, cand)
                score = np.where(can, sigmoid_score(before - after), -1)
                better = score > best_score
                best_score = np.where(better, score, best_score)
                best_gpu = np.where(better, g, best_gpu)
            scores = best_score
        else:
            new = left[cand].copy()
            gpus = _whole(new, num) if num else None
            if gpus is not None:
                rows = np.arange(cand.size)[:, None]
                new[rows, gpus] = 0
            after = cluster.frag(new, cluster.cpu[cand] - cpu, cand)
            scores = sigmoid_score(before - after)
    elif policy == "bestfit":
        gpu_left = np.where(left[cand] >= 0, left[cand], 0).sum(axis=1)
        score = 0.5 * (cluster.cpu[cand] - cpu) / 128000 + 0.5 * (gpu_left - milli * num) / 8000
        raw = ((1 - score) * 100).astype(np.int64)
        lo, hi = raw.min(), raw.max()
        scores = (raw - lo) * 100 // (hi - lo) if hi > lo else np.zeros_like(raw)
    else:
        raise SystemExit(f"unknown policy {policy}")
    top = scores.max()
    winners = np.flatnonzero(scores == top)
    pick = winners[np.argmin(rank[cand[winners]])]
    node = cand[pick]
    cluster.cpu[node] -= cpu
    cluster.mem[node] -= mem
    if num == 0:
        return True
    if share:
        if policy == "fgd":
            g = int(best_gpu[pick])
        else:  # best: the GPU with the smallest remaining >= milli, lowest index on ties
            lefts = np.where(left[node] >= milli, left[node], 10**9)
            g = int(np.argmin(lefts))
        left[node, g] -= milli
    else:
        free = np.flatnonzero(left[node] == MILLI)[:num]
        left[node, free] = 0
    return True


def _whole(new: np.ndarray, num: int) -> np.ndarray:
    """Per row, the ``num`` lowest-index fully free GPUs."""
    free = new == MILLI
    order = np.argsort(~free, axis=1, kind="stable")
    return order[:, :num]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--trace", default="default")
    parser.add_argument("--policy", default="fgd")
    parser.add_argument("--seeds", default="42")
    args = parser.parse_args()
    folder = Path(args.data) / "alibaba-openb-gpu-2023"
    nodes, pods = read(folder, args.trace)
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    at100, at130 = [], []
    for seed in seeds:
        started = time.perf_counter()
        curve = run(nodes, pods, args.policy, seed)
        at100.append(curve.get(100, math.nan))
        at130.append(curve.get(130, math.nan))
        print(
            f"{args.trace} {args.policy} seed {seed}: alloc {at100[-1]:.2f} % at 100, "
            f"{at130[-1]:.2f} % at 130 ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    print(f"mean: {np.mean(at100):.2f} at 100, {np.mean(at130):.2f} at 130")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
