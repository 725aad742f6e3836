/* How the digests of calls with nothing to move fold into the next check's digest
 * (one formula for both compiled modules: the ring of checks of several clusters,
 * wacoll/mpi/_runner.pyx, and the node check of one cluster, _fastcall.pyx). */
#include <limits.h>
#include <stdint.h>

#define WACOLL_FOLD_MOD 4294967291LL /* the largest prime below 2**32 */
#define WACOLL_FLUSHED 0x5EA1EDLL    /* what a flush check folds in last */
/* Set in a one-cluster check's second word (its error code's, MAX-reduced) by a
 * rank that folded calls into it: after a failed check every rank knows whether
 * some rank's calls since the last check were folded, so that the ranks may be a
 * call apart (the rank whose count was 0 returned). Error codes stay below it. */
#define WACOLL_FOLDED_MARK (1LL << 40)

/* The running digest after `digest` is folded into `folded`. */
static inline int64_t wacoll_fold(int64_t folded, int64_t digest)
{
    return (folded % WACOLL_FOLD_MOD * 33 + digest % WACOLL_FOLD_MOD + 1) % WACOLL_FOLD_MOD;
}

/* One more call folded: `digest` into the running digest `*folded` of the `*n`
 * calls folded so far (`*n` stays above 0 once counting: it only says whether). */
static inline void wacoll_fold_call(int64_t *folded, int *n, int64_t digest)
{
    *folded = *n ? wacoll_fold(*folded, digest) : digest;
    *n = *n == INT_MAX ? 1 : *n + 1;
}

/* A check's four flags `words` with the running digest `folded` of the calls
 * folded before it mixed into their digest words. */
static inline void wacoll_fold_into(int64_t *words, int64_t folded)
{
    words[2] = wacoll_fold(folded, words[2]);
    words[3] = -words[2];
}
