"""A collective call's arguments read into one typed object, per operation.

Each reader takes this rank's place (``rank``, ``size``) and the mpi4py arguments of
one collective, checks them as far as this rank can, and returns a :class:`Prepared`:
the operation, its counts, the numpy views of the user's buffers and where each
block sits in them. What only the ranks together can check (the v-variants' counts)
travels as ``Prepared.vector_info`` to :mod:`wacoll.mpi.agreement`. A reader raises a
:class:`~wacoll.errors.WacollError` for a fault in this rank's own arguments, of a
class that is also the one mpi4py (or the MPI library through it) raises for the
same fault (see :mod:`wacoll.errors`).

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

from wacoll import _kernels, errors
from wacoll._kernels import operator_name, repro
from wacoll.errors import (
    BufferAccessError,
    BufferMismatchError,
    BufferTypeError,
    OperatorError,
    RootTypeError,
    WacollError,
)
from wacoll.mpi.buffers import parse_buffer, parse_vbuffer, plan_dtype, plan_factor
from wacoll.mpi.datatypes import load_mpi
from wacoll.plans.operations import LEVELS

__all__ = [
    "Place",
    "Prepared",
    "barrier",
    "bcast",
    "scatter",
    "scatterv",
    "gather",
    "gatherv",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "reduce",
    "allreduce",
    "scan",
    "exscan",
    "reduce_scatter_block",
    "reduce_scatter",
    "EXACT_OPS",
]

#: Predefined operators whose results are the same bits in any order, on any type.
EXACT_OPS = (
    "MIN",
    "MAX",
    "LAND",
    "LOR",
    "LXOR",
    "BAND",
    "BOR",
    "BXOR",
    "MINLOC",
    "MAXLOC",
)


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
    finish : callable or None
        To call on this rank once the plan has run (derived datatypes: unpacks the
        staged ``outbuf`` into the user's receive buffer).
    accumulator_itemsize : int
        For a strict float SUM, the bytes of one element's exact accumulator: the
        selection policy may then run the call on reproducible arithmetic (the
        executor converts ``inbuf`` and ``outbuf``, :mod:`wacoll.mpi.accumulate`).
        0 otherwise.
    in_copy : tuple or None
        ``(start, n)`` when ``inbuf`` is a copy of ``outbuf[start:start + n]`` taken
        as the call was read (an in-place call): a repeated call takes the copy
        afresh (:class:`wacoll.mpi._runner.PlanCall`).
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
    finish: object = None
    accumulator_itemsize: int = 0
    in_copy: tuple | None = None


def validate_root(place, root):
    """Raise unless ``root`` is a rank of the communicator: a
    :class:`~wacoll.errors.RootTypeError` (a TypeError) for one that is not an
    integer, a :class:`~wacoll.errors.RootError` (``MPI.Exception``, ``ERR_ROOT``)
    for one out of range."""
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)):
        raise RootTypeError(
            f"root {root!r} is not an integer rank of 0..{place.size - 1}"
        )
    if not 0 <= root < place.size:
        raise errors.RootError(f"root {root!r} is not a rank of 0..{place.size - 1}")
    return int(root)


def _writable(view, role):
    if not view.flags.writeable:
        raise BufferAccessError(f"{role} is read-only")
    return view


def _need(have, want, role):
    if have != want:
        raise BufferMismatchError(f"{role} has {have} elements; {want} are needed")


def _split(total, parts, role):
    if total % parts:
        raise BufferMismatchError(
            f"{role} has {total} elements, not a multiple of {parts} ranks"
        )
    return total // parts


def _same_dtype(a, b):
    if a.dtype != b.dtype:
        raise BufferMismatchError(f"sendbuf holds {a.dtype} but recvbuf holds {b.dtype}")


# ------------------------------------------------------------------ buffers
def _in_place(buf):
    return buf is None or buf is load_mpi().IN_PLACE


class _Out:
    """Where a plan writes a receive buffer: the user's memory, or (derived
    datatypes) a packed staging array that ``Prepared.finish`` unpacks.

    The plans move whole numpy elements; MPI's pair types ``DOUBLE_INT``,
    ``LONG_INT``, ``SHORT_INT`` and ``LONG_DOUBLE_INT`` have padding between their
    fields that MPI never writes (``DOUBLE_INT``: 12 data bytes in 16): the padding
    of the receive buffer is kept as it was read and put back by
    ``Prepared.finish``."""

    def __init__(self):
        self.stores = []
        self.paddings = []

    def target(self, msg, start, n, role, keep=False):
        """Plan elements ``start .. start+n`` of ``msg`` to write into."""
        if msg.info.predefined:
            return self.keep_padding(msg.info, _writable(msg.typed(start, n, role), role))
        _writable(msg.raw, role)
        if keep:
            staged = np.ascontiguousarray(msg.typed(start, n, role))
        else:
            msg.validate_fits(start, n, role)
            staged = np.empty(n * plan_factor(msg.info), plan_dtype(msg.info))
        self.stores.append((msg, staged, start, n))
        return staged

    def keep_padding(self, info, view):
        """``view`` (elements of predefined ``info`` in the user's memory), its
        padding bytes kept for ``finish`` to put back (pair types only)."""
        if info.size < info.extent and info.dtype.names is not None and view.size:
            mask = _padding(info.dtype)
            raw = view.reshape(-1).view(np.uint8).reshape(-1, info.extent)
            self.paddings.append((raw, mask, raw[:, mask].copy()))
        return view

    def finish(self):
        if not self.stores and not self.paddings:
            return None
        stores, paddings = self.stores, self.paddings

        def finish():
            for msg, staged, start, n in stores:
                msg.store(staged, start, n)
            for raw, mask, saved in paddings:
                raw[:, mask] = saved

        return finish


def _padding(dtype):
    """The bytes of an element of structured ``dtype`` no field holds, as a mask."""
    mask = np.ones(dtype.itemsize, bool)
    for name in dtype.names or ():
        field, offset = dtype.fields[name][:2]
        mask[offset : offset + field.itemsize] = False
    return mask


def _elements(msg):
    """The message's count in plan elements."""
    return msg.count * plan_factor(msg.info)


def _apart(send, recv):
    """MPI forbids a send buffer that is the receive buffer (in place is
    ``MPI.IN_PLACE``). The library refuses it on the rank that passes it (MPICH:
    ``MPI_ERR_BUFFER``), and the other ranks would wait for that rank forever: say so
    on every rank instead, with :class:`~wacoll.errors.BufferAliasError` (an
    ``MPI.Exception``, as the library's)."""
    if (
        send.raw.size
        and recv.raw.size
        and send.raw.__array_interface__["data"][0]
        == recv.raw.__array_interface__["data"][0]
    ):
        raise errors.BufferAliasError(
            "sendbuf and recvbuf are the same memory, which "
            "MPI forbids; pass MPI.IN_PLACE as sendbuf to "
            "work in place"
        )


def _same_type(a, b, what="sendbuf and recvbuf"):
    """Both messages move the same plan element (MPI's type-signature rule)."""
    if plan_dtype(a.info) != plan_dtype(b.info):
        raise BufferMismatchError(
            f"{what} differ in type: sendbuf holds "
            f"{_describe(a.info)} but recvbuf holds "
            f"{_describe(b.info)}"
        )


def _vector_source(vb, role):
    """``(inbuf, offsets)`` of a vector send buffer, in plan elements."""
    msg, f = vb.message, plan_factor(vb.info)
    if msg.info.predefined:
        return msg.untyped_view(role), dict(enumerate(vb.displs))
    parts, offsets, at = [], {}, 0
    for r, (c, d) in enumerate(zip(vb.counts, vb.displs)):
        parts.append(msg.typed(d, c, role))
        offsets[r] = at
        at += c * f
    return (np.concatenate(parts) if parts else np.empty(0, plan_dtype(vb.info))), offsets


def _vector_target(vb, out, role):
    """``(outbuf, offsets)`` of a vector receive buffer, in plan elements."""
    msg, f = vb.message, plan_factor(vb.info)
    if msg.info.predefined:
        return out.keep_padding(msg.info, _writable(msg.untyped_view(role), role)), dict(
            enumerate(vb.displs)
        )
    total = sum(vb.counts) * f
    staged = np.empty(total, plan_dtype(vb.info))
    offsets, at = {}, 0
    _writable(msg.raw, role)
    for r, (c, d) in enumerate(zip(vb.counts, vb.displs)):
        offsets[r] = at
        out.stores.append((msg, staged[at : at + c * f], d, c))
        at += c * f
    return staged, offsets


def _scaled(counts, f):
    return None if counts is None else tuple(c * f for c in counts)


# ------------------------------------------------------------------ data movement
def barrier(place):
    return Prepared("barrier")


def bcast(place, buf, root=0):
    root = validate_root(place, root)
    out = _Out()
    msg = parse_buffer(buf, "buf", writable=place.rank != root)
    view = (
        msg.typed(role="buf")
        if place.rank == root
        else out.target(msg, 0, msg.count, "buf")
    )
    if place.rank == root and not msg.info.predefined:
        view = np.ascontiguousarray(view)
    return Prepared(
        "bcast",
        root=root,
        count=_elements(msg),
        dtype=view.dtype,
        outbuf=view,
        finish=out.finish(),
    )


def scatter(place, sendbuf, recvbuf, root=0):
    root = validate_root(place, root)
    out, inbuf = _Out(), None
    if place.rank == root:
        smsg = parse_buffer(sendbuf, "sendbuf", blocks=place.size)
        inbuf = smsg.typed(0, smsg.count * place.size, "sendbuf")
        count, dtype = _elements(smsg), plan_dtype(smsg.info)
    if place.rank == root and _in_place(recvbuf):
        outbuf = np.empty(count, dtype)
    else:
        rmsg = parse_buffer(recvbuf, "recvbuf", writable=True)
        if place.rank == root:
            _apart(smsg, rmsg)
            _same_type(smsg, rmsg)
            _need(_elements(rmsg), count, "recvbuf")
        outbuf = out.target(rmsg, 0, rmsg.count, "recvbuf")
        count = _elements(rmsg)
    return Prepared(
        "scatter",
        root=root,
        count=count,
        dtype=outbuf.dtype,
        inbuf=inbuf,
        outbuf=outbuf,
        finish=out.finish(),
    )


def scatterv(place, sendbuf, recvbuf, root=0):
    root = validate_root(place, root)
    out = _Out()
    inbuf = offsets = counts = None
    if place.rank == root:
        vb = parse_vbuffer(sendbuf, place.size, "sendbuf")
        inbuf, offsets = _vector_source(vb, "sendbuf")
        counts = _scaled(vb.counts, plan_factor(vb.info))
    if place.rank == root and _in_place(recvbuf):
        outbuf = np.empty(counts[root], inbuf.dtype)
    else:
        rmsg = parse_buffer(recvbuf, "recvbuf", writable=True)
        if place.rank == root:
            _apart(vb.message, rmsg)
            _same_type(vb.message, rmsg)
        outbuf = out.target(rmsg, 0, rmsg.count, "recvbuf")
    return Prepared(
        "scatterv",
        root=root,
        dtype=outbuf.dtype,
        inbuf=inbuf,
        outbuf=outbuf,
        in_offsets=offsets,
        vector_info=(outbuf.size, counts),
        finish=out.finish(),
    )


def gather(place, sendbuf, recvbuf, root=0):
    root = validate_root(place, root)
    out, outbuf = _Out(), None
    if place.rank == root:
        rmsg = parse_buffer(recvbuf, "recvbuf", blocks=place.size, writable=True)
        count = _elements(rmsg)
        outbuf = out.target(
            rmsg, 0, rmsg.count * place.size, "recvbuf", keep=_in_place(sendbuf)
        )
    in_copy = None
    if place.rank == root and _in_place(sendbuf):
        inbuf = outbuf[root * count : (root + 1) * count].copy()
        in_copy = (root * count, count)
    else:
        smsg = parse_buffer(sendbuf, "sendbuf")
        inbuf = smsg.typed(role="sendbuf")
        if place.rank == root:
            _apart(smsg, rmsg)
            _same_type(smsg, rmsg)
            _need(_elements(smsg), count, "sendbuf")
        count = _elements(smsg)
    return Prepared(
        "gather",
        root=root,
        count=count,
        dtype=inbuf.dtype,
        inbuf=inbuf,
        outbuf=outbuf,
        finish=out.finish(),
        in_copy=in_copy,
    )


def gatherv(place, sendbuf, recvbuf, root=0):
    root = validate_root(place, root)
    out = _Out()
    outbuf = offsets = counts = None
    if place.rank == root:
        vb = parse_vbuffer(recvbuf, place.size, "recvbuf", writable=True)
        outbuf, offsets = _vector_target(vb, out, "recvbuf")
        counts = _scaled(vb.counts, plan_factor(vb.info))
    if place.rank == root and _in_place(sendbuf):
        inbuf = vb.message.typed(vb.displs[root], vb.counts[root], "recvbuf").copy()
    else:
        smsg = parse_buffer(sendbuf, "sendbuf")
        inbuf = smsg.typed(role="sendbuf")
        if place.rank == root:
            _apart(smsg, vb.message)
            _same_type(smsg, vb.message)
    return Prepared(
        "gatherv",
        root=root,
        dtype=inbuf.dtype,
        inbuf=inbuf,
        outbuf=outbuf,
        out_offsets=offsets,
        vector_info=(inbuf.size, counts),
        finish=out.finish(),
    )


def allgather(place, sendbuf, recvbuf):
    return _from_every_rank("allgather", place, sendbuf, recvbuf)


def allgatherv(place, sendbuf, recvbuf):
    out = _Out()
    vb = parse_vbuffer(recvbuf, place.size, "recvbuf", writable=True)
    f = plan_factor(vb.info)
    if _in_place(sendbuf):
        inbuf = vb.message.typed(
            vb.displs[place.rank], vb.counts[place.rank], "recvbuf"
        ).copy()
    else:
        smsg = parse_buffer(sendbuf, "sendbuf")
        _apart(smsg, vb.message)
        _same_type(smsg, vb.message)
        inbuf = smsg.typed(role="sendbuf")
    outbuf, offsets = _vector_target(vb, out, "recvbuf")
    counts = _scaled(vb.counts, f)
    if inbuf.size != counts[place.rank]:
        raise BufferMismatchError(
            f"sendbuf has {inbuf.size} elements; recvcounts says "
            f"{counts[place.rank]} for this rank"
        )
    return Prepared(
        "allgatherv",
        dtype=outbuf.dtype,
        inbuf=inbuf,
        outbuf=outbuf,
        out_offsets=offsets,
        counts=counts,
        vector_info=counts,
        finish=out.finish(),
    )


def alltoall(place, sendbuf, recvbuf):
    return _from_every_rank("alltoall", place, sendbuf, recvbuf)


def _from_every_rank(op, place, sendbuf, recvbuf):
    """Read an Allgather's or an Alltoall's buffers: ``recvbuf`` takes a block from
    every rank; ``sendbuf`` holds this rank's block (allgather) or a block for each
    rank (alltoall), in place: that part of ``recvbuf``.

    Parameters
    ----------
    op : {"allgather", "alltoall"}
        The collective.
    place : Place
        This rank and the communicator's size.
    sendbuf, recvbuf : buffer specification
        The call's arguments, as mpi4py takes them.

    Returns
    -------
    Prepared
    """
    per_rank = op == "alltoall"
    out = _Out()
    rmsg = parse_buffer(recvbuf, "recvbuf", blocks=place.size, writable=True)
    count = _elements(rmsg)
    outbuf = out.target(
        rmsg, 0, rmsg.count * place.size, "recvbuf", keep=_in_place(sendbuf)
    )
    in_copy = None
    if _in_place(sendbuf):
        in_copy = (0, outbuf.size) if per_rank else (place.rank * count, count)
        inbuf = outbuf[in_copy[0] : in_copy[0] + in_copy[1]].copy()
    else:
        smsg = parse_buffer(sendbuf, "sendbuf", blocks=place.size if per_rank else 0)
        _apart(smsg, rmsg)
        _same_type(smsg, rmsg)
        _need(_elements(smsg), count, "sendbuf (per rank)" if per_rank else "sendbuf")
        inbuf = smsg.typed(0, smsg.count * (place.size if per_rank else 1), "sendbuf")
    return Prepared(
        op,
        count=count,
        dtype=outbuf.dtype,
        inbuf=inbuf,
        outbuf=outbuf,
        finish=out.finish(),
        in_copy=in_copy,
    )


def alltoallv(place, sendbuf, recvbuf):
    P, me = place.size, place.rank
    out = _Out()
    rv = parse_vbuffer(recvbuf, P, "recvbuf", writable=True)
    if _in_place(sendbuf):
        sview, soffsets = _vector_source(rv, "recvbuf")
        sview = sview.copy()
        scounts = rv.counts
        sf = plan_factor(rv.info)
    else:
        sv = parse_vbuffer(sendbuf, P, "sendbuf")
        _apart(sv.message, rv.message)
        _same_type(sv.message, rv.message)
        sview, soffsets = _vector_source(sv, "sendbuf")
        scounts, sf = sv.counts, plan_factor(sv.info)
    outbuf, roffsets = _vector_target(rv, out, "recvbuf")
    return Prepared(
        "alltoallv",
        dtype=outbuf.dtype,
        inbuf=sview,
        outbuf=outbuf,
        in_offsets={me * P + j: soffsets[j] for j in range(P)},
        out_offsets={j * P + me: roffsets[j] for j in range(P)},
        vector_info=(_scaled(scounts, sf), _scaled(rv.counts, plan_factor(rv.info))),
        finish=out.finish(),
    )


# ------------------------------------------------------------------ reductions
def _exact(op, dtype):
    """Whether ``op`` gives the same bits in any order on ``dtype``."""
    name = operator_name(op)
    return name in EXACT_OPS or (name in ("SUM", "PROD") and dtype.kind in "biu")


def validate_operator(op, dtype):
    """Raise unless ``op`` reduces elements of ``dtype``, with mpi4py's class for the
    fault: :class:`~wacoll.errors.OperatorTypeError` (a TypeError) for what is not
    an operator (mpi4py takes ``MPI.Op`` objects only; wacoll also takes names),
    :class:`~wacoll.errors.UndefinedOperatorError` (``MPI.Exception``, ``ERR_OP``)
    for an operator MPI does not define for ``dtype`` or does not reduce with
    (``MPI.REPLACE``, ``MPI.NO_OP``).

    Examples
    --------
    >>> from mpi4py import MPI
    >>> validate_operator(MPI.BAND, np.dtype("i4"))
    >>> try:
    ...     validate_operator(MPI.MAX, np.dtype(complex))
    ... except MPI.Exception as exc:
    ...     exc.Get_error_class() == MPI.ERR_OP
    True
    """
    try:
        _kernels.validate_op(op, dtype)
    except OperatorError as exc:
        if isinstance(op, load_mpi().Op):  # MAXLOC without pairs, REPLACE, NO_OP
            raise errors.UndefinedOperatorError(str(exc)) from None
        raise errors.OperatorTypeError(str(exc)) from None
    except BufferMismatchError as exc:
        # MPI refuses an operator on a type it is not defined for with MPI_ERR_OP
        raise errors.UndefinedOperatorError(str(exc)) from None


def _reduction_parts(op_name, inbuf, out, op, level, default_level):
    op = load_mpi().SUM if op is None else op
    validate_operator(op, inbuf.dtype)
    level = default_level if level is None else level
    commutes = _kernels.is_commutative(op)
    if level is None:  # MPI's own promise: any grouping, any order if it commutes
        level = "commutative" if commutes else "associative"
    if level not in LEVELS:
        raise WacollError(f"level must be one of {LEVELS}, got {level!r}")
    if level == "commutative" and not commutes:
        raise WacollError(
            "level 'commutative' asserted for an operator that is not commutative"
        )
    if commutes and _exact(op, inbuf.dtype):
        level = "commutative"
    return Prepared(
        op_name,
        dtype=inbuf.dtype,
        inbuf=inbuf,
        outbuf=out,
        reduce_op=op,
        level=level,
        accumulator_itemsize=_accumulator_itemsize(op, inbuf.dtype, level),
    )


def _accumulator_itemsize(op, dtype, level):
    """Bytes of an exact accumulator when a strict call may run on reproducible
    arithmetic (SUM on float32, float64, complex64, complex128), else 0."""
    if level != "strict" or operator_name(op) != "SUM" or dtype not in repro.DTYPES:
        return 0
    return repro.accumulator_bytes(dtype)


def _validate_reduction_type(msg, op, role):
    """MPI's predefined operators take predefined datatypes only (MPI 4.1, 6.9.2);
    a user-defined operator may take a derived datatype. Returns the derived
    datatype's :class:`~wacoll.mpi.datatypes.TypeInfo` for such a call (the plan
    then combines whole elements, :func:`_whole_elements`), else None."""
    if msg.info.predefined:
        return None
    if operator_name(op if op is not None else "SUM") != "user-defined":
        raise errors.UndefinedOperatorError(
            f"{role}: MPI's predefined operators are "
            f"not defined for derived datatype "
            f"{msg.info.name}"
        )
    return msg.info


def _whole_elements(prepared, info):
    """A user-defined operator on derived datatype ``info``: the plan's element
    becomes one whole packed element (``info.size`` bytes, never split), and the
    operator combines whole elements with the datatype
    (:class:`~wacoll.mpi.elementop.ElementOp`). ``prepared`` was read in the
    datatype's plan elements (:func:`plan_factor` per element); its buffers are
    contiguous packed arrays, viewed here as whole elements."""
    if info is None or not info.size:
        return prepared
    from wacoll.mpi.elementop import ElementOp, element_dtype

    unit = element_dtype(info)
    old = prepared.dtype.itemsize
    for name in ("inbuf", "outbuf"):
        view = getattr(prepared, name)
        if view is not None:
            setattr(prepared, name, view.reshape(-1).view(unit))
    prepared.dtype = unit
    if prepared.count is not None:
        prepared.count = prepared.count * old // info.size
    if prepared.in_copy is not None:
        start, n = prepared.in_copy
        prepared.in_copy = (start * old // info.size, n * old // info.size)
    prepared.reduce_op = ElementOp(prepared.reduce_op, info)
    return prepared


def _describe(info):
    return f"{info.name} ({plan_dtype(info)})"


def _same_reduction_type(s, r):
    if s.datatype != r.datatype and not (
        s.info.predefined and r.info.predefined and s.info.dtype == r.info.dtype
    ):
        raise BufferMismatchError(
            f"mismatch in send and receive MPI datatypes: "
            f"sendbuf is {_describe(s.info)}, recvbuf "
            f"{_describe(r.info)}"
        )
    if s.count != r.count:
        raise BufferMismatchError(
            f"mismatch in send count {s.count} and receive count {r.count}"
        )


def _vector_reduction(
    op_name, place, sendbuf, recvbuf, op, level, default_level, root=None
):
    out = _Out()
    rmsg = outbuf = in_copy = derived = None
    if op_name != "reduce" or place.rank == root:
        rmsg = parse_buffer(recvbuf, "recvbuf", writable=True)
        derived = _validate_reduction_type(rmsg, op, "recvbuf")
    if (
        _in_place(sendbuf)
        and rmsg is not None
        and (op_name != "reduce" or place.rank == root)
    ):
        outbuf = out.target(rmsg, 0, rmsg.count, "recvbuf", keep=True)
        inbuf = outbuf.copy()
        in_copy = (0, outbuf.size)
    else:
        smsg = parse_buffer(sendbuf, "sendbuf")
        derived = _validate_reduction_type(smsg, op, "sendbuf") or derived
        if rmsg is not None:
            _apart(smsg, rmsg)
            _same_reduction_type(smsg, rmsg)
            outbuf = out.target(rmsg, 0, rmsg.count, "recvbuf")
        inbuf = smsg.typed(role="sendbuf")
    prepared = _reduction_parts(op_name, inbuf, outbuf, op, level, default_level)
    prepared.root = root
    prepared.count = inbuf.size
    prepared.finish = out.finish()
    prepared.in_copy = in_copy
    return _whole_elements(prepared, derived)


def reduce(place, sendbuf, recvbuf, op=None, root=0, *, level=None, default_level=None):
    root = validate_root(place, root)
    return _vector_reduction(
        "reduce", place, sendbuf, recvbuf, op, level, default_level, root
    )


def allreduce(place, sendbuf, recvbuf, op=None, *, level=None, default_level=None):
    return _vector_reduction(
        "allreduce", place, sendbuf, recvbuf, op, level, default_level
    )


def scan(place, sendbuf, recvbuf, op=None, *, level=None, default_level=None):
    return _vector_reduction("scan", place, sendbuf, recvbuf, op, level, default_level)


def exscan(place, sendbuf, recvbuf, op=None, *, level=None, default_level=None):
    return _vector_reduction("exscan", place, sendbuf, recvbuf, op, level, default_level)


def reduce_scatter_block(
    place, sendbuf, recvbuf, op=None, *, level=None, default_level=None
):
    out = _Out()
    if _in_place(sendbuf):
        rmsg = parse_buffer(recvbuf, "recvbuf", blocks=place.size, writable=True)
        derived = _validate_reduction_type(rmsg, op, "recvbuf")
        whole = out.target(rmsg, 0, rmsg.count * place.size, "recvbuf", keep=True)
        inbuf = whole.copy()
        count = _elements(rmsg)
        outbuf = whole[:count]
        in_copy = (0, whole.size)
    else:
        rmsg = parse_buffer(recvbuf, "recvbuf", writable=True)
        smsg = parse_buffer(sendbuf, "sendbuf", blocks=place.size)
        derived = None
        for m, role in ((rmsg, "recvbuf"), (smsg, "sendbuf")):
            derived = _validate_reduction_type(m, op, role) or derived
        _apart(smsg, rmsg)
        _same_reduction_type(smsg, rmsg)
        outbuf = out.target(rmsg, 0, rmsg.count, "recvbuf")
        inbuf = smsg.typed(0, smsg.count * place.size, "sendbuf")
        count = _elements(rmsg)
    prepared = _reduction_parts(
        "reduce_scatter_block", inbuf, outbuf, op, level, default_level
    )
    prepared.count = count
    prepared.finish = out.finish()
    prepared.in_copy = in_copy if _in_place(sendbuf) else None
    return _whole_elements(prepared, derived)


def _recvcounts(values, size):
    if values is None:
        return None
    try:
        counts = tuple(values)
    except TypeError:
        raise BufferTypeError(
            f"recvcounts must be a sequence of {size} counts, got {values!r}"
        ) from None
    # mpi4py reads the items as integers first (TypeError), then counts them
    if any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) for c in counts):
        raise BufferTypeError(f"recvcounts needs {size} integer counts")
    if len(counts) != size:
        raise BufferMismatchError(
            f"recvcounts: expecting {size} items, got {len(counts)}"
        )
    if any(c < 0 for c in counts):  # the MPI library's MPI_ERR_COUNT
        raise errors.CountError(f"recvcounts needs {size} counts >= 0")
    return tuple(int(c) for c in counts)


def reduce_scatter(
    place, sendbuf, recvbuf, recvcounts=None, op=None, *, level=None, default_level=None
):
    out = _Out()
    rmsg = parse_buffer(recvbuf, "recvbuf", writable=True)
    derived = _validate_reduction_type(rmsg, op, "recvbuf")
    counts = _recvcounts(recvcounts, place.size)
    f = plan_factor(rmsg.info)
    if _in_place(sendbuf):
        if counts is None:
            raise BufferTypeError("MPI.IN_PLACE needs recvcounts")
        if rmsg.count != sum(counts):
            raise BufferMismatchError(
                f"mismatch in receive count {rmsg.count} and sum(counts) {sum(counts)}"
            )
        whole = out.target(rmsg, 0, rmsg.count, "recvbuf", keep=True)
        inbuf = whole.copy()
        outbuf = whole[: counts[place.rank] * f]
        in_copy = (0, whole.size)
    else:
        smsg = parse_buffer(sendbuf, "sendbuf")
        derived = _validate_reduction_type(smsg, op, "sendbuf") or derived
        _apart(smsg, rmsg)
        if smsg.datatype != rmsg.datatype and plan_dtype(smsg.info) != plan_dtype(
            rmsg.info
        ):
            raise BufferMismatchError("mismatch in send and receive MPI datatypes")
        if counts is not None:
            if smsg.count != sum(counts):
                raise BufferMismatchError(
                    f"mismatch in send count {smsg.count} and sum(counts) {sum(counts)}"
                )
            if rmsg.count != counts[place.rank]:
                raise BufferMismatchError(
                    f"mismatch in receive count {rmsg.count} and "
                    f"counts[{place.rank}] {counts[place.rank]}"
                )
        outbuf = out.target(rmsg, 0, rmsg.count, "recvbuf")
        inbuf = smsg.typed(role="sendbuf")
    prepared = _reduction_parts("reduce_scatter", inbuf, outbuf, op, level, default_level)
    prepared.finish = out.finish()
    prepared.in_copy = in_copy if _in_place(sendbuf) else None
    prepared = _whole_elements(prepared, derived)
    if prepared.dtype != inbuf.dtype:  # whole elements: counted in elements
        f = 1
    prepared.vector_info = (prepared.outbuf.size, _scaled(counts, f), prepared.inbuf.size)
    return prepared
