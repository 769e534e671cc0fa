# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The greedy's compiled core: the board, the construction rules, the swap pass and the
search of :mod:`gpuopt.allocation.greedy`, for plain problems (one GPU model) of at most
64 GPUs, in C.

It is a line-by-line translation of the pure-Python modules
(:mod:`~gpuopt.allocation._board`, :mod:`~gpuopt.allocation._construction`,
:mod:`~gpuopt.allocation._swap`, :mod:`~gpuopt.allocation._search`): the same rules, the
same order of floating-point operations, the same calls to the same seeded
``random.Random`` in the same order, and the same numpy code for the realtime curves and
their penalty (rare: trades). So it gives the same grid to the GPU, only faster; the tests
compare both on random instances (``tests/allocation/test_core.py``). Each function names
the Python function it translates; read that one for the reasons behind the rule.

A step's batch occupancy is one 64-bit word (bit ``g`` set = GPU ``g`` busy). The placed
tasks are kept in the order the Python board's ``starts`` dict would hold them (a doubly
linked list: a task placed again goes to the end), since some loops visit them in that
order and sum their values in it.
"""

from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.math cimport pow
from libc.string cimport memcpy

import math
import time

import numpy as np

from gpuopt.allocation._board import Board, realtime_curves
from gpuopt.allocation._construction import (
    CANDIDATES,
    ORDERS,
    TRADE_BUDGET,
    TRADE_STARTS,
    VECTOR_STARTS,
)
from gpuopt.allocation import _search as _py_search
from gpuopt.allocation import _swap as _py_swap

cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil
    int __builtin_clzll(unsigned long long) nogil
    int __builtin_popcountll(unsigned long long) nogil

cdef double INF = float("inf")
#: The most GPUs the core handles (one word per step).
MAX_GPUS = 64


cdef inline uint64_t _ones(int n) noexcept nogil:
    """Mask of the ``n`` lowest bits."""
    return <uint64_t>0xFFFFFFFFFFFFFFFF if n >= 64 else ((<uint64_t>1) << n) - 1


cdef inline uint64_t _free_runs(uint64_t free_, int size) noexcept nogil:
    """``_board.free_runs``: bit f set iff GPUs f .. f+size-1 are all free."""
    cdef uint64_t runs = free_
    cdef int span = 1, shift
    while span < size:
        shift = span if span < size - span else size - span
        runs &= runs >> shift
        span += shift
    return runs


cdef inline int _bit_length(uint64_t mask) noexcept nogil:
    return 0 if mask == 0 else 64 - __builtin_clzll(mask)


cdef int _lowest(uint64_t mask, int count, int* out) noexcept nogil:
    """``_construction._lowest_bits``: the ``count`` lowest set bits, into ``out``."""
    cdef int n = 0
    while mask and n < count:
        out[n] = __builtin_ctzll(mask)
        n += 1
        mask &= mask - 1
    return n


def _lowest_list(uint64_t mask, int count):
    cdef list found = []
    while mask and len(found) < count:
        found.append(__builtin_ctzll(mask))
        mask &= mask - 1
    return found



# ---------------------------------------------------------------- random numbers


cdef class Rng:
    """CPython's ``random.Random`` (Mersenne Twister, CPython 3.10-3.13's algorithms for
    ``random``, ``randrange``, ``randint``, ``choice``, ``sample``, ``shuffle`` and
    ``uniform``), continued in C from a Python generator's state: the same draws in the
    same order give the same numbers, so the core's search makes the Python search's
    choices."""

    cdef unsigned int mt[624]
    cdef int mti

    def __cinit__(self, seed):
        state = _py_search.random.Random(seed).getstate()[1]
        cdef int i
        for i in range(624):
            self.mt[i] = state[i]
        self.mti = state[624]

    cdef unsigned int genrand(self) noexcept:
        cdef unsigned int y
        cdef int kk
        cdef unsigned int* mt = self.mt
        if self.mti >= 624:
            for kk in range(624 - 397):
                y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7FFFFFFFU)
                mt[kk] = mt[kk + 397] ^ (y >> 1) ^ (0x9908B0DFU if y & 1 else 0U)
            for kk in range(624 - 397, 623):
                y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7FFFFFFFU)
                mt[kk] = mt[kk + (397 - 624)] ^ (y >> 1) ^ (0x9908B0DFU if y & 1 else 0U)
            y = (mt[623] & 0x80000000U) | (mt[0] & 0x7FFFFFFFU)
            mt[623] = mt[396] ^ (y >> 1) ^ (0x9908B0DFU if y & 1 else 0U)
            self.mti = 0
        y = mt[self.mti]
        self.mti += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680U
        y ^= (y << 15) & 0xEFC60000U
        y ^= y >> 18
        return y

    cdef double random(self) noexcept:
        cdef unsigned int a = self.genrand() >> 5, b = self.genrand() >> 6
        return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)

    cdef uint64_t getrandbits(self, int k) noexcept:
        cdef uint64_t r
        if k <= 32:
            return self.genrand() >> (32 - k)
        r = self.genrand()  # k <= 64: two words, the low one first
        return r | (<uint64_t>(self.genrand() >> (64 - k)) << 32)

    cdef int64_t below(self, int64_t n) noexcept:
        """``_randbelow_with_getrandbits(n)``, ``n >= 1``."""
        cdef int k = _bit_length(<uint64_t>n)
        cdef uint64_t r = self.getrandbits(k)
        while r >= <uint64_t>n:
            r = self.getrandbits(k)
        return <int64_t>r

    cdef int64_t randrange(self, int64_t start, int64_t stop) noexcept:
        return start + self.below(stop - start)

    cdef int64_t randint(self, int64_t a, int64_t b) noexcept:
        return a + self.below(b + 1 - a)

    cdef void shuffle(self, int64_t* x, int64_t n) noexcept:
        cdef int64_t i = n - 1, j, t
        while i >= 1:
            j = self.below(i + 1)
            t = x[i]
            x[i] = x[j]
            x[j] = t
            i -= 1

    cdef int64_t sample(self, int64_t* population, int64_t n, int64_t k, int64_t* out) except -1:
        """``random.sample(population, k)`` for ``k <= 5`` (the set size is 21 then)."""
        cdef int64_t i, j
        cdef int64_t* pool
        cdef set selected
        if k > 5:
            raise ValueError("Rng.sample: k above 5")
        if n <= 21:
            pool = <int64_t*>malloc(max(1, n) * sizeof(int64_t))
            memcpy(pool, population, n * sizeof(int64_t))
            for i in range(k):
                j = self.below(n - i)
                out[i] = pool[j]
                pool[j] = pool[n - i - 1]
            free(pool)
        else:
            selected = set()
            for i in range(k):
                j = self.below(n)
                while j in selected:
                    j = self.below(n)
                selected.add(j)
                out[i] = population[j]
        return k


cdef double _pairwise(double* a, int64_t n) noexcept:
    """numpy's pairwise sum (``np.add.reduce`` of a contiguous float64 array), to the bit."""
    cdef double r[8]
    cdef double res
    cdef int64_t i, j, n2
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return res
    if n <= 128:
        for j in range(8):
            r[j] = a[j]
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] += a[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a, n2) + _pairwise(a + n2, n - n2)


def pairwise_sum(values):
    """:func:`_pairwise` of a sequence of floats (for the tests)."""
    cdef int64_t n = len(values), i
    cdef double* a = <double*>malloc(max(1, n) * sizeof(double))
    for i in range(n):
        a[i] = values[i]
    out = _pairwise(a, n)
    free(a)
    return out


def rng_draws(seed, int count):
    """The first draws of every kind from :class:`Rng` (for the tests): per round
    ``random()``, ``randrange(3, 4 + 7i)``, ``randint(1, 3)``, ``uniform(0.5, 1.5)``,
    ``range(40)`` with its first ``2 + i % 9`` shuffled, and ``sample`` of 3 from the first
    ``4 + i % 37`` of that list."""
    cdef Rng rng = Rng(seed)
    cdef int64_t x[40]
    cdef int64_t out[3]
    cdef int i, j
    found = []
    for i in range(count):
        found.append(rng.random())
        found.append(rng.randrange(3, 4 + i * 7))
        found.append(rng.randint(1, 3))
        found.append(0.5 + (1.5 - 0.5) * rng.random())
        for j in range(40):
            x[j] = j
        rng.shuffle(x, 2 + i % 9)
        found.append([x[j] for j in range(40)])
        rng.sample(x, 4 + i % 37, 3, out)
        found.append([out[0], out[1], out[2]])
    return found


def supported(index) -> bool:
    """Whether the core handles this problem: one GPU model, at most 64 GPUs."""
    return bool(index.plain) and 1 <= index.gpus <= 64 and index.horizon >= 1


cdef class Budget:
    """``_board.Budget`` with C fields: the run's work (placements tried) against its limit,
    and its deadline (a ``time.perf_counter()`` value)."""

    cdef public int64_t work
    cdef public double limit, deadline

    def __cinit__(self, double limit=INF, double deadline=INF):
        self.work = 0
        self.limit = limit
        self.deadline = deadline

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


cdef inline int _three(double x, double y) noexcept:
    return -1 if x < y else (1 if x > y else 0)


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


cdef void _sort(Static st, int kind, int64_t* items, int64_t n) noexcept:
    """Sort ``items`` by :func:`_compare` (a merge sort: the keys end with the item, so any
    sort gives Python's order)."""
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
                if _compare(st, kind, items[j], items[i]) < 0:
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


cdef uint64_t _longest_free(uint64_t candidates, int64_t count, int64_t step, uint64_t* free_of,
                            int64_t T) noexcept:
    """``Board._longest_free``: ``count`` GPUs of ``candidates`` free of batch blocks longest
    after ``step`` (ties: the highest)."""
    cdef int64_t later
    cdef uint64_t narrowed, chosen = 0, top
    for later in range(step + 1, T):
        narrowed = candidates & free_of[later]
        if __builtin_popcountll(narrowed) < count:
            break
        candidates = narrowed
    while count > 0 and candidates:
        top = (<uint64_t>1) << (_bit_length(candidates) - 1)
        chosen |= top
        candidates ^= top
        count -= 1
    return chosen


cdef list _grid(Static st, CoreBoard board):
    """``Board.bind_realtime(counts, by priority)`` (``_bind_by_mask``) then ``Board.grid``."""
    cdef int64_t T = st.T, G = st.G, R = st.R, step, k, r, want, missing, g, b, start, end
    cdef uint64_t available, taken, keep, spare, extra, mask
    cdef uint64_t* free_of = <uint64_t*>malloc(T * sizeof(uint64_t))
    cdef uint64_t* held = <uint64_t*>malloc(max(1, R) * sizeof(uint64_t))
    cdef int64_t* cell = <int64_t*>malloc(T * G * sizeof(int64_t))
    cdef int64_t[:, ::1] c
    for step in range(T * G):
        cell[step] = -1
    b = board.head
    task_idx = st.index.batch.task_idx
    while b >= 0:  # the batch blocks
        start = board.start_of[b]
        end = board.end_of(b, start)
        for step in range(start, end):
            for g in range(board.first_of[b], board.first_of[b] + st.size[b]):
                cell[step * G + g] = task_idx[b]
        b = board.nxt[b]
    if R:
        c = board.counts
        rows = st.index.realtime_idx.tolist()
        for step in range(T):
            free_of[step] = st.full & ~board.busy[step]
        for r in range(R):
            held[r] = 0
        for step in range(T):
            available = free_of[step]
            taken = 0
            # every service first keeps what it held and still may, then the growing ones
            # take new GPUs (Board._bind_by_mask)
            for k in range(R):
                r = st.rt_orders[k]
                want = c[r, step]
                keep = held[r] & available
                if __builtin_popcountll(keep) > want:
                    keep = _longest_free(keep, want, step, free_of, T)
                held[r] = keep
                taken |= keep
            spare = available & ~taken
            for k in range(R):
                r = st.rt_orders[k]
                missing = c[r, step] - __builtin_popcountll(held[r])
                if missing > 0:
                    extra = _longest_free(spare, missing, step, free_of, T)
                    held[r] |= extra
                    spare ^= extra
                mask = held[r]
                while mask:
                    cell[step * G + __builtin_ctzll(mask)] = rows[r]
                    mask &= mask - 1
    ids = st.index.ids
    grid = [
        [None if cell[step * G + g] < 0 else ids[cell[step * G + g]] for g in range(G)]
        for step in range(T)
    ]
    free(free_of)
    free(held)
    free(cell)
    return grid


cdef class Static:
    """What never changes during one greedy run: the problem's batch tables as C arrays,
    and the legal first GPUs and walls of every size."""

    cdef public object index, batch, full_counts
    cdef int T, G, nb, R, n_rt_orders
    cdef double free_penalty
    cdef double* price
    cdef int64_t* demand
    cdef int64_t* swap
    cdef int64_t* lower
    cdef int64_t* upper
    cdef int64_t* rt_orders
    cdef int64_t* rank_urgent
    cdef int64_t* rank_value
    cdef int64_t* rank_arrival
    cdef uint64_t full
    cdef int64_t* size
    cdef int64_t* arrival
    cdef int64_t* last
    cdef int64_t* duration
    cdef int64_t* remaining
    cdef int64_t* first_gpu
    cdef char* running
    cdef double* priority
    cdef double* cum
    cdef double* cheapest
    cdef double* weights
    cdef double* rt_priority
    cdef double* value_key
    cdef double* worth
    cdef public list realtime_orders
    cdef uint64_t* legal
    cdef uint64_t* walls_left
    cdef uint64_t* walls_right

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
        self.lower = <int64_t*>malloc(n * sizeof(int64_t))
        self.upper = <int64_t*>malloc(n * sizeof(int64_t))
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
                self.lower[r * T + t] = lower[r][t]
                self.upper[r * T + t] = min(self.G, initial[r] + swap[r] * (t + 1))
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
        cdef int64_t[:, ::1] c
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
            c = free_
            self.worth = <double*>malloc(R * sizeof(double))
            for r in range(R):
                met = 0
                held = 0
                for t in range(T):
                    met += c[r, t] if c[r, t] < self.demand[r * T + t] else self.demand[r * T + t]
                    held += c[r, t]
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

    def base(self, Budget budget):
        """``greedy._base_board``: the running tasks pinned and the realtime curves set at full
        demand beside them, in the best realtime order; the run's budget."""
        cdef CoreBoard board = CoreBoard(self)
        cdef int T = self.T, s
        cdef int64_t b, end
        cdef int64_t* beside = <int64_t*>malloc(T * sizeof(int64_t))
        for s in range(T):
            board.busy[s] = 0
            board.room[s] = self.G
            board.over[s] = 0
            board.reserved[s] = 0
            beside[s] = self.G
        for b in range(max(1, self.nb)):
            board.placed[b] = 0
        board.value = board.penalty = 0.0
        board.free_penalty = self.free_penalty
        board.trade_budget = 0
        board.counts = np.zeros((self.R, T), dtype=np.int64)
        board.realtime_orders = self.realtime_orders
        board.budget = budget
        for b in range(self.nb):  # Board.pin_running, and running_count
            if self.running[b]:
                end = board.end_of(b, 0)
                board.place(b, self.size[b], self.first_gpu[b], 0, end)
                for s in range(end):
                    beside[s] -= self.size[b]
        counts = _curves(board, beside)
        if counts is None:  # (V3 makes the floor fit beside the running tasks)
            counts = _realtime_curves(self, self.rt_orders, beside)
        free(beside)
        _set_realtime(board, counts)
        self.full_counts = counts
        return board

    def grid_of(self, CoreBoard board):
        """``Board.bind_realtime`` (by priority) then ``Board.grid``: the grid of task ids."""
        return _grid(self, board)

    def __dealloc__(self):
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
        free(self.lower)
        free(self.upper)
        free(self.rt_orders)
        free(self.rank_urgent)
        free(self.rank_value)
        free(self.rank_arrival)


cdef class CoreBoard:
    """``_board.Board`` for a plain problem of at most 64 GPUs, with C arrays."""

    cdef Static st
    cdef int T, nb
    cdef uint64_t* busy
    cdef int64_t* room
    cdef int64_t* over
    cdef int64_t* start_of
    cdef int64_t* first_of
    cdef int64_t* nxt
    cdef int64_t* prv
    cdef char* placed
    cdef int64_t head, tail, count
    cdef public double value, penalty, free_penalty
    cdef public int64_t trade_budget
    cdef int64_t* reserved
    cdef public object counts, realtime_orders
    cdef public Budget budget

    def __cinit__(self, Static st):
        self.st = st
        self.T = st.T
        self.nb = st.nb
        cdef int nb = max(1, st.nb), T = st.T
        self.busy = <uint64_t*>malloc(T * sizeof(uint64_t))
        self.room = <int64_t*>malloc(T * sizeof(int64_t))
        self.over = <int64_t*>malloc(T * sizeof(int64_t))
        self.start_of = <int64_t*>malloc(nb * sizeof(int64_t))
        self.first_of = <int64_t*>malloc(nb * sizeof(int64_t))
        self.nxt = <int64_t*>malloc(nb * sizeof(int64_t))
        self.prv = <int64_t*>malloc(nb * sizeof(int64_t))
        self.placed = <char*>malloc(nb * sizeof(char))
        self.reserved = <int64_t*>malloc(T * sizeof(int64_t))
        self.head = self.tail = -1
        self.count = 0

    def __dealloc__(self):
        free(self.busy)
        free(self.room)
        free(self.over)
        free(self.start_of)
        free(self.first_of)
        free(self.nxt)
        free(self.prv)
        free(self.placed)
        free(self.reserved)

    # ------------------------------------------------------------ to and from Python
    @staticmethod
    def of(Static st, board):
        """The core board holding what the Python ``board`` holds."""
        cdef CoreBoard out = CoreBoard(st)
        cdef int s, b
        for s in range(out.T):
            out.busy[s] = board.busy[s]
            out.room[s] = board.room[s]
            out.over[s] = board.over[s]
            out.reserved[s] = board.reserved[s]
        for b in range(out.nb):
            out.placed[b] = 0
        for b, (start, first) in board.starts.items():
            out._link(b, start, first)
        out.value = board.value
        out.penalty = board.penalty
        out.free_penalty = board.free_penalty
        out.trade_budget = board.trade_budget
        out.counts = board.counts
        out.realtime_orders = board.realtime_orders
        out.budget = board.budget
        return out

    def to_board(self, template):
        """A Python ``Board`` (a copy of ``template``, the base) holding what this one holds."""
        board = template.copy()
        cdef int s
        board.busy = [self.busy[s] for s in range(self.T)]
        board.room = [self.room[s] for s in range(self.T)]
        board.over = [self.over[s] for s in range(self.T)]
        board.starts = self.starts_dict()
        board.value = self.value
        board.penalty = self.penalty
        board.trade_budget = self.trade_budget
        board.counts = self.counts
        board.reserved = np.array([self.reserved[s] for s in range(self.T)], dtype=np.int64)
        return board

    def starts_dict(self):
        """``Board.starts``: batch position -> (start, first GPU), in insertion order."""
        cdef dict out = {}
        cdef int64_t b = self.head
        while b >= 0:
            out[b] = (self.start_of[b], self.first_of[b])
            b = self.nxt[b]
        return out

    cpdef CoreBoard copy(self):
        cdef CoreBoard other = CoreBoard.__new__(CoreBoard, self.st)
        cdef int T = self.T, nb = max(1, self.nb)
        memcpy(other.busy, self.busy, T * sizeof(uint64_t))
        memcpy(other.room, self.room, T * sizeof(int64_t))
        memcpy(other.over, self.over, T * sizeof(int64_t))
        memcpy(other.start_of, self.start_of, nb * sizeof(int64_t))
        memcpy(other.first_of, self.first_of, nb * sizeof(int64_t))
        memcpy(other.nxt, self.nxt, nb * sizeof(int64_t))
        memcpy(other.prv, self.prv, nb * sizeof(int64_t))
        memcpy(other.placed, self.placed, nb * sizeof(char))
        memcpy(other.reserved, self.reserved, T * sizeof(int64_t))
        other.head, other.tail, other.count = self.head, self.tail, self.count
        other.value, other.penalty, other.free_penalty = self.value, self.penalty, self.free_penalty
        other.trade_budget = self.trade_budget
        other.counts, other.realtime_orders = self.counts, self.realtime_orders
        other.budget = self.budget
        return other

    # ------------------------------------------------------------ what Python code reads
    @property
    def index(self):
        return self.st.index

    @property
    def batch(self):
        return self.st.batch

    @property
    def horizon(self):
        return self.T

    @property
    def gpus(self):
        return self.st.G

    @property
    def objective(self):
        return self.value - self.penalty

    @property
    def starts(self):
        return self.starts_dict()

    @property
    def placed_count(self):
        return self.count

    def has(self, int b):
        return bool(self.placed[b])

    def room_list(self):
        cdef int s
        return [self.room[s] for s in range(self.T)]

    # ------------------------------------------------------------ the placed-task list
    cdef inline void _link(self, int64_t b, int64_t start, int64_t first) noexcept:
        self.start_of[b] = start
        self.first_of[b] = first
        if self.placed[b]:
            return  # (a dict keeps an existing key where it is)
        self.placed[b] = 1
        self.prv[b] = self.tail
        self.nxt[b] = -1
        if self.tail >= 0:
            self.nxt[self.tail] = b
        else:
            self.head = b
        self.tail = b
        self.count += 1

    cdef inline void _unlink(self, int64_t b) noexcept:
        self.placed[b] = 0
        if self.prv[b] >= 0:
            self.nxt[self.prv[b]] = self.nxt[b]
        else:
            self.head = self.nxt[b]
        if self.nxt[b] >= 0:
            self.prv[self.nxt[b]] = self.prv[b]
        else:
            self.tail = self.prv[b]
        self.count -= 1

    # ------------------------------------------------------------ Board's methods
    cdef inline int64_t end_of(self, int64_t b, int64_t start) noexcept:
        """``Board.end_of`` (plain)."""
        cdef int64_t end
        if self.st.running[b]:
            end = self.st.remaining[b]
        else:
            end = start + self.st.duration[b]
        return self.T if end > self.T else end

    cdef inline double block_value(self, int64_t b, int64_t start, int64_t end) noexcept:
        """``Board.block_value`` at rate 1.0 (plain)."""
        cdef double weight = self.st.cum[end] - self.st.cum[start]
        return self.st.priority[b] * <double>self.st.size[b] * 1.0 * weight

    cdef inline double placed_value(self, int64_t b) noexcept:
        """``_search._placed_value``."""
        cdef int64_t start = self.start_of[b]
        return self.block_value(b, start, self.end_of(b, start))

    cdef inline uint64_t free_mask(self, int64_t start, int64_t end) noexcept:
        cdef uint64_t acc = 0
        cdef int64_t s
        for s in range(start, end):
            acc |= self.busy[s]
        return ~acc & self.st.full

    cdef inline uint64_t free_firsts(self, int size, int64_t start, int64_t end, uint64_t legal,
                                     uint64_t* free_out) noexcept:
        """``Board.free_firsts``: legal first GPUs of a free block over ``[start, end)``."""
        cdef uint64_t free_ = self.free_mask(start, end)
        free_out[0] = free_
        return _free_runs(free_, size) & legal

    cdef inline int64_t last_short_step(self, int64_t size, int64_t start, int64_t end) noexcept:
        cdef int64_t s = end - 1
        while s >= start:
            if self.room[s] < size:
                return s
            s -= 1
        return -1

    cdef void place(self, int64_t b, int64_t size, int64_t first, int64_t start,
                    int64_t end) noexcept:
        """``Board.place``."""
        cdef uint64_t mask = _ones(<int>size) << first
        cdef int64_t s
        for s in range(start, end):
            self.busy[s] |= mask
            self.room[s] -= size
        self._link(b, start, first)
        self.value += self.block_value(b, start, end)

    cdef void remove(self, int64_t b) noexcept:
        """``Board.remove``."""
        cdef int64_t start = self.start_of[b], first = self.first_of[b]
        cdef int64_t size = self.st.size[b]
        cdef int64_t end = self.end_of(b, start)
        cdef uint64_t mask = ~(_ones(<int>size) << first)
        cdef int64_t s
        self._unlink(b)
        for s in range(start, end):
            self.busy[s] &= mask
            self.room[s] += size
        self.value -= self.block_value(b, start, end)

    def remove_task(self, int b):
        self.remove(b)

    def realtime_penalty(self, counts):
        """``Board.realtime_penalty``."""
        return _penalty(self.st, counts)

    def set_realtime(self, counts):
        """``Board.set_realtime``."""
        _set_realtime(self, counts)

    cdef int64_t* capacity(self) noexcept:
        """``np.array(board.room) + board.reserved``, a new C array (the caller frees it)."""
        cdef int64_t* out = <int64_t*>malloc(self.T * sizeof(int64_t))
        cdef int s
        for s in range(self.T):
            out[s] = self.room[s] + self.reserved[s]
        return out


cdef double _penalty(Static st, object counts):
    """``Board.realtime_penalty``: ``(price * np.maximum(0, demand - counts)).sum()``, summed
    as numpy sums (pairwise)."""
    cdef int64_t[:, ::1] c = counts
    cdef int64_t n = st.R * st.T, i, short
    if n == 0:
        return 0.0
    cdef double* terms = <double*>malloc(n * sizeof(double))
    for i in range(n):
        short = st.demand[i] - c[i // st.T, i % st.T]
        terms[i] = st.price[i] * <double>(short if short > 0 else 0)
    out = _pairwise(terms, n)
    free(terms)
    return out


cdef void _set_realtime(CoreBoard board, object counts):
    """``Board.set_realtime``: reserve ``counts[r, t]`` GPUs for realtime task ``r``."""
    cdef Static st = board.st
    cdef int R = st.R, T = st.T, r, t
    cdef int64_t total, above
    cdef int64_t[:, ::1] c
    if R:
        c = counts
    for t in range(T):
        total = 0
        for r in range(R):
            total += c[r, t]
        board.room[t] -= total - board.reserved[t]
        board.reserved[t] = total
    board.counts = counts
    board.penalty = _penalty(st, counts) if R * T else 0.0
    if R * T:
        for t in range(T):
            total = 0
            for r in range(R):
                above = c[r, t] - st.demand[r * T + t]
                total += above if above > 0 else 0
            board.over[t] = total


cdef object _realtime_curves(Static st, int64_t* order, int64_t* capacity):
    """``_board.realtime_curves(index, index.demand, order, capacity)``, task by task (the
    blocks it computes at once from four tasks on give the same curves)."""
    cdef int R = st.R, T = st.T, r, t, k
    cdef int64_t sl, run, v
    counts = np.zeros((R, T), dtype=np.int64)
    cdef int64_t[:, ::1] c = counts
    cdef int64_t* left = <int64_t*>malloc(4 * T * sizeof(int64_t))
    cdef int64_t* ub = left + T
    cdef int64_t* want = left + 2 * T
    cdef int64_t* low
    for t in range(T):
        left[t] = capacity[t]
        for r in range(R):
            left[t] -= st.lower[r * T + t]
    for k in range(R):
        r = order[k]
        sl = st.swap[r]
        low = st.lower + r * T
        for t in range(T):
            left[t] += low[t]
            ub[t] = left[t] if left[t] < st.upper[r * T + t] else st.upper[r * T + t]
        run = 0
        for t in range(T):  # rises at most s per step
            v = ub[t] - sl * t
            run = v if t == 0 or v < run else run
            ub[t] = run + sl * t
        for t in range(T - 1, -1, -1):  # falls at most s per step
            v = ub[t] + sl * t
            run = v if t == T - 1 or v < run else run
            ub[t] = run - sl * t
        for t in range(T):
            v = st.demand[r * T + t]
            want[t] = v if v < ub[t] else ub[t]
        for t in range(T - 1, -1, -1):  # ramp up early
            v = want[t] - sl * t
            run = v if t == T - 1 or v > run else run
            want[t] = run + sl * t
        for t in range(T):  # the floor, then ramp down at most s per step
            v = (want[t] if want[t] > low[t] else low[t]) + sl * t
            run = v if t == 0 or v > run else run
            c[r, t] = run - sl * t
            left[t] -= c[r, t]
    free(left)
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
    return out


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
        short = board.last_short_step(size, start, end)
        if short >= 0:
            start = short + 1
            continue
        if board.free_firsts(<int>size, start, end, legal, &free_):
            return start
        start += 1
    return -1


cdef object _curves(CoreBoard board, int64_t* capacity):
    """``_construction._curves``: the curves in each realtime order, the lowest penalty
    wins (then the fewest GPUs held, then the first order); None if none fits."""
    cdef Static st = board.st
    cdef int R = st.R, T = st.T, k, r, t
    cdef double penalty, best_penalty = INF, best_total = INF, total
    cdef int64_t column
    cdef int64_t[:, ::1] c
    cdef bint fits
    best = None
    for k in range(st.n_rt_orders):
        counts = _realtime_curves(st, st.rt_orders + k * R, capacity)
        c = counts
        fits = True
        total = 0.0
        for t in range(T):
            column = 0
            for r in range(R):
                column += c[r, t]
            if column > capacity[t]:
                fits = False
                break
            total += column
        if not fits:
            continue
        penalty = _penalty(st, counts)
        if best is None or penalty < best_penalty - 1e-9 or (
            penalty == best_penalty - 1e-9 and total < best_total
        ):
            best, best_penalty, best_total = counts, penalty, total
        if penalty <= st.free_penalty + 1e-9:
            break
    return best


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
    value = board.block_value(b, start, end)
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
    if not board.free_firsts(<int>size, start, end, legal, &free_):
        return beat
    board.trade_budget -= 1
    cdef int64_t* capacity = board.capacity()
    for step in range(start, end):
        capacity[step] -= size
    for step in range(board.T):
        if capacity[step] < 0:
            free(capacity)
            return beat
    trial = _curves(board, capacity)
    free(capacity)
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
            best = board.block_value(b, found, T if found + duration > T else found + duration)
        stop = found if found >= 0 else last + 1
        if arrival + trade_starts < stop:
            stop = arrival + trade_starts
        if board.trade_budget > 0 and stop > arrival:
            top = board.block_value(b, arrival, T if arrival + duration > T else arrival + duration)
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
                            value = board.block_value(b, start, end)
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
    firsts_free = board.free_firsts(<int>size, found, end, legal, &free_)
    board.place(b, size, _choose_block(board, firsts_free, free_, <int>size, found, end), found, end)
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
    cdef int64_t end = board.end_of(b, start)
    cdef uint64_t block = _ones(<int>size) << first
    cdef int64_t s
    cdef list trial = []
    board.budget.work += 1
    for s in range(start, end):
        if board.busy[s] & block:
            return False
    if board.last_short_step(size, start, end) >= 0:
        _trade_counts(board, b, start, end, 0.0, (<uint64_t>1) << first, NULL, trial)
        if not trial:
            return False
        _set_realtime(board, trial[0])
    board.place(b, size, first, start, end)
    return True


def place_earliest(CoreBoard board, int b, bint trade=False, int trade_starts=TRADE_STARTS):
    """``_construction._place_earliest`` (for the tests)."""
    return _place_earliest(board, b, trade, trade_starts)


# ---------------------------------------------------------------- the swap pass


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
                board.remove(b)
        for b, block in zip(self.tasks, self.blocks):
            if block is not None:
                start, first = block
                board.place(b, board.st.size[b], first, start, board.end_of(b, start))
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
            found.append((board.block_value(b, start, _min(board.T, start + st.duration[b])), b))
        b = board.nxt[b]
    found.sort()
    return [key[1] for key in found[:count]]


cdef inline int64_t _min(int64_t a, int64_t b) noexcept:
    return a if a < b else b


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
            board.remove(victim)
            if _place_earliest(board, u, True, board.T):
                _place_earliest(board, victim, True, TRADE_STARTS)
                if board.value - board.penalty > trial.objective + 1e-9:
                    break
            trial.undo()
    return board


# ---------------------------------------------------------------- the search


cdef list _by_rank(list tasks, int64_t* rank):
    """``sorted(tasks, key=ORDERS[k])`` as ``tasks`` sorted by their rank in that order."""
    return sorted(tasks, key=lambda b: rank[b])


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
    return board.block_value(b, arrival, _min(board.T, arrival + st.duration[b]))


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
            and board.end_of(b, begin) > start
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
        current = board.placed_value(u)
        last = _min(last, board.start_of[u] - 1)
    n = _lowest(st.legal[u], st.G, firsts)
    for start in range(st.arrival[u], last + 1):
        end = _min(board.T, start + st.duration[u])
        worth = board.block_value(u, start, end) - current
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
                lost += board.placed_value(v)
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
    cdef int64_t* capacity = board.capacity()
    counts = _curves(board, capacity)
    free(capacity)
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
        trial.remove(u)
    for v in victims:
        trial.remove(v)
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
        lost[v] = value - (board.placed_value(v) if board.placed[v] else 0.0)
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
            again = {w: board.placed_value(w) for w in victims}
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
        gains[u] = _best_value(board, u) - (board.placed_value(u) if board.placed[u] else 0.0)
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
                before = {v: board.placed_value(v) for v in victims}
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
        end = board.end_of(b, start)
        if start < s1 and end > s0 and first < hi and first + st.size[b] > lo:
            removed.append(b)
    return removed, [], target


cdef bint _at_best(CoreBoard board, dict most):
    """``_search._at_best``."""
    if board.penalty > 0:
        return False
    for b, value in most.items():
        if not (value <= 0 or (board.placed[b] and board.placed_value(b) >= value - 1e-9)):
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
        stalled += 1
        trial = current.copy()
        removed, last, target = _ruin(trial, pending, rng)
        for b in removed:
            trial.remove(b)
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
