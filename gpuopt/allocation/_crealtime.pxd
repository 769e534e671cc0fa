# cython: language_level=3
"""The realtime routines on raw arrays that the core's tables (``_cstatic``) share with
:class:`_crealtime.Realtime`."""

from libc.stdint cimport int64_t


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
) noexcept nogil

cdef double _penalty_of(
    const double* price, const int64_t* demand, const int64_t* counts, int64_t n
) noexcept nogil

cdef bint _fits(const int64_t* counts, int R, int T, const int64_t* capacity,
               double* total) noexcept nogil

cdef bint _better(double penalty, double total, double best_penalty,
                  double best_total) noexcept nogil
