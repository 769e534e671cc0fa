# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The greedy core's random numbers (CPython's Mersenne Twister continued in C) and numpy's
pairwise sum, to the bit: the core makes the Python search's random choices and sums its
penalties in the same order."""

from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import random

from gpuopt.allocation._cbits cimport _bit_length


cdef class Rng:
    """CPython's ``random.Random`` (Mersenne Twister, CPython 3.10-3.13's algorithms for
    ``random``, ``randrange``, ``randint``, ``choice``, ``sample``, ``shuffle`` and
    ``uniform``), continued in C from a Python generator's state: the same draws in the
    same order give the same numbers, so the core's search makes the Python search's
    choices."""

    def __cinit__(self, seed):
        cdef int i
        cdef uint64_t n
        cdef unsigned int key[2]
        if type(seed) is int and 0 <= seed < 2**64:  # CPython's random_seed, in C
            n = seed
            key[0], key[1] = <unsigned int>(n & 0xFFFFFFFFU), <unsigned int>(n >> 32)
            self._by_array(key, 2 if key[1] else 1)
            return
        state = random.Random(seed).getstate()[1]
        for i in range(624):
            self.mt[i] = state[i]
        self.mti = state[624]

    cdef void _by_array(self, unsigned int* key, int length) noexcept:
        """CPython's ``init_by_array`` (``_randommodule.c``), after ``init_genrand``."""
        cdef unsigned int* mt = self.mt
        cdef int i = 1, j = 0, k
        mt[0] = 19650218U
        for k in range(1, 624):
            mt[k] = 1812433253U * (mt[k - 1] ^ (mt[k - 1] >> 30)) + <unsigned int>k
        self.mti = 624
        k = 624 if 624 > length else length
        while k:
            mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525U)) + key[j] + <unsigned int>j
            i += 1
            j += 1
            if i >= 624:
                mt[0] = mt[623]
                i = 1
            if j >= length:
                j = 0
            k -= 1
        k = 623
        while k:
            mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941U)) - <unsigned int>i
            i += 1
            if i >= 624:
                mt[0] = mt[623]
                i = 1
            k -= 1
        mt[0] = 0x80000000U

    cdef unsigned int genrand(self) noexcept:
        cdef unsigned int y
        cdef int kk
        cdef unsigned int* mt = self.mt
        if self.mti >= 624:
            for kk in range(624 - 397):
                y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7FFFFFFFU)
                mt[kk] = mt[kk + 397] ^ (y >> 1) ^ (0x9908B0DFU if y & 1 else 0U)
            for kk in range(624 - 397, 623):
                y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7FFFFFFFU)
                mt[kk] = mt[kk + (397 - 624)] ^ (y >> 1) ^ (0x9908B0DFU if y & 1 else 0U)
            y = (mt[623] & 0x80000000U) | (mt[0] & 0x7FFFFFFFU)
            mt[623] = mt[396] ^ (y >> 1) ^ (0x9908B0DFU if y & 1 else 0U)
            self.mti = 0
        y = mt[self.mti]
        self.mti += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680U
        y ^= (y << 15) & 0xEFC60000U
        y ^= y >> 18
        return y

    cdef double random(self) noexcept:
        cdef unsigned int a = self.genrand() >> 5, b = self.genrand() >> 6
        return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)

    cdef uint64_t getrandbits(self, int k) noexcept:
        cdef uint64_t r
        if k <= 32:
            return self.genrand() >> (32 - k)
        r = self.genrand()  # k <= 64: two words, the low one first
        return r | (<uint64_t>(self.genrand() >> (64 - k)) << 32)

    cdef int64_t below(self, int64_t n) noexcept:
        """``_randbelow_with_getrandbits(n)``, ``n >= 1``."""
        cdef int k = _bit_length(<uint64_t>n)
        cdef uint64_t r = self.getrandbits(k)
        while r >= <uint64_t>n:
            r = self.getrandbits(k)
        return <int64_t>r

    cdef int64_t randrange(self, int64_t start, int64_t stop) noexcept:
        return start + self.below(stop - start)

    cdef int64_t randint(self, int64_t a, int64_t b) noexcept:
        return a + self.below(b + 1 - a)

    cdef void shuffle(self, int64_t* x, int64_t n) noexcept:
        cdef int64_t i = n - 1, j, t
        while i >= 1:
            j = self.below(i + 1)
            t = x[i]
            x[i] = x[j]
            x[j] = t
            i -= 1

    cdef int64_t sample(self, int64_t* population, int64_t n, int64_t k, int64_t* out) except -1:
        """``random.sample(population, k)`` for ``k <= 5`` (the set size is 21 then)."""
        cdef int64_t i, j
        cdef int64_t* pool
        cdef set selected
        if k > 5:
            raise ValueError("Rng.sample: k above 5")
        if n <= 21:
            pool = <int64_t*>malloc(max(1, n) * sizeof(int64_t))
            memcpy(pool, population, n * sizeof(int64_t))
            for i in range(k):
                j = self.below(n - i)
                out[i] = pool[j]
                pool[j] = pool[n - i - 1]
            free(pool)
        else:
            selected = set()
            for i in range(k):
                j = self.below(n)
                while j in selected:
                    j = self.below(n)
                selected.add(j)
                out[i] = population[j]
        return k


cdef double _pairwise(double* a, int64_t n) noexcept:
    """numpy's pairwise sum (``np.add.reduce`` of a contiguous float64 array), to the bit."""
    cdef double r[8]
    cdef double res
    cdef int64_t i, j, n2
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return res
    if n <= 128:
        for j in range(8):
            r[j] = a[j]
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] += a[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a, n2) + _pairwise(a + n2, n - n2)


def pairwise_sum(values):
    """:func:`_pairwise` of a sequence of floats (for the tests)."""
    cdef int64_t n = len(values), i
    cdef double* a = <double*>malloc(max(1, n) * sizeof(double))
    for i in range(n):
        a[i] = values[i]
    out = _pairwise(a, n)
    free(a)
    return out


def rng_draws(seed, int count):
    """The first draws of every kind from :class:`Rng` (for the tests): per round
    ``random()``, ``randrange(3, 4 + 7i)``, ``randint(1, 3)``, ``uniform(0.5, 1.5)``,
    ``range(40)`` with its first ``2 + i % 9`` shuffled, and ``sample`` of 3 from the first
    ``4 + i % 37`` of that list."""
    cdef Rng rng = Rng(seed)
    cdef int64_t x[40]
    cdef int64_t out[3]
    cdef int i, j
    found = []
    for i in range(count):
        found.append(rng.random())
        found.append(rng.randrange(3, 4 + i * 7))
        found.append(rng.randint(1, 3))
        found.append(0.5 + (1.5 - 0.5) * rng.random())
        for j in range(40):
            x[j] = j
        rng.shuffle(x, 2 + i % 9)
        found.append([x[j] for j in range(40)])
        rng.sample(x, 4 + i % 37, 3, out)
        found.append([out[0], out[1], out[2]])
    return found


def rng_state(seed):
    """The generator's state after seeding, as ``random.Random(seed).getstate()[1]`` gives
    it (for the tests)."""
    cdef Rng rng = Rng(seed)
    return (*[rng.mt[i] for i in range(624)], rng.mti)
