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
from libc.stdint cimport int32_t, int64_t, intptr_t, uint32_t, uint64_t
from libc.string cimport memcpy

import numpy as np

cdef extern from "_digests.h" nogil:
    int64_t _FLUSHED "WACOLL_FLUSHED"
    int64_t _FOLDED_MARK "WACOLL_FOLDED_MARK"
    int64_t _fold "wacoll_fold"(int64_t folded, int64_t digest)
    void _fold_call "wacoll_fold_call"(int64_t *folded, int *n, int64_t digest)
    void _fold_into "wacoll_fold_into"(int64_t *words, int64_t folded)


cdef extern from "_collcalls.h" nogil:
    ctypedef struct wacoll_colls:
        int hsize
        void *fn[8]
    int wacoll_collective(const wacoll_colls *m, int kind, const void *sbuf, int scount,
                          void *rbuf, int rcount, intptr_t type, intptr_t op, int root,
                          intptr_t comm)


cdef extern from "_shmem.h":
    int64_t wacoll_load_acquire(int64_t *p) noexcept nogil
    void wacoll_store_release(int64_t *p, int64_t v) noexcept nogil
    void wacoll_pause() noexcept nogil
    int sched_yield() noexcept nogil

#: The library's blocking collectives a replayed call makes itself (set_collectives).
cdef wacoll_colls _colls

#: The collectives :meth:`NativeCall.direct` takes, by name: their codes in
#: ``_collcalls.h``.
DIRECT_KINDS = {"bcast": 1, "reduce": 2, "allreduce": 3, "gather": 4, "scatter": 5,
                "allgather": 6, "alltoall": 7}


#: ``MPI_REQUEST_NULL``'s handle (set_collectives).
cdef intptr_t _request_null = 0


def set_collectives(int hsize, addresses, intptr_t request_null=0):
    """Install the MPI library's blocking collectives (their addresses, in the order
    of :data:`DIRECT_KINDS`), the width of its handles (4 or 8 bytes) and
    ``MPI_REQUEST_NULL``'s handle, once."""
    global _request_null
    cdef int i
    if hsize not in (4, 8) or len(addresses) != 7:
        raise ValueError("set_collectives takes a handle size of 4 or 8 and 7 addresses")
    for i in range(7):
        _colls.fn[i + 1] = <void *><intptr_t>addresses[i]
    _colls.hsize = hsize
    _request_null = request_null


cdef inline bint _is_null_request(intptr_t at) noexcept nogil:
    """Whether the request handle at address ``at`` is ``MPI_REQUEST_NULL``."""
    if _colls.hsize == 4:
        return (<int32_t *>at)[0] == <int32_t>_request_null
    return (<intptr_t *>at)[0] == _request_null


#: The digest a flush check folds in after the folded calls' (any fixed value).
FLUSHED = _FLUSHED
#: Set in a one-cluster check's second word by a rank that folded calls into it.
FOLDED_MARK = _FOLDED_MARK

#: Requests a :class:`Recordings` watches at most (:meth:`Recordings.watch`).
WATCHED = 64
#: What :meth:`Recordings.replay` returns when a watched request's verdict is due.
VERDICTS_DUE = "verdicts due"

#: int64 words per rank and parity: the sequence number, four flags, padding to a
#: 64-byte cache line (so ranks never write the same line).
LINE_WORDS = 8

cdef enum:
    _WATCHED = 64
    _LINE = 8
    _PAUSES = 100  # spins that pause the core (about a microsecond), then yield it
    _SPINS = 1000  # spins before handing back to Python


cdef inline uint32_t _crc32_int64(uint32_t crc, int64_t value) noexcept nogil:
    """zlib's CRC-32 of ``crc`` continued over ``value``'s 8 little-endian bytes."""
    cdef int i, k
    crc = ~crc
    for i in range(8):
        crc ^= <uint32_t>((<uint64_t>value >> (8 * i)) & 0xFF)
        for k in range(8):
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)))
    return ~crc


cpdef int64_t count_digest(int64_t rest, int64_t count):
    """A call's signature digest from the digest of the rest of its signature and
    its count: zlib's CRC-32 of the rest continued over the count's 8
    little-endian bytes (:meth:`wacoll.mpi.agreement.Signature.digest`). A call
    recorded for every count of a size class computes it here for each count.

    Examples
    --------
    >>> import zlib
    >>> count_digest(12345, 1500) == zlib.crc32((1500).to_bytes(8, "little"), 12345)
    True
    """
    return _crc32_int64(<uint32_t>rest, count)


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
    #: Calls folded into the next check (:meth:`fold`), and their running digest.
    cdef readonly int nfolded
    cdef readonly int64_t folded

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
            self.mine[i] = words[i]
        if self.nfolded:  # the calls folded since the last check are checked too
            self.mine[1] |= _FOLDED_MARK
            _fold_into(self.mine, self.folded)
            self.nfolded, self.folded = 0, 0
        for i in range(4):
            line[1 + i] = self.mine[i]
            self.out[i] = self.mine[i]
        wacoll_store_release(line, seq)
        return self.resume()

    cpdef fold(self, int64_t digest):
        """A call with nothing to move (every rank's count is 0): no check of its
        own; its signature's ``digest`` goes into the next check's, which fails
        where any rank's calls since the last check differ (:func:`fold_digest`),
        and which carries :data:`FOLDED_MARK`."""
        _fold_call(&self.folded, &self.nfolded, digest)

    def flush(self):
        """Check the calls folded since the last check now (where every rank
        flushes): whether they passed (True when none was folded)."""
        if not self.nfolded:
            return True
        return self.run(flags_template(_FLUSHED))

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
    cdef readonly object method, check
    cdef object _sig
    cdef tuple replace
    cdef readonly tuple keep
    cdef NodeFlags node
    cdef int64_t rest, count
    # the library's collective called directly (direct): its kind (0: through
    # ``method``), handles, root, and where its buffers and count are in the args
    cdef readonly int kind
    cdef int root, at_send, at_recv
    cdef intptr_t comm_h, type_h, op_h
    cdef Py_ssize_t send_unit, recv_unit

    def __init__(self, digest, method, tuple replace not None, sig, check,
                 tuple keep not None):
        self.method, self.replace, self._sig, self.check, self.keep = \
            method, replace, sig, check, keep
        self.template = flags_template(digest)
        self.node = check if isinstance(check, NodeFlags) else None
        self.count = -1
        self.kind = 0

    def direct(self, int kind, intptr_t comm, intptr_t datatype, intptr_t op, int root,
               int at_send, int at_recv, Py_ssize_t send_unit, Py_ssize_t recv_unit):
        """Have a replay call the library's collective ``kind`` (a value of
        :data:`DIRECT_KINDS`) itself, on the communicator, datatype and operator of
        these handles, as ``method`` would over the replayed arguments: the send
        and receive buffers are the arguments at ``at_send`` and ``at_recv`` (-1:
        none; an argument that is None: no buffer, count 0), each count the
        buffer's length over ``send_unit`` or ``recv_unit`` bytes, as mpi4py
        counts them. The replay's key fixes every argument's type, shape, strides
        and element type, and the root, so only the addresses and the lengths
        change between calls."""
        if _colls.hsize == 0:
            raise RuntimeError("the library's collectives are not installed")
        if not 1 <= kind <= 7 or send_unit <= 0 or recv_unit <= 0:
            raise ValueError(f"no direct collective {kind} of units "
                             f"{send_unit}, {recv_unit}")
        self.kind, self.comm_h, self.type_h, self.op_h = kind, comm, datatype, op
        self.root, self.at_send, self.at_recv = root, at_send, at_recv
        self.send_unit, self.recv_unit = send_unit, recv_unit

    @property
    def plan(self):
        """None: the library runs the call (no plan of wacoll's)."""
        return None

    @property
    def family(self):
        """``"native"``: the MPI library's own collective."""
        return "native"

    @property
    def sig(self):
        """The call's signature (of its last count), for a failed check's error."""
        if self.count >= 0 and self.count != self._sig.count:
            return self._sig.with_count(self.count)
        return self._sig

    def per_count(self):
        """Make the call take any count of its size class (:meth:`recount`): it is
        recorded for the class (:meth:`Recordings.record_class`)."""
        self.rest, self.count = self._sig.digest_without_count(), self._sig.count

    cpdef bint recount(self, int64_t count) except -1:
        """Take ``count`` as the call's count (its check's digest, and its
        signature for an error's message): always True."""
        if count != self.count:
            self.template = flags_template(count_digest(self.rest, count))
            self.count = count
        return True

    cpdef bint run(self, tuple args) except -1:
        """Run the call once over ``args``: the check, then the collective. Whether
        it ran: False when the check failed (every rank learns the same, and the
        collective did not start; the check's ``flags`` say why)."""
        if not self._checked():
            return False
        if self.method is not None:
            self.method(*(replaced(args, self.replace) if self.replace else args))
        return True

    cdef bint _replay(self, tuple args, const Py_ssize_t *starts,
                      const Py_ssize_t *lengths) except -1:
        """:meth:`run` for a replay, which read the arrays' addresses (``starts``)
        and byte lengths (``lengths``, -1 for an argument that is not one)."""
        cdef Py_ssize_t scount = 0, rcount = 0
        cdef int err
        cdef const void *sbuf
        cdef void *rbuf
        if self.kind == 0 or self.method is None:
            return self.run(args)
        if self.at_send >= 0 and lengths[self.at_send] > 0:
            scount = lengths[self.at_send] // self.send_unit
        if self.at_recv >= 0 and lengths[self.at_recv] > 0:
            rcount = lengths[self.at_recv] // self.recv_unit
        if scount > 0x7FFFFFFF or rcount > 0x7FFFFFFF:  # (MPI's counts are ints)
            return self.run(args)
        if not self._checked():
            return False
        sbuf = <const void *>starts[self.at_send] if self.at_send >= 0 else NULL
        rbuf = <void *>starts[self.at_recv] if self.at_recv >= 0 else NULL
        with nogil:  # (another thread may hold the library's lock and want the GIL)
            err = wacoll_collective(&_colls, self.kind, sbuf, <int>scount, rbuf,
                                    <int>rcount, self.type_h, self.op_h, self.root,
                                    self.comm_h)
        if err:
            from mpi4py import MPI
            raise MPI.Exception(err)
        return True

    cdef bint _checked(self) except -1:
        """The one-cluster check (where there is one): whether it passed."""
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
        return True


def fold_digest(folded, digest):
    """The digest of a check that follows folded calls (running digest ``folded``)
    for a call whose own digest is ``digest``, as the checks fold them
    (:class:`NodeFlags`, :class:`wacoll.mpi._runner.Verdicts`).

    Examples
    --------
    >>> fold_digest(0, 7) == fold_digest(0, 7) != fold_digest(7, 0)
    True
    """
    return _fold(folded, digest)


cpdef bytes folded_flags(bytes mine, int64_t folded):
    """A one-cluster check's four flags ``mine`` (32 bytes) with the running digest
    ``folded`` of the calls folded before it mixed in and :data:`FOLDED_MARK` set,
    as :class:`NodeFlags` publishes them (for a check made elsewhere).

    Examples
    --------
    >>> import numpy as np
    >>> words = np.frombuffer(folded_flags(flags_template(7), 3), np.int64)
    >>> bool(words[1] == FOLDED_MARK), int(words[2]) == fold_digest(3, 7) == -int(words[3])
    (True, True)
    """
    cdef int64_t words[4]
    if len(mine) != 32:
        raise ValueError("a check's flags are four int64 words")
    memcpy(words, <const char *>mine, sizeof(words))
    words[1] |= _FOLDED_MARK
    _fold_into(words, folded)
    return PyBytes_FromStringAndSize(<char *>words, sizeof(words))


cpdef bytes flags_template(int64_t digest):
    """A call's four check flags as a rank contributes them when its arguments are
    valid: ``(0, 0, digest, -digest)``, native int64 bytes."""
    cdef int64_t words[4]
    words[0], words[1], words[2], words[3] = 0, 0, digest, -digest
    return PyBytes_FromStringAndSize(<char *>words, sizeof(words))


cpdef tuple replaced(tuple args, tuple replace):
    """``args`` with the arguments ``replace`` names, ``(position, value)`` pairs,
    passed otherwise (an ``MPI.Op`` for an operator named by a string)."""
    given = list(args)
    for i, value in replace:
        given[i] = value
    return tuple(given)


cdef class CountClasses:
    """The calls recorded for every count of their size classes under one class
    key (:meth:`Recordings.class_key`): how each array argument's length follows
    the count, and per size class its recorded call, which takes any count of
    its class (``recount(count)``; a :class:`NativeCall`, or a plan's or the
    library's call of :mod:`wacoll.mpi._runner`).

    Parameters
    ----------
    multiples : tuple of int
        Per argument: its bytes per element of the count (an array's), -1 for
        an argument that is not an array.
    itemsize : int
        Bytes of the call's element (its size class is ``(count *
        itemsize).bit_length()``).
    """

    cdef Py_ssize_t n, itemsize
    cdef Py_ssize_t multiples[16]
    #: The recorded call of each size class.
    cdef readonly dict calls

    def __init__(self, tuple multiples not None, Py_ssize_t itemsize):
        cdef Py_ssize_t i
        if len(multiples) > 16 or itemsize <= 0:
            raise ValueError("at most 16 arguments, and a positive item size")
        self.n, self.itemsize, self.calls = len(multiples), itemsize, {}
        for i in range(self.n):
            self.multiples[i] = multiples[i]

    def same(self, tuple multiples not None, Py_ssize_t itemsize):
        """Whether a call of these multiples and item size belongs here."""
        cdef Py_ssize_t i
        if len(multiples) != self.n or itemsize != self.itemsize:
            return False
        for i in range(self.n):
            if multiples[i] != self.multiples[i]:
                return False
        return True

    cdef Py_ssize_t count_of(self, const Py_ssize_t *lengths, Py_ssize_t n) noexcept:
        """The count of a call whose arguments' byte lengths are ``lengths`` (-1
        for an argument that is not an array), or -1 when they do not follow the
        recorded multiples."""
        cdef Py_ssize_t i, m, count = -1
        if n != self.n:
            return -1
        for i in range(n):
            m = self.multiples[i]
            if m < 0:
                if lengths[i] >= 0:
                    return -1
            elif m > 0 and count < 0:
                if lengths[i] <= 0 or lengths[i] % m:
                    return -1
                count = lengths[i] // m
        if count <= 0:
            return -1
        for i in range(n):
            m = self.multiples[i]
            if m >= 0 and lengths[i] != m * count:
                return -1
        return count

    cdef Py_ssize_t size_class(self, Py_ssize_t count) noexcept:
        cdef Py_ssize_t bits = 0
        cdef size_t v = <size_t>(count * self.itemsize)
        while v:
            bits += 1
            v >>= 1
        return bits


cdef class Recordings(dict):
    """A communicator's recorded calls by :meth:`key`: what the call is and what its
    arguments look like, not which arrays they are; and calls recorded for every
    count of a size class by :meth:`class_key` (:meth:`record_class`).

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
    >>> ckey, lengths = calls.class_key(print, None, None, (np.zeros(4), 0))
    >>> ckey == calls.class_key(print, None, None, (np.ones(9), 0))[0], lengths
    (True, (32, -1))
    """

    #: The recorded call the last replay ran.
    cdef public object last
    #: How many calls replays ran (a failed one too): what a route counts its
    #: calls by (:attr:`wacoll.mpi.route.Route.seq`), without a Python step.
    cdef readonly Py_ssize_t nreplayed
    #: How many class keys are recorded (none: a replay looks up its key only).
    cdef Py_ssize_t nclasses
    # Exact keys that replayed a class's call: key -> (call, count). A repeated
    # count then costs one key, not two. Bounded per recorded call (one size
    # class): its keys are forgotten together when it has _HITS of them, so that
    # a loop over many counts of other classes leaves a class's keys alone; all
    # are forgotten at _ALL_HITS, and when any class entry changes.
    cdef dict hits
    # The exact keys in ``hits`` of each recorded call: call -> list of keys.
    cdef dict hit_keys
    # Non-blocking requests the MPI library completes itself whose checks' verdicts
    # are not collected yet (wacoll.mpi.startcall.NodeRequest), and the addresses
    # of their handles: where MPI.Request.Waitall and friends completed one, its
    # verdict is due, and no call is replayed before it is collected.
    cdef list _watched
    cdef intptr_t _watched_at[_WATCHED]
    cdef Py_ssize_t _nwatched
    #: Whether :meth:`watch` watches :data:`WATCHED` requests already.
    cdef readonly bint full

    def watch(self, request, intptr_t handle_at):
        """Watch ``request``, whose handle is at ``handle_at``, until
        :meth:`unwatch`: False when :data:`WATCHED` are watched already."""
        if self._nwatched >= _WATCHED:
            return False
        if self._watched is None:
            self._watched = []
        self._watched.append(request)
        self._watched_at[self._nwatched] = handle_at
        self._nwatched += 1
        self.full = self._nwatched >= _WATCHED
        return True

    def unwatch(self, request):
        """Stop watching ``request`` (nothing if it is not watched)."""
        cdef Py_ssize_t i, j
        for i in range(self._nwatched):
            if self._watched[i] is request:
                del self._watched[i]
                for j in range(i, self._nwatched - 1):
                    self._watched_at[j] = self._watched_at[j + 1]
                self._nwatched -= 1
                self.full = False
                return

    @property
    def watched(self):
        """The watched requests, oldest first."""
        return tuple(self._watched or ())

    def completed_watched(self):
        """The watched requests whose handles the MPI library has completed (set to
        ``MPI_REQUEST_NULL``), oldest first."""
        if not self._nwatched:
            return ()
        return [self._watched[i] for i in range(self._nwatched)
                if _is_null_request(self._watched_at[i])]

    cdef bint _any_watched_completed(self) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(self._nwatched):
            if _is_null_request(self._watched_at[i]):
                return True
        return False

    @property
    def nremembered(self):
        """How many exact keys of the classes' calls are remembered."""
        return 0 if self.hits is None else len(self.hits)

    def key(self, reader, family, level, tuple args not None):
        """The key of a call: ``reader``, ``family``, ``level`` and, per argument,
        its value (None, ``int``, ``str``), its identity (``MPI.IN_PLACE``, an
        ``MPI.Op``), for a numpy array its element format, shape, strides,
        writability and which earlier array starts at the same address (-1: none),
        and for a buffer specification ``[array, datatype]`` or ``[array, count,
        datatype]`` those of its parts (the datatype by identity). None when an
        argument is of any other kind."""
        cdef Py_ssize_t lengths[16]
        cdef Py_ssize_t starts[16]
        return _key(reader, family, level, args, None, lengths, starts)

    def class_key(self, reader, family, level, tuple args not None):
        """``(class key, lengths)`` of a call: its :meth:`key` without the lengths
        of its arrays, and each argument's length in bytes (-1: not an array);
        None when the call has none (an argument :meth:`key` does not take, an
        array of more than one dimension, a buffer specification that gives its
        own count)."""
        cdef Py_ssize_t lengths[16]
        cdef Py_ssize_t starts[16]
        out = []
        _key(reader, family, level, args, out, lengths, starts)
        if not out or out[0] is None:
            return None
        return out[0], tuple([lengths[i] for i in range(len(args))])

    def record_class(self, ckey, tuple multiples not None, Py_ssize_t itemsize,
                     Py_ssize_t size_class, call):
        """Record ``call`` (which takes any count of its size class ``size_class``)
        under the class key ``ckey``, its arrays' lengths ``multiples`` times the
        count (:class:`CountClasses`). Whether a new entry was made (the caller
        bounds the recordings)."""
        self.hits = self.hit_keys = None
        found = dict.get(self, ckey)
        made = found is None or not (<CountClasses>found).same(multiples, itemsize)
        if made:
            found = CountClasses(multiples, itemsize)
            if ckey not in self:
                self.nclasses += 1
            self[ckey] = found
        (<CountClasses>found).calls[size_class] = call
        return made

    def clear(self):
        dict.clear(self)
        self.nclasses = 0
        self.hits = self.hit_keys = None

    def __delitem__(self, key):
        if type(dict.get(self, key)) is CountClasses:
            self.nclasses -= 1
            self.hits = self.hit_keys = None
        dict.__delitem__(self, key)

    def replay(self, reader, family, level, tuple args not None):
        """Run the recorded call these arguments match: True when it ran, the
        recorded call (a :class:`NativeCall`, a plan's
        :class:`~wacoll.mpi._runner.PlanCall`, the library's
        :class:`~wacoll.mpi._runner.LibraryCall`, an explored shape's
        :class:`~wacoll.mpi.exploring.ExploringCall`) when its check failed, None
        when none matches, or the recorded call did not run (read the call
        afresh), :data:`VERDICTS_DUE` when a watched request was completed
        (:meth:`watch`: collect its verdict, then replay)."""
        cdef Py_ssize_t lengths[16]
        cdef Py_ssize_t starts[16]
        cdef Py_ssize_t count
        cdef CountClasses classes
        cdef PyObject *found
        if self._nwatched and self._any_watched_completed():
            return VERDICTS_DUE
        key = _key(reader, family, level, args, None, lengths, starts)
        if key is None:
            return None
        found = PyDict_GetItem(self, key)
        if found != NULL:
            recorded = <object>found
        elif not self.nclasses:
            return None
        else:
            found = NULL if self.hits is None else PyDict_GetItem(self.hits, key)
            if found != NULL:
                recorded, count = <tuple>found
            else:
                out = []
                _key(reader, family, level, args, out, lengths, starts)
                if out[0] is None:
                    return None
                found = PyDict_GetItem(self, out[0])
                if found == NULL:
                    return None
                classes = <CountClasses>found
                count = classes.count_of(lengths, len(args))
                if count < 0:
                    return None
                found = PyDict_GetItem(classes.calls, classes.size_class(count))
                if found == NULL:
                    return None
                recorded = <object>found  # (a reference of its own: recount runs Python)
                self._remember(key, recorded, count)
            if not recorded.recount(count):
                return None
        if type(recorded) is NativeCall:
            passed = (<NativeCall>recorded)._replay(args, starts, lengths)
        else:
            # a call of a plan (wacoll.mpi._runner.PlanCall), the library's
            # (LibraryCall), or a shape's candidates (ExploringCall of
            # wacoll.mpi.exploring, whose None says: not run, read the call afresh)
            passed = recorded.run(args)
            if passed is None:
                return None
        self.last = recorded
        self.nreplayed += 1
        return True if passed else recorded

    cdef void _remember(self, key, recorded, Py_ssize_t count) except *:
        """Remember that the exact ``key`` replays ``recorded`` at ``count``."""
        cdef list keys
        cdef PyObject *found
        if self.hits is None or len(self.hits) >= _ALL_HITS:
            self.hits, self.hit_keys = {}, {}
        found = PyDict_GetItem(self.hit_keys, recorded)
        if found == NULL:
            keys = []
            self.hit_keys[recorded] = keys
        else:
            keys = <list>found
            if len(keys) >= _HITS:
                for old in keys:
                    del self.hits[old]
                del keys[:]
        keys.append(key)
        self.hits[key] = (recorded, count)


#: Exact keys a communicator's :class:`Recordings` remembers for one size class's
#: recorded call (a loop that cycles up to this many counts of a class computes one
#: key a call), and for all of them (some 250 bytes an entry).
cdef Py_ssize_t _HITS = 1024
cdef Py_ssize_t _ALL_HITS = 8192


cdef object _ndarray = np.ndarray


cdef bytes _array_key(object a, Py_ssize_t index, Py_ssize_t *starts,
                      Py_ssize_t *nbytes, list classed):
    """Array argument ``index``'s description as bytes: which earlier array argument
    starts at the same address (-1: none), writability, item size, shape, strides
    and element format (from the buffer protocol). Its address goes into
    ``starts[index]``, its length in bytes into ``nbytes[0]``, and, when
    ``classed`` is a list, the description without its length is appended (None
    for an array of several dimensions)."""
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
        nbytes[0] = view.len
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
        form = <bytes>view.format if view.format != NULL else b"B"
        if classed is not None:
            if view.ndim == 1:
                words[4] = -1
                classed.append(PyBytes_FromStringAndSize(<char *>words,
                                                         n * sizeof(Py_ssize_t)) + form)
                words[4] = view.shape[0]
            else:
                classed.append(None)
        return PyBytes_FromStringAndSize(<char *>words, n * sizeof(Py_ssize_t)) + form
    finally:
        PyBuffer_Release(&view)


cdef object _Op = None
cdef object _IN_PLACE = None
cdef object _Datatype = None


cdef object _spec_key(object spec, Py_ssize_t index, Py_ssize_t *starts,
                      Py_ssize_t *nbytes, list classed):
    """A buffer specification's description: ``[array, datatype]`` or ``[array,
    count, datatype]`` as mpi4py reads them (the array as :func:`_array_key`, the
    count by value, the datatype by identity); None for any other form. With
    ``classed``, its description without its array's length is appended (None
    when it gives its own count)."""
    cdef Py_ssize_t n = len(spec)
    if n not in (2, 3) or type(spec[0]) is not _ndarray:
        return None
    inner = [] if classed is not None else None
    first = _array_key(spec[0], index, starts, nbytes, inner)
    if first is None:
        return None
    if n == 3 and type(spec[1]) is not int:
        return None
    last = spec[n - 1]
    if not isinstance(last, _Datatype):
        return None
    if classed is not None:
        classed.append(
            None if n == 3 or inner[0] is None
            else (type(spec), inner[0], None, type(last), id(last))
        )
    return (type(spec), first, spec[1] if n == 3 else None, type(last), id(last))


cdef object _key(reader, family, level, tuple args, list out, Py_ssize_t *lengths,
                 Py_ssize_t *starts):
    """The call's :meth:`Recordings.key`; when ``out`` is a list, its class key
    (:meth:`Recordings.class_key`, None when it has none) is appended. Each
    argument's length in bytes (-1: not an array) is written to ``lengths``, and
    its address (0: not an array) to ``starts``."""
    global _Op, _IN_PLACE, _Datatype
    if _Op is None:
        from mpi4py import MPI
        _Op, _IN_PLACE, _Datatype = MPI.Op, MPI.IN_PLACE, MPI.Datatype
    cdef Py_ssize_t i, n = len(args)
    if n > 16:
        return None
    cdef tuple key = PyTuple_New(n + 3)
    cdef tuple ckey = None
    cdef list classed = None
    if out is not None:
        ckey = PyTuple_New(n + 4)
        classed = []
    for i, item in enumerate((reader, family, level)):
        Py_INCREF(item)
        PyTuple_SET_ITEM(key, i, item)
        if ckey is not None:
            Py_INCREF(item)
            PyTuple_SET_ITEM(ckey, i, item)
    for i in range(n):
        a = args[i]
        t = type(a)
        starts[i] = 0  # not an array: never the same address as one
        lengths[i] = -1
        if t is _ndarray:
            item = _array_key(a, i, starts, &lengths[i], classed)
            if item is None:
                return None
        elif a is None or t is int or t is str:
            item = a
        elif a is _IN_PLACE or isinstance(a, _Op):
            item = (t, id(a))
        elif t is list or t is tuple:
            item = _spec_key(a, i, starts, &lengths[i], classed)
            if item is None:
                return None
        else:
            return None
        Py_INCREF(item)
        PyTuple_SET_ITEM(key, i + 3, item)
        if ckey is not None:
            if lengths[i] >= 0:
                citem = classed.pop()
                if citem is None:  # (not every slot is filled: dropped whole)
                    ckey = None
                    continue
            else:
                citem = item
            Py_INCREF(citem)
            PyTuple_SET_ITEM(ckey, i + 3, citem)
    if out is not None:
        if ckey is not None:
            Py_INCREF(_CLASSED)
            PyTuple_SET_ITEM(ckey, n + 3, _CLASSED)
        out.append(ckey)
    return key


#: The last item of a class key (no call's key ends so).
cdef object _CLASSED = ("count", "class")
