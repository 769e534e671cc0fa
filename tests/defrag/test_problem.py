"""The snapshot model: validation messages, JSON contract, index view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuopt.defrag.problem import Cluster, load_cluster, parse_cluster, selector_matches
from gpuopt.errors import ProblemError
from tests.defrag.conftest import CHAIN


def snapshot_dict(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "nodes": [
            {
                "id": "n1",
                "gpus": 8,
                "cpus": 96,
                "memory": 512,
                "asw": "s1",
                "labels": {"gpu_model": "H20"},
            },
            {"id": "n2", "gpus": 8, "cpus": 96, "asw": "s1", "labels": {"gpu_model": "A100"}},
        ],
        "tasks": [
            {
                "id": "t1",
                "node": "n1",
                "gpus": 2,
                "cpus": 16,
                "memory": 64,
                "priority": "HP",
                "node_selector": {"gpu_model": "H20"},
                "anti_affinity": "svc-a",
            },
            {"id": "t2", "node": "n2", "gpus": 4, "cpus": 8, "anti_affinity": "svc-a"},
        ],
    }
    data.update(changes)
    return data


def test_design_example_is_accepted() -> None:
    problem = parse_cluster(snapshot_dict())
    assert [n.id for n in problem.nodes] == ["n1", "n2"]
    assert problem.index.node_used_gpus.tolist() == [2, 4]
    assert problem.index.task_cpus.tolist() == [16000, 8000]
    assert problem.index.node_memory.tolist() == [512000, -1]
    assert problem.index.group_ids == ["svc-a"]


def bad(data: dict[str, Any]) -> str:
    with pytest.raises(ProblemError) as caught:
        parse_cluster(data, source="snap.json")
    message = str(caught.value)
    assert message.startswith("snap.json: ") and message.endswith(".")
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"nodes": [{"id": "n1", "gpus": 8, "cpus": 1}] * 2}, "id 'n1' appears 2 times"),
        ({"tasks": [{"id": "t", "node": "zz", "gpus": 1}]}, "node 'zz' is not in nodes"),
        ({"tasks": [{"id": "t", "node": "n2", "gpus": 9}]}, "hold 9 GPUs but it has 8"),
        ({"tasks": [{"id": "t", "node": "n2", "gpus": 1, "cpus": 97}]}, "hold 97 CPUs"),
        ({"tasks": [{"id": "t", "node": "n1", "gpus": 1, "memory": 513}]}, "hold 513 memory"),
        ({"tasks": [{"id": "t", "node": "n2", "gpus": 1}] * 2}, "id 't' appears 2 times"),
        (
            {
                "tasks": [
                    {"id": "t", "node": "n2", "gpus": 1, "node_selector": {"gpu_model": "H20"}}
                ]
            },
            "does not match its node_selector",
        ),
        (
            {
                "tasks": [
                    {"id": f"t{i}", "node": "n1", "gpus": 1, "anti_affinity": "g"} for i in range(2)
                ]
            },
            "already runs a task of anti_affinity group 'g'",
        ),
        ({"tasks": [{"id": "t", "node": "n1", "gpus": 2, "gpu_milli": 500}]}, "gpu_milli"),
        ({"tasks": [{"id": "t", "node": "n1", "gpus": 1.5}]}, "tasks[0].gpus"),
        ({"tasks": [{"id": "t", "node": "n1", "gpus": -1}]}, "tasks[0].gpus"),
        ({"tasks": [{"id": "t", "node": "n1", "gpus": 1, "priority": "urgent"}]}, "priority"),
        ({"nodes": [{"id": "n1", "gpus": 2**40, "cpus": 1}]}, "nodes[0].gpus"),
        ({"nodes": [{"id": "n1", "gpus": 8}]}, "nodes[0].cpus is required"),
        ({"colour": "red"}, "colour is not a known field"),
        ({"options": {"depth": 0}}, "options.depth"),
    ],
)
def test_bad_snapshots_get_one_sentence(change: dict[str, Any], expected: str) -> None:
    assert expected in bad(snapshot_dict(**change))


def test_not_an_object() -> None:
    with pytest.raises(ProblemError, match="must be a JSON object"):
        parse_cluster([1, 2])


def test_load_snapshot_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_text(CHAIN.to_json())
    assert load_cluster(path) == CHAIN
    path.write_text('{"nodes": [')
    with pytest.raises(ProblemError, match=r"snap\.json"):
        load_cluster(path)
    path.write_text(json.dumps({"nodes": [{"id": "a", "gpus": 1, "cpus": float("nan")}]}))
    with pytest.raises(ProblemError):
        load_cluster(path)


def test_selector_any_of() -> None:
    assert selector_matches({"m": ["a", "b"]}, {"m": "b"})
    assert not selector_matches({"m": ["a", "b"]}, {"m": "c"})
    assert selector_matches({}, {})
    problem = Cluster.model_validate(
        {
            "nodes": [{"id": "n", "gpus": 1, "cpus": 1, "labels": {"m": "b"}}],
            "tasks": [{"id": "t", "node": "n", "gpus": 1, "node_selector": {"m": ["a", "b"]}}],
        }
    )
    assert problem.index.selector_masks[problem.index.task_selector[0]].tolist() == [True]


def test_fractional_cpus_are_exact() -> None:
    problem = Cluster.model_validate(
        {
            "nodes": [{"id": "n", "gpus": 1, "cpus": 0.3}],
            "tasks": [{"id": f"t{i}", "node": "n", "gpus": 0, "cpus": 0.1} for i in range(3)],
        }
    )
    assert problem.index.task_cpus.sum() == problem.index.node_cpus[0]
