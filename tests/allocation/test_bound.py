"""The step-capacity bound (models/allocation.md section 13): valid, and reported at scale."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import gpuopt
from gpuopt.allocation import bound
from gpuopt.allocation._accel import compiled
from gpuopt.allocation._board import Board
from gpuopt.allocation.bound import STEP_BOUND_GPUS, step_capacity_bound
from gpuopt.allocation.generator import ScenarioDetails, random_problem
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.allocation.stress import stress_problem
from gpuopt.errors import ProblemError


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"align_blocks": True},
        {"gpus_per_node": 4, "realtime": 2, "details": ScenarioDetails(max_swap=1)},
        {"load": 2.0, "details": ScenarioDetails(deadline_fraction=0.6)},
    ],
)
def test_the_bound_is_never_below_the_proven_optimum(options: dict[str, object]) -> None:
    proven = 0
    for seed in range(4):
        problem = random_problem(seed, gpus=8, tasks=9, horizon=12, **options)  # type: ignore[arg-type]
        exact = gpuopt.solve(problem, method="cpsat", time_limit=30)
        if exact.status != "optimal":
            continue
        lp = step_capacity_bound(problem)
        mip = step_capacity_bound(problem, integer=True, time_limit=30)
        assert lp.status == "optimal"
        assert lp.bound >= exact.objective - 1e-6
        assert mip.bound >= exact.objective - 1e-6
        assert mip.bound <= lp.bound + 1e-6  # the integer relaxation is at least as tight
        proven += 1
    assert proven >= 2


def test_exact_methods_report_the_bound_at_scale() -> None:
    problem = random_problem(0, gpus=STEP_BOUND_GPUS, tasks=40, horizon=12, gpus_per_node=8)
    lp = step_capacity_bound(problem)
    result = gpuopt.solve(problem, method="cpsat", time_limit=20)
    assert result.bound is not None and math.isfinite(result.bound)
    assert result.objective - 1e-6 <= result.bound <= lp.bound + 1e-6
    assert result.gap is not None and result.gap >= 0


def test_bad_time_limit_is_refused() -> None:
    with pytest.raises(ProblemError, match="time_limit"):
        step_capacity_bound(random_problem(0), time_limit=0)


def _fragmented(tasks: int) -> AllocationProblem:
    """16 aligned GPUs, 1-GPU tasks running on GPUs 0 and 8 all along: two aligned
    4-GPU blocks (4-7, 12-15) stay free, and 14 GPUs."""
    running = [
        {
            "id": f"run-{first}",
            "kind": "training",
            "gpus": 1,
            "duration": 4,
            "priority": 1,
            "running": {"start": 0, "first_gpu": first},
        }
        for first in (0, 8)
    ]
    new = [
        {"id": f"job-{n}", "kind": "training", "gpus": 4, "duration": 4, "priority": 2}
        for n in range(tasks)
    ]
    return AllocationProblem.model_validate(
        {"gpus": 16, "horizon": 4, "decay": 1.0, "align_blocks": True, "tasks": running + new}
    )


def test_the_fragmentation_rows_count_the_free_aligned_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # three 4-GPU jobs fit the 14 free GPUs by count, but only two aligned blocks are free
    problem = _fragmented(3)
    exact = gpuopt.solve(problem, method="cpsat", time_limit=30, threads=1)
    assert exact.status == "optimal"
    running_value = 2 * 1 * 4  # two 1-GPU tasks over 4 steps, priority 1
    assert exact.objective == pytest.approx(running_value + 2 * (2 * 4 * 4))
    for integer in (False, True):
        found = step_capacity_bound(problem, integer=integer)
        assert found.bound == pytest.approx(exact.objective)
    monkeypatch.setattr(bound, "CUT_GPUS", 0)  # without B3 the count allows all three
    assert step_capacity_bound(problem, integer=True).bound == pytest.approx(
        running_value + 3 * (2 * 4 * 4)
    )


@pytest.mark.parametrize("family", ["aligned-running-low", "nodes", "big-jobs", "mixed"])
def test_the_bound_with_fragmentation_rows_stays_above_proven_optima(family: str) -> None:
    proven = 0
    for seed in range(6):
        problem = stress_problem(seed, 8, family)
        exact = gpuopt.solve(problem, method="cpsat", time_limit=30, threads=1)
        if exact.status != "optimal":
            continue
        for integer in (False, True):
            assert step_capacity_bound(problem, integer=integer).bound >= exact.objective - 1e-6
        proven += 1
    assert proven >= 3


@pytest.mark.parametrize("seed", range(20))
def test_packing_capacity_equals_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    gpus = rng.choice([4, 6, 8])
    busy = rng.getrandbits(gpus) & rng.getrandbits(gpus)
    blocks = []
    for size in sorted(rng.sample([1, 2, 3, 4], rng.randint(1, 3))):
        step = size if rng.random() < 0.5 else 1
        legal = sum(1 << first for first in range(0, gpus - size + 1, step))
        blocks.append((size, legal))

    def brute(taken: int, low: int) -> int:  # most covered using blocks starting at >= low
        best = 0
        for size, legal in blocks:
            for first in range(low, gpus - size + 1):
                mask = ((1 << size) - 1) << first
                if legal >> first & 1 and not mask & (taken | busy):
                    best = max(best, size + brute(taken | mask, first + size))
        return best

    assert bound._packing_capacity(busy, blocks, gpus) == brute(0, 0)


def test_the_relaxation_starts_are_legal_starts() -> None:
    problem = random_problem(1, gpus=32, tasks=24, gpus_per_node=8)
    found = step_capacity_bound(problem, starts=True)
    assert found.starts and step_capacity_bound(problem).starts == {}
    batch = problem.index.batch
    for b, (start, weight) in found.starts.items():
        assert not batch.running[b]
        assert batch.arrival[b] <= start < problem.horizon
        assert 0 < weight <= 1 + 1e-9


def _columns_one_by_one(
    problem: AllocationProblem,
) -> list[tuple[int, int, int, float, dict[int, float]]]:
    """The z columns of section 13 from their definition, one task, model and start at a
    time: (task, start, end, cost, {row: coefficient}), B1 rows 0..T-1, then B1m, then B2."""
    index = problem.index
    board = Board(index)
    board.pin_running()
    if index.num_realtime:
        board.reserve(index.realtime_floor.sum(axis=0))
    horizon, batch = index.horizon, index.batch
    model_rows = index.num_models * horizon if index.num_models > 1 else 0
    weights = list(index.weights)
    found, tasks = [], 0
    for b in range(index.num_batch):
        if batch.running[b]:
            continue
        size = batch.size[b]
        if model_rows:
            per_model = index.per_model
            ways = [
                (m, steps, per_model.last_starts[b][m], board.model_firsts(size, m), rate)
                for m, (steps, rate) in enumerate(
                    zip(per_model.durations[b], per_model.rates[b], strict=True)
                )
                if steps
            ]
        else:
            ways = [(0, *variant) for variant in board.variants(b)]
        any_column = False
        for model, steps, last, legal, rate in ways:
            for start in range(batch.arrival[b], last + 1):
                end = min(horizon, start + steps)
                if any(board.room[t] < size for t in range(start, end)):
                    continue
                if not board.free_firsts(size, start, end, legal)[0]:
                    continue
                any_column = True
                rows = {t: float(size) for t in range(start, end)}
                if model_rows:
                    rows.update(
                        {horizon + model * horizon + t: float(size) for t in range(start, end)}
                    )
                rows[horizon + model_rows + tasks] = 1.0
                cost = float(batch.priority[b]) * size * rate * sum(weights[start:end])
                found.append((b, start, end, cost, rows))
        tasks += any_column
    return found


def _bound_cases() -> list[AllocationProblem]:
    return [
        stress_problem(2, 64, "mixed"),
        stress_problem(3, 32, "aligned-running-low"),
        stress_problem(1, 64, "realtime-swap"),
        stress_problem(4, 16, "nodes"),
        random_problem(3, gpus=16, tasks=14, models=True, realtime=2),
        random_problem(5, gpus=12, tasks=10, models=True),
    ]


@pytest.mark.parametrize("number", range(6))
@pytest.mark.parametrize("path", ["numpy", "compiled"])
def test_the_columns_built_at_once_are_the_columns_one_by_one(
    number: int, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch columns are built with numpy over every start at once, or in C for a plain
    problem of at most 64 GPUs (the guide's hot path); both are the columns of section 13
    taken one task, model and start at a time."""
    if path == "numpy":
        monkeypatch.setattr(bound, "core_for", lambda index: None)
    elif compiled() is None:
        pytest.skip("the compiled core is not built")
    problem = _bound_cases()[number]
    index = problem.index
    board = Board(index)
    board.pin_running()
    if index.num_realtime:
        board.reserve(index.realtime_floor.sum(axis=0))
    model_rows = index.num_models * index.horizon if index.num_models > 1 else 0
    built = bound._batch_columns(index, board, model_rows)
    expected = _columns_one_by_one(problem)
    assert built.count == len(expected) > 0
    for column, (b, start, end, cost, rows) in enumerate(expected):
        assert (built.owners[column], built.starts[column], built.ends[column]) == (b, start, end)
        assert built.costs[column] == pytest.approx(cost, rel=1e-12)
        low, high = built.col_starts[column], built.col_starts[column + 1]
        entries = built.row_index[low:high].tolist(), built.values[low:high].tolist()
        got = dict(zip(*entries, strict=True))
        assert got == rows
        assert built.row_index[low:high].tolist() == list(rows)  # in this order


@pytest.mark.parametrize("number", [2, 4])
def test_the_realtime_rows_are_a4_as_written(number: int) -> None:
    """The realtime columns' entries, built at once, are A4a-A4c row by row (section 13):
    per service and step, |y[t] - y[t-1]| <= s (|y[0] - c0| <= s at step 0), then
    y + u >= demand; y also enters its step's B1 row."""
    problem = _bound_cases()[number]
    index = problem.index
    horizon, services = index.horizon, index.num_realtime
    assert services
    part = bound._realtime_part(problem, np.full(horizon, float(index.gpus)))
    first_extra = 100
    starts, rows, values = bound._realtime_matrix(part, horizon, first_extra, 7)
    dense = np.zeros((first_extra + 2 * services * horizon, 2 * services * horizon))
    for col in range(2 * services * horizon):
        for at in range(starts[col] - 7, starts[col + 1] - 7):
            dense[rows[at], col] = values[at]
    expected = np.zeros_like(dense)
    lower, upper = [], []
    for r in range(services):
        for t in range(horizon):
            y, u, row = r * horizon + t, services * horizon + r * horizon + t, first_extra
            row += 2 * (r * horizon + t)
            expected[t, y] = 1.0  # B1
            expected[row, y] = 1.0
            swap = float(index.max_swap[r])
            if t:
                expected[row, y - 1] = -1.0  # A4a
                centre = 0.0
            else:
                centre = float(index.initial[r])
            lower.append(centre - swap)
            upper.append(centre + swap)
            expected[row + 1, y] = expected[row + 1, u] = 1.0  # A4c
            lower.append(float(index.demand[r, t]))
            upper.append(math.inf)
    assert np.array_equal(dense, expected)
    assert part.rows_lower.tolist() == lower
    assert part.rows_upper.tolist() == upper


@pytest.mark.skipif(compiled() is None, reason="the compiled core is not built")
@pytest.mark.parametrize("seed", range(10))
def test_the_compiled_packing_is_the_python_packing(seed: int) -> None:
    """The B3 capacity in C (up to 64 GPUs) is the Python programme's, which the brute
    force above checks; here on the sizes and masks of up to 64 GPUs."""
    core = compiled()
    assert core is not None
    rng = random.Random(seed)
    for _ in range(50):
        gpus = rng.choice([8, 16, 32, 48, 64])
        busy = rng.getrandbits(gpus) & rng.getrandbits(gpus) & rng.getrandbits(gpus)
        blocks = []
        for size in sorted(rng.sample([1, 2, 4, 8, 16, 32, 3, 6], rng.randint(1, 4))):
            step = size if rng.random() < 0.5 else 1
            legal = sum(1 << first for first in range(0, gpus - size + 1, step))
            blocks.append((size, legal & rng.getrandbits(gpus) if rng.random() < 0.3 else legal))
        expected = bound._packing_capacity(busy, blocks, gpus)
        assert core.packing_capacity(busy, blocks, gpus) == expected


class _Rows:
    """A stand-in for HiGHS that keeps what ``addRows`` was given."""

    given: tuple[object, ...] = ()

    def addRows(self, *arguments: object) -> None:
        self.given = arguments


def _guide_model(
    problem: AllocationProblem, numpy_path: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[bound._BatchColumns, int, tuple[object, ...]]:
    """The guide's batch columns and B3 rows of ``problem``, on the numpy path or not."""
    with monkeypatch.context() as patched:
        if numpy_path:
            patched.setattr(bound, "core_for", lambda index: None)
        index = problem.index
        board = Board(index)
        board.pin_running()
        capacity = np.array(board.room, dtype=np.float64)
        if index.num_realtime:
            board.reserve(index.realtime_floor.sum(axis=0))
        batch = bound._batch_columns(index, board, 0)
        rows = _Rows()
        added = bound._add_fragmentation_rows(rows, board, batch, capacity)
    return batch, added, rows.given


@pytest.mark.skipif(compiled() is None, reason="the compiled core is not built")
@pytest.mark.parametrize("seed", range(8))
def test_the_compiled_guide_model_is_the_numpy_model(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a plain problem of at most 64 GPUs the LP guide's columns and B3 rows are built
    in C (``_cbound``): the same arrays, of the same types and in the same order, as the
    numpy path's, so HiGHS solves the same model and the guide gives the same plans."""
    shapes = [
        dict(gpus=8, tasks=10, realtime=1),
        dict(gpus=16, tasks=20, gpus_per_node=8, realtime=2, align_blocks=True),
        dict(gpus=32, tasks=30, gpus_per_node=8, realtime=2),
        dict(gpus=64, tasks=30, gpus_per_node=8, realtime=3, align_blocks=True),
    ]
    problems = [random_problem(seed, **shape) for shape in shapes]  # type: ignore[arg-type]
    families = ["aligned-running-low", "nodes", "realtime-swap", "mixed"]
    problems += [stress_problem(seed, gpus, family) for gpus in (16, 64) for family in families]
    b3_rows = 0
    for problem in problems:
        fast, fast_added, fast_rows = _guide_model(problem, False, monkeypatch)
        slow, slow_added, slow_rows = _guide_model(problem, True, monkeypatch)
        for name in ("costs", "sizes", "starts", "ends", "owners", "col_starts", "row_index"):
            got, expected = getattr(fast, name), getattr(slow, name)
            assert got.dtype == expected.dtype and np.array_equal(got, expected), name
        assert np.array_equal(fast.values, slow.values)
        assert list(fast.legal_by_size.items()) == list(slow.legal_by_size.items())
        assert fast.tasks == slow.tasks
        assert fast_added == slow_added
        b3_rows += fast_added
        for got, expected in zip(fast_rows, slow_rows, strict=True):
            got, expected = np.asarray(got), np.asarray(expected)
            assert got.dtype == expected.dtype and np.array_equal(got, expected)
    assert b3_rows > 0  # the rows were compared, not only their absence


def test_every_solve_gets_its_own_time_limit() -> None:
    """The step LP reuses one HiGHS object per thread, whose clock sums all its runs: after
    solves that together ran longer than a limit, a solve with that limit is still solved
    (not stopped at once by the time the earlier ones took)."""
    problem = stress_problem(17, 64, "mixed")
    step_capacity_bound(problem)
    clock = bound._SOLVERS.highs.getRunTime
    began = clock()
    while clock() - began < 0.3:
        assert step_capacity_bound(problem, starts=True, time_limit=0.2).status == "optimal"
    assert step_capacity_bound(problem, integer=True, time_limit=0.2).bound < math.inf


@pytest.mark.skipif(compiled() is None, reason="the compiled core is not built")
def test_the_compiled_guide_model_refuses_arguments_it_cannot_trust() -> None:
    """The C loops run without bounds checks, so lengths that do not match the horizon, more
    than 64 GPUs or a way naming no task are refused with a ValueError, never read past."""
    core = compiled()
    assert core is not None
    ints = lambda *values: np.array(values, dtype=np.int64)  # noqa: E731
    way = [(0, 0, 3, 2, 1, 1.0)]
    good = (way, ints(1), ints(0), np.array([1.0]), ints(8, 8, 8), [0, 0, 0], np.zeros(4), 8, 3)
    assert core.batch_columns(*good)[-1] == 1  # one task with columns
    for position, bad in [
        (5, []),  # no busy masks
        (4, ints(8)),  # room for one step of three
        (6, np.zeros(2)),  # too few prefix sums
        (7, 65),  # more GPUs than one word holds
        (0, [(3, 0, 3, 2, 1, 1.0)]),  # a way naming task 3 of a batch of 1
    ]:
        arguments = list(good)
        arguments[position] = bad
        with pytest.raises(ValueError):
            core.batch_columns(*arguments)
    starts, ends, sizes = ints(0), ints(3), ints(1)
    with pytest.raises(ValueError):
        core.fragmentation_rows(starts, ends, sizes, {1: 1}, [0], np.zeros(3), 8, 3)
    with pytest.raises(ValueError):
        core.fragmentation_rows(starts, ends, ints(1, 1), {1: 1}, [0, 0, 0], np.zeros(3), 8, 3)
