# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled reading of plan steps (private; :mod:`wacoll.plans.prover.encode`
reads every plan's steps with it).

A :class:`~wacoll.plans.plan.Step` keeps its fields in slots, whose place in the
object the class's member descriptors know; this module reads them there, once per
step, instead of asking for each attribute by name. A step of any other class (a
subclass) is read by name.
"""
from cpython.object cimport PyObject
from cpython.long cimport PyLong_AsLongLong
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_GET_ITEM
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t

import numpy as np

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member

_FIELDS = ("kind", "peer", "src", "dst", "side", "group", "blocks")
_MEMBER = type(type("_Probe", (), {"__slots__": ("x",)}).x)


def slot_offsets(cls):
    """The offsets of ``cls``'s slots ``kind, peer, src, dst, side, group, blocks``,
    or None when it keeps them otherwise (or is None: no steps)."""
    if cls is None:
        return None
    out = []
    for name in _FIELDS:
        descr = cls.__dict__.get(name)
        if type(descr) is not _MEMBER:
            return None
        out.append((<PyMemberDescrObject*>descr).d_member.offset)
    return tuple(out)


cdef inline object _slot(object obj, Py_ssize_t offset):
    cdef PyObject *value = (<PyObject **>((<char *><PyObject *>obj) + offset))[0]
    if value is NULL:
        raise AttributeError("a step's slot is empty")
    return <object>value


cdef inline int64_t _integer(object value, int64_t size, int64_t bad):
    """``value`` as a C integer, or ``bad`` when it is not in ``0..size-1``."""
    cdef int64_t v
    try:
        v = PyLong_AsLongLong(value)
    except OverflowError:
        return bad
    if v < 0 or v >= size:
        return bad
    return v


cdef inline Py_ssize_t _append(int64_t b, int64_t prev, int64_t nblocks,
                               int32_t[::1] block, int32_t[::1] length, Py_ssize_t e):
    """Add id ``b`` (folded: at most ``nblocks``) after ``prev`` to the entries, from
    entry ``e`` on: it extends the last run or starts one; returns the next entry."""
    if b == prev + 1 and b < nblocks:
        length[e - 1] += 1
        return e
    block[e] = <int32_t>b
    length[e] = 1
    return e + 1


cdef Py_ssize_t _runs_entries(const int64_t[::1] start, const int64_t[::1] step,
                              const int64_t[::1] count, int64_t nblocks,
                              int32_t[::1] block, int32_t[::1] length, Py_ssize_t e):
    """The entries of one step's block runs (as the tuple loop makes them), from
    entry ``e`` on; returns the next entry."""
    cdef Py_ssize_t q, i
    cdef int64_t b, prev = -2
    for q in range(start.shape[0]):
        for i in range(count[q]):
            b = min(start[q] + i * step[q], nblocks)
            e = _append(b, prev, nblocks, block, length, e)
            prev = b if b < nblocks else -2
    return e


def encode_programs(tuple programs, cls, codes, buffers, Py_ssize_t size,
                    Py_ssize_t nblocks, Py_ssize_t nsteps):
    """Every step of ``programs`` (a tuple of programs: sequences of steps) as arrays,
    in one pass: kind codes (int8), peers (int32; -1 none, -2 not a rank), buffer ids
    (int16; -1 none), left side and group (bool), the first entry of each step
    (int32, ``nsteps + 1``) and the entries: runs of consecutive block ids, as first
    block and length (int32; a block id from ``nblocks`` on is a run of its own,
    folded to ``nblocks``). ``cls`` is the class whose slots are read in place
    (None: there are no steps), ``codes`` maps kind names to codes, ``buffers``
    names to ids (numbering new ones); ``nsteps`` is the number of steps. Raises
    OverflowError when the ids do not fit those types."""
    if size >= 2**31 - 2 or nblocks >= 2**31 - 1:
        raise OverflowError("too many ranks or blocks for the prover")
    kind_a = np.empty(nsteps, dtype=np.int8)
    peer_a = np.empty(nsteps, dtype=np.int32)
    src_a = np.empty(nsteps, dtype=np.int16)
    dst_a = np.empty(nsteps, dtype=np.int16)
    left_a = np.zeros(nsteps, dtype=np.uint8)
    group_a = np.zeros(nsteps, dtype=np.uint8)
    first_a = np.empty(nsteps + 1, dtype=np.int32)
    block_a = np.empty(max(nsteps, 16), dtype=np.int32)
    length_a = np.empty(max(nsteps, 16), dtype=np.int32)
    cdef int8_t[::1] kind = kind_a
    cdef int32_t[::1] peer = peer_a
    cdef int16_t[::1] src = src_a
    cdef int16_t[::1] dst = dst_a
    cdef uint8_t[::1] left = left_a
    cdef uint8_t[::1] group = group_a
    cdef int32_t[::1] first = first_a
    cdef int32_t[::1] block = block_a
    cdef int32_t[::1] length = length_a
    cdef int64_t b, prev
    cdef Py_ssize_t capacity = block_a.shape[0]
    offsets = slot_offsets(cls)
    cdef bint fast = offsets is not None
    cdef Py_ssize_t o_kind = 0, o_peer = 0, o_src = 0, o_dst = 0, o_side = 0
    cdef Py_ssize_t o_group = 0, o_blocks = 0
    if fast:
        o_kind, o_peer, o_src, o_dst, o_side, o_group, o_blocks = offsets
    cdef object send = "send", recv = "recv", recv_combine = "recv_combine"
    cdef object copy = "copy", combine = "combine", left_side = "left"
    cdef object last_src = None, last_dst = None
    cdef int32_t last_src_id = -1, last_dst_id = -1, ident
    cdef Py_ssize_t i = 0, e = 0, j, n, r, r2, m, nprog = PyTuple_GET_SIZE(programs)
    cdef int8_t code
    cdef object step, k, p, s, d, blocks, prog, run_start, run_step, run_length
    cdef bint held
    cdef bint mine
    for r in range(nprog):
        prog = <object>PyTuple_GET_ITEM(programs, r)
        if type(prog) is not tuple:
            prog = tuple(prog)
        m = PyTuple_GET_SIZE(prog)
        for j in range(m):
            step = <object>PyTuple_GET_ITEM(prog, j)
            mine = fast and type(step) is cls
            if mine:
                k = _slot(step, o_kind)
                p = _slot(step, o_peer)
                s = _slot(step, o_src)
                d = _slot(step, o_dst)
                blocks = _slot(step, o_blocks)
            else:
                k, p, s, d, blocks = step.kind, step.peer, step.src, step.dst, step.blocks
            if k is send:
                code = 0
            elif k is recv:
                code = 1
            elif k is recv_combine:
                code = 2
            elif k is copy:
                code = 3
            elif k is combine:
                code = 4
            else:
                code = codes[k]
            kind[i] = code
            if code <= 2:
                peer[i] = <int32_t>_integer(p, size, -2)
            else:
                peer[i] = -1
            if s is not last_src:
                ident = buffers[s]
                if ident >= 2**15:
                    raise OverflowError("too many buffers for the prover")
                last_src, last_src_id = s, ident
            src[i] = <int16_t>last_src_id
            if d is not last_dst:
                ident = buffers[d]
                if ident >= 2**15:
                    raise OverflowError("too many buffers for the prover")
                last_dst, last_dst_id = d, ident
            dst[i] = <int16_t>last_dst_id
            if code == 2 or code == 4:
                if mine:
                    left[i] = _slot(step, o_side) == left_side
                    group[i] = bool(_slot(step, o_group))
                else:
                    left[i] = step.side == left_side
                    group[i] = bool(step.group)
            first[i] = <int32_t>e
            held = type(blocks) is not tuple
            if held:  # BlockRuns: their runs, read from its arrays
                try:
                    run_start, run_step, run_length = blocks.start, blocks.step, blocks.length
                except AttributeError:
                    raise TypeError("a step's blocks are neither a tuple nor runs")
                n = len(blocks)
            else:
                n = PyTuple_GET_SIZE(blocks)
            if e + n >= 2**31 - 1:
                raise OverflowError("too many blocks for the prover")
            if e + n > capacity:
                capacity = max(2 * capacity, e + n)
                grown = np.empty(capacity, dtype=np.int32)
                grown[:e] = block_a[:e]
                block_a = grown
                block = block_a
                grown = np.empty(capacity, dtype=np.int32)
                grown[:e] = length_a[:e]
                length_a = grown
                length = length_a
            prev = -2
            if held:
                e = _runs_entries(run_start, run_step, run_length, nblocks, block, length, e)
            else:
                for r2 in range(n):
                    b = _integer(<object>PyTuple_GET_ITEM(blocks, r2), nblocks, nblocks)
                    e = _append(b, prev, nblocks, block, length, e)
                    prev = b if b < nblocks else -2
            i += 1
    first[i] = <int32_t>e
    return (kind_a, peer_a, src_a, dst_a, left_a.view(bool), group_a.view(bool),
            first_a, block_a[:e], length_a[:e])
