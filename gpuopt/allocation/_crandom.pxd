# cython: language_level=3
from libc.stdint cimport int64_t, uint64_t


cdef class Rng:
    cdef unsigned int mt[624]
    cdef int mti
    cdef unsigned int genrand(self) noexcept
    cdef void _by_array(self, unsigned int* key, int length) noexcept
    cdef double random(self) noexcept
    cdef uint64_t getrandbits(self, int k) noexcept
    cdef int64_t below(self, int64_t n) noexcept
    cdef int64_t randrange(self, int64_t start, int64_t stop) noexcept
    cdef int64_t randint(self, int64_t a, int64_t b) noexcept
    cdef void shuffle(self, int64_t* x, int64_t n) noexcept
    cdef int64_t sample(self, int64_t* population, int64_t n, int64_t k, int64_t* out) except -1


cdef double _pairwise(double* a, int64_t n) noexcept
