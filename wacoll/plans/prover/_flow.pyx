# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled half of the checker's dataflow (private; :mod:`wacoll.plans.prover.flow`
uses it when it is built, and numpy with the same result otherwise).

:func:`runs_after_sort` does in one pass over the sorted accesses what takes numpy
eight passes and as many arrays of temporaries: at 4096 ranks a plan with a message
per pair of ranks has 33.5 million accesses.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t

ctypedef fused ident_t:
    int32_t
    int64_t


def runs_after_sort(const int64_t[::1] keys, const ident_t[::1] ident,
                    const uint8_t[::1] is_write, const int64_t[::1] order,
                    int64_t[::1] skeys, uint8_t[::1] head, ident_t[::1] last_ident,
                    ident_t[::1] ident_sorted):
    """Fill, per sorted position ``i`` (access ``order[i]``): its key, whether it
    starts a run of equal keys, the ident of the last write at or before it in its
    run (-1: none), and its ident."""
    cdef Py_ssize_t i, j, n = order.shape[0]
    cdef int64_t k, prev = 0
    cdef ident_t last = -1, d
    with nogil:
        for i in range(n):
            j = order[i]
            k = keys[j]
            skeys[i] = k
            if i == 0 or k != prev:
                head[i] = 1
                last = -1
            else:
                head[i] = 0
            prev = k
            d = ident[j]
            ident_sorted[i] = d
            if is_write[j]:
                last = d
            last_ident[i] = last
