# cython: language_level=3
"""The compiled half of a repeated blocking call (private; the wrappers are
:mod:`wacoll.mpi.fastpath` and :class:`wacoll.mpi.agreement.NodeCheck`).

- :class:`NativeCall` and :class:`Recordings`: a recorded call (its check flags and
  the MPI library's collective) and a communicator's recorded calls, keyed by what
  the call's arguments look like, replayed in one trip into C up to the library's
  own call.
- :class:`NodeFlags`: the cross-rank check of one node's ranks in shared memory.
  Each rank publishes its four flags in its own cache line of a shared window and
  reads everyone's: an element-wise maximum, as a MAX all-reduce would give, in a
  fraction of a microsecond when the ranks arrive together.

The shared lines are written and read with C11-style acquire/release atomics
(the GCC and Clang builtins), so a rank never reads a half-written line.
"""
from cpython.buffer cimport PyBUF_RECORDS_RO, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.exc cimport PyErr_CheckSignals
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int64_t

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


cdef int _signals() except -1:
    """Run the process's pending signal handlers (a check waiting for a late rank
    must not keep Ctrl-C from it): raise what one raised, marked as raised in a
    wait (:mod:`wacoll.mpi.interrupts`)."""
    try:
        PyErr_CheckSignals()
    except BaseException as exc:
        from wacoll.mpi.interrupts import mark
        mark(exc)
        raise
    return 0


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
        the library for this rank's part of an earlier operation), and the signal
        handlers run (:func:`_signals`).
        """
        cdef int status = self.start(mine if type(mine) is bytes else mine.tobytes())
        while status < 0:
            _signals()
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


cdef class NativeCall:
    """A blocking call recorded for replay: its check flags and the MPI library's
    blocking collective, called with each replayed call's own arguments.

    Parameters
    ----------
    digest : int
        The call's signature digest (what the check compares across ranks).
    method : callable or None
        The MPI library's blocking collective (a bound method of the wire); None for
        a checked Barrier (the check is the barrier).
    replace : tuple of (int, object)
        Arguments the library reads otherwise: position and what to pass instead
        (an ``MPI.Op`` for an operator given by name).
    sig : object
        The call's signature, for the error message of a failed check.
    check : NodeFlags or object with ``run(flags_bytes) -> bool``, or None
        The communicator's check of blocking calls (None: no check).
    keep : tuple
        Objects the key names by identity (operators), kept alive so that their
        identities cannot be reused by new objects while recorded.
    """

    cdef readonly bytes template
    cdef readonly object method, sig, check
    cdef tuple replace
    cdef readonly tuple keep
    cdef NodeFlags node

    def __init__(self, digest, method, tuple replace not None, sig, check,
                 tuple keep not None):
        self.method, self.replace, self.sig, self.check, self.keep = \
            method, replace, sig, check, keep
        self.template = np.array([0, 0, digest, -digest], np.int64).tobytes()
        self.node = check if isinstance(check, NodeFlags) else None

    cpdef bint run(self, tuple args) except -1:
        """Run the call once over ``args``: the check, then the collective. Whether
        it ran: False when the check failed (every rank learns the same, and the
        collective did not start; the check's ``flags`` say why)."""
        cdef int status
        if self.node is not None:
            status = self.node.start(self.template)
            while status < 0:
                _signals()
                self.node.progress()
                status = self.node.resume()
            if status != 1:
                return False
        elif self.check is not None and not self.check.run(self.template):
            return False
        if self.method is not None:
            self.method(*(replaced(args, self.replace) if self.replace else args))
        return True


cpdef tuple replaced(tuple args, tuple replace):
    """``args`` with the arguments ``replace`` names, ``(position, value)`` pairs,
    passed otherwise (an ``MPI.Op`` for an operator named by a string)."""
    given = list(args)
    for i, value in replace:
        given[i] = value
    return tuple(given)


cdef class Recordings(dict):
    """A communicator's recorded calls by :meth:`key`: what the call is and what its
    arguments look like, not which arrays they are.

    Examples
    --------
    >>> import numpy as np
    >>> calls = Recordings()
    >>> calls.key(print, None, None, (np.zeros(4), 0)) == \\
    ...     calls.key(print, None, None, (np.ones(4), 0))
    True
    >>> calls.key(print, None, None, (np.zeros(4), 1)) == \\
    ...     calls.key(print, None, None, (np.zeros(4), 0))
    False
    >>> calls.key(print, None, None, ([np.zeros(4), "d"],)) is None  # a type name
    True
    """

    #: The recorded call the last replay ran.
    cdef public object last

    def key(self, reader, family, level, tuple args not None):
        """The key of a call: ``reader``, ``family``, ``level`` and, per argument,
        its value (None, ``int``, ``str``), its identity (``MPI.IN_PLACE``, an
        ``MPI.Op``), for a numpy array its element format, shape, strides,
        writability and which earlier array starts at the same address (-1: none),
        and for a buffer specification ``[array, datatype]`` or ``[array, count,
        datatype]`` those of its parts (the datatype by identity). None when an
        argument is of any other kind."""
        return _key(reader, family, level, args)

    def replay(self, reader, family, level, tuple args not None):
        """Run the recorded call these arguments match: True when it ran, the
        recorded call (a :class:`NativeCall`, or a plan's
        :class:`~wacoll.mpi._runner.PlanCall`) when its check failed, None when none
        matches (read the call afresh)."""
        key = _key(reader, family, level, args)
        if key is None:
            return None
        cdef PyObject *found = PyDict_GetItem(self, key)
        if found == NULL:
            return None
        recorded = <object>found
        self.last = recorded
        if type(recorded) is NativeCall:
            return True if (<NativeCall>recorded).run(args) else recorded
        # a call of a plan (wacoll.mpi._runner.PlanCall)
        return True if recorded.run(args) else recorded


cdef object _ndarray = np.ndarray


cdef bytes _array_key(object a, Py_ssize_t index, Py_ssize_t *starts):
    """Array argument ``index``'s description as bytes: which earlier array argument
    starts at the same address (-1: none), writability, item size, shape, strides
    and element format (from the buffer protocol). Its address goes into
    ``starts[index]``."""
    cdef Py_buffer view
    cdef Py_ssize_t words[64]
    cdef Py_ssize_t i, n, alias = -1
    try:
        PyObject_GetBuffer(a, &view, PyBUF_RECORDS_RO)
    except Exception:  # no buffer (a datetime64 array): no key; the call is read
        return None    # afresh, and its error raised on every rank by the check
    try:
        if view.ndim > 30:  # pragma: no cover - numpy allows at most 64 dimensions
            return None
        starts[index] = <Py_ssize_t>view.buf
        for i in range(index):
            if starts[i] == starts[index] and view.len:
                alias = i
                break
        words[0], words[1], words[2], words[3] = alias, view.readonly, view.itemsize, \
            view.ndim
        n = 4
        for i in range(view.ndim):
            words[n] = view.shape[i]
            words[n + 1] = view.strides[i]
            n += 2
        return PyBytes_FromStringAndSize(<char *>words, n * sizeof(Py_ssize_t)) + \
            (<bytes>view.format if view.format != NULL else b"B")
    finally:
        PyBuffer_Release(&view)


cdef object _Op = None
cdef object _IN_PLACE = None
cdef object _Datatype = None


cdef object _spec_key(object spec, Py_ssize_t index, Py_ssize_t *starts):
    """A buffer specification's description: ``[array, datatype]`` or ``[array,
    count, datatype]`` as mpi4py reads them (the array as :func:`_array_key`, the
    count by value, the datatype by identity); None for any other form."""
    cdef Py_ssize_t n = len(spec)
    if n not in (2, 3) or type(spec[0]) is not _ndarray:
        return None
    first = _array_key(spec[0], index, starts)
    if first is None:
        return None
    if n == 3 and type(spec[1]) is not int:
        return None
    last = spec[n - 1]
    if not isinstance(last, _Datatype):
        return None
    return (type(spec), first, spec[1] if n == 3 else None, type(last), id(last))


cdef object _key(reader, family, level, tuple args):
    global _Op, _IN_PLACE, _Datatype
    if _Op is None:
        from mpi4py import MPI
        _Op, _IN_PLACE, _Datatype = MPI.Op, MPI.IN_PLACE, MPI.Datatype
    cdef Py_ssize_t i, n = len(args)
    cdef Py_ssize_t starts[16]
    if n > 16:
        return None
    cdef tuple key = PyTuple_New(n + 3)
    for i, item in enumerate((reader, family, level)):
        Py_INCREF(item)
        PyTuple_SET_ITEM(key, i, item)
    for i in range(n):
        a = args[i]
        t = type(a)
        starts[i] = 0  # not an array: never the same address as one
        if t is _ndarray:
            item = _array_key(a, i, starts)
            if item is None:
                return None
        elif a is None or t is int or t is str:
            item = a
        elif a is _IN_PLACE or isinstance(a, _Op):
            item = (t, id(a))
        elif t is list or t is tuple:
            item = _spec_key(a, i, starts)
            if item is None:
                return None
        else:
            return None
        Py_INCREF(item)
        PyTuple_SET_ITEM(key, i + 3, item)
    return key
