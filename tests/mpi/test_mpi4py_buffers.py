"""wacoll.Comm against the MPI library on mpi4py's buffer specifications and datatypes.

Every case builds the same inputs twice, runs the collective once on a wacoll
communicator and once on the plain mpi4py one (the MPI library's own collective),
and compares the receive buffers bit for bit on every rank. Buffer forms: plain
arrays, ``[buf, datatype]``, ``[buf, count, datatype]``, ``[buf, (count, displ),
datatype]``, type codes, ``array.array``, raw bytes sent as ``MPI.INT``, objects that
only expose DLPack or ``__array_interface__``; vector forms with integer counts and
strides; datatypes: long double, long double complex, bool, the MINLOC/MAXLOC pairs
and derived datatypes.
"""

from __future__ import annotations

import array

import numpy as np
import pytest
from mpi4py import MPI
from mpi4py.util import dtlib

import wacoll
from wacoll.errors import BufferTypeError

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
ME = WORLD.Get_rank()
LAYOUT = "contiguous"


def _comm(mpi):
    layout = LAYOUT if LAYOUT in mpi.layouts else "single"
    return mpi.comm(layout)


def _compare(mpi, run, what):
    """Run ``run(comm)`` on wacoll's and the plain communicator; compare outputs."""
    got, exc = mpi.outcome(lambda: run(_comm(mpi)))
    mpi.assert_all(exc is None, f"{what}: wacoll raised {type(exc).__name__}: {exc}")
    want = run(WORLD)
    ok, detail = True, ""
    for g, w in zip(got, want):
        if not _same_values(np.asarray(g), np.asarray(w)):
            ok, detail = False, f"got {np.asarray(g)!r}, want {np.asarray(w)!r}"
    mpi.assert_all(ok, f"{what}: {detail}")


def _raises(mpi, fn, exc_type, what):
    """Collective: ``fn()`` raises ``exc_type`` on every rank (any message)."""
    _, exc = mpi.outcome(fn)
    mpi.assert_all(isinstance(exc, exc_type), f"{what}: raised {exc!r}")


def _same_values(g, w):
    """Equal values (long double padding bytes are undefined: compare values)."""
    if g.dtype != w.dtype or g.shape != w.shape:
        return False
    if g.dtype.names:
        return all(_same_values(g[n], w[n]) for n in g.dtype.names)
    long_double = (g.dtype.kind == "f" and g.dtype.itemsize > 8) or (
        g.dtype.kind == "c" and g.dtype.itemsize > 16
    )
    if long_double:
        return bool(np.array_equal(g, w, equal_nan=True))
    return g.tobytes() == w.tobytes()


def _values(n, dtype, seed=0, rank=ME):
    dtype = np.dtype(dtype)
    i = np.arange(n)
    base = (rank + 1) * 3 + i * 7 + seed
    if dtype.names:  # (value, index) pairs: values repeat, so ties occur
        out = np.zeros(n, dtype)
        out[dtype.names[0]] = (base % 5).astype(dtype.fields[dtype.names[0]][0])
        out[dtype.names[1]] = rank
        return out
    if dtype.kind == "b":
        return base % 3 == 0
    if dtype.kind == "c":
        return ((base % 11) - 5 + 1j * (base % 3)).astype(dtype)
    return (
        ((base % 11) - 5).astype(dtype)
        if dtype.kind in "if"
        else (base % 200).astype(dtype)
    )


class _DLPackOnly:
    """An object that exposes its memory through DLPack only."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kwargs):
        return self._arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


class _InterfaceOnly:
    """An object that exposes its memory through ``__array_interface__`` only."""

    def __init__(self, arr):
        self._arr = arr
        self.__array_interface__ = arr.__array_interface__


FORMS = {
    "plain": lambda a, dt, blocks=1: a,
    "[buf, dt]": lambda a, dt, blocks=1: [a, dt],
    "[buf, count, dt]": lambda a, dt, blocks=1: [a, a.size // blocks, dt],
    "type code": lambda a, dt, blocks=1: [a, a.dtype.char],
    "dlpack": lambda a, dt, blocks=1: _DLPackOnly(a),
    "array interface": lambda a, dt, blocks=1: _InterfaceOnly(a),
}


def _wrapper(form, comm):
    """The form to use on ``comm``: mpi4py itself does not read objects that only
    have ``__array_interface__``, so the MPI library's run gets the plain array."""
    if form == "array interface" and comm is WORLD:
        return FORMS["plain"]
    return FORMS[form]


SIMPLE_TYPES = [
    "INT",
    "DOUBLE",
    "LONG_DOUBLE",
    "C_LONG_DOUBLE_COMPLEX",
    "C_BOOL",
    "SIGNED_CHAR",
    "FLOAT",
]


def _ops_for(name):
    if name == "C_BOOL":
        return [MPI.LOR, MPI.LXOR]
    if "COMPLEX" in name:
        return [MPI.SUM, MPI.PROD]
    return [MPI.SUM, MPI.MAX, MPI.MIN]


# ------------------------------------------------------------------ data movement
@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("tname", SIMPLE_TYPES)
def test_movement_forms(mpi, form, tname):
    dt = getattr(MPI, tname)
    dtype = dtlib.to_numpy_dtype(dt)
    if (
        form == "dlpack"
        and dtype.kind in "fc"
        and dtype.itemsize > 8 * (1 + (dtype.kind == "c"))
    ):
        pytest.skip("numpy exports no long double through DLPack")
    n = 3
    for root in sorted({0, P - 1}):

        def bcast(comm):
            wrap = _wrapper(form, comm)
            buf = _values(n, dtype, rank=root) if ME == root else np.zeros(n, dtype)
            comm.Bcast(wrap(buf, dt), root)
            return [buf]

        def gather(comm):
            wrap = _wrapper(form, comm)
            recv = np.zeros(n * P, dtype)
            comm.Gather(wrap(_values(n, dtype), dt), wrap(recv, dt, P), root)
            return [recv if ME == root else recv[:0]]

        def scatter(comm):
            wrap = _wrapper(form, comm)
            recv = np.zeros(n, dtype)
            comm.Scatter(wrap(_values(n * P, dtype), dt, P), wrap(recv, dt), root)
            return [recv]

        for run in (bcast, gather, scatter):
            _compare(mpi, run, f"{run.__name__} {form} {tname} root {root}")

    def allgather(comm):
        wrap = _wrapper(form, comm)
        recv = np.zeros(n * P, dtype)
        comm.Allgather(wrap(_values(n, dtype), dt), wrap(recv, dt, P))
        return [recv]

    def alltoall(comm):
        wrap = _wrapper(form, comm)
        recv = np.zeros(n * P, dtype)
        comm.Alltoall(wrap(_values(n * P, dtype), dt, P), wrap(recv, dt, P))
        return [recv]

    for run in (allgather, alltoall):
        _compare(mpi, run, f"{run.__name__} {form} {tname}")


@pytest.mark.mpi(min_size=1)
def test_count_per_rank_and_displacement(mpi):
    """``[buf, count, dt]`` in block collectives is a count per rank; a displacement
    counts extents; raw bytes may be sent as MPI.INT; array('i') is MPI.INT."""

    def gather(comm):
        recv = np.full(2 * P + 3, -1, "i")
        comm.Gather(
            [np.arange(5, dtype="i") + ME, (2, 1), MPI.INT], [recv, 2, MPI.INT], 0
        )
        return [recv if ME == 0 else recv[:0]]

    def allgather_bytes(comm):
        send = bytearray(np.array([ME, 7 * ME], "i").tobytes())
        recv = bytearray(8 * P)
        comm.Allgather([send, MPI.INT], [recv, MPI.INT])
        return [np.frombuffer(recv, np.uint8)]

    def alltoall_array(comm):
        send = array.array("i", range(ME, ME + P))
        recv = array.array("i", [0] * P)
        comm.Alltoall(send, recv)
        return [np.array(recv, "i")]

    for run in (gather, allgather_bytes, alltoall_array):
        _compare(mpi, run, run.__name__)


@pytest.mark.mpi(min_size=1)
def test_vector_forms(mpi):
    """Integer counts (the same for every rank), integer strides, ``(counts,
    displs)`` tuples, ``[buf, counts]`` and a plain buffer split as evenly as
    mpi4py splits it (the first ranks get one more)."""
    stride = 3

    def gatherv(comm):
        recv = np.full(stride * P, -1.0)
        comm.Gatherv(
            [np.arange(2.0) + ME, MPI.DOUBLE],
            [recv, 2, stride, MPI.DOUBLE] if ME == 0 else None,
            0,
        )
        return [recv if ME == 0 else recv[:0]]

    def scatterv(comm):
        recv = np.full(2, -1, "i")
        send = np.arange(stride * P, dtype="i")
        comm.Scatterv(
            [send, ([2] * P, list(range(0, stride * P, stride))), MPI.INT],
            [recv, MPI.INT],
            0,
        )
        return [recv]

    def allgatherv_even(comm):
        total = 2 * P + 1
        counts = [total // P + (total % P > r) for r in range(P)]
        recv = np.zeros(total, "i")
        comm.Allgatherv(np.full(counts[ME], ME, "i"), recv)
        return [recv]

    def alltoallv_counts(comm):
        recv = np.zeros(P, "d")
        comm.Alltoallv([np.arange(P, dtype="d") + 10 * ME, [1] * P], [recv, [1] * P])
        return [recv]

    for run in (gatherv, scatterv, allgatherv_even, alltoallv_counts):
        _compare(mpi, run, run.__name__)


# ------------------------------------------------------------------ reductions
@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("form", ["plain", "[buf, dt]", "dlpack"])
@pytest.mark.parametrize("tname", SIMPLE_TYPES)
def test_reduction_types(mpi, form, tname):
    dt = getattr(MPI, tname)
    dtype = dtlib.to_numpy_dtype(dt)
    wrap = FORMS[form]
    if (
        form == "dlpack"
        and dtype.kind in "fc"
        and dtype.itemsize > 8 * (1 + (dtype.kind == "c"))
    ):
        pytest.skip("numpy exports no long double through DLPack")
    n = 4
    for op in _ops_for(tname):

        def allreduce(comm):
            recv = np.zeros(n, dtype)
            comm.Allreduce(wrap(_values(n, dtype), dt), wrap(recv, dt), op=op)
            return [recv]

        def reduce(comm):
            recv = np.zeros(n, dtype)
            comm.Reduce(wrap(_values(n, dtype), dt), wrap(recv, dt), op=op, root=P - 1)
            return [recv if ME == P - 1 else recv[:0]]

        def scan(comm):
            recv = np.zeros(n, dtype)
            comm.Scan(wrap(_values(n, dtype), dt), wrap(recv, dt), op=op)
            return [recv]

        def reduce_scatter_block(comm):
            recv = np.zeros(2, dtype)
            comm.Reduce_scatter_block(
                wrap(_values(2 * P, dtype), dt, P), wrap(recv, dt), op=op
            )
            return [recv]

        for run in (allreduce, reduce, scan, reduce_scatter_block):
            _compare(mpi, run, f"{run.__name__} {form} {tname} {op}")


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize(
    "pair",
    ["FLOAT_INT", "DOUBLE_INT", "LONG_INT", "TWOINT", "SHORT_INT", "LONG_DOUBLE_INT"],
)
def test_minloc_maxloc(mpi, pair):
    """MINLOC/MAXLOC on MPI's pair types, ties resolved to the lower index."""
    dt = getattr(MPI, pair)
    dtype = dtlib.to_numpy_dtype(dt)
    for op in (MPI.MINLOC, MPI.MAXLOC):

        def allreduce(comm):
            recv = np.zeros(5, dtype)
            comm.Allreduce([_values(5, dtype), dt], [recv, dt], op=op)
            return [recv]

        def reduce_in_place(comm):
            buf = _values(5, dtype)
            comm.Reduce(MPI.IN_PLACE if ME == 0 else [buf, dt], [buf, dt], op=op, root=0)
            return [buf if ME == 0 else buf[:0]]

        for run in (allreduce, reduce_in_place):
            _compare(mpi, run, f"{run.__name__} {pair} {op}")


# ------------------------------------------------------------------ derived types
def _derived_types():
    return {
        "contiguous": MPI.INT.Create_contiguous(3),
        "vector": MPI.DOUBLE.Create_vector(2, 1, 3),
        "indexed": MPI.INT.Create_indexed([1, 2], [0, 3]),
        "struct": MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]),
        "resized": MPI.INT.Create_contiguous(2).Create_resized(0, 12),
    }


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("kind", list(_derived_types()))
def test_derived_datatypes(mpi, kind):
    """Data moves through the type map: the bytes outside it are left alone."""
    dt = _derived_types()[kind].Commit()
    lb, extent = dt.Get_extent()
    count = 2

    def nbytes(k):
        return k * extent + 16

    def filled(k, seed):
        return np.frombuffer(
            (np.arange(nbytes(k)) * 13 + seed * 101 + ME * 7).astype(np.uint8).tobytes(),
            np.uint8,
        ).copy()

    def bcast(comm):
        buf = filled(count, 1 if ME == 0 else 2)
        comm.Bcast([buf, count, dt], 0)
        return [buf]

    def allgather(comm):
        recv = filled(count * P, 3)
        comm.Allgather([filled(count, 4), count, dt], [recv, count, dt])
        return [recv]

    def scatterv(comm):
        recv = filled(count, 5)
        comm.Scatterv([filled(count * P, 6), count, dt], [recv, count, dt], 0)
        return [recv]

    def allreduce_sum(comm):
        recv = filled(count, 7)
        comm.Allreduce([filled(count, 8), count, dt], [recv, count, dt], op=MPI.SUM)

    try:
        # MPI defines no predefined operator on a derived datatype: both refuse
        _raises(mpi, lambda: allreduce_sum(WORLD), MPI.Exception, "MPI's Allreduce")
        mpi.same_error(lambda: allreduce_sum(_comm(mpi)), MPI.Exception, match="derived")
        for run in (bcast, allgather, scatterv):
            _compare(mpi, run, f"{run.__name__} {kind}")
    finally:
        dt.Free()


@pytest.mark.mpi(min_size=1)
def test_derived_send_side(mpi):
    """A derived send type needs no staging on the receive side: its data is packed
    in MPI's order and received as the predefined type of the same signature."""
    dt = MPI.INT.Create_vector(3, 1, 2).Commit()
    try:

        def gather(comm):
            recv = np.zeros(3 * P, "i")
            comm.Gather([np.arange(6, dtype="i") + 10 * ME, 1, dt], [recv, MPI.INT], 0)
            return [recv if ME == 0 else recv[:0]]

        def allreduce(comm):
            recv = np.zeros(6, "i")
            comm.Allreduce(
                [np.arange(6, dtype="i") + ME, 1, dt], [recv, 1, dt], op=MPI.SUM
            )

        _compare(mpi, gather, "gather from a vector type")
        # a predefined operator on a derived type: MPI_ERR_OP, like the library
        _raises(mpi, lambda: allreduce(WORLD), MPI.Exception, "MPI's Allreduce")
        mpi.same_error(lambda: allreduce(_comm(mpi)), MPI.Exception)
    finally:
        dt.Free()


# ------------------------------------------------------------------ errors
@pytest.mark.mpi(min_size=1)
def test_errors_like_mpi4py(mpi):
    """Where mpi4py raises, wacoll raises an error of the same Python class."""
    comm = _comm(mpi)
    recv = np.zeros(4)
    # not a buffer: TypeError
    mpi.same_error(lambda: comm.Allreduce(object(), recv), TypeError)
    mpi.same_error(lambda: comm.Allreduce(object(), recv), BufferTypeError)
    # an unknown type code: KeyError
    mpi.same_error(lambda: comm.Bcast([recv, "?x"], 0), KeyError)
    # send and receive counts differ: ValueError
    mpi.same_error(
        lambda: comm.Allreduce([np.ones(4), 3, MPI.DOUBLE], recv),
        ValueError,
        match="count",
    )
    # five items: ValueError
    mpi.same_error(lambda: comm.Bcast([recv, 1, 0, MPI.DOUBLE, 5], 0), ValueError)
    # an operator MPI does not define for the type: MPI.Exception (MPI_ERR_OP)
    mpi.same_error(
        lambda: comm.Allreduce(np.ones(2, complex), np.ones(2, complex), op=MPI.MAX),
        MPI.Exception,
        match="MAX",
    )
    mpi.same_error(
        lambda: comm.Allreduce(np.ones(2, complex), np.ones(2, complex), op=MPI.MAX),
        wacoll.WacollError,
    )
