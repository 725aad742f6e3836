"""Turn mpi4py-style buffer specifications into flat typed numpy views.

mpi4py accepts a buffer as an object exposing the buffer interface (a numpy array),
or a list ``[data, datatype]``, ``[data, count, datatype]``,
``[data, (count, displ), datatype]``; vector variants take
``[data, counts, displs, datatype]``, ``[data, (counts, displs), datatype]`` or
``[data, counts]``. wacoll reads them the same way and works on a 1-D numpy view of
the memory in the datatype's numpy dtype, so that kernels and messages need no copy.
Only contiguous predefined datatypes are supported.

Examples
--------
>>> import numpy as np
>>> from mpi4py import MPI
>>> view, count = parse_buffer([np.zeros(6), MPI.DOUBLE], "sendbuf")
>>> view.dtype, count
(dtype('float64'), 6)
>>> vv = parse_vbuffer([np.zeros(6, "i"), [1, 2], [0, 3], MPI.INT], 2, "recvbuf")
>>> vv.counts, vv.displs
((1, 2), (0, 3))
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from wacoll.errors import BufferMismatchError

__all__ = ["parse_buffer", "parse_vbuffer", "VBuffer", "numpy_dtype", "mpi_datatype"]


def _mpi():
    from mpi4py import MPI

    return MPI


def numpy_dtype(datatype) -> np.dtype:
    """The numpy dtype of a predefined MPI datatype; a clear error otherwise."""
    from mpi4py.util import dtlib

    MPI = _mpi()
    if not isinstance(datatype, MPI.Datatype):
        raise BufferMismatchError(f"expected an MPI datatype, got {datatype!r}")
    if datatype == MPI.DATATYPE_NULL:
        raise BufferMismatchError("MPI.DATATYPE_NULL is not a usable datatype")
    try:
        if not datatype.is_predefined:
            raise ValueError
        dtype = dtlib.to_numpy_dtype(datatype)
    except (ValueError, KeyError, TypeError):
        raise BufferMismatchError(
            f"datatype {datatype.Get_name() or datatype!r} is not supported: wacoll works "
            f"on contiguous predefined datatypes") from None
    if dtype.fields is not None or dtype.subdtype is not None:
        raise BufferMismatchError(f"datatype {datatype.Get_name()} is not a plain numeric "
                                  f"type")
    return dtype


def mpi_datatype(dtype):
    """The MPI datatype of a numpy dtype; a clear error for one MPI cannot map."""
    return _mpi_datatype(np.dtype(dtype))


@functools.lru_cache(maxsize=64)
def _mpi_datatype(dtype):
    from mpi4py.util import dtlib

    try:
        return dtlib.from_numpy_dtype(dtype)
    except (ValueError, KeyError, TypeError):
        raise BufferMismatchError(f"numpy dtype {dtype} has no MPI datatype") from None


def _as_view(data, dtype, role):
    """A 1-D view of ``data``'s memory as ``dtype`` (no copy)."""
    if isinstance(data, np.ndarray):
        if not (data.flags.c_contiguous or data.ndim <= 1 and data.flags.f_contiguous):
            raise BufferMismatchError(f"{role} must be a contiguous array")
        arr = data.reshape(-1)
        if dtype is None:
            mpi_datatype(arr.dtype)  # validates the dtype
            return arr
        if arr.dtype == dtype:
            return arr
        raw = arr.view(np.uint8)
    else:
        try:
            mem = memoryview(data)
        except TypeError:
            raise BufferMismatchError(f"{role} of type {type(data).__name__} does not "
                                      f"expose the buffer interface") from None
        if not mem.c_contiguous:
            raise BufferMismatchError(f"{role} must be contiguous memory")
        raw = np.frombuffer(mem.cast("B"), dtype=np.uint8)
        if dtype is None:
            dtype = np.dtype(np.uint8)
    if raw.nbytes % dtype.itemsize:
        raise BufferMismatchError(f"{role} has {raw.nbytes} bytes, not a whole number of "
                                  f"{dtype} elements")
    return raw.view(dtype)


def parse_buffer(spec, role: str):
    """Read a buffer specification; return ``(view, count)``.

    ``view`` is a 1-D numpy array over exactly the ``count`` elements the
    specification names (after any displacement).
    """
    if isinstance(spec, (list, tuple)):
        if not 1 <= len(spec) <= 3:
            raise BufferMismatchError(f"{role} must be [data, datatype] or "
                                      f"[data, count, datatype]")
        data = spec[0]
        MPI = _mpi()
        datatype = spec[-1] if len(spec) >= 2 and isinstance(spec[-1], MPI.Datatype) \
            else None
        dtype = numpy_dtype(datatype) if datatype is not None else None
        view = _as_view(data, dtype, role)
        middle = spec[1:-1] if datatype is not None else spec[1:]
        count, displ = view.size, 0
        if middle:
            c = middle[0]
            if isinstance(c, (list, tuple)):
                if len(c) != 2:
                    raise BufferMismatchError(f"{role}: (count, displacement) expected")
                count, displ = c
            else:
                count = c
            for name, v in (("count", count), ("displacement", displ)):
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                    raise BufferMismatchError(f"{role} {name} must be an integer >= 0, "
                                              f"got {v!r}")
            count, displ = int(count), int(displ)
            if displ + count > view.size:
                raise BufferMismatchError(f"{role} holds {view.size} elements; count "
                                          f"{count} at displacement {displ} does not fit")
        return view[displ:displ + count], count
    view = _as_view(spec, None, role)
    return view, view.size


@dataclass(frozen=True)
class VBuffer:
    """A vector buffer: a 1-D view with per-rank counts and displacements."""

    view: np.ndarray
    counts: tuple
    displs: tuple


def parse_vbuffer(spec, size: int, role: str) -> VBuffer:
    """Read a vector buffer specification for ``size`` ranks."""
    if not isinstance(spec, (list, tuple)) or not 2 <= len(spec) <= 4:
        raise BufferMismatchError(f"{role} must be [data, counts], [data, counts, displs, "
                                  f"datatype] or [data, (counts, displs), datatype]")
    MPI = _mpi()
    data = spec[0]
    datatype = spec[-1] if isinstance(spec[-1], MPI.Datatype) else None
    rest = list(spec[1:-1] if datatype is not None else spec[1:])
    dtype = numpy_dtype(datatype) if datatype is not None else None
    view = _as_view(data, dtype, role)
    if len(rest) == 1 and isinstance(rest[0], tuple) and len(rest[0]) == 2 and \
            isinstance(rest[0][0], (list, tuple, np.ndarray)):
        rest = list(rest[0])
    if not rest or len(rest) > 2:
        raise BufferMismatchError(f"{role}: counts (and displacements) expected")
    counts = _int_tuple(rest[0], size, f"{role} counts")
    if len(rest) == 2 and rest[1] is not None:
        displs = _int_tuple(rest[1], size, f"{role} displacements")
    else:
        displs = tuple(int(x) for x in np.concatenate(([0], np.cumsum(counts)[:-1])))
    for r, (c, d) in enumerate(zip(counts, displs)):
        if d + c > view.size:
            raise BufferMismatchError(f"{role} holds {view.size} elements; block {r} "
                                      f"({c} at {d}) does not fit")
    return VBuffer(view, counts, displs)


def _int_tuple(values, size, what):
    try:
        items = [int(v) for v in values]
        ok = all(not isinstance(v, bool) and float(v) == int(v) for v in values)
    except (TypeError, ValueError, OverflowError):
        raise BufferMismatchError(f"{what} must be integers") from None
    if not ok:
        raise BufferMismatchError(f"{what} must be integers")
    if len(items) != size:
        raise BufferMismatchError(f"{what} need {size} entries, one per rank; got "
                                  f"{len(items)}")
    if any(v < 0 for v in items):
        raise BufferMismatchError(f"{what} must be >= 0")
    return tuple(items)
