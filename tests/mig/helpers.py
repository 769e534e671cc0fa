"""Tiny MIG problems for the brute force: GPUs of 4 memory slices and 3 compute slices.

The tiny table: ``1s`` (1 slice, 1 compute) at slices 0-3, ``2s`` (2 slices, 2 compute)
at 0 and 2, ``4s`` (4 slices, 3 compute) at 0, and the whole GPU. Four ``1s`` need 4
compute of 3: the counters bind as an A100's 7 compute slices over 8 memory slices do.
"""

from __future__ import annotations

import random
from typing import Any

from gpuopt.mig.problem import WHOLE_GPU, MigProblem

#: profile -> (memory slices, compute, starts)
TABLE = {"1s": (1, 1, (0, 1, 2, 3)), "2s": (2, 2, (0, 2)), "4s": (4, 3, (0,))}


def tiny_gpu(gpu_id: str, node: str, in_use: tuple[str, ...] = ()) -> dict[str, Any]:
    """A tiny GPU as data; ``in_use`` names its devices in use (``1s@0``, ``gpu``, ...)."""
    counters = {"compute": 3, **{f"slice-{k}": 1 for k in range(4)}}
    placements = [
        {
            "device": f"{gpu_id}/gpu",
            "profile": WHOLE_GPU,
            "whole": True,
            "start": 0,
            "size": 4,
            "draws": counters,
            "in_use": "gpu" in in_use,
        }
    ]
    for profile, (size, compute, starts) in TABLE.items():
        for start in starts:
            name = f"{profile}@{start}"
            draws = {"compute": compute, **{f"slice-{k}": 1 for k in range(start, start + size)}}
            placements.append(
                {
                    "device": f"{gpu_id}/{name}",
                    "profile": profile,
                    "start": start,
                    "size": size,
                    "draws": draws,
                    "in_use": name in in_use,
                }
            )
    return {"id": gpu_id, "node": node, "counters": counters, "placements": placements}


def tiny_problem(gpus: list[dict[str, Any]], pods: list[dict[str, Any]]) -> MigProblem:
    """A problem of tiny GPUs and pods given as data."""
    return MigProblem(name="tiny", gpus=gpus, pods=pods)


def pod(
    pod_id: str, *requests: tuple[str, int], same_gpu: bool = False, **fields: Any
) -> dict[str, Any]:
    """A pod of one claim; each request ``(profile, count)`` is made ``exactly``."""
    return {
        "id": pod_id,
        "claims": [
            {
                "id": f"{pod_id}-c",
                "requests": [
                    {"name": f"r{k}", "alternatives": [{"profile": profile, "count": count}]}
                    for k, (profile, count) in enumerate(requests)
                ],
                "same_gpu": same_gpu,
            }
        ],
        **fields,
    }


def random_tiny(seed: int) -> MigProblem:
    """A seeded tiny problem: 1-2 nodes of 1-2 GPUs (some devices in use), 2-3 pods of
    one or two claims, weights 1-3, some ``firstAvailable``, ``same_gpu`` and node limits."""
    rng = random.Random(seed)
    gpus = []
    nodes = [f"n{k}" for k in range(rng.choice((1, 2)))]
    for node in nodes:
        for g in range(rng.choice((1, 2)) if len(nodes) == 1 else 1):
            busy: tuple[str, ...] = ()
            if rng.random() < 0.4:
                busy = (rng.choice(["1s@0", "1s@3", "2s@2", "1s@1"]),)
            gpus.append(tiny_gpu(f"{node}-g{g}", node, busy))
    pods = []
    for q in range(rng.choice((2, 3))):
        claims = []
        for c in range(1 if rng.random() < 0.8 else 2):
            requests = []
            for r in range(1 if rng.random() < 0.7 else 2):
                profile = rng.choices([*TABLE, WHOLE_GPU], weights=(5, 3, 1, 1))[0]
                count = 1 if profile in ("4s", WHOLE_GPU) else rng.choice((1, 1, 2))
                alternatives: list[dict[str, Any]] = [{"profile": profile, "count": count}]
                if rng.random() < 0.2:
                    alternatives = [
                        {"profile": profile, "count": count, "name": "a"},
                        {"profile": rng.choice(list(TABLE)), "count": 1, "name": "b"},
                    ]
                requests.append({"name": f"r{r}", "alternatives": alternatives})
            claims.append(
                {"id": f"p{q}-c{c}", "requests": requests, "same_gpu": rng.random() < 0.3}
            )
        data: dict[str, Any] = {"id": f"p{q}", "weight": rng.choice((1, 1, 2, 3)), "claims": claims}
        if len(nodes) > 1 and rng.random() < 0.3:
            data["nodes"] = [rng.choice(nodes)]
        pods.append(data)
    return tiny_problem(gpus, pods)


def as_cluster(problem: MigProblem) -> Any:
    """``problem`` written as a snapshot with DRA facts, the way NVIDIA's driver publishes
    dynamic MIG: per GPU a counter set and its devices (``type``, ``profile``,
    ``parentUUID``), the devices in use allocated to one running claim, each waiting pod's
    claims with a profile selector (``firstAvailable`` kept, ``same_gpu`` as
    ``matchAttribute`` on ``parentUUID``). One node per node of the problem."""
    from gpuopt.cluster.model import Cluster

    driver = "gpu.nvidia.com"
    nodes: dict[str, dict[str, Any]] = {}
    used: list[dict[str, str]] = []
    for g, item in enumerate(problem.gpus):
        node = nodes.setdefault(
            item.node, {"id": item.node, "gpus": 0, "cpus": 64, "devices": [], "counters": []}
        )
        counter_set = f"{item.id}-set"
        node["counters"].append(
            {
                "driver": driver,
                "pool": item.node,
                "name": counter_set,
                "counters": {k: str(v) for k, v in item.counters.items()},
            }
        )
        for placement in item.placements:
            attributes: dict[str, Any] = {"type": "gpu" if placement.whole else "mig"}
            if placement.whole:
                attributes["uuid"] = f"uuid-{g}"
            else:
                attributes |= {"profile": placement.profile, "parentUUID": f"uuid-{g}"}
            node["devices"].append(
                {
                    "name": placement.device,
                    "driver": driver,
                    "pool": item.node,
                    "attributes": attributes,
                    "consumes_counters": [
                        {
                            "counter_set": counter_set,
                            "counters": {k: str(v) for k, v in placement.draws.items()},
                        }
                    ],
                }
            )
            if placement.in_use:
                used.append(
                    {
                        "request": "r",
                        "driver": driver,
                        "pool": item.node,
                        "device": placement.device,
                    }
                )
    claims: list[dict[str, Any]] = []
    if used:
        claims.append(
            {
                "id": "running/claim",
                "requests": [
                    {"name": "r", "exactly": {"name": "r", "device_class": "mig.nvidia.com"}}
                ],
                "allocated": used,
                "node": problem.gpus[0].node,
            }
        )
    pending = []
    for pod in problem.pods:
        pending.append({"id": pod.id, "gpus": 0})
        for claim in pod.claims:
            requests = []
            for request in claim.requests:
                subs = []
                for alternative in request.alternatives:
                    sub: dict[str, Any] = {
                        "name": alternative.name or request.name,
                        "count": alternative.count,
                    }
                    if alternative.profile == WHOLE_GPU:
                        sub["device_class"] = "gpu.nvidia.com"
                    else:
                        sub["device_class"] = "mig.nvidia.com"
                        sub["selectors"] = [
                            f"device.attributes['{driver}'].profile == '{alternative.profile}'"
                        ]
                    subs.append(sub)
                if len(subs) == 1 and request.alternatives[0].name is None:
                    requests.append({"name": request.name, "exactly": subs[0]})
                else:
                    requests.append({"name": request.name, "first_available": subs})
            constraints = [{"match_attribute": f"{driver}/parentUUID"}] if claim.same_gpu else []
            claims.append(
                {"id": claim.id, "requests": requests, "constraints": constraints, "pods": [pod.id]}
            )
    classes = [
        {
            "name": "gpu.nvidia.com",
            "selectors": [
                f"device.driver == '{driver}' && device.attributes['{driver}'].type == 'gpu'"
            ],
        },
        {
            "name": "mig.nvidia.com",
            "selectors": [
                f"device.driver == '{driver}' && device.attributes['{driver}'].type == 'mig'"
            ],
        },
    ]
    return Cluster.model_validate(
        {
            "name": problem.name,
            "nodes": list(nodes.values()),
            "pending": pending,
            "claims": claims,
            "device_classes": classes,
        }
    )


def assert_device_fit(cluster: Any, problem: MigProblem, result: Any) -> None:
    """Every served pod's picks pass the DF checker (``gpuopt.cluster.devicecheck``) on
    its node's DeviceNode, pod after pod, each one's claims allocated before the next."""
    from gpuopt.cluster.devicecheck import violations as device_violations
    from gpuopt.cluster.devicefit import DeviceNode, Pick, Selection, device_node
    from gpuopt.cluster.devices import AllocatedDevice

    selection = Selection(cluster.device_classes)
    index = problem.index
    claims = {claim.id: claim for claim in cluster.claims}
    allocated: dict[str, list[Any]] = {}
    for pod in problem.pods:
        mine = [claims[claim.id] for claim in pod.claims]
        ids = {claim.id for claim in mine}
        picks = [p for p in result.picks if p.claim in ids]
        if not picks:
            continue
        node_id = index.node_ids[index.node[index.device_of[picks[0].device]]]
        here = device_node(cluster, node_id)
        before = allocated.setdefault(node_id, list(here.allocated))
        node = DeviceNode(here.name, here.devices, here.counters, tuple(before))
        found = [Pick(claim=p.claim, request=p.request, device=p.device) for p in picks]
        broken = device_violations(node, mine, selection, found)
        assert broken == [], (pod.id, broken)
        for claim in mine:
            results = []
            for p in picks:
                if p.claim == claim.id:
                    driver, pool_and_name = p.device.split("/", 1)
                    pool, name = pool_and_name.rsplit("/", 1)
                    results.append(
                        AllocatedDevice(request=p.request, driver=driver, pool=pool, device=name)
                    )
            before.append(claim.model_copy(update={"allocated": results}))
