"""The construction kernel for numba (``@njit``), on 64-bit words (see compare.py)."""

import numpy as np
from numba import njit


@njit(cache=False)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=False)
def _ctz(x):
    n = 0
    while (x & np.uint64(1)) == np.uint64(0):
        x >>= np.uint64(1)
        n += 1
    return n


@njit(cache=False)
def _ones(n):
    if n >= 64:
        return np.uint64(0xFFFFFFFFFFFFFFFF)
    return (np.uint64(1) << np.uint64(n)) - np.uint64(1)


@njit(cache=False)
def _free_runs(free, size):
    runs = free
    span = 1
    while span < size:
        shift = span if span < size - span else size - span
        runs &= runs >> np.uint64(shift)
        span += shift
    return runs


@njit(cache=False)
def construct(T, G, busy, room, sizes, arrivals, lasts, durs, legals, wl, wr, out):
    full = _ones(G)
    cands = np.empty(6, np.int64)
    zero = np.uint64(0)
    for j in range(sizes.shape[0]):
        size = sizes[j]
        start = arrivals[j]
        last = lasts[j]
        dur = durs[j]
        found = -1
        free = zero
        firsts = zero
        while start <= last:
            end = min(T, start + dur)
            short = -1
            s = end - 1
            while s >= start:
                if room[s] < size:
                    short = s
                    break
                s -= 1
            if short >= 0:
                start = short + 1
                continue
            acc = zero
            for s in range(start, end):
                acc |= busy[s]
            free = ~acc & full
            firsts = _free_runs(free, size) & legals[j]
            if firsts != zero:
                found = start
                break
            start += 1
        if found < 0:
            out[j] = -1
            continue
        end = min(T, found + dur)
        if firsts & (firsts - np.uint64(1)) == zero:
            first = 63
            while (firsts >> np.uint64(first)) & np.uint64(1) == zero:
                first -= 1
        else:
            b = full & ~free
            left = firsts & ((b << np.uint64(1)) | wl[size])
            right = firsts & (
                (b >> np.uint64(size)) | wr[size] | (np.uint64(1) << np.uint64(G - size))
            )
            ex = left & right
            pool = ex if ex != zero else (left | right)
            if pool == zero:
                pool = firsts & (~firsts + np.uint64(1))
            n = 0
            while pool != zero and n < 6:
                cands[n] = _ctz(pool)
                n += 1
                pool &= pool - np.uint64(1)
            first = -1
            bt = -1
            bf = 0
            for k in range(n):
                f = cands[k]
                m = _ones(size) << np.uint64(f)
                t = size if found == 0 else _popcount(busy[found - 1] & m)
                t += size if end >= T else _popcount(busy[end] & m)
                if t > bt or (t == bt and f < bf):
                    bt = t
                    bf = f
                    first = f
        m = _ones(size) << np.uint64(first)
        for s in range(found, end):
            busy[s] |= m
            room[s] -= size
        out[j] = found * 1000 + first
