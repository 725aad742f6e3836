"""wacoll's errors are also mpi4py's: code that catches what mpi4py raises catches
what wacoll raises for the same bad input.

Each case of :data:`CASES` is one bad input to one collective. The test calls the
same method with the same arguments on ``wacoll.Comm`` (the default one, and one over
several clusters, which checks the call beside it) and on mpi4py's own communicator
(``MPI.COMM_WORLD.Dup()``, errors returned as exceptions), and asserts that wacoll's
exception is an instance of the class mpi4py raised and of
:class:`~wacoll.errors.WacollError`, the same class and message on every rank; for an
``MPI.Exception``, also the same MPI error class (``Get_error_class()``).

Only inputs that mpi4py or the MPI library reject on every rank before any message
run on ``COMM_WORLD`` (the bad input is the same on every rank). A fault only the
root sees (a read-only receive buffer of Gather, aliased buffers of a rooted call)
would leave the other ranks inside the library's collective, so mpi4py's side of it
runs on a one-rank communicator (``COMM_SELF``) instead. Where a library does not
reject an input (Open MPI checks aliased buffers in a few collectives only) or
crashes on it (MPICH on aliased Alltoallv buffers, Open MPI on negative vector
counts), mpi4py's side is skipped on that library and wacoll's error is checked
against the class the table names.

The common cases also run non-blocking (``I...`` + ``Wait``) and persistent
(``..._init`` + ``Start`` + ``Wait``). A failed non-blocking call leaves a
wacoll communicator unusable (its messages may be in flight), so each of those runs
on a communicator of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.errors import WacollError

W = MPI.COMM_WORLD
P = W.Get_size()
ME = W.Get_rank()

_VERSION = MPI.Get_library_version()
#: The MPI library under test, as the table's ``libs`` name it.
LIB = (
    "mpich"
    if _VERSION.startswith("MPICH")
    else "openmpi"
    if "Open MPI" in _VERSION
    else "other"
)
BOTH = ("mpich", "openmpi")
MPICH = ("mpich",)

#: Error classes a library reports differently from wacoll's (which follow MPICH):
#: ``(case, library) -> MPI error class name``.
KNOWN_CLASSES = {
    ("aliased Reduce", "openmpi"): "ERR_ARG",
}

FORMS = ("blocking", "non-blocking", "persistent")


@dataclass
class Case:
    """One bad input.

    Attributes
    ----------
    name : str
    method : str
        The blocking method (``"Allreduce"``); the other forms add ``I`` or ``_init``.
    args : callable
        ``args(size, rank) -> tuple``: fresh positional arguments for a communicator
        of ``size`` ranks.
    expect : type
        The class mpi4py raises (through the MPI library for ``MPI.Exception``).
    error_class : str or None
        For ``MPI.Exception``: the name of MPI's error class (``"ERR_BUFFER"``).
    ref : str or None
        Where mpi4py's call runs: ``"world"`` (every rank rejects it before any
        message), ``"self"`` (only the root would: a one-rank communicator), None
        (nowhere: the MPI library does not survive it).
    libs : tuple
        The libraries that reject the input (mpi4py's side runs only there).
    kwargs : dict
    forms : tuple
        The forms the case runs in.
    """

    name: str
    method: str
    args: Callable
    expect: type
    error_class: str | None = None
    ref: str | None = "world"
    libs: tuple = BOTH
    kwargs: dict = field(default_factory=dict)
    forms: tuple = ("blocking",)


def _ro(a):
    a.setflags(write=False)
    return a


class _DLPackOnly:
    """An object that exposes its memory through DLPack only."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kwargs):
        return self._arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


#: Derived datatypes the cases made, freed after the test.
_TYPES = []


def _derived(commit=True):
    dt = MPI.DOUBLE.Create_contiguous(2)
    if commit:
        dt.Commit()
    _TYPES.append(dt)
    return dt


def _aliased(method, blocks):
    """Arguments that pass one array as both send and receive buffer."""

    def args(size, rank):
        a = np.ones(size * blocks)
        per = [a, blocks, MPI.DOUBLE]
        return {
            "Allreduce": (a, a),
            "Scan": (a, a),
            "Exscan": (a, a),
            "Reduce": (a, a, MPI.SUM, 0),
            "Allgather": (per, a),
            "Gather": (per, a, 0),
            "Scatter": (a, per, 0),
            "Alltoall": (a, a),
            "Alltoallv": (a, a),
            "Allgatherv": (per, [a, [blocks] * size]),
            "Gatherv": (per, [a, [blocks] * size], 0),
            "Scatterv": ([a, [blocks] * size], per, 0),
            "Reduce_scatter_block": (a, per),
            "Reduce_scatter": (a, per, [blocks] * size),
        }[method]

    return args


NONNATIVE = ">f8" if np.little_endian else "<f8"
ALL_FORMS = FORMS

CASES = [
    # ------------------------------------------------ BufferError: memory mpi4py refuses
    Case(
        "non-contiguous recvbuf",
        "Allreduce",
        lambda s, r: (np.ones(3), np.zeros(6)[::2]),
        BufferError,
        forms=ALL_FORMS,
    ),
    Case(
        "non-contiguous sendbuf",
        "Allreduce",
        lambda s, r: (np.ones(6)[::2], np.zeros(3)),
        BufferError,
    ),
    Case(
        "non-contiguous 2-D recvbuf",
        "Allgather",
        lambda s, r: (np.ones(2), np.zeros((s, 4))[:, ::2]),
        BufferError,
    ),
    Case(
        "non-contiguous memoryview recvbuf",
        "Allreduce",
        lambda s, r: (np.ones(3), memoryview(np.zeros(6))[::2]),
        BufferError,
    ),
    Case(
        "non-contiguous DLPack recvbuf",
        "Allreduce",
        lambda s, r: (np.ones(3), _DLPackOnly(np.zeros(6)[::2])),
        BufferError,
    ),
    Case(
        "read-only recvbuf",
        "Allreduce",
        lambda s, r: (np.ones(3), _ro(np.zeros(3))),
        BufferError,
        forms=ALL_FORMS,
    ),
    Case(
        "read-only recvbuf in place",
        "Allreduce",
        lambda s, r: (MPI.IN_PLACE, _ro(np.zeros(3))),
        BufferError,
    ),
    Case(
        "read-only Allgather recvbuf",
        "Allgather",
        lambda s, r: (np.ones(2), _ro(np.zeros(2 * s))),
        BufferError,
        forms=ALL_FORMS,
    ),
    Case(
        "read-only Alltoall recvbuf",
        "Alltoall",
        lambda s, r: (np.ones(s), _ro(np.zeros(s))),
        BufferError,
    ),
    Case(
        "read-only Scan recvbuf",
        "Scan",
        lambda s, r: (np.ones(2), _ro(np.zeros(2))),
        BufferError,
    ),
    Case(
        "read-only Scatter recvbuf",
        "Scatter",
        lambda s, r: (np.ones(2 * s), _ro(np.zeros(2)), 0),
        BufferError,
    ),
    Case(
        "read-only Gather recvbuf at the root",
        "Gather",
        lambda s, r: (np.ones(2), _ro(np.zeros(2 * s)), 0),
        BufferError,
        ref="self",
    ),
    Case(
        "read-only Reduce_scatter_block recvbuf",
        "Reduce_scatter_block",
        lambda s, r: (np.ones(s), _ro(np.zeros(1))),
        BufferError,
    ),
    Case(
        "read-only memoryview recvbuf",
        "Allreduce",
        lambda s, r: (np.ones(2), memoryview(bytes(16)).cast("d")),
        BufferError,
    ),
    Case(
        "read-only DLPack recvbuf",
        "Allreduce",
        lambda s, r: (np.ones(3), _DLPackOnly(_ro(np.zeros(3)))),
        BufferError,
    ),
    Case(
        "bytes recvbuf",
        "Allreduce",
        lambda s, r: ([np.ones(3, "i"), MPI.INT], [bytes(12), MPI.INT]),
        BufferError,
        forms=ALL_FORMS,
    ),
    Case(
        "bytes Allgather recvbuf",
        "Allgather",
        lambda s, r: ([np.ones(1, "i"), MPI.INT], [bytes(4 * s), MPI.INT]),
        BufferError,
    ),
    Case(
        "non-native byte order",
        "Allreduce",
        lambda s, r: (np.ones(2, NONNATIVE), np.zeros(2)),
        BufferError,
    ),
    Case(
        "datetime64 buffer",
        "Bcast",
        lambda s, r: (np.zeros(2, "M8[s]"), 0),
        BufferError,
        forms=ALL_FORMS,
    ),
    # ------------------------------------------------ KeyError: no MPI datatype
    Case(
        "dtype=object",
        "Allreduce",
        lambda s, r: (np.array([1, 2], object), np.zeros(2, object)),
        KeyError,
        forms=ALL_FORMS,
    ),
    Case(
        "dtype=object Bcast",
        "Bcast",
        lambda s, r: (np.array([1, 2], object), 0),
        KeyError,
    ),
    Case(
        "dtype=object recvbuf",
        "Allreduce",
        lambda s, r: (np.ones(2), np.zeros(2, object)),
        KeyError,
    ),
    Case("unknown type code", "Bcast", lambda s, r: ([np.zeros(2), "?x"], 0), KeyError),
    Case(
        "a type code where counts go (v)",
        "Allgatherv",
        lambda s, r: (np.ones(1), [np.zeros(s), "x"]),
        KeyError,
    ),
    Case(
        "a number as the datatype",
        "Bcast",
        lambda s, r: ([np.zeros(2), 1, 5], 0),
        KeyError,
    ),
    Case(
        "structured dtype",
        "Bcast",
        lambda s, r: (np.zeros(2, [("a", "i1"), ("b", "f8")]), 0),
        KeyError,
    ),
    Case("unicode dtype", "Bcast", lambda s, r: (np.zeros(2, "U3"), 0), KeyError),
    # ------------------------------------------------ TypeError
    Case(
        "not a buffer",
        "Allreduce",
        lambda s, r: (object(), np.zeros(2)),
        TypeError,
        forms=ALL_FORMS,
    ),
    Case(
        "a list of floats", "Allreduce", lambda s, r: ([1.0, 2.0], np.zeros(2)), TypeError
    ),
    Case("recvbuf None", "Allreduce", lambda s, r: (np.ones(2), None), TypeError),
    Case(
        "a list as the datatype",
        "Bcast",
        lambda s, r: ([np.zeros(2), 1, [5]], 0),
        TypeError,
    ),
    Case(
        "float count",
        "Bcast",
        lambda s, r: ([np.zeros(2), 1.0, MPI.DOUBLE], 0),
        TypeError,
    ),
    Case(
        "string count",
        "Bcast",
        lambda s, r: ([np.zeros(2), "1", MPI.DOUBLE], 0),
        TypeError,
    ),
    Case(
        "float displacement",
        "Bcast",
        lambda s, r: ([np.zeros(2), (1, 0.0), MPI.DOUBLE], 0),
        TypeError,
    ),
    Case(
        "float counts (v)",
        "Allgatherv",
        lambda s, r: (np.ones(1), [np.zeros(s), [1.5] * s]),
        TypeError,
    ),
    Case(
        "infinite counts (v)",
        "Allgatherv",
        lambda s, r: (np.ones(1), [np.zeros(s), [math.inf] * s]),
        TypeError,
    ),
    Case(
        "counts not a sequence (v)",
        "Allgatherv",
        lambda s, r: (np.ones(1), [np.zeros(s), object(), None, MPI.DOUBLE]),
        TypeError,
    ),
    Case(
        "string recvcounts",
        "Reduce_scatter",
        lambda s, r: (np.ones(s), np.zeros(1), "x"),
        TypeError,
    ),
    Case(
        "MPI.IN_PLACE without recvcounts",
        "Reduce_scatter",
        lambda s, r: (MPI.IN_PLACE, np.zeros(s)),
        TypeError,
    ),
    Case(
        "root a string",
        "Bcast",
        lambda s, r: (np.zeros(3), "0"),
        TypeError,
        forms=ALL_FORMS,
    ),
    Case("root None", "Bcast", lambda s, r: (np.zeros(3), None), TypeError),
    Case(
        "operator a string",
        "Allreduce",
        lambda s, r: (np.ones(2), np.zeros(2), "nosuchop"),
        TypeError,
    ),
    Case(
        "operator an object",
        "Allreduce",
        lambda s, r: (np.ones(2), np.zeros(2), object()),
        TypeError,
        forms=ALL_FORMS,
    ),
    # ------------------------------------------------ ValueError
    Case(
        "five items",
        "Bcast",
        lambda s, r: ([np.zeros(2), 1, 0, MPI.DOUBLE, 5], 0),
        ValueError,
    ),
    Case(
        "send and receive counts differ",
        "Allreduce",
        lambda s, r: ([np.ones(4), 3, MPI.DOUBLE], np.zeros(4)),
        ValueError,
        forms=ALL_FORMS,
    ),
    Case(
        "send and receive types differ",
        "Allreduce",
        lambda s, r: (np.ones(2), np.zeros(2, np.int64)),
        ValueError,
    ),
    Case(
        "negative count",
        "Bcast",
        lambda s, r: ([np.zeros(2), -1, MPI.DOUBLE], 0),
        ValueError,
    ),
    Case(
        "negative displacement",
        "Bcast",
        lambda s, r: ([np.zeros(2), (1, -1), MPI.DOUBLE], 0),
        ValueError,
    ),
    Case(
        "displacement beyond the buffer",
        "Bcast",
        lambda s, r: ([np.zeros(2), (1, 5), MPI.DOUBLE], 0),
        ValueError,
    ),
    Case(
        "(count, displacement) of three",
        "Bcast",
        lambda s, r: ([np.zeros(2), (1, 2, 3), MPI.DOUBLE], 0),
        ValueError,
    ),
    Case(
        "bytes not a multiple of the datatype",
        "Bcast",
        lambda s, r: ([bytearray(7), MPI.INT], 0),
        ValueError,
    ),
    Case(
        "MPI.DATATYPE_NULL",
        "Bcast",
        lambda s, r: ([np.zeros(2), MPI.DATATYPE_NULL], 0),
        ValueError,
    ),
    Case(
        "recvbuf MPI.IN_PLACE",
        "Allreduce",
        lambda s, r: (np.ones(2), MPI.IN_PLACE),
        ValueError,
    ),
    Case(
        "counts of the wrong length (v)",
        "Allgatherv",
        lambda s, r: (np.ones(1), [np.zeros(s + 1), [1] * (s + 1)]),
        ValueError,
        forms=ALL_FORMS,
    ),
    Case(
        "displacements of the wrong length (v)",
        "Alltoallv",
        lambda s, r: (
            [np.ones(s), [1] * s, [0] * (s + 1), MPI.DOUBLE],
            [np.zeros(s), [1] * s],
        ),
        ValueError,
    ),
    Case(
        "recvcounts of the wrong length",
        "Reduce_scatter",
        lambda s, r: (np.ones(s), np.zeros(1), [1] * (s + 1)),
        ValueError,
    ),
    Case(
        "recvcounts that do not add up to sendbuf",
        "Reduce_scatter",
        lambda s, r: (np.ones(s + 1), np.zeros(1), [1] * s),
        ValueError,
    ),
    Case(
        "negative recvcounts",
        "Reduce_scatter",
        lambda s, r: (np.ones(s), np.zeros(1), [-1] * s),
        ValueError,
    ),
    Case(
        "Reduce_scatter_block block sizes differ",
        "Reduce_scatter_block",
        lambda s, r: (np.ones(3 * s), np.zeros(2)),
        ValueError,
    ),
    # ------------------------------------------------ MPI.Exception: the library's
    Case(
        "aliased Allreduce",
        "Allreduce",
        _aliased("Allreduce", 2),
        MPI.Exception,
        "ERR_BUFFER",
        forms=ALL_FORMS,
    ),
    *[
        Case(f"aliased {m}", m, _aliased(m, 2), MPI.Exception, "ERR_BUFFER", libs=MPICH)
        for m in ("Scan", "Exscan", "Alltoall", "Reduce_scatter_block", "Reduce_scatter")
    ],
    Case(
        "aliased Reduce",
        "Reduce",
        _aliased("Reduce", 2),
        MPI.Exception,
        "ERR_BUFFER",
        ref="self",
    ),
    # MPICH compares the send buffer with this rank's own block of the receive
    # buffer: only the rank whose block starts the buffer would raise
    *[
        Case(
            f"aliased {m}",
            m,
            _aliased(m, 2),
            MPI.Exception,
            "ERR_BUFFER",
            ref="self",
            libs=MPICH,
        )
        for m in ("Allgather", "Allgatherv", "Gather", "Scatter", "Gatherv", "Scatterv")
    ],
    # MPICH aborts in the copy of its own process's block
    Case(
        "aliased Alltoallv",
        "Alltoallv",
        _aliased("Alltoallv", 2),
        MPI.Exception,
        "ERR_BUFFER",
        ref=None,
    ),
    Case(
        "root out of range",
        "Bcast",
        lambda s, r: (np.zeros(3), s),
        MPI.Exception,
        "ERR_ROOT",
        forms=ALL_FORMS,
    ),
    Case(
        "negative root",
        "Bcast",
        lambda s, r: (np.zeros(3), -1),
        MPI.Exception,
        "ERR_ROOT",
    ),
    Case(
        "numpy root out of range",
        "Bcast",
        lambda s, r: (np.zeros(3), np.int64(s)),
        MPI.Exception,
        "ERR_ROOT",
    ),
    Case(
        "Reduce root out of range",
        "Reduce",
        lambda s, r: (np.ones(1), np.zeros(1), MPI.SUM, s),
        MPI.Exception,
        "ERR_ROOT",
    ),
    Case(
        "Gather root out of range",
        "Gather",
        lambda s, r: (np.ones(1), np.zeros(s), s),
        MPI.Exception,
        "ERR_ROOT",
    ),
    Case(
        "Scatterv negative root",
        "Scatterv",
        lambda s, r: (None, np.zeros(1), -1),
        MPI.Exception,
        "ERR_ROOT",
    ),
    Case(
        "MAX on complex",
        "Allreduce",
        lambda s, r: (np.ones(2, complex), np.zeros(2, complex), MPI.MAX),
        MPI.Exception,
        "ERR_OP",
        forms=ALL_FORMS,
    ),
    Case(
        "BAND on floats",
        "Allreduce",
        lambda s, r: (np.ones(2), np.zeros(2), MPI.BAND),
        MPI.Exception,
        "ERR_OP",
    ),
    Case(
        "MAXLOC without pairs",
        "Allreduce",
        lambda s, r: (np.ones(2), np.zeros(2), MPI.MAXLOC),
        MPI.Exception,
        "ERR_OP",
        forms=ALL_FORMS,
    ),
    Case(
        "Scan MAX on complex",
        "Scan",
        lambda s, r: (np.ones(2, complex), np.zeros(2, complex), MPI.MAX),
        MPI.Exception,
        "ERR_OP",
    ),
    Case(
        "Reduce_scatter_block BAND on floats",
        "Reduce_scatter_block",
        lambda s, r: (np.ones(s), np.zeros(1), MPI.BAND),
        MPI.Exception,
        "ERR_OP",
    ),
    Case(
        "MPI.REPLACE in a reduction",
        "Allreduce",
        lambda s, r: (np.ones(2), np.zeros(2), MPI.REPLACE),
        MPI.Exception,
        "ERR_OP",
    ),
    Case(
        "MPI.NO_OP in a reduction",
        "Allreduce",
        lambda s, r: (np.ones(2), np.zeros(2), MPI.NO_OP),
        MPI.Exception,
        "ERR_OP",
    ),
    Case(
        "predefined operator on a derived datatype",
        "Allreduce",
        lambda s, r: (lambda t: ([np.ones(4), 1, t], [np.zeros(4), 1, t], MPI.SUM))(
            _derived()
        ),
        MPI.Exception,
        "ERR_OP",
    ),
    Case(
        "uncommitted datatype",
        "Bcast",
        lambda s, r: ([np.zeros(2), 1, _derived(commit=False)], 0),
        MPI.Exception,
        "ERR_TYPE",
    ),
    # Open MPI crashes on negative vector counts
    Case(
        "negative counts (v)",
        "Allgatherv",
        lambda s, r: (np.ones(0), [np.zeros(s), [-1] * s]),
        MPI.Exception,
        "ERR_COUNT",
        libs=MPICH,
    ),
    Case(
        "negative Alltoallv counts",
        "Alltoallv",
        lambda s, r: ([np.ones(s), [-1] * s], [np.zeros(s), [-1] * s]),
        MPI.Exception,
        "ERR_COUNT",
        libs=MPICH,
    ),
    Case(
        "negative Gatherv counts at the root",
        "Gatherv",
        lambda s, r: (np.ones(0), [np.zeros(s), [-1] * s], 0),
        MPI.Exception,
        "ERR_COUNT",
        ref="self",
        libs=MPICH,
    ),
    Case(
        "negative Scatterv counts at the root",
        "Scatterv",
        lambda s, r: ([np.ones(s), [-1] * s], np.zeros(0), 0),
        MPI.Exception,
        "ERR_COUNT",
        ref="self",
        libs=MPICH,
    ),
]

#: Runs that fail for a known reason outside the readers: ``(case, form) -> reason``.
KNOWN_FAILURES = {}  # (case, form): reason, for a case that fails for a known cause

RUNS = [
    pytest.param(
        case,
        form,
        id=f"{case.name} ({form})",
        marks=[pytest.mark.xfail(reason=KNOWN_FAILURES[case.name, form], strict=True)]
        if (case.name, form) in KNOWN_FAILURES
        else [],
    )
    for case in CASES
    for form in case.forms
]


def _method(case, form):
    if form == "non-blocking":
        return "I" + case.method[0].lower() + case.method[1:]
    if form == "persistent":
        return case.method + "_init"
    return case.method


def _call(comm, case, form, size, rank):
    """Run the case on ``comm`` in ``form``; the exception raised, or None."""
    try:
        out = getattr(comm, _method(case, form))(*case.args(size, rank), **case.kwargs)
        if form == "non-blocking":
            out.Wait()
        elif form == "persistent":
            out.Start()
            out.Wait()
            out.Free()
    except Exception as exc:  # noqa: BLE001 -- compared below
        return exc
    return None


_COMMS = {}


def _wacoll_comm(mpi, layout):
    """A cached wacoll communicator: the default one, or one over several clusters."""
    comm = _COMMS.get(layout)
    if comm is None:
        comm = (
            wacoll.Comm(W)
            if layout == "default"
            else wacoll.Comm(W, mpi.topology(layout))
        )
        _COMMS[layout] = comm
    return comm


def _describe(exc):
    if exc is None:
        return "no exception"
    extra = (
        f", error class {exc.Get_error_class()}" if isinstance(exc, MPI.Exception) else ""
    )
    return f"{type(exc).__name__}({str(exc)[:120]!r}{extra})"


def _problems(case, got, ref, ref_ran):
    """What is wrong with wacoll's ``got`` on this rank (mpi4py's ``ref``)."""
    problems = []
    if not isinstance(got, WacollError):
        problems.append(f"wacoll raised {_describe(got)}, not a WacollError")
    if not isinstance(got, case.expect):
        problems.append(f"wacoll's {_describe(got)} is not a {case.expect.__name__}")
    if ref_ran:
        if ref is None:
            problems.append(
                f"mpi4py raised nothing (the table expects {case.expect.__name__})"
            )
        elif not isinstance(ref, case.expect):
            problems.append(
                f"mpi4py raised {_describe(ref)}, the table says {case.expect.__name__}"
            )
        elif got is not None and not isinstance(got, type(ref)):
            problems.append(
                f"wacoll's {_describe(got)} is not a {type(ref).__name__} "
                f"like mpi4py's {_describe(ref)}"
            )
    if case.error_class is not None and isinstance(got, MPI.Exception):
        want = getattr(MPI, case.error_class)
        if got.Get_error_class() != want:
            problems.append(
                f"wacoll's error class {got.Get_error_class()}, expected "
                f"MPI.{case.error_class} ({want})"
            )
        if ref_ran and isinstance(ref, MPI.Exception):
            known = KNOWN_CLASSES.get((case.name, LIB))
            lib = getattr(MPI, known) if known else got.Get_error_class()
            if ref.Get_error_class() != lib:
                problems.append(
                    f"the library's error class {ref.Get_error_class()}, "
                    f"wacoll's {got.Get_error_class()}"
                )
    return problems


def _reference(case, form):
    """mpi4py's exception for the case (collective on the ranks that run it), and
    whether it ran."""
    if case.ref is None or LIB not in case.libs:
        return None, False
    if case.ref == "world":
        comm = W.Dup()
        size, rank = P, ME
    else:
        comm = MPI.COMM_SELF.Dup()
        size, rank = 1, 0
    try:
        comm.Set_errhandler(MPI.ERRORS_RETURN)
        return _call(comm, case, form, size, rank), True
    finally:
        comm.Free()


@pytest.fixture(scope="module", autouse=True)
def _free_at_the_end():
    yield
    for comm in _COMMS.values():
        comm.Free()
    _COMMS.clear()
    while _TYPES:
        _TYPES.pop().Free()


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("case, form", RUNS)
def test_wacoll_error_is_mpi4py_class(mpi, case, form):
    ref, ref_ran = _reference(case, form)
    layouts = ["default"] + mpi.multi[:1]
    report = []
    for layout in layouts:
        if form == "non-blocking":  # a failed one leaves its communicator unusable
            comm = (
                wacoll.Comm(W)
                if layout == "default"
                else wacoll.Comm(W, mpi.topology(layout))
            )
        else:
            comm = _wacoll_comm(mpi, layout)
        try:
            got = _call(comm, case, form, P, ME)
        finally:
            if form == "non-blocking":
                comm.Free()
        problems = _problems(case, got, ref, ref_ran)
        everyone = W.allgather((type(got).__name__, str(got), problems))
        for r, (_, _, mine) in enumerate(everyone):
            report += [f"{layout}, rank {r}: {p}" for p in mine]
        if len({(n, m) for n, m, _ in everyone}) > 1:
            report.append(
                f"{layout}: the ranks raised different errors: "
                + "; ".join(
                    f"rank {r}: {n}({m[:80]!r})" for r, (n, m, _) in enumerate(everyone)
                )
            )
    assert not report, f"{case.name} ({form}):\n" + "\n".join(report[:8])


@pytest.mark.mpi(min_size=1)
def test_mpi_error_class_survives_the_agreement(mpi):
    """An MPIError that names its own MPI error class (a datatype the library
    refused: ERR_TYPE) keeps it on the ranks that rebuild it from the faulty rank's
    report, and the error classes travel between ranks by name."""
    from wacoll import errors
    from wacoll.mpi.agreement import portable_error, rebuild_error

    exc = errors.MPIError("refused", MPI.ERR_TYPE)
    again = rebuild_error(0, portable_error(exc))
    assert type(again) is errors.MPIError
    assert again.Get_error_class() == MPI.ERR_TYPE
    assert str(again) == "rank 0: refused"
    for name in (
        "BufferAliasError",
        "RootError",
        "CountError",
        "UndefinedOperatorError",
        "BufferAccessError",
        "RootTypeError",
        "OperatorTypeError",
    ):
        cls = getattr(errors, name)
        again = rebuild_error(1, portable_error(cls("bad")))
        assert type(again) is cls and str(again) == "rank 1: bad"
        if isinstance(again, MPI.Exception):
            assert again.Get_error_class() == cls.mpi_error_class
