# cython: language_level=3
"""The core board's fields and the operations every placement uses, inline (each module
that places tasks compiles them in)."""

from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport malloc

from gpuopt.allocation._cbits cimport _free_runs, _ones
from gpuopt.allocation._cstatic cimport Budget, Counts, Static


cdef class CoreBoard:
    cdef Static st
    cdef int T, nb
    cdef size_t size  # bytes of the one block that holds the arrays
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
    cdef public Counts counts
    cdef public object realtime_orders
    cdef public Budget budget
    cpdef CoreBoard copy(self)


cdef void _set_realtime(CoreBoard board, Counts counts)


cdef inline void _link(CoreBoard self, int64_t b, int64_t start, int64_t first) noexcept:
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

cdef inline void _unlink(CoreBoard self, int64_t b) noexcept:
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
cdef inline int64_t end_of(CoreBoard self, int64_t b, int64_t start) noexcept:
    """``Board.end_of`` (plain)."""
    cdef int64_t end
    if self.st.running[b]:
        end = self.st.remaining[b]
    else:
        end = start + self.st.duration[b]
    return self.T if end > self.T else end

cdef inline double block_value(CoreBoard self, int64_t b, int64_t start, int64_t end) noexcept:
    """``Board.block_value`` at rate 1.0 (plain)."""
    cdef double weight = self.st.cum[end] - self.st.cum[start]
    return self.st.priority[b] * <double>self.st.size[b] * 1.0 * weight

cdef inline double placed_value(CoreBoard self, int64_t b) noexcept:
    """``_search._placed_value``."""
    cdef int64_t start = self.start_of[b]
    return block_value(self, b, start, end_of(self, b, start))

cdef inline uint64_t free_mask(CoreBoard self, int64_t start, int64_t end) noexcept:
    cdef uint64_t acc = 0
    cdef int64_t s
    for s in range(start, end):
        acc |= self.busy[s]
    return ~acc & self.st.full

cdef inline uint64_t free_firsts(CoreBoard self, int size, int64_t start, int64_t end, uint64_t legal,
                                 uint64_t* free_out) noexcept:
    """``Board.free_firsts``: legal first GPUs of a free block over ``[start, end)``."""
    cdef uint64_t free_ = free_mask(self, start, end)
    free_out[0] = free_
    return _free_runs(free_, size) & legal

cdef inline int64_t last_short_step(CoreBoard self, int64_t size, int64_t start, int64_t end) noexcept:
    cdef int64_t s = end - 1
    while s >= start:
        if self.room[s] < size:
            return s
        s -= 1
    return -1

cdef inline void place(CoreBoard self, int64_t b, int64_t size, int64_t first, int64_t start,
                int64_t end) noexcept:
    """``Board.place``."""
    cdef uint64_t mask = _ones(<int>size) << first
    cdef int64_t s
    for s in range(start, end):
        self.busy[s] |= mask
        self.room[s] -= size
    _link(self, b, start, first)
    self.value += block_value(self, b, start, end)

cdef inline void remove(CoreBoard self, int64_t b) noexcept:
    """``Board.remove``."""
    cdef int64_t start = self.start_of[b], first = self.first_of[b]
    cdef int64_t size = self.st.size[b]
    cdef int64_t end = end_of(self, b, start)
    cdef uint64_t mask = ~(_ones(<int>size) << first)
    cdef int64_t s
    _unlink(self, b)
    for s in range(start, end):
        self.busy[s] &= mask
        self.room[s] += size
    self.value -= block_value(self, b, start, end)


cdef inline int64_t* capacity(CoreBoard self) noexcept:
    """``np.array(board.room) + board.reserved``, a new C array (the caller frees it)."""
    cdef int64_t* out = <int64_t*>malloc(self.T * sizeof(int64_t))
    cdef int s
    for s in range(self.T):
        out[s] = self.room[s] + self.reserved[s]
    return out
