# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The greedy's compiled core: the construction rules, the swap pass and the search of
:mod:`gpuopt.allocation.greedy`, for plain problems (one GPU model) of at most 64 GPUs, in
C, on the board of ``_cboard`` and the tables of ``_cstatic``.

It is a line-by-line translation of the pure-Python modules
(:mod:`~gpuopt.allocation._board`, :mod:`~gpuopt.allocation._construction`,
:mod:`~gpuopt.allocation._swap`, :mod:`~gpuopt.allocation._search`): the same rules, the
same order of floating-point operations, the same draws of CPython's Mersenne Twister in
the same order (``_crandom``), and the same realtime curves and penalty to the bit. So it
gives the same grid to the GPU, only faster; the tests compare both
(``tests/allocation/test_core.py``). Each function names the Python function it
translates; read that one for the reasons behind the rule.

The placed tasks are kept in the order the Python board's ``starts`` dict would hold them
(a doubly linked list: a task placed again goes to the end), since some loops visit them
in that order and sum their values in it.
"""

from libc.math cimport pow
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc

from gpuopt.allocation import _search as _py_search
from gpuopt.allocation import _swap as _py_swap
from gpuopt.allocation._construction import (
    CANDIDATES,
    ORDERS,
    TRADE_BUDGET,
    TRADE_STARTS,
    VECTOR_STARTS,
)

from gpuopt.allocation._cbits cimport (
    __builtin_popcountll,
    _bit_length,
    _lowest,
    _min,
    _ones,
)
from gpuopt.allocation._cboard cimport (
    CoreBoard,
    _set_realtime,
    block_value,
    capacity,
    end_of,
    free_firsts,
    last_short_step,
    place,
    placed_value,
    remove,
)
from gpuopt.allocation._crandom cimport Rng
from gpuopt.allocation._cstatic cimport Budget, Static, _by_rank, _curves, _penalty

cdef double INF = float("inf")


def supported(index) -> bool:
    """Whether the core handles this problem: one GPU model, at most 64 GPUs."""
    return bool(index.plain) and 1 <= index.gpus <= 64 and index.horizon >= 1

# ---------------------------------------------------------------- construction rules


cdef int64_t _choose_block(CoreBoard board, uint64_t firsts, uint64_t free_, int size,
                           int64_t start, int64_t end) noexcept:
    """``_construction._choose_block`` (with ``_wall_candidates`` and ``_contact``)."""
    cdef Static st = board.st
    cdef int G = st.G, n, k, touching, best_touch = -1
    cdef int cands[8]
    cdef uint64_t busy, shifted, left, right, exact, mask
    cdef int64_t first, best = -1, T = board.T
    if firsts & (firsts - 1) == 0:
        return _bit_length(firsts) - 1
    busy = st.full & ~free_
    left = firsts & ((busy << 1) | st.walls_left[size])
    # (the Python mask has bit G set too: shifted right by size it lands on bit G - size)
    shifted = busy >> size if size < 64 else 0  # (a shift by 64 is undefined in C)
    right = firsts & (shifted | ((<uint64_t>1) << (G - size)) | st.walls_right[size])
    exact = left & right
    if exact:
        n = _lowest(exact, CANDIDATES, cands)
    else:
        n = _lowest(left | right, CANDIDATES, cands)
        if n == 0:
            n = _lowest(firsts, 1, cands)
    if n == 1:
        return cands[0]
    for k in range(n):
        first = cands[k]
        mask = _ones(size) << first
        touching = size if start == 0 else __builtin_popcountll(board.busy[start - 1] & mask)
        touching += size if end >= T else __builtin_popcountll(board.busy[end] & mask)
        if touching > best_touch or (touching == best_touch and first < best):
            best_touch = touching
            best = first
    return best


cdef int64_t _earliest(CoreBoard board, int64_t size, int64_t start, int64_t last,
                       int64_t duration, uint64_t legal) noexcept:
    """``_construction._earliest``."""
    cdef int64_t T = board.T, end, short
    cdef uint64_t free_
    while start <= last:
        end = T if start + duration > T else start + duration
        short = last_short_step(board, size, start, end)
        if short >= 0:
            start = short + 1
            continue
        if free_firsts(board, <int>size, start, end, legal, &free_):
            return start
        start += 1
    return -1

cdef double _trade_counts(CoreBoard board, int64_t b, int64_t start, int64_t end, double beat,
                          uint64_t legal, double* floors, list found):
    """``_construction._trade_counts`` at rate 1.0: returns the gain (``beat`` when it does
    not pay) and appends the realtime counts to ``found`` when it does."""
    cdef Static st = board.st
    cdef int64_t size, step, missing
    cdef double value, penalty_floor, gain
    cdef uint64_t free_
    if board.trade_budget <= 0:
        return beat
    size = st.size[b]
    value = block_value(board, b, start, end)
    if value - beat < st.cheapest[end - 1]:
        return beat
    missing = size - board.room[end - 1] - board.over[end - 1]
    if missing > 0 and value - missing * st.cheapest[end - 1] <= beat + 1e-9:
        return beat
    if floors != NULL:
        penalty_floor = floors[end] - floors[start]
    else:
        penalty_floor = 0.0
        for step in range(start, end):
            missing = size - board.room[step] - board.over[step]
            if missing > 0:
                penalty_floor += missing * st.cheapest[step]
    if value - penalty_floor <= beat + 1e-9 or board.trade_budget <= 0:
        return beat
    if not free_firsts(board, <int>size, start, end, legal, &free_):
        return beat
    board.trade_budget -= 1
    cdef int64_t* cap = capacity(board)
    for step in range(start, end):
        cap[step] -= size
    for step in range(board.T):
        if cap[step] < 0:
            free(cap)
            return beat
    trial = _curves(board.st, cap)
    free(cap)
    if trial is None:
        return beat
    gain = value - (_penalty(st, trial) - board.penalty)
    if gain > beat + 1e-9:
        found.append(trial)
        return gain
    return beat


cdef void _floor_prefix(CoreBoard board, int64_t size, double* floors) noexcept:
    """``_construction._floor_prefix`` into ``floors`` (T + 1 entries)."""
    cdef int64_t step, missing
    cdef double term
    floors[0] = 0.0
    for step in range(board.T):
        missing = size - board.room[step] - board.over[step]
        term = missing * board.st.cheapest[step] if missing > 0 else 0.0
        floors[step + 1] = floors[step] + term


cdef bint _place_earliest(CoreBoard board, int64_t b, bint trade, int64_t trade_starts):
    """``_construction._place_earliest`` (plain: one variant)."""
    cdef Static st = board.st
    cdef int64_t size = st.size[b], arrival = st.arrival[b], T = board.T
    cdef int64_t duration = st.duration[b], last = st.last[b]
    cdef uint64_t legal = st.legal[b], firsts_free, free_
    cdef int64_t found, stop, start, end, n
    cdef double best, beat0, top, value, gain, last_price
    cdef int64_t last_missing
    cdef double* floors = NULL
    cdef bint vector
    cdef list trial = []
    board.budget.work += 1
    counts = None
    found = _earliest(board, size, arrival, last, duration, legal)
    if trade and board.counts.size:
        best = 0.0
        if found >= 0:
            best = block_value(board, b, found, T if found + duration > T else found + duration)
        stop = found if found >= 0 else last + 1
        if arrival + trade_starts < stop:
            stop = arrival + trade_starts
        if board.trade_budget > 0 and stop > arrival:
            top = block_value(board, b, arrival, T if arrival + duration > T else arrival + duration)
            n = stop - 1 + duration
            if not (top - best < st.cheapest[(T if n > T else n) - 1]):
                vector = stop - arrival > VECTOR_STARTS
                beat0 = best
                if vector:
                    floors = <double*>malloc((T + 1) * sizeof(double))
                    _floor_prefix(board, size, floors)
                try:
                    for start in range(arrival, stop):
                        if board.trade_budget <= 0:
                            break
                        end = T if start + duration > T else start + duration
                        if vector:
                            # _trade_candidates' tests at the beat it was called with (the
                            # best before the loop): a start they drop is never weighed
                            value = block_value(board, b, start, end)
                            last_price = st.cheapest[end - 1]
                            last_missing = size - board.room[end - 1] - board.over[end - 1]
                            if not (value - beat0 >= last_price):
                                continue
                            if last_missing > 0 and value - last_missing * last_price <= beat0 + 1e-9:
                                continue
                            if not (value - (floors[end] - floors[start]) > beat0 + 1e-9):
                                continue
                        gain = _trade_counts(board, b, start, end, best, legal, floors, trial)
                        if trial:
                            best = gain
                            counts = trial.pop()
                            found = start
                finally:
                    if floors != NULL:
                        free(floors)
    if found < 0:
        return False
    if counts is not None:
        _set_realtime(board, counts)
    end = T if found + duration > T else found + duration
    firsts_free = free_firsts(board, <int>size, found, end, legal, &free_)
    place(board, b, size, _choose_block(board, firsts_free, free_, <int>size, found, end), found, end)
    return True


cpdef CoreBoard construct(CoreBoard base, list order):
    """``_construction._construct`` (no progress: the core's plans take milliseconds)."""
    cdef CoreBoard board = base.copy()
    board.trade_budget = TRADE_BUDGET
    for b in order:
        _place_earliest(board, b, True, TRADE_STARTS)
    return board


cdef bint _place_at(CoreBoard board, int64_t b, int64_t start, int64_t first):
    """``_construction._place_at``."""
    cdef int64_t size = board.st.size[b]
    cdef int64_t end = end_of(board, b, start)
    cdef uint64_t block = _ones(<int>size) << first
    cdef int64_t s
    cdef list trial = []
    board.budget.work += 1
    for s in range(start, end):
        if board.busy[s] & block:
            return False
    if last_short_step(board, size, start, end) >= 0:
        _trade_counts(board, b, start, end, 0.0, (<uint64_t>1) << first, NULL, trial)
        if not trial:
            return False
        _set_realtime(board, trial[0])
    place(board, b, size, first, start, end)
    return True


cdef class _Trial:
    """``_swap._Trial``: a change the swap pass may take back."""

    cdef CoreBoard board
    cdef list tasks, blocks
    cdef double objective, value, penalty
    cdef int64_t budget
    cdef object counts

    def __cinit__(self, CoreBoard board, tuple tasks):
        self.board = board
        self.tasks = list(tasks)
        self.blocks = [
            (board.start_of[b], board.first_of[b]) if board.placed[b] else None for b in tasks
        ]
        self.objective = board.value - board.penalty
        self.value, self.penalty = board.value, board.penalty
        self.budget, self.counts = board.trade_budget, board.counts

    cdef void undo(self):
        cdef CoreBoard board = self.board
        cdef int64_t b, start, first
        for b in self.tasks:
            if board.placed[b]:
                remove(board, b)
        for b, block in zip(self.tasks, self.blocks):
            if block is not None:
                start, first = block
                place(board, b, board.st.size[b], first, start, end_of(board, b, start))
        if board.counts is not self.counts:
            _set_realtime(board, self.counts)
        board.value, board.penalty, board.trade_budget = self.value, self.penalty, self.budget


cdef list _cheapest(CoreBoard board, int64_t lo, int64_t hi, int count):
    """``_swap._Victims.cheapest``: up to ``count`` placed tasks (not running) whose steps
    (from the start, ``duration`` long, unclipped) overlap ``[lo, hi)``, cheapest first
    (value from the start, ties the lower position)."""
    cdef Static st = board.st
    cdef int64_t b = board.head, start
    cdef list found = []
    while b >= 0:
        start = board.start_of[b]
        if not st.running[b] and start + st.duration[b] > lo and start < hi:
            found.append((block_value(board, b, start, _min(board.T, start + st.duration[b])), b))
        b = board.nxt[b]
    found.sort()
    return [key[1] for key in found[:count]]

def improve(CoreBoard board, list pending, int64_t max_attempts):
    """``_swap._improve`` (changes ``board`` in place and returns it)."""
    cdef Static st = board.st
    cdef int64_t attempts = 0, u, victim, window_lo, window_hi
    cdef _Trial trial
    board.trade_budget = TRADE_BUDGET
    left_out = sorted(
        (b for b in pending if not board.placed[b]), key=lambda b: (-st.priority[b], b)
    )
    for u in left_out:
        if board.budget.spent():
            return board
        if board.counts.size:
            trial = _Trial(board, (u,))
            if (
                _place_earliest(board, u, True, board.T)
                and board.value - board.penalty > trial.objective + 1e-9
            ):
                continue
            trial.undo()
        window_lo = st.arrival[u]
        window_hi = st.last[u] + st.duration[u]
        for victim in _cheapest(board, window_lo, window_hi, _py_swap.VICTIMS):
            if attempts >= max_attempts or board.budget.spent():
                return board
            attempts += 1
            trial = _Trial(board, (u, victim))
            remove(board, victim)
            if _place_earliest(board, u, True, board.T):
                _place_earliest(board, victim, True, TRADE_STARTS)
                if board.value - board.penalty > trial.objective + 1e-9:
                    break
            trial.undo()
    return board

cdef list _recreate_order(CoreBoard board, list tasks, Rng rng):
    """``_search._recreate_order``: one of the greedy's keys, a shuffle, or total worth
    perturbed by up to 50 %."""
    cdef Static st = board.st
    cdef int mode = <int>rng.below(4)
    cdef int64_t n = len(tasks), i, b
    cdef int64_t* order
    cdef double u
    if mode == 0:
        return _by_rank(tasks, st.rank_urgent)
    if mode == 1:
        return _by_rank(tasks, st.rank_value)
    if mode == 2:
        order = <int64_t*>malloc(max(1, n) * sizeof(int64_t))
        for i in range(n):
            order[i] = tasks[i]
        rng.shuffle(order, n)
        out = [order[i] for i in range(n)]
        free(order)
        return out
    noisy = {}
    for b in tasks:
        u = 0.5 + (1.5 - 0.5) * rng.random()
        noisy[b] = st.priority[b] * <double>st.size[b] * <double>st.duration[b] * u
    return sorted(tasks, key=lambda b: (-noisy[b], b))



cdef inline bint _can_start(Static st, int64_t b) noexcept:
    """``_search._can_start`` (plain)."""
    return st.last[b] >= st.arrival[b]


cdef double _best_value(CoreBoard board, int64_t b) noexcept:
    """``_search._best_value`` (plain: ``max(..., default=0.0)`` of one value)."""
    cdef Static st = board.st
    cdef int64_t arrival = st.arrival[b]
    if arrival > st.last[b]:
        return 0.0
    return block_value(board, b, arrival, _min(board.T, arrival + st.duration[b]))


cdef class _Room:
    """``_search._Room``."""

    cdef public int64_t checks, survey, placements, budget
    cdef Budget run

    def __cinit__(self, int64_t survey, int64_t budget, Budget run):
        self.checks, self.survey = 0, survey
        self.placements, self.budget, self.run = 0, budget, run

    cdef bint spent(self):
        return self.placements >= self.budget or self.run.spent()


cdef inline int64_t _scaled(int64_t work, CoreBoard board) noexcept:
    """``_search._scaled``."""
    cdef int64_t g = board.st.G if board.st.G > 32 else 32
    cdef int64_t t = board.T if board.T > 12 else 12
    return work * 32 * 12 // (g * t)


cdef object _victims(CoreBoard board, int64_t start, int64_t end, int64_t lo, int64_t hi,
                     int64_t mover, int64_t keep):
    """``_search._victims``: None when a running task (or ``keep``) is in the way."""
    cdef Static st = board.st
    cdef int64_t b = board.head, begin, first
    cdef list found = []
    while b >= 0:
        begin = board.start_of[b]
        first = board.first_of[b]
        if (
            b != mover
            and begin < end
            and end_of(board, b, begin) > start
            and first < hi
            and first + st.size[b] > lo
        ):
            if st.running[b] or b == keep:
                return None
            found.append(b)
        b = board.nxt[b]
    return found


cdef object _positions(CoreBoard board, int64_t u, _Room room, int64_t keep):
    """``_search._positions``: earlier positions for ``u`` as ``(value in the way - value
    gained, start, first GPU, tasks in the way)``, cheapest first; None when the survey's
    budget runs out."""
    cdef Static st = board.st
    cdef int64_t size = st.size[u], last = st.last[u], start, end, first, k, n, v
    cdef double current = 0.0, worth, lost
    cdef int firsts[64]
    cdef list options = []
    cdef int64_t before = room.checks
    if board.placed[u]:
        current = placed_value(board, u)
        last = _min(last, board.start_of[u] - 1)
    n = _lowest(st.legal[u], st.G, firsts)
    for start in range(st.arrival[u], last + 1):
        end = _min(board.T, start + st.duration[u])
        worth = block_value(board, u, start, end) - current
        for k in range(n):
            first = firsts[k]
            room.checks += board.count
            if room.checks > room.survey:
                board.budget.work += (room.checks - before) // _py_search.SURVEY_CHECKS
                return None
            victims = _victims(board, start, end, first, first + size, u, keep)
            if victims is None:
                continue
            lost = 0.0
            for v in victims:
                lost += placed_value(board, v)
            options.append((lost - worth, start, first, victims))
    options.sort(key=_first_three)
    board.budget.work += (room.checks - before) // _py_search.SURVEY_CHECKS
    return options


def _first_three(option):
    return option[:3]


cdef void _refresh_realtime(CoreBoard board):
    """``_search._refresh_realtime``: the curves recomputed in the room the batch blocks
    leave, unless no trade cut them (then they come out the same)."""
    cdef Static st = board.st
    cdef int64_t[:, ::1] c, f
    cdef int64_t i
    if not st.R:
        return
    full = st.full_counts
    if full is not None:
        if board.counts is full:
            return
        c, f = board.counts, full
        for i in range(st.R * st.T):
            if c[i // st.T, i % st.T] != f[i // st.T, i % st.T]:
                break
        else:
            return
    cdef int64_t* cap = capacity(board)
    counts = _curves(board.st, cap)
    free(cap)
    if counts is not None:
        _set_realtime(board, counts)


cdef tuple _move(CoreBoard board, int64_t u, int64_t start, int64_t first, list victims,
                 list pending):
    """``_search._move``: the better board (None when ``u`` finds no room there) and the
    placements spent."""
    cdef CoreBoard trial = board.copy(), again, found = None
    cdef int64_t v, b
    cdef int k
    if trial.placed[u]:
        remove(trial, u)
    for v in victims:
        remove(trial, v)
    _refresh_realtime(trial)
    trial.trade_budget = TRADE_BUDGET
    if not _place_at(trial, u, start, first):
        return None, 0
    offer = [b for b in pending if not trial.placed[b]]
    for k in range(2):  # by priority, then by total worth
        again = trial.copy()
        for b in _by_rank(offer, board.st.rank_urgent if k == 0 else board.st.rank_value):
            _place_earliest(again, b, True, again.T)
        if found is None or again.value - again.penalty > found.value - found.penalty + 1e-9:
            found = again
    return found, 2 * len(offer) + 1


cdef inline double _objective(CoreBoard board) noexcept:
    return board.value - board.penalty


cdef CoreBoard _chain(CoreBoard board, int64_t u, dict before, list pending, _Room room,
                      int depth):
    """``_search._chain``."""
    cdef CoreBoard best = board, found
    cdef dict lost = {}
    cdef int64_t v
    for v, value in before.items():
        lost[v] = value - (placed_value(board, v) if board.placed[v] else 0.0)
    v = min(lost, key=lambda v: (-lost[v], v))
    if lost[v] <= 1e-9:
        return board
    options = _positions(board, v, room, u)
    for _, start, first, victims in (options or [])[: _py_search.ROOM_TRIES]:
        if room.spent():
            break
        found, spent = _move(board, v, start, first, victims, pending)
        room.placements += spent
        if (
            found is not None
            and _objective(found) <= _objective(best) + 1e-9
            and victims
            and depth > 1
        ):
            again = {w: placed_value(board, w) for w in victims}
            found = _chain(found, v, again, pending, room, depth - 1)
        if found is not None and _objective(found) > _objective(best) + 1e-9:
            best = found
    return best


cdef list _movers(CoreBoard board, list pending):
    """``_search._movers``."""
    cdef Static st = board.st
    cdef dict gains = {}
    cdef int64_t u
    for u in pending:
        if (board.placed[u] and board.start_of[u] <= st.arrival[u]) or not _can_start(st, u):
            continue
        gains[u] = _best_value(board, u) - (placed_value(board, u) if board.placed[u] else 0.0)
    return sorted((u for u in gains if gains[u] > 1e-9), key=lambda u: (-gains[u], u))


cdef tuple _make_room(CoreBoard board, list pending, int64_t budget):
    """``_search._make_room``: the best board and the placements spent."""
    cdef Static st = board.st
    cdef _Room room = _Room(_scaled(_py_search.ROOM_WORK, board), budget, board.budget)
    cdef CoreBoard found
    cdef int64_t u, tries
    for u in _movers(board, pending):
        if room.spent():
            break
        if board.placed[u] and board.start_of[u] <= st.arrival[u]:
            continue
        options = _positions(board, u, room, -1)
        if options is None:
            return board, room.placements
        tries = 0
        for _, start, first, victims in options[: 4 * _py_search.ROOM_TRIES]:
            if room.spent():
                return board, room.placements
            found, spent = _move(board, u, start, first, victims, pending)
            if found is None:
                continue
            tries += 1
            room.placements += spent
            if _objective(found) <= _objective(board) + 1e-9 and victims:
                before = {v: placed_value(board, v) for v in victims}
                found = _chain(found, u, before, pending, room, _py_search.CHAIN_DEPTH)
            if _objective(found) > _objective(board) + 1e-9:
                board = found
                break
            if tries >= _py_search.ROOM_TRIES:
                break
    return board, room.placements


cdef tuple _ruin(CoreBoard board, list pending, Rng rng):
    """``_search._ruin``: the tasks to remove, those to offer last, and a left-out task to
    place first (with its start and first GPU) or None."""
    cdef Static st = board.st
    cdef int64_t T = board.T, gpus = st.G, b, start, first, end, lo, hi, u, length
    cdef int64_t s0, s1, arrival, last, k, n, width
    cdef int kind
    cdef int firsts[64]
    cdef int64_t picked[3]
    cdef int64_t* pool
    cdef list removed, widths
    movable = [b for b in range(st.nb) if board.placed[b] and not st.running[b]]
    left_out = [b for b in pending if not board.placed[b] and _can_start(st, b)]
    kind = <int>rng.below(6 if left_out else 5)
    if kind == 5 or not movable:  # make room for a left-out task where it is asked to go
        if not left_out:
            return [], [], None
        u = left_out[rng.below(len(left_out))]
        arrival, last = st.arrival[u], st.last[u]
        rng.below(1)  # (the choice among its GPU models: a plain problem has one)
        start = arrival + <int64_t>(pow(rng.random(), 2.0) * <double>(last - arrival + 1))
        n = _lowest(st.legal[u], <int>gpus, firsts)
        first = firsts[rng.below(n)]
        end, lo, hi = _min(T, start + st.duration[u]), first, first + st.size[u]
        s0, s1 = start, end
        target = (u, start, first)
    elif kind == 3:  # a few tasks anywhere
        k = rng.randint(1, 3)
        n = len(movable)
        k = k if k < n else n
        pool = <int64_t*>malloc(n * sizeof(int64_t))
        for b in range(n):
            pool[b] = movable[b]
        rng.sample(pool, n, k, picked)
        free(pool)
        return [picked[b] for b in range(k)], [], None
    elif kind == 4:  # drop one task: the others are re-placed first, then it is offered again
        dropped = [movable[rng.below(len(movable))]]
        return dropped, dropped, None
    else:
        target, s0, s1, lo, hi = None, 0, T, 0, gpus
        if kind in (0, 2):  # a range of steps (kind 2: crossed with a range of GPUs)
            length = rng.randint(max(1, T // 4), T)
            s0 = rng.randrange(0, T - length + 1)
            s1 = s0 + length
        if kind in (1, 2):
            widths = [w for w in _py_search.WIDTHS if w <= gpus] or [gpus]
            width = widths[rng.below(len(widths))]
            lo = rng.randrange(0, gpus - width + 1)
            hi = lo + width
    removed = []
    for b in movable:
        start = board.start_of[b]
        first = board.first_of[b]
        end = end_of(board, b, start)
        if start < s1 and end > s0 and first < hi and first + st.size[b] > lo:
            removed.append(b)
    return removed, [], target


cdef bint _at_best(CoreBoard board, dict most):
    """``_search._at_best``."""
    if board.penalty > 0:
        return False
    for b, value in most.items():
        if not (value <= 0 or (board.placed[b] and placed_value(board, b) >= value - 1e-9)):
            return False
    return True


cpdef CoreBoard ruin_and_recreate(CoreBoard board, list pending, int64_t rounds, object seed):
    """``_search._ruin_and_recreate``: the best board seen."""
    cdef CoreBoard best, current, trial
    cdef int64_t budget, placements, stalled = 0, b
    cdef Rng rng = Rng(seed)
    budget = _scaled(_py_search.SEARCH_WORK, board)
    if budget < 1:
        return board
    most = {b: _best_value(board, b) for b in pending}
    best, placements = _make_room(board, pending, budget // 2)
    current = best
    for _ in range(rounds):
        if placements >= budget or stalled >= _py_search.STALL_ROUNDS or board.budget.spent():
            break
        if _at_best(current, most):
            break
        board.budget.rounds += 1
        stalled += 1
        trial = current.copy()
        removed, last, target = _ruin(trial, pending, rng)
        for b in removed:
            remove(trial, b)
        _refresh_realtime(trial)
        trial.trade_budget = 2 * TRADE_BUDGET
        if target is not None:
            _place_at(trial, target[0], target[1], target[2])
        offer = [b for b in pending if not trial.placed[b] and b not in last]
        for b in [*_recreate_order(trial, offer, rng), *last]:
            _place_earliest(trial, b, True, trial.T)
        placements += len(offer) + len(last)
        if _objective(trial) >= _objective(current) - 1e-9:
            current = trial
            if _objective(trial) > _objective(best) + 1e-9:
                best, stalled = trial, 0
    return best


def restarts(CoreBoard board, CoreBoard base, list pending, int64_t budget):
    """``_search._restarts``."""
    cdef Static st = board.st
    cdef int64_t cost = len(pending), u, b
    cdef _Room room = _Room(_scaled(_py_search.ROOM_WORK, board), budget, board.budget)
    cdef CoreBoard best = board, trial
    orders = [
        _by_rank(pending, st.rank_urgent),
        _by_rank(pending, st.rank_value),
        _by_rank(pending, st.rank_arrival),
    ]
    for u in _movers(board, pending):
        if board.budget.spent():
            break
        options = _positions(board, u, room, -1)
        if options is None:
            break
        for _cost, start, first, _way in options[: _py_search.RESTART_TRIES]:
            for order in orders:
                if room.placements + cost > budget or board.budget.spent():
                    return best
                trial = base.copy()
                trial.trade_budget = TRADE_BUDGET
                if not _place_at(trial, u, start, first):
                    break
                room.placements += cost
                for b in order:
                    if b != u:
                        _place_earliest(trial, b, True, TRADE_STARTS)
                if _objective(trial) > _objective(best) + 1e-9:
                    best = trial
    return best


cpdef CoreBoard search(CoreBoard board, CoreBoard base, list pending, int64_t rounds,
                       object seed):
    """``_search._search``."""
    cdef CoreBoard found, restarted, again
    cdef int64_t budget, b
    found = ruin_and_recreate(board, pending, rounds, seed)
    budget = _scaled(_py_search.RESTART_WORK, board)
    if len(pending) > budget or _at_best(found, {b: _best_value(board, b) for b in pending}):
        return found
    if board.budget.spent():
        return found
    restarted = restarts(board, base, pending, budget)
    if restarted is board:
        return found
    again = ruin_and_recreate(restarted, pending, rounds, seed)
    return again if _objective(again) > _objective(found) + 1e-9 else found
