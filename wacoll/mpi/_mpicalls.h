/* The few MPI calls the compiled runner makes, reached through function pointers
 * that wacoll/mpi/runner.py looks up in the MPI library mpi4py loaded, at run time.
 *
 * No mpi.h is needed to build wacoll: the runner works under any MPI that mpi4py
 * runs with. MPI implementations differ in their C ABI. Requests, statuses and the
 * results of MPI_Test, MPI_Wait, MPI_Testany and MPI_Cancel are passed by pointer, so
 * those calls are the same for all; only a call that takes a communicator or a
 * datatype *by value* depends on how wide a handle is: an int in MPICH (and its
 * derivatives: Intel MPI, MVAPICH, Cray MPICH), a pointer in Open MPI and in the MPI
 * standard ABI. `hsize` says which (mpi4py's MPI._sizeof(MPI.Comm)), and MPI_Isend
 * and MPI_Irecv are called through the matching prototype. */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sched.h>

typedef struct {
    int hsize;                 /* bytes of a handle: 4 or 8 */
    intptr_t byte_type;        /* MPI_BYTE */
    intptr_t request_null;     /* MPI_REQUEST_NULL */
    void *isend, *irecv, *test, *testany, *cancel, *wait, *finalized;
} wacoll_mpi;

typedef int (*wacoll_reduce_fn)(int op, int left, int type, void *dst, const void *src,
                                Py_ssize_t n);

static int wacoll_isend(const wacoll_mpi *m, const void *buf, int n, int peer, int tag,
                        intptr_t comm, char *req)
{
    if (m->hsize == 4)
        return ((int (*)(const void *, int, int32_t, int, int, int32_t, int32_t *))m->isend)(
            buf, n, (int32_t)m->byte_type, peer, tag, (int32_t)comm, (int32_t *)req);
    return ((int (*)(const void *, int, void *, int, int, void *, void **))m->isend)(
        buf, n, (void *)m->byte_type, peer, tag, (void *)comm, (void **)req);
}

static int wacoll_irecv(const wacoll_mpi *m, void *buf, int n, int peer, int tag,
                        intptr_t comm, char *req)
{
    if (m->hsize == 4)
        return ((int (*)(void *, int, int32_t, int, int, int32_t, int32_t *))m->irecv)(
            buf, n, (int32_t)m->byte_type, peer, tag, (int32_t)comm, (int32_t *)req);
    return ((int (*)(void *, int, void *, int, int, void *, void **))m->irecv)(
        buf, n, (void *)m->byte_type, peer, tag, (void *)comm, (void **)req);
}

/* A status big enough for any MPI's MPI_Status (MPICH 20 bytes, Open MPI 24). */
typedef struct { int64_t words[16]; } wacoll_status;

static int wacoll_test(const wacoll_mpi *m, char *req, int *flag)
{
    wacoll_status status;
    return ((int (*)(void *, int *, void *))m->test)(req, flag, &status);
}

static int wacoll_testany(const wacoll_mpi *m, int n, char *reqs, int *index, int *flag)
{
    wacoll_status status;
    return ((int (*)(int, void *, int *, int *, void *))m->testany)(n, reqs, index, flag,
                                                                   &status);
}

static int wacoll_cancel(const wacoll_mpi *m, char *req)
{
    wacoll_status status;
    ((int (*)(void *))m->cancel)(req);
    return ((int (*)(void *, void *))m->wait)(req, &status);
}

/* Whether MPI_Finalize has completed (MPI_Finalized may be called at any time). */
static int wacoll_finalized(const wacoll_mpi *m)
{
    int flag = 1;
    if (((int (*)(int *))m->finalized)(&flag))
        return 1;
    return flag;
}

static int wacoll_is_null(const wacoll_mpi *m, const char *req)
{
    if (m->hsize == 4)
        return *(const int32_t *)req == (int32_t)m->request_null;
    return *(void *const *)req == (void *)m->request_null;
}

static void wacoll_set_null(const wacoll_mpi *m, char *req)
{
    if (m->hsize == 4)
        *(int32_t *)req = (int32_t)m->request_null;
    else
        *(void **)req = (void *)m->request_null;
}

static double wacoll_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void wacoll_nap(double seconds)
{
    struct timespec t;
    t.tv_sec = (time_t)seconds;
    t.tv_nsec = (long)((seconds - (double)t.tv_sec) * 1e9);
    nanosleep(&t, NULL);
}
