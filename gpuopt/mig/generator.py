"""Seeded MIG nodes: A100/H100 placement tables, a running layout, and waiting pods.

The placement tables are those ``nvidia-smi mig -lgipp`` prints (NVIDIA's MIG
user guide, "Supported MIG Profiles"): a profile may start at the memory
slices listed and covers ``size`` of the 8 memory slices; it takes its
``g`` compute slices (as multiprocessors) and its memory. The dynamic-MIG
driver publishes exactly these placements as devices named
``gpu-N-mig-<profile id>-<start>-<size>`` drawing on one counter set per GPU
(``memory-slice-K``, ``multiprocessors``, ``memory``), as the fixture
``gpuopt/scenarios/kubernetes/dra/dynamic-mig`` shows for an A100-40GB; the
whole GPU is a device drawing all of the set.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gpuopt.mig.problem import WHOLE_GPU, MigGpu, MigProblem, Placement


@dataclass(frozen=True)
class Profile:
    """A MIG profile of one GPU model: its name and id, compute slices, multiprocessors,
    memory (MiB), memory slices covered and the slices it may start at."""

    name: str
    profile_id: int
    compute: int
    multiprocessors: int
    memory: int
    size: int
    starts: tuple[int, ...]


@dataclass(frozen=True)
class GpuModel:
    """A GPU model in dynamic MIG: its product name, totals and profiles."""

    name: str
    product: str
    multiprocessors: int
    memory: int
    profiles: tuple[Profile, ...]


def _table(
    name: str, product: str, sms: tuple[int, int, int, int, int], memory: int, unit: int
) -> GpuModel:
    """A100/H100 placement table: ``sms`` of 1g, 2g, 3g, 4g, 7g; ``unit`` GB per memory slice."""
    one, two, three, four, seven = sms
    rows = (
        (f"1g.{unit}gb", 19, 1, one, 1, (0, 1, 2, 3, 4, 5, 6)),
        (f"1g.{2 * unit}gb", 15, 1, one, 2, (0, 2, 4, 6)),
        (f"2g.{2 * unit}gb", 14, 2, two, 2, (0, 2, 4)),
        (f"3g.{4 * unit}gb", 9, 3, three, 4, (0, 4)),
        (f"4g.{4 * unit}gb", 5, 4, four, 4, (0,)),
        (f"7g.{8 * unit}gb", 0, 7, seven, 8, (0,)),
    )
    slice_mib = memory // 8
    profiles = tuple(
        Profile(label, pid, compute, mp, size * slice_mib, size, starts)
        for label, pid, compute, mp, size, starts in rows
    )
    return GpuModel(name, product, seven, memory, profiles)


#: The GPU models the generator draws from, by name.
MODELS: dict[str, GpuModel] = {
    "A100-40GB": _table("A100-40GB", "NVIDIA A100-SXM4-40GB", (14, 28, 42, 56, 98), 40_192, 5),
    "A100-80GB": _table("A100-80GB", "NVIDIA A100-SXM4-80GB", (14, 28, 42, 56, 98), 80_896, 10),
    "H100-80GB": _table("H100-80GB", "NVIDIA H100 80GB HBM3", (16, 32, 60, 64, 132), 80_896, 10),
}


def gpu(gpu_id: str, node: str, model: str = "A100-80GB", *, whole: bool = True) -> MigGpu:
    """A GPU of ``model`` (a key of :data:`MODELS`) with every placement of every profile,
    and its whole device when ``whole``, none in use.

    >>> [item.device for item in gpu("g0", "n0", "A100-40GB").placements][:3]
    ['g0', 'g0-mig-19-0-1', 'g0-mig-19-1-1']
    """
    table = MODELS[model]
    counters = {"multiprocessors": table.multiprocessors, "memory": table.memory}
    counters |= {f"memory-slice-{k}": 1 for k in range(8)}
    placements = []
    if whole:
        placements.append(
            Placement(device=gpu_id, profile=WHOLE_GPU, whole=True, start=0, size=8, draws=counters)
        )
    for profile in table.profiles:
        for start in profile.starts:
            draws = {"multiprocessors": profile.multiprocessors, "memory": profile.memory}
            draws |= {f"memory-slice-{k}": 1 for k in range(start, start + profile.size)}
            placements.append(
                Placement(
                    device=f"{gpu_id}-mig-{profile.profile_id}-{start}-{profile.size}",
                    profile=profile.name,
                    start=start,
                    size=profile.size,
                    draws=draws,
                )
            )
    return MigGpu(
        id=gpu_id, node=node, model=table.product, counters=counters, placements=placements
    )


def _running_layout(rng: random.Random, item: MigGpu, busy: float) -> MigGpu:
    """``item`` with MIG placements in use, added at random while they fit, until about
    ``busy`` of its memory slices are taken (0: none)."""
    if busy <= 0:
        return item
    left = dict(item.counters)
    target = round(busy * 8)
    taken = 0
    chosen: set[str] = set()
    order = [p for p in item.placements if not p.whole]
    rng.shuffle(order)
    for placement in order:
        if taken >= target:
            break
        size = placement.size or 1
        if taken + size > target + 1:
            continue
        if all(value <= left[name] for name, value in placement.draws.items()):
            for name, value in placement.draws.items():
                left[name] -= value
            chosen.add(placement.device)
            taken += size
    placements = [p.model_copy(update={"in_use": p.device in chosen}) for p in item.placements]
    return item.model_copy(update={"placements": placements})


def random_problem(
    seed: int,
    *,
    gpus: int | None = None,
    model: str | None = None,
    load: float | None = None,
    busy: float | None = None,
) -> MigProblem:
    """One node's waiting MIG claims: a seeded random node and pods.

    Parameters
    ----------
    seed
        The seed; everything below not given is drawn from it.
    gpus
        GPUs on the node (default: 2, 4 or 8, equally likely).
    model
        A key of :data:`MODELS` (default: A100-40GB 25 %, A100-80GB 25 %, H100-80GB 50 %).
    load
        Memory slices the waiting pods ask, as a share of the node's free ones
        (default: uniform in 0.5-1.3).
    busy
        Share of each GPU's slices in use by running pods, at random places
        (default: 0 on half the GPUs, else uniform in 0.1-0.6).

    Returns
    -------
    MigProblem
        One node ``n0``: each pod has one claim of one or two requests; a request
        asks 1-3 devices of one profile (small profiles more often), a tenth of
        them with a ``firstAvailable`` fallback to a smaller profile, a tenth ask a
        whole GPU; a claim of several devices asks one GPU half of the time.

    Examples
    --------
    >>> problem = random_problem(3)
    >>> problem == random_problem(3), len(problem.pods) > 0
    (True, True)
    """
    rng = random.Random(seed)
    gpus = gpus if gpus is not None else rng.choice((2, 4, 8))
    name = model or rng.choices(list(MODELS), weights=(1, 1, 2))[0]
    table = MODELS[name]
    node: list[MigGpu] = []
    for k in range(gpus):
        share = busy if busy is not None else (0.0 if rng.random() < 0.5 else rng.uniform(0.1, 0.6))
        node.append(_running_layout(rng, gpu(f"n0-gpu-{k}", "n0", name), share))
    free_slices = sum(
        8 - sum(p.size or 0 for p in item.placements if p.in_use and not p.whole) for item in node
    )
    wanted = (load if load is not None else rng.uniform(0.5, 1.3)) * free_slices
    sizes = {profile.name: profile.size for profile in table.profiles}
    names = [profile.name for profile in table.profiles]
    pods: list[dict[str, object]] = []
    asked = 0.0
    while asked < wanted and len(pods) < 64:
        requests: list[dict[str, object]] = []
        count = 1
        for r in range(1 if rng.random() < 0.7 else 2):
            if rng.random() < 0.1:
                requests.append({"name": f"r{r}", "alternatives": [{"profile": WHOLE_GPU}]})
                asked += 8
                continue
            profile = rng.choices(names, weights=(6, 3, 4, 3, 1, 1))[0]
            count = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
            if sizes[profile] * count > 8:
                count = 1
            alternatives: list[dict[str, object]] = [{"profile": profile, "count": count}]
            smaller = [n for n in names if sizes[n] < sizes[profile]]
            if smaller and rng.random() < 0.1:
                alternatives = [
                    {"profile": profile, "count": count, "name": "big"},
                    {"profile": rng.choice(smaller), "count": count, "name": "small"},
                ]
            requests.append({"name": f"r{r}", "alternatives": alternatives})
            asked += sizes[profile] * count
        same = (len(requests) > 1 or count > 1) and rng.random() < 0.5
        pod_id = f"pod-{len(pods)}"
        pods.append(
            {
                "id": pod_id,
                "claims": [{"id": f"{pod_id}-claim", "requests": requests, "same_gpu": same}],
            }
        )
    return MigProblem.model_validate({"name": f"mig-{seed}", "gpus": node, "pods": pods})


__all__ = ["MODELS", "GpuModel", "Profile", "gpu", "random_problem"]
