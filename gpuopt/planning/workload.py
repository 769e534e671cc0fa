"""Clusters and job streams for the replay: the spot-GPU node pool, openb pods, generated jobs.

- :func:`spot_nodes` reads the Alibaba spot-GPU node table
  (``alibaba-spot-gpu-2026/node_info_df.csv``: ``gpu_model, gpu_capacity_num,
  cpu_num, node_name``); SXM parts (A100/A800-SXM4, H800) get the all-to-all
  NVSwitch topology ``"nvswitch8"``, other 8-GPU nodes the PCIe two-NUMA one
  ``"pcie8"`` (the table has no topology; this is our assumption).
- :func:`generate_jobs` draws a seeded job stream (the spot trace's job table
  was not available here): Poisson arrivals scaled to an offered load, sizes
  of 1/2/4/8 GPUs, log-normal durations, an HP share, and standby windows for
  some long HP jobs.
- :func:`openb_jobs` takes sizes, durations and QoS from the openb pod list
  (``creation_time``/``deletion_time``), with arrival times compressed so the
  stream offers a chosen load on the replayed cluster (the trace itself never
  holds more than about 1 % of its GPUs at once).
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import numpy as np

from gpuopt.errors import ProblemError
from gpuopt.io.csvfile import open_csv
from gpuopt.simulate.jobs import ClusterNode, Job

SXM = ("A100-SXM4-80GB", "A800-SXM4-80GB", "H800")


def bandwidths() -> dict[str, np.ndarray]:
    """The two 8-GPU topologies of the replay, GB/s between GPU pairs.

    ``nvswitch8``: every pair 300 GB/s (NVLink through NVSwitch).
    ``pcie8``: 64 GB/s within a NUMA half (GPUs 0-3, 4-7; one PCIe switch),
    16 GB/s across (through the CPUs' interconnect).
    """
    nvswitch = np.full((8, 8), 300.0)
    pcie = np.full((8, 8), 16.0)
    pcie[:4, :4] = pcie[4:, 4:] = 64.0
    for matrix in (nvswitch, pcie):
        np.fill_diagonal(matrix, 0.0)
    return {"nvswitch8": nvswitch, "pcie8": pcie}


def spot_nodes(path: str | Path, *, gpus: int = 8, limit: int | None = None) -> list[ClusterNode]:
    """The nodes of the spot-GPU table with ``gpus`` GPUs (the first ``limit`` in file order)."""
    path = Path(path)
    with open_csv(path) as handle:
        rows = list(csv.DictReader(handle))
    nodes = []
    for line, row in enumerate(rows, start=2):
        try:
            count, cpus = int(row["gpu_capacity_num"]), float(row["cpu_num"])
        except (KeyError, TypeError, ValueError):
            raise ProblemError(
                f"{path}: line {line}: gpu_capacity_num and cpu_num must be numbers."
            ) from None
        if count != gpus:
            continue
        topology = "nvswitch8" if row["gpu_model"] in SXM else "pcie8"
        nodes.append(ClusterNode(f"spot-{row['node_name']}", count, cpus, topology))
        if limit is not None and len(nodes) >= limit:
            break
    return nodes


def generate_jobs(
    seed: int,
    nodes: list[ClusterNode],
    *,
    jobs: int = 3000,
    load: float = 0.95,
    hp_share: float = 0.4,
    sizes: tuple[int, ...] = (1, 2, 4, 8),
    size_weights: tuple[float, ...] = (0.45, 0.2, 0.15, 0.2),
    median_hours: float = 1.0,
    standby_share: float = 0.2,
) -> list[Job]:
    """A seeded job stream offering about ``load`` of the cluster's GPUs over its span.

    Durations are log-normal (median ``median_hours``, sigma 1, clipped to 5
    minutes - 48 hours); CPUs are 12 per GPU; HP jobs of 4 hours or more get a
    standby window with probability ``standby_share`` (from 40 % of their run,
    for 30 % of it).
    """
    rng = random.Random(seed)
    capacity = sum(n.gpus for n in nodes)
    drawn = []
    for number in range(jobs):
        gpus = rng.choices(sizes, size_weights)[0]
        hours = min(48.0, max(5 / 60, math.exp(rng.gauss(math.log(median_hours), 1.0))))
        hp = rng.random() < hp_share
        standby = None
        if hp and hours >= 4 and rng.random() < standby_share:
            standby = (0.4 * hours * 3600, 0.3 * hours * 3600)
        drawn.append((number, gpus, hours * 3600, hp, standby))
    work = sum(g * d for _, g, d, _, _ in drawn)
    span = work / (capacity * load)  # seconds over which arrivals spread
    rate = len(drawn) / span
    clock = 0.0
    out = []
    for number, gpus, duration, hp, standby in drawn:
        clock += rng.expovariate(rate)
        out.append(Job(f"j{number:05d}", clock, duration, gpus, 12.0 * gpus, hp, standby))
    return out


def openb_jobs(
    path: str | Path, nodes: list[ClusterNode], *, load: float = 0.95, limit: int | None = None
) -> list[Job]:
    """Jobs from an openb pod list: its GPUs, CPUs, QoS and durations, arrivals compressed.

    Pods with GPUs only (fractional ones hold a whole GPU); HP = QoS ``LS`` or
    ``Guaranteed``; duration = deletion - creation; pods never scheduled or
    without times are left out. Arrivals keep the trace's order and relative
    gaps, scaled so the stream offers ``load`` of the cluster's GPUs.
    """
    path = Path(path)
    with open_csv(path) as handle:
        rows = list(csv.DictReader(handle))
    pods = []
    for row in rows:
        try:
            gpus = int(row["num_gpu"])
            if gpus <= 0 or not row.get("scheduled_time") or not row.get("deletion_time"):
                continue
            created, deleted = float(row["creation_time"]), float(row["deletion_time"])
            cpus = float(row["cpu_milli"]) / 1000
        except (KeyError, TypeError, ValueError):
            raise ProblemError(f"{path}: a pod row lacks numeric times or sizes.") from None
        if deleted <= created:
            continue
        pods.append((created, row["name"], gpus, cpus, deleted - created, row.get("qos", "")))
    pods.sort()
    pods = pods[:limit] if limit is not None else pods
    if not pods:
        return []
    capacity = sum(n.gpus for n in nodes)
    work = sum(p[2] * p[4] for p in pods)
    trace_span = max(pods[-1][0] - pods[0][0], 1.0)
    scale = (work / (capacity * load)) / trace_span
    start = pods[0][0]
    return [
        Job(name, (created - start) * scale, duration, gpus, cpus, qos in ("LS", "Guaranteed"))
        for created, name, gpus, cpus, duration, qos in pods
    ]


__all__ = ["bandwidths", "generate_jobs", "openb_jobs", "spot_nodes"]
