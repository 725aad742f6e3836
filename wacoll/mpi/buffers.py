"""Turn mpi4py-style buffer specifications into typed numpy views, as mpi4py reads them.

A buffer specification is what an mpi4py collective accepts for a send or receive
buffer:

* a buffer object: anything exposing the buffer interface (its format gives the
  datatype: an ``array('i')`` is ``MPI.INT``, ``bytes`` is ``MPI.BYTE``), DLPack
  (``__dlpack__``), ``__array_interface__`` or a host ``__cuda_array_interface__``;
* ``[data, datatype]``, ``[data, count, datatype]``, ``[data, (count, displ),
  datatype]``, ``[data, count, displ, datatype]``; the datatype is an
  ``MPI.Datatype`` or a type code such as ``"i"``, and may differ from the data's own
  type (bytes sent as ``MPI.INT``); the displacement counts datatype extents;
* for the vector (v) variants: ``[data, counts, displs, datatype]``,
  ``[data, (counts, displs), datatype]``, ``[data, counts]``, ``[data, datatype]``
  or the buffer alone; a single integer count means that count for every rank, an
  integer displacement a stride, and a buffer without counts is split as evenly as
  possible (the first ranks get one more element).

The block variants (Scatter, Gather, Allgather, Alltoall) read a buffer holding a
block per rank with ``blocks=size``: an explicit count is the count *per rank*, an
inferred one the buffer's length divided by the ranks.

Examples
--------
>>> import numpy as np
>>> from mpi4py import MPI
>>> msg = parse_buffer([np.zeros(6), MPI.DOUBLE], "sendbuf")
>>> msg.count, msg.typed().dtype
(6, dtype('float64'))
>>> parse_buffer([np.zeros(6, "i"), (2, 1), MPI.INT], "sendbuf").typed().size
2
>>> vb = parse_vbuffer([np.zeros(6, "i"), [1, 2], [0, 3], MPI.INT], 2, "recvbuf")
>>> vb.counts, vb.displs
((1, 2), (0, 3))
>>> parse_vbuffer(np.zeros(7), 3, "recvbuf").counts
(3, 2, 2)
"""

from __future__ import annotations

import ctypes
import functools
import numbers
from dataclasses import dataclass

import numpy as np

from wacoll import errors
from wacoll.errors import (
    BufferAccessError,
    BufferMismatchError,
    BufferTypeError,
    DatatypeError,
)
from wacoll.mpi.datatypes import (
    TypeInfo,
    datatype_of_format,
    load_mpi,
    resolve_datatype,
    type_info,
)

__all__ = [
    "parse_buffer",
    "parse_vbuffer",
    "ParsedBuffer",
    "VBuffer",
    "numpy_dtype",
    "mpi_datatype",
    "as_bytes",
]


def numpy_dtype(datatype) -> np.dtype:
    """The numpy dtype of a predefined MPI datatype; a clear error otherwise."""
    info = type_info(resolve_datatype(datatype))
    if not info.predefined:
        raise DatatypeError(f"datatype {info.name} is derived; it has no numpy dtype")
    return info.dtype


def mpi_datatype(dtype):
    """The MPI datatype of a numpy dtype; a clear error for one MPI cannot map."""
    return _mpi_datatype(np.dtype(dtype))


@functools.lru_cache(maxsize=64)
def _mpi_datatype(dtype):
    from mpi4py.util import dtlib

    try:
        return dtlib.from_numpy_dtype(dtype)
    except (ValueError, KeyError, TypeError):
        raise DatatypeError(f"numpy dtype {dtype} has no MPI datatype") from None


# ----------------------------------------------------------------------- memory
def _is_buffer_object(obj):
    if isinstance(obj, (np.ndarray, bytes, bytearray, memoryview)):
        return True
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False


def _host_array(obj, role):
    """A numpy array over the memory of ``obj`` (no copy), or None if it has none."""
    if isinstance(obj, np.ndarray):
        return obj
    try:
        mem = memoryview(obj)
    except TypeError:
        pass
    else:
        return mem
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, role)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return np.asarray(_Interface(dict(cai, version=3)))
    if hasattr(obj, "__array_interface__"):
        return np.asarray(obj)
    return None


def for_mpi(spec):
    """An argument as the MPI library's own collectives read it.

    wacoll also reads objects that expose only ``__array_interface__`` and
    operators given by name (``"sum"``), which mpi4py does not: the native path
    hands those over as numpy arrays over the same memory and as ``MPI.Op``.
    """
    if isinstance(spec, str):  # an operator by name ("sum"), which wacoll reads
        op = getattr(load_mpi(), spec.upper(), None)
        return op if isinstance(op, load_mpi().Op) else spec
    if isinstance(spec, (list, tuple)) and spec:
        first = for_mpi(spec[0])
        return spec if first is spec[0] else type(spec)((first, *spec[1:]))
    if (
        isinstance(spec, np.ndarray)
        or not hasattr(spec, "__array_interface__")
        or hasattr(spec, "__dlpack__")
        or _is_buffer_object(spec)
    ):
        return spec
    return np.asarray(spec)


class _Interface:
    """An ``__array_interface__`` holder (for a host ``__cuda_array_interface__`` or a
    DLPack capsule, which it keeps alive with the array)."""

    def __init__(self, interface, owner=None):
        interface.pop("stream", None)
        interface.pop("mask", None)
        self.__array_interface__ = interface
        self.owner = owner


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManaged(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class _DLManagedVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_DL_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(obj, role):
    """A numpy view of a host DLPack tensor, as mpi4py reads one: the capsule is
    read, not consumed (its producer frees it), and kept alive with the view."""
    try:
        device_type, _ = obj.__dlpack_device__()
    except AttributeError:
        device_type = 1
    if device_type not in (1, 3):  # kDLCPU, kDLCUDAHost
        raise BufferAccessError(
            f"{role}: a DLPack tensor on device type {device_type} is not in host memory"
        )
    try:
        capsule, name = (
            obj.__dlpack__(max_version=(1, 0), copy=False),
            b"dltensor_versioned",
        )
    except TypeError:
        capsule, name = obj.__dlpack__(), b"dltensor"
    if not _capsule_valid(capsule, name):
        raise BufferMismatchError(f"{role}: __dlpack__ returned no valid capsule")
    pointer = _capsule_pointer(capsule, name)
    if name == b"dltensor":
        tensor, readonly = _DLManaged.from_address(pointer).dl_tensor, False
    else:
        managed = _DLManagedVersioned.from_address(pointer)
        tensor, readonly = managed.dl_tensor, bool(managed.flags & 1)
    kind, bits = _DL_KINDS.get(tensor.code), tensor.bits
    if kind == "f" and tensor.lanes == 2:  # complex numbers as pairs of floats
        kind, bits = "c", 2 * bits
    elif tensor.lanes != 1:
        kind = None
    if kind is None or bits % 8:
        raise BufferMismatchError(
            f"{role}: DLPack type code {tensor.code} ({tensor.bits}"
            f" bits, {tensor.lanes} lanes) has no MPI datatype"
        )
    itemsize = bits // 8
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    if tensor.strides:
        expect = 1
        for i in reversed(range(tensor.ndim)):
            if shape[i] != 1 and tensor.strides[i] != expect:
                raise BufferAccessError(f"{role}: the DLPack tensor is not contiguous")
            expect *= shape[i]
    order = "<" if np.little_endian else ">"
    typestr = "|b1" if kind == "b" else f"{order}{kind}{itemsize}"
    address = (tensor.data or 0) + tensor.byte_offset
    if not address:
        return np.empty(shape, np.dtype(typestr))
    return np.asarray(
        _Interface(
            {
                "data": (address, readonly),
                "typestr": typestr,
                "shape": shape,
                "version": 3,
            },
            owner=capsule,
        )
    )


def as_bytes(obj, role, writable=False):
    """``(raw, format)``: the bytes of a buffer object as a 1-D uint8 array (no copy)
    and its element format (a numpy dtype, or a buffer-protocol format string).

    Raises :class:`~wacoll.errors.BufferTypeError` for an object that is not a
    buffer, :class:`~wacoll.errors.BufferAccessError` (a BufferError, as mpi4py's)
    for memory that is not contiguous or, with ``writable``, read-only, and
    :class:`~wacoll.errors.DatatypeError` (a KeyError, as mpi4py's) for elements
    that are Python objects.
    """
    host = _host_array(obj, role)
    if host is None:
        raise BufferTypeError(
            f"{role} of type {type(obj).__name__} is not a buffer: it "
            f"exposes neither the buffer interface nor DLPack"
        )
    if isinstance(host, memoryview):
        mem = host
        if not mem.contiguous:
            raise BufferAccessError(f"{role} must be contiguous memory")
        if writable and mem.readonly:
            raise BufferAccessError(f"{role} is read-only")
        fmt = mem.format
        if mem.nbytes and not mem.c_contiguous:
            raise BufferAccessError(f"{role} must be C-contiguous memory")
        raw = np.asarray(mem.cast("B")) if mem.nbytes else np.empty(0, np.uint8)
        return raw, fmt
    arr = host
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        raise BufferAccessError(f"{role} must be a contiguous array")
    if writable and not arr.flags.writeable:
        raise BufferAccessError(f"{role} is read-only")
    if arr.dtype.hasobject:
        raise DatatypeError(
            f"{role}: numpy dtype {arr.dtype} holds Python objects; "
            f"it has no MPI datatype"
        )
    flat = arr.reshape(-1, order="A")
    return (
        flat.view(np.uint8) if flat.dtype.itemsize else np.empty(0, np.uint8)
    ), arr.dtype


def _datatype_of(fmt, role):
    if isinstance(fmt, np.dtype):
        if fmt.hasobject:
            raise DatatypeError(f"{role}: numpy dtype {fmt} holds Python objects")
        if fmt.byteorder not in "=|" and fmt.byteorder != (
            "<" if np.little_endian else ">"
        ):
            raise BufferAccessError(f"{role}: dtype {fmt} has non-native byte order")
        if fmt == np.uint8:
            return load_mpi().BYTE
        try:
            fmt = memoryview(np.empty(0, fmt)).format
        except (ValueError, TypeError, BufferError):  # datetime64, ...: no format
            raise BufferAccessError(
                f"{role}: numpy dtype {fmt} exports no buffer format"
            ) from None
    return datatype_of_format(fmt, role)


# ----------------------------------------------------------------------- messages
@dataclass
class ParsedBuffer:
    """One buffer specification, read (mpi4py calls it a message; the plan model's
    :class:`~wacoll.plans.plan.Message` is a message between two ranks).

    Attributes
    ----------
    raw : numpy.ndarray
        The user's bytes from the message's address (after the displacement) on.
    info : TypeInfo
        Its datatype.
    count : int
        Elements of the datatype the message names (per block for block variants).
    """

    raw: np.ndarray
    info: TypeInfo
    count: int

    @property
    def datatype(self):
        return self.info.datatype

    @property
    def nelements(self):
        """Whole elements the bytes hold."""
        if self.info.extent <= 0:
            return 0
        if self.info.predefined:
            return self.raw.size // self.info.extent
        full = self.raw.size - self.info.span(1) if self.raw.size else -1
        return 0 if full < 0 else full // self.info.extent + 1

    def validate_fits(self, start, n, role):
        """Raise unless elements ``start .. start+n`` lie inside the buffer."""
        if n and start + n > self.nelements:
            raise BufferMismatchError(
                f"{role} holds {self.nelements} {self.info.name} elements; "
                f"{n} at element {start} do not fit"
            )

    def typed(self, start=0, n=None, role="buffer"):
        """Elements ``start .. start+n`` (default: the message's ``count``).

        Predefined datatypes: a view of the user's memory. Derived ones: a packed
        copy of their data (see :func:`plan_dtype`).
        """
        n = self.count if n is None else n
        self.validate_fits(start, n, role)
        info = self.info
        at = start * info.extent
        if info.predefined:
            return self.raw[at : at + n * info.extent].view(info.dtype)
        return info.pack(self.raw[at:], n).view(plan_dtype(info))

    def untyped_view(self, role="buffer"):
        """The whole buffer as a 1-D view of the predefined element type."""
        n = self.nelements
        return self.raw[: n * self.info.extent].view(self.info.dtype)

    def store(self, packed, start, n):
        """Write the packed data of ``n`` elements at element ``start`` (derived)."""
        at = start * self.info.extent
        self.info.unpack(np.ascontiguousarray(packed).view(np.uint8), self.raw[at:], n)


def plan_dtype(info: TypeInfo) -> np.dtype:
    """The dtype a plan moves for elements of ``info``: the predefined type itself; a
    derived type made of one predefined type: that type; any other: bytes."""
    if info.predefined:
        return info.dtype
    return info.base if info.base is not None else np.dtype(np.uint8)


def plan_factor(info: TypeInfo) -> int:
    """Plan elements per element of ``info``."""
    if info.predefined:
        return 1
    return info.nbase if info.base is not None else info.size


def _index(v, role, what):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        try:
            return int(v.__index__())
        except (AttributeError, TypeError):
            raise BufferTypeError(
                f"{role} {what} must be an integer, got {v!r}"
            ) from None
    return int(v)


def _split_spec(spec, role, vector):
    """mpi4py's reading of a list or tuple: ``(data, count, displ, datatype)``."""
    MPI = load_mpi()
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    n = len(spec)
    count = displ = dt = None
    if n == 2:
        data, count = spec
        if isinstance(count, (MPI.Datatype, str)):
            count, dt = None, count
        elif isinstance(count, tuple) or (not vector and isinstance(count, list)):
            if len(count) != 2:
                raise BufferMismatchError(f"{role}: (count, displacement) expected")
            count, displ = count
    elif n == 3:
        data, count, dt = spec
        if isinstance(count, tuple) or (not vector and isinstance(count, list)):
            if len(count) != 2:
                raise BufferMismatchError(f"{role}: (count, displacement) expected")
            count, displ = count
    elif n == 4:
        data, count, displ, dt = spec
    else:
        raise BufferMismatchError(
            f"{role}: a buffer specification has 2 to 4 items, got {n}"
        )
    return data, count, displ, dt


#: TypeInfo of each numpy dtype read from a plain contiguous ndarray: the fast path
#: of the commonest specification (filled by the general path on first use).
_ARRAY_INFO: dict[np.dtype, TypeInfo] = {}


def _read(data, dt, role, writable):
    """``(raw, TypeInfo)`` of the data and datatype of a specification."""
    if dt is None and type(data) is np.ndarray and data.flags.c_contiguous:
        info = _ARRAY_INFO.get(data.dtype)
        if info is not None:
            if writable and not data.flags.writeable:
                raise BufferAccessError(f"{role} is read-only")
            return data.reshape(-1).view(np.uint8), info
        raw, info = _read_any(data, dt, role, writable)
        if info.predefined and data.dtype.itemsize:
            _ARRAY_INFO[data.dtype] = info
        return raw, info
    return _read_any(data, dt, role, writable)


def _read_any(data, dt, role, writable):
    MPI = load_mpi()
    if data is None or data is MPI.BOTTOM:
        if dt is None:
            raise BufferTypeError(f"{role} is None (MPI.BOTTOM) without a datatype")
        return np.empty(0, np.uint8), type_info(resolve_datatype(dt, role))
    raw, fmt = as_bytes(data, role, writable)
    datatype = resolve_datatype(dt, role) if dt is not None else _datatype_of(fmt, role)
    return raw, type_info(datatype)


def parse_buffer(
    spec, role: str, blocks: int = 0, writable: bool = False
) -> ParsedBuffer:
    """Read a buffer specification as mpi4py does (``message_simple``).

    ``blocks`` >= 2 reads a block-variant buffer: an inferred count is divided by
    ``blocks``. Raises :class:`BufferMismatchError` (a ValueError) where mpi4py raises
    ValueError, :class:`BufferTypeError` where it raises TypeError,
    :class:`DatatypeError` where it raises KeyError, :class:`BufferAccessError`
    where it raises BufferError, and :class:`~wacoll.errors.CountError` (a ValueError
    and an ``MPI.Exception``) for a negative count.
    """
    MPI = load_mpi()
    if isinstance(spec, (list, tuple)):
        data, count, displ, dt = _split_spec(spec, role, False)
    elif spec is MPI.IN_PLACE or spec is None:
        raise BufferTypeError(
            f"{role} is {'None' if spec is None else 'MPI.IN_PLACE'}, "
            f"which this call does not accept here"
        )
    else:
        data, count, displ, dt = spec, None, None, None
    raw, info = _read(data, dt, role, writable)
    offset = 0
    if displ is not None:
        displ = _index(displ, role, "displacement")
        if displ < 0:
            raise BufferMismatchError(f"{role}: negative displacement {displ}")
        if displ:
            if info.extent <= 0:
                raise BufferMismatchError(
                    f"{role}: cannot displace by datatype extent {info.extent}"
                )
            offset = displ * info.extent
            if offset > raw.size:
                raise BufferMismatchError(
                    f"{role}: displacement {displ} is beyond the buffer's "
                    f"{raw.size // info.extent} elements"
                )
    raw = raw[offset:]
    if count is not None:
        count = _index(count, role, "count")
        if count < 0:
            raise errors.CountError(f"{role}: negative count {count}")
    elif raw.size:
        if info.extent <= 0:
            raise BufferMismatchError(
                f"{role}: cannot infer the count with datatype extent {info.extent}"
            )
        if raw.size % info.extent:
            raise BufferMismatchError(
                f"{role}: cannot infer the count: {raw.size} bytes are not a multiple "
                f"of the {info.name} extent {info.extent}"
            )
        total = raw.size // info.extent
        if blocks >= 2:
            if total % blocks:
                raise BufferMismatchError(
                    f"{role}: cannot infer the count: {total} elements are not a "
                    f"multiple of {blocks} ranks"
                )
            count = total // blocks
        else:
            count = total
    else:
        count = 0
    msg = ParsedBuffer(raw, info, count)
    msg.validate_fits(0, count * max(blocks, 1), role)
    return msg


@dataclass
class VBuffer:
    """A vector buffer: per-rank counts and displacements (in datatype elements)."""

    message: ParsedBuffer
    counts: tuple
    displs: tuple

    @property
    def view(self):
        """The buffer as a 1-D view of its predefined element type."""
        return self.message.untyped_view()

    @property
    def info(self):
        return self.message.info


def _int_list(values, size, role, what):
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise BufferTypeError(
            f"{role} {what} must be a sequence of {size} integers or "
            f"one integer, got {values!r}"
        )
    items = [_index(v, role, what) for v in values]
    if len(items) != size:
        raise BufferMismatchError(
            f"{role} {what}: expected {size} entries, one per rank; got {len(items)}"
        )
    return tuple(items)


def parse_vbuffer(spec, size: int, role: str, writable: bool = False) -> VBuffer:
    """Read a vector buffer specification for ``size`` ranks (``message_vector``)."""
    MPI = load_mpi()
    if spec is MPI.IN_PLACE or spec is None:
        raise BufferTypeError(
            f"{role} is {'None' if spec is None else 'MPI.IN_PLACE'}, "
            f"which this call does not accept here"
        )
    data, counts, displs, dt = _split_spec(spec, role, True)
    raw, info = _read(data, dt, role, writable)
    msg = ParsedBuffer(raw, info, 0)
    if counts is None:
        total = 0
        if raw.size:
            if info.extent <= 0 or raw.size % info.extent:
                raise BufferMismatchError(
                    f"{role}: cannot infer counts: {raw.size} bytes are not a multiple "
                    f"of the {info.name} extent {info.extent}"
                )
            total = raw.size // info.extent
        counts = tuple(total // size + (total % size > i) for i in range(size))
    elif isinstance(counts, numbers.Integral) and not isinstance(counts, bool):
        counts = (int(counts),) * size
    else:
        counts = _int_list(counts, size, role, "counts")
    if displs is None:
        displs = tuple(int(x) for x in np.concatenate(([0], np.cumsum(counts)[:-1])))
    elif isinstance(displs, numbers.Integral) and not isinstance(displs, bool):
        displs = tuple(int(displs) * i for i in range(size))
    else:
        displs = _int_list(displs, size, role, "displacements")
    for r, (c, d) in enumerate(zip(counts, displs)):
        if c < 0 or d < 0:
            # a negative count: the MPI library's MPI_ERR_COUNT
            raise (errors.CountError if c < 0 else BufferMismatchError)(
                f"{role}: block {r} has count {c} and displacement {d}; both must be >= 0"
            )
        if c:
            msg.validate_fits(d, c, f"{role} block {r}")
    if writable:
        _refuse_overlap(counts, displs, role)
    return VBuffer(msg, tuple(counts), tuple(displs))


def _refuse_overlap(counts, displs, role):
    """MPI calls a receive whose blocks write one location twice erroneous (the
    result would depend on the order messages arrive): refuse it."""
    blocks = sorted((d, d + c, r) for r, (c, d) in enumerate(zip(counts, displs)) if c)
    for (_, end, r), (start, _, s) in zip(blocks, blocks[1:]):
        if start < end:
            raise BufferMismatchError(
                f"{role}: blocks {min(r, s)} and {max(r, s)} overlap (elements "
                f"{start} to {end - 1} would be written twice); receive blocks must "
                f"not overlap"
            )
