# cython: boundscheck=False, wraparound=False, cdivision=True, language_level=3
"""The construction kernel in typed Cython, on 64-bit words (see compare.py)."""
from libc.stdint cimport uint64_t, int64_t
cdef int CANDIDATES = 6
cdef inline uint64_t ones(int n) nogil:
    return <uint64_t>0xFFFFFFFFFFFFFFFF if n >= 64 else ((<uint64_t>1) << n) - 1
cdef inline uint64_t free_runs(uint64_t free, int size) nogil:
    cdef uint64_t runs = free
    cdef int span = 1, shift
    while span < size:
        shift = span if span < size - span else size - span
        runs &= runs >> shift
        span += shift
    return runs
cdef inline int lowbit(uint64_t m) nogil:
    return __builtin_ctzll(m)
cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil
    int __builtin_popcountll(unsigned long long) nogil
    int __builtin_clzll(unsigned long long) nogil
def construct(int T, int G, uint64_t[::1] busy, int64_t[::1] room, int64_t[::1] sizes, int64_t[::1] arrivals,
              int64_t[::1] lasts, int64_t[::1] durs, uint64_t[::1] legals, uint64_t[::1] wl, uint64_t[::1] wr, int64_t[::1] out):
    cdef uint64_t full = ones(G), acc, free = 0, firsts = 0, b, left, right, ex, pool, m
    cdef int j, size, start, last, dur, found, end, s, short, first, t, bt, bf, f, n, k
    cdef int cands[6]
    with nogil:
        for j in range(sizes.shape[0]):
            size = sizes[j]; start = arrivals[j]; last = lasts[j]; dur = durs[j]
            found = -1
            while start <= last:
                end = T if start + dur > T else start + dur
                short = -1
                s = end - 1
                while s >= start:
                    if room[s] < size:
                        short = s; break
                    s -= 1
                if short >= 0:
                    start = short + 1; continue
                acc = 0
                for s in range(start, end): acc |= busy[s]
                free = ~acc & full
                firsts = free_runs(free, size) & legals[j]
                if firsts:
                    found = start; break
                start += 1
            if found < 0:
                out[j] = -1; continue
            end = T if found + dur > T else found + dur
            if firsts & (firsts - 1) == 0:
                first = 63 - __builtin_clzll(firsts)
            else:
                b = full & ~free
                left = firsts & ((b << 1) | wl[size])
                right = firsts & ((b >> size) | wr[size] | ((<uint64_t>1) << (G - size) if G - size < 64 else 0))
                ex = left & right
                pool = ex if ex else (left | right)
                if pool == 0:
                    pool = firsts & (~firsts + 1)
                n = 0
                while pool and n < CANDIDATES:
                    cands[n] = __builtin_ctzll(pool); n += 1; pool &= pool - 1
                first = -1; bt = -1; bf = 0
                for k in range(n):
                    f = cands[k]
                    m = ones(size) << f
                    t = size if found == 0 else __builtin_popcountll(busy[found - 1] & m)
                    t += size if end >= T else __builtin_popcountll(busy[end] & m)
                    if t > bt or (t == bt and -f > -bf):
                        bt = t; bf = f; first = f
            m = ones(size) << first
            for s in range(found, end):
                busy[s] |= m; room[s] -= size
            out[j] = found * 1000 + first
