# cython: language_level=3
"""Accumulator rows packed for the wire (private; call :mod:`wacoll._kernels.repro_wire`).

A packed message is a 24-byte header and two columns:

- header: byte 0 the format (1), byte 1 the width ``w`` of a bin in bytes (1-8),
  byte 2 whether the heads are *uniform* (1) or not (0), byte 3 the caller's tag
  (the wrapper's element type), bytes 4-7 zero; bytes 8-15
  the number of rows; bytes 16-23 the heads' common bits above the top bin's index
  (``head >> 8``) when uniform, else zero;
- the heads: one byte per row (the index) when uniform, else eight per row;
- the bins: ``w`` bytes per bin, row after row, each the low bytes of the bin's two's
  complement (sign-extended again on unpacking).

Every word is written little-endian, whatever the host. Packing is lossless: the rows
unpack to the same bits.
"""
from libc.stdint cimport int64_t, uint64_t, uint8_t
from libc.string cimport memcpy

import numpy as np

__all__ = ["HEADER_BYTES", "PACKED", "pack", "unpack"]

cdef extern from *:
    """
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    #define WACOLL_LITTLE_ENDIAN 1
    #else
    #define WACOLL_LITTLE_ENDIAN 0
    #endif
    """
    int WACOLL_LITTLE_ENDIAN

cdef enum:
    _HEADER = 24

#: Bytes of a packed message's header.
HEADER_BYTES = _HEADER
#: The format byte of a packed message.
PACKED = 1


cdef inline void _store(uint8_t* p, uint64_t v, int w) noexcept nogil:
    """Write the low ``w`` bytes of ``v`` at ``p``, little-endian."""
    cdef int j
    if WACOLL_LITTLE_ENDIAN:
        memcpy(p, &v, w)
    else:
        for j in range(w):
            p[j] = <uint8_t>(v >> (8 * j))


cdef inline uint64_t _load(const uint8_t* p, int w) noexcept nogil:
    """The ``w`` little-endian bytes at ``p``, zero-extended."""
    cdef uint64_t v = 0
    cdef int j
    if WACOLL_LITTLE_ENDIAN:
        memcpy(&v, p, w)
    else:
        for j in range(w):
            v |= (<uint64_t>p[j]) << (8 * j)
    return v


cdef inline int _signed_bytes(int64_t lo, int64_t hi) noexcept nogil:
    """Bytes of two's complement that hold every integer from ``lo`` to ``hi``."""
    cdef uint64_t m = <uint64_t>(hi if hi >= 0 else ~hi)
    cdef uint64_t n = <uint64_t>(~lo if lo < 0 else lo)
    cdef int bits = 1  # the sign
    if n > m:
        m = n
    while m:
        bits += 1
        m >>= 1
    return (bits + 7) // 8


cdef void _layout(const int64_t[:, ::1] rows, int* width, bint* uniform) noexcept nogil:
    """The narrowest bin width and whether the heads share their upper bits."""
    cdef Py_ssize_t m = rows.shape[0], k = rows.shape[1], i, j
    cdef int64_t lo = 0, hi = 0, v, upper = 0
    uniform[0] = True
    if m:
        upper = rows[0, 0] >> 8
    for i in range(m):
        if (rows[i, 0] >> 8) != upper:
            uniform[0] = False
        for j in range(1, k):
            v = rows[i, j]
            if v < lo:
                lo = v
            elif v > hi:
                hi = v
    width[0] = _signed_bytes(lo, hi)


def pack(const int64_t[:, ::1] rows, out=None, uint8_t tag=0):
    """Pack ``rows`` with ``tag`` in header byte 3; return ``(out, packed length)``.

    ``out`` (uint8) needs 8 bytes beyond the packed length (``24 + 8 * rows.size + 8``
    always suffices); a new array of just that size is made when it is None.
    """
    cdef int w
    cdef bint uniform
    cdef Py_ssize_t m = rows.shape[0], k = rows.shape[1], i, j, at, need
    cdef uint64_t word
    cdef uint8_t* p
    cdef uint8_t[::1] view
    with nogil:
        _layout(rows, &w, &uniform)
    need = _HEADER + m * (1 if uniform else 8) + m * (k - 1) * w
    if out is None:
        out = np.empty(need + 8, np.uint8)
    view = out
    if view.shape[0] < need + 8:
        raise ValueError(f"pack: out has {view.shape[0]} bytes; these {m} rows need "
                         f"{need + 8}")
    with nogil:
        p = &view[0]
        _store(p, <uint64_t>1 | (<uint64_t>w << 8) | (<uint64_t>uniform << 16)
               | (<uint64_t>tag << 24), 8)
        _store(p + 8, <uint64_t>m, 8)
        _store(p + 16, <uint64_t>((rows[0, 0] >> 8) if (uniform and m) else 0), 8)
        at = _HEADER
        if uniform:
            for i in range(m):
                p[at + i] = <uint8_t>(rows[i, 0] & 0xFF)
            at += m
        else:
            for i in range(m):
                _store(p + at, <uint64_t>rows[i, 0], 8)
                at += 8
        if WACOLL_LITTLE_ENDIAN:
            # whole words, each overwritten by the next from its w-th byte on (out
            # has room for the last one)
            for i in range(m):
                for j in range(1, k):
                    word = <uint64_t>rows[i, j]
                    memcpy(p + at, &word, 8)
                    at += w
        else:
            for i in range(m):
                for j in range(1, k):
                    _store(p + at, <uint64_t>rows[i, j], w)
                    at += w
    return out, at


def unpack(const uint8_t[::1] message, int64_t[:, ::1] rows):
    """Unpack a packed ``message`` into ``rows``; return the packed length (header
    byte 3, the tag, is the caller's to check).

    Raises ValueError when the message is no packed message of ``rows.shape[0]`` rows
    of ``rows.shape[1]`` words (nothing is then trusted from it).
    """
    cdef Py_ssize_t m = rows.shape[0], k = rows.shape[1], i, j, at, need
    cdef Py_ssize_t size = message.shape[0]
    cdef uint64_t word, upper
    cdef int w, shift
    cdef bint uniform
    cdef const uint8_t* p
    if size < HEADER_BYTES:
        raise ValueError(f"a packed message has a {HEADER_BYTES}-byte header; "
                         f"this one has {size} bytes")
    p = &message[0]
    word = _load(p, 8)
    w = (word >> 8) & 0xFF
    if word & 0xFF != 1 or not 1 <= w <= 8 or (word >> 16) & 0xFF > 1 or word >> 32:
        raise ValueError("not a packed accumulator message (bad header)")
    uniform = (word >> 16) & 1
    if _load(p + 8, 8) != <uint64_t>m:
        raise ValueError(f"the packed message has {_load(p + 8, 8)} rows; "
                         f"{m} were expected")
    need = _HEADER + m * (1 if uniform else 8) + m * (k - 1) * w
    if size < need:
        raise ValueError(f"the packed message needs {need} bytes; {size} arrived")
    upper = _load(p + 16, 8)
    shift = 64 - 8 * w
    with nogil:
        at = _HEADER
        if uniform:
            for i in range(m):
                rows[i, 0] = <int64_t>((upper << 8) | p[at + i])
            at += m
        else:
            for i in range(m):
                rows[i, 0] = <int64_t>_load(p + at, 8)
                at += 8
        # sign-extend: move the low w bytes to the top, shift back arithmetically
        for i in range(m):
            for j in range(1, k):
                if WACOLL_LITTLE_ENDIAN and at + 8 <= size:
                    memcpy(&word, p + at, 8)  # a whole word: the bytes past the bin
                else:                         # are shifted out
                    word = _load(p + at, w)
                rows[i, j] = (<int64_t>(word << shift)) >> shift
                at += w
    return need
