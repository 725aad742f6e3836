# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled hops of moved data (private; used by
:class:`wacoll.plans.prover.values.Hops`).

A receive's hops are those of the write its send read, plus one across clusters,
and a copy's those of the write it copies; the run's visits are an order in which
every send runs before its receive and every step after its rank's earlier steps,
so one pass over the visits' receives and copies, an entry at a time, gives every
count. numpy took
some twenty calls per visit for the same, and the combining all-to-all on 4096
ranks has about 12,000 visits over 48 million entries.
"""
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc

include "_indices.pxi"

#: The kind code of a receive (wacoll.plans.prover.encode.RECV).
cdef int8_t RECV = 1


cdef inline int32_t _of(const ident_t[::1] read_def, const int32_t[::1] hops,
                        int64_t p) noexcept nogil:
    """The hops of the write entry ``p`` reads (0: the initial data)."""
    cdef int64_t d = read_def[p]
    return hops[d] if d >= 0 else 0


cdef inline void _receive(int64_t row, int64_t send, int32_t wide,
                          const ident_t[::1] first, const int64_t[::1] offsets,
                          const ident_t[::1] read_def, int32_t[::1] hops,
                          bint single) noexcept nogil:
    """Count the hops of the entries of the receive at ``row`` from ``send``."""
    cdef int64_t e, p, p_end, at, stop_at, carried, h
    if single:
        hops[row] = _of(read_def, hops, send) + wide
        return
    p = first[send]
    p_end = first[send + 1]
    for e in range(first[row], first[row + 1]):
        at = offsets[first[send]] + offsets[e] - offsets[first[row]]
        while p + 1 < p_end and offsets[p + 1] <= at:
            p += 1
        stop_at = at + offsets[e + 1] - offsets[e]
        carried = _of(read_def, hops, p)
        h = p + 1
        while h < p_end and offsets[h] < stop_at:
            if _of(read_def, hops, h) > carried:
                carried = _of(read_def, hops, h)
            h += 1
        hops[e] = <int32_t>carried + wide


def hops_in_order(const int64_t[::1] visits, const int64_t[::1] recv_rows,
                  const int64_t[::1] recv_send, const int64_t[::1] recv_at,
                  const int64_t[::1] copy_rows, const int64_t[::1] copy_at,
                  const int8_t[::1] kind, const rank_t[::1] rank,
                  const int64_t[::1] clusters, const ident_t[::1] first,
                  const int64_t[::1] offsets, const ident_t[::1] read_def,
                  const uint8_t[::1] writes, int32_t[::1] hops):
    """Fill ``hops`` for every entry of the receives and copies in the visits' rows.

    ``visits`` are (first row, stop row) pairs in the run's order. The receives are
    ``recv_rows`` (sorted; those of ``kind`` ``RECV`` carry hops) meeting the sends
    at ``recv_send``, and the copies ``copy_rows`` (sorted); visit ``v``'s are
    ``recv_at[v]`` and ``copy_at[v]`` on. A receive crosses the wide area when its
    send's rank is in another of ``clusters``. ``offsets`` are the blocks before
    every entry (empty when every step has one entry of one block). A receive's
    entry takes the most hops of the send's entries that carry its blocks plus one
    across clusters; a copy's entry that writes, those of the write it reads.
    """
    cdef Py_ssize_t v, nvisits = visits.shape[0] // 2
    cdef int64_t stop, c, k, row, send, e
    cdef Py_ssize_t nrecv = recv_rows.shape[0], ncopy = copy_rows.shape[0]
    cdef bint single = offsets.shape[0] == 0
    with nogil:
        for v in range(nvisits):
            stop = visits[2 * v + 1]
            c, k = recv_at[v], copy_at[v]
            while True:  # the visit's receives and copies, in row order
                if c < nrecv and recv_rows[c] < stop and \
                        (k >= ncopy or copy_rows[k] >= stop or recv_rows[c] < copy_rows[k]):
                    row = recv_rows[c]
                    if kind[row] == RECV:
                        send = recv_send[c]
                        _receive(row, send, clusters[rank[send]] != clusters[rank[row]],
                                 first, offsets, read_def, hops, single)
                    c += 1
                elif k < ncopy and copy_rows[k] < stop:
                    row = copy_rows[k]
                    for e in range(first[row], first[row + 1]):
                        if writes[e]:
                            hops[e] = _of(read_def, hops, e)
                    k += 1
                else:
                    break


# ------------------------------------------------------------------- reductions
#: The kind codes of wacoll.plans.prover.encode (SEND, RECV_COMBINE, COPY, COMBINE).
cdef int8_t SEND = 0
cdef int8_t RECV_COMBINE = 2
cdef int8_t COPY = 3
#: A read that sees the operation's initial data (wacoll.plans.prover.flow.INIT).
cdef int64_t INIT = -1


cdef inline int64_t _mix(int64_t a, int64_t b) noexcept nogil:
    """A hash of the pair ``(a, b)``."""
    cdef uint64_t h = (<uint64_t>a) * 0x9E3779B97F4A7C15ULL ^ \
        ((<uint64_t>b) + 0x632BE59BD9B4E019ULL + ((<uint64_t>a) << 6))
    h ^= h >> 29
    return <int64_t>h


cdef class _Pairs:
    """An open-addressing table of ``pair(a, b)``'s expressions (no fault), grown
    at half full."""
    cdef int64_t *rows
    cdef int64_t mask, used
    cdef object pair

    def __cinit__(self, pair):
        self.pair = pair
        self.mask = 1023
        self.used = 0
        self.rows = self._empty(self.mask + 1)

    cdef int64_t *_empty(self, int64_t n) except NULL:
        cdef int64_t i
        cdef int64_t *rows = <int64_t *>malloc(3 * n * sizeof(int64_t))
        if rows == NULL:
            raise MemoryError()
        for i in range(n):
            rows[3 * i] = -1
        return rows

    cdef void release(self):
        free(self.rows)
        self.rows = NULL

    cdef int64_t _at(self, int64_t a, int64_t z) noexcept:
        cdef int64_t i = _mix(a, z) & self.mask
        while self.rows[3 * i] != -1 and \
                (self.rows[3 * i] != a or self.rows[3 * i + 1] != z):
            i = (i + 1) & self.mask
        return i

    cdef int64_t find(self, int64_t a, int64_t z) except -2:
        """The expression of ``a (+) z``, or -1 for a fault."""
        cdef int64_t i = self._at(a, z), j, n
        cdef int64_t *old
        if self.rows[3 * i] != -1:
            return self.rows[3 * i + 2]
        found = self.pair(a, z)
        if found[0]:
            return -1
        if 2 * (self.used + 1) > self.mask + 1:  # grow, and place the pairs again
            old, n = self.rows, self.mask + 1
            self.rows = self._empty(2 * n)
            self.mask = 2 * n - 1
            for j in range(n):
                if old[3 * j] != -1:
                    i = self._at(old[3 * j], old[3 * j + 1])
                    self.rows[3 * i] = old[3 * j]
                    self.rows[3 * i + 1] = old[3 * j + 1]
                    self.rows[3 * i + 2] = old[3 * j + 2]
            free(old)
            i = self._at(a, z)
        self.rows[3 * i] = a
        self.rows[3 * i + 1] = z
        self.rows[3 * i + 2] = found[1]
        self.used += 1
        return found[1]


cdef int64_t _reductions(const int64_t[::1] visits, const int64_t[::1] recv_rows,
                         const int64_t[::1] recv_send, const int64_t[::1] recv_at,
                         const int8_t[::1] kind, const rank_t[::1] rank,
                         const uint8_t[::1] left, const int64_t[::1] clusters,
                         const int64_t[::1] first, const int64_t[::1] offsets,
                         const ident_t[::1] read_def, const ident_t[::1] read2_def,
                         const int64_t[::1] slot, const int64_t[::1] slot_group,
                         const int64_t[::1] group_slots, const int64_t[::1] group_start,
                         const int64_t[::1] group_size, const int64_t[::1] woff,
                         int32_t[::1] val, int32_t[::1] hops, int64_t[::1] current,
                         _Pairs pairs) except -2:
    """:func:`reductions_in_order`'s pass."""
    cdef Py_ssize_t v, nvisits = visits.shape[0] // 2
    cdef Py_ssize_t nrecv = recv_rows.shape[0]
    cdef int64_t row, stop, c, e, send = 0, sender = 0, p = 0, p_end = 0, at = 0
    cdef int64_t n, w, b, pos, d, s, g, j, dd, x, hx, h, acc, hacc, inc, hinc
    cdef int64_t a, z, r, last_a = -1, last_z = -1, last_e = -1, wide = 0
    cdef int8_t k
    cdef bint recv
    for v in range(nvisits):
        stop = visits[2 * v + 1]
        c = recv_at[v]
        for row in range(visits[2 * v], stop):
            k = kind[row]
            if k == SEND:
                continue
            r = rank[row]
            recv = k == RECV or k == RECV_COMBINE
            if recv:
                while c < nrecv and recv_rows[c] < row:
                    c += 1
                if c >= nrecv or recv_rows[c] != row:
                    return row
                send = recv_send[c]
                sender = rank[send]
                wide = clusters[sender] != clusters[r]
                p, p_end = first[send], first[send + 1]
            for e in range(first[row], first[row + 1]):
                s = slot[e]
                if s < 0:
                    return row
                n = offsets[e + 1] - offsets[e]
                w = woff[e]
                h = 0
                if recv:
                    at = offsets[first[send]] + offsets[e] - offsets[first[row]]
                hacc = 0
                if k != RECV:
                    d = read_def[e]
                    if d < 0 and d != INIT:
                        return row
                    if d >= 0:
                        hacc = hops[d]
                for b in range(n):
                    if recv:  # the block's value in the write the send reads
                        pos = at + b
                        while p + 1 < p_end and offsets[p + 1] <= pos:
                            p += 1
                        if pos < offsets[p] or pos >= offsets[p + 1]:
                            return row
                        d = read_def[p]
                        if d >= 0:
                            inc = val[woff[d] + pos - offsets[p]]
                            hinc = hops[d] + wide
                        elif d == INIT:
                            inc, hinc = sender, wide
                        else:
                            return row
                    if k == RECV:
                        if inc == r:  # (its "in" holds the rank's contribution)
                            return row
                        g = slot_group[s]
                        for j in range(group_size[g]):
                            dd = current[group_slots[group_start[g] + j]]
                            if dd >= 0 and val[woff[dd] + b] == inc:
                                return row  # received again
                        val[w + b] = <int32_t>inc
                        if hinc > h:
                            h = hinc
                        continue
                    d = read_def[e]
                    acc = val[woff[d] + b] if d >= 0 else r
                    if k == COPY:
                        val[w + b] = <int32_t>acc
                        h = hacc
                        continue
                    if k != RECV_COMBINE:  # a local combine's second operand
                        d = read2_def[e]
                        if d >= 0:
                            inc, hinc = val[woff[d] + b], hops[d]
                        elif d == INIT:
                            inc, hinc = r, 0
                        else:
                            return row
                    if left[row]:
                        a, z = inc, acc
                    else:
                        a, z = acc, inc
                    if a != last_a or z != last_z:
                        last_e = pairs.find(a, z)
                        if last_e < 0:
                            return row
                        last_a, last_z = a, z
                    val[w + b] = <int32_t>last_e
                    if hinc > h:
                        h = hinc
                    if hacc > h:
                        h = hacc
                hops[e] = <int32_t>h
                current[s] = e
    return -1


def reductions_in_order(const int64_t[::1] visits, const int64_t[::1] recv_rows,
                        const int64_t[::1] recv_send, const int64_t[::1] recv_at,
                        const int8_t[::1] kind, const rank_t[::1] rank,
                        const uint8_t[::1] left, const int64_t[::1] clusters,
                        const int64_t[::1] first, const int64_t[::1] offsets,
                        const ident_t[::1] read_def, const ident_t[::1] read2_def,
                        const int64_t[::1] slot, const int64_t[::1] slot_group,
                        const int64_t[::1] group_slots, const int64_t[::1] group_start,
                        const int64_t[::1] group_size, const int64_t[::1] woff,
                        int32_t[::1] val, int32_t[::1] hops, int64_t[::1] current,
                        object pair):
    """Carry the expression of every block of every write through the visits, in
    order; return -1, or the row of the first step whose proof needs the prover's
    exact pass (a fault, or anything this pass does not take).

    ``visits`` are (first row, stop row) pairs in the run's order, ``recv_at`` the
    first receive of each. A piece ``e`` covers blocks ``offsets[e]`` on of its
    step; a writing piece keeps one expression per block in ``val`` from
    ``woff[e]`` on, and the most wide-area hops of its blocks in ``hops[e]``.
    ``current`` holds each slot's last write so far (-1: none); a (rank, block)'s
    slots are ``group_slots[group_start[g]:][:group_size[g]]`` for its group ``g``.
    ``pair(a, b)`` is ``(fault, expression)`` of ``a (+) b``; it is asked once per
    pair (a hash table keeps its answers).
    """
    cdef _Pairs pairs = _Pairs(pair)
    try:
        return _reductions(visits, recv_rows, recv_send, recv_at, kind, rank, left,
                           clusters, first, offsets, read_def, read2_def, slot,
                           slot_group, group_slots, group_start, group_size, woff, val,
                           hops, current, pairs)
    finally:
        pairs.release()
