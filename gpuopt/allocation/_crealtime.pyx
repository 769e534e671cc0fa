# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The realtime curves, their penalty and a trade's recomputation in C, on plain int64 and
float64 arrays of any cluster size: what the pure-Python modules call (through
:class:`Realtime`) when the compiled core is built but the problem is one the core does not
handle (more than 64 GPUs, GPU models).

Each function gives, to the bit, what its Python original gives:

- :func:`_curves_of`: ``_board.realtime_curves(index, index.demand, order, capacity)``,
  task by task (the blocks the Python one computes at once from four tasks on give the
  same curves, to the GPU);
- :func:`_penalty_of`: ``Board.realtime_penalty``, summed as numpy sums (pairwise, as
  ``_crandom._pairwise``);
- :meth:`Realtime.best`: ``_construction._curves`` (each realtime order, the lowest
  penalty wins, then the fewest GPUs held, then the first order);
- :meth:`Realtime.trade`: the recomputation at the end of
  ``_construction._trade_counts`` (the capacity less the task's block, then ``best``);
- :meth:`Realtime.bind`: ``Board._bind_by_mask`` (the services' GPUs at each step), on
  arrays of 64-bit words.
"""

from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

import numpy as np

cdef double INF = float("inf")


cdef extern from *:
    int __builtin_popcountll(unsigned long long) nogil
    int __builtin_clzll(unsigned long long) nogil
    int __builtin_ctzll(unsigned long long) nogil


cdef void _curves_of(
    int R,
    int T,
    int64_t G,
    const int64_t* demand,
    const int64_t* initial,
    const int64_t* swap,
    const int64_t* lower_total,
    const int64_t* order,
    const int64_t* capacity,
    int64_t* out,
    int64_t* scratch,
) noexcept nogil:
    """The realtime curves ``out`` (``(R, T)``, row-major, every row written) of the services
    served in ``order`` (all ``R`` of them) within ``capacity`` (``(T,)``): each the lowest
    swap-feasible curve at or above its demand (``(R, T)``) in what is left
    (``_board.realtime_curves``). A service's floor is its fastest ramp-down from its
    ``initial`` count, ``max(0, initial - s (t + 1))`` (``index.realtime_floor``; summed over
    the services in ``lower_total``), its ceiling the fastest ramp-up, capped at the ``G``
    GPUs; ``scratch`` holds ``4 * T`` values."""
    cdef int r, t, k
    cdef int64_t sl, run = 0, v, start
    cdef int64_t* left = scratch
    cdef int64_t* ub = scratch + T
    cdef int64_t* want = scratch + 2 * T
    cdef int64_t* low = scratch + 3 * T
    cdef const int64_t* wanted
    cdef int64_t* row
    for t in range(T):
        left[t] = capacity[t] - lower_total[t]
    for k in range(R):
        r = <int>order[k]
        sl = swap[r]
        start = initial[r]
        wanted = demand + r * T
        row = out + r * T
        for t in range(T):  # this task's own forced ramp-down is now part of its curve
            v = start - sl * (t + 1)
            low[t] = v if v > 0 else 0
            left[t] += low[t]
            v = start + sl * (t + 1)
            v = v if v < G else G  # the fastest ramp-up
            ub[t] = left[t] if left[t] < v else v
        for t in range(T):  # rises at most s per step
            v = ub[t] - sl * t
            run = v if t == 0 or v < run else run
            ub[t] = run + sl * t
        for t in range(T - 1, -1, -1):  # falls at most s per step
            v = ub[t] + sl * t
            run = v if t == T - 1 or v < run else run
            ub[t] = run - sl * t
        for t in range(T):
            v = wanted[t]
            want[t] = v if v < ub[t] else ub[t]
        for t in range(T - 1, -1, -1):  # ramp up early
            v = want[t] - sl * t
            run = v if t == T - 1 or v > run else run
            want[t] = run + sl * t
        for t in range(T):  # the floor, then ramp down at most s per step
            v = (want[t] if want[t] > low[t] else low[t]) + sl * t
            run = v if t == 0 or v > run else run
            row[t] = run - sl * t
            left[t] -= row[t]


cdef bint _fits(const int64_t* counts, int R, int T, const int64_t* capacity,
               double* total) noexcept nogil:
    """Whether the curves ``counts`` (``(R, T)``) fit ``capacity`` at every step
    (``(counts.sum(axis=0) <= capacity).all()``), and the GPUs they hold in ``total``."""
    cdef int r, t
    cdef int64_t column
    total[0] = 0.0
    for t in range(T):
        column = 0
        for r in range(R):
            column += counts[r * T + t]
        if column > capacity[t]:
            return False
        total[0] += column
    return True


cdef bint _better(double penalty, double total, double best_penalty,
                  double best_total) noexcept nogil:
    """``(penalty, total) < (best_penalty - 1e-9, best_total)``, as Python compares tuples
    (``_construction._curves``' choice among the realtime orders)."""
    return penalty < best_penalty - 1e-9 or (
        penalty == best_penalty - 1e-9 and total < best_total
    )


cdef inline double _short(
    const double* price, const int64_t* demand, const int64_t* counts, int64_t i
) noexcept nogil:
    """One cell's penalty: ``price * max(0, demand - counts)``."""
    cdef int64_t short = demand[i] - counts[i]
    return price[i] * <double>(short if short > 0 else 0)


cdef double _penalty_of(
    const double* price, const int64_t* demand, const int64_t* counts, int64_t n
) noexcept nogil:
    """``(price * np.maximum(0, demand - counts)).sum()`` over ``n`` cells: numpy's pairwise
    sum (``_crandom._pairwise``, step for step) of the cells' penalties, each computed where
    it is added (no array of them: 2.4 MB at 12,500 services x 24 steps)."""
    cdef double r[8]
    cdef double res
    cdef int64_t i, j, n2
    if n < 8:
        res = 0.0
        for i in range(n):
            res += _short(price, demand, counts, i)
        return res
    if n <= 128:
        for j in range(8):
            r[j] = _short(price, demand, counts, j)
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] += _short(price, demand, counts, i + j)
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res += _short(price, demand, counts, i)
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _penalty_of(price, demand, counts, n2) + _penalty_of(
        price + n2, demand + n2, counts + n2, n - n2
    )


cdef class Realtime:
    """The realtime services' tables, and the realtime orders to weigh.

    The arrays are held, not copied (``price`` and ``demand`` as given when they are
    C-contiguous of the right type): the tables add a few values per step, whatever the
    number of services.

    Parameters
    ----------
    price
        ``(R, T)`` float64: ``realtime_penalty * p_r * w_t`` (``Board._price``).
    demand
        ``(R, T)`` int64: the GPUs each service wants at each step.
    initial, swap
        ``(R,)`` int64: each service's count before the plan and its swap limit.
    gpus
        The cluster's GPUs (no curve rises above them).
    """

    cdef int R, T, n_orders
    cdef int64_t G
    cdef double free_penalty
    cdef public object orders
    cdef object _price, _demand, _initial, _swap
    cdef const double* price
    cdef const int64_t* demand
    cdef const int64_t* initial
    cdef const int64_t* swap
    cdef int64_t* lower_total
    cdef int64_t* rt_orders
    cdef int64_t* scratch

    def __cinit__(self, price, demand, initial, swap, int64_t gpus):
        self._price = np.ascontiguousarray(price, dtype=np.float64)
        self._demand = np.ascontiguousarray(demand, dtype=np.int64)
        self._initial = np.ascontiguousarray(initial, dtype=np.int64)
        self._swap = np.ascontiguousarray(swap, dtype=np.int64)
        cdef const double[:, ::1] p = self._price
        cdef const int64_t[:, ::1] d = self._demand
        cdef const int64_t[::1] start = self._initial
        cdef const int64_t[::1] s = self._swap
        cdef int R = d.shape[0], T = d.shape[1], r, t
        cdef int64_t v
        if p.shape[0] != R or p.shape[1] != T or start.shape[0] != R or s.shape[0] != R:
            raise ValueError(
                f"price has shape {p.shape[0]} x {p.shape[1]}, initial {start.shape[0]} and "
                f"swap {s.shape[0]} services; expected {R} x {T} (demand's) and {R}"
            )
        self.R, self.T, self.G = R, T, gpus
        self.scratch = <int64_t*>malloc(max(1, 5 * T) * sizeof(int64_t))
        self.lower_total = <int64_t*>malloc(max(1, T) * sizeof(int64_t))
        self.rt_orders = <int64_t*>malloc(max(1, R) * sizeof(int64_t))
        self.price = &p[0, 0] if R and T else NULL
        self.demand = &d[0, 0] if R and T else NULL
        self.initial = &start[0] if R else NULL
        self.swap = &s[0] if R else NULL
        self.n_orders = 1
        self.free_penalty = 0.0
        self.orders = None
        for r in range(R):
            self.rt_orders[r] = r
        for t in range(T):  # index.realtime_floor.sum(axis=0)
            self.lower_total[t] = 0
            for r in range(R):
                v = start[r] - s[r] * (t + 1)
                self.lower_total[t] += v if v > 0 else 0

    def __dealloc__(self):
        free(self.scratch)
        free(self.lower_total)
        free(self.rt_orders)

    def set_orders(self, list orders, double free_penalty):
        """The realtime orders :meth:`best` weighs (each a permutation of the services) and
        the penalty with no capacity limit (no order does better: the first order that
        reaches it wins)."""
        cdef int k, i, R = self.R
        cdef int64_t* found = <int64_t*>malloc(max(1, len(orders) * R) * sizeof(int64_t))
        for k, order in enumerate(orders):
            if len(order) != R:
                free(found)
                raise ValueError(f"orders[{k}] has {len(order)} services; expected {R}")
            for i in range(R):
                found[k * R + i] = order[i]
                if not 0 <= found[k * R + i] < R:
                    free(found)
                    raise ValueError(f"orders[{k}][{i}] is {order[i]}; expected 0 to {R - 1}")
        free(self.rt_orders)
        self.rt_orders = found
        self.n_orders = len(orders)
        self.free_penalty = free_penalty
        self.orders = orders  # (the list itself: a caller checks it is still the board's)

    def curves(self, order, capacity):
        """``realtime_curves(index, index.demand, order, capacity)``: ``(R, T)`` int64."""
        cdef int64_t[::1] o = np.ascontiguousarray(order, dtype=np.int64)
        cdef int64_t[::1] cap = np.ascontiguousarray(capacity, dtype=np.int64)
        if o.shape[0] != self.R or cap.shape[0] != self.T:
            raise ValueError(
                f"order has {o.shape[0]} services and capacity {cap.shape[0]} steps; "
                f"expected {self.R} and {self.T}"
            )
        cdef int i
        for i in range(self.R):
            if not 0 <= o[i] < self.R:
                raise ValueError(f"order[{i}] is {o[i]}; expected 0 to {self.R - 1}")
        counts = np.empty((self.R, self.T), dtype=np.int64)
        cdef int64_t[:, ::1] c = counts
        if self.R:
            _curves_of(
                self.R, self.T, self.G, self.demand, self.initial, self.swap, self.lower_total,
                &o[0], &cap[0], &c[0, 0], self.scratch,
            )
        return counts

    def penalty(self, counts):
        """``Board.realtime_penalty(counts)``: the A4c penalty of ``(R, T)`` counts."""
        cdef int64_t[:, ::1] c = np.ascontiguousarray(counts, dtype=np.int64)
        if c.shape[0] != self.R or c.shape[1] != self.T:
            raise ValueError(f"counts have shape {c.shape[0]} x {c.shape[1]}; expected "
                             f"{self.R} x {self.T}")
        if self.R == 0:
            return 0.0
        return _penalty_of(self.price, self.demand, &c[0, 0], self.R * self.T)

    cdef tuple _best(self, int64_t* capacity):
        """``_construction._curves`` and the winner's penalty: ``(None, inf)`` if no order's
        curves fit ``capacity``."""
        cdef int R = self.R, T = self.T, k
        cdef double penalty, best_penalty = INF, best_total = INF, total
        cdef int64_t[:, ::1] c
        best = None
        for k in range(self.n_orders):
            counts = np.empty((R, T), dtype=np.int64)
            c = counts
            if R:
                _curves_of(
                    R, T, self.G, self.demand, self.initial, self.swap, self.lower_total,
                    self.rt_orders + k * R, capacity, &c[0, 0], self.scratch,
                )
            if not _fits(&c[0, 0], R, T, capacity, &total):
                continue
            penalty = _penalty_of(self.price, self.demand, &c[0, 0], R * T) if R else 0.0
            if best is None or _better(penalty, total, best_penalty, best_total):
                best, best_penalty, best_total = counts, penalty, total
            if penalty <= self.free_penalty + 1e-9:
                break  # as low as with no capacity limit: no order does better
        return best, best_penalty

    def best(self, capacity):
        """``_construction._curves(board, capacity)`` and its penalty: the curves in each
        order (:meth:`set_orders`), the lowest A4c penalty wins (then the fewest GPUs held,
        then the first order); ``(None, inf)`` if none fits."""
        cdef int64_t[::1] cap = np.ascontiguousarray(capacity, dtype=np.int64)
        if cap.shape[0] != self.T:
            raise ValueError(f"capacity has {cap.shape[0]} steps; expected {self.T}")
        return self._best(&cap[0])

    def floor(self, list room, list over, list cheapest, int start, int end, int64_t size):
        """``_construction._trade_counts``' floor on the added penalty of ``size`` GPUs over
        steps ``[start, end)``: the GPUs missing beside ``room`` and what realtime holds
        above demand (``over``) at each step's ``cheapest`` price, summed step after step."""
        cdef double total = 0.0
        cdef int64_t missing
        cdef int t
        if not 0 <= start <= end <= min(len(room), len(over), len(cheapest)):
            raise ValueError(f"steps [{start}, {end}) are not inside the {self.T} steps")
        for t in range(start, end):
            missing = size - <int64_t>room[t] - <int64_t>over[t]
            if missing > 0:
                total += <double>missing * <double>cheapest[t]
        return total

    def bind(self, list free_of, counts, list order):
        """:func:`bind_by_words` on this problem's GPUs."""
        return bind_by_words(free_of, counts, order, self.G)

    def trade(self, list room, reserved, int start, int end, int64_t size):
        """The curves of ``_construction._trade_counts`` and their penalty: :meth:`best` in
        ``room + reserved`` less ``size`` GPUs over steps ``[start, end)``; ``(None, inf)``
        when that capacity is negative at some step or no order's curves fit."""
        cdef int64_t[::1] held = np.ascontiguousarray(reserved, dtype=np.int64)
        cdef int T = self.T, t
        if len(room) != T or held.shape[0] != T:
            raise ValueError(f"room and reserved have {len(room)} and {held.shape[0]} steps; "
                             f"expected {T}")
        cdef int64_t* capacity = self.scratch + 4 * T
        for t in range(T):
            capacity[t] = <int64_t>room[t] + held[t]
            if start <= t < end:
                capacity[t] -= size
            if capacity[t] < 0:
                return None, INF
        return self._best(capacity)


cdef inline int64_t _count(const uint64_t* mask, int W) noexcept nogil:
    """Set bits of a ``W``-word mask."""
    cdef int64_t n = 0
    cdef int i
    for i in range(W):
        n += __builtin_popcountll(mask[i])
    return n


cdef void _longest_free(
    uint64_t* candidates, int64_t count, int step, int T, int W, const uint64_t* free_of,
    uint64_t* narrowed, uint64_t* chosen
) noexcept nogil:
    """``Board._longest_free``: into ``chosen``, ``count`` GPUs of ``candidates`` free of
    batch blocks longest after ``step`` (ties: the highest GPUs); ``candidates`` is changed."""
    cdef int later, i, top
    for later in range(step + 1, T):
        for i in range(W):
            narrowed[i] = candidates[i] & free_of[later * W + i]
        if _count(narrowed, W) < count:
            break
        memcpy(candidates, narrowed, W * sizeof(uint64_t))
    for i in range(W):
        chosen[i] = 0
    i = W - 1
    while count > 0 and i >= 0:  # the highest set bits, one at a time
        if candidates[i] == 0:
            i -= 1
            continue
        top = 63 - __builtin_clzll(candidates[i])
        chosen[i] |= (<uint64_t>1) << top
        candidates[i] ^= (<uint64_t>1) << top
        count -= 1


cdef tuple _gpus_of(const uint64_t* mask, int W):
    """The set bits of a ``W``-word mask, lowest first (``_board._set_bits``)."""
    cdef list found = []
    cdef uint64_t word
    cdef int i
    for i in range(W):
        word = mask[i]
        while word:
            found.append(i * 64 + __builtin_ctzll(word))
            word &= word - 1
    return tuple(found)


cdef class _Words:
    """Scratch masks of ``W`` words each, freed with the object."""

    cdef uint64_t* data

    def __cinit__(self, int64_t words):
        self.data = <uint64_t*>calloc(max(1, words), sizeof(uint64_t))
        if self.data == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.data)


def bind_by_words(list free_of, counts, list order, int gpus):
    """``Board._bind_by_mask(counts.tolist(), order, free_of, occupy=False)`` on arrays of
    64-bit words: each service of ``order`` gets ``counts[r, t]`` GPUs of ``free_of[t]`` (the
    GPUs free of batch blocks at step ``t``, an integer bitmask), keeping what it held where
    it may, then taking the GPUs free longest ahead (ties: the highest); a shrinking
    service keeps those free longest. Returns ``{r: [GPUs at step t, ascending]}``.

    Memory: ``(services + steps + 4) x words`` of 8 bytes (the Python board holds
    services' GPUs by number from ``_board.BIND_BY_NUMBER_FROM`` GPUs on instead)."""
    cdef const int64_t[:, ::1] c = np.ascontiguousarray(counts, dtype=np.int64)
    cdef int T = len(free_of), W = (gpus + 63) // 64, R = c.shape[0], step, i, k, r
    cdef int64_t want, missing
    cdef int n = len(order)
    if c.shape[1] != T and R:
        raise ValueError(f"counts have {c.shape[1]} steps and free_of {T}; expected the same")
    for k in range(n):
        if not 0 <= order[k] < R:
            raise ValueError(f"order[{k}] is {order[k]}; expected 0 to {R - 1}")
    store = _Words(<int64_t>(T + n + 4) * W)
    cdef uint64_t* free_ = store.data
    cdef uint64_t* held = free_ + T * W  # k-th service of order -> its GPUs
    cdef uint64_t* spare = held + n * W
    cdef uint64_t* work = spare + W
    cdef uint64_t* narrowed = work + W
    cdef uint64_t* chosen = narrowed + W
    cdef const unsigned char* raw
    cdef uint64_t* mine
    for step in range(T):
        data = free_of[step].to_bytes(W * 8, "little")
        raw = data
        for i in range(W * 8):
            free_[step * W + i // 8] |= (<uint64_t>raw[i]) << (8 * (i % 8))
    found = {r: [()] * T for r in order}
    last = [None] * n  # the tuple of each service's GPUs at the step before
    cdef bint changed
    for step in range(T):
        for i in range(W):
            spare[i] = free_[step * W + i]  # available, less what the services keep
        for k in range(n):  # first every service keeps what it held and still may
            r = order[k]
            want = c[r, step]
            mine = held + k * W
            for i in range(W):
                mine[i] &= free_[step * W + i]
            if _count(mine, W) > want:
                _longest_free(mine, want, step, T, W, free_, narrowed, chosen)
                memcpy(mine, chosen, W * sizeof(uint64_t))
            for i in range(W):
                spare[i] &= ~mine[i]
        for k in range(n):  # then the growing ones take new GPUs
            r = order[k]
            mine = held + k * W
            missing = c[r, step] - _count(mine, W)
            changed = last[k] is None
            if missing > 0:
                memcpy(work, spare, W * sizeof(uint64_t))
                _longest_free(work, missing, step, T, W, free_, narrowed, chosen)
                for i in range(W):
                    mine[i] |= chosen[i]
                    spare[i] ^= chosen[i]
                changed = True
            if not changed:  # (kept masks only shrink: the same count means the same GPUs)
                changed = len(<tuple>last[k]) != _count(mine, W)
            if changed:
                last[k] = _gpus_of(mine, W)
            found[r][step] = last[k]
    return found
