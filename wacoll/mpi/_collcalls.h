/* The MPI library's blocking collectives a replayed one-cluster call makes
 * (wacoll/mpi/_fastcall.pyx, NativeCall), and its non-blocking ones a replayed
 * call the library runs on several clusters starts (wacoll/mpi/_runner.pyx,
 * LibraryCall), reached through function pointers that
 * wacoll/mpi/fastpath.py looks up in the MPI library mpi4py loaded, at run time:
 * a replayed call passes its buffers' addresses and counts straight to the
 * library, as mpi4py would after reading its arguments again.
 *
 * As in _mpicalls.h, only the width of a handle passed by value differs between
 * MPI implementations (an int in MPICH and its derivatives, a pointer in Open MPI
 * and the MPI standard ABI): `hsize` says which, and each call goes through the
 * matching prototype. */
#include <stdint.h>

enum {
    WACOLL_BCAST = 1,
    WACOLL_REDUCE = 2,
    WACOLL_ALLREDUCE = 3,
    WACOLL_GATHER = 4,
    WACOLL_SCATTER = 5,
    WACOLL_ALLGATHER = 6,
    WACOLL_ALLTOALL = 7,
};

typedef struct {
    int hsize;  /* bytes of a handle: 4 or 8 (0: not set) */
    void *fn[8];  /* indexed by the kinds above */
} wacoll_colls;

/* wacoll_collective's non-blocking form: the same collective started (the
 * library's MPI_I... function in `m`), its request's handle written at `request`. */
static inline int wacoll_icollective(const wacoll_colls *m, int kind, const void *sbuf,
                              int scount, void *rbuf, int rcount, intptr_t type,
                              intptr_t op, int root, intptr_t comm, void *request)
{
    void *f = m->fn[kind];
    if (m->hsize == 4) {
        int32_t t = (int32_t)type, o = (int32_t)op, c = (int32_t)comm;
        switch (kind) {
        case WACOLL_BCAST:
            return ((int (*)(void *, int, int32_t, int, int32_t, void *))f)(
                rbuf, rcount, t, root, c, request);
        case WACOLL_REDUCE:
            return ((int (*)(const void *, void *, int, int32_t, int32_t, int, int32_t,
                             void *))f)(sbuf, rbuf, scount, t, o, root, c, request);
        case WACOLL_ALLREDUCE:
            return ((int (*)(const void *, void *, int, int32_t, int32_t, int32_t,
                             void *))f)(sbuf, rbuf, scount, t, o, c, request);
        case WACOLL_GATHER:
        case WACOLL_SCATTER:
            return ((int (*)(const void *, int, int32_t, void *, int, int32_t, int,
                             int32_t, void *))f)(sbuf, scount, t, rbuf, rcount, t, root,
                                                 c, request);
        case WACOLL_ALLGATHER:
        case WACOLL_ALLTOALL:
            return ((int (*)(const void *, int, int32_t, void *, int, int32_t, int32_t,
                             void *))f)(sbuf, scount, t, rbuf, rcount, t, c, request);
        }
        return -1;
    }
    {
        void *t = (void *)type, *o = (void *)op, *c = (void *)comm;
        switch (kind) {
        case WACOLL_BCAST:
            return ((int (*)(void *, int, void *, int, void *, void *))f)(
                rbuf, rcount, t, root, c, request);
        case WACOLL_REDUCE:
            return ((int (*)(const void *, void *, int, void *, void *, int, void *,
                             void *))f)(sbuf, rbuf, scount, t, o, root, c, request);
        case WACOLL_ALLREDUCE:
            return ((int (*)(const void *, void *, int, void *, void *, void *,
                             void *))f)(sbuf, rbuf, scount, t, o, c, request);
        case WACOLL_GATHER:
        case WACOLL_SCATTER:
            return ((int (*)(const void *, int, void *, void *, int, void *, int, void *,
                             void *))f)(sbuf, scount, t, rbuf, rcount, t, root, c,
                                        request);
        case WACOLL_ALLGATHER:
        case WACOLL_ALLTOALL:
            return ((int (*)(const void *, int, void *, void *, int, void *, void *,
                             void *))f)(sbuf, scount, t, rbuf, rcount, t, c, request);
        }
        return -1;
    }
}

/* The collective `kind` from (sbuf, scount) to (rbuf, rcount), every buffer of
 * datatype `type` (a broadcast's buffer is rbuf; a reduction's count is scount;
 * op: the reduction's operator; root: the root's rank), on `comm`: the library's
 * return code. */
static inline int wacoll_collective(const wacoll_colls *m, int kind, const void *sbuf,
                             int scount, void *rbuf, int rcount, intptr_t type,
                             intptr_t op, int root, intptr_t comm)
{
    void *f = m->fn[kind];
    if (m->hsize == 4) {
        int32_t t = (int32_t)type, o = (int32_t)op, c = (int32_t)comm;
        switch (kind) {
        case WACOLL_BCAST:
            return ((int (*)(void *, int, int32_t, int, int32_t))f)(rbuf, rcount, t, root, c);
        case WACOLL_REDUCE:
            return ((int (*)(const void *, void *, int, int32_t, int32_t, int, int32_t))f)(
                sbuf, rbuf, scount, t, o, root, c);
        case WACOLL_ALLREDUCE:
            return ((int (*)(const void *, void *, int, int32_t, int32_t, int32_t))f)(
                sbuf, rbuf, scount, t, o, c);
        case WACOLL_GATHER:
        case WACOLL_SCATTER:
            return ((int (*)(const void *, int, int32_t, void *, int, int32_t, int,
                             int32_t))f)(sbuf, scount, t, rbuf, rcount, t, root, c);
        case WACOLL_ALLGATHER:
        case WACOLL_ALLTOALL:
            return ((int (*)(const void *, int, int32_t, void *, int, int32_t, int32_t))f)(
                sbuf, scount, t, rbuf, rcount, t, c);
        }
        return -1;
    }
    {
        void *t = (void *)type, *o = (void *)op, *c = (void *)comm;
        switch (kind) {
        case WACOLL_BCAST:
            return ((int (*)(void *, int, void *, int, void *))f)(rbuf, rcount, t, root, c);
        case WACOLL_REDUCE:
            return ((int (*)(const void *, void *, int, void *, void *, int, void *))f)(
                sbuf, rbuf, scount, t, o, root, c);
        case WACOLL_ALLREDUCE:
            return ((int (*)(const void *, void *, int, void *, void *, void *))f)(
                sbuf, rbuf, scount, t, o, c);
        case WACOLL_GATHER:
        case WACOLL_SCATTER:
            return ((int (*)(const void *, int, void *, void *, int, void *, int,
                             void *))f)(sbuf, scount, t, rbuf, rcount, t, root, c);
        case WACOLL_ALLGATHER:
        case WACOLL_ALLTOALL:
            return ((int (*)(const void *, int, void *, void *, int, void *, void *))f)(
                sbuf, scount, t, rbuf, rcount, t, c);
        }
        return -1;
    }
}
