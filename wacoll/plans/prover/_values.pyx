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
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t

ctypedef fused idx_t:
    int32_t
    int64_t


cdef inline int32_t _of(const idx_t[::1] read_def, const int32_t[::1] hops,
                        int64_t p) noexcept nogil:
    """The hops of the write entry ``p`` reads (0: the initial data)."""
    cdef int64_t d = read_def[p]
    return hops[d] if d >= 0 else 0


def hops_in_order(const int64_t[::1] visits, const int64_t[::1] send_of,
                  const uint8_t[::1] wide, const idx_t[::1] first,
                  const int64_t[::1] offsets, const idx_t[::1] read_def,
                  const uint8_t[::1] writes, int32_t[::1] hops):
    """Fill ``hops`` for every entry of the receives and copies in the visits' rows.

    ``visits`` are (first row, stop row) pairs in the run's order; ``send_of`` gives
    per row the row of the send a receive meets, -2 for a copy, -1 for any other
    step, and ``wide`` whether that send is in another cluster; ``offsets`` are the
    blocks before every entry (empty when every step has one entry of one block).
    A receive's entry takes the most hops of the send's entries that carry its
    blocks; a copy's entry that writes, those of the write it reads.
    """
    cdef Py_ssize_t v, nvisits = visits.shape[0] // 2
    cdef int64_t row, send, e, p, p_end, at, stop_at, carried, h
    cdef bint single = offsets.shape[0] == 0
    with nogil:
        for v in range(nvisits):
            for row in range(visits[2 * v], visits[2 * v + 1]):
                send = send_of[row]
                if send == -2:
                    for e in range(first[row], first[row + 1]):
                        if writes[e]:
                            hops[e] = _of(read_def, hops, e)
                    continue
                if send < 0:
                    continue
                if single:
                    hops[row] = _of(read_def, hops, send) + wide[row]
                    continue
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
                    hops[e] = <int32_t>carried + wide[row]
