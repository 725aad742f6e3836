# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled half of the prover's dataflow (private; used by
:mod:`wacoll.plans.prover.flow`).

:func:`access_keys` lays out the accesses of every entry in one pass, and
:func:`defs_after_sort` reads them, sorted by key, in one more: numpy took some
twenty passes and as many arrays of temporaries for the same, over 60 million
accesses in the combining all-to-all on 4096 ranks.
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t

include "_indices.pxi"

ctypedef fused slot_t:
    int32_t
    int64_t

ctypedef fused block_t:
    int32_t
    int64_t


def access_keys(const rank_t[::1] rank, const block_t[::1] block, int64_t nb,
                const int16_t[::1] buf1, const uint8_t[::1] has1,
                const int16_t[::1] buf2, const uint8_t[::1] has2,
                const int16_t[::1] bufw, const uint8_t[::1] hasw,
                const int64_t[::1] compact, int64_t nkey, int64_t[::1] keys,
                ident_t[::1] ident, uint8_t[::1] what, ident_t[::1] read_def,
                ident_t[::1] read2_def, slot_t[::1] slot, ident_t no_read,
                int64_t shift):
    """Lay out every entry's accesses in time order (its first read, its second, its
    write, where ``has1``, ``has2``, ``hasw`` say it has one): their keys ``(rank *
    nb + block) * nkey + compact[buffer]``, their entries and what they are (0, 1:
    the first or second read, 2: the write); and set every entry's reads to
    ``no_read`` and its slot to -1. ``buf2``, ``has2`` and ``read2_def`` may be
    empty (no entry reads twice). With ``shift`` > 0 a key holds its access's
    number in its low ``shift`` bits (a plain sort of the keys is then stable)."""
    cdef Py_ssize_t e, n = rank.shape[0], a = 0
    cdef bint twice = has2.shape[0] > 0
    cdef int64_t base
    with nogil:
        for e in range(n):
            base = (<int64_t>rank[e] * nb + block[e]) * nkey
            read_def[e] = no_read
            slot[e] = -1
            if has1[e]:
                keys[a] = ((base + compact[buf1[e]]) << shift) | (a if shift else 0)
                ident[a] = <ident_t>e
                what[a] = 0
                a += 1
            if twice:
                read2_def[e] = no_read
                if has2[e]:
                    keys[a] = ((base + compact[buf2[e]]) << shift) | (a if shift else 0)
                    ident[a] = <ident_t>e
                    what[a] = 1
                    a += 1
            if hasw[e]:
                keys[a] = ((base + compact[bufw[e]]) << shift) | (a if shift else 0)
                ident[a] = <ident_t>e
                what[a] = 2
                a += 1


cdef inline int64_t _sorted(const int64_t[::1] keys, const int64_t[::1] order,
                           int64_t shift, Py_ssize_t i, int64_t *access) noexcept nogil:
    """The key of the ``i``-th access in key order, and its number in ``access``:
    ``keys`` sorted with the numbers in their low ``shift`` bits, or (``shift`` 0)
    ``keys[order]`` sorted."""
    cdef int64_t k
    if shift:
        k = keys[i]
        access[0] = k & ((<int64_t>1 << shift) - 1)
        return k >> shift
    access[0] = order[i]
    return keys[order[i]]


def count_slots(const int64_t[::1] keys, const int64_t[::1] order, int64_t shift):
    """The number of distinct keys (see :func:`_sorted`)."""
    cdef Py_ssize_t i, n = keys.shape[0]
    cdef int64_t count = 0, k, prev = 0, j
    with nogil:
        for i in range(n):
            k = _sorted(keys, order, shift, i, &j)
            if i == 0 or k != prev:
                count += 1
            prev = k
    return count


def defs_after_sort(const int64_t[::1] keys, const ident_t[::1] ident,
                    const uint8_t[::1] what, const int64_t[::1] order, int64_t shift,
                    int64_t nb,
                    int64_t nkey, const int16_t[::1] names, ident_t missing,
                    ident_t[::1] read_def, ident_t[::1] read2_def, slot_t[::1] slot,
                    rank_t[::1] slot_rank, block_t[::1] slot_block,
                    int16_t[::1] slot_buf, ident_t[::1] slot_last, uint8_t[::1] earlier):
    """In one pass over the accesses sorted by key (stably: in time order within a
    key; see :func:`_sorted`), for every entry: the write its first and second reads see (``missing``:
    none), the slot (distinct key) its write goes to; per slot its rank, block,
    buffer (``names`` by number) and last write (-1: none); and, when ``earlier`` is
    not empty, per writing entry whether its (rank, block) was written earlier in
    any buffer (keys ``(rank * nb + block) * nkey + buffer``)."""
    cdef Py_ssize_t i, p, g_end, n = keys.shape[0]
    cdef int64_t k, prev = 0, group, r = 0, j
    cdef slot_t s = -1
    cdef ident_t last = -1, e, first_write
    cdef bint want = earlier.shape[0] > 0
    cdef uint8_t w
    with nogil:
        i = 0
        while i < n:
            group = _sorted(keys, order, shift, i, &j) // nkey
            while nb > 0 and group >= (r + 1) * nb:  # (sorted keys: ranks only grow)
                r += 1
            g_end = i + 1
            while g_end < n and _sorted(keys, order, shift, g_end, &j) // nkey == group:
                g_end += 1
            if want:
                first_write = -1
                for p in range(i, g_end):
                    _sorted(keys, order, shift, p, &j)
                    if what[j] == 2:
                        e = ident[j]
                        if first_write < 0 or e < first_write:
                            first_write = e
            for p in range(i, g_end):
                k = _sorted(keys, order, shift, p, &j)
                if p == i or k != prev:
                    if s >= 0:
                        slot_last[s] = last
                    s += 1
                    slot_rank[s] = <rank_t>r
                    slot_block[s] = <block_t>(group - r * nb)
                    slot_buf[s] = names[k - group * nkey]
                    last = -1
                    prev = k
                e = ident[j]
                w = what[j]
                if w == 2:
                    slot[e] = s
                    last = e
                    if want:
                        earlier[e] = first_write < e
                elif w == 0:
                    read_def[e] = last if last >= 0 else missing
                else:
                    read2_def[e] = last if last >= 0 else missing
            i = g_end
        if s >= 0:
            slot_last[s] = last
