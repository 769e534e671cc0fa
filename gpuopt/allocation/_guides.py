"""The greedy's guides: a plan from the step-capacity LP's (or MIP's) starts, and the exact
realtime curves for the final plan (``models/allocation.md`` section 10.1, items 4 and 5).

The LP sees every step's capacity at once, so it delays or leaves out the long,
cheap tasks that the greedy's orders start early; :func:`_guided` follows its
starts where a legal free block holds them (A1, A3) and places every other task
by the construction rules. :func:`_exact_realtime` replaces the curves that serve
the services one after another by the least-penalty curves of an LP (A4); the
batch blocks stay.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuopt.allocation._board import Board, exact_curves
from gpuopt.allocation._construction import (
    TRADE_BUDGET,
    _choose_block,
    _place_at,
    _place_earliest,
    _trade_counts,
)

#: The greedy builds one more plan guided by the step-capacity LP (section 10.1, item 5)
#: when the new tasks times the steps are at most this many: the LP's columns, built and
#: solved in tens of milliseconds here (256 GPUs x 120 tasks x 24 steps: about 0.1 s).
GUIDE_CELLS = 4_096
#: At most this many seconds for that LP (it takes well under one up to GUIDE_CELLS).
GUIDE_SECONDS = 10.0
#: At most this many seconds for the integer step MIP of ``guide="mip"`` (its best plan
#: so far is read when it stops early; 0.1 to 12 s at 64 GPUs x 40 tasks, section 10.1).
MIP_GUIDE_SECONDS = 30.0


def _guided_orders(
    batch: Any, order: list[int], starts: dict[int, tuple[int, float]]
) -> tuple[list[tuple[int, int]], list[int]]:
    """The orders of :func:`_guided`: the (task, LP start) pairs of the tasks the LP
    starts, the largest ``z`` x priority x GPUs x duration first, and the other tasks in
    ``order`` (the compiled core's ``guided`` takes the same two lists)."""

    def worth(b: int) -> tuple[float, int]:
        weight = starts[b][1]
        return (-weight * batch.priority[b] * batch.size[b] * batch.duration[b], b)

    first = [(b, starts[b][0]) for b in sorted((b for b in order if b in starts), key=worth)]
    return first, [b for b in order if b not in starts]


def _guided(base: Board, order: list[int], starts: dict[int, tuple[int, float]]) -> Board:
    """A plan built from the step-capacity LP's starts (section 10.1, item 5).

    The tasks the LP starts go first, the largest ``z`` x priority x GPUs x duration
    first, each at the LP's start where a legal free block holds it (best fit, as the
    greedy places); every other task, and one whose start has no block, then goes to
    its earliest start in ``order``.
    """
    board = base.copy()
    board.trade_budget = TRADE_BUDGET
    batch = board.batch
    at_starts, others = _guided_orders(batch, order, starts)
    rest: list[int] = []
    for b, start in at_starts:
        size = batch.size[b]
        placed = False
        for duration, last, legal, _ in board.variants(b):
            if start > last:
                continue
            end = min(board.horizon, start + duration)
            firsts, free = board.free_firsts(size, start, end, legal)
            if not firsts and board.counts.size:  # the LP gave realtime less here (A4c)
                _, counts = _trade_counts(board, b, start, end, 0.0, legal)
                if counts is not None:
                    board.set_realtime(counts)
                    firsts, free = board.free_firsts(size, start, end, legal)
            if firsts:
                first = _choose_block(board, firsts, free, size, start, end)
                placed = _place_at(board, b, start, first)
                if placed:
                    break
        if not placed:
            rest.append(b)
    for b in others + rest:
        _place_earliest(board, b, trade=True)
    return board


#: Largest realtime subproblem (services x steps) the greedy solves exactly at its end.
EXACT_CURVES_CELLS = 256


def _exact_realtime(board: Any, known: dict[bytes, Any] | None = None) -> Any:
    """The realtime curves of least penalty for the batch plan as it stands (an LP,
    :func:`exact_curves`), when they beat the greedy's own curves, which serve the services
    one after another (section 10, A4). The batch blocks stay; only the counts change.

    ``board`` is a Python board or the compiled core's (``CoreBoard``: its ``capacity``,
    ``penalty_of`` and ``with_curves`` do the same as the lines for a Python board).
    ``known``, one run's memo: the LP's answer for each capacity it was solved for. The
    LP depends on the problem and the capacity alone, and a run's ends often leave the
    same capacity (two ends that meet, a search again that finds nothing better), so
    the same LP is not solved twice."""
    index = board.index
    if board.penalty <= 0 or index.num_realtime * index.horizon > EXACT_CURVES_CELLS:
        return board
    core = not isinstance(board, Board)
    capacity = board.capacity() if core else np.array(board.room) + board.reserved
    key = np.asarray(capacity, dtype=np.int64).tobytes()
    if known is not None and key in known:
        exact = known[key]
    else:
        exact = exact_curves(index, capacity)
        if known is not None:
            known[key] = exact
    if exact is None:
        return board
    exact = exact.copy()  # (the memo's array stays as solved, whatever a board does)
    penalty = board.penalty_of(exact) if core else board.realtime_penalty(exact)
    if penalty >= board.penalty - 1e-9:
        return board
    if core:
        return board.with_curves(exact)
    board = board.copy()
    board.set_realtime(exact)
    return board
