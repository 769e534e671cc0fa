# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The calendar heuristic's placement loop in C (H2, H3 of models/calendar.md).

The same plans as :func:`gpuopt.calendar.greedy._place_python`, tick for tick and
node for node (tests/calendar/test_greedy.py holds them together): a board of
per-node step functions of free capacity, each job put at its earliest start in
the order given. Built by setup.py when a C compiler is found; the Python loop
runs where it is not.
"""

from libc.stdlib cimport free, malloc, qsort, realloc
from libc.string cimport memcpy, memmove

import numpy as np

ctypedef long long i64

cdef i64 NEVER = 1LL << 62


cdef struct Node:
    int count
    int cap
    i64 *times
    i64 *free


cdef inline int _bisect_right(const i64 *times, int count, i64 at) noexcept nogil:
    cdef int lo = 0, hi = count, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if at < times[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef inline int _bisect_left(const i64 *times, int count, i64 at) noexcept nogil:
    cdef int lo = 0, hi = count, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if times[mid] < at:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline i64 _count(const i64 *free, const i64 *use, int R) noexcept nogil:
    cdef i64 most = NEVER, q
    cdef int r
    for r in range(R):
        if use[r] > 0:
            if free[r] < use[r]:
                return 0
            q = 1 if free[r] < 2 * use[r] else free[r] // use[r]
            if q < most:
                most = q
    return most


cdef int _split(Node *nd, int R, i64 at) except -1:
    cdef int i = _bisect_left(nd.times, nd.count, at)
    cdef int cap
    cdef i64 *times
    cdef i64 *frees
    if i < nd.count and nd.times[i] == at:
        return i
    if nd.count == nd.cap:
        cap = nd.cap * 2
        times = <i64 *> realloc(nd.times, cap * sizeof(i64))
        if times == NULL:
            raise MemoryError()
        nd.times = times
        frees = <i64 *> realloc(nd.free, cap * R * sizeof(i64))
        if frees == NULL:
            raise MemoryError()
        nd.free = frees
        nd.cap = cap
    memmove(nd.times + i + 1, nd.times + i, (nd.count - i) * sizeof(i64))
    memmove(nd.free + (i + 1) * R, nd.free + i * R, (nd.count - i) * R * sizeof(i64))
    nd.times[i] = at
    memcpy(nd.free + i * R, nd.free + (i - 1) * R, R * sizeof(i64))
    nd.count += 1
    return i


cdef int _take(Node *nd, int R, i64 start, i64 end, const i64 *use) except -1:
    cdef int first = _split(nd, R, start)
    cdef int last = _split(nd, R, end)
    cdef int k, r
    for k in range(first, last):
        for r in range(R):
            nd.free[k * R + r] -= use[r]
    return 0


cdef inline i64 _fits(const Node *nd, int R, const i64 *use, i64 start, i64 end) noexcept nogil:
    cdef int index = _bisect_right(nd.times, nd.count, start) - 1
    cdef i64 most = NEVER, c
    while index < nd.count and nd.times[index] < end:
        c = _count(nd.free + index * R, use, R)
        if c < most:
            most = c
        if most <= 0:
            return 0
        index += 1
    return most


cdef inline i64 _earliest(
    const Node *nd, int R, const i64 *use, i64 duration, i64 lo, i64 hi
) noexcept nogil:
    cdef int count = nd.count
    cdef int index = _bisect_right(nd.times, count, lo) - 1
    cdef int ahead
    cdef i64 start, end
    cdef bint clear
    while index < count:
        start = lo if nd.times[index] < lo else nd.times[index]
        if start > hi:
            return NEVER
        if _count(nd.free + index * R, use, R) < 1:
            index += 1
            continue
        end = start + duration
        ahead = index + 1
        clear = True
        while ahead < count and nd.times[ahead] < end:
            if _count(nd.free + ahead * R, use, R) < 1:
                clear = False
                break
            ahead += 1
        if clear:
            return start
        index = ahead + 1
    return NEVER


cdef inline i64 _free_at(const Node *nd, int R, i64 at) noexcept nogil:
    return nd.free[(_bisect_right(nd.times, nd.count, at) - 1) * R]


cdef int _cmp_i64(const void *a, const void *b) noexcept nogil:
    cdef i64 x = (<const i64 *> a)[0], y = (<const i64 *> b)[0]
    return (x > y) - (x < y)


cdef struct Pick:
    i64 fit
    i64 free
    i64 node


cdef int _cmp_pick(const void *a, const void *b) noexcept nogil:
    cdef const Pick *p = <const Pick *> a
    cdef const Pick *q = <const Pick *> b
    # ascending (-fit, free, node)
    if p.fit != q.fit:
        return -1 if p.fit > q.fit else 1
    if p.free != q.free:
        return -1 if p.free < q.free else 1
    return (p.node > q.node) - (p.node < q.node)


cdef struct Event:
    i64 t
    i64 k
    i64 f


cdef inline int _enter(
    const Node *nd, int R, const i64 *use, int piece, int *dq, i64 *dv, int head, int tail
) noexcept nogil:
    """Piece ``piece`` enters the sliding window: the deque keeps rising values (its
    front is the window's minimum); returns the new tail."""
    cdef i64 f = _count(nd.free + piece * R, use, R)
    while tail > head and dv[tail - 1] >= f:
        tail -= 1
    dq[tail] = piece
    dv[tail] = f
    return tail + 1


cdef int _window_events(
    const Node *nd, int R, const i64 *use, i64 d, i64 lo, i64 hi, i64 k, Event *out, int *dq,
    i64 *dv,
) noexcept nogil:
    """The pods of ``use`` that fit on the node over ``[t, t + d)``, as a step function
    of ``t`` in ``[lo, hi]``: its value at ``lo`` and every change after, as events of
    candidate ``k``. A sliding-window minimum over the node's pieces: piece ``i`` is in
    the window from ``times[i] - d + 1`` until ``times[i + 1]``."""
    cdef int c = nd.count, first = _bisect_right(nd.times, nd.count, lo) - 1
    cdef int head = 0, tail = 0, nk = first, n = 0
    cdef i64 t, tl, te, f, last
    while nk < c and nd.times[nk] < lo + d:
        tail = _enter(nd, R, use, nk, dq, dv, head, tail)
        nk += 1
    last = dv[head]
    out[0].t = lo
    out[0].k = k
    out[0].f = last
    n = 1
    while True:
        tl = nd.times[first + 1] if first + 1 < c else NEVER
        te = nd.times[nk] - d + 1 if nk < c else NEVER
        t = tl if tl < te else te
        if t > hi:
            break
        while first + 1 < c and nd.times[first + 1] <= t:
            first += 1
        while nk < c and nd.times[nk] - d + 1 <= t:
            tail = _enter(nd, R, use, nk, dq, dv, head, tail)
            nk += 1
        while dq[head] < first:
            head += 1
        f = dv[head]
        if f != last:
            out[n].t = t
            out[n].k = k
            out[n].f = f
            n += 1
            last = f
    return n


cdef inline void _heap_push(i64 *ht, int *hk, int *size, i64 t, int k) noexcept nogil:
    cdef int i = size[0], parent
    size[0] += 1
    while i > 0:
        parent = (i - 1) >> 1
        if ht[parent] < t or (ht[parent] == t and hk[parent] < k):
            break
        ht[i] = ht[parent]
        hk[i] = hk[parent]
        i = parent
    ht[i] = t
    hk[i] = k


cdef inline void _heap_pop(i64 *ht, int *hk, int *size) noexcept nogil:
    cdef int n = size[0] - 1, i = 0, child
    cdef i64 t = ht[n]
    cdef int k = hk[n]
    size[0] = n
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and (
            ht[child + 1] < ht[child] or (ht[child + 1] == ht[child] and hk[child + 1] < hk[child])
        ):
            child += 1
        if t < ht[child] or (t == ht[child] and k < hk[child]):
            break
        ht[i] = ht[child]
        hk[i] = hk[child]
        i = child
    ht[i] = t
    hk[i] = k


def plan_core(
    const i64[:, ::1] capacity,
    const i64[::1] run_node,
    const i64[:, ::1] run_use,
    const i64[::1] run_end,
    const i64[:, ::1] use,
    const i64[::1] duration,
    const i64[::1] members,
    const i64[::1] lo,
    const i64[::1] cand_lo,
    const i64[::1] cand_hi,
    const i64[::1] cand_node,
    const i64[::1] cand_dom,
    i64 horizon,
    bint in_order=False,
):
    """Every job (in the order given) at its earliest start; returns ``(start, nodes)``:
    ``start[j]`` (-1: none before the horizon) and ``nodes[j * M: ...]`` flattened with
    ``M = max(members)`` (-1 padding). ``in_order``: no job starts before the one
    before it (fifo), and none after a job that gets no start."""
    cdef int N = capacity.shape[0], R = capacity.shape[1], J = use.shape[0]
    cdef int most_members = 1, j, n, k, r, first, last, d, domains, chosen, taken, m, count
    cdef i64 best, best_free, start, fr, hi = horizon - 1, low, surplus, best_surplus, fit
    cdef i64 floor = 0
    cdef int best_node
    cdef Node *nodes = <Node *> malloc(max(N, 1) * sizeof(Node))
    cdef Event *events = NULL
    cdef int *offset = NULL
    cdef int *changed = NULL
    cdef int touched
    cdef int *cursor = NULL
    cdef i64 *heap_t = NULL
    cdef int *heap_k = NULL
    cdef int heap_size
    cdef int *deque = NULL
    cdef i64 *deque_values = NULL
    cdef int most_pieces, event_cap = 0, piece_cap = 0, most_candidates = 1
    cdef i64 *sums = NULL
    cdef i64 *fits = NULL
    cdef Pick *picks = NULL
    cdef Node *nd
    if nodes == NULL:
        raise MemoryError()
    for j in range(J):
        if members[j] > most_members:
            most_members = members[j]
    starts = np.full(J, -1, dtype=np.int64)
    chosen_nodes = np.full(J * most_members, -1, dtype=np.int64)
    cdef i64[::1] out_start = starts
    cdef i64[::1] out_nodes = chosen_nodes
    for n in range(N):
        nodes[n].times = NULL
        nodes[n].free = NULL
    try:
        for n in range(N):
            nd = &nodes[n]
            nd.cap = 8
            nd.count = 1
            nd.times = <i64 *> malloc(8 * sizeof(i64))
            nd.free = <i64 *> malloc(8 * R * sizeof(i64))
            if nd.times == NULL or nd.free == NULL:
                raise MemoryError()
            nd.times[0] = 0
            for r in range(R):
                nd.free[r] = capacity[n, r]
        for k in range(run_node.shape[0]):
            if run_end[k] > 0:
                _take(&nodes[run_node[k]], R, 0, run_end[k], &run_use[k, 0])
        # the per-candidate arrays of the gang sweep, once for the largest candidate list
        for j in range(J):
            if cand_hi[j] - cand_lo[j] > most_candidates:
                most_candidates = cand_hi[j] - cand_lo[j]
        offset = <int *> malloc((most_candidates + 1) * sizeof(int))
        changed = <int *> malloc(most_candidates * sizeof(int))
        cursor = <int *> malloc(most_candidates * sizeof(int))
        heap_t = <i64 *> malloc(most_candidates * sizeof(i64))
        heap_k = <int *> malloc(most_candidates * sizeof(int))
        fits = <i64 *> malloc(most_candidates * sizeof(i64))
        picks = <Pick *> malloc(most_candidates * sizeof(Pick))
        sums = <i64 *> malloc(most_candidates * sizeof(i64))  # a domain per candidate at most
        if (
            offset == NULL or changed == NULL or cursor == NULL or heap_t == NULL
            or heap_k == NULL or fits == NULL or picks == NULL or sums == NULL
        ):
            raise MemoryError()
        for j in range(J):
            first = cand_lo[j]
            last = cand_hi[j]
            low = lo[j]
            if in_order:
                if low < floor:
                    low = floor
                floor = horizon  # until this job gets a start
            if low > hi or first == last:
                continue
            if members[j] == 1:
                best = NEVER
                best_node = -1
                best_free = NEVER
                for k in range(first, last):
                    nd = &nodes[cand_node[k]]
                    start = _earliest(nd, R, &use[j, 0], duration[j], low, hi if hi < best else best)
                    if start > hi:
                        continue
                    fr = _free_at(nd, R, start)
                    if start < best or (start == best and fr < best_free):
                        best = start
                        best_node = cand_node[k]
                        best_free = fr
                        if best == low and best_free == use[j, 0]:
                            break  # now, on a node it fills exactly: no node does better
                if best_node >= 0:
                    floor = best
                    out_start[j] = best
                    out_nodes[j * most_members] = best_node
                    _take(&nodes[best_node], R, best, best + duration[j], &use[j, 0])
                continue
            # A gang: every candidate's pods-that-fit as a step function of the start
            # (events), swept in time order with a sum per domain; the first time a
            # domain holds all the pods is the earliest start (the Python loop tries lo
            # and every breakpoint in turn: the same answer, a test holds them together).
            count = 0
            most_pieces = 1
            domains = 1
            for k in range(first, last):
                count += 1 + 2 * nodes[cand_node[k]].count
                if nodes[cand_node[k]].count > most_pieces:
                    most_pieces = nodes[cand_node[k]].count
                if cand_dom[k] + 1 > domains:
                    domains = cand_dom[k] + 1
            if count > event_cap:  # the buffers that grow with the nodes' pieces
                free(events)
                events = <Event *> malloc(count * sizeof(Event))
                event_cap = count
            if most_pieces > piece_cap:
                free(deque)
                free(deque_values)
                deque = <int *> malloc(most_pieces * sizeof(int))
                deque_values = <i64 *> malloc(most_pieces * sizeof(i64))
                piece_cap = most_pieces
            if events == NULL or deque == NULL or deque_values == NULL:
                raise MemoryError()
            # every candidate's events, in time order, one run per candidate; the runs
            # are merged through a heap keyed on (time, candidate) until a domain is ready
            count = 0
            for k in range(first, last):
                offset[k - first] = count
                count += _window_events(
                    &nodes[cand_node[k]], R, &use[j, 0], duration[j], low, hi, k - first,
                    events + count, deque, deque_values,
                )
                offset[k - first + 1] = count
            for d in range(domains):
                sums[d] = 0
            heap_size = 0
            for k in range(last - first):
                fits[k] = events[offset[k]].f  # the value at lo
                sums[cand_dom[first + k]] += fits[k]
                cursor[k] = offset[k] + 1
                if cursor[k] < offset[k + 1]:
                    _heap_push(heap_t, heap_k, &heap_size, events[cursor[k]].t, k)
            start = -1
            for d in range(domains):
                if sums[d] >= members[j]:
                    start = low
            while start < 0 and heap_size > 0:
                fr = heap_t[0]
                touched = 0
                while heap_size > 0 and heap_t[0] == fr:
                    k = heap_k[0]
                    _heap_pop(heap_t, heap_k, &heap_size)
                    d = <int> cand_dom[first + k]
                    sums[d] += events[cursor[k]].f - fits[k]
                    fits[k] = events[cursor[k]].f
                    if events[cursor[k]].f > 0:
                        changed[touched] = d  # a domain that may have become ready
                        touched += 1
                    cursor[k] += 1
                    if cursor[k] < offset[k + 1]:
                        _heap_push(heap_t, heap_k, &heap_size, events[cursor[k]].t, k)
                # ready only once every change at this time is in (one may take back
                # what another gave)
                for m in range(touched):
                    if sums[changed[m]] >= members[j]:
                        start = fr
                        break
            if start < 0:
                continue
            chosen = -1
            best_surplus = NEVER
            for d in range(domains):
                if sums[d] >= members[j]:
                    surplus = sums[d] - members[j]
                    if surplus < best_surplus:
                        best_surplus = surplus
                        chosen = d
            count = 0
            for k in range(first, last):
                if fits[k - first] > 0 and cand_dom[k] == chosen:
                    picks[count].fit = fits[k - first]
                    picks[count].free = _free_at(&nodes[cand_node[k]], R, start)
                    picks[count].node = cand_node[k]
                    count += 1
            qsort(picks, count, sizeof(Pick), _cmp_pick)
            taken = 0
            for k in range(count):
                fit = picks[k].fit
                if fit > members[j] - taken:
                    fit = members[j] - taken
                for r in range(<int> fit):
                    out_nodes[j * most_members + taken] = picks[k].node
                    taken += 1
                if taken == members[j]:
                    break
            # sorted node list, as the Python loop returns it
            qsort(&out_nodes[j * most_members], taken, sizeof(i64), _cmp_i64)
            out_start[j] = start
            floor = start
            for k in range(taken):
                _take(
                    &nodes[out_nodes[j * most_members + k]],
                    R,
                    start,
                    start + duration[j],
                    &use[j, 0],
                )
    finally:
        for n in range(N):
            free(nodes[n].times)
            free(nodes[n].free)
        free(nodes)
        free(events)
        free(deque)
        free(deque_values)
        free(offset)
        free(changed)
        free(cursor)
        free(heap_t)
        free(heap_k)
        free(sums)
        free(fits)
        free(picks)
    return starts, chosen_nodes
