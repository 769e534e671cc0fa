"""The generator: seeded, deterministic, valid GB200-like states."""

from __future__ import annotations

from collections import Counter

import pytest

from gpuopt.errors import ProblemError
from gpuopt.gang.generator import random_gang_problem


def test_same_seed_same_state() -> None:
    first = random_gang_problem(5, domains=3, nodes_per_domain=6)
    assert first.to_json() == random_gang_problem(5, domains=3, nodes_per_domain=6).to_json()
    assert first.to_json() != random_gang_problem(6, domains=3, nodes_per_domain=6).to_json()


def test_gb200_shape() -> None:
    problem = random_gang_problem(1)
    cluster = problem.cluster
    assert len(cluster.nodes) == 4 * 18
    assert {node.gpus for node in cluster.nodes} == {4}
    assert len({node.domain("nvl") for node in cluster.nodes}) == 4
    assert any(task.gang for task in cluster.tasks)
    assert cluster.gangs
    assert problem.request.required == "nvl"


def test_large_state_builds() -> None:
    problem = random_gang_problem(2, domains=50)
    assert len(problem.cluster.nodes) == 900
    assert len(problem.index.required.ids) == 50


def test_bad_argument() -> None:
    with pytest.raises(ProblemError, match="domains"):
        random_gang_problem(1, domains=0)


def test_each_running_gang_has_its_own_id() -> None:
    # gangs are drawn with 2 to 6 pods; an id shared by two draws would merge them
    for seed in range(20):
        problem = random_gang_problem(seed, domains=2, nodes_per_domain=6)
        sizes = Counter(task.gang for task in problem.cluster.tasks if task.gang is not None)
        assert sizes and max(sizes.values()) <= 6, seed
