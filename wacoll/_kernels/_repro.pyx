# cython: language_level=3
"""Reproducible summation kernels (private; call :mod:`wacoll._kernels.repro`).

Every value is cut at fixed bit positions into 32-bit pieces, each piece is added as
an integer into the bin of its position, and only the top bins (counted from the
largest value seen) are kept. Integer addition is exact, so the accumulators of any
set of values come out bit-identical whatever order and grouping they are combined in.
The algorithm, the layout and its bounds are described in the wrapper module.

One accumulator is a row of int64 words: ``[head, bin k=0 (top), bin k=1, ...]``,
4 words for a float64 value (3 bins), 3 words for a float32 value (2 bins). The head
packs the index of the top bin (bits 0-7), the special-value flags (bits 8-11) and the
number of values deposited (bits 16-63). A row of zeros is the empty sum.

The entry points trust their arguments' shapes and lengths (the wrapper checks them)
and run without the GIL. ``_repro_avx2.pyx`` includes this file to build the same
module for AVX2 processors; all arithmetic is on integers (plus an exact ``ldexp``),
so both builds give the same bits.

The common case runs in C loops (``_repro_simd.h``, with AVX2 intrinsics in the AVX2
build): converting float64 values as finite ones, and combining rows that have the
same top bin where the source brings no new flag, which is one integer addition of
every word, four rows at a time. The general code here (``_split64``, ``_merge3`` and
the like, which give the same bits for the common case too) converts infinities and
NaN again, and merges the groups of four rows where the combining loop stops.
"""
from libc.stdint cimport int64_t, uint32_t, uint64_t, uintptr_t

from wacoll._kernels._types cimport real_t
from libc.math cimport copysign, ldexp
from libc.string cimport memcpy

__all__ = ["F_NOT_NEG_ZERO", "F_POS_INF", "F_NEG_INF", "F_NAN", "COUNT_SHIFT",
           "MAX_DEPOSITS", "to_acc_f64", "to_acc_f32", "add_f64", "add_f32",
           "combine", "from_acc_f64", "from_acc_f32"]

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define wacoll_clz64(x) __builtin_clzll(x)
    #else
    static int wacoll_clz64(unsigned long long x) {
        int n = 0;
        while (!(x & 0x8000000000000000ULL)) { x <<= 1; ++n; }
        return n;
    }
    #endif
    """
    int wacoll_clz64(uint64_t x) noexcept nogil   # x != 0


cdef enum:
    _IDX = 0xFF                 # head bits 0-7: index of the top bin
    _F_NOT_NEG_ZERO = 1 << 8    # a value other than -0.0 was deposited
    _F_POS_INF = 1 << 9
    _F_NEG_INF = 1 << 10
    _F_NAN = 1 << 11
    _FLAGS = 0xFF00
    _COUNT_SHIFT = 16           # head bits 16-63: number of values deposited

F_NOT_NEG_ZERO = _F_NOT_NEG_ZERO
F_POS_INF = _F_POS_INF
F_NEG_INF = _F_NEG_INF
F_NAN = _F_NAN
COUNT_SHIFT = _COUNT_SHIFT
cdef enum:
    _MAX_DEPOSITS = 2147483647
#: Sums of at most this many values are exact in every bin (|bin| < 2**63).
MAX_DEPOSITS = _MAX_DEPOSITS

cdef extern from *:
    """
    #define WACOLL_ONE (((uint64_t)1) << 16)
    #define WACOLL_M32 ((uint64_t)0xFFFFFFFFu)
    #define WACOLL_FRAC64 ((((uint64_t)1) << 52) - 1)
    #define WACOLL_NEGZERO64 (((uint64_t)1) << 63)
    """
    const uint64_t _ONE "WACOLL_ONE"          # one deposit, in head units
    const uint64_t _M32 "WACOLL_M32"
    const uint64_t _FRAC64 "WACOLL_FRAC64"
    const uint64_t _NEGZERO64 "WACOLL_NEGZERO64"

# Bin b of a float64 accumulator holds the bits of weight 2**(32*b - 1138) up to
# 2**(32*b - 1107); of a float32 accumulator, from 2**(32*b - 181). The grids start two
# (one) bins below the smallest subnormal, so every value's top bin is >= 2 (>= 1).
cdef enum:
    _BASE64 = -1138
    _BASE32 = -181


cdef inline int64_t _signed(uint64_t c, uint64_t neg) noexcept nogil:
    """``c`` or ``-c`` (``neg`` is 0 or 1), without a branch."""
    return <int64_t>((c ^ (<uint64_t>0 - neg)) + neg)


cdef inline uint64_t _flags(uint64_t special, uint64_t frac, uint64_t neg, uint64_t negzero) noexcept nogil:
    """The head flags of one value from its bit pattern's parts (all 0 or 1)."""
    cdef uint64_t isnan = special & (frac != 0)
    cdef uint64_t isinf = special & (frac == 0)
    # Shifts, not multiplications: AVX2 has no 64-bit vector multiply.
    return (((negzero ^ 1) << 8) | ((isinf & (neg ^ 1)) << 9) | ((isinf & neg) << 10)
            | (isnan << 11))


cdef inline void _split64(double x, uint64_t* head, int64_t* p) noexcept nogil:
    """The accumulator of the single value ``x``: head and 3 bins, top first."""
    cdef uint64_t u
    memcpy(&u, &x, 8)                 # the bit pattern (no type punning)
    cdef uint64_t neg = u >> 63
    cdef uint64_t e = (u >> 52) & 0x7FF
    cdef uint64_t frac = u & _FRAC64
    cdef uint64_t special = e == 0x7FF
    cdef uint64_t normal = (e != 0) & (special ^ 1)
    # x = m * 2**(s + _BASE64) with s = max(e, 1) + 63; Inf and NaN deposit nothing.
    cdef uint64_t m = (frac | (normal << 52)) & (special - 1)
    cdef uint64_t s = (e | (e == 0)) + 63
    cdef uint64_t hi = ((s + 52) >> 5) & (special - 1)
    cdef uint64_t off = s + 64 - 32 * ((s + 52) >> 5)     # 12..43
    cdef uint64_t v = m << off
    head[0] = _ONE | _flags(special, frac, neg, u == _NEGZERO64) | hi
    p[0] = _signed(m >> (64 - off), neg)
    p[1] = _signed(v >> 32, neg)
    p[2] = _signed(v & _M32, neg)


cdef inline void _split32(float x, uint64_t* head, int64_t* p) noexcept nogil:
    """The accumulator of the single value ``x``: head and 2 bins, top first."""
    cdef uint32_t u32
    memcpy(&u32, &x, 4)
    cdef uint64_t u = u32
    cdef uint64_t neg = u >> 31
    cdef uint64_t e = (u >> 23) & 0xFF
    cdef uint64_t frac = u & 0x7FFFFF
    cdef uint64_t special = e == 0xFF
    cdef uint64_t normal = (e != 0) & (special ^ 1)
    # x = m * 2**(s + _BASE32) with s = max(e, 1) + 31.
    cdef uint64_t m = (frac | (normal << 23)) & (special - 1)
    cdef uint64_t s = (e | (e == 0)) + 31
    cdef uint64_t hi = ((s + 23) >> 5) & (special - 1)
    cdef uint64_t off = s + 32 - 32 * ((s + 23) >> 5)     # 9..40
    cdef uint64_t v = m << off
    head[0] = _ONE | _flags(special, frac, neg, u == (_NEGZERO64 >> 32)) | hi
    p[0] = _signed(v >> 32, neg)
    p[1] = _signed(v & _M32, neg)


cdef inline uint64_t _merge_head(uint64_t a, uint64_t b) noexcept nogil:
    """Heads of two accumulators combined: top index max, flags or, counts added."""
    cdef uint64_t ia = a & _IDX
    cdef uint64_t ib = b & _IDX
    return ((((a >> _COUNT_SHIFT) + (b >> _COUNT_SHIFT)) << _COUNT_SHIFT)
            | ((a | b) & _FLAGS) | (ia if ia > ib else ib))


# Merging rows with different top bins moves one side's bins down by the difference
# d: bin k takes bin k - d, or 0 for k < d. The merges below read that from the bins
# with zeros placed above them, at index k - min(d, bins), without a branch (the top
# bins differ in a data-dependent way, which a branch would often mispredict).

cdef inline void _merge3(int64_t* dst, uint64_t hs, const int64_t* ps) noexcept nogil:
    """``dst`` (a float64 row) += the accumulator with head ``hs`` and bins ``ps``."""
    cdef uint64_t hd = <uint64_t>dst[0]
    cdef uint64_t id_ = hd & _IDX
    cdef uint64_t is_ = hs & _IDX
    cdef uint64_t top = id_ if id_ > is_ else is_
    cdef uint64_t dd = min(top - id_, <uint64_t>3)
    cdef uint64_t ds = min(top - is_, <uint64_t>3)
    cdef int64_t zd[6]
    cdef int64_t zs[6]
    zd[0] = zd[1] = zd[2] = zs[0] = zs[1] = zs[2] = 0
    zd[3] = dst[1]
    zd[4] = dst[2]
    zd[5] = dst[3]
    zs[3] = ps[0]
    zs[4] = ps[1]
    zs[5] = ps[2]
    dst[0] = <int64_t>_merge_head(hd, hs)
    dst[1] = zd[3 - dd] + zs[3 - ds]
    dst[2] = zd[4 - dd] + zs[4 - ds]
    dst[3] = zd[5 - dd] + zs[5 - ds]


cdef inline void _merge2(int64_t* dst, uint64_t hs, const int64_t* ps) noexcept nogil:
    """``dst`` (a float32 row) += the accumulator with head ``hs`` and bins ``ps``."""
    cdef uint64_t hd = <uint64_t>dst[0]
    cdef uint64_t id_ = hd & _IDX
    cdef uint64_t is_ = hs & _IDX
    cdef uint64_t top = id_ if id_ > is_ else is_
    cdef uint64_t dd = min(top - id_, <uint64_t>2)
    cdef uint64_t ds = min(top - is_, <uint64_t>2)
    cdef int64_t zd[4]
    cdef int64_t zs[4]
    zd[0] = zd[1] = zs[0] = zs[1] = 0
    zd[2] = dst[1]
    zd[3] = dst[2]
    zs[2] = ps[0]
    zs[3] = ps[1]
    dst[0] = <int64_t>_merge_head(hd, hs)
    dst[1] = zd[2 - dd] + zs[2 - ds]
    dst[2] = zd[3 - dd] + zs[3 - ds]


cdef extern from "_repro_simd.h" nogil:
    # The common case in bulk (see the header). wacoll_to_acc64 converts every value
    # as a finite one and returns non-zero if some were not. The combine functions
    # return how many rows they added, stopping when one of the next four rows needs
    # more than an addition, or near the end; the loops below add those rows here.
    int wacoll_to_acc64(const double* x, int64_t* acc, Py_ssize_t n) noexcept
    Py_ssize_t wacoll_combine4(const int64_t* src, int64_t* dst, Py_ssize_t n) noexcept
    Py_ssize_t wacoll_combine3(const int64_t* src, int64_t* dst, Py_ssize_t n) noexcept


cdef inline void _split(real_t x, uint64_t* head, int64_t* p) noexcept nogil:
    if real_t is double:
        _split64(x, head, p)
    else:
        _split32(x, head, p)


cdef inline void _merge(int64_t* dst, uint64_t hs, const int64_t* ps,
                        Py_ssize_t w) noexcept nogil:
    if w == 4:
        _merge3(dst, hs, ps)
    else:
        _merge2(dst, hs, ps)


cdef enum:
    _TO_ACC_BLOCK = 4096


cdef inline bint _special64(double x) noexcept nogil:
    """True for an infinity or a NaN."""
    cdef uint64_t u
    memcpy(&u, &x, 8)
    return ((u >> 52) & 0x7FF) == 0x7FF


cdef void _to_acc(const real_t* x, int64_t* acc, Py_ssize_t n) noexcept nogil:
    """Rows ``acc`` = the accumulators of ``x[0:n]`` alone."""
    cdef Py_ssize_t w = 4 if real_t is double else 3
    cdef Py_ssize_t i = 0, j, end
    cdef uint64_t head
    if real_t is float:
        for i in range(n):
            _split(x[i], &head, &acc[w * i + 1])
            acc[w * i] = <int64_t>head
    else:
        # In blocks, so that a block with an infinity or a NaN is still in cache when
        # those values' rows are written again here.
        while i < n:
            end = min(i + <Py_ssize_t>_TO_ACC_BLOCK, n)
            if wacoll_to_acc64(x + i, acc + w * i, end - i):
                for j in range(i, end):
                    if _special64(x[j]):
                        _split(x[j], &head, &acc[w * j + 1])
                        acc[w * j] = <int64_t>head
            i = end


cdef void _combine(const int64_t* src, int64_t* dst, Py_ssize_t n,
                   Py_ssize_t w) noexcept nogil:
    """Rows ``dst`` (+)= rows ``src`` (``w`` words a row)."""
    cdef Py_ssize_t i = 0, j, end
    while i < n:
        # Rows with the same top bin and no new flag in bulk; here the group of four
        # with a row that is not (different top bins, a new special-value flag), or
        # the last few rows.
        if w == 4:
            i += wacoll_combine4(src + w * i, dst + w * i, n - i)
        else:
            i += wacoll_combine3(src + w * i, dst + w * i, n - i)
        end = min(i + 4, n)
        for j in range(i, end):
            _merge(&dst[w * j], <uint64_t>src[w * j], &src[w * j + 1], w)
        i = end


# add_f64 and add_f32 convert a block of values into a small buffer (in cache), then
# combine it into the accumulators: the same bits as a whole to_acc, then combine.
cdef enum:
    _BLOCK = 256


cdef void _add(const real_t* x, int64_t* acc, Py_ssize_t n) noexcept nogil:
    """Rows ``acc`` (+)= ``x[0:n]``."""
    cdef Py_ssize_t w = 4 if real_t is double else 3
    cdef int64_t buffer[4 * _BLOCK + 3]
    # The buffer placed as acc is relative to 32-byte boundaries, for the vector loops.
    cdef int64_t* tmp = buffer + ((<uintptr_t>acc - <uintptr_t>buffer) // 8) % 4
    cdef Py_ssize_t start = 0, m
    while start < n:
        m = min(n - start, <Py_ssize_t>_BLOCK)
        _to_acc(x + start, tmp, m)
        _combine(tmp, acc + w * start, m, w)
        start += m


def to_acc_f64(const double[::1] x, int64_t[:, ::1] acc):
    """acc[i] = the accumulator of x[i]; ``acc`` has shape (len(x), 4)."""
    if x.shape[0]:
        with nogil:
            _to_acc(&x[0], &acc[0, 0], x.shape[0])


def to_acc_f32(const float[::1] x, int64_t[:, ::1] acc):
    """acc[i] = the accumulator of x[i]; ``acc`` has shape (len(x), 3)."""
    if x.shape[0]:
        with nogil:
            _to_acc(&x[0], &acc[0, 0], x.shape[0])


def add_f64(const double[::1] x, int64_t[:, ::1] acc):
    """acc[i] (+)= x[i] for float64 rows (shape (len(x), 4))."""
    if x.shape[0]:
        with nogil:
            _add(&x[0], &acc[0, 0], x.shape[0])


def add_f32(const float[::1] x, int64_t[:, ::1] acc):
    """acc[i] (+)= x[i] for float32 rows (shape (len(x), 3))."""
    if x.shape[0]:
        with nogil:
            _add(&x[0], &acc[0, 0], x.shape[0])


def combine(const int64_t[:, ::1] src, int64_t[:, ::1] dst):
    """dst[i] (+)= src[i]; rows of 4 (float64) or 3 (float32) words, equal shapes."""
    if dst.shape[0]:
        with nogil:
            _combine(&src[0, 0], &dst[0, 0], dst.shape[0], dst.shape[1])


cdef inline double _round(uint64_t hi, uint64_t lo, int64_t base, int prec,
                          int64_t emin) noexcept nogil:
    """(hi * 2**64 + lo) * 2**base rounded to ``prec`` bits, to nearest, ties to even,
    with no bit below 2**emin (the smallest subnormal); exact in a double."""
    cdef int64_t p, r
    cdef uint64_t q, guard, sticky
    if hi == 0 and lo == 0:
        return 0.0
    p = (127 - wacoll_clz64(hi)) if hi else (63 - wacoll_clz64(lo))
    r = p - (prec - 1)
    if emin - base > r:
        r = emin - base
    if r <= 0:                      # fits: p < prec <= 53, so hi == 0
        return ldexp(<double>lo, <int>base)
    if r > 128:                     # below half the smallest subnormal
        return 0.0
    # q = value >> r; guard = bit r-1; sticky = any bit below r-1.
    if r >= 64:
        q = hi >> (r - 64) if r < 128 else 0
        if r - 1 >= 64:
            guard = (hi >> (r - 65)) & 1
            sticky = (lo != 0) | ((hi & ((<uint64_t>1 << (r - 65)) - 1)) != 0)
        else:                       # r == 64
            guard = lo >> 63
            sticky = (lo << 1) != 0
    else:
        q = (lo >> r) | (hi << (64 - r))
        guard = (lo >> (r - 1)) & 1
        sticky = (lo & ((<uint64_t>1 << (r - 1)) - 1)) != 0
    q += guard & (sticky | (q & 1))
    return ldexp(<double>q, <int>(r + base))


cdef extern from *:
    """
    #include <math.h>
    static double wacoll_nan(void) { return (double)NAN; }
    static double wacoll_inf(void) { return (double)INFINITY; }
    """
    double _nan "wacoll_nan"() noexcept nogil
    double _inf "wacoll_inf"() noexcept nogil


cdef inline double _value(const int64_t* row, int nbins, int prec, int64_t grid,
                          int64_t emin) noexcept nogil:
    """The sum held by one accumulator (``nbins`` bins), correctly rounded to ``prec``
    bits; NaN, an infinity or a signed zero where the flags say so."""
    cdef uint64_t head = <uint64_t>row[0]
    cdef uint64_t flags = head & _FLAGS
    cdef int64_t top = <int64_t>(head & _IDX)
    cdef int64_t c, low_word, mid_word
    cdef uint64_t hi, lo, neg
    cdef double r
    if flags & (_F_NAN | _F_POS_INF | _F_NEG_INF):
        if (flags & _F_NAN) or ((flags & _F_POS_INF) and (flags & _F_NEG_INF)):
            return _nan()
        return _inf() if flags & _F_POS_INF else -_inf()
    # The bins as one two's complement integer hi * 2**64 + lo: carries move up one
    # bin at a time (arithmetic shifts divide by 2**32 rounding down).
    c = row[nbins]
    low_word = c & _M32
    c = row[nbins - 1] + (c >> 32)
    mid_word = c & _M32
    if nbins == 3:
        c = row[1] + (c >> 32)
    else:
        c = c >> 32
    hi = <uint64_t>c
    lo = (<uint64_t>mid_word << 32) | <uint64_t>low_word
    neg = hi >> 63
    if neg:
        lo = ~lo + 1
        hi = ~hi + (lo == 0)
    r = _round(hi, lo, grid + 32 * (top - (nbins - 1)), prec, emin)
    if r == 0.0:                    # an exact zero: -0.0 only if every value was -0.0
        if (head >> _COUNT_SHIFT) != 0 and not (flags & _F_NOT_NEG_ZERO):
            return copysign(0.0, -1.0)
        return 0.0
    return -r if neg else r


cdef inline Py_ssize_t _first_overfull(const int64_t[:, ::1] acc) noexcept nogil:
    """The first row holding more than MAX_DEPOSITS values, or -1."""
    cdef Py_ssize_t i
    for i in range(acc.shape[0]):
        if (<uint64_t>acc[i, 0] >> _COUNT_SHIFT) > <uint64_t>_MAX_DEPOSITS:
            return i
    return -1


def from_acc_f64(const int64_t[:, ::1] acc, double[::1] out):
    """out[i] = the rounded sum of acc[i] (rows of 4). Returns -1, or the first row
    holding more than MAX_DEPOSITS values (then nothing is written)."""
    cdef Py_ssize_t i, bad, n = out.shape[0]
    with nogil:
        bad = _first_overfull(acc)
        if bad < 0:
            for i in range(n):
                out[i] = _value(&acc[i, 0], 3, 53, _BASE64, -1074)
    return bad


def from_acc_f32(const int64_t[:, ::1] acc, float[::1] out):
    """out[i] = the rounded sum of acc[i] (rows of 3) as float32; see from_acc_f64."""
    cdef Py_ssize_t i, bad, n = out.shape[0]
    with nogil:
        bad = _first_overfull(acc)
        if bad < 0:
            for i in range(n):
                # Rounded to 24 bits already: the conversion is exact (or overflows).
                out[i] = <float>_value(&acc[i, 0], 2, 24, _BASE32, -149)
    return bad
