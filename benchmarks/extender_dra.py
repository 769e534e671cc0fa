"""Scheduler extender on a DRA cluster: what device fit (E8) and device choice (E9) cost.

The cluster: ``--nodes`` nodes of eight dynamic-MIG A100s each (gpu-1 of the
``dynamic-mig`` fixture, a whole GPU and its 14 placements on one counter set, copied
8 times per node: 120 devices per node), with seeded random placements allocated on
about a third of the GPUs; the pods: the waiting pods of
``tests/cluster/fixtures/devicefit/waiting-mig.yaml`` (four MIG placements on one GPU,
seven 1g.5gb, one whole GPU, 4g + 3g, ...), each asked about every node, in turn,
``--rounds`` times (a new uid each time, so nothing is cached from the last pair).

It prints the median time of a filter and of a prioritize over all nodes, and per node,
per pod, with assumed bindings off (every pair sees the same cluster); then, per pod,
what the devices E9 chooses take from the servable count of the nodes (``lost``,
``models/extender.md``) against the set the search finds in the node's own order (what
a DRA scheduler takes today: the first devices that fit), summed over the nodes.

    python benchmarks/extender_dra.py --nodes 50 --rounds 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from gpuopt.cluster.devices import CounterSet, Device, ResourceClaim
from gpuopt.cluster.model import Cluster, Node
from gpuopt.extender.engine import Extender
from gpuopt.extender.wire import ExtenderArgs
from gpuopt.readers.kubectl import read_kubernetes

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "gpuopt/scenarios/kubernetes/dra/dynamic-mig"
WAITING = ROOT / "tests/cluster/fixtures/devicefit/waiting-mig.yaml"


def cluster_of(nodes: int, seed: int) -> Cluster:
    """``nodes`` 8-GPU dynamic-MIG nodes, placements allocated on about a third of the GPUs."""
    base, _ = read_kubernetes(FIXTURE, WAITING)
    source = base.nodes[0]
    counter_set = next(item for item in source.counters if item.name == "gpu-1-counter-set")
    rng = random.Random(seed)
    made, claims = [], []
    for number in range(nodes):
        name = f"mig-{number}"
        devices, sets = [], []
        for gpu in range(8):
            for item in source.devices:
                if not item.name.startswith("gpu-1"):
                    continue
                data = item.model_dump()
                data["name"] = item.name.replace("gpu-1", f"gpu-{gpu}")
                data["pool"] = name
                key = "parentUUID" if item.kind == "mig" else "uuid"
                data["attributes"][key] = f"GPU-{number}-{gpu}"
                for consumed in data["consumes_counters"]:
                    consumed["counter_set"] = f"gpu-{gpu}-counter-set"
                devices.append(Device.model_validate(data))
            sets.append(
                CounterSet.model_validate(
                    {**counter_set.model_dump(), "pool": name, "name": f"gpu-{gpu}-counter-set"}
                )
            )
            if rng.random() < 1 / 3:  # one placement of 1g or 2g at slice 0
                placement = rng.choice([f"gpu-{gpu}-mig-19-0-1", f"gpu-{gpu}-mig-14-0-2"])
                claims.append(
                    ResourceClaim.model_validate(
                        {
                            "id": f"held/{name}-{gpu}",
                            "requests": [
                                {
                                    "name": "r",
                                    "exactly": {"name": "r", "device_class": "mig.nvidia.com"},
                                }
                            ],
                            "allocated": [
                                {
                                    "request": "r",
                                    "driver": "gpu.nvidia.com",
                                    "pool": name,
                                    "device": placement,
                                }
                            ],
                            "node": name,
                        }
                    )
                )
        made.append(Node(id=name, gpus=0, cpus=64, memory=512_000, devices=devices, counters=sets))
    templates = [claim for claim in base.claims if claim.template is not None]
    small = [
        ResourceClaim.model_validate(
            {
                "id": f"bench/{profile}",
                "requests": [
                    {
                        "name": "mig",
                        "exactly": {
                            "name": "mig",
                            "device_class": "mig.nvidia.com",
                            "selectors": [
                                f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"
                            ],
                        },
                    }
                ],
            }
        )
        for profile in SMALL
    ]
    return Cluster(
        nodes=made, claims=[*claims, *templates, *small], device_classes=base.device_classes
    )


#: Profiles of the one-placement claims (``bench/<profile>``) the last pods name.
SMALL = ("1g.5gb", "2g.10gb")


def pods() -> list[dict[str, Any]]:
    """The waiting pods of the fixture, then one pod per claim of :data:`SMALL`."""
    found = [
        item
        for item in yaml.safe_load_all(WAITING.read_text())
        if item and item.get("kind") == "Pod"
    ]
    for profile in SMALL:
        found.append(
            {
                "kind": "Pod",
                "metadata": {"name": f"one-{profile}", "namespace": "bench"},
                "spec": {
                    "containers": [{"name": "c"}],
                    "resourceClaims": [{"name": "mig", "resourceClaimName": profile}],
                },
                "status": {"phase": "Pending"},
            }
        )
    return found


def _lost(extender: Extender, pod: dict[str, Any], names: list[str]) -> tuple[int, int]:
    """Servable devices lost over the nodes ``names``: E9's choice, and the search's set in
    the node's order."""
    from gpuopt.cluster.devicefit import DeviceNode
    from gpuopt.cluster.servable import servable
    from gpuopt.extender.claims import _claims_with_picks, choose_devices, resolve

    state = extender.state
    assert state is not None
    ask = extender.ask(pod, state)
    claims = resolve(state, ask.pending, ask.claim_refs).claims
    chosen = plain = 0
    for name in names:
        pos = state.node_pos[name]
        choice = choose_devices(state, ask.pending, claims, pos, state.selection())
        first = choose_devices(state, ask.pending, claims, pos, state.selection(), orders=0)
        assert choice is not None and first is not None
        chosen += int(choice.lost)
        node: DeviceNode = state.device_node(pos)
        made = _claims_with_picks(list(claims), first.picks, node, ask.pending.id)
        taken = DeviceNode(node.name, node.devices, node.counters, (*node.allocated, *made))
        after = servable(taken)
        plain += int(servable(node) - after)
    return chosen, plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    cluster = cluster_of(options.nodes, options.seed)
    extender = Extender(cluster)
    names = [node.id for node in cluster.nodes]
    print(
        f"{options.nodes} nodes x 8 dynamic-MIG GPUs ({sum(len(n.devices) for n in cluster.nodes)} "
        f"devices, {sum(1 for c in cluster.claims if c.allocated)} placements held); "
        f"{options.rounds} rounds"
    )
    for pod in pods():
        filters, scores, passed = [], [], 0
        for round_ in range(options.rounds):
            item = {
                **pod,
                "metadata": {**pod["metadata"], "uid": f"{pod['metadata']['name']}-{round_}"},
            }
            item["metadata"]["resourceVersion"] = "1"
            args = ExtenderArgs(pod=item, node_names=names, nodes=None, node_list=None)
            start = time.perf_counter()
            answer = extender.filter(args)
            filters.append(time.perf_counter() - start)
            passed = len(answer["NodeNames"])
            args = ExtenderArgs(
                pod=item, node_names=answer["NodeNames"], nodes=None, node_list=None
            )
            start = time.perf_counter()
            extender.scores(args)
            scores.append(time.perf_counter() - start)
        filter_ms = statistics.median(filters) * 1e3
        score_ms = statistics.median(scores) * 1e3
        lost = _lost(extender, item, answer["NodeNames"])
        print(
            f"{pod['metadata']['name']:>16}: filter {filter_ms:7.1f} ms "
            f"({filter_ms / len(names):.2f} per node), {passed:3d} pass; prioritize "
            f"{score_ms:7.1f} ms ({score_ms / max(passed, 1):.2f} per node passed); "
            f"lost {lost[0]} (E9) vs {lost[1]} (first fit)"
        )


if __name__ == "__main__":
    main()
