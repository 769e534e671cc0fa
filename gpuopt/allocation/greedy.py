"""The greedy fast path: a legal, deterministic grid in milliseconds.

How each rule of ``models/allocation.md`` holds by construction:

- **A1** (one task per GPU per step): batch blocks are written only where
  every cell of the block is free at every step of the interval (a bitmask
  test), and only while each step keeps at least its realtime reservation of
  GPUs free (A1b); realtime tasks are then bound to GPUs that are still free.
- **A2** (all or nothing, inside ``[arrival, deadline)``): running tasks are
  pinned first on their inherited block; every other task is placed at most
  once, at a start in ``[arrival, deadline - duration]`` (clipped to the
  horizon), for all of its steps, or not at all.
- **A3** (contiguous power-of-two block, aligned, inside a node, inside one
  pool of a GPU model the task accepts): first GPUs are drawn only from the
  legal set ``F_j``, per model with the task's duration on that model (M1, M2).
- **A4** (realtime swap rule): curves are computed before any batch task as
  the lowest swap-feasible curve at or above demand within the capacity left,
  ramping up ahead of peaks; a trade (below) recomputes them the same way
  with less capacity; binding to GPUs never changes the counts.
- **A5** (no interruption or movement): a block is written once for all its
  steps and never moved afterwards (the improvement pass removes and re-adds
  whole blocks only).

Strategy: the whole queue and horizon are seen before anything is placed.
Realtime demand is served first (its shortfall costs ``realtime_penalty``
times its priority, 5-10x any batch GPU-step), as a curve rather than a peak,
so batch work fills the troughs. Batch-like tasks are then placed by priority
(every GPU-step of task ``j`` is worth ``priority_j * decay**t``, so priority
is the value density), the tightest window and then the largest area first
among equals, each at its earliest feasible start (decay rewards early work),
in the tightest free run of GPUs that holds it (best fit keeps large free runs
whole for the tasks still to come), touching as much finished or following
work as possible. Realtime is elastic at its price, though: a task that finds
GPUs free but no room beside the realtime reservation may *trade*, taking
GPUs from the services for its steps when its value exceeds the added penalty
(A4c) and beats its first start without a trade. Every task that fits
anywhere is placed, so holes are backfilled by whatever fits. Then a bounded,
deterministic improvement pass tries two other orders (total worth first,
arrival first) and swaps that make room for a task left out; it keeps a
change only when the objective rises. On scenarios of up to ``GUIDE_CELLS``
new tasks x steps (and always with ``guide=True``) one more plan is built
from the starts the step-capacity LP chose (``models/allocation.md`` section
10.1, item 5): the LP sees every step's capacity at once, so it delays or
leaves out the long, cheap tasks that the orders start early. From
``GUIDE_FIRST_GPUS`` GPUs on (up to ``GUIDE_FIRST_CELLS``) that plan is built
right after the orders' and the better of the two is searched first (section
10.2, rule B4), and each end still more than ``AGAIN_GAP`` below the LP's bound is
searched once more from itself (rule B6), and no search goes on once a plan is within
``GAP_TOLERANCE`` of that bound (rule B7); below, after the orders' plan is searched. Last, a
ruin-and-recreate search
(``models/allocation.md`` section 10.1) moves several tasks at once: it
clears the way for a task left out or started late, then frees seeded random
neighbourhoods and re-places them in new orders, under a work budget that is
a count (so the grid is deterministic) and shrinks with the cluster's size.

This module runs the parts in turn (:func:`greedy_grid`); each lives in a
module of its own: the construction rules (orders, block choice, realtime
trades) in :mod:`gpuopt.allocation._construction`, the swap pass in
:mod:`gpuopt.allocation._swap`, the make-room pass and ruin and recreate in
:mod:`gpuopt.allocation._search`, the LP- and MIP-guided plans and the exact
realtime curves in :mod:`gpuopt.allocation._guides`, on the board of
:mod:`gpuopt.allocation._board`.
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

import gpuopt.progress
from gpuopt.allocation._accel import core_for
from gpuopt.allocation._board import LP_WORK, Board, Budget, realtime_curves, running_count
from gpuopt.allocation._construction import ORDERS, _construct, _curves, _set_realtime_orders
from gpuopt.allocation._guides import (
    EXACT_CURVES_CELLS,
    GUIDE_CELLS,
    GUIDE_SECONDS,
    MIP_GUIDE_SECONDS,
    _exact_realtime,
    _guided,
    _guided_orders,
)
from gpuopt.allocation._search import SEARCH_ROUNDS, _best_value, _search
from gpuopt.allocation._swap import _improve
from gpuopt.allocation.bound import step_capacity_bound
from gpuopt.allocation.problem import AllocationIndex, AllocationProblem
from gpuopt.allocation.solution import AllocationResult, Grid, make_result
from gpuopt.errors import check_arguments
from gpuopt.options import Keywords
from gpuopt.result import heuristic_note


@dataclass(frozen=True, slots=True)
class GreedyOptions:
    """The options of the greedy (:func:`greedy_grid` and :func:`solve_greedy` take them as one
    object, ``options``, or as keywords).

    Attributes
    ----------
    improve
        Run the improvement pass (other tie-break orders, swaps for left-out
        tasks, then ``search`` rounds of ruin and recreate).
    max_attempts
        Work budget of the swap pass (default: twice the number of batch
        tasks). A count, not a clock, keeps the result deterministic.
    time_limit
        The time budget: seconds for the whole run (None: no limit). The first
        plan is always built; the stages after it stop when the time is up,
        keeping the best plan so far (``models/allocation.md`` section 10.2).
    work
        The deterministic work budget, in task placements tried (the LP guides
        count :data:`~gpuopt.allocation._board.LP_WORK` per cell of their
        model); None: no limit. The stages run in a fixed sequence, so the same
        budget gives the same grid, and a larger one never a worse grid.
        Default (``"auto"``): the three orders' plans (three placements per new
        task) and :data:`DEFAULT_WORK` placements of improvement, about a
        millisecond with the compiled core at 8 to 16 GPUs; from
        :data:`GUIDE_FIRST_GPUS` GPUs on, the LP guide's price
        (:data:`GUIDE_WORK` a cell) comes out of it too (section 10.2, rule B4),
        and in rule B4's range the improvement is :data:`WIDE_SEARCH` times
        :data:`DEFAULT_WORK` (:func:`search_scale`).
    search
        Ruin-and-recreate rounds after the swap pass (0: none; :data:`WIDE_SEARCH`
        times as many in rule B4's range); the rounds also stop at
        :data:`~gpuopt.allocation._search.SEARCH_WORK` (scaled to the grid, so
        large scenarios get few; :data:`WIDE_SEARCH` times it in rule B4's
        range). After :data:`~gpuopt.allocation._search.STALL_ROUNDS` rounds
        without a better plan, the rounds go on from the best plan with the
        next seed.
    seed
        Seed of the rounds' random choices (the same seed gives the same grid).
    guide
        Also build a plan from the step-capacity LP's starts (section 10.1,
        item 5) and keep it where it is better. None: when ``improve`` and the
        new tasks times the steps are at most
        :data:`~gpuopt.allocation._guides.GUIDE_CELLS`. ``"mip"``: also from the
        integer step MIP's starts, at any size, within
        :data:`~gpuopt.allocation._guides.MIP_GUIDE_SECONDS` (and
        ``time_limit``): slower (seconds at 64 GPUs), and better where the LP's
        fractional starts mislead the greedy.
    """

    improve: bool = True
    max_attempts: int | None = None
    time_limit: float | None = None
    work: int | Literal["auto"] | None = "auto"
    search: int = SEARCH_ROUNDS
    seed: int = 0
    guide: bool | Literal["mip"] | None = None


#: Whether HiGHS, which the LP guide solves with, is installed (a core dependency; without
#: it, in a partial install, the guide is skipped and the orders' plans are searched alone).
HIGHS_INSTALLED = importlib.util.find_spec("highspy") is not None

#: Placements of improvement in the default work budget (after the three orders' plans):
#: enough for the swap pass, the search and its restarts on the stress instances at 8-16
#: GPUs, not for the LP guide at LP_WORK a cell (docs/benchmarks.md, "The heuristic's hot
#: path"); from GUIDE_FIRST_GPUS on, for the guide at GUIDE_WORK a cell and the search.
DEFAULT_WORK = 10_000

#: The keywords of :func:`greedy_grid` and :func:`solve_greedy`: the fields of
#: :class:`GreedyOptions`, stated once.
GREEDY_KEYWORDS = Keywords.of(GreedyOptions)


@GREEDY_KEYWORDS.signature
def greedy_grid(
    problem: AllocationProblem, options: GreedyOptions | None = None, **settings: Any
) -> Grid:
    """The greedy's grid for ``problem`` (see the module docstring for the rules), with the
    options of :class:`GreedyOptions` (``options``, or keywords that override it)."""
    chosen = GREEDY_KEYWORDS.resolve(options, settings)
    improve, max_attempts, time_limit = chosen.improve, chosen.max_attempts, chosen.time_limit
    search, seed, guide, work = chosen.search, chosen.seed, chosen.guide, chosen.work
    if work == "auto":
        new = sum(1 for running in problem.index.batch.running if not running)
        wide = search_scale(problem.index.gpus, new * problem.index.horizon)
        work = 3 * new + DEFAULT_WORK * wide
    check_arguments(
        {
            "search": search,
            "seed": seed,
            "max_attempts": max_attempts,
            "time_limit": time_limit,
            "work": work,
        },
        whole={
            "search": (0, 1_000_000),
            "seed": (0, 2**63 - 1),
            "max_attempts": (0, 2**62),
            "work": (0, 2**62),
        },
        numbers={"time_limit": (0.0, 1e9)},
        optional=("max_attempts", "time_limit", "work"),
    )
    started = time.perf_counter()

    index = problem.index
    deadline = float(np.inf if time_limit is None else started + time_limit)
    pending = [b for b, running in enumerate(index.batch.running) if not running]
    orders = ORDERS if improve else ORDERS[:1]
    steps = _Steps(index, core_for(index), math.inf if work is None else work, deadline)
    cells = len(pending) * index.horizon
    steps.scale = search_scale(index.gpus, cells)
    if guide is None:
        guide = improve and cells <= GUIDE_CELLS
    # the LP's plan right after the orders (section 10.2, rule B4): by the problem's size alone,
    # never by the budget, so that the sequence stays one (rule B1)
    early = bool(guide) and improve and guide_first(index.gpus, cells)
    swaps = 2 * len(pending) if max_attempts is None else max_attempts
    counts = (swaps, search, seed)  # (the stages' own budgets, _finish)
    with gpuopt.progress.task("heuristic", total=len(pending)) as shown:
        # the stages run in a fixed sequence and the first that does not fit the budget ends
        # the run, so a larger budget runs the same sequence further (models/allocation.md
        # section 10.2): each plan improved, searched and its realtime curves made exact,
        # the orders' plan first, then the plans the LP (and MIP) guide to; from
        # GUIDE_FIRST_GPUS on, the LP's plan right after the orders and the better searched
        # first (section 10.2, rule B4)
        first, settled, first_order = _best_order(steps, pending, orders, shown)
        ends = [first]  # the best end wins; ties: the orders' plan
        if early and pending and not settled:
            ends = _guide_first(problem, steps, first, first_order, pending, counts, shown)
        elif improve:
            ends[0] = _finish(steps, first, pending, counts, shown, "")
        if guide and pending and not settled and not steps.budget.spent():
            kinds: tuple[str, ...] = ("LP", "MIP") if guide == "mip" else ("LP",)
            if early:
                kinds = kinds[1:]  # the LP's plan ran first
            for kind in kinds:
                guided = _guided_plan(problem, steps, first_order, first.objective, kind, shown)
                if guided is None:
                    continue  # it does not beat the orders' plan (or the budget ran out)
                plan = guided
                if improve:
                    plan = _finish(steps, plan, pending, counts, shown, kind)
                ends.append(plan)
            if not improve and len(ends) > 1:
                ends = ends[1:]
        if early and search and pending and not settled:
            # rule B6 (section 10.2), in rule B4's range: each end that may be more than
            # AGAIN_GAP below the optimum is searched once more, from itself, with another seed
            again = (swaps, search, seed + AGAIN_SEED)
            for number, end in enumerate(ends):
                if again_wanted(steps, end, pending):
                    ends[number] = _finish(steps, end, pending, again, shown, "again")
        best = max(ends, key=lambda board: board.objective)
    return steps.grid(best)


#: About the time an LP stage takes on this machine class, in seconds: a fixed part (the
#: model built, the solver started) and a part per cell of the model (the LP guides: new
#: tasks x steps; the exact realtime curves: services x steps). Under a time budget a stage
#: whose estimate exceeds the time left does not start and closes the budget (section
#: 10.2): an LP runs to its end once started, so a 1 ms budget would otherwise take the
#: LP's few milliseconds.
LP_SECONDS = (0.001, 12e-6)


#: From this many GPUs on (and up to :data:`GUIDE_FIRST_CELLS`), the plan guided by the
#: step-capacity LP is built right after the three orders' plans and the better of the two
#: is searched first (section 10.2, rule B4): at 32-64 GPUs the orders' plan searched first
#: spends the default budget before the guide, whose plan is the better start on most of
#: the stress set's worst gaps (docs/stress-gaps.md). Below, the guide stays last.
GUIDE_FIRST_GPUS = 32
#: Work units the LP guide costs per cell (new tasks x steps) when it runs right after the
#: orders. Its model, built with numpy and solved without presolve, takes about 1.7 ms at
#: 64 GPUs x 400 cells (``benchmarks/allocation_guide_lp.py``): about 4 us a cell, the time
#: of 10-13 placements in the compiled core; 5 is the price that fits the default budget
#: best (10 a cell leaves the search less and ends worse: docs/stress-gaps.md).
GUIDE_WORK = 5
#: Most cells (new tasks x steps) for which the LP guide runs right after the orders: its
#: price (:data:`GUIDE_WORK` a cell, at most 5,000 units) then leaves half the default
#: budget (:data:`DEFAULT_WORK`) to the search.
GUIDE_FIRST_CELLS = 1_000
#: Whether HiGHS presolves the LP of the guide that runs right after the orders (without:
#: half the solve's time, and on the stress set at 32-64 GPUs as good plans or better).
GUIDE_PRESOLVE = False
#: The time estimate (:data:`LP_SECONDS`' form) of that guide, above what it takes on this
#: machine class (median 1.1 ms at 200 cells, 1.7 ms at 400, with the plan built from it).
GUIDE_FIRST_SECONDS = (0.001, 5e-6)


#: Rule B5 (models/allocation.md 10.2): in rule B4's range (:func:`guide_first`), the
#: default budget's placements of improvement (:data:`DEFAULT_WORK`), the search's work
#: (:data:`~gpuopt.allocation._search.SEARCH_WORK`, scaled to the grid) and its rounds
#: (``search``) are this many times larger: at 32-64 GPUs the default used to spend a
#: quarter of FIFO's time and stopped short of the plans more search finds
#: (docs/stress-gaps.md, "more seeded rounds"). A rule of the problem's size alone, as
#: rule B4 is, so that every budget runs the same sequence (rule B1).
WIDE_SEARCH = 4


def search_scale(gpus: int, cells: int) -> int:
    """How many times the default work, the search's work and its rounds a cluster of
    ``gpus`` GPUs with ``cells`` new tasks x steps gets: :data:`WIDE_SEARCH` in rule B4's
    range (:func:`guide_first`), else 1."""
    return WIDE_SEARCH if guide_first(gpus, cells) else 1


#: Rule B6 (models/allocation.md 10.2): in rule B4's range, each end of the sequence (each
#: plan improved, searched and made exact) is searched once more, from itself, with the seed
#: :data:`AGAIN_SEED` further on, when it is more than this fraction below the best bound
#: the run knows (the step-capacity LP's, which rule B4's guide solves, or
#: :func:`trivial_bound`); within it, the plan is within it of the optimum too, and the
#: issue's bar (5 % below the optimum) holds without more search.
AGAIN_GAP = 0.05
#: The second search's seed is the run's ``seed`` plus this (rule B6); its rounds start again
#: from ``seed + AGAIN_SEED + 1`` on after a stall, as the first search's from ``seed + 1``.
AGAIN_SEED = 1_000
#: Rule B7 (models/allocation.md 10.2): in rule B4's range, once a plan is within this
#: fraction of the step-capacity LP's bound (which the guide of rule B4 solves), it is
#: within it of the optimum, and the search stops there (0: never).
GAP_TOLERANCE = 0.01


def trivial_bound(steps: _Steps, pending: list[int]) -> float:
    """The objective with every pending task at its arrival on its best model and realtime
    served in full (section 6): no plan does better (``_search._at_best``'s test)."""
    base = steps.base
    return base.value + sum(_best_value(base, b) for b in pending)


def again_wanted(steps: _Steps, board: Any, pending: list[int]) -> bool:
    """Whether rule B6 searches ``board`` once more: it is more than :data:`AGAIN_GAP` below
    the best bound the run knows, the step-capacity LP's (solved by rule B4's guide) or
    :func:`trivial_bound`, whichever is lower. A rule of the plan, not of the budget, which
    only stops it as it stops every stage (rule B1)."""
    if steps.budget.spent():
        return False
    if math.isfinite(steps.bound):  # (at most the trivial bound: it drops the LP's rows)
        bound = steps.bound
    else:
        if steps.trivial is None:
            steps.trivial = trivial_bound(steps, pending)
        bound = steps.trivial
    return bound > 0 and board.objective < (1 - AGAIN_GAP) * bound


def guide_first(gpus: int, cells: int) -> bool:
    """Whether the LP-guided plan runs right after the orders (section 10.2, rule B4) on a
    cluster of ``gpus`` GPUs with ``cells`` new tasks x steps: a rule of the problem's size
    alone, so that every budget runs the same sequence (rule B1)."""
    return gpus >= GUIDE_FIRST_GPUS and cells <= GUIDE_FIRST_CELLS


def _guide_first(
    problem: AllocationProblem,
    steps: _Steps,
    first: Any,
    first_order: list[int],
    pending: list[int],
    settings: tuple[int, int, int],
    shown: Any,
) -> list[Any]:
    """The ends of section 10.2, rule B4: the LP-guided plan built right after the orders' plan
    ``first`` (charged :data:`GUIDE_WORK` a cell), then the better of the two improved,
    searched and made exact (:func:`_finish`) and the other after it while the budget
    lasts; the orders' plan's end first in the list (ties go to it)."""
    starts = [(first, "")]
    guided = _guided_plan(
        problem, steps, first_order, -math.inf, "LP", shown, GUIDE_WORK, GUIDE_PRESOLVE, True
    )
    if guided is not None:
        starts.append((guided, "LP"))
    if GAP_TOLERANCE and math.isfinite(steps.bound) and steps.bound > 0:
        # rule B7: within GAP_TOLERANCE of the LP's bound, no search goes on
        steps.budget.target = (1 - GAP_TOLERANCE) * steps.bound
    ends: list[tuple[int, Any]] = []
    # the better start first (ties: the orders' plan, the sort is stable)
    for number, (board, kind) in sorted(enumerate(starts), key=lambda it: -it[1][0].objective):
        if ends and (steps.budget.spent() or steps.budget.reached(ends[0][1].objective)):
            break
        ends.append((number, _finish(steps, board, pending, settings, shown, kind)))
    return [end for _, end in sorted(ends, key=lambda it: it[0])]


def _lp_affordable(
    budget: Any,
    cells: int,
    price: int | None = None,
    seconds: tuple[float, float] = LP_SECONDS,
) -> bool:
    """Whether an LP stage of ``cells`` cells at ``price`` work units a cell (default
    :data:`~gpuopt.allocation._board.LP_WORK`) fits what is left of the work budget and,
    by its estimate (``seconds``: a fixed part and a part per cell), of the time."""
    if not budget.affords((LP_WORK if price is None else price) * cells):
        return False
    left = budget.deadline - time.perf_counter()
    return bool(left >= seconds[0] + seconds[1] * cells)


def _finish(
    steps: _Steps,
    board: Any,
    pending: list[int],
    settings: tuple[int, int, int],
    shown: Any,
    kind: str,
) -> Any:
    """One plan improved (the swap pass, for tasks left out), searched, and its realtime
    curves made exact (:func:`_exact_realtime`), each stage while the budget lasts;
    ``settings`` is (swap attempts, search rounds, seed)."""
    swaps, search, seed = settings
    label = f" ({kind}-guided)" if kind in ("LP", "MIP") else f" ({kind})" if kind else ""
    index = steps.index
    if len(board.starts) < index.num_batch:
        board = steps.improve(board, pending, swaps, shown, label)
    if search:
        board = steps.search(board, pending, search * steps.scale, seed, shown, label)
    budget = steps.budget
    cells = index.num_realtime * index.horizon
    if board.penalty > 0 and cells <= EXACT_CURVES_CELLS:
        if not _lp_affordable(budget, cells):
            budget.close()  # (no stage after this one runs: see greedy_grid)
            return board
        budget.work += LP_WORK * cells
        board = _exact_realtime(board, steps.curves)  # (a core board stays one)
    return board


def _base_board(index: AllocationIndex) -> tuple[Board, list[int]]:
    """The running tasks pinned and the realtime curves set (ramped within the swap rule),
    and the realtime tasks by priority: what every order of the batch tasks starts from."""
    base = Board(index)
    base.pin_running()
    realtime_order = sorted(
        range(index.num_realtime), key=lambda r: (-index.priority[index.realtime_idx[r]], r)
    )
    _set_realtime_orders(base, realtime_order)
    beside_running = index.gpus - running_count(index)
    counts = _curves(base, beside_running)
    if counts is None:  # V3 makes the floor fit beside the running tasks; keep the old clip
        counts = realtime_curves(index, index.demand, realtime_order, beside_running)
    base.set_realtime(counts)
    base.full_counts = counts
    return base, realtime_order


class _Steps:
    """The greedy's steps on one problem, by the compiled core or by the Python modules
    (:mod:`gpuopt.allocation._accel` chooses; both give the same boards and grids).

    With the core, the base board, the plans and the grid are built in C; a Python board
    (:attr:`base`) is built only when a stage needs one (the LP guides, the exact realtime
    curves), and shares the run's budget.
    """

    def __init__(self, index: AllocationIndex, core: Any, limit: float, deadline: float) -> None:
        self.index = index
        self.core = core
        self.scale = 1  # the search's work and rounds, times (search_scale)
        self.trivial: float | None = None  # trivial_bound, once asked for (rule B6)
        self.bound = math.inf  # the step-capacity LP's bound, once a guide solved it (B6, B7)
        self.curves: dict[bytes, Any] = {}  # the exact curves' LP by capacity (_exact_realtime)
        self._base: Board | None = None
        if core is None:
            self._base, self.realtime_order = _base_board(index)
            self.budget: Any = Budget(limit, deadline)
            self._base.budget = self.budget
        else:
            self.budget = core.Budget(limit, deadline)  # (C fields)
            self.static = core.Static(index)
            self.core_base = core.base_board(self.static, self.budget)

    @property
    def base(self) -> Board:
        """The base as a Python board (the running tasks pinned, the realtime curves set)."""
        if self._base is None:
            self._base, self.realtime_order = _base_board(self.index)
            self._base.budget = self.budget
        return self._base

    def order(self, kind: int, pending: list[int]) -> list[int]:
        """``pending`` sorted by ``ORDERS[kind]``."""
        if self.core is None:
            key = ORDERS[kind]
            return sorted(pending, key=lambda b: key(self.index, b))
        found: list[int] = self.static.sorted_by(kind, pending)
        return found

    def construct(self, order: list[int], shown: Any) -> Any:
        """One plan from the base in ``order`` (:func:`_construct`)."""
        if self.core is None:
            return _construct(self.base, order, shown)
        found = self.core.construct(self.core_base, order)
        shown.update(completed=len(order))
        return found

    def guided(self, order: list[int], starts: dict[int, tuple[int, float]]) -> Any:
        """The plan built from the LP's ``starts`` (:func:`_guided`), the other tasks in
        ``order``."""
        if self.core is None:
            return _guided(self.base, order, starts)
        at_starts, others = _guided_orders(self.index.batch, order, starts)
        return self.core.guided(self.core_base, at_starts, others)

    def improve(self, board: Any, pending: list[int], attempts: int, shown: Any, label: str) -> Any:
        """The swap pass (:func:`_improve`)."""
        if self.core is None:
            return _improve(board, pending, attempts, shown, label)
        left_out = sum(1 for b in pending if not board.has(b))
        shown.update(description=f"heuristic: making room{label}", completed=0, total=left_out)
        found = self.core.improve(board, pending, attempts)
        shown.update(completed=left_out)  # (the core does not say how many it tried)
        return found

    def search(
        self,
        board: Any,
        pending: list[int],
        rounds: int,
        seed: int,
        shown: Any,
        label: str,
    ) -> Any:
        """Make room, ruin and recreate, restarts (:func:`_search`)."""
        if self.core is None:
            return _search(board, self.base, pending, rounds, seed, shown, label, self.scale)
        before = self.budget.rounds
        found = self.core.search(board, self.core_base, pending, rounds, seed, self.scale)
        done = self.budget.rounds - before  # the rounds it ran, of both paths
        shown.update(description=f"heuristic: ruin and recreate{label}", completed=done, total=done)
        return found

    def board(self, board: Any) -> Board:
        """A board of the steps' kind as a Python board."""
        if self.core is None:
            assert isinstance(board, Board)
            return board
        converted: Board = board.to_board(self.base)
        return converted

    def grid(self, board: Any) -> Grid:
        """The plan's grid, realtime services bound to GPUs (by priority)."""
        if self.core is None:
            board.bind_realtime(board.counts, self.realtime_order)
            grid: Grid = board.grid()
            return grid
        found: Grid = self.core.grid_of(self.static, board)
        return found


def _best_order(
    steps: _Steps, pending: list[int], orders: Sequence[Any], shown: Any
) -> tuple[Any, bool, list[int]]:
    """The best plan built from the base in one of ``orders`` (keys of the batch tasks),
    whether it is settled (every task starts on arrival), and the first order (for the
    guided plans)."""
    index = steps.index
    best: Any = None
    best_value = -np.inf
    seen: set[tuple[int, ...]] = set()
    first_order: list[int] = []
    for number in range(1, len(orders) + 1):
        order = tuple(steps.order(number - 1, pending))
        if order in seen:
            continue
        seen.add(order)
        if number > 1 and steps.budget.spent():
            break
        first_order = first_order or list(order)  # the guided plan's order for the rest
        shown.update(description=f"heuristic: order {number} of {len(orders)}", completed=0)
        board = steps.construct(list(order), shown)
        if board.objective > best_value + 1e-9:
            best, best_value = board, board.objective
        starts = board.starts  # (a new dict from a core board: read once)
        if index.plain and all(
            starts.get(b, (-1, 0))[0] == index.batch.arrival[b] for b in pending
        ):
            # every task starts on arrival: each has its best value, none does better
            assert best is not None
            return best, True, first_order
    assert best is not None
    return best, False, first_order


def _guided_plan(
    problem: AllocationProblem,
    steps: _Steps,
    first_order: list[int],
    best_value: float,
    kind: str,
    shown: Any,
    price: int | None = None,
    presolve: bool = True,
    first: bool = False,
) -> Any:
    """The plan guided by the step-capacity LP's starts (``kind`` "LP", or the integer step
    MIP's, "MIP"), as the steps' kind of board (:meth:`_Steps.guided`), or None when it
    does not beat ``best_value`` (the orders' plan).

    The solve costs ``price`` (default :data:`~gpuopt.allocation._board.LP_WORK`) per cell
    of the model (new tasks x steps) of the run's budget, HiGHS presolving it or not
    (``presolve``); when that does not fit, or its estimated time (:data:`LP_SECONDS`, or
    :data:`GUIDE_FIRST_SECONDS` for the guide that runs ``first``, after the orders)
    exceeds the time left, the budget is closed (no stage after it runs) and None is
    returned. It stops at its own time cap and at the
    budget's deadline. The search is path-dependent: from a better start alone it may end
    below where it ends from the orders' plan, so the caller searches from both.
    """
    if not HIGHS_INSTALLED:  # a core dependency; only a partial install lacks it
        return None
    budget = steps.budget
    index = steps.index
    cells = sum(1 for running in index.batch.running if not running) * index.horizon
    price = LP_WORK if price is None else price
    if not _lp_affordable(budget, cells, price, GUIDE_FIRST_SECONDS if first else LP_SECONDS):
        budget.close()
        return None
    budget.work += price * cells
    integer = kind == "MIP"
    shown.update(description=f"heuristic: guided by the step-capacity {kind}")
    left = budget.deadline - time.perf_counter()
    if left <= 0:
        return None
    cap = MIP_GUIDE_SECONDS if integer else GUIDE_SECONDS
    relaxed = step_capacity_bound(
        problem, integer=integer, time_limit=min(left, cap), starts=True, presolve=presolve
    )
    steps.bound = min(steps.bound, relaxed.bound)  # (inf when the LP stopped early)
    if not relaxed.starts:
        return None
    guided = steps.guided(first_order, relaxed.starts)
    return guided if guided.objective > best_value + 1e-9 else None


@GREEDY_KEYWORDS.signature
def solve_greedy(
    problem: AllocationProblem, options: GreedyOptions | None = None, **settings: Any
) -> AllocationResult:
    """Run the greedy and return its result (status ``feasible``); the options as
    :func:`greedy_grid`'s."""
    started = time.perf_counter()
    grid = greedy_grid(problem, GREEDY_KEYWORDS.resolve(options, settings))
    seconds = time.perf_counter() - started
    return make_result(
        problem, grid, method="heuristic", seconds=seconds, notes=[heuristic_note("heuristic")]
    )
