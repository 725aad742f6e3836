# The index types the checker's compiled passes take (included by _flow.pyx and
# _values.pyx): a rank as the steps keep it (int16 below 2**15 ranks), and an entry
# number (int32 below 2**31 entries).
from libc.stdint cimport int16_t, int32_t, int64_t

ctypedef fused rank_t:
    int16_t
    int32_t
    int64_t

ctypedef fused ident_t:
    int32_t
    int64_t
