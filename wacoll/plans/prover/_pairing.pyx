# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled comparison of matched messages (private; used by
:mod:`wacoll.plans.prover.pairing`).

numpy compared a send's entries with its receive's by laying out the entries of
every message twice (34 million for the combining all-to-all on 4096 ranks); here
one pass compares them message by message.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t

ctypedef fused first_t:
    int32_t
    int64_t

ctypedef fused block_t:
    int32_t
    int64_t


def unequal(const first_t[::1] first, const block_t[::1] block,
            const block_t[::1] length, const int64_t[::1] sends,
            const int64_t[::1] recvs, int64_t nb, uint8_t[::1] bad,
            uint8_t[::1] folded):
    """Per pair ``i``: whether send ``sends[i]`` and receive ``recvs[i]`` have other
    entries (``bad``), and whether, where they agree, an entry is an id folded to
    ``nb`` (``folded``: the real ids must be compared)."""
    cdef Py_ssize_t i, n = sends.shape[0]
    cdef int64_t s, r, k, count
    with nogil:
        for i in range(n):
            s, r = sends[i], recvs[i]
            count = first[s + 1] - first[s]
            bad[i] = count != first[r + 1] - first[r]
            folded[i] = 0
            if bad[i]:
                continue
            for k in range(count):
                if block[first[s] + k] != block[first[r] + k] or \
                        length[first[s] + k] != length[first[r] + k]:
                    bad[i] = 1
                    break
                if block[first[s] + k] == nb:
                    folded[i] = 1
