"""MPI datatypes as wacoll sees them: the element a plan moves and combines.

A predefined datatype is a numpy dtype (``MPI.DOUBLE`` is float64, ``MPI.LONG_DOUBLE``
numpy's longdouble, ``MPI.C_BOOL`` bool, ``MPI.DOUBLE_INT`` a structured dtype with
MPI's layout of the (value, index) pair, and so on); the plan works on a numpy view
of the user's memory.

A derived datatype (contiguous, vector, indexed, struct, resized, ...) is described
by its *type map*: the byte offsets, relative to an element's address, of the data
one element holds, in MPI's packing order. :class:`TypeInfo` computes it once from
the MPI library itself (``MPI.Datatype.Pack`` of a probe), so every constructor MPI
knows is read the same way. Data then moves *packed*, in the order MPI packs it: as
the predefined type a derived type is made of (or as bytes when it mixes types), so
a rank that sends with one derived type and a rank that receives with another of the
same type signature agree. MPI's predefined operators take no derived datatypes.

Examples
--------
>>> from mpi4py import MPI
>>> info = type_info(MPI.DOUBLE)
>>> info.predefined, info.dtype.str, info.extent
(True, '<f8', 8)
>>> vec = MPI.INT.Create_vector(2, 1, 3).Commit()
>>> info = type_info(vec)
>>> info.predefined, info.size, info.extent, info.index.tolist()
(False, 8, 16, [0, 1, 2, 3, 12, 13, 14, 15])
>>> vec.Free()
"""

from __future__ import annotations

import functools

import numpy as np

from wacoll.errors import (
    BufferAccessError,
    BufferMismatchError,
    BufferTypeError,
    DatatypeError,
    WacollError,
)

__all__ = [
    "TypeInfo",
    "type_info",
    "resolve_datatype",
    "datatype_of_format",
    "PAIR_TYPES",
    "pair_dtype",
    "register_pair_formats",
    "load_mpi",
]


@functools.cache
def load_mpi():
    """mpi4py's MPI module, imported on first use (:mod:`wacoll.mpi.buffers` and
    :mod:`wacoll.mpi.calls` use this one too)."""
    from mpi4py import MPI

    return MPI


#: The MPI pair types of MINLOC and MAXLOC, by name.
PAIR_TYPES = (
    "FLOAT_INT",
    "DOUBLE_INT",
    "LONG_INT",
    "TWOINT",
    "SHORT_INT",
    "LONG_DOUBLE_INT",
)


class TypeInfo:
    """What wacoll needs to know of one MPI datatype.

    Attributes
    ----------
    datatype : mpi4py.MPI.Datatype
    name : str
    predefined : bool
        A datatype whose elements are one numpy scalar each (its ``dtype``), moved
        and combined in the user's memory without copies.
    dtype : numpy.dtype
        Predefined: the element dtype. Derived: the dtype of one packed element,
        ``size`` bytes (see :attr:`packed_dtype`).
    extent, lb, size : int
        MPI's extent and lower bound (the stride between consecutive elements) and
        the number of data bytes of one element.
    index : numpy.ndarray or None
        Derived types: the byte offsets of one element's data, in packing order.
    base : numpy.dtype or None
        Derived types made of a single predefined type: that type (``nbase`` of them
        per element). Their data moves as that type, so a rank sending a vector of
        ints and one receiving plain ints (the same type signature) agree.
    """

    def __init__(
        self,
        datatype,
        name,
        predefined,
        dtype,
        extent,
        lb,
        size,
        index=None,
        base=None,
        nbase=0,
    ):
        self.datatype = datatype
        self.name = name
        self.predefined = predefined
        self.dtype = dtype
        self.extent = extent
        self.lb = lb
        self.size = size
        self.index = index
        self.base = base
        self.nbase = nbase

    def __repr__(self):
        return f"TypeInfo({self.name}, size={self.size}, extent={self.extent})"

    # ---------------------------------------------------------------- derived
    def _positions(self, count):
        """Byte offsets of the data of ``count`` consecutive elements, in order."""
        starts = np.arange(count, dtype=np.intp) * self.extent
        return (starts[:, None] + self.index[None, :]).reshape(-1)

    def span(self, count):
        """Bytes from the buffer start that ``count`` elements reach (derived)."""
        if count == 0 or self.size == 0:
            return 0
        return (count - 1) * self.extent + int(self.index.max()) + 1

    def pack(self, raw, count):
        """The data of ``count`` elements at the start of the bytes ``raw``, packed."""
        if count == 0 or self.size == 0:
            return np.empty(count * self.size, np.uint8)
        return raw[self._positions(count)]

    def unpack(self, packed, raw, count):
        """Write packed data of ``count`` elements into their places in ``raw``."""
        if count == 0 or self.size == 0:
            return
        raw[self._positions(count)] = packed.reshape(-1).view(np.uint8)


def pair_dtype(datatype):
    """The numpy dtype of one of MPI's MINLOC/MAXLOC pair types, with MPI's layout."""
    from mpi4py.util import dtlib

    return dtlib.to_numpy_dtype(datatype)


@functools.cache
def register_pair_formats():
    """Teach mpi4py the buffer formats of numpy's pair dtypes (idempotent).

    mpi4py maps a buffer's format string to an MPI datatype; numpy arrays of the
    (value, index) pairs of MINLOC and MAXLOC carry a struct format mpi4py does not
    know. Registering them maps such arrays to MPI's own pair types (the inverse of
    what ``mpi4py.util.dtlib`` does), so pairs travel as ``MPI.DOUBLE_INT`` & co.
    """
    MPI = load_mpi()
    for name in PAIR_TYPES:
        datatype = getattr(MPI, name, None)
        if datatype is None or datatype == MPI.DATATYPE_NULL:
            continue
        try:
            fmt = memoryview(np.empty(0, pair_dtype(datatype))).format
        except (ValueError, KeyError, TypeError):
            continue
        for key in {fmt, fmt[1:] if fmt[:1] in "@=<>!" else fmt}:
            MPI._typedict.setdefault(key, datatype)


def resolve_datatype(datatype, role="buffer"):
    """An ``MPI.Datatype`` from a datatype or a type code such as ``"i"``.

    Anything else raises what mpi4py's lookup of it raises: :class:`DatatypeError`
    (a KeyError) for an unknown type code or another hashable object (a number),
    :class:`BufferTypeError` (a TypeError) for an unhashable one (a list).
    """
    MPI = load_mpi()
    if isinstance(datatype, MPI.Datatype):
        return datatype
    if isinstance(datatype, str):
        try:
            return MPI._typedict[datatype]
        except KeyError:
            raise DatatypeError(
                f"{role}: cannot map type code {datatype!r} to an MPI datatype"
            ) from None
    try:
        hash(datatype)
    except TypeError:
        raise BufferTypeError(
            f"{role}: expected an MPI datatype or a type code, got {datatype!r}"
        ) from None
    raise DatatypeError(
        f"{role}: expected an MPI datatype or a type code, got {datatype!r}"
    )


def datatype_of_format(fmt, role="buffer"):
    """The MPI datatype mpi4py reads from a buffer's format string."""
    MPI = load_mpi()
    register_pair_formats()
    if fmt in ("B", None):
        return MPI.BYTE
    if fmt[:1] in "@=<>!":
        if fmt[:1] in "<>!" and (fmt[:1] == "<") != (np.little_endian):
            raise BufferAccessError(f"{role}: format {fmt!r} has non-native byte order")
        fmt = fmt[1:]
    try:
        return MPI._typedict[fmt]
    except KeyError:
        raise DatatypeError(
            f"{role}: cannot map buffer format {fmt!r} to an MPI datatype"
        ) from None


def type_info(datatype) -> TypeInfo:
    """The :class:`TypeInfo` of an MPI datatype (derived types: computed per call,
    predefined ones cached)."""
    MPI = load_mpi()
    if datatype == MPI.DATATYPE_NULL:
        raise BufferMismatchError("MPI.DATATYPE_NULL is not a usable datatype")
    register_pair_formats()
    try:
        if datatype.is_predefined:
            return _predefined(datatype.handle)
        return _derived(datatype)
    except MPI.Exception as exc:
        from wacoll.errors import MPIError

        name = _safe_name(datatype)
        raise MPIError(
            f"datatype {name} cannot be used (is it committed?): "
            f"{exc.Get_error_string()}",
            exc.Get_error_class(),
        ) from None


def _safe_name(datatype):
    try:
        return datatype.Get_name() or "(derived)"
    except Exception:  # noqa: BLE001 -- only for a message
        return repr(datatype)


@functools.cache
def _predefined(handle):
    from mpi4py.util import dtlib

    datatype = load_mpi().Datatype.fromhandle(handle)
    MPI = load_mpi()
    name = datatype.Get_name() or repr(datatype)
    lb, extent = datatype.Get_extent()
    size = datatype.Get_size()
    try:
        dtype = dtlib.to_numpy_dtype(datatype)
    except (ValueError, KeyError, TypeError):
        dtype = None
    if dtype is None or dtype.itemsize != extent or dtype.hasobject:
        if datatype in (MPI.PACKED, MPI.BYTE) or extent == size == 1:
            dtype = np.dtype(np.uint8)
        else:
            raise DatatypeError(f"datatype {name} has no numpy counterpart")
    return TypeInfo(MPI.Datatype(datatype), name, True, dtype, extent, lb, size)


def _derived(datatype):
    MPI = load_mpi()
    name = datatype.Get_name() or "(derived)"
    lb, extent = datatype.Get_extent()
    tlb, textent = datatype.Get_true_extent()
    size = datatype.Get_size()
    index = np.empty(0, np.intp)
    if size:
        if extent <= 0:
            raise DatatypeError(
                f"datatype {name} has extent {extent}; wacoll needs a positive extent"
            )
        # Pack one element whose bytes hold their own offsets, one base-256 digit per
        # pass: the packed bytes then spell where MPI read each of them.
        shift = max(0, -tlb)
        span = max(shift + tlb + textent, shift + extent)
        offsets = np.arange(span, dtype=np.int64)
        packed = np.empty(size, np.uint8)
        found = np.zeros(size, np.int64)
        for k in range(max(1, (span.bit_length() + 7) // 8)):
            probe = (offsets >> (8 * k) & 0xFF).astype(np.uint8)
            datatype.Pack(
                memoryview(probe)[shift : shift + extent], packed, 0, MPI.COMM_SELF
            )
            found |= packed.astype(np.int64) << (8 * k)
        index = (found - shift).astype(np.intp)
        base, nbase = _homogeneous(datatype, size)
        if base is not None and base.itemsize > 1:
            # x87 long double packs 10 value bytes and 6 undefined ones: take each
            # element's first byte, which always holds its value, and its width
            firsts = index[:: base.itemsize]
            index = (firsts[:, None] + np.arange(base.itemsize)).reshape(-1)
        elif np.unique(index).size != index.size or index.max() >= span:
            raise DatatypeError(f"datatype {name}: its type map could not be read")
        if index.min() < 0:
            raise DatatypeError(
                f"datatype {name} reaches below its element's address "
                f"(true lower bound {tlb}); wacoll cannot lay it out"
            )
    else:
        base, nbase = _homogeneous(datatype, size)
    dtype = np.dtype(f"V{size}") if size else np.dtype(np.uint8)
    return TypeInfo(datatype, name, False, dtype, extent, lb, size, index, base, nbase)


def _homogeneous(datatype, size):
    """``(numpy dtype, n)`` when every element is ``n`` values of one predefined type."""
    MPI = load_mpi()
    leaves = set()

    def walk(dt):
        if dt.is_predefined:
            leaves.add(dt.handle)
            return
        types = dt.Get_contents()[-1]
        try:
            for t in types:
                walk(t)
        finally:
            for t in types:
                if not t.is_predefined:
                    t.Free()

    try:
        walk(datatype)
    except MPI.Exception:
        return None, 0
    if len(leaves) != 1:
        return None, 0
    leaf = MPI.Datatype.fromhandle(next(iter(leaves)))
    try:
        info = _predefined(leaf.handle)
    except WacollError:
        return None, 0
    if not info.size or size % info.size or info.dtype.fields:
        return None, 0
    return info.dtype, size // info.size
