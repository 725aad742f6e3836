# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled cut of entries into pieces (private; used by
:mod:`wacoll.plans.prover.pieces`).

numpy found the edges inside entries of several blocks with a search of every edge
of every rank in the merged ranges of such entries: eight passes over arrays as long
as the entries (34 million for the combining all-to-all on 4096 ranks). Here one
rank at a time marks its edges in a bitmap of its block ids (2 MiB at 4096 ranks),
reads the marks inside each of its entries of several blocks, keeps them, and clears
the bitmap; a second pass writes the pieces.
"""
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc

import numpy as np

ctypedef fused index_t:
    int32_t
    int64_t

cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil


cdef inline void _flip(uint64_t *bits, int64_t at, bint on) noexcept nogil:
    """Set (``on``) or clear bit ``at``."""
    if on:
        bits[at >> 6] |= (<uint64_t>1) << (at & 63)
    else:
        bits[at >> 6] &= ~((<uint64_t>1) << (at & 63))


cdef inline int64_t _next_mark(const uint64_t *bits, int64_t at, int64_t stop) noexcept nogil:
    """The first marked id from ``at`` on and before ``stop``, else ``stop``."""
    cdef int64_t w
    cdef uint64_t word
    if at >= stop:
        return stop
    w = at >> 6
    word = bits[w] & (~(<uint64_t>0) << (at & 63))
    while True:
        if word:
            at = (w << 6) + __builtin_ctzll(word)
            return at if at < stop else stop
        w += 1
        if (w << 6) >= stop:
            return stop
        word = bits[w]


cdef struct _Cuts:
    int64_t *at
    int64_t size
    int64_t capacity


cdef int _keep(_Cuts *cuts, int64_t at) noexcept nogil:
    """Append ``at`` to ``cuts``; -1 when memory runs out."""
    cdef int64_t *grown
    if cuts.size == cuts.capacity:
        grown = <int64_t *>realloc(cuts.at, 2 * cuts.capacity * sizeof(int64_t))
        if grown == NULL:
            return -1
        cuts.at, cuts.capacity = grown, 2 * cuts.capacity
    cuts.at[cuts.size] = at
    cuts.size += 1
    return 0


cdef void _edges(const index_t[::1] block, const index_t[::1] length,
                 Py_ssize_t e0, Py_ssize_t e1, const int64_t[::1] edges,
                 Py_ssize_t d0, Py_ssize_t d1, int64_t nb, uint64_t *bits,
                 bint on) noexcept nogil:
    """Mark (``on``) or clear in ``bits`` where entries ``e0..e1-1`` begin and end,
    and the layout edges ``d0..d1-1`` within ``0..nb``."""
    cdef Py_ssize_t e, d
    for e in range(e0, e1):
        _flip(bits, block[e], on)
        _flip(bits, block[e] + length[e], on)
    for d in range(d0, d1):
        if 0 <= edges[d] <= nb:
            _flip(bits, edges[d], on)


cdef int _rank(const index_t[::1] block, const index_t[::1] length,
               Py_ssize_t e0, Py_ssize_t e1, const int64_t[::1] edges,
               Py_ssize_t d0, Py_ssize_t d1, int64_t nb, uint64_t *bits,
               int64_t[::1] count, _Cuts *cuts) noexcept nogil:
    """Cut entries ``e0..e1-1`` (one rank's) at its edges: the pieces of each entry
    into ``count`` and the places it is cut at, in order, appended to ``cuts``
    (-1 when memory runs out)."""
    cdef Py_ssize_t e
    cdef int64_t b, end, cut
    for e in range(e0, e1):
        count[e] = 1
    for e in range(e0, e1):
        if length[e] > 1:
            break
    else:
        return 0
    _edges(block, length, e0, e1, edges, d0, d1, nb, bits, True)
    for e in range(e0, e1):
        if length[e] == 1:
            continue
        b = block[e]
        end = b + length[e]
        cut = _next_mark(bits, b + 1, end)
        while cut < end:
            count[e] += 1
            if _keep(cuts, cut) < 0:
                return -1
            cut = _next_mark(bits, cut + 1, end)
    _edges(block, length, e0, e1, edges, d0, d1, nb, bits, False)
    return 0


def cut(const index_t[::1] block, const index_t[::1] length, const int64_t[::1] bounds,
        const int64_t[::1] edges, const int64_t[::1] edge_bounds, int64_t nb):
    """The pieces of every entry: (the first piece of every entry and one past the
    last, their first blocks, their lengths; blocks and lengths of the dtype of
    ``block``), or (None, None, None) when no entry is cut.

    Rank ``r``'s entries are ``bounds[r]:bounds[r + 1]`` and its edges from the
    operation's layout ``edges[edge_bounds[r]:edge_bounds[r + 1]]`` (ids outside
    ``0..nb`` are ignored). An entry of several blocks is cut at every place inside
    it where an entry of its rank begins or ends, or at a layout edge.
    """
    cdef Py_ssize_t n = block.shape[0], size = bounds.shape[0] - 1, r, e
    cdef int64_t k, c = 0, at = 0, b, pieces, failed = 0
    count_array = np.empty(n + 1, dtype=np.int64)
    cdef int64_t[::1] count = count_array
    cdef index_t[::1] out_block, out_length
    cdef _Cuts cuts
    # ids run to nb + 1 (the end of an entry folded to nb)
    cdef uint64_t *bits = <uint64_t *>calloc((nb + 2) // 64 + 2, sizeof(uint64_t))
    cuts.capacity, cuts.size = 1024, 0
    cuts.at = <int64_t *>malloc(cuts.capacity * sizeof(int64_t))
    try:
        if bits == NULL or cuts.at == NULL:
            raise MemoryError()
        with nogil:
            for r in range(size):
                if _rank(block, length, bounds[r], bounds[r + 1], edges,
                         edge_bounds[r], edge_bounds[r + 1], nb, bits, count,
                         &cuts) < 0:
                    failed = 1
                    break
        if failed:
            raise MemoryError()
        if cuts.size == 0:
            return None, None, None
        dtype = np.int32 if index_t is int32_t else np.int64
        block_array = np.empty(n + cuts.size, dtype=dtype)
        length_array = np.empty(n + cuts.size, dtype=dtype)
        out_block, out_length = block_array, length_array
        with nogil:
            for e in range(n):
                b = block[e]
                pieces = count[e]
                count[e] = at  # (from here on: the entry's first piece)
                for k in range(pieces - 1):
                    out_block[at] = b
                    out_length[at] = <index_t>(cuts.at[c] - b)
                    b = cuts.at[c]
                    c += 1
                    at += 1
                out_block[at] = b
                out_length[at] = <index_t>(block[e] + length[e] - b)
                at += 1
        count_array[n] = at
        return count_array, block_array, length_array
    finally:
        free(bits)
        free(cuts.at)
