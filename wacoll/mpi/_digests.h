/* How the digests of calls with nothing to move fold into the next check's digest
 * (one formula for both compiled modules: the ring of checks of several clusters,
 * wacoll/mpi/_runner.pyx, and the node check of one cluster, _fastcall.pyx). */
#include <stdint.h>

#define WACOLL_FOLD_MOD 4294967291LL /* the largest prime below 2**32 */
#define WACOLL_FLUSHED 0x5EA1EDLL    /* what a flush check folds in last */

/* The running digest after `digest` is folded into `folded`. */
static inline int64_t wacoll_fold(int64_t folded, int64_t digest)
{
    return (folded % WACOLL_FOLD_MOD * 33 + digest % WACOLL_FOLD_MOD + 1) % WACOLL_FOLD_MOD;
}
