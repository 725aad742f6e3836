# cython: language_level=3
"""Byte copy kernel over C-contiguous buffers (private; large copies release the GIL).

``copy_buffers`` returns a status code of ``_types.pxd`` instead of raising; the wrapper
:func:`wacoll._kernels.copy_into` turns a non-zero status into an exception.
"""
from cpython.buffer cimport PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_FORMAT
from libc.string cimport memmove

from wacoll._kernels._types cimport *

__all__ = ["copy_buffers"]

cdef enum:
    _NOGIL_BYTES = 16384


def copy_buffers(object src, object dst):
    """Copy the bytes of ``src`` into the start of ``dst``; the two may overlap.

    Returns 0, or a status code when ``src`` or ``dst`` is not a C-contiguous buffer
    (``dst`` writable), holds Python objects, or ``dst`` is smaller than ``src``.
    """
    cdef Py_buffer sb, db
    cdef int status = get_buffers(src, &sb, dst, &db, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    if status != S_OK:
        return status
    if has_objects(&sb) or has_objects(&db):
        status = S_OBJECT
    elif db.len < sb.len:
        status = S_LENGTH
    elif sb.len >= _NOGIL_BYTES:
        with nogil:
            memmove(db.buf, sb.buf, sb.len)
    elif sb.len > 0:
        memmove(db.buf, sb.buf, sb.len)
    PyBuffer_Release(&db)
    PyBuffer_Release(&sb)
    return status
