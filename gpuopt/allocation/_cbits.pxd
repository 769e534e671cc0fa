# cython: language_level=3
"""Bit helpers of the greedy's compiled core (inline, shared by its modules): a step's
occupancy is one 64-bit word, bit ``g`` set = GPU ``g`` busy."""

from libc.stdint cimport int64_t, uint64_t


cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil
    int __builtin_clzll(unsigned long long) nogil
    int __builtin_popcountll(unsigned long long) nogil


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


cdef inline int _lowest(uint64_t mask, int count, int* out) noexcept nogil:
    """``_construction._lowest_bits``: the ``count`` lowest set bits, into ``out``."""
    cdef int n = 0
    while mask and n < count:
        out[n] = __builtin_ctzll(mask)
        n += 1
        mask &= mask - 1
    return n


cdef inline int64_t _min(int64_t a, int64_t b) noexcept nogil:
    return a if a < b else b


cdef inline int _three(double x, double y) noexcept nogil:
    return -1 if x < y else (1 if x > y else 0)
