# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The step-capacity LP's model in C for the greedy's LP guide (models/allocation.md
section 13; section 10.2, rule B4): the z columns of the new batch tasks
(``bound._batch_columns``), the B3 rows (``bound._add_fragmentation_rows``) and their
packing (``bound._packing_capacity``) of a plain problem of at most 64 GPUs, the same arrays in the same order, so HiGHS is handed the same
model and the guide gives the same plans (``tests/allocation/test_bound.py`` compares
them). The numpy path stays for GPU models and more GPUs, and where the core is not built.
"""

from libc.stdint cimport int64_t, uint64_t

import numpy as np

from gpuopt.allocation._cbits cimport _free_runs, _ones


cdef void _check(int gpus, int horizon, Py_ssize_t busy, Py_ssize_t steps) except *:
    """The lengths the loops below trust (bounds and wraparound checks are off)."""
    if not 1 <= gpus <= 64:
        raise ValueError(f"the compiled step LP handles 1-64 GPUs (got {gpus})")
    if horizon < 0 or busy < horizon or steps < horizon:
        raise ValueError(f"{horizon} steps expected of the busy masks and room ({busy}, {steps})")


def batch_columns(
    list ways,
    int64_t[:] size,
    int64_t[:] arrival,
    double[:] priority,
    int64_t[:] room,
    list busy,
    double[:] cumulative,
    int gpus,
    int horizon,
):
    """``bound._batch_columns`` for one GPU model (no B1m rows): ``ways`` as
    ``bound._ways`` gives them, ``size``, ``arrival`` and ``priority`` per batch task,
    ``room`` per step beside the realtime floor, ``busy`` the running tasks' GPU masks per
    step, ``cumulative`` the weights' prefix sums (``T + 1`` of them, as the numpy path
    sums them). Returns ``(costs, sizes, starts, ends, owners, legal_by_size,
    col_starts, row_index, values, tasks)``."""
    cdef int W = len(ways)
    _check(gpus, horizon, len(busy), room.shape[0])
    if cumulative.shape[0] < horizon + 1:
        raise ValueError(f"batch_columns: {horizon + 1} prefix sums expected")
    cdef int64_t[:] w_owner = np.empty(W, dtype=np.int64)
    cdef int64_t[:] w_duration = np.empty(W, dtype=np.int64)
    cdef int64_t[:] w_last = np.empty(W, dtype=np.int64)
    cdef uint64_t[:] w_legal = np.empty(W, dtype=np.uint64)
    cdef double[:] w_rate = np.empty(W, dtype=np.float64)
    cdef uint64_t[:] busy_at = np.empty(max(horizon, 1), dtype=np.uint64)
    cdef uint64_t full = _ones(gpus)
    cdef int w, t, count = 0, entries = 0
    cdef int64_t s, e, k, b
    for w in range(W):
        way = ways[w]
        if not 0 <= way[0] < min(size.shape[0], arrival.shape[0], priority.shape[0]):
            raise ValueError(f"batch_columns: way {w} names task {way[0]}, not in the batch")
        w_owner[w] = way[0]
        w_duration[w] = way[2]
        w_last[w] = way[3]
        w_legal[w] = <uint64_t>way[4]
        w_rate[w] = way[5]
    for t in range(horizon):
        busy_at[t] = <uint64_t>busy[t]
    # a first pass for the sizes of the arrays, a second to fill them (the same tests)
    cdef int64_t bound_cols = 0
    for w in range(W):
        if w_last[w] >= arrival[w_owner[w]]:
            bound_cols += w_last[w] - arrival[w_owner[w]] + 1
    cdef int64_t[:] c_way = np.empty(bound_cols, dtype=np.int64)
    cdef int64_t[:] c_start = np.empty(bound_cols, dtype=np.int64)
    cdef int64_t[:] c_end = np.empty(bound_cols, dtype=np.int64)
    cdef uint64_t taken
    cdef bint fits
    for w in range(W):
        b = w_owner[w]
        k = size[b]
        for s in range(arrival[b], w_last[w] + 1):
            e = s + w_duration[w]
            if e > horizon:
                e = horizon
            fits = True
            taken = 0
            for t in range(s, e):  # A1b beside the floor, and a legal block free of running tasks
                if room[t] < k:
                    fits = False
                    break
                taken |= busy_at[t]
            if not fits or not (_free_runs(~taken & full, <int>k) & w_legal[w]):
                continue
            c_way[count] = w
            c_start[count] = s
            c_end[count] = e
            entries += e - s + 1
            count += 1
    costs = np.empty(count, dtype=np.float64)
    sizes = np.empty(count, dtype=np.int64)
    owners = np.empty(count, dtype=np.int64)
    col_starts = np.zeros(count + 1, dtype=np.int64)
    row_index = np.empty(entries, dtype=np.int64)
    values = np.empty(entries, dtype=np.float64)
    cdef double[:] o_cost = costs
    cdef int64_t[:] o_size = sizes
    cdef int64_t[:] o_owner = owners
    cdef int64_t[:] o_col = col_starts
    cdef int64_t[:] o_row = row_index
    cdef double[:] o_value = values
    cdef int c, at = 0, rank = -1
    cdef int64_t last_owner = -1
    legal_by_size = {}
    cdef int last_way = -1
    for c in range(count):
        w = <int>c_way[c]
        b = w_owner[w]
        k = size[b]
        s, e = c_start[c], c_end[c]
        if w != last_way:  # the ways with a column, in order (the numpy path's np.unique)
            legal_by_size[k] = legal_by_size.get(k, 0) | int(w_legal[w])
            last_way = w
        if b != last_owner:  # B2: the task's rank among the tasks with a column
            rank += 1
            last_owner = b
        # (the product in the order p x k x rate x W, as the numpy path computes it)
        o_cost[c] = priority[b] * <double>k * w_rate[w] * (cumulative[e] - cumulative[s])
        o_size[c] = k
        o_owner[c] = b
        for t in range(s, e):
            o_row[at] = t
            o_value[at] = <double>k
            at += 1
        o_row[at] = horizon + rank
        o_value[at] = 1.0
        at += 1
        o_col[c + 1] = at
    starts = np.asarray(c_start[:count]).copy()
    ends = np.asarray(c_end[:count]).copy()
    return (
        costs, sizes, starts, ends, owners, legal_by_size,
        col_starts, row_index, values, rank + 1,
    )


cdef int _packing(uint64_t busy, int64_t* block_size, uint64_t* block_legal, int blocks,
                  int gpus) noexcept:
    """``bound._packing_capacity`` on C arrays (the same dynamic programme, the same integer):
    the most GPUs disjoint legal blocks cover without touching ``busy``."""
    cdef uint64_t free_ = ~busy & _ones(gpus)
    cdef uint64_t firsts[64]
    cdef int sizes[64]
    cdef int usable = 0, end, j, first, value
    cdef int best[65]
    cdef uint64_t runs
    for j in range(blocks):
        if usable == 64:
            break
        runs = _free_runs(free_, <int>block_size[j]) & block_legal[j]
        if runs:
            sizes[usable] = <int>block_size[j]
            firsts[usable] = runs
            usable += 1
    best[0] = 0
    for end in range(1, gpus + 1):
        value = best[end - 1]
        for j in range(usable):
            first = end - sizes[j]
            if first >= 0 and (firsts[j] >> first) & 1 and best[first] + sizes[j] > value:
                value = best[first] + sizes[j]
        best[end] = value
    return best[gpus]


def packing_capacity(uint64_t busy, list blocks, int gpus):
    """``bound._packing_capacity`` in C for at most 64 GPUs (the same dynamic programme, the
    same integer): the most GPUs disjoint legal blocks cover without touching ``busy``;
    ``blocks`` pairs a size with the bitmask of its legal first GPUs."""
    cdef int count = len(blocks), j
    cdef int64_t[:] block_size = np.empty(max(count, 1), dtype=np.int64)
    cdef uint64_t[:] block_legal = np.empty(max(count, 1), dtype=np.uint64)
    for j in range(count):
        block_size[j] = blocks[j][0]
        block_legal[j] = <uint64_t>blocks[j][1]
    return _packing(busy, &block_size[0], &block_legal[0], count, gpus)


def fragmentation_rows(
    int64_t[:] starts,
    int64_t[:] ends,
    int64_t[:] sizes,
    dict legal_by_size,
    list busy,
    double[:] capacity,
    int gpus,
    int horizon,
):
    """The B3 rows of ``bound._add_fragmentation_rows`` that B1 does not imply, in its
    order (sizes ascending, then steps), as ``(upper, row_starts, index, values)`` for
    HiGHS's ``addRows``, or None when there are none."""
    cdef int n = starts.shape[0]
    cdef int B = len(legal_by_size)
    _check(gpus, horizon, len(busy), capacity.shape[0])
    if ends.shape[0] != n or sizes.shape[0] != n:
        raise ValueError("fragmentation_rows: starts, ends and sizes differ in length")
    cdef int64_t[:] block_size = np.empty(max(B, 1), dtype=np.int64)
    cdef uint64_t[:] block_legal = np.empty(max(B, 1), dtype=np.uint64)
    cdef int64_t[:] threshold_of = np.array(sorted(legal_by_size), dtype=np.int64)
    cdef int j = 0, i, c, t, count, blocks, cap
    for size_, legal in legal_by_size.items():  # the blocks in the dict's order, as bound's
        block_size[j] = size_
        block_legal[j] = <uint64_t>legal
        j += 1
    cdef int64_t[:] chosen_size = np.empty(max(B, 1), dtype=np.int64)
    cdef uint64_t[:] chosen_legal = np.empty(max(B, 1), dtype=np.uint64)
    cdef int64_t active = 0
    for c in range(n):
        active += ends[c] - starts[c]
    # at most every column's steps once per size: the rows' entries, then their bounds
    index = np.empty(max(B * active, 1), dtype=np.int32)
    values = np.empty(max(B * active, 1), dtype=np.float64)
    upper = np.empty(max(B * horizon, 1), dtype=np.float64)
    row_starts = np.empty(max(B * horizon, 1), dtype=np.int32)
    cdef int[:] o_index = index
    cdef double[:] o_value = values
    cdef double[:] o_upper = upper
    cdef int[:] o_start = row_starts
    cdef int rows = 0, at = 0, first
    cdef int64_t threshold
    for i in range(B):
        threshold = threshold_of[i]
        blocks = 0
        for j in range(B):
            if block_size[j] >= threshold:
                chosen_size[blocks] = block_size[j]
                chosen_legal[blocks] = block_legal[j]
                blocks += 1
        for t in range(horizon):
            first = at
            for c in range(n):
                if sizes[c] >= threshold and starts[c] <= t < ends[c]:
                    o_index[at] = c
                    o_value[at] = <double>sizes[c]
                    at += 1
            if at == first:
                continue
            cap = _packing(<uint64_t>busy[t], &chosen_size[0], &chosen_legal[0], blocks, gpus)
            if cap >= capacity[t]:
                at = first  # implied by B1
                continue
            o_upper[rows] = cap
            o_start[rows] = first
            rows += 1
    if not rows:
        return None
    return upper[:rows], row_starts[:rows], index[:at], values[:at]
