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
from libc.string cimport memcpy

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
from gpuopt.allocation._cstatic cimport (
    Budget,
    Counts,
    Static,
    _curves,
    _merge_sort,
    _penalty,
)

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

cdef inline bint _may_pay(CoreBoard board, int64_t b, int64_t start, int64_t end, double beat,
                          uint64_t legal, double* floors) noexcept:
    """``_construction._trade_counts``' cheap tests: False when a trade at ``start`` cannot
    pay (the trade budget is spent, the value gained is below one missing GPU-step's price
    or the penalty floor, or no block is free of batch tasks). The bitmask test of a free
    block runs before the penalty floor's sum: both only reject, so their order changes
    nothing but the time. (No object is read here: no reference counting.)"""
    cdef int64_t size = board.st.size[b], step, missing
    cdef double value, penalty_floor
    cdef double* cheapest = board.st.cheapest
    cdef uint64_t free_
    if board.trade_budget <= 0:
        return False
    value = block_value(board, b, start, end)
    if value - beat < cheapest[end - 1]:
        return False
    missing = size - board.room[end - 1] - board.over[end - 1]
    if missing > 0 and value - missing * cheapest[end - 1] <= beat + 1e-9:
        return False
    if not free_firsts(board, <int>size, start, end, legal, &free_):
        return False
    if floors != NULL:
        penalty_floor = floors[end] - floors[start]
    else:
        penalty_floor = 0.0
        for step in range(start, end):
            missing = size - board.room[step] - board.over[step]
            if missing > 0:
                penalty_floor += missing * cheapest[step]
    return not (value - penalty_floor <= beat + 1e-9)


cdef Counts _trade_counts(CoreBoard board, int64_t b, int64_t start, int64_t end, double beat,
                          double* gain):
    """``_construction._trade_counts`` at rate 1.0, once its cheap tests passed
    (:func:`_may_pay`): the realtime curves recomputed in the capacity the block leaves;
    they are returned, and their gain set in ``gain[0]``, when the gain beats ``beat``
    (else None)."""
    cdef Static st = board.st
    cdef int64_t size = st.size[b], step
    cdef double value = block_value(board, b, start, end)
    cdef Counts trial
    board.trade_budget -= 1
    cdef int64_t* cap = capacity(board)
    for step in range(start, end):
        cap[step] -= size
    for step in range(board.T):
        if cap[step] < 0:
            free(cap)
            return None
    trial = _curves(board.st, cap)
    free(cap)
    if trial is None:
        return None
    gain[0] = value - (_penalty(st, trial) - board.penalty)
    return trial if gain[0] > beat + 1e-9 else None


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
    cdef Counts counts = None, traded
    board.budget.work += 1
    found = _earliest(board, size, arrival, last, duration, legal)
    if trade and st.R:
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
                        if not _may_pay(board, b, start, end, best, legal, floors):
                            continue
                        traded = _trade_counts(board, b, start, end, best, &gain)
                        if traded is not None:
                            best = gain
                            counts = traded
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
    cdef Counts counts
    cdef double gain
    board.budget.work += 1
    for s in range(start, end):
        if board.busy[s] & block:
            return False
    if last_short_step(board, size, start, end) >= 0:
        if not _may_pay(board, b, start, end, 0.0, (<uint64_t>1) << first, NULL):
            return False
        counts = _trade_counts(board, b, start, end, 0.0, &gain)
        if counts is None:
            return False
        _set_realtime(board, counts)
    place(board, b, size, first, start, end)
    return True


def guided(CoreBoard base, list at_starts, list others):
    """``_guides._guided`` (plain: one variant), its orders given by
    ``_guides._guided_orders``: ``at_starts`` the (task, LP start) pairs, the largest worth
    first; ``others`` the tasks the LP does not start, in the first order."""
    cdef CoreBoard board = base.copy()
    cdef Static st = board.st
    cdef int64_t b, start, end, first, size, T = board.T
    cdef uint64_t firsts, free_, legal
    cdef Counts counts
    cdef double gain
    cdef bint placed
    cdef list rest = []
    board.trade_budget = TRADE_BUDGET
    for b, start in at_starts:
        size = st.size[b]
        legal = st.legal[b]
        placed = False
        if start <= st.last[b]:
            end = T if start + st.duration[b] > T else start + st.duration[b]
            firsts = free_firsts(board, <int>size, start, end, legal, &free_)
            if not firsts and st.R:  # the LP gave realtime less here (A4c)
                if _may_pay(board, b, start, end, 0.0, legal, NULL):
                    counts = _trade_counts(board, b, start, end, 0.0, &gain)
                    if counts is not None:
                        _set_realtime(board, counts)
                        firsts = free_firsts(board, <int>size, start, end, legal, &free_)
            if firsts:
                first = _choose_block(board, firsts, free_, <int>size, start, end)
                placed = _place_at(board, b, start, first)
        if not placed:
            rest.append(b)
    for b in others + rest:
        _place_earliest(board, b, True, TRADE_STARTS)
    return board


cdef class _Trial:
    """``_swap._Trial``: a change the swap pass may take back."""

    cdef CoreBoard board
    cdef list tasks, blocks
    cdef double objective, value, penalty
    cdef int64_t budget
    cdef Counts counts

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
        if st.R:
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

# ---------------------------------------------------------------- the search, on C arrays
# The same steps as ``_search``: its lists of tasks are C arrays here, its options structs
# sorted by (cost, start, first GPU) as its tuples are, and the tasks in an option's way
# are found again when the option is tried (on the same board: the same list).

cdef struct _Option:
    double cost
    int64_t start
    int64_t first


cdef struct _Knobs:
    # ``_search``'s constants, read once per search (tests may change them)
    int64_t room_work, search_work, restart_work, survey_checks, stall_rounds, reseeds
    int64_t room_tries, restart_tries, chain_depth, n_widths
    int64_t widths[16]


cdef _Knobs _knobs():
    cdef _Knobs k
    cdef int64_t i = 0
    k.room_work = _py_search.ROOM_WORK
    k.search_work = _py_search.SEARCH_WORK
    k.restart_work = _py_search.RESTART_WORK
    k.survey_checks = _py_search.SURVEY_CHECKS
    k.stall_rounds = _py_search.STALL_ROUNDS
    k.reseeds = _py_search.RESEEDS
    k.room_tries = _py_search.ROOM_TRIES
    k.restart_tries = _py_search.RESTART_TRIES
    k.chain_depth = _py_search.CHAIN_DEPTH
    for w in _py_search.WIDTHS[:16]:
        k.widths[i] = w
        i += 1
    k.n_widths = i
    return k


cdef class _Search:
    """One search's fixed state: the pending tasks as a C array, ``_search``'s constants,
    and scratch room for keys (one per batch task)."""

    cdef int64_t* pend
    cdef int64_t n
    cdef double* key
    cdef _Knobs k

    def __cinit__(self, list pending, int64_t nb):
        cdef int64_t i
        self.n = len(pending)
        self.pend = <int64_t*>malloc(max(1, self.n) * sizeof(int64_t))
        self.key = <double*>malloc(max(1, nb) * sizeof(double))
        for i in range(self.n):
            self.pend[i] = pending[i]
        self.k = _knobs()

    def __dealloc__(self):
        free(self.pend)
        free(self.key)


cdef inline bint _before(double ka, int64_t a, double kb, int64_t b) noexcept:
    """Whether ``(ka, a) < (kb, b)``."""
    return ka < kb or (ka == kb and a < b)


cdef bint _key_before(void* context, int64_t a, int64_t b) noexcept:
    cdef double* key = <double*>context
    return _before(key[a], a, key[b], b)


cdef void _sort_keyed(int64_t* items, int64_t n, double* key) noexcept:
    """``items`` sorted by ``(key[item], item)`` (insertion sort for short arrays, else
    ``_cstatic._merge_sort``; the keys end with the item, so any sort gives Python's
    order)."""
    cdef int64_t i, j, x
    cdef double kx
    if n > 24:
        _merge_sort(items, n, _key_before, key)
        return
    for i in range(1, n):
        x = items[i]
        kx = key[x]
        j = i - 1
        while j >= 0 and _before(kx, x, key[items[j]], items[j]):
            items[j + 1] = items[j]
            j -= 1
        items[j + 1] = x


cdef void _sort_rank(_Search s, int64_t* items, int64_t n, int64_t* rank) noexcept:
    """``items`` in place by their rank in one of the greedy's orders."""
    cdef int64_t i
    for i in range(n):
        s.key[items[i]] = <double>rank[items[i]]
    _sort_keyed(items, n, s.key)


cdef int64_t _recreate_order(CoreBoard board, _Search s, int64_t* tasks, int64_t n,
                             Rng rng) noexcept:
    """``_search._recreate_order`` in place: one of the greedy's keys, a shuffle, or total
    worth perturbed by up to 50 %."""
    cdef Static st = board.st
    cdef int mode = <int>rng.below(4)
    cdef int64_t i, b
    cdef double u
    if mode == 0:
        _sort_rank(s, tasks, n, st.rank_urgent)
    elif mode == 1:
        _sort_rank(s, tasks, n, st.rank_value)
    elif mode == 2:
        rng.shuffle(tasks, n)
    else:
        for i in range(n):
            b = tasks[i]
            u = 0.5 + (1.5 - 0.5) * rng.random()
            s.key[b] = -(st.priority[b] * <double>st.size[b] * <double>st.duration[b] * u)
        _sort_keyed(tasks, n, s.key)
    return n


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


cdef int64_t _victims(CoreBoard board, int64_t start, int64_t end, int64_t lo, int64_t hi,
                      int64_t mover, int64_t keep, int64_t* out) noexcept:
    """``_search._victims`` into ``out`` (room for ``board.count``): how many, or -1 when a
    running task (or ``keep``) is in the way."""
    cdef Static st = board.st
    cdef int64_t b = board.head, begin, first, n = 0
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
                return -1
            out[n] = b
            n += 1
        b = board.nxt[b]
    return n


cdef inline int _option_before(double cost, int64_t start, int64_t first, _Option* o) noexcept:
    """Whether the option (cost, start, first) sorts before ``o``."""
    if cost != o.cost:
        return cost < o.cost
    if start != o.start:
        return start < o.start
    return first < o.first


cdef int64_t _positions(CoreBoard board, int64_t u, _Room room, int64_t keep, _Search s,
                        int64_t most, _Option** found) noexcept:
    """``_search._positions``, the ``most`` cheapest: earlier positions for ``u`` in
    ``found[0]`` (a new array the caller frees), as (value in the way - value gained,
    start, first GPU), cheapest first; how many, or -1 when the survey's budget runs out
    (nothing to free then)."""
    cdef Static st = board.st
    cdef int64_t size = st.size[u], last = st.last[u], start, end, first, k, n, v, m, j
    cdef int64_t count = 0
    cdef double current = 0.0, worth, lost, cost
    cdef int firsts[64]
    cdef int64_t before = room.checks
    cdef _Option* options
    found[0] = NULL
    if board.placed[u]:
        current = placed_value(board, u)
        last = _min(last, board.start_of[u] - 1)
    n = _lowest(st.legal[u], st.G, firsts)
    options = <_Option*>malloc(max(1, most) * sizeof(_Option))
    # the placed tasks but ``u``, in the board's order, as rectangles (steps x GPUs), with
    # their values and whether they may move (``_victims`` on compact arrays)
    cdef int64_t placed = 0, b = board.head, begin, hit
    cdef int64_t* box = <int64_t*>malloc(max(1, 5 * board.count) * sizeof(int64_t))
    cdef double* value = <double*>malloc(max(1, board.count) * sizeof(double))
    while b >= 0:
        if b != u:
            begin = board.start_of[b]
            box[5 * placed] = begin
            box[5 * placed + 1] = end_of(board, b, begin)
            box[5 * placed + 2] = board.first_of[b]
            box[5 * placed + 3] = board.first_of[b] + st.size[b]
            box[5 * placed + 4] = -1 if (st.running[b] or b == keep) else b
            value[placed] = placed_value(board, b)
            placed += 1
        b = board.nxt[b]
    for start in range(st.arrival[u], last + 1):
        end = _min(board.T, start + st.duration[u])
        worth = block_value(board, u, start, end) - current
        for k in range(n):
            first = firsts[k]
            room.checks += board.count
            if room.checks > room.survey:
                board.budget.work += (room.checks - before) // s.k.survey_checks
                free(options)
                free(box)
                free(value)
                return -1
            lost = 0.0
            hit = 0
            for v in range(placed):
                if (
                    box[5 * v] < end
                    and box[5 * v + 1] > start
                    and box[5 * v + 2] < first + size
                    and box[5 * v + 3] > first
                ):
                    if box[5 * v + 4] < 0:
                        hit = -1
                        break
                    lost += value[v]
            if hit < 0:
                continue
            cost = lost - worth
            # kept sorted, the ``most`` cheapest (the options are distinct: a total order)
            if count == most and not (most and _option_before(cost, start, first, &options[most - 1])):
                continue
            j = count if count < most else most - 1
            while j > 0 and _option_before(cost, start, first, &options[j - 1]):
                options[j] = options[j - 1]
                j -= 1
            options[j].cost = cost
            options[j].start = start
            options[j].first = first
            if count < most:
                count += 1
    free(box)
    free(value)
    board.budget.work += (room.checks - before) // s.k.survey_checks
    found[0] = options
    return count


cdef void _refresh_realtime(CoreBoard board):
    """``_search._refresh_realtime``: the curves recomputed in the room the batch blocks
    leave, unless no trade cut them (then they come out the same)."""
    cdef Static st = board.st
    cdef Counts full = st.full_counts, counts
    cdef int64_t i
    if not st.R:
        return
    if full is not None:
        if board.counts is full:
            return
        for i in range(st.R * st.T):
            if board.counts.c[i] != full.c[i]:
                break
        else:
            return
    cdef int64_t* cap = capacity(board)
    counts = _curves(board.st, cap)
    free(cap)
    if counts is not None:
        _set_realtime(board, counts)


cdef CoreBoard _move(CoreBoard board, int64_t u, int64_t start, int64_t first,
                     int64_t* victims, int64_t nv, _Search s, int64_t* spent):
    """``_search._move``: the better board (None when ``u`` finds no room there), and the
    placements spent in ``spent[0]``."""
    cdef CoreBoard trial = board.copy(), again, found = None
    cdef int64_t i, n = 0, b
    cdef int k
    cdef int64_t* offer
    cdef int64_t* order
    spent[0] = 0
    if trial.placed[u]:
        remove(trial, u)
    for i in range(nv):
        remove(trial, victims[i])
    _refresh_realtime(trial)
    trial.trade_budget = TRADE_BUDGET
    if not _place_at(trial, u, start, first):
        return None
    offer = <int64_t*>malloc(2 * max(1, s.n) * sizeof(int64_t))
    order = offer + max(1, s.n)
    for i in range(s.n):
        if not trial.placed[s.pend[i]]:
            offer[n] = s.pend[i]
            n += 1
    for k in range(2):  # by priority, then by total worth
        again = trial.copy()
        memcpy(order, offer, n * sizeof(int64_t))
        _sort_rank(s, order, n, board.st.rank_urgent if k == 0 else board.st.rank_value)
        for i in range(n):
            _place_earliest(again, order[i], True, again.T)
        if found is None or again.value - again.penalty > found.value - found.penalty + 1e-9:
            found = again
    free(offer)
    spent[0] = 2 * n + 1
    return found


cdef inline double _objective(CoreBoard board) noexcept:
    return board.value - board.penalty


cdef CoreBoard _chain(CoreBoard board, int64_t u, int64_t* moved, double* before, int64_t nm,
                      _Search s, _Room room, int64_t depth):
    """``_search._chain``: ``moved[i]`` were worth ``before[i]`` before ``u``'s move."""
    cdef CoreBoard best = board, found
    cdef int64_t i, v = -1, n, m, j, spent
    cdef double lost, most = 0.0
    cdef _Option* options
    cdef int64_t* way
    cdef double* again
    for i in range(nm):
        lost = before[i] - (placed_value(board, moved[i]) if board.placed[moved[i]] else 0.0)
        if v < 0 or _before(-lost, moved[i], -most, v):
            v, most = moved[i], lost
    if most <= 1e-9:
        return board
    n = _positions(board, v, room, u, s, s.k.room_tries, &options)
    if n <= 0:
        free(options)
        return best
    way = <int64_t*>malloc(max(1, board.count) * sizeof(int64_t))
    again = <double*>malloc(max(1, board.count) * sizeof(double))
    for i in range(_min(n, s.k.room_tries)):
        if room.spent():
            break
        m = _victims(board, options[i].start,
                     _min(board.T, options[i].start + board.st.duration[v]),
                     options[i].first, options[i].first + board.st.size[v], v, u, way)
        found = _move(board, v, options[i].start, options[i].first, way, m, s, &spent)
        room.placements += spent
        if (
            found is not None
            and _objective(found) <= _objective(best) + 1e-9
            and m > 0
            and depth > 1
        ):
            for j in range(m):
                again[j] = placed_value(board, way[j])
            found = _chain(found, v, way, again, m, s, room, depth - 1)
        if found is not None and _objective(found) > _objective(best) + 1e-9:
            best = found
    free(way)
    free(again)
    free(options)
    return best


cdef int64_t _movers(CoreBoard board, _Search s, int64_t* out) noexcept:
    """``_search._movers`` into ``out`` (room for the pending tasks): how many."""
    cdef Static st = board.st
    cdef int64_t i, u, n = 0
    cdef double gain
    for i in range(s.n):
        u = s.pend[i]
        if (board.placed[u] and board.start_of[u] <= st.arrival[u]) or not _can_start(st, u):
            continue
        gain = _best_value(board, u) - (placed_value(board, u) if board.placed[u] else 0.0)
        if gain > 1e-9:
            s.key[u] = -gain
            out[n] = u
            n += 1
    _sort_keyed(out, n, s.key)
    return n


cdef CoreBoard _make_room(CoreBoard board, _Search s, int64_t budget, int64_t* spent):
    """``_search._make_room``: the best board, and the placements spent in ``spent[0]``."""
    cdef Static st = board.st
    cdef _Room room = _Room(_scaled(s.k.room_work, board), budget, board.budget)
    cdef CoreBoard found
    cdef int64_t i, j, u, tries, n, nm, m, moves
    cdef int64_t* movers = <int64_t*>malloc(max(1, s.n) * sizeof(int64_t))
    cdef int64_t* way = NULL
    cdef double* before = NULL
    cdef _Option* options = NULL
    nm = _movers(board, s, movers)
    for j in range(nm):
        u = movers[j]
        if room.spent() or _objective(board) >= board.budget.target:
            break
        if board.placed[u] and board.start_of[u] <= st.arrival[u]:
            continue
        n = _positions(board, u, room, -1, s, 4 * s.k.room_tries, &options)
        if n < 0:
            break
        way = <int64_t*>malloc(max(1, board.count) * sizeof(int64_t))
        before = <double*>malloc(max(1, board.count) * sizeof(double))
        tries = 0
        for i in range(_min(n, 4 * s.k.room_tries)):
            if room.spent():
                break
            m = _victims(board, options[i].start,
                         _min(board.T, options[i].start + st.duration[u]),
                         options[i].first, options[i].first + st.size[u], u, -1, way)
            found = _move(board, u, options[i].start, options[i].first, way, m, s, &moves)
            if found is None:
                continue
            tries += 1
            room.placements += moves
            if _objective(found) <= _objective(board) + 1e-9 and m > 0:
                for m2 in range(m):
                    before[m2] = placed_value(board, way[m2])
                found = _chain(found, u, way, before, m, s, room, s.k.chain_depth)
            if _objective(found) > _objective(board) + 1e-9:
                board = found
                break
            if tries >= s.k.room_tries:
                break
        free(way)
        free(before)
        free(options)
        way, before, options = NULL, NULL, NULL
        if room.spent():
            break
    free(movers)
    spent[0] = room.placements
    return board


cdef struct _Ruin:
    int64_t n_removed   # the tasks to remove: ``removed[:n_removed]``
    int64_t last        # a dropped task offered after the others, or -1
    int64_t target      # a left-out task to place first, or -1
    int64_t start, first


cdef _Ruin _ruin(CoreBoard board, _Search s, Rng rng, int64_t* removed, int64_t* scratch):
    """``_search._ruin``: the tasks to remove (into ``removed``), the one to offer last and
    a left-out task to place first (with its start and first GPU); ``scratch`` has room
    for twice the batch tasks."""
    cdef Static st = board.st
    cdef int64_t T = board.T, gpus = st.G, b, i, start, first, end, lo, hi, u, length
    cdef int64_t s0, s1, arrival, last, k, n, width, n_movable = 0, n_left = 0, n_widths
    cdef int64_t kind
    cdef int firsts[64]
    cdef int64_t picked[3]
    cdef int64_t widths[16]
    cdef int64_t* movable = scratch
    cdef int64_t* left_out = scratch + max(1, st.nb)
    cdef _Ruin out
    out.n_removed, out.last, out.target, out.start, out.first = 0, -1, -1, 0, 0
    for b in range(st.nb):
        if board.placed[b] and not st.running[b]:
            movable[n_movable] = b
            n_movable += 1
    for i in range(s.n):
        b = s.pend[i]
        if not board.placed[b] and _can_start(st, b):
            left_out[n_left] = b
            n_left += 1
    kind = rng.below(6 if n_left else 5)
    s0, s1, lo, hi = 0, T, 0, gpus
    if kind == 5 or not n_movable:  # make room for a left-out task where it is asked to go
        if not n_left:
            return out
        u = left_out[rng.below(n_left)]
        arrival, last = st.arrival[u], st.last[u]
        rng.below(1)  # (the choice among its GPU models: a plain problem has one)
        start = arrival + <int64_t>(pow(rng.random(), 2.0) * <double>(last - arrival + 1))
        n = _lowest(st.legal[u], <int>gpus, firsts)
        first = firsts[rng.below(n)]
        end, lo, hi = _min(T, start + st.duration[u]), first, first + st.size[u]
        s0, s1 = start, end
        out.target, out.start, out.first = u, start, first
    elif kind == 3:  # a few tasks anywhere
        k = rng.randint(1, 3)
        k = k if k < n_movable else n_movable
        rng.sample(movable, n_movable, k, picked)
        for i in range(k):
            removed[i] = picked[i]
        out.n_removed = k
        return out
    elif kind == 4:  # drop one task: the others are re-placed first, then it is offered again
        removed[0] = movable[rng.below(n_movable)]
        out.n_removed, out.last = 1, removed[0]
        return out
    else:
        if kind == 0 or kind == 2:  # a range of steps (kind 2: crossed with a range of GPUs)
            length = rng.randint(max(1, T // 4), T)
            s0 = rng.randrange(0, T - length + 1)
            s1 = s0 + length
        if kind == 1 or kind == 2:
            n_widths = 0
            for i in range(s.k.n_widths):
                if s.k.widths[i] <= gpus:
                    widths[n_widths] = s.k.widths[i]
                    n_widths += 1
            if not n_widths:
                widths[0], n_widths = gpus, 1
            width = widths[rng.below(n_widths)]
            lo = rng.randrange(0, gpus - width + 1)
            hi = lo + width
    for i in range(n_movable):
        b = movable[i]
        start = board.start_of[b]
        first = board.first_of[b]
        end = end_of(board, b, start)
        if start < s1 and end > s0 and first < hi and first + st.size[b] > lo:
            removed[out.n_removed] = b
            out.n_removed += 1
    return out


cdef bint _at_best(CoreBoard board, _Search s, double* most) noexcept:
    """``_search._at_best`` (``most[i]``: the most pending task ``i`` can earn)."""
    cdef int64_t i, b
    if board.penalty > 0:
        return False
    for i in range(s.n):
        b = s.pend[i]
        if not (most[i] <= 0 or (board.placed[b] and placed_value(board, b) >= most[i] - 1e-9)):
            return False
    return True


cdef double* _most(CoreBoard board, _Search s):
    """The most each pending task can earn (``_best_value``), a new array."""
    cdef double* most = <double*>malloc(max(1, s.n) * sizeof(double))
    cdef int64_t i
    for i in range(s.n):
        most[i] = _best_value(board, s.pend[i])
    return most


cdef CoreBoard _ruin_and_recreate(CoreBoard board, _Search s, int64_t rounds, object seed,
                                  int64_t scale):
    """``_search._ruin_and_recreate``: the best board seen."""
    cdef CoreBoard best, current, trial
    cdef int64_t budget, placements, stalled = 0, reseeds = 0, b, i, n, r
    cdef Rng rng = Rng(seed)
    cdef _Ruin ruin
    cdef int64_t nb = max(1, board.st.nb)
    cdef int64_t* removed
    cdef int64_t* scratch
    cdef int64_t* offer
    cdef double* most
    budget = _scaled(s.k.search_work, board)
    if budget < 1:
        return board
    most = _most(board, s)
    removed = <int64_t*>malloc(4 * nb * sizeof(int64_t))
    scratch = removed + nb
    offer = removed + 3 * nb
    best = _make_room(board, s, budget // 2, &placements)
    budget *= scale
    current = best
    for r in range(rounds):
        if (placements >= budget or board.budget.spent()
                or _objective(best) >= board.budget.target):
            break
        if stalled >= s.k.stall_rounds:  # again from the best plan, with the next seed
            if reseeds >= s.k.reseeds:
                break
            reseeds += 1
            rng, current, stalled = Rng(seed + reseeds), best, 0
        if _at_best(current, s, most):
            break
        board.budget.rounds += 1
        stalled += 1
        trial = current.copy()
        ruin = _ruin(trial, s, rng, removed, scratch)
        for i in range(ruin.n_removed):
            remove(trial, removed[i])
        _refresh_realtime(trial)
        trial.trade_budget = 2 * TRADE_BUDGET
        if ruin.target >= 0:
            _place_at(trial, ruin.target, ruin.start, ruin.first)
        n = 0
        for i in range(s.n):
            b = s.pend[i]
            if not trial.placed[b] and b != ruin.last:
                offer[n] = b
                n += 1
        _recreate_order(trial, s, offer, n, rng)
        for i in range(n):
            _place_earliest(trial, offer[i], True, trial.T)
        if ruin.last >= 0:
            _place_earliest(trial, ruin.last, True, trial.T)
        placements += n + (1 if ruin.last >= 0 else 0)
        if _objective(trial) >= _objective(current) - 1e-9:
            current = trial
            if _objective(trial) > _objective(best) + 1e-9:
                best, stalled = trial, 0
    free(most)
    free(removed)
    return best


cdef CoreBoard _restarts(CoreBoard board, CoreBoard base, _Search s, int64_t budget):
    """``_search._restarts``."""
    cdef Static st = board.st
    cdef int64_t cost = s.n, u, b, i, j, k, o, n, nm
    cdef _Room room = _Room(_scaled(s.k.room_work, board), budget, board.budget)
    cdef CoreBoard best = board, trial
    cdef int64_t* orders = <int64_t*>malloc(4 * max(1, s.n) * sizeof(int64_t))
    cdef int64_t* movers = orders + 3 * max(1, s.n)
    cdef int64_t* ranks[3]
    cdef _Option* options = NULL
    cdef bint done = False
    ranks[0], ranks[1], ranks[2] = st.rank_urgent, st.rank_value, st.rank_arrival
    for o in range(3):
        memcpy(orders + o * s.n, s.pend, s.n * sizeof(int64_t))
        _sort_rank(s, orders + o * s.n, s.n, ranks[o])
    nm = _movers(board, s, movers)
    for j in range(nm):
        u = movers[j]
        if board.budget.spent() or _objective(best) >= board.budget.target:
            break
        n = _positions(board, u, room, -1, s, s.k.restart_tries, &options)
        if n < 0:
            break
        for i in range(_min(n, s.k.restart_tries)):
            for o in range(3):
                if room.placements + cost > budget or board.budget.spent():
                    done = True
                    break
                trial = base.copy()
                trial.trade_budget = TRADE_BUDGET
                if not _place_at(trial, u, options[i].start, options[i].first):
                    break
                room.placements += cost
                for k in range(s.n):
                    b = orders[o * s.n + k]
                    if b != u:
                        _place_earliest(trial, b, True, TRADE_STARTS)
                if _objective(trial) > _objective(best) + 1e-9:
                    best = trial
            if done:
                break
        free(options)
        options = NULL
        if done:
            break
    free(orders)
    return best


cpdef CoreBoard search(CoreBoard board, CoreBoard base, list pending, int64_t rounds,
                       object seed, int64_t scale=1):
    """``_search._search``."""
    cdef CoreBoard found, restarted, again
    cdef int64_t budget
    cdef _Search s = _Search(pending, board.st.nb)
    cdef double* most
    cdef bint settled
    found = _ruin_and_recreate(board, s, rounds, seed, scale)
    budget = _scaled(s.k.restart_work, board)
    if s.n > budget or _objective(found) >= board.budget.target:
        return found
    most = _most(board, s)
    settled = _at_best(found, s, most)
    free(most)
    if settled or board.budget.spent():
        return found
    restarted = _restarts(board, base, s, budget)
    if restarted is board:
        return found
    again = _ruin_and_recreate(restarted, s, rounds, seed, scale)
    return again if _objective(again) > _objective(found) + 1e-9 else found
