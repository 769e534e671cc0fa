# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The greedy core's fixed tables (:class:`Static`: the problem's batch and realtime arrays,
legal blocks, walls, the orders' ranks and the realtime orders), its budget
(:class:`Budget`), and the realtime curves and their penalty (``_board.realtime_curves``,
``Board.realtime_penalty``, ``_construction._curves``) in C."""

from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import time

import numpy as np

from gpuopt.allocation._cbits cimport _free_runs, _min, _ones, _three
from gpuopt.allocation._crandom cimport _pairwise
from gpuopt.allocation._crealtime cimport _better, _curves_of, _fits, _penalty_of

cdef double INF = float("inf")

cdef enum:
    MEMO = 256  # entries of _curves' memo (a power of two)


cdef class Budget:
    """``_board.Budget`` with C fields: the run's work (placements tried) against its limit,
    and its deadline (a ``time.perf_counter()`` value)."""

    def __cinit__(self, double limit=INF, double deadline=INF):
        self.work = 0
        self.rounds = 0  # ruin-and-recreate rounds run (for the progress display)
        self.limit = limit
        self.deadline = deadline
        self.target = INF  # the objective at which the search stops (rule B7)

    def reached(self, double objective):
        """Whether ``objective`` is at the run's target (rule B7): the search stops there."""
        return objective >= self.target

    cpdef bint spent(self):
        """Whether the work or the time is used up."""
        return self.work >= self.limit or (
            self.deadline < INF and time.perf_counter() > self.deadline
        )

    def affords(self, int64_t work):
        """Whether ``work`` more units fit in what is left (and time is left)."""
        return self.work + work <= self.limit and not self.spent()

    def close(self):
        """End the run here (no later stage runs)."""
        self.limit = min(self.limit, <double>self.work)

cdef class Counts:
    """Realtime curves (``Board.counts``: GPUs held by each service at each step) as one C
    array; :meth:`array` gives them as numpy's ``(R, T)`` int64 array."""

    def __dealloc__(self):
        free(self.c)

    @staticmethod
    def of(array):
        """The curves of a numpy ``(R, T)`` array."""
        rows = [list(row) for row in array.tolist()]
        cdef int R = len(rows), T = array.shape[1], r, t
        cdef Counts out = _zero_counts(R, T)
        for r in range(R):
            for t in range(T):
                out.c[r * T + t] = rows[r][t]
        return out

    def array(self):
        """The curves as numpy's ``(R, T)`` int64 array (a copy)."""
        out = np.zeros((self.R, self.T), dtype=np.int64)
        cdef int64_t[:, ::1] view = out
        cdef int r, t
        for r in range(self.R):
            for t in range(self.T):
                view[r, t] = self.c[r * self.T + t]
        return out


cdef Counts _zero_counts(int R, int T):
    """Curves of ``R`` services over ``T`` steps, all zero."""
    cdef Counts out = Counts.__new__(Counts)
    cdef int i
    out.R, out.T = R, T
    out.c = <int64_t*>malloc(max(1, R * T) * sizeof(int64_t))
    for i in range(R * T):
        out.c[i] = 0
    return out


cdef uint64_t _legal_firsts(int size, int G, int node, bint align) noexcept:
    """``Board.legal_firsts`` of a plain problem: first GPUs of legal blocks of ``size`` (A3:
    ``node_rule``, aligned blocks when ``align``)."""
    cdef uint64_t mask = 0
    cdef int first = 0, step = size if align else 1
    if size < 1:
        return 0
    while first <= G - size:
        if size <= node:
            if first // node == (first + size - 1) // node:
                mask |= (<uint64_t>1) << first
        elif first % node == 0 and size % node == 0:
            mask |= (<uint64_t>1) << first
        first += step
    return mask

cdef int _compare(Static st, int kind, int64_t a, int64_t b) noexcept:
    """The order of the tuples ``ORDERS[kind](index, a)`` and ``(index, b)`` (kinds 0-2), or
    of the realtime orders' keys (3: by priority, 4: by worth)."""
    cdef int c
    if kind == 0:  # (-priority, last start, arrival, -size x duration, b)
        c = _three(-st.priority[a], -st.priority[b])
        if c == 0:
            c = _three(st.last[a], st.last[b])
        if c == 0:
            c = _three(st.arrival[a], st.arrival[b])
        if c == 0:
            c = _three(-st.size[a] * st.duration[a], -st.size[b] * st.duration[b])
    elif kind == 1:  # (-priority x size x discounted steps, b)
        c = _three(st.value_key[a], st.value_key[b])
    elif kind == 2:  # (arrival, -priority, b)
        c = _three(st.arrival[a], st.arrival[b])
        if c == 0:
            c = _three(-st.priority[a], -st.priority[b])
    elif kind == 3:  # realtime: (-priority, r)
        c = _three(-st.rt_priority[a], -st.rt_priority[b])
    else:  # realtime: (-worth, r)
        c = _three(-st.worth[a], -st.worth[b])
    return c if c != 0 else _three(a, b)


cdef void _merge_sort(int64_t* items, int64_t n, _Before before, void* context) noexcept:
    """Sort ``items`` (a stable merge sort) by ``before(context, a, b)``: whether ``a`` goes
    before ``b``. Every order the greedy sorts by ends with the item itself, so any correct
    sort gives Python's ``sorted`` order."""
    cdef int64_t* tmp
    cdef int64_t width = 1, lo, mid, hi, i, j, k
    if n < 2:
        return
    tmp = <int64_t*>malloc(n * sizeof(int64_t))
    while width < n:
        lo = 0
        while lo < n:
            mid = _min(lo + width, n)
            hi = _min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if before(context, items[j], items[i]):
                    tmp[k] = items[j]
                    j += 1
                else:
                    tmp[k] = items[i]
                    i += 1
                k += 1
            while i < mid:
                tmp[k] = items[i]
                i += 1
                k += 1
            while j < hi:
                tmp[k] = items[j]
                j += 1
                k += 1
            lo = hi
        memcpy(items, tmp, n * sizeof(int64_t))
        width *= 2
    free(tmp)


cdef struct _Kind:
    void* st
    int kind


cdef bint _kind_before(void* context, int64_t a, int64_t b) noexcept:
    cdef _Kind* k = <_Kind*>context
    return _compare(<Static>k.st, k.kind, a, b) < 0


cdef void _sort(Static st, int kind, int64_t* items, int64_t n) noexcept:
    """Sort ``items`` by :func:`_compare` (:func:`_merge_sort`)."""
    cdef _Kind context
    context.st = <void*>st
    context.kind = kind
    _merge_sort(items, n, _kind_before, &context)

cdef class Static:
    """What never changes during one greedy run: the problem's batch tables as C arrays,
    and the legal first GPUs and walls of every size."""

    def __cinit__(self, index):
        self.index = index
        self.batch = index.batch
        self.T = index.horizon
        self.G = index.gpus
        self.nb = index.num_batch
        self.full = _ones(self.G)
        cdef int nb = max(1, self.nb), T = self.T, G = self.G, b, s
        cdef uint64_t starts_
        cdef double total
        self.size = <int64_t*>malloc(nb * sizeof(int64_t))
        self.arrival = <int64_t*>malloc(nb * sizeof(int64_t))
        self.last = <int64_t*>malloc(nb * sizeof(int64_t))
        self.duration = <int64_t*>malloc(nb * sizeof(int64_t))
        self.remaining = <int64_t*>malloc(nb * sizeof(int64_t))
        self.first_gpu = <int64_t*>malloc(nb * sizeof(int64_t))
        self.running = <char*>malloc(nb * sizeof(char))
        self.priority = <double*>malloc(nb * sizeof(double))
        self.legal = <uint64_t*>malloc(nb * sizeof(uint64_t))
        self.cum = <double*>malloc((T + 1) * sizeof(double))
        self.weights = <double*>malloc(T * sizeof(double))
        self.cheapest = <double*>malloc(T * sizeof(double))
        self.walls_left = <uint64_t*>malloc((G + 1) * sizeof(uint64_t))
        self.walls_right = <uint64_t*>malloc((G + 1) * sizeof(uint64_t))
        self.worth = NULL
        self.rt_orders = NULL
        self.memo_capacity = <int64_t*>malloc(MEMO * T * sizeof(int64_t))
        self.memo_key = <uint64_t*>malloc(MEMO * sizeof(uint64_t))
        self.memo_filled = <char*>malloc(MEMO * sizeof(char))
        for s in range(MEMO):
            self.memo_filled[s] = 0
        self.memo_curves = [None] * MEMO
        batch = index.batch
        for b in range(self.nb):
            self.size[b] = batch.size[b]
            self.arrival[b] = batch.arrival[b]
            self.last[b] = batch.last_start[b]
            self.duration[b] = batch.duration[b]
            self.remaining[b] = batch.remaining[b]
            self.first_gpu[b] = batch.first_gpu[b]
            self.running[b] = 1 if batch.running[b] else 0
            self.priority[b] = batch.priority[b]
            self.legal[b] = _legal_firsts(<int>self.size[b], G, index.node_size, index.align)
        weights = index.weights.tolist()
        total = 0.0
        self.cum[0] = 0.0
        for s in range(T):  # (np.cumsum adds one after the other)
            self.weights[s] = weights[s]
            total += self.weights[s]
            self.cum[s + 1] = total
        starts_ = 0
        for s in range(0, G, index.node_size):
            starts_ |= (<uint64_t>1) << s
        for s in index.pool_bounds[:-1]:
            starts_ |= (<uint64_t>1) << s
        for s in range(1, G + 1):  # Board.walls: the ends are (starts | 1 << G) >> size
            self.walls_left[s] = starts_
            self.walls_right[s] = (starts_ >> s if s < 64 else 0) | ((<uint64_t>1) << (G - s))
        self.walls_left[0] = self.walls_right[0] = 0
        self._realtime_tables(index)
        self.rank_urgent = self._ranks(0)
        self.rank_value = self._ranks(1)
        self.rank_arrival = self._ranks(2)
        self._realtime_orders(index)

    cdef int64_t* _ranks(self, int kind):
        """Each batch position's rank in order ``kind`` (``ORDERS[kind]`` sorts all of them
        so): a subset sorted by that key is the subset sorted by rank."""
        cdef int64_t nb = self.nb, i
        cdef int64_t* items = <int64_t*>malloc(max(1, nb) * sizeof(int64_t))
        cdef int64_t* rank = <int64_t*>malloc(max(1, nb) * sizeof(int64_t))
        for i in range(nb):
            items[i] = i
        _sort(self, kind, items, nb)
        for i in range(nb):
            rank[items[i]] = i
        free(items)
        return rank

    def sorted_by(self, int kind, list tasks):
        """``sorted(tasks, key=ORDERS[kind])``."""
        if kind == 0:
            return _by_rank(tasks, self.rank_urgent)
        if kind == 1:
            return _by_rank(tasks, self.rank_value)
        return _by_rank(tasks, self.rank_arrival)

    cdef void _realtime_tables(self, index):
        """The realtime services' prices (``Board._price``), demand, swap limits, floors and
        ceilings (the arrays :func:`~gpuopt.allocation._board.realtime_curves` reads), the
        cheapest price of each step, and the value order's keys."""
        cdef int R = index.num_realtime, T = self.T, r, t
        cdef double lowest, scale
        cdef int64_t b, end
        self.R = R
        n = max(1, R * T)
        self.price = <double*>malloc(n * sizeof(double))
        self.demand = <int64_t*>malloc(n * sizeof(int64_t))
        self.initial = <int64_t*>malloc(max(1, R) * sizeof(int64_t))
        self.lower_total = <int64_t*>malloc(T * sizeof(int64_t))
        for t in range(T):
            self.lower_total[t] = 0
        self.swap = <int64_t*>malloc(max(1, R) * sizeof(int64_t))
        self.rt_priority = <double*>malloc(max(1, R) * sizeof(double))
        self.value_key = <double*>malloc(max(1, self.nb) * sizeof(double))
        self.full_counts = None
        for b in range(self.nb):  # _key_value_first: -p x k x (weights over its steps).sum()
            end = _min(T, self.arrival[b] + self.duration[b])
            self.value_key[b] = (
                -self.priority[b]
                * <double>self.size[b]
                * _pairwise(self.weights + self.arrival[b], end - self.arrival[b])
            )
        for t in range(T):
            self.cheapest[t] = 0.0
        if R == 0:
            return
        priority = index.priority.tolist()
        rows = index.realtime_idx.tolist()
        swap = index.max_swap.tolist()
        initial = index.initial.tolist()
        demand = index.demand.tolist()
        lower = index.realtime_floor.tolist()
        for r in range(R):
            self.rt_priority[r] = priority[rows[r]]
            self.swap[r] = swap[r]
            scale = index.penalty * self.rt_priority[r]
            for t in range(T):
                self.price[r * T + t] = scale * self.weights[t]
                self.demand[r * T + t] = demand[r][t]
                self.lower_total[t] += lower[r][t]
            self.initial[r] = initial[r]
        for t in range(T):
            lowest = self.price[t]
            for r in range(1, R):
                if self.price[r * T + t] < lowest:
                    lowest = self.price[r * T + t]
            self.cheapest[t] = lowest

    cdef void _realtime_orders(self, index):
        """``_construction._set_realtime_orders``: by priority, and by value served per GPU
        held when that differs; also the penalty with no capacity limit."""
        cdef int R = self.R, T = self.T, r, t, k
        cdef int64_t met, held
        cdef int64_t* by_priority = <int64_t*>malloc(max(1, R) * sizeof(int64_t))
        cdef int64_t* by_worth = <int64_t*>malloc(max(1, R) * sizeof(int64_t))
        cdef int64_t* unlimited = <int64_t*>malloc(T * sizeof(int64_t))
        cdef int64_t* c
        cdef Counts free_
        for r in range(R):
            by_priority[r] = r
        _sort(self, 3, by_priority, R)
        self.realtime_orders = [[by_priority[r] for r in range(R)]]
        self.n_rt_orders = 1
        self.rt_orders = <int64_t*>malloc(max(1, 2 * R) * sizeof(int64_t))
        for r in range(R):
            self.rt_orders[r] = by_priority[r]
        self.free_penalty = 0.0
        if R:
            for t in range(T):
                unlimited[t] = self.G * (R + 1)
            free_ = _realtime_curves(self, by_priority, unlimited)
            self.free_penalty = _penalty(self, free_)
            c = free_.c
            self.worth = <double*>malloc(R * sizeof(double))
            for r in range(R):
                met = 0
                held = 0
                for t in range(T):
                    met += c[r * T + t] if c[r * T + t] < self.demand[r * T + t] else self.demand[r * T + t]
                    held += c[r * T + t]
                held = held if held > 1 else 1
                self.worth[r] = self.rt_priority[r] * <double>met / <double>held
                by_worth[r] = by_priority[r]
            _sort(self, 4, by_worth, R)
            for r in range(R):
                if by_worth[r] != by_priority[r]:
                    self.realtime_orders.append([by_worth[k] for k in range(R)])
                    self.n_rt_orders = 2
                    for k in range(R):
                        self.rt_orders[R + k] = by_worth[k]
                    break
        free(by_priority)
        free(by_worth)
        free(unlimited)

    def __dealloc__(self):
        free(self.memo_capacity)
        free(self.memo_key)
        free(self.memo_filled)
        free(self.size)
        free(self.arrival)
        free(self.last)
        free(self.duration)
        free(self.remaining)
        free(self.first_gpu)
        free(self.running)
        free(self.priority)
        free(self.legal)
        free(self.cum)
        free(self.cheapest)
        free(self.weights)
        free(self.rt_priority)
        free(self.value_key)
        free(self.worth)
        free(self.walls_left)
        free(self.walls_right)
        free(self.price)
        free(self.demand)
        free(self.swap)
        free(self.initial)
        free(self.lower_total)
        free(self.rt_orders)
        free(self.rank_urgent)
        free(self.rank_value)
        free(self.rank_arrival)

cdef double _penalty(Static st, Counts counts):
    """``Board.realtime_penalty``: ``(price * np.maximum(0, demand - counts)).sum()``, summed
    as numpy sums (pairwise; ``_crealtime._penalty_of``)."""
    return _penalty_of(st.price, st.demand, counts.c, st.R * st.T)

cdef Counts _realtime_curves(Static st, int64_t* order, int64_t* capacity):
    """``_board.realtime_curves(index, index.demand, order, capacity)``
    (``_crealtime._curves_of`` on the problem's tables)."""
    cdef Counts counts = _zero_counts(st.R, st.T)
    cdef int64_t* scratch = <int64_t*>malloc(4 * st.T * sizeof(int64_t))
    _curves_of(st.R, st.T, st.G, st.demand, st.initial, st.swap, st.lower_total, order,
               capacity, counts.c, scratch)
    free(scratch)
    return counts


def realtime_curves_of(Static st, list order, capacity):
    """:func:`_realtime_curves` from Python (for the tests)."""
    cdef int64_t* o = <int64_t*>malloc(max(1, len(order)) * sizeof(int64_t))
    cdef int64_t* cap = <int64_t*>malloc(st.T * sizeof(int64_t))
    for i, r in enumerate(order):
        o[i] = r
    for i in range(st.T):
        cap[i] = capacity[i]
    out = _realtime_curves(st, o, cap)
    free(o)
    free(cap)
    return out.array()

cdef Counts _curves(Static st, int64_t* capacity):
    """``_construction._curves``: the curves in each realtime order, the lowest penalty
    wins (then the fewest GPUs held, then the first order); None if none fits.

    The curves depend on ``capacity`` alone (and the fixed tables), and nothing changes a
    ``Counts`` once made, so the last result for each capacity seen is kept in a small
    direct-mapped memo and given again: the search asks for the same few capacities many
    times. The same curves either way."""
    cdef int T = st.T, t
    cdef uint64_t key = 1469598103934665603ULL  # FNV-1a over the steps' capacities
    for t in range(T):
        key = (key ^ <uint64_t>capacity[t]) * 1099511628211ULL
    cdef int slot = <int>(key & (MEMO - 1))
    cdef int64_t* kept = st.memo_capacity + slot * T
    if st.memo_filled[slot] and st.memo_key[slot] == key:
        for t in range(T):
            if kept[t] != capacity[t]:
                break
        else:
            return st.memo_curves[slot]
    found = _computed_curves(st, capacity)
    st.memo_filled[slot] = 1
    st.memo_key[slot] = key
    memcpy(kept, capacity, T * sizeof(int64_t))
    st.memo_curves[slot] = found
    return found


cdef Counts _computed_curves(Static st, int64_t* capacity):
    """:func:`_curves` computed."""
    cdef int R = st.R, T = st.T, k
    cdef double penalty, best_penalty = INF, best_total = INF, total
    cdef Counts counts, best = None
    for k in range(st.n_rt_orders):
        counts = _realtime_curves(st, st.rt_orders + k * R, capacity)
        if not _fits(counts.c, R, T, capacity, &total):
            continue
        penalty = _penalty(st, counts)
        if best is None or _better(penalty, total, best_penalty, best_total):
            best, best_penalty, best_total = counts, penalty, total
        if penalty <= st.free_penalty + 1e-9:
            break
    return best

cdef list _by_rank(list tasks, int64_t* rank):
    """``sorted(tasks, key=ORDERS[k])`` as ``tasks`` sorted by their rank in that order."""
    return sorted(tasks, key=lambda b: rank[b])
