# cython: language_level=3
"""Byte copy kernel over contiguous memoryviews (the GIL is released)."""
from libc.string cimport memcpy


def copy_bytes(const unsigned char[::1] src, unsigned char[::1] dst):
    """Copy ``src`` into the start of ``dst``; lengths are checked by the wrapper."""
    cdef Py_ssize_t n = src.shape[0]
    if n == 0:
        return
    with nogil:
        memcpy(&dst[0], &src[0], n)
