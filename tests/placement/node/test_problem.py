"""Node-level placement's problem: the JSON contract, its index view, one-sentence errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuopt.cluster.interconnect import hgx_nvswitch, pcie_two_numa
from gpuopt.errors import ProblemError
from gpuopt.placement.node.problem import load_node_problem, parse_node_problem
from gpuopt.placement.node.solution import NodePlacementResult
from tests.placement.node import legal

DESIGN_EXAMPLE: dict[str, Any] = {
    "topologies": {
        "hgx8": {"bandwidth": hgx_nvswitch(8, nvlink=300.0)},
        "pcie4": {"bandwidth": pcie_two_numa(4)},
    },
    "nodes": [
        {
            "id": "n1",
            "topology": "hgx8",
            "cpus": 96,
            "memory": 1024,
            "used_gpus": [0, 1],
            "used_cpus": 16,
            "used_memory": 128,
        }
    ],
    "request": {
        "id": "job",
        "gpus": 4,
        "min_bandwidth": 200,
        "cpus": 32,
        "memory": 256,
        "whole_node": False,
    },
}


def test_design_example_and_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "problem.json"
    path.write_text(json.dumps(DESIGN_EXAMPLE))
    problem = load_node_problem(path)
    assert problem.index.node_free_gpus.tolist() == [6]
    assert problem.index.node_cpus_free.tolist() == [80_000]
    assert problem.index.node_memory_free.tolist() == [896_000]
    result = legal(problem)
    assert (result.node, result.gpus, result.min_pair_bandwidth) == ("n1", [2, 3, 4, 5], 300.0)
    assert NodePlacementResult.model_validate_json(result.to_json()) == result
    assert parse_node_problem(json.loads(problem.to_json())) == problem
    data = json.loads(result.to_json())
    # the result contract's fields first (gpuopt.Result), then the placement's own
    assert list(data)[:7] == ["method", "status", "objective", "bound", "gap", "seconds", "notes"]
    assert list(data)[7:11] == ["node", "gpus", "min_pair_bandwidth", "reason"]
    assert (data["method"], data["status"]) == ("heuristic", "heuristic")


def bad(data: dict[str, Any]) -> str:
    with pytest.raises(ProblemError) as caught:
        parse_node_problem(data, source="p.json")
    message = str(caught.value)
    assert message.startswith("p.json: ") and message.endswith(".")
    assert message.count(". ") == 0, message  # one sentence
    return message


def changed(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(DESIGN_EXAMPLE))
    for dotted, value in changes.items():
        where: Any = data
        *path, last = dotted.split("__")
        for part in path:
            where = where[int(part)] if part.isdigit() else where[part]
        where[last] = value
    return data


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        (
            {"topologies__pcie4__bandwidth": [[0, 1], [1, 0, 1]]},
            "topology 'pcie4': bandwidth row 1",
        ),
        ({"topologies__pcie4__bandwidth": [[0, 1], [2, 0]]}, "[0][1] is 1 but [1][0] is 2"),
        ({"topologies__pcie4__bandwidth": [[0, -5], [-5, 0]]}, "[0][1] is -5"),
        ({"topologies__pcie4__bandwidth": [[0.0] * 17] * 17}, "at most 16"),
        ({"topologies__pcie4__bandwidth": []}, "topologies.pcie4.bandwidth"),
        ({"topologies__": {"bandwidth": [[0]]}}, "empty string"),
        ({"nodes__0__topology": "dgx"}, "node 'n1': topology 'dgx' is not in topologies"),
        ({"nodes__0__used_gpus": [0, 8]}, "used GPU 8 is outside 0 to 7"),
        ({"nodes__0__used_gpus": [-1]}, "used GPU -1"),
        ({"nodes__0__used_gpus": [1, 1]}, "lists GPU 1 2 times"),
        ({"nodes__0__used_cpus": 97}, "used_cpus=97 exceeds cpus=96"),
        ({"nodes__0__used_memory": 2048}, "used_memory=2048 exceeds memory=1024"),
        ({"nodes__0__memory": None}, "used_memory=128 is given but memory is not"),
        ({"nodes__0__cpus": -1}, "nodes[0].cpus"),
        ({"request__gpus": 0}, "request 'job': gpus is 0 and it has no DRA claims"),
        ({"request__gpus": 17}, "request.gpus"),
        ({"request__min_bandwidth": -1}, "request.min_bandwidth"),
        ({"request__gpus": 2.5}, "request.gpus"),
        ({"request__colour": "red"}, "request.colour is not a known field"),
        ({"nodes__0__gpus": 8}, "nodes[0].gpus is not a known field"),
    ],
)
def test_bad_input_is_one_sentence(changes: dict[str, Any], words: str) -> None:
    assert words in bad(changed(**changes))


def test_bad_documents() -> None:
    data = changed()
    data["nodes"].append(dict(data["nodes"][0]))
    assert "id 'n1' appears 2 times" in bad(data)
    assert "must be a JSON object" in bad([])  # type: ignore[arg-type]
    del data["request"]
    assert "request is required" in bad(data)
    with pytest.raises(ProblemError, match="missing"):
        load_node_problem("missing.json")


# --------------------------------------------------------------------------- the cluster


def test_the_old_file_is_a_cluster_with_the_same_answers() -> None:
    problem = parse_node_problem(DESIGN_EXAMPLE)
    (node,) = problem.cluster.nodes
    assert (node.gpus, node.cpus, node.memory) == (8, 96, 1024)
    assert node.bandwidth == hgx_nvswitch(8, nvlink=300.0)
    # one task per used GPU, named, and one holding the CPUs and memory
    tasks = [(t.id, t.gpus, t.gpu_indices, t.cpus, t.memory) for t in problem.cluster.tasks]
    assert tasks == [
        ("n1/gpu0", 1, [0], 0.0, None),
        ("n1/gpu1", 1, [1], 0.0, None),
        ("n1/held", 0, None, 16.0, 128.0),
    ]
    # written in its cluster form and read again: the same problem, the same placement
    again = parse_node_problem(json.loads(problem.to_json()))
    assert "cluster" in json.loads(problem.to_json()) and again == problem
    assert legal(again).gpus == legal(problem).gpus == [2, 3, 4, 5]


def test_named_interconnect_and_its_matrix_are_one_node() -> None:
    def cluster_problem(**node: Any) -> Any:
        return parse_node_problem(
            {
                "cluster": {
                    "nodes": [{"id": "a", "gpus": 4, "cpus": 32, **node}],
                    "tasks": [{"id": "t", "node": "a", "gpus": 1, "gpu_indices": [2]}],
                },
                "request": {"gpus": 2, "min_bandwidth": 32},
            }
        )

    named = cluster_problem(interconnect="pcie-two-numa")
    matrix = cluster_problem(bandwidth=pcie_two_numa(4))
    # PCIe 32 GB/s inside the halves {0, 1} and {2, 3}, 16 across; GPU 2 is busy
    assert legal(named).gpus == legal(matrix).gpus == [0, 1]
    assert named.index.topologies[0] is matrix.index.topologies[0]  # one cached GpuTopology


@pytest.mark.parametrize(
    ("bandwidth", "words"),
    [
        ([[0, 1], [1, 0]], "bandwidth has 2 rows but the node has 4 GPUs"),
        ([[0, 1, 1, 1], [2, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]], "must be symmetric"),
    ],
)
def test_a_bad_node_bandwidth_is_one_sentence(bandwidth: Any, words: str) -> None:
    data = {
        "cluster": {"nodes": [{"id": "a", "gpus": 4, "cpus": 8, "bandwidth": bandwidth}]},
        "request": {"gpus": 1},
    }
    message = bad(data)
    assert "node 'a'" in message and words in message


def test_nodes_the_request_may_not_use_are_outside_the_view_and_the_checker() -> None:
    from gpuopt.placement.node.solution import violations

    data = {
        "cluster": {
            "nodes": [
                {"id": "closed", "gpus": 8, "cpus": 8, "unschedulable": True},
                {"id": "cpu", "gpus": 0, "cpus": 8},
                {"id": "open", "gpus": 8, "cpus": 8},
            ],
        },
        "request": {"gpus": 1},
    }
    problem = parse_node_problem(data)
    assert problem.index.node_ids == [n.id for n in problem.nodes] == ["open"]
    assert legal(problem).node == "open"
    wrong = NodePlacementResult(node="closed", gpus=[0], request="job")
    assert violations(problem, wrong) == [
        "N1: the request may not use node 'closed': K1: node closed is cordoned (unschedulable)"
    ]
    cpu = NodePlacementResult(node="cpu", gpus=[0], request="job")
    assert violations(problem, cpu) == ["N1: node 'cpu' has no GPU and no device for the request"]
    nowhere = NodePlacementResult(node="gone", gpus=[0], request="job")
    assert violations(problem, nowhere) == ["N1: node 'gone' is not in the problem"]


def test_old_record_names_warn() -> None:
    import gpuopt.placement.node as package
    from gpuopt.placement.node import problem as module

    with pytest.warns(DeprecationWarning, match="GpuRequest is deprecated: use NodeRequest"):
        request = module.GpuRequest(gpus=2, min_bandwidth=32)
    assert isinstance(request, module.NodeRequest) and request.memory == 0.0
    with pytest.warns(DeprecationWarning, match="PlacementNode is deprecated"):
        old_node = package.PlacementNode(id="n", topology="t", cpus=8, used_gpus=[1])
    assert old_node.used_gpus == [1]
    with pytest.warns(DeprecationWarning, match="Topology is deprecated"):
        assert package.Topology(bandwidth=[[0.0]]).bandwidth == [[0.0]]
    with pytest.raises(AttributeError):
        _ = module.NoSuchName


def test_a_placement_writes_its_job_as_before() -> None:
    result = legal(parse_node_problem(DESIGN_EXAMPLE))
    job = json.loads(result.to_json())["job"]
    # the old GpuRequest's fields in its order; the cluster request's are left at default
    assert job == {
        "id": "job",
        "gpus": 4,
        "min_bandwidth": 200.0,
        "cpus": 32.0,
        "memory": 256.0,
        "whole_node": False,
        "gpu_milli": None,
        "pending": None,
    }
    assert list(job) == [*DESIGN_EXAMPLE["request"], "gpu_milli", "pending"]
    assert NodePlacementResult.model_validate_json(result.to_json()) == result


def test_from_cluster_names_a_bad_request_in_one_sentence() -> None:
    from gpuopt.cluster.model import Cluster
    from gpuopt.placement.node.problem import NodePlacementProblem

    cluster = Cluster.model_validate({"nodes": [{"id": "a", "gpus": 8, "cpus": 8}]})
    with pytest.raises(ProblemError, match=r"^request\.gpus: .*less than or equal to 16"):
        NodePlacementProblem.from_cluster(cluster, "32G")
    with pytest.raises(ProblemError, match="a share of a GPU cannot ask for a whole node"):
        NodePlacementProblem.from_cluster(cluster, "0.5G", whole_node=True)


def _reference_view(cluster: Any, request: Any) -> dict[str, Any]:
    """node_view as it was written before issue 32, node by node (the independent reason
    for the per-cluster rows): what each column must hold."""
    from gpuopt.cluster.arrival import admitted
    from gpuopt.cluster.fields import scaled
    from gpuopt.cluster.interconnect import gpu_topology, mask_of, node_bandwidth
    from gpuopt.placement.node.problem import NO_MEMORY, gpu_left_of, node_use

    allowed = admitted(cluster, request)
    nodes = [n for pos, n in enumerate(cluster.nodes) if n.gpus > 0 and allowed[pos]]
    use, index = node_use(cluster), cluster.index
    topology_pos: dict[int, int] = {}
    topologies: list[Any] = []
    topology_ids: list[str] = []
    node_topology = []
    for node in nodes:
        matrix = node.bandwidth if node.bandwidth is not None else node_bandwidth(node)
        topology = gpu_topology(matrix)
        if id(topology) not in topology_pos:
            topology_pos[id(topology)] = len(topologies)
            topologies.append(topology)
            kind = node.interconnect or "uniform"
            topology_ids.append(node.id if node.bandwidth is not None else f"{kind}-{node.gpus}")
        node_topology.append(topology_pos[id(topology)])
    width = max([node.gpus for node in nodes] + [1])
    left = [[-1] * width for _ in nodes]
    for pos, node in enumerate(nodes):
        left[pos][: node.gpus] = gpu_left_of(*use[node.id], node.gpus)
    rows = [index.node_pos[node.id] for node in nodes]
    return {
        "node_ids": [node.id for node in nodes],
        "topology_ids": topology_ids,
        "topologies": topologies,
        "node_topology": node_topology,
        "node_gpus": [node.gpus for node in nodes],
        "node_free_mask": [
            topologies[t].full_mask & ~mask_of(use[n.id][0])
            for t, n in zip(node_topology, nodes, strict=True)
        ],
        "node_free_gpus": [node.gpus - len(use[node.id][0]) for node in nodes],
        "node_cpus_free": [
            scaled(n.cpus) - int(index.node_used_cpus[r]) for n, r in zip(nodes, rows, strict=True)
        ],
        "node_memory_free": [
            NO_MEMORY if n.memory is None else scaled(n.memory) - int(index.node_used_memory[r])
            for n, r in zip(nodes, rows, strict=True)
        ],
        "node_left": left,
    }


@pytest.mark.parametrize("seed", range(6))
def test_the_view_of_a_held_cluster_is_the_node_by_node_view(seed: int) -> None:
    """One cluster asked many requests (selectors, tolerations, shares, whole nodes):
    each view taken from the rows kept on the cluster equals the node-by-node build."""
    from gpuopt.cluster import Cluster
    from gpuopt.cluster.request import Request
    from gpuopt.placement.node.generator import random_node_problem
    from gpuopt.placement.node.problem import NodePlacementProblem, node_view

    data = random_node_problem(seed, nodes=40).cluster.model_dump(exclude_defaults=True)
    for number, node in enumerate(data["nodes"]):
        node["labels"] = {"pool": "a" if number % 3 else "b"}
        if number % 5 == 1:
            node["taints"] = [{"key": "gpu", "effect": "NoSchedule"}]
        if number % 7 == 2:
            node["unschedulable"] = True
        if number % 11 == 3:  # its own matrix, equal to a named kind's or not
            node["bandwidth"] = pcie_two_numa(node["gpus"]) if node["gpus"] > 1 else [[0.0]]
            node.pop("interconnect", None)
    cluster = Cluster.model_validate(data)
    toleration = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    requests = [
        Request(gpus=2, cpus=4),
        Request(gpus=1, gpu_milli=250),
        Request(gpus=4, node_selector={"pool": "a"}),
        Request(gpus=2, tolerations=toleration),
        Request(gpus=1, node_selector={"pool": "b"}, tolerations=toleration),
        Request(gpus=2, cpus=4),  # asked again: the remembered verdicts
    ]
    for request in requests:
        view = node_view(cluster, request)
        expected = _reference_view(cluster, request)
        for name, value in expected.items():
            got = getattr(view, name)
            if name == "topologies":
                assert [id(t) for t in got] == [id(t) for t in value], name
            else:
                assert np.asarray(got).tolist() == np.asarray(value).tolist(), (name, request)
        assert view.node_pos == {node_id: pos for pos, node_id in enumerate(view.node_ids)}
        problem = NodePlacementProblem.from_cluster(cluster, request)
        assert problem.index.node_ids == expected["node_ids"]
    assert "node-placement" in cluster.views
    assert "views" not in cluster.model_copy(update={"name": "copy"}).__dict__


# ---- a pod whose devices all come through DRA claims (a MIG placement): gpus = 0 ----

MIG_FOLDER = Path(__file__).resolve().parents[3] / "gpuopt/scenarios/kubernetes/dra/dynamic-mig"
MIG_CUT = Path(__file__).with_name("fixtures") / "mig-cut.yaml"


@pytest.fixture(scope="module")
def mig_cut() -> Any:
    """gpu-0 full of MIG placements, gpu-1 holding one 1g.5gb (fixtures/mig-cut.yaml): the
    node offers no whole GPU, and gpu-1 has room for six more 1g.5gb but no 7g.40gb."""
    from gpuopt.readers.kubectl import read_kubernetes

    return read_kubernetes(MIG_FOLDER, MIG_CUT)[0]


def test_a_claims_only_pod_asks_no_whole_gpu_and_goes_where_its_claims_fit(mig_cut: Any) -> None:
    from gpuopt.cluster.request import pending_request
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.placement.node.solution import violations

    assert [(node.id, node.gpus) for node in mig_cut.nodes] == [("kind-dra-worker", 0)]
    request, _ = pending_request(mig_cut, "mig-cut/waiter")
    assert request.gpus == 0 and [claim.id for claim in request.claims] == ["mig-cut/waiter-mig"]
    problem = NodePlacementProblem.from_cluster(mig_cut, request, pending="mig-cut/waiter")
    placed = legal(problem)  # the heuristic's answer, held to the checker
    assert (placed.node, placed.gpus) == ("kind-dra-worker", [])
    assert "no whole GPU" in placed.summary()
    # the checker holds it to N2 (no GPU taken) and to its claims' fit (DF1-DF8)
    taking = placed.model_copy(update={"gpus": [0]})
    assert any(v.startswith("N1") or v.startswith("N2") for v in violations(problem, taking))
    big, _ = pending_request(mig_cut, "mig-cut/big")  # a 7g.40gb: no GPU is untouched
    refused = NodePlacementProblem.from_cluster(mig_cut, big)
    answer = legal(refused)
    assert answer.node is None
    assert "every node is left out" in answer.reason and "DF5" in answer.reason
    wrong = answer.model_copy(update={"node": "kind-dra-worker", "gpus": []})
    assert any("DF" in v for v in violations(refused, wrong))


def test_a_request_of_no_gpu_needs_claims_and_no_whole_node(mig_cut: Any) -> None:
    from gpuopt.cluster.request import Request, parse_request, pending_request
    from gpuopt.placement.node.problem import NodePlacementProblem
    from gpuopt.placement.switch.problem import TopologyProblem

    with pytest.raises(ProblemError, match="'0G8C': gpus is 0, but a request text asks"):
        parse_request("0G8C")
    assert Request(gpus=0, cpus=2).shape == "0G2C"  # CPUs alone, as preemption's requests
    request, _ = pending_request(mig_cut, "mig-cut/waiter")
    with pytest.raises(ProblemError, match=r"claims only .* whole node"):
        NodePlacementProblem.from_cluster(mig_cut, request, whole_node=True)
    with pytest.raises(ProblemError, match=r"claims only .* node level"):
        TopologyProblem.from_cluster(mig_cut, request, level="node")
    data = mig_cut.model_dump(mode="json", exclude_none=True)
    data["pending"].append({"id": "mig-cut/cpu", "gpus": 0, "cpus": 2})
    cpu_only = type(mig_cut).model_validate(data)
    with pytest.raises(ProblemError, match="no GPU and no DRA claim"):
        pending_request(cpu_only, "mig-cut/cpu")
