"""A collective call's arguments read into one typed object, per operation.

Each reader takes this rank's place (``rank``, ``size``) and the mpi4py arguments of
one collective, checks them as far as this rank can, and returns a :class:`Prepared`:
the operation, its counts, the numpy views of the user's buffers and where each
block sits in them. What only the ranks together can check (the v-variants' counts)
travels as ``Prepared.vector_info`` to :mod:`wacoll.mpi.agreement`. A reader raises a
:class:`~wacoll.errors.WacollError` for a fault in this rank's own arguments.

Examples
--------
>>> import numpy as np
>>> p = bcast(Place(0, 2), np.zeros(4), 0)
>>> p.op, p.count, p.dtype.str
('bcast', 4, '<f8')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from wacoll import _kernels
from wacoll.errors import BufferMismatchError, WacollError
from wacoll.mpi.buffers import parse_buffer, parse_vbuffer
from wacoll.plans.operations import LEVELS

__all__ = [
    "Place", "Prepared", "barrier", "bcast", "scatter", "scatterv", "gather", "gatherv",
    "allgather", "allgatherv", "alltoall", "alltoallv", "reduce", "allreduce", "scan",
    "exscan", "reduce_scatter_block", "reduce_scatter", "operator_name", "EXACT_OPS",
]

#: Predefined operators whose results are the same bits in any order, on any type.
EXACT_OPS = ("MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR")
_PREDEFINED = ("SUM", "PROD") + EXACT_OPS


class Place(NamedTuple):
    """This rank's place in the communicator."""

    rank: int
    size: int


@dataclass
class Prepared:
    """One rank's view of a call, ready to run once all ranks agree.

    Attributes
    ----------
    op : str
        The operation.
    root, count, counts, dtype
        What chooses the plan (``counts`` is filled in by the agreement for the
        v-variants, from every rank's ``vector_info``).
    inbuf, outbuf : numpy.ndarray or None
        1-D views of the user's buffers.
    in_offsets, out_offsets : dict or None
        Where each block sits in them (None: packed in block order).
    reduce_op : mpi4py.MPI.Op or None
    level : str or None
        The reduction level the plan must keep.
    vector_info : object
        What the v-variants exchange to check their counts across ranks.
    """

    op: str
    root: int | None = None
    count: int | None = None
    counts: tuple | None = None
    dtype: np.dtype | None = None
    inbuf: np.ndarray | None = None
    outbuf: np.ndarray | None = None
    in_offsets: dict | None = None
    out_offsets: dict | None = None
    reduce_op: object = None
    level: str | None = None
    vector_info: object = None


def _mpi():
    from mpi4py import MPI

    return MPI


def _in_place(buf):
    return buf is None or buf is _mpi().IN_PLACE


def check_root(place, root):
    """Raise unless ``root`` is a rank of the communicator."""
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not (
            0 <= root < place.size):
        raise WacollError(f"root {root!r} is not a rank of 0..{place.size - 1}")
    return int(root)


def _writable(view, role):
    if not view.flags.writeable:
        raise BufferMismatchError(f"{role} is read-only")
    return view


def _need(have, want, role):
    if have != want:
        raise BufferMismatchError(f"{role} has {have} elements; {want} are needed")


def _split(total, parts, role):
    if total % parts:
        raise BufferMismatchError(f"{role} has {total} elements, not a multiple of "
                                  f"{parts} ranks")
    return total // parts


def _same_dtype(a, b):
    if a.dtype != b.dtype:
        raise BufferMismatchError(f"sendbuf holds {a.dtype} but recvbuf holds {b.dtype}")


def _out(spec, role="recvbuf"):
    view, count = parse_buffer(spec, role)
    return _writable(view, role), count


# ------------------------------------------------------------------ data movement
def barrier(place):
    return Prepared("barrier")


def bcast(place, buf, root=0):
    root = check_root(place, root)
    view, count = parse_buffer(buf, "buf")
    if place.rank != root:
        _writable(view, "buf")
    return Prepared("bcast", root=root, count=count, dtype=view.dtype, outbuf=view)


def scatter(place, sendbuf, recvbuf, root=0):
    root = check_root(place, root)
    inbuf = None
    if place.rank == root and _in_place(recvbuf):
        inbuf, total = parse_buffer(sendbuf, "sendbuf")
        count = _split(total, place.size, "sendbuf")
        out = np.empty(count, inbuf.dtype)
    else:
        out, count = _out(recvbuf)
        if place.rank == root:
            inbuf, total = parse_buffer(sendbuf, "sendbuf")
            _need(total, count * place.size, "sendbuf")
            _same_dtype(inbuf, out)
    return Prepared("scatter", root=root, count=count, dtype=out.dtype, inbuf=inbuf,
                    outbuf=out)


def scatterv(place, sendbuf, recvbuf, root=0):
    root = check_root(place, root)
    inbuf = offsets = counts = None
    if place.rank == root:
        vb = parse_vbuffer(sendbuf, place.size, "sendbuf")
        inbuf, counts = vb.view, vb.counts
        offsets = dict(enumerate(vb.displs))
    if place.rank == root and _in_place(recvbuf):
        out = np.empty(counts[root], inbuf.dtype)
    else:
        out, _ = _out(recvbuf)
        if inbuf is not None:
            _same_dtype(inbuf, out)
    return Prepared("scatterv", root=root, dtype=out.dtype, inbuf=inbuf, outbuf=out,
                    in_offsets=offsets, vector_info=(out.size, counts))


def gather(place, sendbuf, recvbuf, root=0):
    root = check_root(place, root)
    out = None
    if place.rank == root:
        out, total = _out(recvbuf)
    if place.rank == root and _in_place(sendbuf):
        count = _split(total, place.size, "recvbuf")
        inbuf = out[root * count:(root + 1) * count].copy()
    else:
        inbuf, count = parse_buffer(sendbuf, "sendbuf")
        if out is not None:
            _need(total, count * place.size, "recvbuf")
            _same_dtype(inbuf, out)
    return Prepared("gather", root=root, count=count, dtype=inbuf.dtype, inbuf=inbuf,
                    outbuf=out)


def gatherv(place, sendbuf, recvbuf, root=0):
    root = check_root(place, root)
    out = offsets = counts = None
    if place.rank == root:
        vb = parse_vbuffer(recvbuf, place.size, "recvbuf")
        out, counts = _writable(vb.view, "recvbuf"), vb.counts
        offsets = dict(enumerate(vb.displs))
    if place.rank == root and _in_place(sendbuf):
        d = offsets[root]
        inbuf = out[d:d + counts[root]].copy()
    else:
        inbuf, _ = parse_buffer(sendbuf, "sendbuf")
        if out is not None:
            _same_dtype(inbuf, out)
    return Prepared("gatherv", root=root, dtype=inbuf.dtype, inbuf=inbuf, outbuf=out,
                    out_offsets=offsets, vector_info=(inbuf.size, counts))


def allgather(place, sendbuf, recvbuf):
    out, total = _out(recvbuf)
    if _in_place(sendbuf):
        count = _split(total, place.size, "recvbuf")
        inbuf = out[place.rank * count:(place.rank + 1) * count].copy()
    else:
        inbuf, count = parse_buffer(sendbuf, "sendbuf")
        _need(total, count * place.size, "recvbuf")
        _same_dtype(inbuf, out)
    return Prepared("allgather", count=count, dtype=out.dtype, inbuf=inbuf, outbuf=out)


def allgatherv(place, sendbuf, recvbuf):
    vb = parse_vbuffer(recvbuf, place.size, "recvbuf")
    out = _writable(vb.view, "recvbuf")
    if _in_place(sendbuf):
        d = vb.displs[place.rank]
        inbuf = out[d:d + vb.counts[place.rank]].copy()
    else:
        inbuf, _ = parse_buffer(sendbuf, "sendbuf")
        _same_dtype(inbuf, out)
    if inbuf.size != vb.counts[place.rank]:
        raise BufferMismatchError(f"sendbuf has {inbuf.size} elements; recvcounts says "
                                  f"{vb.counts[place.rank]} for this rank")
    return Prepared("allgatherv", dtype=out.dtype, inbuf=inbuf, outbuf=out,
                    out_offsets=dict(enumerate(vb.displs)), counts=vb.counts,
                    vector_info=vb.counts)


def alltoall(place, sendbuf, recvbuf):
    out, total = _out(recvbuf)
    count = _split(total, place.size, "recvbuf")
    if _in_place(sendbuf):
        inbuf = out.copy()
    else:
        inbuf, stotal = parse_buffer(sendbuf, "sendbuf")
        _need(stotal, total, "sendbuf")
        _same_dtype(inbuf, out)
    return Prepared("alltoall", count=count, dtype=out.dtype, inbuf=inbuf, outbuf=out)


def alltoallv(place, sendbuf, recvbuf):
    P, me = place.size, place.rank
    rv = parse_vbuffer(recvbuf, P, "recvbuf")
    _writable(rv.view, "recvbuf")
    if _in_place(sendbuf):
        sview, scounts, sdispls = rv.view.copy(), rv.counts, rv.displs
    else:
        sv = parse_vbuffer(sendbuf, P, "sendbuf")
        _same_dtype(sv.view, rv.view)
        sview, scounts, sdispls = sv.view, sv.counts, sv.displs
    return Prepared("alltoallv", dtype=rv.view.dtype, inbuf=sview, outbuf=rv.view,
                    in_offsets={me * P + j: sdispls[j] for j in range(P)},
                    out_offsets={j * P + me: rv.displs[j] for j in range(P)},
                    vector_info=(scounts, rv.counts))


# ------------------------------------------------------------------ reductions
def operator_name(op):
    """The name of a predefined MPI operator, ``"user-defined"``, or None.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> operator_name(MPI.MAX), operator_name("sum"), operator_name(None)
    ('MAX', 'SUM', None)
    """
    if op is None:
        return None
    if isinstance(op, str):
        return op.upper()
    MPI = _mpi()
    for name in _PREDEFINED:
        if op == getattr(MPI, name):
            return name
    return "user-defined"


def _exact(op, dtype):
    """Whether ``op`` gives the same bits in any order on ``dtype``."""
    name = operator_name(op)
    return name in EXACT_OPS or (name in ("SUM", "PROD") and dtype.kind in "biu")


def _reduction_parts(op_name, inbuf, out, op, level, default_level):
    op = _mpi().SUM if op is None else op
    _kernels.check_op(op, inbuf.dtype)
    level = default_level if level is None else level
    commutes = _kernels.is_commutative(op)
    if level is None:  # MPI's own promise: any grouping, any order if it commutes
        level = "commutative" if commutes else "associative"
    if level not in LEVELS:
        raise WacollError(f"level must be one of {LEVELS}, got {level!r}")
    if level == "commutative" and not commutes:
        raise WacollError("level 'commutative' asserted for an operator that is not "
                          "commutative")
    if commutes and _exact(op, inbuf.dtype):
        level = "commutative"
    return Prepared(op_name, dtype=inbuf.dtype, inbuf=inbuf, outbuf=out, reduce_op=op,
                    level=level)


def _vector_reduction(op_name, place, sendbuf, recvbuf, op, level, default_level,
                      root=None):
    out = None
    if op_name != "reduce" or place.rank == root:
        out, ocount = _out(recvbuf)
    if _in_place(sendbuf):
        if out is None:
            raise BufferMismatchError("MPI.IN_PLACE is for the root's sendbuf only")
        inbuf = out.copy()
    else:
        inbuf, _ = parse_buffer(sendbuf, "sendbuf")
        if out is not None:
            _need(ocount, inbuf.size, "recvbuf")
            _same_dtype(inbuf, out)
            out = out[:inbuf.size]
    prepared = _reduction_parts(op_name, inbuf, out, op, level, default_level)
    prepared.root = root
    prepared.count = inbuf.size
    return prepared


def reduce(place, sendbuf, recvbuf, op=None, root=0, *, level=None,
           default_level=None):
    root = check_root(place, root)
    return _vector_reduction("reduce", place, sendbuf, recvbuf, op, level, default_level,
                             root)


def allreduce(place, sendbuf, recvbuf, op=None, *, level=None, default_level=None):
    return _vector_reduction("allreduce", place, sendbuf, recvbuf, op, level,
                             default_level)


def scan(place, sendbuf, recvbuf, op=None, *, level=None, default_level=None):
    return _vector_reduction("scan", place, sendbuf, recvbuf, op, level, default_level)


def exscan(place, sendbuf, recvbuf, op=None, *, level=None, default_level=None):
    return _vector_reduction("exscan", place, sendbuf, recvbuf, op, level, default_level)


def reduce_scatter_block(place, sendbuf, recvbuf, op=None, *, level=None,
                         default_level=None):
    out, count = _out(recvbuf)
    if _in_place(sendbuf):
        count = _split(count, place.size, "recvbuf")
        inbuf = out.copy()
        out = out[:count]
    else:
        inbuf, total = parse_buffer(sendbuf, "sendbuf")
        _need(total, count * place.size, "sendbuf")
        _same_dtype(inbuf, out)
    prepared = _reduction_parts("reduce_scatter_block", inbuf, out, op, level,
                                default_level)
    prepared.count = count
    return prepared


def _recvcounts(values, size):
    if values is None:
        return None
    try:
        counts = tuple(values)
    except TypeError:
        raise BufferMismatchError(f"recvcounts must be a sequence of {size} counts, got "
                                  f"{values!r}") from None
    if len(counts) != size or any(
            isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 0
            for c in counts):
        raise BufferMismatchError(f"recvcounts needs {size} integer counts >= 0")
    return tuple(int(c) for c in counts)


def reduce_scatter(place, sendbuf, recvbuf, recvcounts=None, op=None, *, level=None,
                   default_level=None):
    out, _ = _out(recvbuf)
    counts = _recvcounts(recvcounts, place.size)
    if _in_place(sendbuf):
        inbuf = out.copy()
        if counts is None:
            raise BufferMismatchError("MPI.IN_PLACE needs recvcounts")
        out = out[:counts[place.rank]]
    else:
        inbuf, _ = parse_buffer(sendbuf, "sendbuf")
        _same_dtype(inbuf, out)
    prepared = _reduction_parts("reduce_scatter", inbuf, out, op, level, default_level)
    prepared.vector_info = (out.size if counts is None else counts[place.rank], counts,
                            inbuf.size)
    return prepared
