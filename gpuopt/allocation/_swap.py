"""The greedy's swap pass: make room for a left-out task by moving one placed task.

Every change is made on the board in place and taken back exactly when it does
not raise the objective (:class:`_Trial`); the placed tasks a left-out task may
move aside are kept sorted by value as the board changes (:class:`_Victims`).
A block is removed and re-added whole, never moved in part (A5).
"""

from __future__ import annotations

import bisect

import gpuopt.progress
from gpuopt.allocation._board import Board
from gpuopt.allocation._construction import TRADE_BUDGET, _place_earliest

#: How many placed tasks the improvement pass tries to move aside for one left-out task.
VICTIMS = 4


class _Trial:
    """A change the swap pass may take back: a cheap stand-in for ``board.copy()``.

    A copy per swap tried copied every placed task and the realtime counts
    (about a millisecond each at 65,536 GPUs x 100,000 tasks, some 200,000
    times). The swap pass changes the board in place instead; :meth:`undo`
    puts back the blocks of ``tasks`` and the realtime counts, and restores
    the objective's terms and the trade budget as they were (the same floats,
    so the pass decides exactly as it did with copies).
    """

    def __init__(self, board: Board, tasks: tuple[int, ...]) -> None:
        self.board = board
        self.blocks = {b: board.starts.get(b) for b in tasks}  # (start, first GPU) or None
        self.objective = board.objective
        self._saved = (board.value, board.penalty, board.trade_budget, board.counts)

    def undo(self) -> None:
        """Take the change back."""
        board = self.board
        for b in self.blocks:
            if b in board.starts:
                board.remove(b)
        for b, block in self.blocks.items():
            if block is not None:
                start, first = block
                board.place(b, board.batch.size[b], first, start, board.end_of(b, start, first))
        value, penalty, budget, counts = self._saved
        if board.counts is not counts:  # a trade replaced them (set_realtime never writes in place)
            board.set_realtime(counts)
        board.value, board.penalty, board.trade_budget = value, penalty, budget


class _Victims:
    """The placed tasks the swap pass may move aside, cheapest first.

    Sorting every placed task for each left-out task made the swap pass
    quadratic (most of its 45 CPU minutes at 65,536 GPUs x 100,000 tasks).
    Here the placed tasks stay sorted as the board changes, in one list per
    end step (start + duration), so a window skips whole lists of tasks that
    end before it. Same victims, same order.
    """

    def __init__(self, board: Board) -> None:
        running, duration = board.batch.running, board.batch.duration
        self._key_of: dict[int, tuple[int, tuple[float, int]]] = {}  # b -> (end, key)
        self._by_end: dict[int, list[tuple[float, int]]] = {}  # end -> sorted (value, b)
        for b, (start, _first) in board.starts.items():
            if not running[b]:
                key = (board.block_value(b, start), b)
                self._key_of[b] = (start + duration[b], key)
                self._by_end.setdefault(start + duration[b], []).append(key)
        for keys in self._by_end.values():
            keys.sort()
        self._ends = sorted(self._by_end)

    def sync(self, board: Board, tasks: tuple[int, ...]) -> None:
        """Bring the entries of ``tasks`` in line with ``board`` (after a kept change)."""
        for b in tasks:
            old = self._key_of.pop(b, None)
            if old is not None:
                end, key = old
                keys = self._by_end[end]
                del keys[bisect.bisect_left(keys, key)]
                if not keys:
                    del self._by_end[end]
                    self._ends.remove(end)
            placed = board.starts.get(b)
            if placed is not None and not board.batch.running[b]:
                end = placed[0] + board.batch.duration[b]
                key = (board.block_value(b, placed[0]), b)
                self._key_of[b] = (end, key)
                if end not in self._by_end:
                    self._by_end[end] = []
                    bisect.insort(self._ends, end)
                bisect.insort(self._by_end[end], key)

    def cheapest(self, board: Board, window_lo: int, window_hi: int, count: int) -> list[int]:
        """Up to ``count`` placed tasks whose steps overlap ``[window_lo, window_hi)``."""
        starts, ends = board.starts, self._ends
        found: list[tuple[float, int]] = []  # the cheapest so far, sorted, at most ``count``
        for end in ends[bisect.bisect_right(ends, window_lo) :]:
            for key in self._by_end[end]:
                if len(found) == count and key >= found[-1]:
                    break  # the rest of this end's list is dearer still
                if starts[key[1]][0] < window_hi:
                    bisect.insort(found, key)
                    del found[count:]
        return [b for _value, b in found]


def _improve(
    board: Board,
    pending: list[int],
    max_attempts: int,
    shown: gpuopt.progress.Task = gpuopt.progress.NO_TASK,
    label: str = "",
) -> Board:
    """Make room for left-out tasks by re-placing one placed task.

    For each task left out (by priority), first try to place it alone,
    weighing a realtime trade at every start (not only the first
    :data:`~gpuopt.allocation._construction.TRADE_STARTS`: the whole board's
    objective judges the trade here); then try up to :data:`VICTIMS` placed
    tasks whose steps overlap its window, cheapest first: remove it, place the
    left-out task (trading realtime GPUs where that pays, at any start), put the removed
    task back at its earliest fit if it still fits anywhere. Keep the change
    only if the objective rises (so a small high-priority task can give way to
    a large one worth more in total). Changes ``board`` in place (each swap
    tried is taken back unless kept, see :class:`_Trial`) and returns it.
    """
    batch = board.batch
    priority = batch.priority
    attempts = 0
    board.trade_budget = TRADE_BUDGET
    left_out = sorted(
        (b for b in pending if b not in board.starts), key=lambda b: (-priority[b], b)
    )
    shown.update(description=f"heuristic: making room{label}", completed=0, total=len(left_out))
    victims = _Victims(board)
    for u in left_out:
        if board.budget.spent():
            return board
        shown.advance()
        # first, with no victim: a trade at any start (the whole board's objective judges
        # it, so the realtime penalty it adds is counted)
        if board.counts.size:
            trial = _Trial(board, (u,))
            if (
                _place_earliest(board, u, trade=True, trade_starts=board.horizon)
                and board.objective > trial.objective + 1e-9
            ):
                victims.sync(board, (u,))
                continue
            trial.undo()
        window_lo = batch.arrival[u]
        window_hi = batch.last_start[u] + batch.duration[u]
        for victim in victims.cheapest(board, window_lo, window_hi, VICTIMS):
            if attempts >= max_attempts or board.budget.spent():
                return board
            attempts += 1
            trial = _Trial(board, (u, victim))
            board.remove(victim)
            if _place_earliest(board, u, trade=True, trade_starts=board.horizon):
                _place_earliest(board, victim, trade=True)
                if board.objective > trial.objective + 1e-9:
                    victims.sync(board, (u, victim))
                    break
            trial.undo()
    return board
