"""The compiled greedy core (gpuopt/allocation/_core.pyx) against the pure-Python greedy.

The core is a translation of the Python modules; the reason it is right is that the
Python greedy is (its own tests, the checker, the enumerated optima), and that both give
the same grid, cell for cell, on random and stress instances of every kind the core
handles: realtime services and trades, running tasks, aligned blocks, nodes, deadlines,
exactly 64 GPUs (the word's top bit), long horizons (the vectorised trade test). Without
a built core (a bare checkout) these tests skip; ``pip install`` builds it.
"""

from __future__ import annotations

import pytest

from gpuopt.allocation import _accel
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.greedy import greedy_grid
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.solution import violations
from gpuopt.allocation.stress import FAMILIES, stress_problem

needs_core = pytest.mark.skipif(
    _accel.compiled() is None, reason="the compiled core is not built (pip install -e .)"
)

#: (gpus, tasks, gpus per node, realtime tasks, horizon, aligned blocks)
SHAPES = [
    (8, 10, None, 1, 24, False),
    (8, 12, None, 2, 12, True),
    (16, 20, 8, 2, 24, False),
    (32, 30, 8, 0, 16, False),
    (64, 30, 8, 3, 24, False),
    (64, 24, None, 2, 48, True),
    (12, 14, 4, 3, 40, False),
]


def random_case(number: int) -> AllocationProblem:
    """The ``number``-th instance of a mix of the shapes above (running tasks and
    deadlines come from the generator's details)."""
    gpus, tasks, node, realtime, horizon, aligned = SHAPES[number % len(SHAPES)]
    details = ScenarioDetails(running_fraction=0.2 + 0.1 * (number % 3), deadline_fraction=0.3)
    return random_problem(
        number,
        gpus=gpus,
        tasks=tasks,
        horizon=horizon,
        realtime=realtime,
        gpus_per_node=node,
        align_blocks=aligned,
        load=1.1 + 0.2 * (number % 4),
        details=details,
    )


def python_grid(problem: AllocationProblem, monkeypatch: pytest.MonkeyPatch, **options: object):
    with monkeypatch.context() as patch:
        patch.setenv(_accel.PURE_PYTHON, "1")
        assert _accel.core_for(problem.index) is None
        return greedy_grid(problem, **options)


def assert_same(problem: AllocationProblem, monkeypatch: pytest.MonkeyPatch, **options: object):
    assert _accel.core_for(problem.index) is not None
    compiled = greedy_grid(problem, **options)
    assert compiled == python_grid(problem, monkeypatch, **options)
    assert violations(problem, compiled) == []


@needs_core
@pytest.mark.parametrize("number", range(42))
def test_the_core_gives_the_python_grid_on_random_instances(
    number: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_same(random_case(number), monkeypatch)


@needs_core
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("gpus", [8, 16])
def test_the_core_gives_the_python_grid_on_stress_instances(
    family: str, gpus: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_same(stress_problem(3, gpus, family), monkeypatch)


@needs_core
@pytest.mark.parametrize(
    "options",
    [
        {"improve": False},
        {"search": 0},
        {"search": 7, "seed": 5},
        {"guide": False, "max_attempts": 3},
    ],
)
def test_the_core_gives_the_python_grid_with_every_option(
    options: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(4):
        assert_same(random_case(number), monkeypatch, **options)


@needs_core
def test_the_core_gives_the_python_grid_when_the_search_starts_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A search that stalls after 3 rounds starts again from its best plan with seed + 1,
    seed + 2, ... (``_search.STALL_ROUNDS``): the core's generators must be reseeded as
    Python's are. Without the starts again (``RESEEDS = 0``) some grid differs, so the
    draws after a reseed are compared, not only those before it."""
    from gpuopt.allocation import _search

    monkeypatch.setattr(_search, "STALL_ROUNDS", 3)
    differs = 0
    for number in range(6):
        problem = random_case(number)
        assert_same(problem, monkeypatch, search=60, seed=7)
        again = greedy_grid(problem, search=60, seed=7)
        with monkeypatch.context() as patch:
            patch.setattr(_search, "RESEEDS", 0)
            differs += greedy_grid(problem, search=60, seed=7) != again
    assert differs > 0


@needs_core
@pytest.mark.slow
@pytest.mark.parametrize("block", range(20))
def test_the_core_gives_the_python_grid_on_a_thousand_instances(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(1000 + 50 * block, 1050 + 50 * block):
        assert_same(random_case(number), monkeypatch)


@needs_core
@pytest.mark.parametrize(
    "seed", [0, 1, 12345, 2**32 - 1, 2**32, 2**40 + 7, 2**63 - 1, 2**64 - 1, 2**64, True]
)
def test_the_core_seeds_its_generator_as_python_random_does(seed: int) -> None:
    """The core seeds CPython's Mersenne Twister in C (``init_by_array`` of the seed's
    32-bit words) for seeds below 2**64, and through ``random.Random`` otherwise: the
    state is CPython's, word for word."""
    import random

    core = _accel.compiled()
    assert core is not None
    assert core.rng_state(seed) == random.Random(seed).getstate()[1]


@needs_core
@pytest.mark.parametrize("seed", [0, 1, 12345, 2**40 + 7])
def test_the_core_draws_the_numbers_python_random_draws(seed: int) -> None:
    """The core's Mersenne Twister continues CPython's: every kind of draw the search makes,
    in the same order, gives the same numbers (``sample`` from 4 to 40 items covers both of
    CPython's methods, the pool below 22 items and the set from there)."""
    import random

    core = _accel.compiled()
    assert core is not None
    rng = random.Random(seed)
    expected: list[object] = []
    for i in range(300):
        expected += [rng.random(), rng.randrange(3, 4 + i * 7), rng.randint(1, 3)]
        expected.append(rng.uniform(0.5, 1.5))
        items = list(range(40))
        head = items[: 2 + i % 9]
        rng.shuffle(head)
        items = head + items[2 + i % 9 :]
        expected += [items, rng.sample(items[: 4 + i % 37], 3)]
    assert core.rng_draws(seed, 300) == expected


@needs_core
def test_the_core_sums_as_numpy_sums() -> None:
    """The realtime penalty is a numpy sum; the core's pairwise sum gives it to the bit."""
    import numpy as np

    core = _accel.compiled()
    assert core is not None
    rng = np.random.default_rng(7)
    for size in [0, 1, 7, 8, 9, 15, 16, 127, 128, 129, 1000, 9000]:
        values = rng.random(size) * rng.integers(1, 1000, size=size)
        assert core.pairwise_sum(values.tolist()) == float(values.sum())


@needs_core
@pytest.mark.parametrize("number", range(12))
def test_the_core_computes_the_python_realtime_curves(number: int) -> None:
    """The core's curves, task by task, equal :func:`realtime_curves` (which serves blocks of
    tasks at once from four on) at every capacity, tight ones included."""
    import numpy as np

    from gpuopt.allocation._board import realtime_curves
    from gpuopt.allocation.greedy import _base_board

    core = _accel.compiled()
    assert core is not None
    problem = random_problem(number, gpus=16, tasks=14, realtime=2 + number % 5, horizon=20)
    index = problem.index
    _base, order = _base_board(index)
    static = core.Static(index)
    rng = np.random.default_rng(number)
    for _ in range(10):
        capacity = rng.integers(0, index.gpus + 1, size=index.horizon).astype(np.int64)
        expected = realtime_curves(index, index.demand, order, capacity)
        assert np.array_equal(core.realtime_curves_of(static, order, capacity), expected)


@needs_core
@pytest.mark.parametrize("number", range(14))
def test_the_core_builds_the_python_base_board(number: int) -> None:
    """The base the core builds from the index (running tasks pinned, realtime orders and
    curves) holds what the Python base holds: occupancy, room, value, curves, penalty."""
    import numpy as np

    from gpuopt.allocation.greedy import _base_board

    core = _accel.compiled()
    assert core is not None
    problem = random_case(number)
    python, _order = _base_board(problem.index)
    static = core.Static(problem.index)
    built = core.base_board(static, core.Budget()).to_board(python)
    assert built.busy == python.busy and built.room == python.room
    assert built.starts == python.starts and built.value == python.value
    assert np.array_equal(built.counts, python.counts) and built.penalty == python.penalty
    assert np.array_equal(built.reserved, python.reserved) and built.over == python.over
    assert static.realtime_orders == python.realtime_orders
