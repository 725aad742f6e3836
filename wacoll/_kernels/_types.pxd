# cython: language_level=3
"""Shared declarations of the kernels: fused types, type and status codes, and the
helpers that read a buffer's format (inline, so each module compiles its own copy).

Signed integers are reduced through their unsigned twins wherever two's complement
makes the bit patterns agree (SUM, PROD, the logical and bitwise operators): unsigned
arithmetic wraps by definition in C, signed overflow is undefined behaviour.
"""
from cpython.buffer cimport PyBuffer_Release, PyBUF_WRITABLE
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t)


# Unsigned integers: SUM, PROD, logical and bitwise operators on all integer types.
ctypedef fused uint_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t

# Real floating point: SUM, PROD, MIN, MAX; the halves of a complex number.
ctypedef fused real_t:
    float
    double

# Totally ordered element types: MIN and MAX.
ctypedef fused ordered_t:
    int8_t
    int16_t
    int32_t
    int64_t
    uint8_t
    uint16_t
    uint32_t
    uint64_t
    float
    double


# Element type codes; the Python wrappers see the same numbers as TYPE_NAMES indices.
cdef enum:
    T_NONE = -1
    T_BOOL = 0
    T_INT8 = 1
    T_INT16 = 2
    T_INT32 = 3
    T_INT64 = 4
    T_UINT8 = 5
    T_UINT16 = 6
    T_UINT32 = 7
    T_UINT64 = 8
    T_FLOAT32 = 9
    T_FLOAT64 = 10
    T_COMPLEX64 = 11
    T_COMPLEX128 = 12

# Status codes returned by the entry points; the wrappers turn them into messages.
cdef enum:
    S_OK = 0
    S_SRC_BUFFER = 1      # src exports no C-contiguous buffer
    S_DST_BUFFER = 2      # dst exports no writable C-contiguous buffer
    S_DTYPE = 3           # element type outside the supported set
    S_MISMATCH = 4        # src and dst element types differ
    S_OP_DTYPE = 5        # the operator is not defined for the element type
    S_LENGTH = 6          # element counts differ (or dst too small for copy)
    S_ALIGN = 7           # a data pointer not aligned for its element type
    S_OVERLAP = 8         # the buffers overlap in memory (and are not identical)
    S_NEGATIVE = 9        # a negative displacement or count
    S_BOUNDS = 10         # a block beyond the end of the unpacked array
    S_TOTAL = 11          # counts do not add up to the packed length
    S_BLOCKS = 12         # displs and counts of different lengths
    S_UNSORTED = 13       # unpack blocks out of order: overlap check left to the caller
    S_OBJECT = 14         # object (or pointer) elements cannot be copied as bytes
    S_INDEX = 15          # displs or counts not a contiguous 1-D intp buffer
    S_SLOW = 16           # the fast path cannot resolve the operator or side

cdef extern from *:
    """
    static inline int wacoll_little_endian(void) {
        const unsigned short one = 1;
        return *(const unsigned char *)&one == 1;
    }
    """
    bint wacoll_little_endian() noexcept nogil


cdef inline int _order_prefix(const char* fmt) noexcept nogil:
    """Length of a byte-order prefix meaning native order (0 or 1); -1 if swapped."""
    cdef char c = fmt[0]
    if c == b'@' or c == b'=':
        return 1
    if c == b'<':
        return 1 if wacoll_little_endian() else -1
    if c == b'>' or c == b'!':
        return -1 if wacoll_little_endian() else 1
    return 0


cdef inline int buffer_type(const Py_buffer* view) noexcept nogil:
    """The T_* code of a buffer's elements (from its format and itemsize), or T_NONE."""
    cdef const char* fmt = view.format
    cdef Py_ssize_t size = view.itemsize
    cdef char c
    if fmt == NULL:
        return T_UINT8 if size == 1 else T_NONE
    if _order_prefix(fmt) < 0:
        return T_NONE
    fmt += _order_prefix(fmt)
    c = fmt[0]
    if c == b'Z':
        if fmt[1] == 0 or fmt[2] != 0:
            return T_NONE
        c = fmt[1]
        if c == b'f' or c == b'd' or c == b'g':
            if size == 8:
                return T_COMPLEX64
            if size == 16 and c != b'g':
                return T_COMPLEX128
        return T_NONE
    if c == 0 or fmt[1] != 0:
        return T_NONE
    if c == b'?':
        return T_BOOL if size == 1 else T_NONE
    if c == b'b' or c == b'h' or c == b'i' or c == b'l' or c == b'q' or c == b'n':
        if size == 1:
            return T_INT8
        if size == 2:
            return T_INT16
        if size == 4:
            return T_INT32
        if size == 8:
            return T_INT64
        return T_NONE
    if c == b'B' or c == b'H' or c == b'I' or c == b'L' or c == b'Q' or c == b'N':
        if size == 1:
            return T_UINT8
        if size == 2:
            return T_UINT16
        if size == 4:
            return T_UINT32
        if size == 8:
            return T_UINT64
        return T_NONE
    if c == b'f' or c == b'd' or c == b'g':
        # 'g' (long double) only where it is a plain double (e.g. MSVC).
        if size == 4 and c == b'f':
            return T_FLOAT32
        if size == 8 and c != b'f':
            return T_FLOAT64
    return T_NONE


cdef inline bint same_elements(const Py_buffer* a, const Py_buffer* b) noexcept nogil:
    """True when two buffers hold the same element type (any type, for byte copies)."""
    cdef int ta, tb
    if a.itemsize != b.itemsize:
        return False
    ta = buffer_type(a)
    tb = buffer_type(b)
    if ta != T_NONE or tb != T_NONE:
        return ta == tb
    return _same_format(a.format, b.format)


cdef inline bint _same_format(const char* a, const char* b) noexcept nogil:
    """Compare struct formats, ignoring native-order markers: numpy writes '=' or '@'
    into one dtype's format depending on the array's alignment."""
    if a == NULL or b == NULL:
        return a == b
    while True:
        while a[0] == b'@' or a[0] == b'=':
            a += 1
        while b[0] == b'@' or b[0] == b'=':
            b += 1
        if a[0] != b[0]:
            return False
        if a[0] == 0:
            return True
        a += 1
        b += 1


cdef inline bint has_objects(const Py_buffer* view) noexcept nogil:
    """True when a buffer's format holds Python objects or pointers (no byte copies)."""
    cdef const char* fmt = view.format
    cdef bint in_name = False
    if fmt == NULL:
        return False
    while fmt[0] != 0:
        if fmt[0] == b':':
            in_name = not in_name  # struct field names sit between colons
        elif not in_name and (fmt[0] == b'O' or fmt[0] == b'P'):
            return True
        fmt += 1
    return False


cdef extern from "Python.h":
    # Declared without an exception clause: the entry points return a status code
    # instead of raising, so a failed request is cleared and reported as a status.
    int get_buffer "PyObject_GetBuffer"(object obj, Py_buffer* view, int flags) noexcept
    void PyErr_Clear() noexcept


cdef inline int get_buffers(object src, Py_buffer* sb, object dst, Py_buffer* db,
                            int flags) noexcept:
    """Acquire ``src`` and, writable, ``dst`` with ``flags``: the kernels' prologue.

    Returns S_OK with both buffers held, or S_SRC_BUFFER / S_DST_BUFFER with neither
    held (the failed request cleared).
    """
    if get_buffer(src, sb, flags) < 0:
        PyErr_Clear()
        return S_SRC_BUFFER
    if get_buffer(dst, db, flags | PyBUF_WRITABLE) < 0:
        PyErr_Clear()
        PyBuffer_Release(sb)
        return S_DST_BUFFER
    return S_OK


cdef inline bint overlapping(const char* a, Py_ssize_t alen,
                             const char* b, Py_ssize_t blen) noexcept nogil:
    """True when byte ranges [a, a+alen) and [b, b+blen) share a byte."""
    return alen > 0 and blen > 0 and a < b + blen and b < a + alen
