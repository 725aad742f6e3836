# cython: language_level=3
"""Pack and unpack kernels for block layouts (private; large calls release the GIL).

A layout is a pair of intp vectors: block ``i`` is ``counts[i]`` elements starting at
element ``displs[i]`` of the unpacked array; the packed buffer holds the blocks back to
back in index order. Both entry points check every block before copying any byte and
return a status code of ``_types.pxd``; the wrappers :func:`wacoll._kernels.pack` and
:func:`wacoll._kernels.unpack` turn a non-zero status into an exception.
"""
from cpython.buffer cimport PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_FORMAT
from libc.string cimport memcpy

from wacoll._kernels._types cimport *

__all__ = ["pack_buffers", "unpack_buffers"]

cdef enum:
    _NOGIL_BYTES = 16384


cdef struct Layout:
    const Py_ssize_t* displs
    const Py_ssize_t* counts
    Py_ssize_t nblocks


cdef int _check_blocks(const Layout* lay, Py_ssize_t n_full, Py_ssize_t n_packed,
                       bint need_order) noexcept nogil:
    """Check a layout against the two lengths (in elements).

    With ``need_order``, also require the non-empty blocks to be sorted by displacement
    and disjoint (the cheap sufficient test for unpack; S_UNSORTED otherwise).
    """
    cdef Py_ssize_t i, c, dp, total = 0, end = 0
    cdef bint ordered = True
    for i in range(lay.nblocks):
        c = lay.counts[i]
        dp = lay.displs[i]
        if c < 0 or dp < 0:
            return S_NEGATIVE
        if dp > n_full - c:
            return S_BOUNDS
        if c > n_packed - total:
            return S_TOTAL
        total += c
        if c > 0:
            if dp < end:
                ordered = False
            end = dp + c
    if total != n_packed:
        return S_TOTAL
    if need_order and not ordered:
        return S_UNSORTED
    return S_OK


cdef void _copy_blocks(char* packed, char* full, const Layout* lay, Py_ssize_t size,
                       bint to_packed) noexcept nogil:
    cdef Py_ssize_t i, nbytes, pos = 0
    for i in range(lay.nblocks):
        nbytes = lay.counts[i] * size
        if nbytes:
            if to_packed:
                memcpy(packed + pos, full + lay.displs[i] * size, nbytes)
            else:
                memcpy(full + lay.displs[i] * size, packed + pos, nbytes)
            pos += nbytes


cdef int _transfer(Py_buffer* fb, Py_buffer* pb, const Layout* lay, bint to_packed,
                   bint need_order) noexcept:
    """Shared body of pack (``to_packed``) and unpack over acquired buffers.

    ``fb`` is the unpacked (full) array, ``pb`` the packed one.
    """
    cdef int status
    if not same_elements(fb, pb):
        return S_MISMATCH
    if has_objects(fb):
        return S_OBJECT
    status = _check_blocks(lay, fb.len // fb.itemsize, pb.len // pb.itemsize,
                           need_order)
    if status != S_OK:
        return status
    if overlapping(<const char*>fb.buf, fb.len, <const char*>pb.buf, pb.len):
        return S_OVERLAP
    if pb.len >= _NOGIL_BYTES:
        with nogil:
            _copy_blocks(<char*>pb.buf, <char*>fb.buf, lay, fb.itemsize, to_packed)
    else:
        _copy_blocks(<char*>pb.buf, <char*>fb.buf, lay, fb.itemsize, to_packed)
    return S_OK


cdef bint _index_buffer(object obj, Py_buffer* view) noexcept:
    """Acquire a contiguous 1-D intp buffer; False (nothing held) otherwise."""
    if get_buffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0:
        PyErr_Clear()
        return False
    if view.ndim == 1 and view.itemsize == sizeof(Py_ssize_t) and (
            buffer_type(view) == T_INT64 or buffer_type(view) == T_INT32):
        return True
    PyBuffer_Release(view)
    return False


cdef int _run(object source, object target, object displs, object counts,
              bint to_packed, bint need_order):
    """Acquire the buffers (source, target, layout), transfer, release."""
    cdef Py_buffer sb, tb, db, cb
    cdef Layout lay
    cdef int status
    status = get_buffers(source, &sb, target, &tb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    if status != S_OK:
        return status
    status = S_INDEX
    if _index_buffer(displs, &db):
        if _index_buffer(counts, &cb):
            if db.shape[0] != cb.shape[0]:
                status = S_BLOCKS
            else:
                lay.displs = <const Py_ssize_t*>db.buf
                lay.counts = <const Py_ssize_t*>cb.buf
                lay.nblocks = cb.shape[0]
                if to_packed:
                    status = _transfer(&sb, &tb, &lay, True, need_order)
                else:
                    status = _transfer(&tb, &sb, &lay, False, need_order)
            PyBuffer_Release(&cb)
        PyBuffer_Release(&db)
    PyBuffer_Release(&tb)
    PyBuffer_Release(&sb)
    return status


def pack_buffers(object src, object displs, object counts, object out):
    """Gather the blocks of ``src`` into ``out``, back to back; returns a status.

    ``displs`` and ``counts`` are contiguous 1-D intp arrays counting elements; their
    sum must equal the length of ``out``. Nothing is written unless the status is 0.
    """
    return _run(src, out, displs, counts, True, False)


def unpack_buffers(object packed, object displs, object counts, object dst,
                   bint check_order=True):
    """Scatter the back-to-back blocks of ``packed`` into ``dst``; returns a status.

    With ``check_order`` (the default) a layout whose non-empty blocks are not sorted
    and disjoint gives S_UNSORTED: the caller proves them disjoint and calls again with
    ``check_order=False``.
    """
    return _run(packed, dst, displs, counts, False, check_order)
