# cython: language_level=3
"""The compiled runner of lowered programs (private; the wrapper is
:mod:`wacoll.mpi.runner`).

A :class:`Runner` holds one rank's lowered program as two int64 tables (steps and
byte runs, made by :func:`wacoll.mpi.runner.compile_program`) and runs it with the
GIL released: every receive posted at the start, then the steps in program order,
as :class:`wacoll.mpi.executor.ProgramRun` does in Python, through the MPI calls of
``_mpicalls.h`` and the reduction kernel of :mod:`wacoll._kernels`.

:func:`drive` runs a call's work and its cross-rank check (another runner, on its
own communicator) together: beside each other, or the check first.

A wait that lasts runs the process's signal handlers now and then (with the GIL, in
the main thread): when one raises (Ctrl-C), the run is cancelled and the exception
raised (see :mod:`wacoll.mpi.interrupts`).
"""
cimport cython
from cpython.exc cimport PyErr_CheckSignals
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport INT64_MIN, int32_t, int64_t, intptr_t, uint64_t
from libc.string cimport memcmp, memcpy, memmove

import numpy as np

from wacoll.mpi._fastcall import count_digest, flags_template, fold_digest, replaced
from wacoll.plans.select import NATIVE

cdef extern from *:
    # (GCC's and Clang's; the bits of a segment mask)
    int __builtin_popcountll(unsigned long long) nogil

cdef extern from "_digests.h" nogil:
    # the digest a flush check folds in after the folded calls' (any fixed value)
    int64_t _FLUSHED "WACOLL_FLUSHED"
    void _fold_call "wacoll_fold_call"(int64_t *folded, int *n, int64_t digest)
    void _fold_into "wacoll_fold_into"(int64_t *words, int64_t folded)


cdef extern from "_shmem.h":
    int64_t wacoll_load_acquire(int64_t *p) noexcept nogil
    void wacoll_store_release(int64_t *p, int64_t v) noexcept nogil
    void wacoll_spin_lock(int *lock) noexcept nogil
    void wacoll_spin_unlock(int *lock) noexcept nogil


cdef extern from "_collcalls.h" nogil:
    ctypedef struct wacoll_colls:
        int hsize
        void *fn[8]
    int wacoll_icollective(const wacoll_colls *m, int kind, const void *sbuf,
                           int scount, void *rbuf, int rcount, intptr_t type,
                           intptr_t op, int root, intptr_t comm, void *request)


cdef extern from "_mpicalls.h" nogil:
    ctypedef struct wacoll_mpi:
        int hsize
        intptr_t byte_type
        intptr_t request_null
        void *isend
        void *irecv
        void *test
        void *testany
        void *cancel
        void *wait
        void *finalized
    ctypedef int (*wacoll_reduce_fn)(int, int, int, void *, const void *,
                                     Py_ssize_t) noexcept nogil
    int wacoll_isend(const wacoll_mpi *m, const void *buf, int n, int peer, int tag,
                     intptr_t comm, char *req)
    int wacoll_irecv(const wacoll_mpi *m, void *buf, int n, int peer, int tag,
                     intptr_t comm, char *req)
    int wacoll_test(const wacoll_mpi *m, char *req, int *flag)
    int wacoll_testany(const wacoll_mpi *m, int n, char *reqs, int *index, int *flag)
    int wacoll_cancel(const wacoll_mpi *m, char *req)
    int wacoll_finalized(const wacoll_mpi *m)
    int wacoll_is_null(const wacoll_mpi *m, const char *req)
    void wacoll_set_null(const wacoll_mpi *m, char *req)
    double wacoll_now()
    void wacoll_nap(double seconds)
    int sched_yield()

# Step kinds and the columns of a step's row (see wacoll.mpi.runner.compile_program).
cdef enum:
    K_SEND = 0
    K_RECV = 1
    K_RECV_COMBINE = 2
    K_COPY = 3
    K_COMBINE = 4

cdef enum:
    C_KIND = 0
    C_PEER = 1
    C_NSRC = 2
    C_NDST = 3
    C_SRC0 = 4
    C_DST0 = 5
    C_BYTES = 6
    C_STAGE = 7
    C_DIRECT = 8
    C_LEFT = 9
    C_SLOT = 10
    STEP_COLUMNS = 12
    RUN_COLUMNS = 3   # buffer (0 in, 1 out, 2 work), byte offset, bytes

# drive()'s outcomes
cdef enum:
    OK = 0
    CHECK_FAILED = 1
    WORK_ERROR = 2
    CHECK_ERROR = 3
    INTERRUPTED = 4

# A runner's ``err`` when a signal handler raised while it waited (-2: the kernel)
cdef enum:
    E_INTERRUPTED = -3

COLUMNS = STEP_COLUMNS
#: The code of each step kind in a step's row.
KINDS = {"send": K_SEND, "recv": K_RECV, "recv_combine": K_RECV_COMBINE,
         "copy": K_COPY, "combine": K_COMBINE}
OUTCOMES = {"ok": OK, "check failed": CHECK_FAILED, "work error": WORK_ERROR,
            "check error": CHECK_ERROR, "interrupted": INTERRUPTED}

# How a blocking wait polls: spinning for _SPIN (a few polls), then yielding the core between
# polls until _YIELD (a peer that waits for this core runs at once: a nap would last
# the kernel's timer slack, 50 us, at every step), then napping, longer as the wait
# goes on (as wacoll.mpi.engine.wait_any does: waits for a wide-area message do
# not take the cores with polls). wacoll.mpi.runner sets them (set_waits): where the
# library was asked to give up idle cores, waits nap from the first miss.
cdef double _SPIN = 2e-6
cdef double _YIELD = 5e-3
cdef double _SHORT_NAP = 50e-6
cdef double _NAP_SHARE = 0.02
cdef double _LONGEST_NAP = 1e-3
# A wait past _YIELD runs the signal handlers every _SIGNALS seconds: Ctrl-C is
# noticed within that, and a wait for the wide area costs a GIL round trip per 50 ms.
cdef double _SIGNALS = 0.05
# What a signal handler raised in a wait, until _error hands it to the caller.
cdef object _interrupt = None

cdef wacoll_mpi _M
cdef bint _ready = False
# MPI is finalizing or finalized (mpi_over): an object going away then leaves its
# requests to MPI, and keeps their buffers
cdef bint _mpi_over = False
# buffers of requests that were still in flight when their owner went away: MPI may
# still write into them (kept until the process ends)
cdef list _kept = []
cdef wacoll_reduce_fn _reduce = NULL


def set_mpi(int hsize, intptr_t byte_type, intptr_t request_null, intptr_t isend,
            intptr_t irecv, intptr_t test, intptr_t testany, intptr_t cancel,
            intptr_t wait, intptr_t finalized, reduce_capsule):
    """Install the MPI library's entry points and the reduction kernel (once)."""
    global _ready, _reduce
    if hsize not in (4, 8):
        raise ValueError(f"an MPI handle of {hsize} bytes is not supported")
    _M.hsize, _M.byte_type, _M.request_null = hsize, byte_type, request_null
    _M.isend, _M.irecv, _M.test = <void *>isend, <void *>irecv, <void *>test
    _M.testany, _M.cancel, _M.wait = <void *>testany, <void *>cancel, <void *>wait
    _M.finalized = <void *>finalized
    _reduce = <wacoll_reduce_fn>PyCapsule_GetPointer(reduce_capsule, b"wacoll.reduce")
    _ready = True


#: The library's non-blocking collectives a replayed LibraryCall starts itself
#: (set_nonblocking), indexed as _collcalls.h's kinds.
cdef wacoll_colls _icolls


def set_nonblocking(int hsize, addresses):
    """Install the MPI library's non-blocking collectives (their addresses, in the
    order of :data:`wacoll.mpi._fastcall.DIRECT_KINDS`: ``MPI_Ibcast``, ...) and
    the width of its handles (4 or 8 bytes), once."""
    cdef int i
    if hsize not in (4, 8) or len(addresses) != 7:
        raise ValueError("set_nonblocking takes a handle size of 4 or 8 and 7 addresses")
    for i in range(7):
        _icolls.fn[i + 1] = <void *><intptr_t>addresses[i]
    _icolls.hsize = hsize


def mpi_over():
    """MPI is finalizing (``COMM_SELF``'s attributes are being deleted) or done: a
    verdict stream freed from now on makes no MPI call, and keeps its buffers."""
    global _mpi_over
    _mpi_over = True


def set_waits(double spin, double yield_for):
    """How a blocking wait polls (seconds): spinning for ``spin``, then yielding the
    core between polls until ``yield_for``, then napping (see :data:`_pause`)."""
    global _SPIN, _YIELD
    _SPIN, _YIELD = spin, yield_for


def is_ready():
    return _ready


cdef inline double _next_nap(double nap, double waited) noexcept nogil:
    cdef double most = _NAP_SHARE * waited
    if most < _SHORT_NAP:
        most = _SHORT_NAP
    if most > _LONGEST_NAP:
        most = _LONGEST_NAP
    nap *= 2
    return nap if nap < most else most


def _validate(steps, runs, Py_ssize_t work_bytes):
    """Raise ``ValueError`` unless the tables stay within themselves and the work
    area: the runner follows them without further checks."""
    if work_bytes < 0:
        raise ValueError("the work area's size is negative")
    if runs.shape[0]:
        if ((runs[:, 0] < 0) | (runs[:, 0] > 2) | (runs[:, 1] < 0) |
                (runs[:, 2] < 0)).any():
            raise ValueError("a run names no buffer, or has a negative offset or size")
        work = runs[runs[:, 0] == 2]
        if (work[:, 1] + work[:, 2] > work_bytes).any():
            raise ValueError("a run lies beyond the work area")
    if not steps.shape[0]:
        return
    kind, nsrc, ndst = steps[:, C_KIND], steps[:, C_NSRC], steps[:, C_NDST]
    nbytes, stage = steps[:, C_BYTES], steps[:, C_STAGE]
    if ((kind < K_SEND) | (kind > K_COMBINE)).any():
        raise ValueError("a step of an unknown kind")
    if ((nsrc < 0) | (ndst < 0) | (steps[:, C_SRC0] < 0) | (steps[:, C_DST0] < 0) |
            (steps[:, C_SRC0] + nsrc > runs.shape[0]) |
            (steps[:, C_DST0] + ndst > runs.shape[0])).any():
        raise ValueError("a step names runs beyond the table")
    if ((nbytes < 0) | (nbytes > 2**31 - 1)).any():
        raise ValueError("a step moves a negative number of bytes, or 2 GiB or more")
    if ((stage < -1) | ((stage >= 0) & (stage + nbytes > work_bytes))).any():
        raise ValueError("a staging area lies beyond the work area")
    if (steps[:, C_SLOT] != np.arange(steps.shape[0])).any():
        raise ValueError("the request slots are not the steps' own")
    lengths = np.concatenate(([0], np.cumsum(runs[:, 2])))
    for first, count in ((steps[:, C_SRC0], nsrc), (steps[:, C_DST0], ndst)):
        if ((count > 0) & (lengths[first + count] - lengths[first] != nbytes)).any():
            raise ValueError("a step's runs do not add up to the bytes it moves")
    if (((kind == K_RECV) & (steps[:, C_DIRECT] != 0)) & (ndst > 1)).any():
        raise ValueError("a receive that lands in place names several runs")
    messages = (kind == K_SEND) | (kind == K_RECV) | (kind == K_RECV_COMBINE)
    if (messages & (steps[:, C_PEER] < 0)).any():
        raise ValueError("a message step names no peer")
    staged = (kind == K_RECV_COMBINE) | ((kind == K_RECV) & (steps[:, C_DIRECT] == 0)) | \
        (nsrc > 1)
    if (staged & (stage < 0)).any():
        raise ValueError("a step that needs a staging area has none")


cdef int _signalled() noexcept nogil:
    """Run the process's pending signal handlers (only the main thread runs any): 1
    when one raised, its exception kept in ``_interrupt`` for :func:`_error`."""
    global _interrupt
    with gil:
        try:
            PyErr_CheckSignals()
        except BaseException as exc:
            _interrupt = exc
            return 1
    return 0


cdef inline double _pause(double began, double nap, double *due) noexcept nogil:
    """Between two polls of a wait that began at ``began``: nothing while it is
    short, then yield the core, then nap; the next nap. Past ``_YIELD``, once
    ``due`` seconds have passed, the signal handlers run (the next time is kept in
    ``due``, 0 at the start of a wait): -1 when one raised."""
    cdef double waited = wacoll_now() - began
    if waited >= _YIELD:
        if waited >= due[0]:
            due[0] = waited + _SIGNALS
            if _signalled():
                return -1
        wacoll_nap(nap)
        return _next_nap(nap, waited)
    if waited >= _SPIN:
        sched_yield()
    return nap


cdef class Runner:
    """One rank's compiled program on one communicator, run again and again.

    Parameters
    ----------
    steps : numpy.ndarray
        int64, ``(n, COLUMNS)``: a row per step.
    runs : numpy.ndarray
        int64, ``(m, 3)``: byte runs (buffer, offset, bytes) the steps name.
    work_bytes : int
        Bytes of the work area (scratch buffers, landing and staging areas); the
        runner owns it and reuses it on every call.
    comm : int
        The communicator's handle (``MPI._handleof``).
    op, dtype, itemsize : int
        The kernel's operator and element type codes and the element size.
    """

    cdef object _steps, _runs, _work, _reqs
    cdef const int64_t *st
    cdef const int64_t *rn
    cdef Py_ssize_t nsteps
    cdef char *bufs[3]
    cdef char *reqs
    cdef object _pending
    cdef int64_t *pending
    cdef Py_ssize_t npending
    cdef Py_ssize_t next
    cdef intptr_t comm
    cdef int tag, op, dtype, itemsize
    cdef readonly int err
    cdef readonly bint done
    cdef readonly bint started
    cdef Py_ssize_t waiting
    # a runner that takes any count of its size class (per_count): its tables per
    # element of the count, and its current count (-1: not such a runner)
    cdef object _step_units, _run_units, _regions, _bases
    # a run was cancelled: its sends may still read the work area, which is never
    # replaced then (rescale refuses)
    cdef bint cancelled
    cdef int64_t *wst
    cdef int64_t *wrn
    cdef Py_ssize_t nruns, nregions, capacity
    cdef int64_t most_bytes
    # how a size follows the count: q, r = divmod(count, parts), unit bytes an
    # element (CountTables)
    cdef int parts
    cdef int64_t unit
    cdef int64_t *su
    cdef int64_t *ru
    cdef int64_t *rg
    cdef int64_t *bases
    #: The count the tables are for (-1: a runner of one count).
    cdef readonly int64_t count

    def __init__(self, steps, runs, Py_ssize_t work_bytes, intptr_t comm, int op,
                 int dtype, int itemsize):
        if not _ready:
            raise RuntimeError("set_mpi() first")
        self._steps = np.ascontiguousarray(steps, np.int64).reshape(-1, STEP_COLUMNS)
        self._runs = np.ascontiguousarray(runs, np.int64).reshape(-1, RUN_COLUMNS)
        self.nsteps = self._steps.shape[0]
        _validate(self._steps, self._runs, work_bytes)
        cdef const int64_t[:, ::1] sv = self._steps
        cdef const int64_t[:, ::1] rv = self._runs
        self.st = &sv[0, 0] if self.nsteps else NULL
        self.rn = &rv[0, 0] if rv.shape[0] else NULL
        # 64-byte aligned work area (kernels read whole elements of any type)
        self._work = np.zeros(work_bytes + 64, np.uint8)
        cdef char[::1] wv = self._work
        cdef intptr_t base = <intptr_t>&wv[0]
        self.bufs[2] = <char *>((base + 63) & ~(<intptr_t>63))
        self._reqs = np.zeros(max(1, self.nsteps) * _M.hsize, np.uint8)
        cdef char[::1] qv = self._reqs
        self.reqs = &qv[0]
        self._pending = np.zeros(max(1, self.nsteps), np.int64)
        cdef int64_t[::1] pv = self._pending
        self.pending = &pv[0]
        self.comm, self.op, self.dtype, self.itemsize = comm, op, dtype, itemsize
        self.done = True
        self.started = False
        self.count = -1
        self.capacity = work_bytes
        cdef Py_ssize_t i
        for i in range(self.nsteps):
            wacoll_set_null(&_M, self.reqs + i * _M.hsize)

    @property
    def work(self):
        """The work area (a uint8 array)."""
        return self._work

    @property
    def tables(self):
        """Copies of the step rows and byte runs the runner follows."""
        return self._steps.copy(), self._runs.copy()

    def per_count(self, step_units, run_units, regions, int parts, int64_t unit,
                  int64_t count):
        """Make the runner take any count (:meth:`rescale`): its tables are for
        ``count`` now, and the :class:`~wacoll.mpi.runner.CountTables` given
        (``step_units``, ``run_units``, ``regions``, ``parts``, ``unit``; made by
        :func:`wacoll.mpi.runner.count_units`) give them for any other: each size
        and offset is ``per_q * q + unit * popcount(mask & (2**r - 1))`` bytes,
        ``q, r = divmod(count, parts)``, the work area's regions in order, each
        starting 64-byte aligned."""
        cdef int64_t[:, ::1] sv
        cdef int64_t[:, ::1] rv
        steps_q = np.ascontiguousarray(step_units, np.int64).reshape(-1, 3)
        runs_q = np.ascontiguousarray(run_units, np.int64).reshape(-1, 5)
        regions_q = np.ascontiguousarray(regions, np.int64).reshape(-1, 2)
        masks = np.concatenate([steps_q[:, 2], runs_q[:, 3:].ravel(), regions_q[:, 1]])
        if (self._step_units is not None
                or steps_q.shape[0] != self.nsteps
                or runs_q.shape[0] != self._runs.shape[0]
                or not 1 <= parts <= 62 or unit <= 0
                or (regions_q < 0).any() or (steps_q[:, 0] < 0).any()
                or (runs_q[:, :2] < 0).any() or (masks < 0).any()
                or (masks >> parts).any()
                or (steps_q[:, 1] >= regions_q.shape[0]).any()
                or (runs_q[:, 2] >= regions_q.shape[0]).any()
                or count <= 0):
            raise ValueError("the tables per element of the count do not fit the runner")
        given = self._steps, self._runs
        bases = np.zeros(max(1, regions_q.shape[0]), np.int64)
        # the runner's own tables, rewritten for each count (raw pointers: a
        # memoryview taken at each rescale would cost more than the rescale itself)
        steps, runs = given[0].copy(), given[1].copy()
        sv, rv = steps, runs
        self._step_units, self._run_units, self._regions = steps_q, runs_q, regions_q
        self._bases, self._steps, self._runs = bases, steps, runs
        self.su = <int64_t *><intptr_t>steps_q.ctypes.data
        self.ru = <int64_t *><intptr_t>runs_q.ctypes.data
        self.rg = <int64_t *><intptr_t>regions_q.ctypes.data
        self.bases = <int64_t *><intptr_t>bases.ctypes.data
        self.parts, self.unit = parts, unit
        self.most_bytes = int(steps_q[:, 0].max()) if self.nsteps else 0
        self.nruns, self.nregions = runs_q.shape[0], regions_q.shape[0]
        self.wst = &sv[0, 0] if self.nsteps else NULL
        self.wrn = &rv[0, 0] if self.nruns else NULL
        self.st, self.rn = self.wst, self.wrn
        self.count = -1
        if (not self.rescale(count) or not (self._steps == given[0]).all()
                or not (self._runs == given[1]).all()):
            # (back to a runner of one count, its own tables)
            self._step_units = None
            self._steps, self._runs = given
            sv, rv = self._steps, self._runs
            self.st = &sv[0, 0] if self.nsteps else NULL
            self.rn = &rv[0, 0] if self._runs.shape[0] else NULL
            raise ValueError("the tables per element of the count are not the runner's")

    cdef inline int64_t _sized(self, int64_t per_q, int64_t mask, int64_t q,
                               uint64_t low) noexcept nogil:
        return per_q * q + self.unit * __builtin_popcountll(<uint64_t>mask & low)

    cpdef bint rescale(self, int64_t count) except -1:
        """Rewrite the tables for ``count`` (a runner made by :meth:`per_count`,
        between runs): False when it cannot take it (a message of more than
        2**31 - 1 bytes, a run in progress or cancelled), and the tables are left
        as they are."""
        cdef int64_t at = 0, q, r
        cdef uint64_t low
        cdef Py_ssize_t i
        cdef int64_t *row
        cdef const int64_t *su
        cdef const int64_t *ru
        cdef char[::1] wv
        if count == self.count:
            return True
        if self._step_units is None or not self.done or self.cancelled or count <= 0:
            return False
        q, r = count // self.parts, count % self.parts
        low = (<uint64_t>1 << r) - 1
        # (every size is at most per_q * (q + 1): its mask's segments are among its
        # q's; where that could pass 2 GiB, each message is computed first)
        if self.most_bytes and q + 1 > (2**31 - 1) // self.most_bytes:
            if q > (2**31 - 1) // self.most_bytes:
                return False
            for i in range(self.nsteps):
                if self._sized(self.su[3 * i], self.su[3 * i + 2], q, low) > 2**31 - 1:
                    return False
        for i in range(self.nregions):
            self.bases[i] = at
            at = (at + self._sized(self.rg[2 * i], self.rg[2 * i + 1], q, low)
                  + 63) // 64 * 64
        if at > self.capacity:  # a larger work area, with room for larger counts
            grown = np.zeros(at + at // 4 + 64, np.uint8)  # (before any field changes)
            self._work, self.capacity = grown, at + at // 4
            wv = self._work
            self.bufs[2] = <char *>((<intptr_t>&wv[0] + 63) & ~(<intptr_t>63))
        for i in range(self.nsteps):
            row, su = self.wst + i * STEP_COLUMNS, self.su + 3 * i
            row[C_BYTES] = self._sized(su[0], su[2], q, low)
            row[C_STAGE] = self.bases[su[1]] if su[1] >= 0 else -1
        for i in range(self.nruns):
            row, ru = self.wrn + i * RUN_COLUMNS, self.ru + 5 * i
            row[1] = (self.bases[ru[2]] if ru[2] >= 0 else 0) + self._sized(
                ru[0], ru[3], q, low)
            row[2] = self._sized(ru[1], ru[4], q, low)
        self.count = count
        return True

    # ---------------------------------------------------------------- helpers
    cdef inline char *_run_ptr(self, Py_ssize_t r) noexcept nogil:
        cdef const int64_t *run = self.rn + r * RUN_COLUMNS
        return self.bufs[run[0]] + run[1]

    cdef inline char *_slot(self, const int64_t *s) noexcept nogil:
        return self.reqs + s[C_SLOT] * _M.hsize

    cdef int _need(self, char *req, bint block) noexcept nogil:
        """1 when ``req`` is complete, 0 when not (and not blocking), -1 on error
        (``err``: the MPI error, or ``E_INTERRUPTED``)."""
        cdef int flag = 0
        cdef double began, nap = 1e-6, due = 0
        if wacoll_is_null(&_M, req):
            return 1
        self.err = wacoll_test(&_M, req, &flag)
        if self.err:
            return -1
        if flag:
            return 1
        if not block:
            self.waiting = (req - self.reqs) // _M.hsize
            return 0
        began = wacoll_now()
        while True:
            self.err = wacoll_test(&_M, req, &flag)
            if self.err:
                return -1
            if flag:
                return 1
            nap = _pause(began, nap, &due)
            if nap < 0:
                self.err = E_INTERRUPTED
                return -1

    cdef int _clear_readers(self, const int64_t *s, bint block) noexcept nogil:
        """Wait for the sends still reading the step's destination runs."""
        cdef Py_ssize_t i, j, d, keep = 0
        cdef const int64_t *send
        cdef const int64_t *src
        cdef const int64_t *dst
        cdef bint hit
        cdef int status
        for i in range(self.npending):
            send = self.st + self.pending[i] * STEP_COLUMNS
            src = self.rn + send[C_SRC0] * RUN_COLUMNS
            hit = False
            for j in range(s[C_NDST]):
                dst = self.rn + (s[C_DST0] + j) * RUN_COLUMNS
                if dst[0] == src[0] and dst[1] < src[1] + src[2] and \
                        src[1] < dst[1] + dst[2]:
                    hit = True
                    break
            if hit:
                status = self._need(self._slot(send), block)
                if status <= 0:
                    # keep the unchecked ones (this one included) for the next try
                    for d in range(i, self.npending):
                        self.pending[keep] = self.pending[d]
                        keep += 1
                    self.npending = keep
                    return status
            else:
                self.pending[keep] = self.pending[i]
                keep += 1
        self.npending = keep
        return 1

    cdef void _gather(self, const int64_t *s, char *out) noexcept nogil:
        cdef Py_ssize_t j
        cdef const int64_t *run
        for j in range(s[C_NSRC]):
            run = self.rn + (s[C_SRC0] + j) * RUN_COLUMNS
            memcpy(out, self.bufs[run[0]] + run[1], run[2])
            out += run[2]

    cdef void _scatter(self, const int64_t *s, const char *data) noexcept nogil:
        cdef Py_ssize_t j
        cdef const int64_t *run
        for j in range(s[C_NDST]):
            run = self.rn + (s[C_DST0] + j) * RUN_COLUMNS
            memmove(self.bufs[run[0]] + run[1], data, run[2])
            data += run[2]

    cdef int _combine(self, const int64_t *s, const char *data) noexcept nogil:
        cdef Py_ssize_t j
        cdef const int64_t *run
        cdef int status
        for j in range(s[C_NDST]):
            run = self.rn + (s[C_DST0] + j) * RUN_COLUMNS
            status = _reduce(self.op, <int>s[C_LEFT], self.dtype,
                             self.bufs[run[0]] + run[1], data, run[2] // self.itemsize)
            if status:
                return status
            data += run[2]
        return 0

    # ---------------------------------------------------------------- running
    cdef int start(self, char *inbuf, char *outbuf, int tag) noexcept nogil:
        """Post every receive; 0, or -1 on an MPI error (in ``err``)."""
        cdef Py_ssize_t i
        cdef const int64_t *s
        cdef char *target
        cdef int n
        self.bufs[0], self.bufs[1], self.tag = inbuf, outbuf, tag
        self.next, self.npending, self.err = 0, 0, 0
        self.done, self.started = False, True
        for i in range(self.nsteps):
            s = self.st + i * STEP_COLUMNS
            if s[C_KIND] != K_RECV and s[C_KIND] != K_RECV_COMBINE:
                continue
            n = <int>s[C_BYTES]
            if s[C_DIRECT]:
                if s[C_NDST]:
                    target = self._run_ptr(s[C_DST0])
                else:
                    target, n = self.bufs[2], 0
            else:
                target = self.bufs[2] + s[C_STAGE]
            self.err = wacoll_irecv(&_M, target, n, <int>s[C_PEER], tag, self.comm,
                                    self._slot(s))
            if self.err:
                return -1
        return 0

    cdef int advance(self, bint block) noexcept nogil:
        """Run steps: 1 when done, 0 when a step waits (not blocking), -1 on error."""
        cdef const int64_t *s
        cdef int64_t kind
        cdef char *data
        cdef const int64_t *a
        cdef const int64_t *b
        cdef int status
        cdef Py_ssize_t i
        if self.done:
            return 1
        while self.next < self.nsteps:
            s = self.st + self.next * STEP_COLUMNS
            kind = s[C_KIND]
            if kind == K_SEND:
                if s[C_STAGE] < 0:  # one run: sent from the buffer itself
                    data = self._run_ptr(s[C_SRC0]) if s[C_NSRC] else self.bufs[2]
                    if s[C_NSRC]:
                        self.pending[self.npending] = self.next
                        self.npending += 1
                else:
                    data = self.bufs[2] + s[C_STAGE]
                    self._gather(s, data)
                self.err = wacoll_isend(&_M, data, <int>s[C_BYTES], <int>s[C_PEER],
                                        self.tag, self.comm, self._slot(s))
                if self.err:
                    return -1
            elif kind == K_RECV or kind == K_RECV_COMBINE:
                status = self._need(self._slot(s), block)
                if status <= 0:
                    return status
                if kind == K_RECV_COMBINE or not s[C_DIRECT]:
                    status = self._clear_readers(s, block)
                    if status <= 0:
                        return status
                    data = self.bufs[2] + s[C_STAGE]
                    if kind == K_RECV:
                        self._scatter(s, data)
                    elif self._combine(s, data):
                        self.err = -2
                        return -1
            else:
                status = self._clear_readers(s, block)
                if status <= 0:
                    return status
                if s[C_STAGE] < 0:
                    data = self._run_ptr(s[C_SRC0])
                else:
                    data = self.bufs[2] + s[C_STAGE]
                    self._gather(s, data)
                if kind == K_COPY:
                    self._scatter(s, data)
                elif self._combine(s, data):
                    self.err = -2
                    return -1
            self.next += 1
        for i in range(self.nsteps):  # every send complete
            s = self.st + i * STEP_COLUMNS
            if s[C_KIND] == K_SEND:
                status = self._need(self._slot(s), block)
                if status <= 0:
                    return status
        self.npending = 0
        self.done = True
        return 1

    cdef void cancel(self) noexcept nogil:
        """Abandon the run: its pending receives cancelled (sends are left to finish;
        the caller retires the communicator and keeps this runner's memory)."""
        cdef Py_ssize_t i
        cdef const int64_t *s
        for i in range(self.nsteps):
            s = self.st + i * STEP_COLUMNS
            if (s[C_KIND] == K_RECV or s[C_KIND] == K_RECV_COMBINE) and \
                    not wacoll_is_null(&_M, self._slot(s)):
                wacoll_cancel(&_M, self._slot(s))
        self.done = True
        self.cancelled = True

    cdef inline char *waiting_slot(self) noexcept nogil:
        return self.reqs + self.waiting * _M.hsize

    # ---------------------------------------------------------------- Python
    def run(self, intptr_t inbuf, intptr_t outbuf, int tag):
        """Run the program once over the buffers at these addresses (blocking).
        Raises ``RuntimeError`` carrying the MPI error code on a failed MPI call."""
        cdef int status
        with nogil:
            status = self.start(<char *>inbuf, <char *>outbuf, tag)
            if status == 0:
                status = self.advance(True)
            if status < 0:
                self.cancel()
        if status < 0:
            raise _error(self.err)


    def begin(self, intptr_t inbuf, intptr_t outbuf, int tag):
        """Start a run over the buffers at these addresses (receives posted, steps
        run until one must wait): whether it is already done. Raises as
        :meth:`run`."""
        cdef int status
        if self.started and not self.done:
            raise RuntimeError("the runner is still running an earlier call")
        with nogil:
            status = self.start(<char *>inbuf, <char *>outbuf, tag)
            if status == 0:
                status = self.advance(False)
            if status < 0:
                self.cancel()
        if status < 0:
            raise _error(self.err)
        return status == 1

    def abandon(self):
        """Abandon a started run (its pending receives cancelled; sends are left to
        finish): whoever holds the runner must keep it, and the buffers its run
        reads and writes, alive from then on. Nothing when the run is over."""
        if self.started and not self.done:
            with nogil:
                self.cancel()

    def proceed(self, bint block):
        """Advance a started run (to its end when ``block``): whether it is done."""
        cdef int status
        if self.done:
            return True
        with nogil:
            status = self.advance(block)
            if status < 0:
                self.cancel()
        if status < 0:
            raise _error(self.err)
        return status == 1


def _error(int code):
    global _interrupt
    if code == E_INTERRUPTED:  # what the signal handler raised, marked as such
        from wacoll.mpi.interrupts import mark
        exc, _interrupt = _interrupt, None
        return mark(exc if exc is not None else KeyboardInterrupt())
    if code == -2:
        return RuntimeError("the reduction kernel refused the operator and type")
    from mpi4py import MPI
    return MPI.Exception(code)


cdef int _wait_either(Runner a, Runner b) noexcept nogil:
    """Poll, then nap, until the request ``a`` or ``b`` waits for completes; 0, or
    -1 (-2) on an MPI error of ``a``'s (``b``'s) request, in the runner's ``err``,
    or -3 when a signal handler raised."""
    cdef int flag = 0
    cdef double began = wacoll_now(), nap = 1e-6, due = 0
    while True:
        a.err = wacoll_test(&_M, a.waiting_slot(), &flag)
        if a.err:
            return -1
        if flag:
            return 0
        b.err = wacoll_test(&_M, b.waiting_slot(), &flag)
        if b.err:
            return -2
        if flag:
            return 0
        nap = _pause(began, nap, &due)
        if nap < 0:
            return -3


cdef bint _passed(const int64_t *mine, const int64_t *flags) noexcept nogil:
    """A MAX all-reduce of every rank's check flags passed: no rank failed and every
    digest is this rank's (see wacoll.mpi.agreement.Check)."""
    return flags[0] == 0 and flags[2] == -flags[3] and flags[2] == mine[2]


def drive(Runner work, Runner check, intptr_t inbuf, intptr_t outbuf, int tag,
          intptr_t mine, intptr_t flags, bint first):
    """Run a call: its ``work`` (None: nothing to run) and its cross-rank ``check``
    (a runner of a MAX all-reduce of four int64, from ``mine`` into ``flags``; None:
    no check), beside each other, or with ``first`` the check before the work.

    Returns one of :data:`OUTCOMES`. On ``"check failed"`` the work was cancelled
    (or, with ``first``, never started); on ``"work error"`` the work's MPI error
    code is in ``work.err`` and the check completed and passed; on
    ``"interrupted"`` a signal handler raised while it waited (both runners are
    cancelled; ``_error(-3)`` is the exception).
    """
    cdef int outcome
    if work is None and check is None:
        return OK
    with nogil:
        outcome = _drive(work, check, <char *>inbuf, <char *>outbuf, tag,
                         <char *>mine, <char *>flags, first, tag)
    return outcome


cdef int _stopped(Runner runner, int outcome, bint cancel) noexcept nogil:
    """After ``runner`` failed: ``outcome`` (the runner cancelled when ``cancel``),
    or ``INTERRUPTED`` (the runner cancelled) when a signal handler raised in its
    wait."""
    if runner.err == E_INTERRUPTED:
        runner.cancel()
        return INTERRUPTED
    if cancel:
        runner.cancel()
    return outcome


cdef int _drive(Runner work, Runner check, char *inbuf, char *outbuf, int tag,
                char *mine, char *flags, bint first, int check_tag) noexcept nogil:
    cdef int w = 1, c = 1, status
    cdef bint work_failed = False
    cdef const int64_t *own = <const int64_t *>mine
    cdef const int64_t *got = <const int64_t *>flags
    if True:
        if check is not None:
            if check.start(mine, flags, check_tag) < 0:
                return CHECK_ERROR
            c = 0
        if work is not None and (check is None or not first):
            if work.start(inbuf, outbuf, tag) < 0:
                work.cancel()
                work_failed = True
            else:
                w = 0
        if check is not None and first:
            if check.advance(True) < 0:
                return _stopped(check, CHECK_ERROR, False)
            if not _passed(own, got):
                return CHECK_FAILED
            if work is None:
                return OK
            if work.start(inbuf, outbuf, tag) < 0 or \
                    work.advance(True) < 0:
                return _stopped(work, WORK_ERROR, True)
            return OK
        while True:
            if w == 0:
                w = work.advance(False)
                if w < 0:
                    work.cancel()
                    work_failed, w = True, 1
            if c == 0:
                c = check.advance(False)
                if c < 0:
                    if work is not None and not work.done:
                        work.cancel()
                    return CHECK_ERROR
            if c == 1 or check is None:
                if check is not None and not _passed(own, got):
                    if work is not None and not work.done:
                        work.cancel()
                    return CHECK_FAILED
                if work_failed:
                    return WORK_ERROR
                if w == 0:  # the check passed: no rank's part of the work is missing
                    if work.advance(True) < 0:
                        return _stopped(work, WORK_ERROR, True)
                return OK
            if w == 1:
                if check.advance(True) < 0:
                    return _stopped(check, CHECK_ERROR, False)
                c = 1
                continue
            status = _wait_either(work, check)
            if status == -1:  # the work failed: the check still decides what to raise
                work.cancel()
                work_failed, w = True, 1
            elif status == -2:
                work.cancel()
                return CHECK_ERROR
            elif status == -3:  # a signal handler raised: abandon both
                work.cancel()
                check.cancel()
                return INTERRUPTED


# ---------------------------------------------------------------------- a call
from cpython.buffer cimport PyBUF_RECORDS_RO, PyBuffer_Release, PyObject_GetBuffer

cdef object _ndarray = np.ndarray


cdef object _signature(object kept):
    """A call's signature from what a call keeps of it: the signature, or ``(its
    signature at another count, the count)`` (a call that takes any count of its
    size class makes the signature only for an error's message)."""
    if type(kept) is tuple:
        return kept[0].with_count(kept[1])
    return kept


cdef intptr_t _address(object arg) except? -1:
    """The address of the memory an argument (an array, or a buffer specification
    ``[array, ...]``) describes."""
    cdef Py_buffer view
    cdef intptr_t at
    if type(arg) is list or type(arg) is tuple:
        arg = arg[0]
    PyObject_GetBuffer(arg, &view, PyBUF_RECORDS_RO)
    at = <intptr_t>view.buf
    PyBuffer_Release(&view)
    return at


cdef class PlanCall:
    """A blocking call that runs a plan: the compiled runner of this rank's program,
    and the call's cross-rank check, ready to run over each call's own arrays.

    Parameters
    ----------
    work : Runner or None
        The program's runner (None: nothing to run, as for a checked Barrier).
    check : Runner or None
        The check's runner: a MAX all-reduce of four int64 on the communicator's
        check communicator, run beside the work (or first, with ``first``).
    blocking_check : object or None
        Instead of ``check``, a check run before the work with ``run(flags_bytes)
        -> bool`` and ``flags`` (one cluster's shared-memory or persistent check).
    digest : int
        The call's signature digest (what the check compares across ranks).
    sig : object
        The call's signature, for the error message of a failed check.
    where_in, where_out : tuple
        Where the call's input and output are, in its arguments: ``(argument
        index, byte offset)``; ``(-1, 0)`` for none; for an input copied from the
        output at the start of the call (in place), ``(-2, byte offset in the
        output)`` and ``in_copy_bytes``.
    in_copy_bytes : int
    first : bool
        Run the check before the work (``check="first"``).
    tag : int
        The tag of the work's messages.
    keep : tuple
        Objects the call's key names by identity, kept alive while recorded.
    check_tag : int
        The tag of ``check``'s messages (the same for every call, whatever its
        arguments: a check is what tells them apart).
    ring : Verdicts, optional
        The communicator's checks in flight: the call's check runs there instead
        of in ``check``, and the call returns once its work is done, its verdict
        collected later (see :class:`Verdicts`; a call with no work, a Barrier,
        waits for every verdict).
    """

    cdef readonly Runner work, check
    cdef readonly Verdicts ring
    cdef readonly object blocking_check, keep
    # the signature it was made for, and what the ring keeps of this count's
    # (the signature, or it with the count: _signature)
    cdef object _sig, _ring_sig
    #: The plan the call runs, and its family.
    cdef public object plan, family
    cdef object _mine, _flags, _in_copy
    cdef intptr_t mine, flags_at, in_copy_at
    cdef Py_ssize_t in_index, in_offset, out_index, out_offset, in_copy_bytes
    cdef bint first
    cdef int tag, check_tag
    cdef bytes template
    # a call that takes any count of its size class (per_count)
    cdef int64_t rest, count, tag_low, tag_span, in_unit, out_unit, copy_unit
    cdef Py_ssize_t copy_capacity
    #: The rank whose progress paces this rank's calls, or -1. A rank that only
    #: sends to a root (a gather's, a reduce's) and returns once its sends are out
    #: could run any number of calls ahead of the root, and flood it with messages
    #: it cannot yet match; with a verdict stream it waits while it is
    #: :data:`S_LEAD` calls past the root's entries. Set by
    #: :func:`wacoll.mpi.plancall.paced_by`.
    cdef public int paced_by

    def __init__(self, Runner work, Runner check, blocking_check, digest, sig,
                 tuple where_in, tuple where_out, Py_ssize_t in_copy_bytes, bint first,
                 int tag, tuple keep=(), Verdicts ring=None, int check_tag=0):
        self.work, self.check, self.blocking_check = work, check, blocking_check
        self.ring, self.check_tag = ring, check_tag
        self._sig = self._ring_sig = sig
        self.keep, self.first, self.tag = keep, first, tag
        self.paced_by = -1
        self._mine = np.array([0, 0, digest, -digest], np.int64)
        self.template = self._mine.tobytes()
        self._flags = np.zeros(4, np.int64)
        self.mine = self._mine.ctypes.data
        self.flags_at = self._flags.ctypes.data
        self.in_index, self.in_offset = where_in
        self.out_index, self.out_offset = where_out
        self.in_copy_bytes = in_copy_bytes
        self._in_copy = np.zeros(in_copy_bytes + 64, np.uint8)
        self.in_copy_at = (self._in_copy.ctypes.data + 63) & ~63
        self.copy_capacity = in_copy_bytes
        self.count = -1

    @property
    def sig(self):
        """The call's signature (of its last count)."""
        return _signature(self._ring_sig)

    @property
    def flags(self):
        """The check's all-reduced flags of the last call (four int64)."""
        if self.blocking_check is not None:
            return self.blocking_check.flags.copy()
        return self._flags.copy()

    def per_count(self, int64_t count, int tag_low, int tag_span):
        """Make the call take any count of its size class (:meth:`recount`): it
        was made for ``count``; its work's runner takes any count already
        (:meth:`Runner.per_count`), its buffers' offsets and in-place copy hold
        whole elements of the count, and its tag is ``tag_low + digest %
        tag_span`` (:func:`wacoll.mpi.executor.blocking_tag`)."""
        if count <= 0 or (self.work is not None and self.work.count != count):
            raise ValueError("the work's runner does not take counts, or not this one")
        for value in (self.in_offset, self.out_offset, self.in_copy_bytes):
            if value % count:
                raise ValueError("an offset is not whole elements of the count")
        self.rest = self._sig.digest_without_count()
        self.in_unit, self.out_unit = self.in_offset // count, self.out_offset // count
        self.copy_unit = self.in_copy_bytes // count
        self.tag_low, self.tag_span, self.count = tag_low, tag_span, count

    cpdef bint recount(self, int64_t count) except -1:
        """Take ``count`` as the call's count (its work's tables, its buffers'
        offsets, its check's digest, its messages' tag and its signature):
        whether it can (a call made by :meth:`per_count`, a runner that takes
        it)."""
        cdef int64_t digest
        if count == self.count:
            return True
        if self.count < 0:
            return False
        # what may fail first (memory), so that a call is wholly of one count
        copy_bytes = self.copy_unit * count
        if copy_bytes > self.copy_capacity:
            grown = np.zeros(copy_bytes + copy_bytes // 4 + 64, np.uint8)
            self._in_copy, self.copy_capacity = grown, copy_bytes + copy_bytes // 4
            self.in_copy_at = (self._in_copy.ctypes.data + 63) & ~63
        digest = count_digest(self.rest, count)
        template = flags_template(digest)
        if self.work is not None and not self.work.rescale(count):
            return False
        (<int64_t *>self.mine)[2] = digest
        (<int64_t *>self.mine)[3] = -digest
        self.template = template
        self.tag = <int>(self.tag_low + digest % self.tag_span)
        self.in_offset, self.out_offset = self.in_unit * count, self.out_unit * count
        self.in_copy_bytes = copy_bytes
        # (a signature is made only for an error's message: _signature)
        self._ring_sig = self._sig if count == self._sig.count else (self._sig, count)
        self.count = count
        return True

    cpdef int call(self, intptr_t inbuf, intptr_t outbuf) except -1:
        """Run the call over the buffers at these addresses: 0 when it ran, 1 when
        its check failed (no rank's arguments are trusted: the caller raises),
        and raises the MPI library's error when the work failed."""
        cdef int outcome
        if self.in_index == -2:  # in place: the input is the output as it was
            memcpy(<void *>self.in_copy_at, <void *>(outbuf + self.in_offset),
                   self.in_copy_bytes)
            inbuf = self.in_copy_at
        if self.blocking_check is not None:
            if not self.blocking_check.run(self.template):
                return 1
        if self.ring is not None:
            outcome = _drive_deferred(self.work, self.ring, <char *>inbuf,
                                      <char *>outbuf, self.tag,
                                      <const int64_t *>self.mine, self._ring_sig,
                                      self.work is None or not self.ring.defer,
                                      self.paced_by)
            if outcome == OK:
                return 0
            if outcome == CHECK_FAILED:
                return 1
            raise _error(self.work.err)
        if self.work is None and self.check is None:
            return 0
        with nogil:
            outcome = _drive(self.work, self.check, <char *>inbuf, <char *>outbuf,
                             self.tag, <char *>self.mine, <char *>self.flags_at,
                             self.first, self.check_tag)
        if outcome == OK:
            return 0
        if outcome == CHECK_FAILED:
            return 1
        if outcome == INTERRUPTED:
            raise _error(E_INTERRUPTED)
        raise _error(self.work.err if outcome == WORK_ERROR else self.check.err)

    def run(self, tuple args):
        """Run the call over ``args`` (a repeated call's own arguments, laid out as
        when it was recorded): True when it ran, False when its check failed."""
        cdef intptr_t inbuf = 0, outbuf = 0
        if self.in_index >= 0:
            inbuf = _address(args[self.in_index]) + self.in_offset
        if self.out_index >= 0:
            outbuf = _address(args[self.out_index]) + self.out_offset
        return self.call(inbuf, outbuf) == 0


# ------------------------------------------------------- a library call, checked
cdef int _drive_library(Runner check, char *req, char *mine, char *flags, int tag,
                        int *err) noexcept nogil:
    """Run the cross-rank ``check`` beside the MPI library's non-blocking collective
    whose request is at ``req`` (started by the caller): one of :data:`OUTCOMES`,
    the collective's MPI error in ``err`` on ``WORK_ERROR``. A failed check leaves
    the collective's request as it is (a collective cannot be cancelled: the caller
    retires its communicator)."""
    cdef int c = 0, flag = 0, done = 0
    cdef bint work_failed = False
    cdef double began = wacoll_now(), nap = 1e-6, due = 0
    cdef const int64_t *own = <const int64_t *>mine
    cdef const int64_t *got = <const int64_t *>flags
    if check.start(mine, flags, tag) < 0:
        return CHECK_ERROR
    while True:
        if not done:
            err[0] = wacoll_test(&_M, req, &flag)
            if err[0]:
                work_failed, done = True, 1
            elif flag:
                done = 1
        c = check.advance(False)
        if c < 0:
            return _stopped(check, CHECK_ERROR, False)
        if c == 1:
            if not _passed(own, got):
                return CHECK_FAILED
            if work_failed:
                return WORK_ERROR
            break
        nap = _pause(began, nap, &due)
        if nap < 0:
            check.cancel()
            return INTERRUPTED
    # the check passed: every rank takes part in the collective
    while not done:
        err[0] = wacoll_test(&_M, req, &flag)
        if err[0]:
            return WORK_ERROR
        if flag:
            return OK
        nap = _pause(began, nap, &due)
        if nap < 0:
            return INTERRUPTED
    return OK


cdef class LibraryCall:
    """A blocking call the MPI library runs on several clusters: its non-blocking
    collective and the call's cross-rank check (a compiled wide-area all-reduce of
    four int64), waited for together in C with the GIL released.

    The one-cluster replay (:class:`wacoll.mpi._fastcall.NativeCall`) checks first
    and calls the library's blocking collective: no latency to hide. Across a wide
    area the check's round trip costs as much as the call, so here the two overlap;
    the library's non-blocking collective is used on every such call (it never
    matches a blocking one).

    Parameters
    ----------
    check : Runner or None
        The check's runner on the communicator's check communicator (None with a
        verdict ``ring``, in which the check travels instead).
    digest : int
        The call's signature digest.
    method : callable or None
        The library's non-blocking collective (a bound method of the wire, returning
        its request); None for a Barrier (the check synchronises the ranks).
    replace : tuple of (int, object)
        Arguments to pass instead of the caller's (an ``MPI.Op`` for a name).
    sig : object
        The call's signature, for the error message of a failed check.
    keep : tuple
        Objects the call's key names by identity, kept alive while recorded.
    tag : int
        The tag of the check's messages.
    ring : Verdicts, optional
        The communicator's checks in flight: the call's check runs there, and the
        call returns once the library's request is complete, its verdict
        collected later (a Barrier waits for every verdict).
    """

    cdef readonly Runner check
    cdef readonly Verdicts ring
    cdef readonly object method, keep
    cdef object _sig, _ring_sig  # (as a PlanCall's)
    cdef public object plan, family
    cdef tuple replace
    cdef object _mine, _flags
    cdef intptr_t mine, flags_at
    cdef int tag
    cdef int64_t rest, count
    #: Requests of calls whose check failed (never completed: kept, not freed).
    cdef readonly list abandoned
    #: Whether the library writes this rank's output buffer: with ``ring``, the
    #: call then returns only with its verdict (the library's messages carry no
    #: signature, so a peer's data that disagrees with this rank's arguments would
    #: be passed off as whole); a rank that only sends returns before it.
    cdef public bint receives
    #: The rank whose progress paces this rank's calls (-1: none): see
    #: :attr:`PlanCall.paced_by`.
    cdef public int paced_by
    #: The one rank whose data the library writes into this rank's buffer (a
    #: Bcast's or a Scatter's root, for the other ranks), or -1: where the ring
    #: can tell (:meth:`Verdicts.agreed_with`), the call returns once that rank's
    #: check agrees with this rank's, without waiting for the others'.
    cdef public int source
    # (direct: the library's non-blocking collective started from C, as NativeCall
    # calls its blocking one)
    cdef readonly int kind
    cdef int root, at_send, at_recv
    cdef intptr_t comm_h, type_h, op_h
    cdef Py_ssize_t send_unit, recv_unit
    cdef char reqbuf[8]  # the started collective's request handle

    def __init__(self, Runner check, digest, method, tuple replace not None,
                 sig, tuple keep not None, int tag, Verdicts ring=None):
        global _addressof
        if check is None and ring is None:
            raise ValueError("a library call is checked by a runner or a verdict ring")
        if _addressof is None:
            from mpi4py import MPI
            _addressof = MPI._addressof
        self.check, self.method, self.replace, self.keep = check, method, replace, keep
        self._sig = self._ring_sig = sig
        self.tag, self.ring = tag, ring
        self.plan, self.family = None, NATIVE
        self._mine = np.array([0, 0, digest, -digest], np.int64)
        self._flags = np.zeros(4, np.int64)
        self.mine, self.flags_at = self._mine.ctypes.data, self._flags.ctypes.data
        self.abandoned = []
        self.count = -1
        self.receives = True
        self.paced_by = self.source = -1

    @property
    def flags(self):
        """The check's all-reduced flags of the last call (four int64)."""
        return self._flags.copy()

    @property
    def sig(self):
        """The call's signature (of its last count)."""
        return _signature(self._ring_sig)

    def per_count(self):
        """Make the call take any count of its size class (:meth:`recount`)."""
        self.rest, self.count = self._sig.digest_without_count(), self._sig.count

    cpdef bint recount(self, int64_t count) except -1:
        """Take ``count`` as the call's count (its check's digest and its
        signature): whether it can (a call made by :meth:`per_count`)."""
        cdef int64_t digest
        if count == self.count:
            return True
        if self.count < 0:
            return False
        digest = count_digest(self.rest, count)
        (<int64_t *>self.mine)[2] = digest
        (<int64_t *>self.mine)[3] = -digest
        # (a signature is made only for an error's message: _signature)
        self._ring_sig = self._sig if count == self._sig.count else (self._sig, count)
        self.count = count
        return True

    def direct(self, int kind, intptr_t comm, intptr_t datatype, intptr_t op, int root,
               int at_send, int at_recv, Py_ssize_t send_unit, Py_ssize_t recv_unit):
        """Have :meth:`run` start the library's non-blocking collective ``kind`` itself
        (from C, over each call's own arrays), as
        :meth:`wacoll.mpi._fastcall.NativeCall.direct` calls the blocking one (the
        same arguments): ``method`` would read the arguments again."""
        if _icolls.hsize == 0:
            raise RuntimeError("the library's non-blocking collectives are not installed")
        if not 1 <= kind <= 7 or send_unit <= 0 or recv_unit <= 0:
            raise ValueError(f"no direct collective {kind} of units "
                             f"{send_unit}, {recv_unit}")
        self.kind, self.comm_h, self.type_h, self.op_h = kind, comm, datatype, op
        self.root, self.at_send, self.at_recv = root, at_send, at_recv
        self.send_unit, self.recv_unit = send_unit, recv_unit

    cdef object _start_direct(self, tuple args):
        """Start the collective over ``args`` from C (:meth:`direct`): None, its
        request's handle in ``reqbuf``; or, where a count does not fit MPI's int,
        mpi4py's request of ``method``."""
        cdef Py_buffer view
        cdef const void *sbuf = NULL
        cdef void *rbuf = NULL
        cdef Py_ssize_t scount = 0, rcount = 0
        cdef int err
        if self.at_send >= 0 and args[self.at_send] is not None:
            PyObject_GetBuffer(args[self.at_send], &view, PyBUF_RECORDS_RO)
            sbuf, scount = view.buf, view.len // self.send_unit
            PyBuffer_Release(&view)
        if self.at_recv >= 0 and args[self.at_recv] is not None:
            PyObject_GetBuffer(args[self.at_recv], &view, PyBUF_RECORDS_RO)
            rbuf, rcount = view.buf, view.len // self.recv_unit
            PyBuffer_Release(&view)
        if scount > 0x7FFFFFFF or rcount > 0x7FFFFFFF:  # (MPI's counts are ints)
            return self.method(*(replaced(args, self.replace) if self.replace
                                 else args))
        with nogil:
            err = wacoll_icollective(&_icolls, self.kind, sbuf, <int>scount, rbuf,
                                     <int>rcount, self.type_h, self.op_h, self.root,
                                     self.comm_h, self.reqbuf)
        if err:
            from mpi4py import MPI
            raise MPI.Exception(err)
        return None

    def run(self, tuple args):
        """Run the call over ``args``: True when it ran, False when its check failed
        (the caller raises the agreed error and retires the communicator)."""
        cdef int outcome, err = 0
        cdef char *req = NULL
        request = None
        if self.method is not None and self.kind:
            request = self._start_direct(args)
            if request is None:
                req = &self.reqbuf[0]
            else:
                req = <char *><intptr_t>_addressof(request)
        elif self.method is not None:
            request = self.method(*(replaced(args, self.replace) if self.replace
                                    else args))
            req = <char *><intptr_t>_addressof(request)
        if self.ring is not None:
            try:
                outcome = _library_deferred(self.ring, req, <const int64_t *>self.mine,
                                            self._ring_sig, &err, self.receives,
                                            self.paced_by, self.source)
            except BaseException:  # (an interrupt): the request may still run
                if request is None and req != NULL:
                    request = _request_at(self.reqbuf)
                if request is not None:
                    self.abandoned.append(request)
                raise
            if outcome == OK:
                return True
            if request is None and req != NULL:
                request = _request_at(self.reqbuf)
            if request is not None and outcome != WORK_ERROR:
                self.abandoned.append(request)
            if outcome == CHECK_FAILED:
                return False
            raise _error(err)
        with nogil:
            if req == NULL:  # a Barrier: the check alone
                outcome = _drive(None, self.check, NULL, NULL, self.tag,
                                 <char *>self.mine, <char *>self.flags_at, False,
                                 self.tag)
            else:
                outcome = _drive_library(self.check, req, <char *>self.mine,
                                         <char *>self.flags_at, self.tag, &err)
        if outcome == OK:
            return True
        if request is None and req != NULL:
            request = _request_at(self.reqbuf)
        if outcome == CHECK_FAILED:
            if request is not None:
                self.abandoned.append(request)
            return False
        if request is not None and outcome != WORK_ERROR:
            self.abandoned.append(request)
        if outcome == INTERRUPTED:
            raise _error(E_INTERRUPTED)
        raise _error(err if outcome == WORK_ERROR else self.check.err)


cdef object _request_at(const char *at):
    """The request whose handle is at ``at``, as an mpi4py ``Request`` (kept where
    a call abandons it, as mpi4py's own requests are)."""
    from mpi4py import MPI
    cdef int64_t value = 0
    if _icolls.hsize == 4:
        value = (<const int32_t *>at)[0]
    else:
        value = (<const int64_t *>at)[0]
    return MPI.Request.fromhandle(value if value >= 0 else value + (1 << 64))


def address(arg):
    """The address of the memory an argument (an array, or a buffer specification
    ``[array, ...]``) describes."""
    return _address(arg)


# mpi4py's MPI._addressof: where a request object keeps its handle
cdef object _addressof = None


# ------------------------------------------------------------- a persistent start
cdef class PersistentRun:
    """The compiled half of a persistent wacoll collective
    (:class:`wacoll.mpi.persistent.Prequest` derives from it).

    Once a runner is bound (:meth:`bind_runner`), ``Start``, ``Wait`` and ``Test``
    run it directly: a start posts the plan's messages over the bound buffers with
    the call's own tag and runs the steps it can; nothing is read or checked again
    (the call was agreed on when the request was made). Otherwise they hand over to
    the subclass's ``_start``, ``_wait`` and ``_test`` (the MPI library's persistent
    request, or a plan the Python executor runs); so do the starts that must raise
    (a broken communicator, a request still active).
    """

    cdef Runner _bound
    cdef object _owner
    cdef intptr_t _in_at, _out_at, _copy_dst, _copy_src
    cdef Py_ssize_t _copy_n
    cdef int64_t _tag_base, _tag_span

    def bind_runner(self, Runner runner, owner, intptr_t inbuf, intptr_t outbuf,
                    tuple in_copy, int64_t tag_base, int64_t tag_span):
        """Run the starts with ``runner`` over the buffers at ``inbuf`` and
        ``outbuf``; ``owner`` is the communicator's
        :class:`~wacoll.mpi.route.Route` (its ``seq`` numbers the calls,
        ``tag_base + seq % tag_span`` tags their messages); ``in_copy``,
        ``(dst, src, bytes)`` or ``()``, is copied at each start (an in-place
        input). ``runner=None`` unbinds."""
        self._bound, self._owner = runner, owner
        self._in_at, self._out_at = inbuf, outbuf
        self._copy_dst, self._copy_src, self._copy_n = in_copy if in_copy else (0, 0, 0)
        self._tag_base, self._tag_span = tag_base, tag_span

    def Start(self):
        """Start the collective (every rank starts its requests in the same order)."""
        cdef Runner r = self._bound
        cdef int status
        cdef int tag
        if r is None:
            return self._start()
        owner = self._owner
        if owner.broken is not None or (r.started and not r.done):
            return self._start()  # raises the error that names it
        seq = owner.seq
        owner.seq = seq + 1
        tag = <int>(self._tag_base + (<int64_t>seq) % self._tag_span)
        with nogil:
            if self._copy_n:  # in place: the input as the output is now
                memmove(<void *>self._copy_dst, <const void *>self._copy_src,
                        self._copy_n)
            status = r.start(<char *>self._in_at, <char *>self._out_at, tag)
            if status == 0:
                status = r.advance(False)
            if status < 0:
                r.cancel()
        if status < 0:
            raise _error(r.err)

    def Wait(self, status=None):
        """Wait until the started collective is complete. An interrupt (Ctrl-C) in
        the wait ends the job (:mod:`wacoll.mpi.interrupts`)."""
        if self._bound is None:
            return self._wait(status)
        if self._proceed(True) < 0:
            self._failed(_error(self._bound.err))
        return True

    def Test(self, status=None):
        """Whether the started collective is complete (advancing it)."""
        cdef int outcome
        if self._bound is None:
            return self._test(status)
        outcome = self._proceed(False)
        if outcome < 0:
            raise _error(self._bound.err)
        return outcome == 1

    cdef int _proceed(self, bint block):
        """Advance the bound runner's started run: 1 done (or never started), 0
        waiting, -1 failed (the run cancelled, its error in ``err``)."""
        cdef Runner r = self._bound
        cdef int outcome = 1
        if r.started and not r.done:
            with nogil:
                outcome = r.advance(block)
                if outcome < 0:
                    r.cancel()
        return outcome



# ------------------------------------------------ one node's non-blocking checks
#: Lines of a rank's ring of non-blocking checks (:class:`NodeRing`): how many of
#: its non-blocking calls may start beyond the checks the slowest rank has read.
RING_LINES = 256
#: int64 words a ring line takes (one 64-byte cache line: the check's number, its
#: four flags, padding).
RING_LINE_WORDS = 8

cdef enum:
    _RING = 256
    _RWORDS = 8
    _POLLS_PER_PROGRESS = 64  # ring polls between two calls of its ``progress``


cdef class NodeRing:
    """The checks of one node's non-blocking calls in shared memory: the element-wise
    MAX of four int64 flags over the ranks, published when a call starts and
    collected when it is waited for, without a message.

    Every rank numbers its non-blocking checks alike (1, 2, ...: MPI orders a
    communicator's collectives alike on every rank). Check ``k`` goes into line
    ``k % RING_LINES`` of the rank's ring, its flags first and its number last
    (a release store). A rank reads the checks in order, each once every rank's
    line of it carries its number, folding the lines into the flags array the
    check was published from (so whoever reads, the thread waiting for that call
    or one waiting for a later one, the result lands in its call's own flags).
    Each rank's progress line says up to which check it has read: a rank writes
    check ``k`` only when every rank has read check ``k - RING_LINES`` (no line
    is overwritten while it may be read), reading its own meanwhile and letting
    the library progress. So up to ``RING_LINES`` non-blocking calls may start
    ahead of the slowest rank's.

    Parameters
    ----------
    lines : numpy.ndarray
        int64, ``size * (RING_LINES + 1) * RING_LINE_WORDS`` words every rank of
        the node maps, zeros at the start.
    rank, size : int
        This rank and the number of ranks.
    progress : callable
        Called while the ring is full (lets the MPI library progress: a peer may
        wait in the library for this rank's part of an earlier operation).
    base : int
        The number before its first check (0: its checks are 1, 2, ...). A ring
        that reuses lines another ring used numbers its checks past every number
        that one wrote, so that no old line is taken for one of its own
        (:class:`NodeStream`).

    Examples
    --------
    >>> import numpy as np
    >>> ring = NodeRing(np.zeros(1 * 257 * 8, np.int64), 0, 1, lambda: None)
    >>> flags = np.array([0, 0, 7, -7], np.int64)
    >>> seq = ring.publish(flags)
    >>> ring.collect(seq), flags.tolist()
    (True, [0, 0, 7, -7])
    """

    cdef object _lines
    cdef int64_t *base
    cdef int rank, size, lock
    cdef object progress
    cdef int polls
    #: The number of the last check this rank published.
    cdef readonly int64_t seq
    #: Every check up to this one has been read on this rank.
    cdef readonly int64_t done
    # where each check in flight folds its result (its flags array), and that array
    cdef int64_t *outs[_RING]
    cdef list held
    #: The number before its first check.
    cdef readonly int64_t first

    def __init__(self, int64_t[::1] lines not None, int rank, int size, progress,
                 int64_t base=0):
        if lines.shape[0] < size * (_RING + 1) * _RWORDS or not 0 <= rank < size:
            raise ValueError("the shared array is too small for the ranks")
        self._lines = lines
        self.base = &lines[0]
        self.rank, self.size, self.progress = rank, size, progress
        self.seq = self.done = self.first = base
        self.held = [None] * _RING

    cdef inline int64_t *_line(self, int r, int64_t k) noexcept nogil:
        """Rank ``r``'s line of check ``k`` (``k = -1``: its progress line)."""
        return self.base + (r * (_RING + 1) + (_RING if k < 0 else k % _RING)) * _RWORDS

    cdef bint _room(self, int64_t k) noexcept nogil:
        """Whether every rank has read check ``k - RING_LINES``."""
        cdef int r
        if k - self.first <= _RING:
            return True
        for r in range(self.size):
            if wacoll_load_acquire(self._line(r, -1)) < k - _RING:
                return False
        return True

    cdef inline int64_t read_by(self, int r) noexcept nogil:
        """How far rank ``r`` has read (:attr:`first` before its first read here:
        its progress line may hold what it read in a ring that used the lines
        before)."""
        cdef int64_t k = wacoll_load_acquire(self._line(r, -1))
        return k if k > self.first else self.first

    cdef void _read(self) noexcept nogil:
        """Read the checks in flight, in order, as far as every rank has published."""
        cdef int64_t k
        cdef int64_t *out
        cdef int64_t *line
        cdef int r, i
        wacoll_spin_lock(&self.lock)  # (two threads may wait for two calls)
        while self.done < wacoll_load_acquire(&self.seq):
            k = self.done + 1
            for r in range(self.size):
                if wacoll_load_acquire(self._line(r, k)) != k:
                    wacoll_spin_unlock(&self.lock)
                    return
            out = self.outs[k % _RING]
            for r in range(self.size):
                line = self._line(r, k)
                for i in range(4):
                    if line[1 + i] > out[i]:
                        out[i] = line[1 + i]
            wacoll_store_release(&self.done, k)  # (its flags before it, for pollers)
            wacoll_store_release(self._line(self.rank, -1), k)
        wacoll_spin_unlock(&self.lock)

    cdef int64_t start(self, int64_t *flags, object holder) except -1:
        """Publish this rank's flags of its next check (four int64 at ``flags``,
        where the MAX is folded in when the check is read; ``holder`` owns them and
        is kept until then): its number. Waits while the ring is full (letting the
        library progress and the signal handlers run; raises what one raised)."""
        cdef int64_t k = self.seq + 1
        cdef double began = 0, nap = 1e-6, due = 0
        cdef int64_t *line
        cdef int i
        while not self._room(k):
            self._read()
            if self._room(k):
                break
            self.progress()
            _between_polls(&began, &nap, &due)
        self.outs[k % _RING] = flags
        self.held[k % _RING] = holder
        line = self._line(self.rank, k)
        for i in range(4):
            line[1 + i] = flags[i]
        wacoll_store_release(line, k)
        wacoll_store_release(&self.seq, k)
        return k

    cdef bint poll(self, int64_t k) noexcept nogil:
        """Whether check ``k`` (published here) has been read: its flags hold the
        MAX over the ranks. Every few unanswered polls, ``progress`` is called (a
        peer may wait in the library for this rank before it publishes)."""
        if wacoll_load_acquire(&self.done) < k:
            self._read()
        if wacoll_load_acquire(&self.done) >= k:
            return True
        self.polls += 1
        if self.polls >= _POLLS_PER_PROGRESS:
            self.polls = 0
            with gil:
                try:
                    self.progress()
                except BaseException:  # (an MPI error surfaces in the calls)
                    pass
        return False

    def publish(self, flags):
        """Publish ``flags`` (a C-contiguous int64 array of four) as this rank's next
        check: its number, for :meth:`collect` (which folds the others' into
        ``flags``)."""
        cdef int64_t[::1] f = flags
        if f.shape[0] != 4:
            raise ValueError("a check's flags are four int64 words")
        return self.start(&f[0], flags)

    def collect(self, int64_t k):
        """Whether check ``k`` is complete; then the flags it was published from
        hold the MAX over the ranks."""
        if not self.first < k <= self.seq:
            raise ValueError(f"check {k} was not published on this rank")
        return self.poll(k)

    def wait(self, int64_t k):
        """:meth:`collect` until check ``k`` is complete, letting the library
        progress and the signal handlers run between polls (raises what one
        raised)."""
        cdef double began = 0, nap = 1e-6, due = 0
        while not self.collect(k):
            self.progress()
            _between_polls(&began, &nap, &due)
        return True


# ---------------------------------------------------- a non-blocking call in flight
# A Started's outcome while its call runs (the others are drive()'s OUTCOMES).
cdef enum:
    PENDING = -1


cdef class Started:
    """One non-blocking call in flight: its work and its cross-rank check, started
    in the calling thread (in program order, as every rank starts its collectives)
    and advanced, in C with the GIL released, by whichever thread waits for it
    (:mod:`wacoll.mpi.startcall`).

    A ``Started`` is reused by the next call of the same recorded form once its call
    has completed: it owns the work's runner, the check's runner, the check's
    flags and the staging area of an in-place input.

    Parameters
    ----------
    work : Runner or None
        The plan's runner (None: the work is the MPI library's collective, whose
        request :meth:`begin` is given, or there is no work: a checked Barrier).
    check : Runner or None
        The check's runner on several clusters (a MAX all-reduce of four int64).
    check_start : callable or None
        On one cluster across nodes: ``check_start(flags)`` starts the check's
        all-reduce in place over the flags array and returns its request (the MPI
        library's ``Iallreduce``).
    digest : int
        The call's signature digest.
    in_copy_bytes : int
        Bytes of an in-place input staged at the start of each call.
    ring : NodeRing or None
        On one node: the ring the check is published in and collected from.
    """

    cdef readonly Runner work, check
    cdef readonly NodeRing ring
    cdef int64_t ring_seq
    cdef object check_start, _work_request, _check_request
    cdef char *wreq
    cdef char *creq
    cdef readonly object mine, flags
    cdef object _in_copy
    cdef int64_t *own
    cdef int64_t *got
    cdef readonly intptr_t in_copy_at
    cdef int w, c
    cdef bint work_failed, checked, hold_work
    #: The MPI error code of a failed work or check (``E_INTERRUPTED``: a signal).
    cdef readonly int err
    #: One of :data:`OUTCOMES` once the call is over; -1 while it runs.
    cdef readonly int outcome

    def __init__(self, Runner work, Runner check, check_start, digest,
                 Py_ssize_t in_copy_bytes=0, NodeRing ring=None):
        global _addressof
        if _addressof is None:
            from mpi4py import MPI
            _addressof = MPI._addressof
        self.work, self.check, self.check_start = work, check, check_start
        self.ring = ring
        self.checked = check is not None or check_start is not None or ring is not None
        self.mine = np.array([0, 0, digest, -digest], np.int64)
        self.flags = np.zeros(4, np.int64)
        cdef int64_t[::1] mv = self.mine
        cdef int64_t[::1] fv = self.flags
        self.own, self.got = &mv[0], &fv[0]
        self._in_copy = np.zeros(in_copy_bytes + 64, np.uint8)
        self.in_copy_at = (self._in_copy.ctypes.data + 63) & ~63
        self.outcome = OK

    def begin(self, intptr_t inbuf, intptr_t outbuf, int tag, work_request=None,
              bint advance=True):
        """Start a call over the buffers at these addresses with messages tagged
        ``tag``: the check, then the work (``work_request``: the MPI library's
        collective, already started; else this slot's runner, if any). Whether it
        is already over (see :attr:`outcome`). Without ``advance`` (the
        application holds the library's request), False, and an :meth:`advance`
        that does not block polls the work only once the check has been read:
        until then a ``Test`` leaves the handle the application's, not
        ``MPI_REQUEST_NULL`` (MPICH 5.0's ``MPI_Waitall`` refuses a completed
        request beside a generalized one still running). A blocking one polls
        both, and returns at once when the check fails."""
        cdef int status = 0
        if self.outcome == PENDING:
            raise RuntimeError("this slot still runs an earlier call")
        self.w = self.c = 1
        self.hold_work = not advance
        self.work_failed, self.err, self.outcome = False, 0, PENDING
        self.wreq = self.creq = NULL
        self._work_request = self._check_request = None
        memcpy(self.got, self.own, 4 * sizeof(int64_t))
        if work_request is not None:  # kept (with its buffers) whatever happens next
            self._work_request = work_request
        if self.check is not None:
            with nogil:
                status = self.check.start(<char *>self.own, <char *>self.got, tag)
            if status < 0:
                self.err, self.outcome = self.check.err, CHECK_ERROR
                return True  # (the work was not started)
            self.c = 0
        elif self.ring is not None:
            self.ring_seq = self.ring.start(self.got, self.flags)
            self.c = 0
        elif self.check_start is not None:
            self._check_request = self.check_start(self.flags)
            self.creq = <char *><intptr_t>_addressof(self._check_request)
            self.c = 0
        if work_request is not None:
            self.wreq = <char *><intptr_t>_addressof(work_request)
            self.w = 0
        elif self.work is not None:
            with nogil:
                status = self.work.start(<char *>inbuf, <char *>outbuf, tag)
                if status < 0:
                    self.work.cancel()
            if status < 0:
                self.work_failed, self.err = True, self.work.err
            else:
                self.w = 0
        return self.advance(False) if advance else False

    def advance(self, bint block):
        """Advance the call (to its end when ``block``): whether it is over."""
        cdef int outcome
        if self.outcome != PENDING:
            return True
        with nogil:
            outcome = self._advance(block)
        self.outcome = outcome
        return outcome != PENDING

    def error(self):
        """The exception of an MPI error or a signal (:attr:`outcome` is a work
        error, a check error or an interruption)."""
        return _error(E_INTERRUPTED if self.outcome == INTERRUPTED else self.err)

    @property
    def work_at(self):
        """The address of the handle of the library's request this slot polls (0:
        none)."""
        return <intptr_t>self.wreq

    cdef int _poll_work(self) noexcept nogil:
        cdef int status, flag = 0
        if self.work is not None:
            status = self.work.advance(False)
            if status < 0:
                self.work.cancel()
                self.work_failed, self.err, self.w = True, self.work.err, 1
            elif status == 1:
                self.w = 1
            return 0
        status = wacoll_test(&_M, self.wreq, &flag)
        if status:
            self.work_failed, self.err, self.w = True, status, 1
        elif flag:
            self.w = 1
        return 0

    cdef int _poll_check(self) noexcept nogil:
        """-1 on an MPI error (in ``err``)."""
        cdef int status, flag = 0
        if self.check is not None:
            status = self.check.advance(False)
            if status < 0:
                self.err = self.check.err
                return -1
            if status == 1:
                self.c = 1
            return 0
        if self.ring is not None:
            if self.ring.poll(self.ring_seq):
                self.c = 1
            return 0
        status = wacoll_test(&_M, self.creq, &flag)
        if status:
            self.err = status
            return -1
        if flag:
            self.c = 1
        return 0

    cdef void _abandon(self) noexcept nogil:
        """Cancel what can be (a plan's receives; a library collective cannot be)."""
        if self.work is not None and self.w == 0 and not self.work.done:
            self.work.cancel()
        if self.check is not None and self.c == 0 and not self.check.done:
            self.check.cancel()

    cdef int _advance(self, bint block) noexcept nogil:
        cdef double began = wacoll_now(), nap = 1e-6, due = 0
        while True:
            if self.c == 0 and self._poll_check() < 0:
                self._abandon()
                return CHECK_ERROR
            if self.w == 0 and (block or self.c or not self.hold_work):
                self._poll_work()
            if self.c == 1:
                if self.checked and not _passed(self.own, self.got):
                    self._abandon()
                    return CHECK_FAILED
                if self.w == 1:
                    return WORK_ERROR if self.work_failed else OK
            if not block:
                return PENDING
            nap = _pause(began, nap, &due)
            if nap < 0:
                self._abandon()
                return INTERRUPTED


# ------------------------------------------------------------ verdicts in flight
cdef int _between_polls(double *began, double *nap, double *due) except -1:
    """Between two polls of a wait (``began`` 0 at its start): :func:`_pause`
    without the GIL; raises what a signal handler raised meanwhile."""
    if began[0] == 0:
        began[0] = wacoll_now()
    with nogil:
        nap[0] = _pause(began[0], nap[0], due)
    if nap[0] < 0:
        raise _error(E_INTERRUPTED)
    return 0


cdef enum:
    V_FREE = 0
    V_RUNNING = 1
    V_PASSED = 2
    V_FAILED = 3

# A blocking call whose work has waited this long for its peers asks them for their
# entries of the verdict stream at once (VerdictStream.hurry): where arguments
# disagree, a rank that waits for data that will never come learns why within it.
# Long against a call of a loop across a wide area (a request that every such call
# made would be a message per peer per call again: at 5 ms, an 8-rank Allreduce of
# 1 KiB on the metro testbed took 2.5 times its unchecked time).
cdef double _HURRY_AFTER = 0.05


cdef class Verdicts:
    """The checks of a communicator's blocking calls on several clusters, whose
    verdicts are collected after the calls return.

    A blocking call on several clusters returns once this rank's part of its work is
    done (:func:`_drive_deferred`), as the MPI library's would, while its check may
    still travel: its verdict is collected later. Every later call polls for
    verdicts, and anything that must not run before every verdict is in (a call
    read afresh, a Barrier, a non-blocking start, ``Free``) settles them
    (:meth:`settle`). Verdicts are decided in call order, and a failed one is
    reported only once every older one passed, so every rank reports the same
    (oldest) failed call.

    Two kinds: :class:`VerdictStream` (the calls' digests batched into a stream of
    messages, up to :data:`wacoll.mpi.argcheck.DIRECT_CHECK_LIMIT` ranks) and
    :class:`VerdictRing` (one compiled check all-reduce per call, larger
    communicators).
    """

    #: The communicator of the checks' messages.
    cdef readonly object comm
    #: The first tag of the checks' messages (see each kind's :attr:`tags`).
    cdef readonly int tag0
    #: Whether a call returns before its verdict (else it waits for every one).
    cdef public bint defer
    #: Calls folded into the next check (:meth:`fold`), and their running digest.
    cdef readonly int nfolded
    cdef readonly int64_t folded
    #: Where the oldest failed verdict is (-1: none).
    cdef readonly int64_t failed

    cpdef enter(self):
        """A new call begins on this rank: the calls whose verdicts are still
        outstanding have returned (their failures are learned at a later call)."""
        raise NotImplementedError

    cdef int64_t open(self, const int64_t *mine, object sig, int paced_by) except -2:
        """Check a new call (its four flags ``mine``; its signature ``sig`` for an
        error's message; ``paced_by``: the rank whose progress paces it, -1 for
        none, :attr:`PlanCall.paced_by`): where its verdict is (for
        :meth:`decided`), or -1 when an older verdict failed (nothing opened)."""
        raise NotImplementedError

    cdef int poll(self, bint block) except -2:
        """Collect what has arrived (with ``block``, until every verdict is in): 1
        when a verdict failed (:attr:`failed`), 0 otherwise. Raises the MPI
        library's error, or what a signal handler raised while it waited."""
        raise NotImplementedError

    cdef bint unsettled(self) noexcept:
        """Whether a verdict is still outstanding."""
        return False

    cdef bint decided(self, int64_t at) noexcept:
        """Whether the verdict of the check opened at ``at`` is in."""
        return True

    cdef int hurry(self) except -1:
        """This rank waits for a verdict, or for data: ask for what is missing now."""
        return 0

    cdef int ask(self, int64_t need) except -1:
        """:meth:`hurry`, for the verdicts (or entries) of the calls below ``need``
        only: a peer that has made those calls can answer."""
        return self.hurry()

    cdef int left(self) noexcept:
        """This rank's call returns (or raises)."""
        return 0

    cdef bint agreed_with(self, int64_t at, int peer) noexcept:
        """Whether rank ``peer``'s check of the call opened at ``at`` is known to
        agree with this rank's (the same digest, no error): False where that is
        not known apart from the verdict."""
        return False

    @property
    def idle(self):
        """Whether no verdict is outstanding (none in flight, none failed)."""
        return not self.unsettled() and self.failed < 0

    cpdef fold(self, int64_t digest):
        """A call with nothing to move (every rank's count is 0): no check of its
        own; its signature's ``digest`` goes into the next check's, which fails
        where any rank's calls since the last check differ (:func:`fold_digest`).
        """
        _fold_call(&self.folded, &self.nfolded, digest)

    def flush(self):
        """Check the calls folded since the last check now, with a check of their
        own (where every rank flushes: ``Free``, a new communicator, a
        non-blocking start, the end of the process), and wait for every verdict:
        True when all passed."""
        cdef int64_t mine[4]
        if self.nfolded:
            mine[0], mine[1], mine[2] = 0, 0, _FLUSHED
            _fold_into(mine, self.folded)
            self.nfolded, self.folded = 0, 0
            if self.open(mine, None, -1) < 0:
                return False
        return self.poll(True) == 0

    def settle(self):
        """Wait for every verdict in flight: True when all passed, False when one
        failed (:meth:`failure` says which)."""
        return self.poll(True) == 0

    cdef object _take_folded(self):
        folded = self.folded if self.nfolded else None
        self.nfolded, self.folded = 0, 0
        return folded

    def close(self):
        """Before the communicator is freed (every rank, every verdict settled)."""


cdef class VerdictRing(Verdicts):
    """A ring of compiled check runners, one per call in flight, each with its own
    tag: the :class:`Verdicts` of communicators too large for the stream.

    Each check's messages carry its slot's tag on the ring's own communicator:
    several checks in flight at once never match each other's messages.

    Parameters
    ----------
    runners : list of Runner
        The check's compiled all-reduce (MAX of four int64), one runner per slot,
        all on ``comm``.
    comm : mpi4py.MPI.Intracomm
        The communicator of the checks' messages (kept here).
    tag0 : int
        The tag of slot 0's messages (slot ``i``'s is ``tag0 + i``). A ring that
        follows one given up (:meth:`abandon`) on the same communicator takes the
        tags after it, so that the abandoned checks' messages never match its own.
    """

    cdef list _runners
    cdef object _mine, _flags, _state, _returned
    cdef int64_t *mine
    cdef int64_t *flags
    cdef char *state
    # whether this rank's call returned before the slot's verdict
    cdef char *returned
    cdef readonly int width, head, count
    cdef list _sigs
    cdef Runner _error_runner

    def __init__(self, list runners not None, comm, int tag0=0):
        cdef int64_t[:, ::1] mv
        cdef int64_t[:, ::1] fv
        cdef char[::1] sv
        cdef char[::1] rv
        if not runners:
            raise ValueError("a ring of checks needs at least one runner")
        self._runners, self.comm = runners, comm
        self.width = len(runners)
        self._mine = np.zeros((self.width, 4), np.int64)
        self._flags = np.zeros((self.width, 4), np.int64)
        self._state = np.zeros(self.width, np.int8)
        self._returned = np.zeros(self.width, np.int8)
        mv, fv, sv, rv = self._mine, self._flags, self._state, self._returned
        self.mine, self.flags, self.state = &mv[0, 0], &fv[0, 0], &sv[0]
        self.returned = &rv[0]
        self._sigs = [None] * self.width
        self.head = self.count = 0
        self.failed = -1
        self.tag0 = tag0
        self.nfolded, self.folded = 0, 0
        self.defer = True

    @property
    def tags(self):
        """How many tags from :attr:`tag0` its messages use."""
        return self.width

    @property
    def in_flight(self):
        """How many checks are in flight."""
        cdef int i, n = 0
        for i in range(self.count):
            if self.state[(self.head + i) % self.width] == V_RUNNING:
                n += 1
        return n

    @property
    def failed_after_return(self):
        """Whether this rank's call whose verdict failed had returned before it
        (so that the rank learned of the failure at a later call)."""
        return self.failed >= 0 and self.returned[self.failed] != 0

    cdef bint unsettled(self) noexcept:
        return self.count > 0

    cdef bint decided(self, int64_t at) noexcept:
        return self.state[at] != V_RUNNING

    cpdef enter(self):
        cdef int i, slot
        for i in range(self.count):
            slot = (self.head + i) % self.width
            if self.state[slot] == V_RUNNING:
                self.returned[slot] = 1

    cdef int _conclude(self, int slot) noexcept:
        """A slot's check is complete: passed or failed by its flags."""
        self.state[slot] = V_PASSED if _passed(self.mine + 4 * slot,
                                               self.flags + 4 * slot) else V_FAILED
        return 0

    cdef int _advance(self, int slot) except -2:
        """Advance one running check without waiting: 1 when it is complete."""
        cdef Runner runner = <Runner>self._runners[slot]
        cdef int status
        with nogil:
            status = runner.advance(False)
            if status < 0:
                runner.cancel()
        if status < 0:
            self._error_runner = runner
            raise _error(runner.err)
        if status == 1:
            self._conclude(slot)
        return status

    cdef int _retire_head(self) noexcept:
        """Drop the passed checks at the head of the ring."""
        while self.count and self.state[self.head] == V_PASSED:
            self.state[self.head] = V_FREE
            self._sigs[self.head] = None
            self.head = (self.head + 1) % self.width
            self.count -= 1
        return 0

    cdef int poll(self, bint block) except -2:
        cdef int i, slot, failed_at
        cdef double began = 0, nap = 1e-6, due = 0
        if self.failed >= 0:
            return 1
        while True:
            failed_at = -1
            for i in range(self.count):
                slot = (self.head + i) % self.width
                if self.state[slot] == V_RUNNING:
                    self._advance(slot)
                if self.state[slot] == V_FAILED:
                    failed_at = i
                    break
            self._retire_head()
            if failed_at >= 0:
                # every check older than the failed one must be complete: the
                # oldest failure is the one every rank reports
                for i in range(failed_at):
                    if self.state[(self.head + i) % self.width] == V_RUNNING:
                        break
                else:
                    for i in range(failed_at + 1):
                        slot = (self.head + i) % self.width
                        if self.state[slot] == V_FAILED:
                            self.failed = slot
                            return 1
            elif not block or self.count == 0:
                return 0
            _between_polls(&began, &nap, &due)

    cdef int64_t open(self, const int64_t *mine, object sig, int paced_by) except -2:
        cdef int slot, status
        cdef Runner runner
        cdef double began = 0, nap = 1e-6, due = 0
        self.enter()
        if self.poll(False):
            return -1
        while self.count == self.width:  # full: the oldest verdict first
            if self.poll(False):
                return -1
            if self.count < self.width:
                break
            _between_polls(&began, &nap, &due)
        slot = (self.head + self.count) % self.width
        self.count += 1
        memcpy(self.mine + 4 * slot, mine, 4 * sizeof(int64_t))
        if self.nfolded:  # the calls folded since the last check are checked too
            _fold_into(self.mine + 4 * slot, self._take_folded())
        self._sigs[slot] = sig
        self.state[slot] = V_RUNNING
        self.returned[slot] = 0
        runner = <Runner>self._runners[slot]
        with nogil:
            status = runner.start(<char *>(self.mine + 4 * slot),
                                  <char *>(self.flags + 4 * slot), self.tag0 + slot)
            if status < 0:
                runner.cancel()
        if status < 0:
            raise _error(runner.err)
        self._advance(slot)
        return slot

    def reserve(self):
        """The next slot for a check run outside the ring (a call on the Python
        route, after :meth:`settle`): ``(slot, runner, tag, folded)``;
        :meth:`release` gives it back once that check is complete."""
        if self.count:
            raise RuntimeError("a check was reserved while others are in flight")
        slot = self.head
        self.count = 1
        self.state[slot] = V_RUNNING
        self.returned[slot] = 0
        return slot, self._runners[slot], self.tag0 + slot, self._take_folded()

    def release(self, int slot):
        """A reserved slot's check is complete (its call reports its own verdict)."""
        self.state[slot] = V_PASSED
        self._retire_head()

    def failure(self):
        """``(sig, flags, tag)`` of the oldest failed verdict: this rank's
        signature of that call, the check's all-reduced flags and its tag."""
        if self.failed < 0:
            raise RuntimeError("no verdict failed")
        return (_signature(self._sigs[self.failed]), self._flags[self.failed].copy(),
                self.tag0 + self.failed)

    def abandon(self):
        """Give up every check in flight, after a failed verdict: their receives
        are cancelled, and the ring is not used again (whoever holds it keeps it,
        and its runners' buffers, alive: MPI may still write them). Nothing is
        outstanding afterwards (:attr:`idle`)."""
        cdef int i, slot
        cdef Runner runner
        for i in range(self.count):
            slot = (self.head + i) % self.width
            if self.state[slot] == V_RUNNING:
                runner = <Runner>self._runners[slot]
                with nogil:
                    runner.cancel()
        self.count, self.failed = 0, -1


# ------------------------------------------------------------- the verdict stream
cdef enum:
    # entries a rank may hold before their verdicts (a call that finds the log
    # full waits for the oldest)
    S_LOG = 256
    # indices whose flags a rank collects at once: a peer is at most S_LOG entries
    # past what it verified, which is at most what this rank opened, which is at
    # most S_LOG past what this rank verified
    S_SPAN = 2 * S_LOG
    # entries a rank sends at once, unless a peer or its own wait needs them sooner
    S_BATCH = 16
    # calls a rank that only sends to a root may be past the root's entries
    # (PlanCall.paced_by)
    S_LEAD = 64
    # a chunk's words before its entries: the index of its first entry, how many
    # entries, the index its sender needs every rank's entries below (-1: none,
    # -2: the sender closes the stream and sends nothing after it), and how many
    # runs of equal entries follow, each as its length and the entry (a loop of one
    # call sends one run a batch: on a 12.5 MB/s link, 16 entries one by one took
    # 43 us a chunk a peer)
    S_HEADER = 4
    S_RUN = 5
    S_CHUNK = S_HEADER + S_RUN * S_BATCH  # (a rank never holds more unsent entries)
    # send buffers in flight at once
    S_SENDS = 4


#: Entries of the verdict stream a rank may hold before their verdicts, how many it
#: sends at once, and how many calls a rank that only sends to a root may be past
#: the root's entries (:class:`VerdictStream`, :attr:`PlanCall.paced_by`).
STREAM_LOG, STREAM_BATCH, STREAM_LEAD = S_LOG, S_BATCH, S_LEAD


cdef int64_t *_words(int64_t[::1] array):
    """The first word of a contiguous int64 array (which its owner keeps alive)."""
    return &array[0]


cdef inline int _hurry_if_late(Verdicts ring, double began, bint *hurried,
                               int64_t need=-1) except -1:
    """Within a wait that began at ``began`` (0: not yet waiting): once it has
    lasted :data:`_HURRY_AFTER`, ask the peers for their verdicts' entries (once):
    every one (:meth:`Verdicts.hurry`), or those of the calls below ``need``
    (:meth:`Verdicts.ask`)."""
    if not hurried[0] and began != 0 and wacoll_now() - began > _HURRY_AFTER:
        hurried[0] = True
        if need < 0:
            ring.hurry()
        else:
            ring.ask(need)
    return 0


cdef class EntryLog(Verdicts):
    """What :class:`VerdictStream` and :class:`NodeStream` share: each rank's log
    of its calls' entries (four flags each), decided in order, a failed one
    reported once every older one passed; and the Python route's check, reserved
    as an entry of the log (:meth:`reserve`). The kinds differ in how the entries
    travel: as messages, or in one node's memory."""

    #: Entries this rank opened, and verified (every rank's known and alike).
    cdef readonly int64_t opened, verified
    # entries of calls that had returned when a later call began (enter)
    cdef int64_t entered
    cdef readonly bint reserved, closed
    #: Calls that waited to open (the log full, or ahead of the rank that paces
    #: them), and the seconds they waited.
    cdef readonly int64_t stalls
    cdef readonly double stalled
    cdef object _own
    cdef int64_t *own       # S_LOG x 4: this rank's entries
    cdef list _sigs         # S_LOG: this rank's signatures of its entries
    cdef object _failed_flags

    cdef _start_log(self, comm, int tag0):
        """Set up an empty log (its kind's ``__init__``)."""
        self.comm, self.tag0 = comm, tag0
        self.defer = True
        self.failed = -1
        self.nfolded, self.folded = 0, 0
        self.opened = self.verified = self.entered = 0
        self._own = np.zeros(S_LOG * 4, np.int64)
        self.own = _words(self._own)
        self._sigs = [None] * S_LOG

    @property
    def in_flight(self):
        """How many of this rank's calls await their verdicts."""
        return self.opened - self.verified

    @property
    def failed_after_return(self):
        """Whether this rank's call whose verdict failed had returned before it
        (so that the rank learned of the failure at a later call)."""
        return 0 <= self.failed < self.entered

    cdef bint unsettled(self) noexcept:
        return self.opened > self.verified

    cdef bint decided(self, int64_t at) noexcept:
        return at < self.verified or at == self.failed

    cpdef enter(self):
        self.entered = self.opened

    cdef int64_t _log(self, const int64_t *mine, object sig) except -1:
        """Write this rank's entry of a new call (its flags ``mine``, the calls
        folded since the last check mixed in): where it is."""
        cdef int64_t at = self.opened
        cdef int64_t *entry = self.own + 4 * (at % S_LOG)
        memcpy(entry, mine, 4 * sizeof(int64_t))
        if self.nfolded:  # the calls folded since the last check are checked too
            _fold_into(entry, self._take_folded())
        self._sigs[at % S_LOG] = sig
        return at

    cdef int _failed_at(self, const int64_t *flags) except -1:
        """The oldest undecided verdict failed: every rank's flags of it
        combined are ``flags``."""
        self.failed = self.verified
        self._failed_flags = np.array(<int64_t[:4]>flags, np.int64)
        return 0

    cdef bint _held(self, int paced_by) noexcept:
        """Whether a new call must wait: the log is full, or this rank is too far
        ahead of the rank ``paced_by`` (-1: none), as each kind can tell."""
        return self.opened - self.verified >= S_LOG

    cdef int _still_held(self, double began, bint *hurried) except -1:
        """Within a wait to open that began at ``began``: what the kind does
        meanwhile (``hurried``: whether it asked its peers already)."""
        return 0

    cdef int _wait_to_open(self, int paced_by) except -1:
        """Wait while a new call must (:meth:`_held`), counting the stall: 1 when
        a verdict failed meanwhile (nothing is opened then), else 0."""
        cdef bint hurried = False
        cdef double began = 0, nap = 1e-6, due = 0
        while self._held(paced_by):
            if self.poll(False):
                return 1
            if not self._held(paced_by):
                break
            if began == 0:
                self.stalls += 1
            self._still_held(began, &hurried)
            _between_polls(&began, &nap, &due)
        if began != 0:
            self.stalled += wacoll_now() - began
        return 0

    cdef int _passed_one(self) noexcept:
        """The oldest undecided verdict passed."""
        self._sigs[self.verified % S_LOG] = None
        self.verified += 1
        return 0

    cdef bint outcome(self, int64_t at, int64_t *flags) except -1:
        """Whether the verdict of the check opened at ``at`` is in; then ``flags``
        holds every rank's flags of it combined (MAX)."""
        if at < self.verified:  # passed: every rank's entry is this one's
            memcpy(flags, self.own + 4 * (at % S_LOG), 4 * sizeof(int64_t))
            return True
        if at == self.failed:
            memcpy(flags, <int64_t *><intptr_t>self._failed_flags.ctypes.data,
                   4 * sizeof(int64_t))
            return True
        return False

    def reserve(self):
        """The check of a call on the Python route (after :meth:`settle`), in the
        log: ``(slot, check, tag, folded)``, where ``check`` starts and polls it
        as a compiled check's runner would (:class:`StreamCheck`), ``tag`` is
        where its faulty rank's error goes (:func:`wacoll.mpi.argcheck.error_tag`)
        and ``folded`` the calls folded before it; :meth:`release` once complete."""
        if self.opened != self.verified or self.reserved:
            raise RuntimeError("a check was reserved while others are in flight")
        self.reserved = True
        return 0, StreamCheck(self), self.tag0, self._take_folded()

    def release(self, int slot):
        """A reserved check is complete (its call reports its own verdict)."""
        self.reserved = False

    def failure(self):
        """``(sig, flags, tag)`` of the oldest failed verdict: this rank's
        signature of that call, every rank's flags of it combined as the check's
        all-reduce combines them (MAX), and the tag its faulty rank's error was
        sent with."""
        if self.failed < 0:
            raise RuntimeError("no verdict failed")
        return (_signature(self._sigs[self.failed % S_LOG]), self._failed_flags.copy(),
                self.tag0)


@cython.no_gc_clear  # (its buffers must outlive its receives: __dealloc__)
cdef class VerdictStream(EntryLog):
    """The checks of a communicator's blocking calls as one stream of messages:
    each rank logs every call's four flags (its *entry*), and sends its new entries
    to every other rank in one message every :data:`S_BATCH` calls, or at once where
    a verdict or a peer waits.

    A call's verdict is in once every rank's entry of it is known: it passed when
    all are alike and none names an error. Entries are decided in order, so every
    rank finds the same first failed one. Where the per-call check sends ``P - 1``
    messages a rank per call, the stream sends ``P - 1`` per :data:`S_BATCH` calls:
    a loop of back-to-back calls no longer pays a message per peer per call.

    No rank waits forever: a rank that needs verdicts (a settle, a full log) or
    whose work has waited :data:`_HURRY_AFTER` for its peers sends its entries
    marked with what it needs (:meth:`hurry`); every rank that polls the stream (in
    any call or wait of the communicator) answers with its own entries as soon as
    it has them. Once every entry up to the waiting call is known, either one
    differs (every rank raises at that call) or every rank made the call alike,
    and its data comes. A peer that returned from its call and waits in the
    application's own MPI calls answers at its next call on the communicator, its
    ``Free``, or the end of the process.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator of the stream's messages (kept here).
    handle : int
        ``comm``'s MPI handle.
    tag0 : int
        Its first tag: :attr:`tag0` for the check of a call on the Python route
        (:meth:`reserve`: its faulty rank's error is sent on it), ``tag0 + 1`` for
        the stream. A stream that follows one given up (:meth:`abandon`) on the
        same communicator takes the tags after it.
    """

    cdef readonly int size, rank
    cdef intptr_t handle
    #: Entries this rank sent.
    cdef readonly int64_t sent
    # the highest index below which a peer asked for this rank's entries, and below
    # which this rank asked for theirs
    cdef int64_t asked, hurried
    #: Chunks this rank sent, and how many of them asked for verdicts (hurry).
    cdef readonly int64_t chunks, hurries
    cdef object _acc, _nknown, _known, _recv, _send, _rreq, _sreq
    cdef int64_t *acc       # S_SPAN x 4: the MAX of the entries known per index
    cdef int32_t *nknown    # S_SPAN: how many ranks' entries are known per index
    cdef int64_t *known     # per rank: entries received from it
    cdef int64_t *recv      # per rank: its chunk's receive buffer
    cdef int64_t *send      # S_SENDS chunks
    cdef char *rreq         # per rank: its posted receive
    cdef char *sreq         # S_SENDS x size: the sends of each chunk
    cdef int next_send
    #: Called (with no argument) when an entry is opened with none unsent before
    #: it: the :class:`wacoll.mpi.keeper.StreamKeeper` sends them if no call comes.
    cdef public object arm
    cdef double last_left   # when this rank's last call returned
    cdef bint busy          # within a call (between open and left)
    cdef object __weakref__  # (the keeper holds streams weakly)
    # a thread sends (_send_claimed, whose MPI calls release the GIL): the calling
    # thread, or the keeper's; ``sender`` is its ident
    cdef bint sending
    cdef unsigned long sender

    def __init__(self, comm, intptr_t handle, int tag0=0):
        cdef int p
        cdef int32_t[::1] n
        cdef char[::1] c
        if not _ready:
            raise RuntimeError("the compiled runner's MPI entry points are not set")
        self._start_log(comm, tag0)
        self.handle = handle
        self.size, self.rank = comm.Get_size(), comm.Get_rank()
        self.sent = self.asked = self.hurried = 0
        self._acc = np.full(S_SPAN * 4, np.iinfo(np.int64).min, np.int64)
        self._nknown = np.zeros(S_SPAN, np.int32)
        self._known = np.zeros(self.size, np.int64)
        self._recv = np.zeros(self.size * S_CHUNK, np.int64)
        self._send = np.zeros(S_SENDS * S_CHUNK, np.int64)
        self._rreq = np.zeros(self.size * _M.hsize, np.int8)
        self._sreq = np.zeros(S_SENDS * self.size * _M.hsize, np.int8)
        self.acc = _words(self._acc)
        self.known, self.recv = _words(self._known), _words(self._recv)
        self.send = _words(self._send)
        n = self._nknown
        self.nknown = &n[0]
        c = self._rreq
        self.rreq = &c[0]
        c = self._sreq
        self.sreq = &c[0]
        for p in range(S_SENDS * self.size):
            wacoll_set_null(&_M, self.sreq + p * _M.hsize)
        for p in range(self.size):  # (all null before any is posted: __dealloc__)
            wacoll_set_null(&_M, self.rreq + p * _M.hsize)
        for p in range(self.size):
            if p != self.rank:
                self._post(p)

    @property
    def tags(self):
        """How many tags from :attr:`tag0` its messages use."""
        return 2

    cdef int _post(self, int p) except -1:
        cdef int err
        cdef int64_t *buf = self.recv + p * S_CHUNK
        cdef char *req = self.rreq + p * _M.hsize
        cdef int tag = self.tag0 + 1
        cdef intptr_t handle = self.handle
        with nogil:
            err = wacoll_irecv(&_M, buf, S_CHUNK * 8, p, tag, handle, req)
        if err:
            raise _error(err)
        return 0

    cdef int _absorb(self, int p) except -1:
        """Take in the chunk received from rank ``p``."""
        cdef int64_t *chunk = self.recv + p * S_CHUNK
        cdef int64_t first = chunk[0], n = chunk[1], need = chunk[2], runs = chunk[3]
        cdef int64_t i = 0, r, k, length, at
        cdef int w
        cdef int64_t *acc
        cdef int64_t *entry
        if first != self.known[p] or n < 0 or n > S_BATCH or not 0 <= runs <= n:
            raise RuntimeError(f"the verdict stream from rank {p} is out of order "
                               f"(entries {first}+{n}, expected {self.known[p]})")
        for r in range(runs):
            length, entry = chunk[S_HEADER + S_RUN * r], chunk + S_HEADER + S_RUN * r + 1
            if length < 1 or i + length > n:
                raise RuntimeError(f"the verdict stream from rank {p} is malformed")
            for k in range(length):
                at = (first + i) % S_SPAN
                acc = self.acc + 4 * at
                for w in range(4):
                    if entry[w] > acc[w]:
                        acc[w] = entry[w]
                self.nknown[at] += 1
                i += 1
        if i != n:
            raise RuntimeError(f"the verdict stream from rank {p} is malformed")
        self.known[p] = first + n
        if need == -2:  # its last chunk: nothing more comes from it
            return 1
        if need > self.asked:
            self.asked = need
        return 0

    cdef int _receive(self) except -1:
        """Take in every chunk that has arrived, and post the next receives."""
        cdef int index = 0, flag = 0, err, size = self.size
        cdef char *reqs = self.rreq
        while True:
            with nogil:
                err = wacoll_testany(&_M, size, reqs, &index, &flag)
            if err:
                raise _error(err)
            if not flag or index < 0 or index >= self.size:
                return 0
            if self._absorb(index) == 0:
                self._post(index)

    cdef int _verify(self) except -1:
        """Decide the verdicts whose entries are all known, in order."""
        cdef int64_t at
        cdef int64_t *acc
        while self.failed < 0 and self.verified < self.opened:
            at = self.verified % S_SPAN
            if self.nknown[at] < self.size:
                return 0
            acc = self.acc + 4 * at
            if not (acc[0] == 0 and acc[2] == -acc[3]):
                if self.sent < self.opened:
                    # this rank's own entry decided it: every other rank needs it
                    # to raise at the same call (this rank answers no more)
                    self._send_chunk(-1)
                self._failed_at(acc)
                return 0
            acc[0] = acc[1] = acc[2] = acc[3] = INT64_MIN
            self.nknown[at] = 0
            self._passed_one()
        return 0

    cdef int _send_chunk(self, int64_t need) except -1:
        """Send this rank's unsent entries to every other rank, with what it needs
        (-1: nothing), once the sends of the buffer it takes are complete (the
        calling thread: waits for the keeper's thread to finish a send)."""
        cdef unsigned long me = PyThread_get_thread_ident()
        while self.sending:
            if self.sender == me:
                raise RuntimeError("the verdict stream was re-entered while it sends")
            with nogil:  # (the keeper's sends are non-blocking: a moment)
                sched_yield()
        self.sending, self.sender = True, me
        try:
            if need == -1 and self.sent == self.opened:
                return 0  # (the keeper's thread sent them meanwhile)
            return self._send_claimed(need, True)
        finally:
            self.sending = False

    cdef bint _send_if_free(self, int64_t need) except -1:
        """Send this rank's unsent entries if no other thread sends and the next
        send buffer is free, never waiting: whether they were sent."""
        if self.sending:
            return False
        self.sending, self.sender = True, PyThread_get_thread_ident()
        try:
            if not self._free_to_send():
                return False
            self._send_claimed(need, False)
            return True
        finally:
            self.sending = False

    cdef int _send_claimed(self, int64_t need, bint wait) except -1:
        """:meth:`_send_chunk` by the thread that holds the sending side
        (``sending``); ``wait`` for the buffer's last sends (receiving meanwhile:
        the calling thread only, the one that receives). Its MPI calls release
        the GIL: the other thread (the calling one, or the keeper's) may open
        entries meanwhile, but sends none."""
        cdef int64_t n, i, runs = 0, first
        cdef int p, s, err = 0, nbytes, tag = self.tag0 + 1
        cdef int size = self.size, rank = self.rank
        cdef intptr_t handle = self.handle
        cdef int64_t *chunk
        cdef int64_t *run = NULL
        cdef int64_t *entry
        cdef char *reqs
        cdef double began = 0, nap = 1e-6, due = 0
        while not self._free_to_send():  # its buffer's last sends first
            if not wait:
                raise RuntimeError("the verdict stream's send buffer is busy")
            self._receive()
            _between_polls(&began, &nap, &due)
        first, n, s = self.sent, self.opened - self.sent, self.next_send
        if n > S_BATCH:
            raise RuntimeError(f"{n} unsent entries of the verdict stream (at most "
                               f"{S_BATCH})")
        chunk = self.send + s * S_CHUNK
        for i in range(n):  # (runs of equal entries)
            entry = self.own + 4 * ((first + i) % S_LOG)
            if run != NULL and memcmp(run + 1, entry, 4 * sizeof(int64_t)) == 0:
                run[0] += 1
                continue
            run = chunk + S_HEADER + S_RUN * runs
            run[0] = 1
            memcpy(run + 1, entry, 4 * sizeof(int64_t))
            runs += 1
        chunk[0], chunk[1], chunk[2], chunk[3] = first, n, need, runs
        nbytes = <int>(S_HEADER + S_RUN * runs) * 8
        self.next_send = (s + 1) % S_SENDS
        self.sent = first + n
        self.chunks += 1
        self.hurries += need >= 0
        if need > self.hurried:
            self.hurried = need
        reqs = self.sreq + s * size * _M.hsize
        with nogil:
            for p in range(size):
                if p != rank:
                    err = wacoll_isend(&_M, chunk, nbytes, p, tag, handle,
                                       reqs + p * _M.hsize)
                    if err:
                        break
        if err:
            raise _error(err)
        return 0

    cdef bint _free_to_send(self) except -1:
        """Whether the next send buffer's sends are complete (by the thread that
        holds the sending side)."""
        cdef int p, err = 0, flag = 1, size = self.size
        cdef char *reqs = self.sreq + self.next_send * self.size * _M.hsize
        with nogil:
            for p in range(size):
                if not wacoll_is_null(&_M, reqs + p * _M.hsize):
                    err = wacoll_test(&_M, reqs + p * _M.hsize, &flag)
                    if err or not flag:
                        break
        if err:
            raise _error(err)
        return flag != 0

    cdef int left(self) noexcept:
        self.busy = False
        if self.arm is not None:
            self.last_left = wacoll_now()
        return 0

    cpdef bint keep(self, double after) except -1:
        """Send this rank's unsent entries if its last call returned ``after``
        seconds ago and none has begun since (the
        :class:`wacoll.mpi.keeper.StreamKeeper`'s thread, with the GIL, never
        waiting; a rank within a call asks for what it needs itself): whether some
        are left to send later."""
        if self.closed or self.sent == self.opened or self.size == 1:
            return False
        if self.busy or wacoll_now() - self.last_left < after:
            return True
        return not self._send_if_free(-1)

    cdef int hurry(self) except -1:
        return self.ask(self.opened)

    cdef int ask(self, int64_t need) except -1:
        if self.hurried < need and self.size > 1 and not self.closed:
            self._send_chunk(need)
        return 0

    cdef int poll(self, bint block) except -2:
        cdef double began = 0, nap = 1e-6, due = 0
        if self.failed >= 0:
            return 1
        if block:
            self.hurry()
        while True:
            self._receive()
            if self.sent < self.asked <= self.opened:
                self._send_if_free(-1)  # a peer waits for them (never waiting here)
            self._verify()
            if self.failed >= 0:
                return 1
            if not block or self.verified == self.opened:
                return 0
            _between_polls(&began, &nap, &due)

    cdef int64_t open(self, const int64_t *mine, object sig, int paced_by) except -2:
        cdef int64_t at, slot
        cdef int w
        cdef int64_t *entry
        cdef int64_t *acc
        if self.closed:
            raise RuntimeError("the verdict stream is closed")
        self.busy = True  # (until the call's driver says it left)
        self.entered = self.opened
        if self.poll(False):
            return -1
        if paced_by == self.rank or paced_by >= self.size:
            paced_by = -1
        # full, or ahead of the rank that paces it: the oldest verdicts, or that
        # rank's entries, first
        if self._wait_to_open(paced_by):
            return -1
        at = self._log(mine, sig)
        entry = self.own + 4 * (at % S_LOG)
        slot = at % S_SPAN
        acc = self.acc + 4 * slot
        for w in range(4):
            if entry[w] > acc[w]:
                acc[w] = entry[w]
        self.nknown[slot] += 1
        self.opened += 1
        if self.size > 1:
            # without the keeper's thread nothing would send the entries of a rank
            # that returned and waits outside wacoll: each leaves with its call
            if (self.arm is None or self.opened - self.sent >= S_BATCH
                    or self.sent < self.asked <= self.opened):
                self._send_chunk(-1)
            elif self.arm is not None and self.opened - self.sent == 1:
                self.arm()
        self._verify()
        return at

    cdef bint _held(self, int paced_by) noexcept:
        """Whether a new call must wait: the log is full, or this rank is
        :data:`S_LEAD` calls past the entries of the rank ``paced_by`` (-1: none)."""
        return (self.opened - self.verified >= S_LOG
                or (paced_by >= 0 and self.opened - self.known[paced_by] >= S_LEAD))

    cdef int _still_held(self, double began, bint *hurried) except -1:
        # (their entries come with the peers' next batches: asking every time the
        # log is full would make every call an exchange again; a late ask is for
        # the entries that would free it, which the peers have made)
        return _hurry_if_late(self, began, hurried, self.opened + 1 - (
            S_LOG if self.opened - self.verified >= S_LOG else S_LEAD))

    def abandon(self):
        """Give up the stream after a failed verdict: its receives are cancelled,
        and it is not used again (whoever holds it keeps it, and its buffers,
        alive: its sends may be in flight). Nothing is outstanding afterwards
        (:attr:`idle`)."""
        self._cancel_receives()
        self.closed = True
        self.verified, self.failed = self.opened, -1

    cdef int _cancel_receives(self) except -1:
        """Cancel the posted receives: 1 when a cancel failed (its buffer may still
        be written), else 0."""
        cdef int p, size = self.size, failed = 0
        cdef char *reqs = self.rreq
        with nogil:
            for p in range(size):
                if not wacoll_is_null(&_M, reqs + p * _M.hsize):
                    if wacoll_cancel(&_M, reqs + p * _M.hsize):
                        failed = 1
        return failed

    def close(self):
        """Before the communicator is freed (every rank, every verdict settled):
        each rank sends its last chunk and waits for every peer's, so that no
        message of the stream is left unreceived."""
        cdef int p, err = 0, flag = 0, size = self.size
        cdef bint waiting
        cdef char *req
        cdef char *rreqs = self.rreq
        cdef char *sreqs = self.sreq
        cdef double began = 0, nap = 1e-6, due = 0
        if self.closed or self.size == 1:
            self.closed = True
            return
        self._send_chunk(-2)  # (holding the sending side: the keeper waits)
        self.closed = True  # (and sends no more)
        while True:
            self._receive()  # (a peer's last chunk is not followed by a receive)
            waiting = False
            with nogil:
                for p in range(size):
                    waiting |= not wacoll_is_null(&_M, rreqs + p * _M.hsize)
                for p in range(S_SENDS * size):
                    req = sreqs + p * _M.hsize
                    if not wacoll_is_null(&_M, req):
                        err = wacoll_test(&_M, req, &flag)
                        if err:
                            break
                        waiting |= not flag
            if err:
                raise _error(err)
            if not waiting:
                return
            _between_polls(&began, &nap, &due)

    def __dealloc__(self):
        # A stream freed without close (a communicator never freed, at the end of
        # the process) may have receives posted: MPI would write a peer's last
        # chunk into freed memory (during MPI_Finalize). They are cancelled here,
        # and a send still in flight keeps the buffers alive.
        cdef int p, flag = 0
        cdef bint outstanding = False
        cdef char *req
        if self.rreq == NULL or self.sreq == NULL:
            return
        if _ready and not _mpi_over and not wacoll_finalized(&_M):
            outstanding = self._cancel_receives()
            with nogil:
                for p in range(S_SENDS * self.size):
                    req = self.sreq + p * _M.hsize
                    if not wacoll_is_null(&_M, req):
                        flag = 0
                        if wacoll_test(&_M, req, &flag) or not flag:
                            outstanding = True
        else:
            outstanding = True
        if outstanding:
            _kept.append((self._recv, self._send, self._rreq, self._sreq))


cdef class StreamCheck:
    """The check of a blocking call on the Python route, as an entry of its
    communicator's :class:`VerdictStream` or :class:`NodeStream` (their
    ``reserve``): what a :class:`wacoll.mpi.agreement.Check` starts and polls as it
    would a compiled check's runner. The call waits for its own verdict."""

    cdef EntryLog stream
    cdef int64_t at
    cdef int64_t *flags

    def __init__(self, EntryLog stream not None):
        self.stream, self.at = stream, -1

    def begin(self, intptr_t mine, intptr_t flags, int tag):
        """Open the call's entry (its four flags at ``mine``; the verdict's flags
        go to ``flags``) and ask every rank for theirs: whether it is decided."""
        self.flags = <int64_t *>flags
        self.at = self.stream.open(<const int64_t *>mine, None, -1)
        if self.at < 0:
            raise RuntimeError("a check was reserved after a failed verdict")
        self.stream.hurry()
        return self.proceed(False)

    def proceed(self, bint block):
        """Collect what has arrived (with ``block``, until the verdict is in):
        whether the verdict is in (its flags written)."""
        self.stream.poll(block)
        return self.stream.outcome(self.at, self.flags)

    def abandon(self):
        """The call gave up waiting (an interrupt): its entry stays in the stream."""
        self.stream.release(0)


# ------------------------------------------------- the verdicts of one node's calls
cdef class NodeStream(EntryLog):
    """The checks of the blocking calls of a communicator on several clusters whose
    ranks all share one node: the :class:`VerdictStream`'s entries, published in
    the node's shared memory instead of sent (a :class:`NodeRing` of their own).

    A call's entry is its four flags, published when it opens; its verdict is in
    once every rank has published its entry of that call (a peer reads it without
    the publisher's help: no rank asks, sends or waits for a batch). So a call
    returns once its work is done, as the stream's do, and one that must wait for
    its verdict (a call the library runs that writes into this rank's buffer, a
    Barrier, a settle) waits for every rank to arrive at the call, not for a
    message's round trip.

    After a failed verdict every rank renews its stream when it learns of it (no
    collective, as the stream's renewal): the renewed one (``epoch + 1``) uses the
    other of two regions of lines, numbering its entries past any number the
    region held. A region is reused two renewals later, when every rank has left
    the stream that used it (the failure that renews a stream is found only once
    every rank has published its entry in it).

    Parameters
    ----------
    regions : tuple of numpy.ndarray
        Two int64 arrays every rank of the node maps, each of :class:`NodeRing`'s
        size, zeros before the first stream.
    comm : mpi4py.MPI.Intracomm
        The communicator of its errors' messages (a faulty rank's own error on the
        Python route, :attr:`tag0`), kept here.
    tag0 : int
        That tag.
    epoch : int
        0 for a communicator's first stream, one more at each renewal.
    """

    cdef readonly NodeRing ring
    cdef readonly object regions
    cdef readonly int epoch
    cdef int64_t nums[S_LOG]  # each entry's number in the ring (its flags, in
    # ``own``, are the MAX over the ranks once the ring has read it)

    def __init__(self, tuple regions not None, comm, int tag0=0, int epoch=0):
        self._start_log(comm, tag0)
        self.epoch, self.regions = epoch, regions
        self.ring = NodeRing(regions[epoch % 2], comm.Get_rank(), comm.Get_size(),
                             comm.Iprobe, (<int64_t>epoch) << 40)

    @property
    def tags(self):
        """How many tags from :attr:`tag0` its messages use."""
        return 1

    cdef int _verify(self) except -1:
        """Decide the verdicts whose entries every rank has published, in order."""
        cdef int64_t *acc
        while self.failed < 0 and self.verified < self.opened:
            if not self.ring.poll(self.nums[self.verified % S_LOG]):
                return 0
            acc = self.own + 4 * (self.verified % S_LOG)
            if not (acc[0] == 0 and acc[2] == -acc[3]):
                self._failed_at(acc)
                return 0
            self._passed_one()
        return 0

    cdef int poll(self, bint block) except -2:
        cdef double began = 0, nap = 1e-6, due = 0
        while True:
            if self.failed >= 0:
                return 1
            self._verify()
            if self.failed >= 0:
                return 1
            if not block or self.verified == self.opened:
                return 0
            _between_polls(&began, &nap, &due)

    cdef int64_t open(self, const int64_t *mine, object sig, int paced_by) except -2:
        cdef int64_t at
        if self.closed:
            raise RuntimeError("the verdict stream is closed")
        self.entered = self.opened
        if self.poll(False):
            return -1
        if paced_by == self.ring.rank or paced_by >= self.ring.size:
            paced_by = -1
        # the log full, or ahead of the rank that paces this one: wait for the
        # oldest verdicts, or for that rank to read (it reads at every call)
        if self._wait_to_open(paced_by):
            return -1
        at = self._log(mine, sig)
        self.nums[at % S_LOG] = self.ring.start(self.own + 4 * (at % S_LOG), self._own)
        self.opened += 1
        self._verify()
        return at

    cdef bint _held(self, int paced_by) noexcept:
        """Whether a new call must wait: the log is full, or this rank is
        :data:`S_LEAD` calls past what the rank ``paced_by`` (-1: none) has read."""
        return (self.opened - self.verified >= S_LOG
                or (paced_by >= 0
                    and self.ring.seq - self.ring.read_by(paced_by) >= S_LEAD))

    cdef bint agreed_with(self, int64_t at, int peer) noexcept:
        # (the peer's line of the check is not overwritten before this rank has
        # read it, and this rank's entry holds its own flags until then)
        cdef int64_t k = self.nums[at % S_LOG]
        cdef const int64_t *line
        cdef const int64_t *entry = self.own + 4 * (at % S_LOG)
        if at >= self.opened or at < self.verified or self.failed >= 0:
            return False
        line = self.ring._line(peer, k)
        if wacoll_load_acquire(line) != k:
            return False
        return (entry[0] == 0 and line[1] == 0 and line[3] == entry[2]
                and line[4] == entry[3])

    def abandon(self):
        """Give up the stream after a failed verdict: it is not used again, and
        nothing is outstanding afterwards (:attr:`idle`)."""
        self.closed = True
        self.verified, self.failed = self.opened, -1

    def renewed(self, int tag0):
        """The stream that follows this one after a failed verdict (``tag0``: its
        errors' tag)."""
        stream = NodeStream(self.regions, self.comm, tag0, self.epoch + 1)
        stream.defer = self.defer
        return stream

    def close(self):
        """Before the communicator is freed: nothing is in flight in memory."""
        self.closed = True


cdef int _drive_deferred(Runner work, Verdicts ring, char *inbuf, char *outbuf,
                         int tag, const int64_t *mine, object sig,
                         bint settle, int paced_by) except -2:
    """:func:`_run_deferred`, after which the ring knows the call has left."""
    try:
        return _run_deferred(work, ring, inbuf, outbuf, tag, mine, sig, settle,
                             paced_by)
    finally:
        ring.left()


cdef int _run_deferred(Runner work, Verdicts ring, char *inbuf, char *outbuf,
                       int tag, const int64_t *mine, object sig,
                       bint settle, int paced_by) except -2:
    """Run a blocking call's ``work`` (None: nothing but its check, as for a
    Barrier) with its check in ``ring``: ``OK`` once this rank's work is done (its
    verdict, and older ones, may still be in flight; with ``settle`` once every
    verdict is in), ``CHECK_FAILED`` when a verdict failed (this call's or an
    older one's: the ring's ``failed``; the work was cancelled), ``WORK_ERROR``
    when the work failed and every verdict passed (its MPI error in
    ``work.err``)."""
    cdef int w = 1, status
    cdef bint work_failed = False, hurried = settle
    cdef double began = 0, nap = 1e-6, due = 0
    cdef int64_t slot = ring.open(mine, sig, paced_by)
    if slot < 0:
        return CHECK_FAILED
    if settle:
        ring.hurry()
    if work is not None:
        with nogil:
            status = work.start(inbuf, outbuf, tag)
            if status == 0:
                w = work.advance(False)
            else:
                w = -1
            if w < 0:
                work.cancel()
        if w < 0:
            work_failed, w = True, 1
    if w == 1 and not work_failed and not settle and ring.failed < 0:
        return OK  # (open polled the ring just now: what came since, the next call)
    while True:
        if w == 0:
            with nogil:
                w = work.advance(False)
                if w < 0:
                    work.cancel()
            if w < 0:
                work_failed, w = True, 1
        try:
            if ring.poll(False):
                if w == 0:
                    with nogil:
                        work.cancel()
                return CHECK_FAILED
            if w == 1:
                if not work_failed and not (settle and ring.unsettled()):
                    return OK
                if work_failed and ring.decided(slot):
                    # this call's check passed (a failure was reported above)
                    return WORK_ERROR
            _hurry_if_late(ring, began, &hurried)
            _between_polls(&began, &nap, &due)
        except BaseException:  # (an interrupt, the MPI library's error)
            if w == 0:
                with nogil:
                    work.cancel()
            raise


cdef int _gate(Verdicts ring, const int64_t *mine, object sig,
               int paced_by) except -2:
    """Open a call's check in ``ring`` and wait for its verdict (and every older
    one): ``OK`` when all passed, ``CHECK_FAILED`` when one failed (nothing of the
    call has run)."""
    cdef double began = 0, nap = 1e-6, due = 0
    cdef int64_t at
    try:
        at = ring.open(mine, sig, paced_by)
        if at < 0:
            return CHECK_FAILED
        while True:
            if ring.poll(False):
                return CHECK_FAILED
            if ring.decided(at):
                return OK
            _between_polls(&began, &nap, &due)
    finally:
        ring.left()


cdef class NodeGate:
    """The check of a blocking call the library runs where every rank receives, on
    several clusters whose ranks share one node (:class:`NodeStream`): what a
    :class:`wacoll.mpi._fastcall.NativeCall` runs before the library's blocking
    collective, as it runs one cluster's shared-memory check. ``run(mine)`` opens
    the call's entry in the communicator's stream of verdicts (``mine``: its four
    flags, 32 bytes) and waits for its verdict: whether it passed (when it did
    not, the stream's ``failure()`` says why).

    Parameters
    ----------
    argcheck : wacoll.mpi.argcheck.ArgumentCheck
        The communicator's check, whose ``verdicts`` (renewed after a failure) the
        entries go into.
    """

    cdef object argcheck

    def __init__(self, argcheck):
        self.argcheck = argcheck

    def run(self, bytes mine not None):
        cdef Verdicts ring = self.argcheck.verdicts
        if len(mine) != 4 * sizeof(int64_t):
            raise ValueError("a check's flags are four int64 words")
        return _gate(ring, <const int64_t *><const char *>mine, None, -1) == OK


cdef int _library_deferred(Verdicts ring, char *req, const int64_t *mine, object sig,
                           int *err, bint receives, int paced_by,
                           int source) except -2:
    """:func:`_wait_library`, after which the ring knows the call has left."""
    try:
        return _wait_library(ring, req, mine, sig, err, receives, paced_by, source)
    finally:
        ring.left()


cdef int _wait_library(Verdicts ring, char *req, const int64_t *mine, object sig,
                       int *err, bint receives, int paced_by, int source) except -2:
    """Wait for the MPI library's non-blocking collective whose request is at
    ``req`` (NULL: none, a Barrier: then every verdict) with its check in ``ring``:
    ``OK`` once the request is complete (verdicts may still be in flight; where
    the call ``receives`` into this rank's buffer, once its own verdict is in, or
    the check of the one rank it receives from, ``source``, agrees with its own),
    ``CHECK_FAILED`` when a verdict failed (the request is left as it is),
    ``WORK_ERROR`` when the collective failed and every verdict passed (its MPI
    error in ``err``)."""
    cdef int flag = 0
    cdef bint done = req == NULL, failed = False
    cdef bint settle = req == NULL or not ring.defer
    cdef bint hurried = settle or receives
    cdef double began = 0, nap = 1e-6, due = 0
    cdef int64_t at = ring.open(mine, sig, paced_by)
    if at < 0:
        return CHECK_FAILED
    if hurried:
        ring.hurry()
    while True:
        if not done:
            with nogil:
                err[0] = wacoll_test(&_M, req, &flag)
            if err[0]:
                done = failed = True
            elif flag:
                done = True
        if ring.poll(False):
            return CHECK_FAILED
        if done and not failed and not (settle and ring.unsettled()) and \
                not (receives and not ring.decided(at)
                     and not (source >= 0 and ring.agreed_with(at, source))):
            return OK
        if failed and not ring.unsettled():
            return WORK_ERROR
        _hurry_if_late(ring, began, &hurried)
        _between_polls(&began, &nap, &due)
