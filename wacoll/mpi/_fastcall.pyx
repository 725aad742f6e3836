# cython: language_level=3
"""The compiled half of a repeated blocking call (private; the wrappers are
:mod:`wacoll.mpi.fastpath` and :class:`wacoll.mpi.agreement.NodeCheck`).

- :class:`Snapshot`: what a recorded call's arguments were (identity, and for each
  buffer its address, length, element format, shape, strides and writability, read
  through the buffer protocol), and whether they still are.
- :class:`NativeCall` and :class:`Recordings`: a recorded call (snapshot, check
  flags, the MPI library's collective) and a communicator's recorded calls by key,
  replayed in one trip into C up to the library's own call.
- :class:`NodeFlags`: the cross-rank check of one node's ranks in shared memory.
  Each rank publishes its four flags in its own cache line of a shared window and
  reads everyone's: an element-wise maximum, as a MAX all-reduce would give, in a
  fraction of a microsecond when the ranks arrive together.

The shared lines are written and read with C11-style acquire/release atomics
(the GCC and Clang builtins), so a rank never reads a half-written line.
"""
from cpython.buffer cimport PyBUF_RECORDS_RO, PyBuffer_Release, PyObject_GetBuffer
from cpython.long cimport PyLong_FromVoidPtr
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int64_t
from libc.string cimport strcmp

import numpy as np

cdef extern from *:
    """
    #include <sched.h>
    #define wacoll_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
    #define wacoll_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
    static inline void wacoll_pause(void) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #elif defined(__aarch64__)
        __asm__ __volatile__("yield");
    #endif
    }
    """
    int64_t wacoll_load_acquire(int64_t *p) noexcept nogil
    void wacoll_store_release(int64_t *p, int64_t v) noexcept nogil
    void wacoll_pause() noexcept nogil
    int sched_yield() noexcept nogil

#: int64 words per rank and parity: the sequence number, four flags, padding to a
#: 64-byte cache line (so ranks never write the same line).
LINE_WORDS = 8

cdef enum:
    _LINE = 8
    _PAUSES = 100  # spins that pause the core (about a microsecond), then yield it
    _SPINS = 1000  # spins before handing back to Python


cdef class NodeFlags:
    """Element-wise MAX of four int64 flags over the ranks of one node, through a
    shared array of ``2 * size`` cache lines (two per rank, used alternately).

    A rank at call ``k`` writes line ``(rank, k % 2)`` and waits until every rank's
    line of that parity carries ``k``. A rank can be at most one call ahead of the
    slowest reader (it waits for that reader's line of call ``k + 1``, written only
    after it finished reading call ``k``), so two lines per rank never overwrite a
    line someone still reads.

    Parameters
    ----------
    lines : numpy.ndarray
        ``int64`` array of ``2 * size * LINE_WORDS`` words in memory every rank of
        the node maps, zeros at the start.
    rank, size : int
        This rank and the number of ranks.
    """

    cdef int64_t *base
    cdef object lines
    cdef readonly object progress
    cdef int rank, size
    cdef int64_t seq
    cdef int64_t mine[4]
    cdef int64_t[::1] out
    #: The maximum of the last check (four int64).
    cdef readonly object flags

    def __init__(self, int64_t[::1] lines not None, int rank, int size, progress):
        if lines.shape[0] < 2 * size * _LINE or not 0 <= rank < size:
            raise ValueError("the shared array is too small for the ranks")
        self.lines = lines
        self.base = &lines[0]
        self.flags = np.zeros(4, np.int64)
        self.out = self.flags
        self.progress = progress
        self.rank, self.size, self.seq = rank, size, 0

    def run(self, mine):
        """Check one call whose flags on this rank are ``mine`` (four int64, as an
        array or its 32 bytes); whether it passed: the maximum over the ranks
        (then in :attr:`flags`) is ``mine`` itself, and ``mine`` flags no error.

        While some rank has not published, ``progress()`` is called every few
        microseconds (it lets the MPI library progress: a peer may be waiting in
        the library for this rank's part of an earlier operation).
        """
        cdef int status = self.start(mine if type(mine) is bytes else mine.tobytes())
        while status < 0:
            self.progress()
            status = self.resume()
        return status == 1

    cpdef int start(self, bytes mine) except -2:
        """Start a check: publish this rank's four flags (32 bytes, native int64)
        and fold in the others'. Returns what :meth:`resume` returns."""
        cdef const int64_t *words = <const int64_t *><const char *>mine
        cdef int64_t seq = self.seq + 1
        cdef int64_t *line = self.base + (2 * self.rank + (seq & 1)) * _LINE
        cdef int i
        if len(mine) != 32:
            raise ValueError("a check's flags are four int64 words")
        self.seq = seq
        for i in range(4):
            line[1 + i] = words[i]
            self.mine[i] = words[i]
            self.out[i] = words[i]
        wacoll_store_release(line, seq)
        return self.resume()

    cpdef int resume(self) except -2:
        """Fold in the ranks that have published: 1 if the check passed (the maximum
        is this rank's flags, which flag no error), 0 if it failed, -1 if some rank
        has not published yet (call again after letting the MPI library progress).
        The maximum so far is in ``out``."""
        cdef int64_t seq = self.seq
        cdef int64_t *line
        cdef int r, i, spins
        cdef bint done = True
        with nogil:
            for r in range(self.size):
                line = self.base + (2 * r + (seq & 1)) * _LINE
                spins = 0
                while wacoll_load_acquire(line) != seq:
                    spins += 1
                    if spins >= _SPINS:
                        done = False
                        break
                    if spins < _PAUSES:
                        wacoll_pause()
                    else:  # the awaited rank may wait for this core: let it run
                        sched_yield()
                if not done:
                    break
                for i in range(4):  # a rank's lines already folded in fold again: MAX
                    if line[1 + i] > self.out[i]:
                        self.out[i] = line[1 + i]
        if not done:
            return -1
        for i in range(4):
            if self.out[i] != self.mine[i]:
                return 0
        return 1 if self.mine[0] == 0 else 0


cdef class Snapshot:
    """The arguments of a call as they were, to tell whether a later call brings the
    same ones unchanged.

    Every argument is compared by identity. A buffer (anything with the buffer
    protocol, numpy arrays in practice) must also still expose the same address,
    length, element format, shape, strides and writability.

    Parameters
    ----------
    args : tuple
        The call's arguments (kept alive, so their identities cannot be reused).
    buffers : tuple of bool
        Which arguments are buffers.
    """

    cdef readonly tuple args
    cdef tuple buffers
    cdef list views  # per buffer argument: (address, len, itemsize, ndim, readonly,
    #                   format bytes, shape tuple, strides tuple), else None

    def __init__(self, tuple args not None, tuple buffers not None):
        self.args, self.buffers = args, buffers
        self.views = [_view(a) if b else None for a, b in zip(args, buffers)]

    cpdef bint matches(self, tuple args) except -1:
        """Whether ``args`` are the recorded objects, still as they were."""
        cdef Py_ssize_t i, n = len(self.args)
        if len(args) != n:
            return False
        for i in range(n):
            if args[i] is not self.args[i]:
                return False
            if self.buffers[i] and not _same_view(args[i], self.views[i]):
                return False
        return True


cdef class NativeCall:
    """A blocking call recorded for replay: its arguments' snapshot, its check, and
    the MPI library's blocking collective over the same arguments.

    Parameters
    ----------
    snap : Snapshot
        The call's arguments when recorded.
    digest : int
        The call's signature digest (what the check compares across ranks).
    call : callable or None
        The MPI library's blocking collective over the arguments; None for a checked
        Barrier (the check is the barrier).
    sig : object
        The call's signature, for the error message of a failed check.
    check : NodeFlags or object with ``run(flags_bytes) -> bool``, or None
        The communicator's check of blocking calls (None: no check).
    """

    cdef readonly Snapshot snap
    cdef readonly bytes template
    cdef readonly object call, sig, check
    cdef NodeFlags node

    def __init__(self, Snapshot snap not None, digest, call, sig, check):
        self.snap, self.call, self.sig, self.check = snap, call, sig, check
        self.template = np.array([0, 0, digest, -digest], np.int64).tobytes()
        self.node = check if isinstance(check, NodeFlags) else None

    def matches(self, tuple args not None):
        """Whether ``args`` are the recorded objects, still as they were."""
        return self.snap.matches(args)

    cpdef bint run(self) except -1:
        """Run the call once: the check, then the collective. Whether it ran: False
        when the check failed (every rank learns the same, and the collective did
        not start; the check's ``flags`` say why)."""
        cdef int status
        if self.node is not None:
            status = self.node.start(self.template)
            while status < 0:
                self.node.progress()
                status = self.node.resume()
            if status != 1:
                return False
        elif self.check is not None and not self.check.run(self.template):
            return False
        if self.call is not None:
            self.call()
        return True


cdef class Recordings(dict):
    """A communicator's recorded calls, keyed by ``(reader, family, level, *ids)``
    (the identities of the call's arguments)."""

    def replay(self, reader, family, level, tuple args not None):
        """Run the recorded call these arguments match: True when it ran, the
        :class:`NativeCall` when its check failed, None when no recorded call
        matches (read the call afresh)."""
        cdef Py_ssize_t i, n = len(args)
        cdef tuple key = PyTuple_New(n + 3)
        cdef PyObject *found
        cdef NativeCall recorded
        Py_INCREF(reader)
        PyTuple_SET_ITEM(key, 0, reader)
        Py_INCREF(family)
        PyTuple_SET_ITEM(key, 1, family)
        Py_INCREF(level)
        PyTuple_SET_ITEM(key, 2, level)
        for i in range(n):
            item = PyLong_FromVoidPtr(<void *>args[i])
            Py_INCREF(item)
            PyTuple_SET_ITEM(key, i + 3, item)
        found = PyDict_GetItem(self, key)
        if found == NULL:
            return None
        recorded = <NativeCall><object>found
        if not recorded.snap.matches(args):
            return None
        return True if recorded.run() else recorded


cdef tuple _view(object obj):
    cdef Py_buffer view
    PyObject_GetBuffer(obj, &view, PyBUF_RECORDS_RO)
    try:
        return (<Py_ssize_t>view.buf, view.len, view.itemsize, view.ndim, view.readonly,
                view.format if view.format != NULL else b"B",
                tuple(view.shape[i] for i in range(view.ndim)),
                tuple(view.strides[i] for i in range(view.ndim)))
    finally:
        PyBuffer_Release(&view)


cdef bint _same_view(object obj, tuple seen) except -1:
    cdef Py_buffer view
    cdef int i
    cdef bytes fmt = seen[5]
    try:
        PyObject_GetBuffer(obj, &view, PyBUF_RECORDS_RO)
    except (BufferError, ValueError, TypeError):  # no longer exports a buffer
        return False
    try:
        if (<Py_ssize_t>view.buf != <Py_ssize_t>seen[0] or view.len != <Py_ssize_t>seen[1]
                or view.itemsize != <Py_ssize_t>seen[2] or view.ndim != <int>seen[3]
                or view.readonly != <int>seen[4]):
            return False
        if strcmp(view.format if view.format != NULL else <char *>"B", <char *>fmt) != 0:
            return False
        for i in range(view.ndim):
            if view.shape[i] != <Py_ssize_t>seen[6][i] or \
                    view.strides[i] != <Py_ssize_t>seen[7][i]:
                return False
        return True
    finally:
        PyBuffer_Release(&view)
