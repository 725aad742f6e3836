"""Agreement across ranks: every rank raises the same error, or none does.

A collective whose arguments are wrong on one rank must not leave the others waiting.
Before a call runs, each rank contributes whether its own arguments are valid and a
:class:`Signature` of the call; one small collective compares them, and on any fault
every rank raises the same error, of the same class, naming the rank at fault. Vector
variants also exchange their counts, and every rank runs the same check on them
(:data:`VECTOR_CHECKS`), which returns the counts the plan is built for.

Examples
--------
>>> from mpi4py import MPI
>>> sig = Signature("bcast", root=0, count=4, dtype="<f8")
>>> agree(MPI.COMM_SELF, None, sig)
>>> sig.describe()
'bcast(root=0, count=4, dtype=<f8)'
"""

from __future__ import annotations

import dataclasses
import functools
import re
import zlib
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from wacoll import errors
from wacoll.errors import BufferMismatchError, WacollError
from wacoll.mpi._fastcall import (
    FLUSHED,
    LINE_WORDS,
    NodeFlags,
    count_digest,
    flags_template,
    fold_digest,
    folded_flags,
)
from wacoll.mpi._runner import RING_LINE_WORDS, RING_LINES, NodeRing
from wacoll.mpi.engine import advance_request

__all__ = [
    "agree",
    "blocking_check",
    "Check",
    "from_rank_0",
    "NodeCheck",
    "on_one_node",
    "PersistentCheck",
    "Signature",
    "VECTOR_CHECKS",
    "portable_error",
    "rebuild_error",
]

#: wacoll's error classes by name, so that a fault travels between ranks as data.
_ERRORS = {
    name: getattr(errors, name)
    for name in errors.__all__
    if isinstance(getattr(errors, name), type)
    and issubclass(getattr(errors, name), WacollError)
}
_FIELDS = ("rank", "step", "line", "column")
_RANK_PREFIX = re.compile(r"rank \d+: ")


@dataclass(frozen=True)
class Signature:
    """What one rank believes a call (or a constructor) is.

    Attributes
    ----------
    kind : str
        The operation, ``"constructor"``, or ``"error"`` for a rank whose own
        arguments are invalid.
    root, count, dtype, level, operator, family, options
        The fields that choose the plan (the constructor uses ``options`` for its
        own named arguments).
    """

    kind: str
    root: int | None = None
    count: int | None = None
    dtype: str | None = None
    level: str | None = None
    operator: str | None = None
    family: str | None = None
    options: tuple = ()

    def digest(self) -> int:
        """A 32-bit digest of the signature (the same on every rank and process).

        A call's count is mixed into the digest of the rest
        (:meth:`digest_without_count`) by :func:`~wacoll.mpi._fastcall.count_digest`,
        so that a call recorded for every count of a size class computes each
        count's digest in C, as this does.

        Examples
        --------
        >>> from wacoll.mpi._fastcall import count_digest
        >>> sig = Signature("bcast", root=0, count=1500, dtype="<f8")
        >>> sig.digest() == count_digest(sig.digest_without_count(), 1500)
        True
        >>> sig.digest() == sig.with_count(1501).digest()
        False
        """
        rest = self.digest_without_count()
        count = self.count
        return rest if type(count) is not int else count_digest(rest, count)

    def digest_without_count(self) -> int:
        """The digest of every field but an integer count (32 bits)."""
        # the options' text is part of the cache's key: signatures compare their
        # options by value, and 2, 2.0 and True are equal values
        sig = self if type(self.count) is not int else self.with_count(None)
        return _digest(sig, repr(self.options) if self.options else "")

    def with_count(self, count: int | None) -> Signature:
        """The same call with another count."""
        return Signature(
            self.kind,
            self.root,
            count,
            self.dtype,
            self.level,
            self.operator,
            self.family,
            self.options,
        )

    def describe(self) -> str:
        """A readable form of the call."""
        if self.kind == "error":
            return "invalid arguments"
        if self.kind == "constructor":
            return "wacoll.Comm(" + ", ".join(f"{k}={v!r}" for k, v in self.options) + ")"
        fields = [
            f"{f.name}={getattr(self, f.name)}"
            for f in dataclasses.fields(self)
            if f.name not in ("kind", "options") and getattr(self, f.name) is not None
        ]
        return f"{self.kind}(" + ", ".join(fields) + ")"

    def differences(self, other) -> list:
        """The names of the fields (or constructor arguments) where two differ."""
        if self.kind == other.kind == "constructor":
            mine, theirs = dict(self.options), dict(other.options)
            return [k for k in mine if mine[k] != theirs.get(k)]
        return [
            f.name
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]


@functools.lru_cache(maxsize=256)
def _digest(sig, options_text):
    # a repeated call's signature is equal, not identical: the cache saves the
    # dataclass repr, which costs more than the rest of the check's set-up
    return zlib.crc32(repr(sig).encode())


def portable_error(error):
    """An error as plain data: class name, message and its located fields (and the
    MPI error class of an :class:`~wacoll.errors.MPIError` that names its own), as
    :func:`agree` sends it to the other ranks, which raise :func:`rebuild_error` of
    it."""
    fields = {
        k: getattr(error, k) for k in _FIELDS if getattr(error, k, None) is not None
    }
    own = getattr(error, "__dict__", {}).get("mpi_error_class")
    if own is not None:
        fields["mpi_error_class"] = int(own)
    return (type(error).__name__, str(error), fields)


def rebuild_error(rank, data):
    """The error another rank reported (as :func:`portable_error` data), to raise here.

    It has the reporting rank's class, its message prefixed with ``rank N:``, and its
    located fields (``rank``, ``step``, ``line``, ``column``; None where absent); an
    :class:`~wacoll.errors.MPIError` keeps its MPI error class
    (``Get_error_class()``), so every rank raises what the reporting rank would.
    """
    name, message, fields = data
    cls = _ERRORS.get(name, WacollError)
    exc = cls.__new__(cls)
    # a message that already names its rank (an error agreed on before) keeps it
    located = _RANK_PREFIX.match(message)
    Exception.__init__(exc, message if located else f"rank {rank}: {message}")
    for k in _FIELDS:
        setattr(exc, k, fields.get(k))
    if "mpi_error_class" in fields:
        exc.mpi_error_class = fields["mpi_error_class"]
    return exc


def agree(comm, error, sig, info=None, *, exchange=False, validate=True):
    """Raise on every rank if any rank has ``error`` or the ranks' ``sig`` differ.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
    error : WacollError or None
        This rank's own fault with its arguments.
    sig : Signature
        What this rank believes the call is.
    info : object, optional
        Exchanged (``exchange=True``) and returned as a list, one entry per rank.
    validate : bool
        Without it (and without ``exchange``) a local error is raised locally only.
    """
    if not validate and not exchange:
        if error is not None:
            raise error
        return None
    crc = sig.digest()
    if not exchange:
        flags = np.array([0 if error is None else 1, crc, -crc], dtype=np.int64)
        comm.Allreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
        if flags[0] == 0 and flags[1] == -flags[2]:
            return None
    mine = (None if error is None else portable_error(error), sig, info)
    everyone = comm.allgather(mine)
    for r, (err, _sig, _info) in enumerate(everyone):
        if err is not None:
            raise rebuild_error(r, err)
    sigs = [s for _, s, _ in everyone]
    for r, s in enumerate(sigs):
        if s != sigs[0]:
            if s.kind == sigs[0].kind == "constructor":
                raise WacollError(
                    f"the ranks disagree on wacoll.Comm's "
                    f"{', '.join(sigs[0].differences(s))}: rank 0 and "
                    f"rank {r} differ"
                )
            raise WacollError(
                f"the ranks disagree on the call: rank 0 has "
                f"{sigs[0].describe()}, rank {r} has {s.describe()}"
            )
    return [i for _, _, i in everyone]


def from_rank_0(comm, decide, error: type, what: str):
    """``decide()`` run on rank 0, its value given to every rank (collective).

    Wherever one rank reads or decides and the others wait for its word (a tuning
    file, a topology file, a links record, a fit), a failure there must reach the
    waiting ranks, or they wait forever. Any exception ``decide`` raises, whatever
    its class, is raised on every rank: a :class:`~wacoll.errors.WacollError` as
    itself, anything else as ``error`` naming ``what`` and the cause; the message
    starts with ``rank 0:`` on every rank alike.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> from wacoll.errors import TuningError
    >>> from_rank_0(MPI.COMM_SELF, lambda: 42, TuningError, "reading the file")
    42
    >>> from_rank_0(MPI.COMM_SELF, lambda: {}["x"], TuningError, "reading the file")
    Traceback (most recent call last):
    ...
    wacoll.errors.TuningError: rank 0: reading the file failed (KeyError: 'x')
    """
    outcome = None
    if comm.Get_rank() == 0:
        try:
            outcome = (True, decide())
        except WacollError as exc:
            outcome = (False, portable_error(exc))
        except Exception as exc:  # noqa: BLE001 -- every failure reaches every rank
            outcome = (
                False,
                portable_error(error(f"{what} failed ({type(exc).__name__}: {exc})")),
            )
    ok, payload = comm.bcast(outcome, root=0)
    if not ok:
        raise rebuild_error(0, payload)
    return payload


# v-variant count agreement: every rank runs the same check on the same exchanged
# counts, so a mismatch raises the same error everywhere.
def _fail(message):
    raise BufferMismatchError(message)


def _scatterv_counts(root, infos):
    counts = infos[root][1]
    for r, (own, _) in enumerate(infos):
        if own != counts[r]:
            _fail(f"rank {r}'s recvbuf has {own} elements; the root sends {counts[r]}")
    return counts


def _gatherv_counts(root, infos):
    counts = infos[root][1]
    for r, (own, _) in enumerate(infos):
        if own != counts[r]:
            _fail(f"rank {r} sends {own} elements; the root expects {counts[r]}")
    return counts


def _same_counts(root, infos):
    for r, counts in enumerate(infos):
        if counts != infos[0]:
            _fail(f"rank {r}'s recvcounts differ from rank 0's")
    return infos[0]


def _alltoallv_counts(root, infos):
    P = len(infos)
    matrix = [infos[i][0] for i in range(P)]
    for j in range(P):
        for i in range(P):
            if infos[j][1][i] != matrix[i][j]:
                _fail(
                    f"rank {j} expects {infos[j][1][i]} elements from rank {i}, "
                    f"which sends {matrix[i][j]}"
                )
    return tuple(tuple(row) for row in matrix)


def _reduce_scatter_counts(root, infos):
    given = [c for _, c, _ in infos if c is not None]
    counts = given[0] if given else tuple(own for own, _, _ in infos)
    for r, (own, c, nin) in enumerate(infos):
        if c is not None and c != counts:
            _fail(f"rank {r}'s recvcounts differ from the others'")
        if own != counts[r]:
            _fail(f"rank {r}'s recvbuf has {own} elements; recvcounts gives {counts[r]}")
        if nin != sum(counts):
            _fail(
                f"rank {r}'s sendbuf has {nin} elements; the recvcounts add up "
                f"to {sum(counts)}"
            )
    return counts


#: The count check of each vector operation: ``check(root, infos) -> counts``, run on
#: every rank over the exchanged ``vector_info`` of all ranks.
VECTOR_CHECKS = {
    "scatterv": _scatterv_counts,
    "gatherv": _gatherv_counts,
    "allgatherv": _same_counts,
    "alltoallv": _alltoallv_counts,
    "reduce_scatter": _reduce_scatter_counts,
}


#: Error classes by a small code, for the flags of a concurrent check.
_CODES = tuple(sorted(_ERRORS))


class Check:
    """The cross-rank check of one call, run *beside* the call instead of before it.

    Each rank contributes ``[failed rank + 1, error class code, digest, -digest]``
    (zeros and its signature's digest when its own arguments are fine); a MAX
    all-reduction gives every rank the highest failing rank, its error class, and
    whether all digests agree. On one cluster it is the MPI library's non-blocking
    ``Iallreduce``; on several clusters it runs as a wacoll plan (the topology-aware
    all-reduce: one wide-area latency, like the call's own), so the check costs no
    extra wide-area round trip: the call waits for both at once. That plan runs in
    the compiled runner (``runner``), as the check of every compiled call does; the
    Python executor runs it (``program``) only where the runner cannot load.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator the checks travel on (never the call's own).
    error : WacollError or None
        This rank's fault with its own arguments.
    sig : Signature
    program : wacoll.plans.LoweredProgram, optional
        A lowered all-reduce of 4 int64 elements (MAX) to run the check as a plan
        in the Python executor.
    runner : wacoll.mpi._runner.Runner, optional
        The same all-reduce, compiled: run instead of ``program``. Its requests live
        in C, so :attr:`waiting` is empty until it is done: whoever waits for the
        check polls it.
    pool : object, optional
        Where ``runner`` goes after its run: appended to ``pool.spare`` once complete
        (it can serve another call), or, with the whole check, to ``pool.abandoned``
        when the check is abandoned while it runs (:meth:`abandon`: MPI may still
        write its buffers, so they are kept alive).
    tag : int
        The tag of the plan's messages.
    persistent : PersistentCheck, optional
        Run the check to completion now, in this request (one cluster's blocking
        calls).
    ring : wacoll.mpi._runner.NodeRing, optional
        Publish the check in one node's ring of non-blocking checks, and collect it
        from there (no message: :attr:`waiting` is empty until it is done).
    folded : int, optional
        The running digest of calls with nothing to move since the last check
        (:meth:`wacoll.mpi._runner.Verdicts.fold`): checked with this call.
    """

    __slots__ = (
        "error",
        "sig",
        "flags",
        "request",
        "run",
        "done",
        "comm",
        "runner",
        "pool",
        "_mine",
        "errors_at",
        "ring",
        "ring_seq",
    )

    def __init__(
        self,
        comm,
        error,
        sig,
        *,
        program=None,
        runner=None,
        pool=None,
        tag=0,
        persistent=None,
        ring=None,
        folded=None,
    ):
        rank = comm.Get_rank()
        crc = sig.digest()
        if folded is not None:  # calls with nothing to move went before: theirs too
            crc = fold_digest(folded, crc)
        code = (
            0
            if error is None
            else _CODES.index(type(error).__name__) + 1
            if type(error).__name__ in _CODES
            else len(_CODES) + 1
        )
        mine = np.array([0 if error is None else rank + 1, code, crc, -crc], np.int64)
        self.error, self.sig, self.comm, self.done = error, sig, comm, False
        self.runner = self.pool = self.errors_at = self.ring = None
        if persistent is not None:  # complete now, in the communicator's own request
            persistent.run(mine)
            self.flags, self.run, self.request, self.done = (
                persistent.flags.copy(),
                None,
                None,
                True,
            )
        elif runner is not None:  # its receives posted now, in call order
            self.flags, self.run, self.request, self._mine = (
                np.empty(4, np.int64),
                None,
                None,
                mine,
            )
            self.runner, self.pool = runner, pool
            try:
                self.done = runner.begin(mine.ctypes.data, self.flags.ctypes.data, tag)
            except BaseException:
                self.abandon()
                raise
            if self.done:
                self._released()
        elif ring is not None:  # published now, in call order
            self.flags, self.run, self.request = mine, None, None
            self.ring, self.ring_seq = ring, ring.publish(mine)
        elif program is None:
            self.flags, self.run = mine, None
            self.request = comm.Iallreduce(MPI.IN_PLACE, self.flags, op=MPI.MAX)
        else:
            from wacoll.mpi.executor import ProgramRun

            self.flags, self.request = np.empty(4, np.int64), None
            self.run = ProgramRun(program, comm, mine, self.flags, op=MPI.MAX, tag=tag)

    @classmethod
    def completed(cls, comm, sig, flags):
        """A check that has already run (its all-reduced ``flags``), for
        :meth:`failure`: a replayed call (:mod:`wacoll.mpi.fastpath`) runs its own."""
        check = cls.__new__(cls)
        check.error, check.sig, check.comm, check.done = None, sig, comm, True
        check.flags, check.request, check.run = flags, None, None
        check.runner = check.pool = check.errors_at = check.ring = None
        return check

    @property
    def waiting(self):
        """The requests the check waits for (none for a compiled check: it is
        polled)."""
        if self.run is not None:
            return self.run.waiting
        return [] if self.runner is not None or self.ring is not None else [self.request]

    def advance(self, block=False):
        """Whether the check is complete (waiting for it when blocking)."""
        if self.done:
            return True
        if self.runner is not None:
            try:
                self.done = self.runner.proceed(block)
            except BaseException:  # an MPI error or an interrupt: never reused
                self.abandon()
                raise
            if self.done:
                self._released()
        elif self.ring is not None:
            if block:
                self.done = self.ring.wait(self.ring_seq)
            else:
                self.done = self.ring.collect(self.ring_seq)
        elif self.run is not None:
            self.done = self.run.advance(block)
        else:
            self.done = advance_request(self.request, block)
        return self.done

    @property
    def polled(self) -> bool:
        """Whether the check is still running in the compiled runner or a node's
        ring, which no one else can wait for: its waiter must poll it."""
        return (self.runner is not None or self.ring is not None) and not self.done

    def abandon(self):
        """Give up a compiled check still running (its call raised, or was
        interrupted): its receives are cancelled, and the check, its runner and its
        flags are kept in ``pool.abandoned``, since MPI may still write them. The
        communicator is not used for calls afterwards. Nothing once the check is
        over."""
        if self.runner is None or self.done or self.pool is None:
            return
        self.runner.abandon()
        pool, self.pool = self.pool, None
        pool.abandoned.append(self)

    def _released(self):
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.spare.append(self.runner)

    @property
    def ok(self) -> bool:
        """Every rank's arguments were valid and the signatures agree."""
        f = self.flags
        return bool(f[0] == 0 and f[2] == -f[3])

    def failure(self, exchange=True):
        """The error every rank raises after a failed check.

        With ``exchange`` (a blocking call), the ranks exchange their errors and
        signatures on the check's communicator, so the error names the faulty rank's
        own message; without it (a call completed by the progress thread, which must
        not start collectives of its own), the flags say which rank failed and with
        which error class. Where the faulty rank sent its error to every rank when
        it checked (``errors_at``: the communicator and tag, see
        :meth:`wacoll.mpi.argcheck.ArgumentCheck.of_call`), that error is raised.
        """
        if exchange:
            try:
                agree(self.comm, self.error, self.sig, exchange=True)
            except WacollError as exc:
                return exc
            return WacollError("the ranks' arguments disagree")  # pragma: no cover
        rank, code = int(self.flags[0]) - 1, int(self.flags[1])
        if rank >= 0 and self.errors_at is not None:
            # the faulty rank sent its error to every rank when it checked
            comm, tag = self.errors_at
            if rank == comm.Get_rank() and self.error is not None:
                data = portable_error(self.error)
            else:
                data = comm.recv(source=rank, tag=tag)
            err = rebuild_error(rank, data)
            if self.error is not None:
                err.__cause__ = self.error
            return err
        if rank < 0:
            return WacollError(
                "the ranks disagree on the call: their arguments "
                "describe different operations (check='first' names "
                "the ranks and fields)"
            )
        cls = (
            _ERRORS.get(_CODES[code - 1], WacollError)
            if 0 < code <= len(_CODES)
            else WacollError
        )
        err = cls.__new__(cls)
        # the same message on every rank; the faulty rank keeps its own as the cause
        Exception.__init__(
            err,
            f"rank {rank}: invalid arguments ({cls.__name__}; the "
            f"exception chain on rank {rank} says which)",
        )
        for k in _FIELDS:
            setattr(err, k, None)
        if self.error is not None:
            err.__cause__ = self.error
        return err


def on_one_node(comm) -> bool:
    """Whether every rank of ``comm`` shares one node's memory, as the MPI library
    sees it (collective; the same answer on every rank: a node is the whole
    communicator on one rank exactly when it is on all).

    Examples
    --------
    >>> from mpi4py import MPI
    >>> on_one_node(MPI.COMM_SELF)
    True
    """
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_size() == comm.Get_size()
    finally:
        node.Free()


def blocking_check(comm, whole=None):
    """The check of one node's or one cluster's blocking calls on ``comm``
    (collective): a :class:`NodeCheck` when every rank shares one node's memory
    (``whole``, found with :func:`on_one_node` where None), else a
    :class:`PersistentCheck`."""
    if whole is None:
        whole = on_one_node(comm)
    return NodeCheck(comm) if whole else PersistentCheck(comm)


class NodeCheck(NodeFlags):
    """The check of one node's blocking calls, in shared memory: each rank writes its
    four flags (:class:`Check`) into a cache line of a shared window and folds in
    everyone's, the MAX all-reduce :class:`PersistentCheck` runs, without a message
    (:class:`wacoll.mpi._fastcall.NodeFlags`; its ``run(mine)`` checks a call).

    The same window holds the node's ring of non-blocking checks (:attr:`ring`, a
    :class:`wacoll.mpi._runner.NodeRing`): a non-blocking call publishes its flags
    when it starts and collects the others' when it is waited for.

    Like the all-reduce it waits until every rank has arrived, so it synchronises the
    ranks (a checked Barrier is this check alone). While it waits it lets the MPI
    library progress now and then: a peer may be waiting in the library for this
    rank's part of an earlier operation.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator the check belongs to, all of whose ranks share one node
        (collective: every rank creates it).
    streams : bool
        Also hold the two regions of lines of the communicator's
        :class:`~wacoll.mpi._runner.NodeStream` (:attr:`stream_regions`; declared
        clusters on one node).
    """

    def __init__(self, comm, streams=False):
        rank, size = comm.Get_rank(), comm.Get_size()
        blocking = 2 * size * LINE_WORDS
        ring = size * (RING_LINES + 1) * RING_LINE_WORDS
        words = blocking + (3 if streams else 1) * ring
        self.window = MPI.Win.Allocate_shared(words * 8 if rank == 0 else 0, 8, comm=comm)
        memory, _ = self.window.Shared_query(0)
        lines = np.frombuffer(memory, np.int64, words)
        if rank == 0:
            lines[:] = 0
        comm.Barrier()  # nobody publishes before the lines are zero
        super().__init__(lines[:blocking], rank, size, comm.Iprobe)
        #: The checks of the node's non-blocking calls, in the same window.
        self.ring = NodeRing(lines[blocking : blocking + ring], rank, size, comm.Iprobe)
        #: The two regions of a :class:`~wacoll.mpi._runner.NodeStream` (or None).
        self.stream_regions = (
            tuple(lines[blocking + k * ring : blocking + (k + 1) * ring] for k in (1, 2))
            if streams
            else None
        )

    def free(self):
        self.window.Free()


class PersistentCheck:
    """The check of one cluster's blocking calls: a persistent MAX all-reduce of the
    four flags :class:`Check` describes, started once per call.

    Every blocking call on a one-cluster communicator checks here, whether it was
    read afresh or replayed (:mod:`wacoll.mpi.fastpath`): the MPI library matches a
    persistent collective only with the same persistent collective, never with a
    blocking or non-blocking one, so all ranks must check a call the same way. It
    costs about what the library's own collective does (MPICH 5, 2 ranks: 7-8 us a
    start, against 13-17 us for a blocking ``Allreduce`` over ``MPI.IN_PLACE``).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator the checks travel on (collective: every rank creates it).
    """

    __slots__ = ("flags", "request", "_holding", "nfolded", "folded")

    def __init__(self, comm):
        self.flags = np.zeros(4, np.int64)
        self.request = comm.Allreduce_init(MPI.IN_PLACE, self.flags, op=MPI.MAX)
        self._holding = None  # the flags array whose values ``flags`` still holds
        self.nfolded = self.folded = 0

    def fold(self, digest):
        """A call with nothing to move: its ``digest`` goes into the next check's
        (as :meth:`wacoll.mpi._fastcall.NodeFlags.fold`)."""
        self.folded = fold_digest(self.folded, digest) if self.nfolded else digest
        self.nfolded += 1

    def flush(self):
        """Check the calls folded since the last check now (where every rank
        flushes): whether they passed (True when none was folded)."""
        if not self.nfolded:
            return True
        return self.run(flags_template(FLUSHED))

    def run(self, mine) -> bool:
        """Check one call whose flags on this rank are ``mine`` (four int64, as an
        array or its 32 bytes); whether it passed.

        It passed when the maximum over the ranks is ``mine`` itself and ``mine``
        flags no error: no rank failed (a failure raises the first word) and every
        digest is this rank's (another one raises the third word or the fourth).
        """
        flags = self.flags
        words = mine if type(mine) is bytes else mine.tobytes()
        if self.nfolded:  # the calls folded since the last check are checked too
            words = folded_flags(words, self.folded)
            self.nfolded = self.folded = 0
        if self._holding != words:  # a passed check leaves ``mine`` in place
            flags[:] = np.frombuffer(words, np.int64)
        self.request.Start()
        self.request.Wait()
        passed = flags.tobytes() == words and not flags[0]
        self._holding = words if passed else None
        return passed

    def free(self):
        self.request.Free()
