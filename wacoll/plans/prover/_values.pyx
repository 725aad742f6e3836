# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled hops of moved data (private; :class:`wacoll.plans.prover.values.Hops`
uses it when it is built, and numpy, a visit at a time, otherwise).

A receive's hops are those of the write its send read, plus one across clusters,
and a copy's those of the write it copies; the run's visits are an order in which
every send runs before its receive and every step after its rank's earlier steps,
so one pass over the visits' receives and copies, an entry at a time, gives every
count. numpy takes
some twenty calls per visit for the same, and the combining all-to-all on 4096
ranks has about 12,000 visits over 48 million entries.
"""
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t

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
