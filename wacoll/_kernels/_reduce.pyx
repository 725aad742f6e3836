# cython: language_level=3
"""Reduction kernels for MPI's predefined operators (private).

``reduce_buffers`` computes ``dst = dst (op) src`` (or ``src (op) dst``) in place over
two C-contiguous buffers of one element type; ``reduce_fast`` does the same for an
operator given by name (or registered ``MPI.Op``) and a side string, so that the common
call costs one trip into C. Both check everything they rely on before touching any
data and return a status code instead of raising; the wrapper
:func:`wacoll._kernels.reduce_into` turns a non-zero status into an exception.

The loops run on raw pointers specialised through the fused types of ``_types.pxd``;
large calls release the GIL. ``_reduce_avx2.pyx`` includes this file to build the same
module for AVX2 processors.
"""
from cpython.buffer cimport (PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_FORMAT,
                             PyBUF_SIMPLE, PyBUF_STRIDES)
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t)

from numpy import ndarray as _ndarray

from wacoll._kernels._types cimport *

__all__ = ["OPERATORS", "TYPE_NAMES", "SUPPORTED", "NOGIL_BYTES", "reduce_buffers",
           "reduce_fast", "register_operator", "cpu_has_avx2"]

OPERATORS = ("sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor")
TYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float32", "float64", "complex64", "complex128")

cdef enum:
    OP_SUM = 0
    OP_PROD = 1
    OP_MIN = 2
    OP_MAX = 3
    OP_LAND = 4
    OP_LOR = 5
    OP_LXOR = 6
    OP_BAND = 7
    OP_BOR = 8
    OP_BXOR = 9
    N_OPS = 10

# Calls moving at least this many bytes release the GIL; below it the release and
# reacquisition would cost more than the loop.
cdef enum:
    _NOGIL_BYTES = 16384
NOGIL_BYTES = _NOGIL_BYTES


cdef bint _supported(int op, int t) noexcept nogil:
    """MPI's table of predefined operators (MPI 4.1, section 6.9.2)."""
    if op < 0 or op >= N_OPS or t == T_NONE:
        return False
    if t == T_BOOL:                       # "Logical": LAND, LOR, LXOR only
        return op == OP_LAND or op == OP_LOR or op == OP_LXOR
    if t <= T_UINT64:                     # "C integer": every operator
        return True
    if t <= T_FLOAT64:                    # "Floating point": SUM, PROD, MIN, MAX
        return op <= OP_MAX
    return op <= OP_PROD                  # "Complex": SUM, PROD


SUPPORTED = frozenset((op, t) for op in range(N_OPS) for t in range(len(TYPE_NAMES))
                      if _supported(op, t))


cdef inline void _integer_op(int op, uint_t* d, const uint_t* s,
                             Py_ssize_t n) noexcept nogil:
    """Every operator but MIN/MAX, on integers seen as unsigned (and bool as uint8)."""
    cdef Py_ssize_t i
    if op == OP_SUM:
        for i in range(n):
            d[i] = <uint_t>(d[i] + s[i])
    elif op == OP_PROD:
        if uint_t is uint8_t or uint_t is uint16_t:
            # Without the casts both operands promote to (signed) int and overflow.
            for i in range(n):
                d[i] = <uint_t>(<uint32_t>d[i] * <uint32_t>s[i])
        else:
            for i in range(n):
                d[i] = d[i] * s[i]
    elif op == OP_LAND:
        for i in range(n):
            d[i] = (d[i] != 0) & (s[i] != 0)
    elif op == OP_LOR:
        for i in range(n):
            d[i] = (d[i] != 0) | (s[i] != 0)
    elif op == OP_LXOR:
        for i in range(n):
            d[i] = (d[i] != 0) ^ (s[i] != 0)
    elif op == OP_BAND:
        for i in range(n):
            d[i] = d[i] & s[i]
    elif op == OP_BOR:
        for i in range(n):
            d[i] = d[i] | s[i]
    elif op == OP_BXOR:
        for i in range(n):
            d[i] = d[i] ^ s[i]


cdef inline ordered_t _min2(ordered_t a, ordered_t b) noexcept nogil:
    """numpy's minimum: ``a`` if it is NaN or smaller, else ``b``."""
    cdef ordered_t r = a if a < b else b   # one MINPD/MINPS (b when either is NaN)
    if ordered_t is float or ordered_t is double:
        return a if a != a else r
    else:
        return r


cdef inline ordered_t _max2(ordered_t a, ordered_t b) noexcept nogil:
    """numpy's maximum: ``a`` if it is NaN or larger, else ``b``."""
    cdef ordered_t r = a if a > b else b
    if ordered_t is float or ordered_t is double:
        return a if a != a else r
    else:
        return r


cdef inline void _minmax(int op, bint left, ordered_t* d, const ordered_t* s,
                         Py_ssize_t n) noexcept nogil:
    """MIN or MAX as numpy computes them: a NaN operand wins, the first one if both.

    ``left`` puts ``src`` first, so that results match ``np.minimum(src, dst)``; the
    order shows only in which NaN or which signed zero is kept.
    """
    cdef Py_ssize_t i
    if op == OP_MIN:
        if left:
            for i in range(n):
                d[i] = _min2(s[i], d[i])
        else:
            for i in range(n):
                d[i] = _min2(d[i], s[i])
    else:
        if left:
            for i in range(n):
                d[i] = _max2(s[i], d[i])
        else:
            for i in range(n):
                d[i] = _max2(d[i], s[i])


cdef inline void _real_op(int op, bint left, real_t* d, const real_t* s,
                          Py_ssize_t n) noexcept nogil:
    """SUM, PROD, MIN, MAX on float or double (SUM also on complex, as 2n reals)."""
    cdef Py_ssize_t i
    if op == OP_SUM:
        # Operands in the stated order: IEEE addition commutes, except in which NaN
        # payload survives.
        if left:
            for i in range(n):
                d[i] = s[i] + d[i]
        else:
            for i in range(n):
                d[i] = d[i] + s[i]
    elif op == OP_PROD:
        if left:
            for i in range(n):
                d[i] = s[i] * d[i]
        else:
            for i in range(n):
                d[i] = d[i] * s[i]
    else:
        _minmax(op, left, d, s, n)


cdef inline void _complex_prod(bint left, real_t* d, const real_t* s,
                               Py_ssize_t n) noexcept nogil:
    """Complex PROD over ``n`` (re, im) pairs, by the textbook formula.

    No C99 ``_Complex`` arithmetic: its Annex G rescue of infinities calls out of line
    and differs between compilers. The build disables FMA contraction, so results do
    not depend on the instruction set either.
    """
    cdef Py_ssize_t i
    cdef real_t ar, ai, br, bi
    cdef const real_t* a = d
    cdef const real_t* b = s
    if left:
        a = s
        b = d
    for i in range(n):
        ar = a[2 * i]
        ai = a[2 * i + 1]
        br = b[2 * i]
        bi = b[2 * i + 1]
        d[2 * i] = ar * br - ai * bi
        d[2 * i + 1] = ar * bi + ai * br


cdef int _reduce(int op, bint left, int t, void* d, const void* s,
                 Py_ssize_t n) noexcept nogil:
    """Dispatch on operator and element type; ``n`` counts elements."""
    if not _supported(op, t):
        return S_OP_DTYPE
    if op == OP_MIN or op == OP_MAX:
        if t == T_INT8:
            _minmax(op, left, <int8_t*>d, <const int8_t*>s, n)
        elif t == T_INT16:
            _minmax(op, left, <int16_t*>d, <const int16_t*>s, n)
        elif t == T_INT32:
            _minmax(op, left, <int32_t*>d, <const int32_t*>s, n)
        elif t == T_INT64:
            _minmax(op, left, <int64_t*>d, <const int64_t*>s, n)
        elif t == T_UINT8:
            _minmax(op, left, <uint8_t*>d, <const uint8_t*>s, n)
        elif t == T_UINT16:
            _minmax(op, left, <uint16_t*>d, <const uint16_t*>s, n)
        elif t == T_UINT32:
            _minmax(op, left, <uint32_t*>d, <const uint32_t*>s, n)
        elif t == T_UINT64:
            _minmax(op, left, <uint64_t*>d, <const uint64_t*>s, n)
        elif t == T_FLOAT32:
            _minmax(op, left, <float*>d, <const float*>s, n)
        else:
            _minmax(op, left, <double*>d, <const double*>s, n)
    elif t == T_BOOL or t == T_INT8 or t == T_UINT8:
        _integer_op(op, <uint8_t*>d, <const uint8_t*>s, n)
    elif t == T_INT16 or t == T_UINT16:
        _integer_op(op, <uint16_t*>d, <const uint16_t*>s, n)
    elif t == T_INT32 or t == T_UINT32:
        _integer_op(op, <uint32_t*>d, <const uint32_t*>s, n)
    elif t == T_INT64 or t == T_UINT64:
        _integer_op(op, <uint64_t*>d, <const uint64_t*>s, n)
    elif t == T_FLOAT32:
        _real_op(op, left, <float*>d, <const float*>s, n)
    elif t == T_FLOAT64:
        _real_op(op, left, <double*>d, <const double*>s, n)
    elif op == OP_SUM:
        if t == T_COMPLEX64:
            _real_op(op, left, <float*>d, <const float*>s, 2 * n)
        else:
            _real_op(op, left, <double*>d, <const double*>s, 2 * n)
    elif t == T_COMPLEX64:
        _complex_prod(left, <float*>d, <const float*>s, n)
    else:
        _complex_prod(left, <double*>d, <const double*>s, n)
    return S_OK


cdef inline bint _aligned(const Py_buffer* view, int t) noexcept nogil:
    """True when the data pointer suits the element type (a complex: its halves)."""
    cdef size_t align = <size_t>view.itemsize
    if t == T_COMPLEX64 or t == T_COMPLEX128:
        align //= 2
    return view.len == 0 or (<size_t>view.buf) % align == 0


cdef int _check(int op, int t, int ts, const Py_buffer* sb,
                const Py_buffer* db) noexcept nogil:
    if t == T_NONE or ts == T_NONE:
        return S_DTYPE
    if t != ts:
        return S_MISMATCH
    if not _supported(op, t):
        return S_OP_DTYPE
    if sb.len != db.len:
        return S_LENGTH
    if not (_aligned(sb, t) and _aligned(db, t)):
        return S_ALIGN
    if sb.buf != db.buf and overlapping(<const char*>sb.buf, sb.len,
                                         <const char*>db.buf, db.len):
        return S_OVERLAP
    return S_OK


# Type codes of the dtype objects seen so far, by identity (dtype objects are immutable
# and numpy reuses one object per builtin type, so a handful of entries cover a run).
# Knowing the type lets numpy arrays be acquired without a format string, which numpy
# rebuilds on every request.
cdef enum:
    _CACHE_SIZE = 32
cdef PyObject* _cache_dtype[_CACHE_SIZE]
cdef int _cache_code[_CACHE_SIZE]
cdef int _cache_used = 0


cdef int _array_type(object arr) except -2:
    """The T_* code of an ndarray's dtype, from the cache or its buffer format."""
    global _cache_used
    cdef object dtype = arr.dtype
    cdef PyObject* key = <PyObject*>dtype
    cdef Py_buffer view
    cdef int i, t
    for i in range(_cache_used):
        if _cache_dtype[i] == key:
            return _cache_code[i]
    if get_buffer(arr, &view, PyBUF_STRIDES | PyBUF_FORMAT) < 0:
        PyErr_Clear()
        return T_NONE
    t = buffer_type(&view)
    PyBuffer_Release(&view)
    if _cache_used < _CACHE_SIZE:
        Py_INCREF(dtype)  # keep the key alive, so that its address stays its own
        _cache_dtype[_cache_used] = key
        _cache_code[_cache_used] = t
        _cache_used += 1
    return t


cdef int _reduce_objects(int op, bint left, object src, object dst) except -1:
    """Acquire, check, reduce, release; a status code."""
    cdef Py_buffer sb, db
    cdef int status, t, ts
    cdef int sflags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT
    cdef bint arrays = type(src) is _ndarray and type(dst) is _ndarray
    if arrays:
        ts = _array_type(src)
        t = _array_type(dst)
        sflags = PyBUF_SIMPLE  # numpy grants it to C-contiguous arrays only
    status = get_buffers(src, &sb, dst, &db, sflags)
    if status != S_OK:
        return status
    if not arrays:
        ts = buffer_type(&sb)
        t = buffer_type(&db)
    status = _check(op, t, ts, &sb, &db)
    if status == S_OK:
        if db.len >= _NOGIL_BYTES:
            with nogil:
                status = _reduce(op, left, t, db.buf, sb.buf, db.len // db.itemsize)
        else:
            status = _reduce(op, left, t, db.buf, sb.buf, db.len // db.itemsize)
    PyBuffer_Release(&db)
    PyBuffer_Release(&sb)
    return status


def reduce_buffers(int op, bint left, object src, object dst):
    """Compute ``dst = dst (op) src`` (``left``: ``dst = src (op) dst``) in place.

    Parameters
    ----------
    op : int
        Index of the operator in ``OPERATORS``.
    left : bool
        Put ``src`` first.
    src, dst : buffer
        C-contiguous buffers of one supported element type and equal size; ``dst``
        writable. They may be the same memory but must not overlap otherwise.

    Returns
    -------
    int
        0 on success, else a status code of ``_types.pxd`` (nothing was written).
    """
    if op < 0 or op >= N_OPS:
        return S_OP_DTYPE
    return _reduce_objects(op, left, src, dst)


# Operators reduce_fast resolves by itself: names, and id(op) -> (op, code) for
# predefined mpi4py operators (which are not hashable).
cdef dict _fast_codes = {}


def register_operator(object key, int code):
    """Let ``reduce_fast`` resolve ``key``, a name or a predefined ``MPI.Op``."""
    if not 0 <= code < N_OPS:
        raise ValueError(f"no operator has code {code}")
    if isinstance(key, str):
        _fast_codes[key] = code
    else:
        _fast_codes[id(key)] = (key, code)


def reduce_fast(object op, object src, object dst, object side):
    """``reduce_buffers`` for a registered operator and ``side`` "right" or "left".

    Returns S_SLOW, having done nothing, when it cannot resolve ``op`` or ``side``.
    """
    cdef object entry
    cdef int code
    cdef bint left
    if type(op) is str:
        entry = _fast_codes.get(op)
        if entry is None:
            return S_SLOW
        code = entry
    else:
        entry = _fast_codes.get(id(op))
        if entry is None or (<tuple>entry)[0] is not op:
            return S_SLOW
        code = (<tuple>entry)[1]
    if side == "right":
        left = False
    elif side == "left":
        left = True
    else:
        return S_SLOW
    return _reduce_objects(code, left, src, dst)


cdef extern from *:
    """
    #if (defined(__GNUC__) || defined(__clang__)) && \
        (defined(__x86_64__) || defined(__i386__))
    static int wacoll_cpu_has_avx2(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") != 0;
    }
    #else
    static int wacoll_cpu_has_avx2(void) { return 0; }
    #endif
    """
    bint wacoll_cpu_has_avx2() noexcept nogil


def cpu_has_avx2():
    """Whether this processor (and its operating system) can run AVX2 code."""
    return wacoll_cpu_has_avx2()


def kernel_capsule():
    """The reduction kernel as a C function pointer in a capsule named
    ``"wacoll.reduce"``: ``int (int op, int left, int type, void *dst, const void
    *src, Py_ssize_t n)``, returning a status code. The compiled runner of
    :mod:`wacoll.mpi.runner` calls it without the GIL."""
    return PyCapsule_New(<void *>_reduce, b"wacoll.reduce", NULL)
