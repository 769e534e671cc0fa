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
- :func:`_penalty_of`: ``Board.realtime_penalty``, summed as numpy sums (pairwise,
  ``_crandom._pairwise``);
- :meth:`Realtime.best`: ``_construction._curves`` (each realtime order, the lowest
  penalty wins, then the fewest GPUs held, then the first order);
- :meth:`Realtime.trade`: the recomputation at the end of
  ``_construction._trade_counts`` (the capacity less the task's block, then ``best``).
"""

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

import numpy as np

from gpuopt.allocation._crandom cimport _pairwise

cdef double INF = float("inf")


cdef void _curves_of(
    int R,
    int T,
    const int64_t* demand,
    const int64_t* lower,
    const int64_t* upper,
    const int64_t* swap,
    const int64_t* order,
    const int64_t* capacity,
    int64_t* out,
    int64_t* scratch,
) noexcept nogil:
    """The realtime curves ``out`` (``(R, T)``, row-major, every row written) of the services
    served in ``order`` (all ``R`` of them) within ``capacity`` (``(T,)``): each the lowest
    swap-feasible curve at or above its demand in what is left (``_board.realtime_curves``).
    ``demand``, ``lower`` (the forced ramp-down from the initial count) and ``upper`` (the
    fastest ramp-up from it) are ``(R, T)``; ``scratch`` holds ``3 * T`` values."""
    cdef int r, t, k
    cdef int64_t sl, run = 0, v
    cdef int64_t* left = scratch
    cdef int64_t* ub = scratch + T
    cdef int64_t* want = scratch + 2 * T
    cdef const int64_t* low
    cdef const int64_t* high
    cdef const int64_t* wanted
    cdef int64_t* row
    for t in range(T):
        left[t] = capacity[t]
    for r in range(R):
        low = lower + r * T
        for t in range(T):
            left[t] -= low[t]
    for k in range(R):
        r = <int>order[k]
        sl = swap[r]
        low = lower + r * T
        high = upper + r * T
        wanted = demand + r * T
        row = out + r * T
        for t in range(T):  # this task's own forced ramp-down is now part of its curve
            left[t] += low[t]
            ub[t] = left[t] if left[t] < high[t] else high[t]
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


cdef double _penalty_of(
    int64_t n, const double* price, const int64_t* demand, const int64_t* counts, double* terms
) noexcept:
    """``(price * np.maximum(0, demand - counts)).sum()`` over ``n`` cells (numpy's pairwise
    sum); ``terms`` holds ``n`` values."""
    cdef int64_t i, short
    if n == 0:
        return 0.0
    for i in range(n):
        short = demand[i] - counts[i]
        terms[i] = price[i] * <double>(short if short > 0 else 0)
    return _pairwise(terms, n)


cdef class Realtime:
    """The realtime services' tables as C arrays, and the realtime orders to weigh.

    Parameters
    ----------
    price
        ``(R, T)`` float64: ``realtime_penalty * p_r * w_t`` (``Board._price``).
    demand, lower, upper
        ``(R, T)`` int64: the demand, the forced ramp-down from the initial count
        (``index.realtime_floor``) and the fastest ramp-up from it, capped at the GPUs.
    swap
        ``(R,)`` int64: each service's swap limit.
    """

    cdef int R, T, n_orders
    cdef double free_penalty
    cdef public object orders
    cdef double* price
    cdef int64_t* demand
    cdef int64_t* lower
    cdef int64_t* upper
    cdef int64_t* swap
    cdef int64_t* rt_orders
    cdef int64_t* scratch
    cdef double* terms

    def __cinit__(self, price, demand, lower, upper, swap):
        cdef double[:, ::1] p = np.ascontiguousarray(price, dtype=np.float64)
        cdef int64_t[:, ::1] d = np.ascontiguousarray(demand, dtype=np.int64)
        cdef int64_t[:, ::1] lo = np.ascontiguousarray(lower, dtype=np.int64)
        cdef int64_t[:, ::1] hi = np.ascontiguousarray(upper, dtype=np.int64)
        cdef int64_t[::1] s = np.ascontiguousarray(swap, dtype=np.int64)
        cdef int R = d.shape[0], T = d.shape[1], r, t
        cdef int64_t n = max(1, R * T)
        self.R, self.T = R, T
        self.price = <double*>malloc(n * sizeof(double))
        self.terms = <double*>malloc(n * sizeof(double))
        self.demand = <int64_t*>malloc(n * sizeof(int64_t))
        self.lower = <int64_t*>malloc(n * sizeof(int64_t))
        self.upper = <int64_t*>malloc(n * sizeof(int64_t))
        self.swap = <int64_t*>malloc(max(1, R) * sizeof(int64_t))
        self.scratch = <int64_t*>malloc(max(1, 4 * T) * sizeof(int64_t))
        self.rt_orders = <int64_t*>malloc(max(1, R) * sizeof(int64_t))
        self.n_orders = 1
        self.free_penalty = 0.0
        self.orders = None
        for r in range(R):
            self.swap[r] = s[r]
            self.rt_orders[r] = r
            for t in range(T):
                self.price[r * T + t] = p[r, t]
                self.demand[r * T + t] = d[r, t]
                self.lower[r * T + t] = lo[r, t]
                self.upper[r * T + t] = hi[r, t]

    def __dealloc__(self):
        free(self.price)
        free(self.terms)
        free(self.demand)
        free(self.lower)
        free(self.upper)
        free(self.swap)
        free(self.scratch)
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
                self.R, self.T, self.demand, self.lower, self.upper, self.swap,
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
        return _penalty_of(self.R * self.T, self.price, self.demand, &c[0, 0], self.terms)

    cdef tuple _best(self, int64_t* capacity):
        """``_construction._curves`` and the winner's penalty: ``(None, inf)`` if no order's
        curves fit ``capacity``."""
        cdef int R = self.R, T = self.T, k, r, t
        cdef double penalty, best_penalty = INF, best_total = INF, total
        cdef int64_t column
        cdef int64_t[:, ::1] c
        cdef bint fits
        best = None
        for k in range(self.n_orders):
            counts = np.empty((R, T), dtype=np.int64)
            c = counts
            if R:
                _curves_of(
                    R, T, self.demand, self.lower, self.upper, self.swap,
                    self.rt_orders + k * R, capacity, &c[0, 0], self.scratch,
                )
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
            penalty = _penalty_of(R * T, self.price, self.demand, &c[0, 0], self.terms) if R else 0.0
            # (penalty, total) < (best_penalty - 1e-9, best_total), as Python compares tuples
            if best is None or penalty < best_penalty - 1e-9 or (
                penalty == best_penalty - 1e-9 and total < best_total
            ):
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

    def trade(self, list room, reserved, int start, int end, int64_t size):
        """The curves of ``_construction._trade_counts`` and their penalty: :meth:`best` in
        ``room + reserved`` less ``size`` GPUs over steps ``[start, end)``; ``(None, inf)``
        when that capacity is negative at some step or no order's curves fit."""
        cdef int64_t[::1] held = np.ascontiguousarray(reserved, dtype=np.int64)
        cdef int T = self.T, t
        if len(room) != T or held.shape[0] != T:
            raise ValueError(f"room and reserved have {len(room)} and {held.shape[0]} steps; "
                             f"expected {T}")
        cdef int64_t* capacity = self.scratch + 3 * T
        for t in range(T):
            capacity[t] = <int64_t>room[t] + held[t]
            if start <= t < end:
                capacity[t] -= size
            if capacity[t] < 0:
                return None, INF
        return self._best(capacity)
