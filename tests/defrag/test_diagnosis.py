"""Fragmentation diagnosis: one hand-checkable snapshot per cause, request parsing,
the before/after view of a plan, and the exact split of the idle GPUs as a property
(checked against a plain-Python reference written here from the definitions)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuopt.defrag.diagnosis import (
    REQUEST_FORM,
    Diagnosis,
    Request,
    diagnose,
    diagnose_plan,
    format_table,
    parse_request,
)
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.solution import make_plan
from gpuopt.errors import ProblemError

CAUSES = (
    "usable",
    "stranded",
    "cpu_starved",
    "memory_starved",
    "resource_starved",
    "topology",
    "excluded",
    "mig_slices",
)

FAST = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def snapshot(nodes: list[dict[str, Any]], tasks: list[dict[str, Any]] | None = None) -> Cluster:
    return Cluster.model_validate({"nodes": nodes, "tasks": tasks or []})


def causes(d: Diagnosis) -> dict[str, int]:
    """The non-zero classes of the split."""
    return {name: getattr(d, name) for name in CAUSES if getattr(d, name)}


def assert_split(d: Diagnosis) -> None:
    assert d.idle_gpus == sum(getattr(d, name) for name in CAUSES)
    assert all(getattr(d, name) >= 0 for name in CAUSES)
    assert d.idle_gpus == d.total_gpus - d.used_gpus
    assert d.usable == d.requests_servable * d.request.same_asw * d.request.gpus


# ---------------------------------------------------------------- request parsing


@pytest.mark.parametrize(
    ("text", "gpus", "cpus", "memory"),
    [
        ("8G64C", 8, 64.0, None),
        ("8G64C256M", 8, 64.0, 256.0),
        ("4G", 4, 0.0, None),
        ("8g64c256m", 8, 64.0, 256.0),
        ("  8 G 64 C \t", 8, 64.0, None),
        ("64C8G", 8, 64.0, None),
        ("1G0.5C", 1, 0.5, None),
        ("2G.25C1.5M", 2, 0.25, 1.5),
        ("08G", 8, 0.0, None),
    ],
)
def test_parse_request_accepts(text: str, gpus: int, cpus: float, memory: float | None) -> None:
    request = parse_request(text)
    assert (request.gpus, request.cpus, request.memory) == (gpus, cpus, memory)
    assert request.same_asw == 1 and request.node_selector == {}
    assert parse_request(request.shape) == request


@pytest.mark.parametrize(
    "text", ["", "   ", "8", "G8", "8G64", "8G 64", "8X", "8G8G", "8G-1C", "1e3G", "8G64C!", "abc"]
)
def test_parse_request_rejects_bad_text(text: str) -> None:
    with pytest.raises(ProblemError) as caught:
        parse_request(text)
    message = str(caught.value)
    assert repr(text) in message and REQUEST_FORM in message
    assert message.endswith(".") and "\n" not in message


@pytest.mark.parametrize(
    ("text", "kwargs", "field"),
    [
        ("1.5G", {}, "whole number of GPUs"),
        ("0G", {}, "gpus"),
        ("2000G", {}, "gpus"),
        ("4G", {"same_asw": 0}, "same_asw"),
        ("4G", {"node_selector": {"zone": []}}, "node_selector.zone"),
    ],
)
def test_parse_request_rejects_bad_values(text: str, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ProblemError, match=f"request '{text}'.*{field}"):
        parse_request(text, **kwargs)


def test_request_text_and_options() -> None:
    request = parse_request("8g64c", same_asw=2, node_selector={"gpu_model": ["H20", "A100"]})
    assert request.shape == "8G64C" and str(request) == "8G64C x2 per switch"
    assert request.node_selector == {"gpu_model": ["H20", "A100"]}
    assert parse_request("1G0.5C256M").shape == "1G0.5C256M"


# ---------------------------------------------------------------- one snapshot per cause


def test_stranded() -> None:
    # 8 GPUs, 5 held: 3 free, too few for a 4-GPU copy.
    problem = snapshot(
        [{"id": "a", "gpus": 8, "cpus": 64}], [{"id": "t", "node": "a", "gpus": 5, "cpus": 4}]
    )
    d = diagnose(problem, "4G")
    assert_split(d)
    assert (d.idle_gpus, causes(d), d.requests_servable) == (3, {"stranded": 3}, 0)
    assert (d.fragmented_nodes, d.idle_nodes) == (1, 0)
    # A 1-GPU request uses all three.
    assert causes(diagnose(problem, "1G")) == {"usable": 3}


def test_cpu_starved() -> None:
    # Node a: 8 free GPUs but a CPU-only task holds 60 of 64 CPUs.
    # Node b: 8 free GPUs and 12 free CPUs: one 4G8C copy, the other 4 GPUs lack CPUs.
    problem = snapshot(
        [{"id": "a", "gpus": 8, "cpus": 64}, {"id": "b", "gpus": 8, "cpus": 64}],
        [
            {"id": "cpu-a", "node": "a", "gpus": 0, "cpus": 60},
            {"id": "cpu-b", "node": "b", "gpus": 0, "cpus": 52},
        ],
    )
    d = diagnose(problem, "4G8C")
    assert_split(d)
    assert causes(d) == {"usable": 4, "cpu_starved": 12}
    assert d.requests_servable == 1
    # Neither node is fragmented by GPUs, and neither is idle (both run a task).
    assert (d.fragmented_nodes, d.idle_nodes) == (0, 0)
    # Without a CPU need every free GPU is usable.
    assert causes(diagnose(problem, "4G")) == {"usable": 16}


def test_cpus_are_compared_exactly() -> None:
    # 0.3 - 0.1 - 0.1 is 0.09999... in floats; in thousandths it is exactly 100.
    problem = snapshot(
        [{"id": "a", "gpus": 2, "cpus": 0.3}],
        [
            {"id": "t1", "node": "a", "gpus": 0, "cpus": 0.1},
            {"id": "t2", "node": "a", "gpus": 0, "cpus": 0.1},
        ],
    )
    assert causes(diagnose(problem, "1G0.1C")) == {"usable": 1, "cpu_starved": 1}


def test_memory_starved() -> None:
    nodes = [
        {"id": "a", "gpus": 8, "cpus": 64, "memory": 100},
        {"id": "b", "gpus": 8, "cpus": 64},  # states no memory: memory never binds on it
    ]
    tasks = [{"id": "t", "node": "a", "gpus": 0, "cpus": 1, "memory": 70}]
    d = diagnose(snapshot(nodes, tasks), "4G20M")
    assert_split(d)
    # a: 30 memory free -> one copy; b: two copies.
    assert causes(d) == {"usable": 12, "memory_starved": 4}
    assert d.cpu_starved == 0


def test_starved_gpus_go_to_the_tightest_resource() -> None:
    nodes = [{"id": "a", "gpus": 8, "cpus": 16, "memory": 64}]
    # 4G8C32M: CPUs allow 2 copies, memory 2: a tie, counted as CPU-starved.
    tie = snapshot(nodes, [{"id": "t", "node": "a", "gpus": 0, "cpus": 8, "memory": 32}])
    assert causes(diagnose(tie, "4G8C32M")) == {"usable": 4, "cpu_starved": 4}
    # Memory the tighter: 16 free CPUs (2 copies), 32 free memory (1 copy).
    memory = snapshot(nodes, [{"id": "t", "node": "a", "gpus": 0, "memory": 32}])
    assert causes(diagnose(memory, "4G8C32M")) == {"usable": 4, "memory_starved": 4}
    # Both short: CPUs allow no copy, memory one: all eight GPUs go to CPU.
    both = snapshot(nodes, [{"id": "t", "node": "a", "gpus": 0, "cpus": 12, "memory": 32}])
    assert causes(diagnose(both, "4G8C32M")) == {"cpu_starved": 8}


def test_pod_slots_and_extended_resources_starve_gpus() -> None:
    """K12 and K4: a copy asks a pod slot where some node offers them. a (8 free GPUs)
    has 1 slot left of 3: one 2-GPU copy, 6 GPUs short of slots; b states no limit: four
    copies. With the shape asking 2 of an FPGA a offers 3 of (1 held), one copy there
    too; on b, which offers none, every GPU is short of it."""
    nodes = [
        {"id": "a", "gpus": 8, "cpus": 64, "resources": {"pods": 3, "example.com/fpga": 3}},
        {"id": "b", "gpus": 8, "cpus": 64},
    ]
    tasks = [
        {"id": "t0", "node": "a", "gpus": 0, "resources": {"pods": 1, "example.com/fpga": 1}},
        {"id": "t1", "node": "a", "gpus": 0, "resources": {"pods": 1}},
    ]
    problem = snapshot(nodes, tasks)
    d = diagnose(problem, "2G")
    assert_split(d)
    assert causes(d) == {"usable": 10, "resource_starved": 6}
    assert d.requests_servable == 5
    fpga = diagnose(problem, Request(gpus=2, resources={"example.com/fpga": 2}))
    assert_split(fpga)
    assert causes(fpga) == {"usable": 2, "resource_starved": 14}
    # the tie goes to CPUs: 4 free CPUs on a (one 4-CPU copy), one slot left
    tight = snapshot(
        [{"id": "a", "gpus": 8, "cpus": 8, "resources": {"pods": 2}}],
        [{"id": "t", "node": "a", "gpus": 0, "cpus": 4, "resources": {"pods": 1}}],
    )
    assert causes(diagnose(tight, "2G4C")) == {"usable": 2, "cpu_starved": 6}


def test_topology_same_asw() -> None:
    nodes = [
        {"id": "a", "gpus": 8, "cpus": 64, "asw": "s1"},
        {"id": "b", "gpus": 8, "cpus": 64, "asw": "s1"},
        {"id": "c", "gpus": 8, "cpus": 64, "asw": "s2"},
        {"id": "d", "gpus": 8, "cpus": 64},  # no switch: a switch of its own
        {"id": "e", "gpus": 8, "cpus": 64, "asw": "s2"},
    ]
    tasks = [{"id": "t", "node": "e", "gpus": 1, "cpus": 1}]
    problem = snapshot(nodes, tasks)
    one = diagnose(problem, "8G64C")
    assert causes(one) == {"usable": 32, "stranded": 7}
    assert one.requests_servable == 4
    two = diagnose(problem, parse_request("8G64C", same_asw=2), detail=True)
    assert_split(two)
    # s1 holds one group; c (s2, e is partly used) and d (alone) cannot pair up.
    assert causes(two) == {"usable": 16, "stranded": 7, "topology": 16}
    assert two.requests_servable == 1
    by_switch = {s.asw: s for s in two.switches or []}
    assert list(by_switch) == ["s1", "s2", None]
    assert (by_switch["s1"].usable, by_switch["s1"].requests_servable) == (16, 1)
    assert (by_switch["s2"].nodes, by_switch["s2"].topology, by_switch["s2"].stranded) == (2, 8, 7)
    assert (by_switch[None].nodes, by_switch[None].topology) == (1, 8)


def test_topology_copies_may_share_a_node() -> None:
    # One switchless 16-GPU node holds two 4G copies: a group of 2 fits on it, the
    # remaining two copies make a second group.  Three copies of 3 would leave one.
    problem = snapshot([{"id": "big", "gpus": 16, "cpus": 64}])
    d = diagnose(problem, parse_request("4G", same_asw=2))
    assert (causes(d), d.requests_servable) == ({"usable": 16}, 2)
    d = diagnose(problem, parse_request("4G", same_asw=3))
    assert (causes(d), d.requests_servable) == ({"usable": 12, "topology": 4}, 1)


def test_fractional() -> None:
    problem = snapshot(
        [{"id": "a", "gpus": 4, "cpus": 16}],
        [
            {"id": "s1", "node": "a", "gpus": 1, "gpu_milli": 250},
            {"id": "s2", "node": "a", "gpus": 1, "gpu_milli": 500},
            {"id": "w", "node": "a", "gpus": 1},
        ],
    )
    d = diagnose(problem, "1G")
    assert_split(d)
    # C7: both shares sit on one GPU (250 + 500), which keeps 0.25 GPU unused; two GPUs idle.
    assert (d.used_gpus, d.idle_gpus, causes(d)) == (2, 2, {"usable": 2})
    assert d.fractional == pytest.approx(0.25)
    assert d.shared_gpus == 1


def test_excluded_by_selector() -> None:
    nodes = [
        {"id": "h1", "gpus": 8, "cpus": 64, "labels": {"gpu_model": "H20"}},
        {"id": "a1", "gpus": 8, "cpus": 64, "labels": {"gpu_model": "A100"}},
        {"id": "x", "gpus": 8, "cpus": 64},
    ]
    tasks = [{"id": "t", "node": "a1", "gpus": 2, "cpus": 8}]
    problem = snapshot(nodes, tasks)
    h20 = diagnose(problem, parse_request("4G", node_selector={"gpu_model": "H20"}))
    assert_split(h20)
    assert causes(h20) == {"usable": 8, "excluded": 14}
    either = diagnose(problem, parse_request("4G", node_selector={"gpu_model": ["H20", "A100"]}))
    assert causes(either) == {"usable": 12, "stranded": 2, "excluded": 8}


def test_empty_and_gpu_less_snapshots() -> None:
    empty = diagnose(snapshot([]), "1G")
    assert (empty.nodes, empty.total_gpus, empty.idle_gpus, empty.requests_servable) == (0, 0, 0, 0)
    cpu_only = diagnose(snapshot([{"id": "c", "gpus": 0, "cpus": 8}]), "1G1C")
    assert (cpu_only.idle_gpus, cpu_only.idle_nodes, cpu_only.fragmented_nodes) == (0, 1, 0)


# ---------------------------------------------------------------- plans, output


def test_diagnose_plan_before_and_after() -> None:
    problem = snapshot(
        [{"id": "a", "gpus": 8, "cpus": 64}, {"id": "b", "gpus": 8, "cpus": 64}],
        [
            {"id": "t1", "node": "a", "gpus": 4, "cpus": 8},
            {"id": "t2", "node": "b", "gpus": 4, "cpus": 8},
        ],
    )
    plan = make_plan(problem, "manual", [("t1", "a", "b")], seconds=0.0)
    result = diagnose_plan(problem, plan, "8G32C")
    before, after = result["before"], result["after"]
    assert list(result) == ["before", "after"]
    assert (causes(before), before.requests_servable) == ({"stranded": 8}, 0)
    assert (causes(after), after.requests_servable) == ({"usable": 8}, 1)
    assert (before.fragmented_nodes, after.fragmented_nodes) == (2, 0)
    assert (before.idle_nodes, after.idle_nodes) == (0, 1)
    metrics = plan.metrics
    assert (before.fragmented_nodes, after.fragmented_nodes) == (
        metrics.fragmented_before,
        metrics.fragmented_after,
    )
    assert (before.idle_nodes, after.idle_nodes) == (
        metrics.idle_nodes_before,
        metrics.idle_nodes_after,
    )
    # The same with a plain list of moves.
    assert diagnose_plan(problem, plan.moves, "8G32C") == result

    rows = format_table(result, change=True)
    assert rows[0] == ("request 8G32C", "before", "after", "change")
    table = {row[0]: row[1:] for row in rows[1:]}
    assert table["  usable"] == ("0", "8", "+8")
    assert table["  stranded"] == ("8", "0", "-8")
    assert table["fractional (unused share, GPUs)"] == ("0.000", "0.000", "+0.000")
    assert all(len(row) == 4 for row in rows)
    with pytest.raises(ValueError, match="exactly two"):
        format_table({"before": before}, change=True)


def test_json_round_trip() -> None:
    problem = snapshot(
        [{"id": "a", "gpus": 8, "cpus": 64, "asw": "s1", "labels": {"zone": "z1"}}],
        [{"id": "s", "node": "a", "gpus": 1, "gpu_milli": 300}],
    )
    request = parse_request("2G4C", same_asw=2, node_selector={"zone": ["z1"]})
    plain = diagnose(problem, request)
    data = json.loads(plain.to_json())
    assert data == plain.to_dict() and "switches" not in data
    assert data["request"]["node_selector"] == {"zone": ["z1"]}
    assert Diagnosis.model_validate(data) == plain
    detailed = diagnose(problem, request, detail=True)
    data = json.loads(detailed.to_json(indent=None))
    assert data["switches"][0]["asw"] == "s1"
    assert Diagnosis.model_validate_json(detailed.to_json()) == detailed


# ---------------------------------------------------------------- the exact split


def fewest_gpus(shares: list[int]) -> int:
    """The fewest GPUs that hold ``shares`` (thousandths), by trying every assignment."""
    count = -(-sum(shares) // 1000)
    while not any(
        all(
            sum(s for s, g in zip(shares, where, strict=True) if g == gpu) <= 1000
            for gpu in set(where)
        )
        for where in itertools.product(range(count), repeat=len(shares))
    ):
        count += 1
    return count


def used_gpus(tasks: list[Any]) -> tuple[int, int]:
    """C7 by definition: whole GPUs plus the fewest GPUs the shares fit on; what those keep."""
    shares = [t.gpu_milli for t in tasks if t.gpu_milli is not None]
    bins = fewest_gpus(shares)
    return sum(t.gpus for t in tasks if t.gpu_milli is None) + bins, bins * 1000 - sum(shares)


def reference(problem: Cluster, request: Request) -> dict[str, int]:
    """The split from the definitions, per node in plain Python (all amounts in thousandths)."""
    out = dict.fromkeys((*CAUSES, "idle_gpus", "requests_servable"), 0)
    slots_of: dict[str, int] = {}
    for node in problem.nodes:
        mine = [t for t in problem.tasks if t.node == node.id]
        free = node.gpus - used_gpus(mine)[0]
        free_cpus = round(node.cpus * 1000) - sum(round(t.cpus * 1000) for t in mine)
        out["idle_gpus"] += free
        labels = node.labels
        wanted = request.node_selector
        if not all(
            key in labels and (labels[key] == v if isinstance(v, str) else labels[key] in v)
            for key, v in wanted.items()
        ):
            out["excluded"] += free
            continue
        k_gpu = free // request.gpus
        need = round(request.cpus * 1000)
        k_cpu = free_cpus // need if need else k_gpu
        k_mem = k_gpu
        if request.memory and node.memory is not None:
            free_mem = round(node.memory * 1000) - sum(round((t.memory or 0) * 1000) for t in mine)
            k_mem = free_mem // round(request.memory * 1000)
        # K4 and K12: a copy asks the request's extended resources and, where some node
        # offers pod slots, one slot; a node that lists no slots has no limit
        asked = dict(request.resources)
        if any("pods" in other.resources for other in problem.nodes):
            asked.setdefault("pods", 1)
        k_res = k_gpu
        for name, need in asked.items():
            if need > 0:
                limit = node.resources.get(name, 10**9 if name == "pods" else 0)
                left = limit - sum(t.resources.get(name, 0) for t in mine)
                k_res = min(k_res, max(0, left) // need)
        k = min(k_gpu, k_cpu, k_mem, k_res)
        out["stranded"] += free - k_gpu * request.gpus
        if k_cpu <= k_mem and k_cpu <= k_res:
            tightest = "cpu_starved"
        else:
            tightest = "memory_starved" if k_mem <= k_res else "resource_starved"
        out[tightest] += (k_gpu - k) * request.gpus
        switch = node.asw if node.asw is not None else f"\0{node.id}"
        slots_of[switch] = slots_of.get(switch, 0) + k
    group = request.same_asw
    for slots in slots_of.values():
        out["requests_servable"] += slots // group
        out["usable"] += slots // group * group * request.gpus
        out["topology"] += slots % group * request.gpus
    return out


@st.composite
def snapshots(draw: st.DrawFn) -> Cluster:
    nodes: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    for number in range(draw(st.integers(0, 7))):
        node: dict[str, Any] = {
            "id": f"n{number}",
            "gpus": draw(st.integers(0, 8)),
            "cpus": draw(st.integers(0, 64)) / 2,
            "asw": draw(st.sampled_from([None, "s1", "s2", "s3"])),
        }
        if draw(st.booleans()):
            node["memory"] = float(draw(st.integers(0, 128)))
        if draw(st.booleans()):
            node["labels"] = {"zone": draw(st.sampled_from(["z1", "z2"]))}
        if draw(st.booleans()):  # pod-count limits (K12) and an extended resource (K4)
            node["resources"] = {
                name: draw(st.integers(0, 4))
                for name in draw(st.sets(st.sampled_from(["pods", "example.com/fpga"])))
            }
        nodes.append(node)
        gpus, cpus, memory = node["gpus"], node["cpus"], node.get("memory", 1000.0)
        left = dict(node.get("resources", {}))
        for _ in range(draw(st.integers(0, 4))):
            task: dict[str, Any] = {
                "id": f"t{len(tasks)}",
                "node": node["id"],
                "gpus": draw(st.integers(0, gpus)),
                "cpus": draw(st.integers(0, int(cpus * 2))) / 2,
                "memory": float(draw(st.integers(0, int(memory)))),
            }
            if task["gpus"] == 1 and draw(st.booleans()):
                task["gpu_milli"] = draw(st.integers(1, 999))
            if draw(st.booleans()):  # within what the node offers (a node stating no
                # pods has no limit; one stating no FPGA has none)
                offer = node.get("resources", {})
                taken = {name: 1 for name in ("pods", "example.com/fpga") if left.get(name, 1)}
                if "example.com/fpga" not in offer or not draw(st.booleans()):
                    taken.pop("example.com/fpga", None)
                for name in taken:
                    if name in left:
                        left[name] -= 1
                task["resources"] = taken
            gpus, cpus, memory = gpus - task["gpus"], cpus - task["cpus"], memory - task["memory"]
            tasks.append(task)
    return snapshot(nodes, tasks)


@st.composite
def requests(draw: st.DrawFn) -> Request:
    return Request(
        gpus=draw(st.integers(1, 5)),
        cpus=draw(st.just(0) | st.integers(0, 24)) / 2,  # no CPU need half of the time
        memory=draw(st.none() | st.integers(0, 48).map(float)),
        same_asw=draw(st.integers(1, 3)),
        node_selector=draw(st.sampled_from([{}, {"zone": "z1"}, {"zone": ["z1", "z2"]}])),
        resources=draw(st.sampled_from([{}, {"example.com/fpga": 1}, {"example.com/fpga": 2}])),
    )


@FAST
@given(problem=snapshots(), request=requests(), detail=st.booleans())
def test_idle_gpus_split_exactly(problem: Cluster, request: Request, detail: bool) -> None:
    d = diagnose(problem, request, detail=detail)
    assert_split(d)
    expected = reference(problem, request)
    assert {key: getattr(d, key) for key in expected} == expected
    kept = [used_gpus([t for t in problem.tasks if t.node == n.id])[1] for n in problem.nodes]
    assert d.fractional == pytest.approx(sum(kept) / 1000)
    if detail:
        switches = d.switches or []
        assert sum(s.nodes for s in switches) == d.nodes
        for key in (*CAUSES, "idle_gpus", "requests_servable"):
            assert sum(getattr(s, key) for s in switches) == getattr(d, key)
        for s in switches:
            assert s.idle_gpus == sum(getattr(s, name) for name in CAUSES)
    else:
        assert d.switches is None


def test_mig_slices_are_never_whole_gpus() -> None:
    """A node in MIG single strategy advertises slices: idle, but no whole-GPU request's."""
    problem = Cluster.model_validate(
        {
            "nodes": [
                {"id": "mig", "gpus": 7, "cpus": 64, "labels": {"gpuopt.io/mig": "single"}},
                {"id": "whole", "gpus": 8, "cpus": 64},
            ],
            "tasks": [{"id": "t", "node": "mig", "gpus": 1}],
        }
    )
    d = diagnose(problem, "1G")
    assert (d.idle_gpus, d.mig_slices, d.usable, d.requests_servable) == (14, 6, 8, 8)
    assert d.idle_gpus == sum(getattr(d, name) for name in CAUSES)
