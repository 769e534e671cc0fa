# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The greedy core's board (``_board.Board`` for a plain problem of at most 64 GPUs, with C
arrays), the base every plan starts from, and the grid with the realtime services bound
to GPUs. The operations the plans use on every placement are inline functions of
``_cboard.pxd``."""

from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import numpy as np

from gpuopt.allocation._cbits cimport __builtin_ctzll, __builtin_popcountll, _bit_length
from gpuopt.allocation._cstatic cimport (
    Budget,
    Counts,
    Static,
    _curves,
    _penalty,
    _realtime_curves,
    _zero_counts,
)


cdef class CoreBoard:
    """``_board.Board`` for a plain problem of at most 64 GPUs, with C arrays."""

    def __cinit__(self, Static st):
        self.st = st
        self.T = st.T
        self.nb = st.nb
        cdef int64_t nb = max(1, st.nb), T = st.T
        # one block for every array (a copy is one memcpy): the 8-byte ones, then placed
        self.size = (4 * T + 4 * nb) * 8 + nb
        cdef char* block = <char*>malloc(self.size)
        self.busy = <uint64_t*>block
        self.room = <int64_t*>(block + 8 * T)
        self.over = <int64_t*>(block + 16 * T)
        self.reserved = <int64_t*>(block + 24 * T)
        self.start_of = <int64_t*>(block + 32 * T)
        self.first_of = self.start_of + nb
        self.nxt = self.start_of + 2 * nb
        self.prv = self.start_of + 3 * nb
        self.placed = block + 32 * T + 32 * nb
        self.head = self.tail = -1
        self.count = 0

    def __dealloc__(self):
        free(self.busy)

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
            _link(out, b, start, first)
        out.value = board.value
        out.penalty = board.penalty
        out.free_penalty = board.free_penalty
        out.trade_budget = board.trade_budget
        out.counts = Counts.of(board.counts)
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
        board.counts = self.counts.array()
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
        memcpy(other.busy, self.busy, self.size)
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

    def has(self, int b):
        return bool(self.placed[b])

    # ------------------------------------------------------------ the exact realtime curves
    def capacity(self):
        """``np.array(board.room) + board.reserved``: the GPUs each step leaves to realtime."""
        cdef int64_t* cap = capacity(self)
        out = np.array([cap[s] for s in range(self.T)], dtype=np.int64)
        free(cap)
        return out

    def penalty_of(self, counts):
        """``Board.realtime_penalty(counts)`` of a numpy ``(R, T)`` array."""
        return _penalty(self.st, Counts.of(counts))

    def with_curves(self, counts):
        """A copy holding the realtime curves ``counts`` (``Board.set_realtime``)."""
        cdef CoreBoard other = self.copy()
        _set_realtime(other, Counts.of(counts))
        return other


cdef void _set_realtime(CoreBoard board, Counts counts):
    """``Board.set_realtime``: reserve ``counts[r, t]`` GPUs for realtime task ``r``."""
    cdef Static st = board.st
    cdef int R = st.R, T = st.T, r, t
    cdef int64_t total, above
    cdef int64_t* c = counts.c
    for t in range(T):
        total = 0
        for r in range(R):
            total += c[r * T + t]
        board.room[t] -= total - board.reserved[t]
        board.reserved[t] = total
    board.counts = counts
    board.penalty = _penalty(st, counts) if R * T else 0.0
    if R * T:
        for t in range(T):
            total = 0
            for r in range(R):
                above = c[r * T + t] - st.demand[r * T + t]
                total += above if above > 0 else 0
            board.over[t] = total

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
    cdef int64_t* c
    for step in range(T * G):
        cell[step] = -1
    b = board.head
    task_idx = st.index.batch.task_idx
    while b >= 0:  # the batch blocks
        start = board.start_of[b]
        end = end_of(board, b, start)
        for step in range(start, end):
            for g in range(board.first_of[b], board.first_of[b] + st.size[b]):
                cell[step * G + g] = task_idx[b]
        b = board.nxt[b]
    if R:
        c = board.counts.c
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
                want = c[r * T + step]
                keep = held[r] & available
                if __builtin_popcountll(keep) > want:
                    keep = _longest_free(keep, want, step, free_of, T)
                held[r] = keep
                taken |= keep
            spare = available & ~taken
            for k in range(R):
                r = st.rt_orders[k]
                missing = c[r * T + step] - __builtin_popcountll(held[r])
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

def base_board(Static self, Budget budget):
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
    board.counts = _zero_counts(self.R, T)
    board.realtime_orders = self.realtime_orders
    board.budget = budget
    for b in range(self.nb):  # Board.pin_running, and running_count
        if self.running[b]:
            end = end_of(board, b, 0)
            place(board, b, self.size[b], self.first_gpu[b], 0, end)
            for s in range(end):
                beside[s] -= self.size[b]
    counts = _curves(self, beside)
    if counts is None:  # (V3 makes the floor fit beside the running tasks)
        counts = _realtime_curves(self, self.rt_orders, beside)
    free(beside)
    _set_realtime(board, counts)
    self.full_counts = counts
    return board

def grid_of(Static self, CoreBoard board):
    """``Board.bind_realtime`` (by priority) then ``Board.grid``: the grid of task ids."""
    return _grid(self, board)
