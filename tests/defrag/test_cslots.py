"""``gpuopt.defrag._cslots`` (IPC's slot and target kernels) against the numpy expressions
they replace: the same integers and masks on random arrays, and the same plans.

Without the compiled module (a bare checkout) these tests skip; ``pip install`` builds it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import gpuopt
from gpuopt import _native
from gpuopt.defrag import _shard
from gpuopt.defrag.generator import TaskShares, random_snapshot
from gpuopt.defrag.problem import Cluster
from gpuopt.defrag.workload import CPU_ONLY, SHARE, WHOLE, SlotModel
from tests.defrag.conftest import assert_legal
from tests.defrag.test_workload import EIGHT, HALF, ONE, with_workload

cslots: Any = _native.compiled("gpuopt.defrag._cslots")
needs_kernels = pytest.mark.skipif(
    cslots is None, reason="gpuopt.defrag._cslots is not built (pip install -e .)"
)


def random_model(rng: np.random.Generator, nodes: int, shapes: int, tasks: int) -> SlotModel:
    """A slot model of random shapes of every kind (whole, share, CPU-only; some asking no
    CPU) and random admissions."""
    kind = rng.choice([WHOLE, SHARE, CPU_ONLY], size=shapes).astype(np.int64)
    milli = rng.integers(1, 1001, size=shapes).astype(np.int64)
    return SlotModel(
        frequencies=np.full(shapes, 1.0 / shapes),
        weights=rng.integers(1, 10**6, size=shapes).astype(np.int64),
        kind=kind,
        gpus=rng.integers(1, 9, size=shapes).astype(np.int64),
        cpus=np.where(rng.random(shapes) < 0.2, 0, rng.integers(1, 64_000, size=shapes)),
        per_gpu=np.where(kind == SHARE, 1000 // milli, 0).astype(np.int64),
        milli=milli,
        admit=rng.random((nodes, shapes)) < 0.8,
        fixed_slots=np.zeros((nodes, shapes), dtype=np.int64),
        task_slots=rng.integers(0, 3, size=(tasks, shapes)).astype(np.int64),
        labels=tuple(f"s{k}" for k in range(shapes)),
    )


@needs_kernels
@pytest.mark.parametrize("seed", range(20))
def test_node_values_are_numpys(seed: int) -> None:
    """Every row's weighted slots, for all nodes and for subsets (repeated, unordered),
    with free amounts below zero (floored) and partial slots: numpy's integers."""
    rng = np.random.default_rng(seed)
    nodes, shapes = int(rng.integers(1, 60)), int(rng.integers(1, 40))
    model = random_model(rng, nodes, shapes, tasks=5)
    kernel = cslots.Slots(model._factors, model.admit, model.weights)
    free_gpus = rng.integers(-3, 9, size=nodes).astype(np.int64)
    free_cpus = rng.integers(-1000, 128_000, size=nodes).astype(np.int64)
    partial = rng.integers(0, 5, size=(nodes, shapes)).astype(np.int64)
    expected = model.slots(free_gpus, free_cpus, partial) @ model.weights
    assert np.array_equal(kernel.node_values(free_gpus, free_cpus, partial), expected)
    rows = rng.integers(0, nodes, size=int(rng.integers(0, 2 * nodes)))
    expected = model.slots(free_gpus[rows], free_cpus[rows], partial[rows], rows) @ model.weights
    found = kernel.node_values(free_gpus[rows], free_cpus[rows], partial[rows], rows)
    assert found.dtype == np.int64 and np.array_equal(found, expected)


@needs_kernels
@pytest.mark.parametrize("seed", range(20))
def test_moved_values_are_numpys(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task added to each of some nodes (the first, or not, losing it instead): the
    kernel's values, read from the full arrays, are the numpy expression's on gathered
    ones (``GPUOPT_PURE_PYTHON``)."""
    rng = np.random.default_rng(100 + seed)
    nodes, shapes, tasks = int(rng.integers(1, 60)), int(rng.integers(1, 40)), 4
    model = random_model(rng, nodes, shapes, tasks)
    free_gpus = rng.integers(-3, 9, size=nodes).astype(np.int64)
    free_cpus = rng.integers(-1000, 128_000, size=nodes).astype(np.int64)
    partial = rng.integers(0, 5, size=(nodes, shapes)).astype(np.int64)
    for first_leaves in (False, True):
        rows = rng.integers(0, nodes, size=int(rng.integers(1, 2 * nodes + 1)))
        task = int(rng.integers(tasks))
        gpus, cpus = int(rng.integers(0, 9)), int(rng.integers(0, 64_000))
        arguments = (free_gpus, free_cpus, partial, rows, gpus, cpus, task)
        found = model.moved_values(*arguments, first_leaves=first_leaves)
        assert model.__dict__.get("_kernel") is not None
        with monkeypatch.context() as patch:
            patch.setenv(_native.PURE_PYTHON, "1")
            plain = replace(model)  # (the same fields, no kernel built yet: numpy's path)
            expected = plain.moved_values(*arguments, first_leaves=first_leaves)
            assert plain.__dict__.get("_kernel") is None
        assert np.array_equal(found, expected)


@needs_kernels
def test_node_values_refuse_arrays_that_do_not_match() -> None:
    model = random_model(np.random.default_rng(0), nodes=4, shapes=3, tasks=1)
    kernel = cslots.Slots(model._factors, model.admit, model.weights)
    ones, partial = np.ones(4, dtype=np.int64), np.zeros((4, 3), dtype=np.int64)
    with pytest.raises(ValueError, match="one row per node"):
        kernel.node_values(ones, ones[:3], partial)
    with pytest.raises(ValueError, match="not a row of admit"):
        kernel.node_values(ones[:1], ones[:1], partial[:1], np.array([4]))
    with pytest.raises(ValueError, match="every node's row"):
        kernel.node_values(ones[:2], ones[:2], partial[:2])
    with pytest.raises(ValueError, match="not a row of the arrays"):
        kernel.moved_values(ones, ones, partial, np.array([0, 4]), 1, 1, partial[0])


@needs_kernels
@pytest.mark.parametrize("seed", range(10))
def test_targets_are_numpys_and_follow_the_arrays(seed: int) -> None:
    """The mask of D3-D5 without extended resources, read from arrays the state then
    changes in place (as a move does): numpy's mask before and after."""
    rng = np.random.default_rng(seed)
    nodes, selectors = int(rng.integers(1, 200)), int(rng.integers(1, 4))
    masks = rng.random((selectors, nodes)) < 0.7
    open_ = rng.random(nodes) < 0.8
    free = [rng.integers(-2, 9, size=nodes).astype(np.int64) for _ in range(3)]
    kernel = cslots.Targets(masks, open_, *free)
    for _ in range(5):
        selector = int(rng.integers(selectors))
        asked = [int(rng.integers(0, 9)) for _ in range(3)]
        expected = masks[selector] & open_
        for amounts, wanted in zip(free, asked, strict=True):
            expected &= amounts >= wanted
        found = kernel(selector, *asked)
        assert found.dtype == np.bool_ and np.array_equal(found, expected)
        node = int(rng.integers(nodes))  # a move changes the arrays in place
        free[0][node] -= int(rng.integers(0, 3))
        open_[node] = not open_[node]
    with pytest.raises(ValueError, match="selector"):
        kernel(selectors, 0, 0, 0)
    with pytest.raises(ValueError, match="one entry per node"):
        cslots.Targets(masks, open_[:-1] if nodes > 1 else open_[:0], *free)


@needs_kernels
def test_a_model_with_its_kernel_pickles() -> None:
    """A shard goes to a worker process pickled: its slot model leaves the C kernel behind
    and builds it again there, with the same values."""
    import pickle

    model = random_model(np.random.default_rng(3), nodes=6, shapes=4, tasks=2)
    free, partial = np.arange(6, dtype=np.int64), np.ones((6, 4), dtype=np.int64)
    before = model.node_values(free, free * 1000, partial)
    assert model.__dict__.get("_kernel") is not None
    copy = pickle.loads(pickle.dumps(model))
    assert "_kernel" not in copy.__dict__
    assert np.array_equal(copy.node_values(free, free * 1000, partial), before)


def plans(problem_json: str) -> dict[str, Any]:
    """The default IPC plan of a fresh copy of the snapshot, as JSON (no timings)."""
    plan = gpuopt.solve(Cluster.model_validate_json(problem_json), "ipc")
    assert_legal(Cluster.model_validate_json(problem_json), plan)
    data = plan.model_dump(mode="json")
    data.pop("seconds", None)
    data.pop("solver_seconds", None)
    return data


@needs_kernels
@pytest.mark.parametrize("seed", range(6))
def test_the_kernels_give_numpys_plans(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """IPC with the kernels and with the numpy expressions (``GPUOPT_PURE_PYTHON``) makes
    the same moves on random snapshots with a workload objective (whole, 1-GPU and shared
    shapes), node selectors and anti-affinity groups, and on one without a workload."""
    shares = TaskShares(selector_fraction=0.2, group_fraction=0.15)
    problem = random_snapshot(seed, nodes=40, fill=0.55, shares=shares)
    if seed % 3:
        problem = with_workload(problem, [EIGHT, ONE, HALF])
    text = problem.model_dump_json()
    with_kernels = plans(text)
    calls = {"targets": 0}
    original = _shard._State.targets

    def counted(self: Any, task: int, forbidden: set[int]) -> np.ndarray:
        calls["targets"] += self._targets_c is None
        return original(self, task, forbidden)

    monkeypatch.setattr(_shard._State, "targets", counted)
    monkeypatch.setenv(_native.PURE_PYTHON, "1")
    without = plans(text)
    assert calls["targets"] > 0  # (the numpy expressions ran)
    assert with_kernels == without
