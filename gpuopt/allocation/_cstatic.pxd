# cython: language_level=3
from libc.stdint cimport int64_t, uint64_t


cdef class Budget:
    cdef public int64_t work, rounds
    cdef public double limit, deadline, target
    cpdef bint spent(self)


cdef class Counts:
    cdef int R, T
    cdef int64_t* c  # c[r * T + t]: GPUs held by realtime service r at step t


cdef Counts _zero_counts(int R, int T)


cdef class Static:
    cdef public object index, batch
    cdef public Counts full_counts
    cdef int T, G, nb, R, n_rt_orders
    cdef double free_penalty
    cdef double* price
    cdef int64_t* demand
    cdef int64_t* swap
    cdef int64_t* initial
    cdef int64_t* lower_total  # the services' floors summed per step
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
    # _curves' memo: a direct-mapped table of capacities (T steps each) and their curves
    cdef int64_t* memo_capacity
    cdef uint64_t* memo_key
    cdef char* memo_filled
    cdef list memo_curves
    cdef int64_t* _ranks(self, int kind)
    cdef void _realtime_tables(self, index)
    cdef void _realtime_orders(self, index)


cdef double _penalty(Static st, Counts counts)
cdef Counts _realtime_curves(Static st, int64_t* order, int64_t* capacity)
cdef Counts _curves(Static st, int64_t* capacity)
ctypedef bint (*_Before)(void* context, int64_t a, int64_t b) noexcept
cdef void _merge_sort(int64_t* items, int64_t n, _Before before, void* context) noexcept
cdef void _sort(Static st, int kind, int64_t* items, int64_t n) noexcept
