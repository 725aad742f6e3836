/* The hot loops of the reproducible SUM kernels (private; included by _repro.pyx).

   The functions here run over the common case only, and leave the rest to the
   caller (the Cython code in _repro.pyx), whose general code gives the same bits for
   any row. The combine functions return how many rows k they added (rows 0 to
   k - 1): they stop when one of the next four rows is an uncommon one, or fewer than
   four or five rows are left; the caller adds the next four rows (or the last few)
   and calls again past them. wacoll_to_acc64 converts every value as a finite one
   and tells whether some were not, and the caller converts those again.

   Compiled twice, as _repro.pyx is: portable (plain C) and with -mavx2, where
   __AVX2__ selects the AVX2 versions. All arithmetic is on integers, so both give the
   same bits; the tests compare them. Python.h comes first (Cython includes it).

   Layout, as in _repro.pyx: a float64 accumulator is 4 int64 words [head, bin 0 (top),
   bin 1, bin 2], a float32 one 3 words [head, bin 0, bin 1]; the head packs the top
   bin's index (bits 0-7), special-value flags (bits 8-11; bits 8-15 are tested) and
   a count (bits 16-63).
*/
#ifndef WACOLL_REPRO_SIMD_H
#define WACOLL_REPRO_SIMD_H

#include <stdint.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#define WACOLL_HEAD_IDX ((uint64_t)0xFF)
#define WACOLL_HEAD_FLAGS ((uint64_t)0xFF00)
#define WACOLL_HEAD_COUNTS (~(uint64_t)0xFFFF)     /* the count bits of a head */
#define WACOLL_EXP64 ((uint64_t)0x7FF << 52)
#define WACOLL_FRAC64_MASK ((((uint64_t)1) << 52) - 1)
#define WACOLL_LOW32 ((uint64_t)0xFFFFFFFFu)
/* The head of one finite value, before its index and the -0.0 rule: one deposit and
   the flag "not -0.0". */
#define WACOLL_HEAD_ONE_VALUE ((((uint64_t)1) << 16) | 0x100)


/* ---------------------------------------------------------------- combine

   Adding accumulator row s into row d is, in the common case, one integer addition
   of every word: when both have the same top bin index and s brings no flag that d
   lacks, the merged head is d's head with the counts added, which is
   d + (s & WACOLL_HEAD_COUNTS), and each bin is d + s. The test for that case,
   ((s ^ d) & WACOLL_HEAD_IDX) | (s & ~d & WACOLL_HEAD_FLAGS) == 0, is written as
   (s ^ d) & (s | WACOLL_HEAD_IDX) & WACOLL_HEAD_LOW == 0 (in the flag bits,
   (s ^ d) & s is s & ~d). The float64 vector code applies it to the four heads of a
   group gathered in one vector, the float32 code to whole rows, masking all but the
   heads' low 16 bits once per group. Words are added as unsigned integers (two's
   complement wrap-around, as the general code's int64 additions). */

#define WACOLL_HEAD_LOW ((uint64_t)0xFFFF)

static inline uint64_t wacoll_row_conflict(uint64_t s, uint64_t d)
{
    return (s ^ d) & (s | WACOLL_HEAD_IDX) & WACOLL_HEAD_LOW;
}

#if defined(__AVX2__)

/* Non-zero in a row's head bits 0-15 (the caller masks the rest) where adding row a
   into row b needs the general code; kidx has WACOLL_HEAD_IDX at the heads. */
#define WACOLL_CONFLICT(a, b, kidx) \
    _mm256_and_si256(_mm256_xor_si256(a, b), _mm256_or_si256(a, kidx))

/* Non-zero in head bits 0-15 where adding heads s into heads d (four heads in a
   vector) needs the general code. */
static inline __m256i wacoll_conflict4(__m256i s, __m256i d)
{
    return _mm256_and_si256(_mm256_xor_si256(s, d),
                            _mm256_or_si256(s, _mm256_set1_epi64x((int64_t)WACOLL_HEAD_IDX)));
}

/* Rows of 4 words (float64) at 16 bytes past a multiple of 32, as numpy places large
   arrays: a row-sized vector would cross a cache line every other row, which costs as
   much as a third more time. The vectors here are the aligned 32 bytes from word 2 of
   a row to word 1 of the next (the head at word 2), and the first half of the first
   row and the second half of the last are added on their own. */
static inline Py_ssize_t wacoll_combine4_half(const int64_t *src, int64_t *dst,
                                              Py_ssize_t n)
{
    const __m256i klow = _mm256_set1_epi64x((int64_t)WACOLL_HEAD_LOW);
    const __m256i kadd = _mm256_setr_epi64x(-1, -1, (int64_t)WACOLL_HEAD_COUNTS, -1);
    const __m128i kadd_head = _mm_set_epi64x(-1, (int64_t)WACOLL_HEAD_COUNTS);
    Py_ssize_t i;
    if (n == 0 || wacoll_row_conflict((uint64_t)src[0], (uint64_t)dst[0]))
        return 0;
    _mm_storeu_si128((__m128i *)dst,
                     _mm_add_epi64(_mm_loadu_si128((const __m128i *)dst),
                                   _mm_and_si128(_mm_loadu_si128((const __m128i *)src),
                                                 kadd_head)));
    /* Here row i is known to be common and its first half is added; the vectors run
       from its second half to the first half of row i + 4. */
    for (i = 0; i + 5 <= n; i += 4) {
        const __m256i *s = (const __m256i *)(src + 4 * i + 2);
        __m256i *d = (__m256i *)(dst + 4 * i + 2);
        __m256i a0 = _mm256_loadu_si256(s), a1 = _mm256_loadu_si256(s + 1);
        __m256i a2 = _mm256_loadu_si256(s + 2), a3 = _mm256_loadu_si256(s + 3);
        __m256i b0 = _mm256_loadu_si256(d), b1 = _mm256_loadu_si256(d + 1);
        __m256i b2 = _mm256_loadu_si256(d + 2), b3 = _mm256_loadu_si256(d + 3);
        /* The heads of rows i + 1 to i + 4 (word 2 of each vector) in one vector. */
        __m256i sh = _mm256_permute2x128_si256(_mm256_unpacklo_epi64(a0, a1),
                                               _mm256_unpacklo_epi64(a2, a3), 0x31);
        __m256i dh = _mm256_permute2x128_si256(_mm256_unpacklo_epi64(b0, b1),
                                               _mm256_unpacklo_epi64(b2, b3), 0x31);
        if (!_mm256_testz_si256(wacoll_conflict4(sh, dh), klow))
            break;
        _mm256_storeu_si256(d, _mm256_add_epi64(b0, _mm256_and_si256(a0, kadd)));
        _mm256_storeu_si256(d + 1, _mm256_add_epi64(b1, _mm256_and_si256(a1, kadd)));
        _mm256_storeu_si256(d + 2, _mm256_add_epi64(b2, _mm256_and_si256(a2, kadd)));
        _mm256_storeu_si256(d + 3, _mm256_add_epi64(b3, _mm256_and_si256(a3, kadd)));
    }
    _mm_storeu_si128((__m128i *)(dst + 4 * i + 2),
                     _mm_add_epi64(_mm_loadu_si128((const __m128i *)(dst + 4 * i + 2)),
                                   _mm_loadu_si128((const __m128i *)(src + 4 * i + 2))));
    return i + 1;
}

/* Rows dst[0:k] += src[0:k] of 4 words (float64), for the k returned. */
static inline Py_ssize_t wacoll_combine4(const int64_t *src, int64_t *dst, Py_ssize_t n)
{
    if (((uintptr_t)src & 31) == 16 && ((uintptr_t)dst & 31) == 16)
        return wacoll_combine4_half(src, dst, n);
    const __m256i klow = _mm256_set1_epi64x((int64_t)WACOLL_HEAD_LOW);
    const __m256i kadd = _mm256_setr_epi64x((int64_t)WACOLL_HEAD_COUNTS, -1, -1, -1);
    Py_ssize_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        const __m256i *s = (const __m256i *)(src + 4 * i);
        __m256i *d = (__m256i *)(dst + 4 * i);
        __m256i a0 = _mm256_loadu_si256(s), a1 = _mm256_loadu_si256(s + 1);
        __m256i a2 = _mm256_loadu_si256(s + 2), a3 = _mm256_loadu_si256(s + 3);
        __m256i b0 = _mm256_loadu_si256(d), b1 = _mm256_loadu_si256(d + 1);
        __m256i b2 = _mm256_loadu_si256(d + 2), b3 = _mm256_loadu_si256(d + 3);
        /* The four heads (word 0 of each vector) in one vector. */
        __m256i sh = _mm256_permute2x128_si256(_mm256_unpacklo_epi64(a0, a1),
                                               _mm256_unpacklo_epi64(a2, a3), 0x20);
        __m256i dh = _mm256_permute2x128_si256(_mm256_unpacklo_epi64(b0, b1),
                                               _mm256_unpacklo_epi64(b2, b3), 0x20);
        if (!_mm256_testz_si256(wacoll_conflict4(sh, dh), klow))
            break;
        _mm256_storeu_si256(d, _mm256_add_epi64(b0, _mm256_and_si256(a0, kadd)));
        _mm256_storeu_si256(d + 1, _mm256_add_epi64(b1, _mm256_and_si256(a1, kadd)));
        _mm256_storeu_si256(d + 2, _mm256_add_epi64(b2, _mm256_and_si256(a2, kadd)));
        _mm256_storeu_si256(d + 3, _mm256_add_epi64(b3, _mm256_and_si256(a3, kadd)));
    }
    return i;
}

/* Rows dst[0:k] += src[0:k] of 3 words (float32): four rows are three vectors, with
   the heads at words 0 and 3 of the first, 2 of the second and 1 of the third. */
static inline Py_ssize_t wacoll_combine3(const int64_t *src, int64_t *dst, Py_ssize_t n)
{
    const int64_t I = (int64_t)WACOLL_HEAD_IDX, L = (int64_t)WACOLL_HEAD_LOW;
    const int64_t C = (int64_t)WACOLL_HEAD_COUNTS;
    const __m256i kidx0 = _mm256_setr_epi64x(I, 0, 0, I);
    const __m256i kidx1 = _mm256_setr_epi64x(0, 0, I, 0);
    const __m256i kidx2 = _mm256_setr_epi64x(0, I, 0, 0);
    const __m256i klow0 = _mm256_setr_epi64x(L, 0, 0, L);
    const __m256i klow1 = _mm256_setr_epi64x(0, 0, L, 0);
    const __m256i klow2 = _mm256_setr_epi64x(0, L, 0, 0);
    const __m256i kadd0 = _mm256_setr_epi64x(C, -1, -1, C);
    const __m256i kadd1 = _mm256_setr_epi64x(-1, -1, C, -1);
    const __m256i kadd2 = _mm256_setr_epi64x(-1, C, -1, -1);
    Py_ssize_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        const __m256i *s = (const __m256i *)(src + 3 * i);
        __m256i *d = (__m256i *)(dst + 3 * i);
        __m256i a0 = _mm256_loadu_si256(s), a1 = _mm256_loadu_si256(s + 1);
        __m256i a2 = _mm256_loadu_si256(s + 2);
        __m256i b0 = _mm256_loadu_si256(d), b1 = _mm256_loadu_si256(d + 1);
        __m256i b2 = _mm256_loadu_si256(d + 2);
        __m256i bad = _mm256_or_si256(
            _mm256_or_si256(_mm256_and_si256(WACOLL_CONFLICT(a0, b0, kidx0), klow0),
                            _mm256_and_si256(WACOLL_CONFLICT(a1, b1, kidx1), klow1)),
            _mm256_and_si256(WACOLL_CONFLICT(a2, b2, kidx2), klow2));
        if (!_mm256_testz_si256(bad, bad))
            break;
        _mm256_storeu_si256(d, _mm256_add_epi64(b0, _mm256_and_si256(a0, kadd0)));
        _mm256_storeu_si256(d + 1, _mm256_add_epi64(b1, _mm256_and_si256(a1, kadd1)));
        _mm256_storeu_si256(d + 2, _mm256_add_epi64(b2, _mm256_and_si256(a2, kadd2)));
    }
    return i;
}

#else  /* portable */

/* Rows dst[0:k] += src[0:k] of w words, for the k returned (w is 3 or 4, a constant
   once inlined into the two functions below). */
static inline Py_ssize_t wacoll_combine_rows(const int64_t *src, int64_t *dst,
                                             Py_ssize_t n, int w)
{
    const uint64_t *s = (const uint64_t *)src;
    uint64_t *d = (uint64_t *)dst;
    Py_ssize_t i;
    int r, k;
    for (i = 0; i + 4 <= n; i += 4) {
        const uint64_t *a = s + w * i;
        uint64_t *b = d + w * i;
        uint64_t bad = 0;
        for (r = 0; r < 4; r++)
            bad |= wacoll_row_conflict(a[w * r], b[w * r]);
        if (bad)
            break;
        for (r = 0; r < 4; r++) {
            b[w * r] += a[w * r] & WACOLL_HEAD_COUNTS;
            for (k = 1; k < w; k++)
                b[w * r + k] += a[w * r + k];
        }
    }
    return i;
}

static inline Py_ssize_t wacoll_combine4(const int64_t *src, int64_t *dst, Py_ssize_t n)
{
    return wacoll_combine_rows(src, dst, n, 4);
}

static inline Py_ssize_t wacoll_combine3(const int64_t *src, int64_t *dst, Py_ssize_t n)
{
    return wacoll_combine_rows(src, dst, n, 3);
}

#endif


/* ---------------------------------------------------------------- to_acc, float64

   The accumulator of one finite float64 value x with bit pattern u (see _split64 in
   _repro.pyx, which also handles infinities and NaN; for finite values the two agree
   bit for bit). With e the biased exponent and f the fraction field,
   x = +-m 2**(e - 1075) with m = f + 2**52 for e >= 1, and x = +-(2 f) 2**(0 - 1075)
   for e == 0 (zeros and subnormals; _split64 writes f 2**(1 - 1075), the same
   pieces). With t = e + 115,

       head = one deposit | flag "not -0.0" (clear for -0.0 only) | top bin t >> 5
       bins = m << (12 + t % 32) as a 96-bit integer, cut into three 32-bit pieces
              from the top, each negated when x is negative.

   The code adds the head's constant bits, shifted left by 5, into t, so that t >> 5
   is the head but for the -0.0 rule. wacoll_to_acc64 applies this to every value,
   with no test in its loop, and tells whether there was an infinity or a NaN, whose
   rows the caller then writes again. */

#define WACOLL_T64 (115 + (WACOLL_HEAD_ONE_VALUE << 5))

/* The row of the finite value with bit pattern u (one value at a time). */
static inline void wacoll_row64(uint64_t u, int64_t *acc)
{
    uint64_t *row = (uint64_t *)acc;
    uint64_t neg = (uint64_t)0 - (u >> 63);
    uint64_t e = (u >> 52) & 0x7FF;
    uint64_t t = e + WACOLL_T64;
    uint64_t a = t & 31;
    uint64_t f = u & WACOLL_FRAC64_MASK;
    uint64_t m = f + (e ? (uint64_t)1 << 52 : f);
    uint64_t v = m << (a + 12);
    row[0] = (t >> 5) ^ ((uint64_t)(u == ((uint64_t)1 << 63)) << 8);
    row[1] = ((m >> (52 - a)) ^ neg) - neg;
    row[2] = ((v >> 32) ^ neg) - neg;
    row[3] = ((v & WACOLL_LOW32) ^ neg) - neg;
}

/* Rows acc[i:n] as wacoll_row64 gives them; non-zero if one of x[i:n] is an infinity
   or a NaN. */
static inline int wacoll_rows64(const double *x, int64_t *acc, Py_ssize_t i, Py_ssize_t n)
{
    int special = 0;
    for (; i < n; i++) {
        uint64_t u;
        memcpy(&u, x + i, sizeof u);                /* the bit pattern */
        special |= (u & WACOLL_EXP64) == WACOLL_EXP64;
        wacoll_row64(u, acc + 4 * i);
    }
    return special;
}

#if defined(__AVX2__)

/* The exponent fields of the four values with bit patterns u. */
static inline __m256i wacoll_exponents4(__m256i u)
{
    return _mm256_and_si256(_mm256_srli_epi64(u, 52), _mm256_set1_epi64x(0x7FF));
}

/* The rows r0..r3 of four finite values with bit patterns u, in halves:
   *hp0_lo = [r0 words 0-1 | r2 words 0-1], *hp0_hi = [r1 words 0-1 | r3 words 0-1],
   *p12_lo = [r0 words 2-3 | r2 words 2-3], *p12_hi = [r1 words 2-3 | r3 words 2-3]. */
static inline void wacoll_rows4(__m256i u, __m256i *hp0_lo, __m256i *hp0_hi,
                                __m256i *p12_lo, __m256i *p12_hi)
{
    const __m256i zero = _mm256_setzero_si256();
    const __m256i kfrac = _mm256_set1_epi64x((int64_t)WACOLL_FRAC64_MASK);
    const __m256i kimplicit = _mm256_set1_epi64x((int64_t)1 << 52);
    const __m256i kt = _mm256_set1_epi64x((int64_t)WACOLL_T64);
    const __m256i k31 = _mm256_set1_epi64x(31);
    const __m256i k12 = _mm256_set1_epi64x(12);
    const __m256i k52 = _mm256_set1_epi64x(52);
    const __m256i knotneg0 = _mm256_set1_epi64x(0x100);
    const __m256i kneg0 = _mm256_set1_epi64x(INT64_MIN);    /* the bits of -0.0 */
    __m256i e = wacoll_exponents4(u);
    __m256i neg = _mm256_cmpgt_epi64(zero, u);      /* all ones where x < 0 or -0.0 */
    __m256i t = _mm256_add_epi64(e, kt);
    __m256i a = _mm256_and_si256(t, k31);
    __m256i f = _mm256_and_si256(u, kfrac);
    __m256i m = _mm256_add_epi64(                    /* f + 2**52, or f + f if e == 0 */
        f, _mm256_blendv_epi8(kimplicit, f, _mm256_cmpeq_epi64(e, zero)));
    __m256i v = _mm256_sllv_epi64(m, _mm256_add_epi64(a, k12));    /* pieces 1, 2 */
    __m256i c0 = _mm256_srlv_epi64(m, _mm256_sub_epi64(k52, a));   /* piece 0 */
    __m256i h = _mm256_xor_si256(_mm256_srli_epi64(t, 5),
                                 _mm256_and_si256(_mm256_cmpeq_epi64(u, kneg0), knotneg0));
    __m256i p0 = _mm256_sub_epi64(_mm256_xor_si256(c0, neg), neg);
    /* Pieces 1 and 2 as 32-bit words in row order (v's halves swapped), each negated
       where x < 0, and the words above them: all ones where a negated piece is not 0.
       Interleaved, they are the 64-bit pieces. */
    __m256i p12 = _mm256_shuffle_epi32(v, 0xB1);
    __m256i low = _mm256_sub_epi32(_mm256_xor_si256(p12, neg), neg);
    __m256i high = _mm256_andnot_si256(_mm256_cmpeq_epi32(p12, zero), neg);
    *hp0_lo = _mm256_unpacklo_epi64(h, p0);
    *hp0_hi = _mm256_unpackhi_epi64(h, p0);
    *p12_lo = _mm256_unpacklo_epi32(low, high);
    *p12_hi = _mm256_unpackhi_epi32(low, high);
}

/* Rows acc[i:i+4] of the values x[i:i+4]; *emax: the lane-wise maximum of the
   exponent fields so far. */
static inline void wacoll_store_rows4(const double *x, int64_t *acc, Py_ssize_t i,
                                      __m256i *emax)
{
    __m256i hp0_lo, hp0_hi, p12_lo, p12_hi;
    __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
    __m256i *out = (__m256i *)(acc + 4 * i);
    /* (The exponents are below 2**11: the 32-bit maximum is the 64-bit one.) */
    *emax = _mm256_max_epu32(*emax, wacoll_exponents4(u));
    wacoll_rows4(u, &hp0_lo, &hp0_hi, &p12_lo, &p12_hi);
    _mm256_storeu_si256(out, _mm256_permute2x128_si256(hp0_lo, p12_lo, 0x20));
    _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(hp0_hi, p12_hi, 0x20));
    _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(hp0_lo, p12_lo, 0x31));
    _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(hp0_hi, p12_hi, 0x31));
}

/* The same, for acc 16 bytes past a multiple of 32: stores of the aligned 32 bytes
   from word 2 of a row to word 1 of the next, starting with rows i - 1 and i (whose
   second half, the last group's, *carry holds) and ending with rows i + 2 and i + 3;
   the second half of row i + 3 is left in *carry. */
static inline void wacoll_store_rows4_half(const double *x, int64_t *acc, Py_ssize_t i,
                                           __m256i *carry, __m256i *emax)
{
    __m256i hp0_lo, hp0_hi, p12_lo, p12_hi;
    __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
    __m256i *out = (__m256i *)(acc + 4 * i + 2);
    *emax = _mm256_max_epu32(*emax, wacoll_exponents4(u));
    wacoll_rows4(u, &hp0_lo, &hp0_hi, &p12_lo, &p12_hi);
    if (i)
        _mm256_storeu_si256(out - 1, _mm256_permute2x128_si256(*carry, hp0_lo, 0x21));
    else
        _mm_storeu_si128((__m128i *)acc, _mm256_castsi256_si128(hp0_lo));
    _mm256_storeu_si256(out, _mm256_permute2x128_si256(p12_lo, hp0_hi, 0x20));
    _mm256_storeu_si256(out + 1, _mm256_blend_epi32(p12_hi, hp0_lo, 0xF0));
    _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(p12_lo, hp0_hi, 0x31));
    *carry = p12_hi;
}

/* Rows acc[0:n] = the accumulators of x[0:n], every value taken as finite. Returns
   non-zero if one of them is an infinity or a NaN: their rows are then wrong, and the
   caller writes them again. */
static inline int wacoll_to_acc64(const double *x, int64_t *acc, Py_ssize_t n)
{
    __m256i emax = _mm256_setzero_si256(), carry = _mm256_setzero_si256();
    Py_ssize_t i = 0;
    if (((uintptr_t)acc & 31) != 16) {
        for (; i + 8 <= n; i += 8) {
            wacoll_store_rows4(x, acc, i, &emax);
            wacoll_store_rows4(x, acc, i + 4, &emax);
        }
        if (i + 4 <= n) {
            wacoll_store_rows4(x, acc, i, &emax);
            i += 4;
        }
    } else if (n >= 4) {
        /* acc 16 bytes past a multiple of 32 (numpy's large arrays): aligned stores,
           as wacoll_combine4_half reads the rows; the first half of the first row
           and the second half of the last are stored on their own. */
        wacoll_store_rows4_half(x, acc, 0, &carry, &emax);
        for (i = 4; i + 8 <= n; i += 8) {
            wacoll_store_rows4_half(x, acc, i, &carry, &emax);
            wacoll_store_rows4_half(x, acc, i + 4, &carry, &emax);
        }
        if (i + 4 <= n) {
            wacoll_store_rows4_half(x, acc, i, &carry, &emax);
            i += 4;
        }
        _mm_storeu_si128((__m128i *)(acc + 4 * i - 2), _mm256_extracti128_si256(carry, 1));
    }
    return _mm256_movemask_pd(_mm256_castsi256_pd(
               _mm256_cmpeq_epi64(emax, _mm256_set1_epi64x(0x7FF))))
           | wacoll_rows64(x, acc, i, n);
}

#else  /* portable */

static inline int wacoll_to_acc64(const double *x, int64_t *acc, Py_ssize_t n)
{
    return wacoll_rows64(x, acc, 0, n);
}

#endif

#endif  /* WACOLL_REPRO_SIMD_H */
