"""Reduction, copy and pack kernels, with the wrappers that check their arguments.

The compiled modules (``_reduce``, ``_copy``, ``_pack``) are private; call the wrappers
here. Each compiled entry point checks what it relies on (element type, C-contiguity,
lengths, writability, bounds) in C before touching any data and answers with a status
code; a non-zero status leaves every buffer untouched and the wrapper raises the
matching exception with a message naming the argument at fault. Doing the checks in C
keeps a small call cheaper than numpy's own in-place ufunc call: :func:`reduce_into`
with an operator name or a predefined ``MPI.Op`` is one trip into C; anything else
(a user-defined operator, an error to explain) takes a slower path in Python.

On x86-64 processors with AVX2 the reductions come from ``_reduce_avx2``, the same
Cython source compiled for AVX2, else from the portable ``_reduce`` (see
``KERNEL_VARIANT``; set ``WACOLL_KERNELS=baseline`` to force the portable one).
Both give identical results: the build forbids fused multiply-add contraction.

Operators are MPI's predefined ones, named by strings (``"sum"``, ``"MAX"``, any case)
or given as mpi4py ``MPI.Op`` objects, plus user-defined ``MPI.Op.Create`` operators.
The element types are those MPI maps from numpy: bool, int8..int64, uint8..uint64,
float32, float64, complex64 and complex128, in native byte order. Which operator is
defined for which type follows MPI's table (MPI 4.1, section 6.9.2):

=====================  ==========================================
operators              element types
=====================  ==========================================
SUM, PROD              integers, floating point, complex
MIN, MAX               integers, floating point
LAND, LOR, LXOR        integers, bool (MPI's C integer and Logical)
BAND, BOR, BXOR        integers (MPI's C integer and Byte)
=====================  ==========================================

Beyond the compiled types, numpy combines long double and long double complex
(SUM, PROD; MIN and MAX on long double), and MPI's MINLOC and MAXLOC combine the
(value, index) pairs of MPI's pair types (``MPI.DOUBLE_INT`` and the others, as the
numpy structured dtypes of ``mpi4py.util.dtlib``): the smaller (larger) value wins,
and of equal values the lower index.

Integer SUM and PROD wrap around (two's complement), as numpy's do; LAND, LOR and
LXOR give 0 or 1 of the operand type; MIN and MAX propagate NaN like ``np.minimum``.
Complex PROD uses the textbook formula without fused multiply-add, so it can differ
in the last bit from numpy builds that use FMA instructions.

No MPI call is made here, and this package never imports mpi4py: it looks at
mpi4py only when the caller passes an ``MPI.Op``.
"""

import sys

import numpy as np

from wacoll.errors import compiled_missing

try:
    from wacoll._kernels import _reduce  # type: ignore[attr-defined]  # compiled (Cython) module
    from wacoll._kernels._copy import copy_buffers as _copy_buffers
    from wacoll._kernels._pack import pack_buffers as _pack_buffers
    from wacoll._kernels._pack import unpack_buffers as _unpack_buffers
except ImportError as _exc:
    raise compiled_missing(_exc, __file__) from None
from wacoll.errors import BufferMismatchError, OperatorError  # noqa: E402
from wacoll.settings import setting  # noqa: E402

__all__ = [
    "KERNEL_VARIANT",
    "OPERATORS",
    "DTYPES",
    "OperatorError",
    "operator_name",
    "reduce_into",
    "REPRO_SUM",
    "validate_op",
    "is_commutative",
    "copy_into",
    "pack",
    "unpack",
    "kernel_codes",
    "kernel_capsule",
]


def _load_variant():
    """The fastest reduction module this processor runs ($WACOLL_KERNELS=baseline
    forces the portable one)."""
    if (setting("WACOLL_KERNELS") or "").lower() != "baseline" and _reduce.cpu_has_avx2():
        try:
            from wacoll._kernels import _reduce_avx2
        except ImportError:  # built without it (not x86-64, or no compiler support)
            pass
        else:
            return _reduce_avx2, "avx2"
    return _reduce, "baseline"


_reducer, KERNEL_VARIANT = _load_variant()
_reduce_fast = _reducer.reduce_fast

#: Names of the predefined operators, lower case.
OPERATORS = _reducer.OPERATORS
#: The element types the reduction kernels handle, as numpy dtypes.
DTYPES = tuple(np.dtype(name) for name in _reducer.TYPE_NAMES)


# Status codes of the compiled entry points (the S_* enum of _types.pxd).
_S_SRC_BUFFER, _S_DST_BUFFER, _S_DTYPE, _S_MISMATCH, _S_OP_DTYPE, _S_LENGTH = range(1, 7)
_S_ALIGN, _S_OVERLAP, _S_NEGATIVE, _S_BOUNDS, _S_TOTAL, _S_BLOCKS = range(7, 13)
_S_UNSORTED, _S_OBJECT, _S_INDEX, _S_SLOW = 13, 14, 15, 16

_OP_CODES = {name: code for code, name in enumerate(OPERATORS)}
_OP_CODES.update({name.upper(): code for code, name in enumerate(OPERATORS)})
for _name, _code in _OP_CODES.items():
    _reducer.register_operator(_name, _code)
_TYPE_CODES = {dtype: code for code, dtype in enumerate(DTYPES)}
_SIDES = {"right": False, "left": True}
_USER = -1  # the code of a user-defined operator
_MINLOC, _MAXLOC = -2, -3  # MPI's pair operators, applied with numpy
#: The code of each predefined operator by its name (:func:`operator_name`): the
#: kernels' own and MPI's pair operators.
_NAME_CODES = {name.upper(): code for code, name in enumerate(OPERATORS)}
_NAME_CODES.update(MINLOC=_MINLOC, MAXLOC=_MAXLOC)
#: Element types outside the compiled kernels that numpy combines: long double and
#: long double complex (MPI.LONG_DOUBLE, MPI.C_LONG_DOUBLE_COMPLEX).
_NUMPY_TYPES = tuple(
    dict.fromkeys(
        np.dtype(t)
        for t in (np.longdouble, np.clongdouble)
        if np.dtype(t) not in (np.dtype(np.float64), np.dtype(np.complex128))
    )
)
_NUMPY_UFUNCS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}

# Where MPI defines each operator, for error messages.
_DOMAINS = {
    "sum": "integer, floating-point and complex types",
    "prod": "integer, floating-point and complex types",
    "min": "integer and floating-point types",
    "max": "integer and floating-point types",
    "land": "integer and bool types",
    "lor": "integer and bool types",
    "lxor": "integer and bool types",
    "band": "integer types",
    "bor": "integer types",
    "bxor": "integer types",
}

#: The operator of reproducible arithmetic: exact SUM of accumulator elements
#: (:func:`wacoll._kernels.repro.combine_elements`), any order giving the same bits.
REPRO_SUM = "repro_sum"

_mpi_names = None  # {MPI.Op handle: name}, built on first use of an MPI.Op
_MPI_UNSUPPORTED = ("REPLACE", "NO_OP", "OP_NULL")


def _mpi_module():
    """mpi4py's MPI module if the program imported it, else None (never imports it)."""
    return sys.modules.get("mpi4py.MPI")


def operator_name(op):
    """The name of an operator: a name upper-cased, the name of one of MPI's
    predefined reduction operators (``MPI.MAX``: ``"MAX"``; SUM to BXOR, MINLOC and
    MAXLOC), ``"user-defined"`` for any other operator (``MPI.REPLACE`` and
    ``MPI.NO_OP`` too), or None for None.

    The one place that names an operator: the kernels find their code from the name
    (:func:`validate_op`, :func:`reduce_into`), and the collectives their choices
    (:mod:`wacoll.mpi.calls`).

    Parameters
    ----------
    op : str, mpi4py.MPI.Op or None

    Examples
    --------
    >>> operator_name("sum"), operator_name("MaxLoc"), operator_name(None)
    ('SUM', 'MAXLOC', None)
    >>> from mpi4py import MPI
    >>> operator_name(MPI.MAX), operator_name(MPI.REPLACE)
    ('MAX', 'user-defined')
    """
    if op is None:
        return None
    if isinstance(op, str):
        return op.upper()
    MPI = _mpi_module()  # (loaded already if op is an MPI.Op)
    if MPI is None or not isinstance(op, MPI.Op):
        return "user-defined"
    global _mpi_names
    if _mpi_names is None:
        _mpi_names = {getattr(MPI, name).handle: name for name in _NAME_CODES}
    return _mpi_names.get(op.handle, "user-defined")


def _mpi_op_code(op, MPI):
    """The code of an mpi4py operator: predefined, user-defined or unsupported."""
    name = operator_name(op)
    code = _NAME_CODES.get(name)
    if code is not None:
        if code >= 0 and op is getattr(MPI, name):
            _reducer.register_operator(op, code)  # later calls take the fast path
        return code
    if op.is_predefined:
        name = next(
            (f"MPI.{n}" for n in _MPI_UNSUPPORTED if getattr(MPI, n, None) == op),
            "this predefined operator",
        )
        raise OperatorError(f"{name} is not supported by wacoll's reduction kernels")
    return _USER


def _op_code(op):
    """The kernel code of ``op``, or ``_USER`` for a user-defined mpi4py operator."""
    if isinstance(op, str):
        # (ASCII only: upper() maps a few other letters onto ASCII ones, "ſum" to SUM)
        code = _NAME_CODES.get(operator_name(op)) if op.isascii() else None
        if code is None:
            raise OperatorError(
                f"unknown reduction operator {op!r}; expected one of "
                + ", ".join(OPERATORS + ("minloc", "maxloc"))
            )
        if (
            op.__class__ is str and code >= 0
        ):  # a spelling such as "Sum": let the fast path know it
            _reducer.register_operator(op, code)
        return code
    MPI = _mpi_module()
    if MPI is not None and isinstance(op, MPI.Op):
        return _mpi_op_code(op, MPI)
    raise OperatorError(
        "a reduction operator is a name such as 'sum' or an mpi4py "
        f"MPI.Op, not {type(op).__name__}"
    )


def kernel_codes(op, dtype):
    """The compiled reduction kernel's ``(operator, type)`` codes for ``op`` over
    ``dtype``, or None where it has no loop for them: an operator it does not know
    (a user-defined one, MINLOC, MAXLOC), a type it does not handle, or one MPI does
    not define ``op`` for. For a compiled caller of the kernel
    (:func:`kernel_capsule`), the runner of :mod:`wacoll.mpi.runner`.

    Examples
    --------
    >>> kernel_codes("sum", "float64") == (OPERATORS.index("sum"),
    ...                                    DTYPES.index(np.dtype("float64")))
    True
    >>> kernel_codes("band", "float64"), kernel_codes("minloc", "float64")
    (None, None)
    """
    try:
        code = _op_code(op)
    except Exception:  # noqa: BLE001 - an operator the kernels do not know
        return None
    type_code = _TYPE_CODES.get(np.dtype(dtype))
    if code < 0 or type_code is None or (code, type_code) not in _reducer.SUPPORTED:
        return None
    return code, type_code


def kernel_capsule():
    """The reduction kernel of :data:`KERNEL_VARIANT`'s build as a C function pointer
    in a capsule named ``"wacoll.reduce"``: ``int (int op, int left, int type, void
    *dst, const void *src, Py_ssize_t n)``, returning a status code, with the codes
    of :func:`kernel_codes`. The compiled runner of :mod:`wacoll.mpi.runner` calls
    it without the GIL."""
    return _reducer.kernel_capsule()


def _side(side):
    left = _SIDES.get(side) if isinstance(side, str) else None
    if left is None:
        raise OperatorError(f"side must be 'right' or 'left', not {side!r}")
    return left


def _dtype_name(obj):
    try:
        return str(np.asarray(obj).dtype)
    except Exception:  # not a buffer: described by the buffer check instead
        return type(obj).__name__


def _buffer_fault(where, name, obj, writable):
    """Why ``obj`` could not be used as a C-contiguous (writable) buffer."""
    try:
        view = memoryview(obj)
    except TypeError:
        return BufferMismatchError(
            f"{where}: {name} is a {type(obj).__name__}, not an array or buffer"
        )
    except (ValueError, BufferError):
        return BufferMismatchError(
            f"{where}: {name} of dtype {_dtype_name(obj)} cannot export a buffer"
        )
    if not view.c_contiguous:
        return BufferMismatchError(f"{where}: {name} is not C-contiguous")
    if writable and view.readonly:
        return BufferMismatchError(f"{where}: {name} is read-only")
    return BufferMismatchError(f"{where}: {name} does not export a usable buffer")


def _size(obj):
    view = memoryview(obj)
    return view.nbytes // view.itemsize if view.itemsize else 0


def _status_error(status, where, names, a, b):
    """The exception for a status about buffers ``a`` and ``b`` (source first)."""
    na, nb = names
    if status == _S_SRC_BUFFER:
        return _buffer_fault(where, na, a, False)
    if status == _S_DST_BUFFER:
        return _buffer_fault(where, nb, b, True)
    if status == _S_DTYPE:
        bad = [
            (n, _dtype_name(x))
            for n, x in ((na, a), (nb, b))
            if np.asarray(x).dtype not in _TYPE_CODES
        ]
        n, dt = bad[0] if bad else (nb, _dtype_name(b))
        return BufferMismatchError(
            f"{where}: {n} has dtype {dt}, which the kernels do not handle; expected "
            "one of " + ", ".join(_reducer.TYPE_NAMES) + " in native byte order"
        )
    if status == _S_MISMATCH:
        return BufferMismatchError(
            f"{where}: dtype mismatch: {na} is {_dtype_name(a)}, {nb} is {_dtype_name(b)}"
        )
    if status == _S_LENGTH:
        return BufferMismatchError(
            f"{where}: {na} has {_size(a)} elements, {nb} has {_size(b)}"
        )
    if status == _S_ALIGN:
        return BufferMismatchError(f"{where}: {na} or {nb} is not aligned for its dtype")
    if status == _S_OBJECT:
        return BufferMismatchError(
            f"{where}: {_dtype_name(a)} elements hold Python "
            "objects and cannot be copied as bytes"
        )
    return BufferMismatchError(f"{where}: invalid buffers (status {status})")


def _op_dtype_error(code, dtype):
    name = OPERATORS[code]
    return BufferMismatchError(
        f"MPI.{name.upper()} is not defined for {dtype} "
        f"(MPI defines it for {_DOMAINS[name]})"
    )


def reduce_into(op, src, dst, side="right"):
    """Combine ``src`` into ``dst`` in place: ``dst = dst (op) src``.

    Parameters
    ----------
    op : str or mpi4py.MPI.Op
        A predefined operator by name (``"sum"``, ``"prod"``, ``"min"``, ``"max"``,
        ``"land"``, ``"lor"``, ``"lxor"``, ``"band"``, ``"bor"``, ``"bxor"``, any
        case), the matching ``MPI.Op`` (``MPI.SUM``, ...), or a user-defined operator
        from ``MPI.Op.Create``; or :data:`REPRO_SUM` (``"repro_sum"``), the exact sum
        of accumulator elements (:func:`wacoll._kernels.repro.combine_elements`).
    src : numpy.ndarray
        C-contiguous operand; read only.
    dst : numpy.ndarray
        C-contiguous, writable, same dtype and number of elements as ``src``; receives
        the result. ``src`` and ``dst`` may be the same array, or overlap (``src`` is
        then read as it was before the call).
    side : {"right", "left"}
        Where the incoming ``src`` goes: ``"right"`` computes ``dst (op) src``,
        ``"left"`` computes ``src (op) dst``. Only non-commutative (user-defined)
        operators give different results (and, for floats, which NaN is kept).

    Raises
    ------
    OperatorError
        Unknown operator name, an unsupported predefined ``MPI.Op`` (MAXLOC, MINLOC,
        REPLACE, NO_OP) or a bad ``side``.
    wacoll.errors.BufferMismatchError
        Buffers that do not fit (dtype, contiguity, length, read-only ``dst``), or an
        operator MPI does not define for the dtype, such as MIN on complex numbers.
        ``dst`` is left untouched.

    Notes
    -----
    A user-defined operator is applied through ``op.Reduce_local``, which computes
    ``inoutbuf = inbuf (op) inoutbuf`` with MPI's datatype for the array's dtype, as
    an MPI library would call the operator's function. Side ``"right"`` therefore
    works on a copy of ``src``.

    Examples
    --------
    >>> import numpy as np
    >>> acc = np.array([1.0, 5.0, 3.0]); incoming = np.array([4.0, 2.0, 6.0])
    >>> reduce_into("sum", incoming, acc); acc.tolist()
    [5.0, 7.0, 9.0]
    >>> reduce_into("MAX", incoming, acc); acc.tolist()
    [5.0, 7.0, 9.0]
    >>> flags = np.array([0, 3, 0], dtype=np.int8)
    >>> reduce_into("lor", np.array([2, 0, 0], dtype=np.int8), flags); flags.tolist()
    [1, 1, 0]
    >>> reduce_into("min", np.ones(2, complex), np.ones(2, complex))
    Traceback (most recent call last):
    ...
    wacoll.errors.BufferMismatchError: MPI.MIN is not defined for complex128 (MPI defines it for integer and floating-point types)
    """
    if _reduce_fast(op, src, dst, side):
        _reduce_slow(op, src, dst, side)


def _reduce_slow(op, src, dst, side):
    """Everything the fast path declined, having written nothing: an operator to
    resolve, a user-defined operator, overlapping buffers, or an error to raise."""
    if isinstance(op, str) and op.lower() == REPRO_SUM:
        _side(side)  # exact: both sides give the same bits; still check the name
        _reduce_repro(src, dst)
        return
    code = _op_code(op)
    left = _side(side)
    if code == _USER:
        _reduce_user(op, src, dst, left)
        return
    if code in (_MINLOC, _MAXLOC) or getattr(dst, "dtype", None) in _NUMPY_TYPES:
        _reduce_numpy(code, src, dst, left)
        return
    status = _reducer.reduce_buffers(code, left, src, dst)
    if status == _S_OVERLAP:
        status = _reducer.reduce_buffers(code, left, np.array(src, copy=True), dst)
    if status == _S_OP_DTYPE:
        raise _op_dtype_error(code, _dtype_name(dst))
    if status:
        raise _status_error(status, "reduce_into", ("src", "dst"), src, dst)


#: Words per accumulator row, by the bytes of one accumulator element (a complex
#: element has two rows): float32 and complex64 rows of 3, float64 and complex128 of 4.
_ACC_ROW = {24: 3, 32: 4, 48: 3, 64: 4}
_repro_kernels = None


def _repro_module():
    """The compiled accumulator kernels of this build's variant (AVX2 or portable)."""
    global _repro_kernels
    if _repro_kernels is None:
        module = None
        if KERNEL_VARIANT == "avx2":
            try:
                from wacoll._kernels import _repro_avx2 as module
            except ImportError:  # built without it
                module = None
        if module is None:
            from wacoll._kernels import _repro as module
        _repro_kernels = module
    return _repro_kernels


def _reduce_repro(src, dst):
    """:data:`REPRO_SUM`: ``dst[i] (+)= src[i]`` on 1-D arrays of accumulator elements
    (the ``numpy.void`` element dtype of the reproducible-sum module), exactly."""
    for name, obj, writable in (("src", src, False), ("dst", dst, True)):
        dt = getattr(obj, "dtype", None)
        if (
            not isinstance(obj, np.ndarray)
            or obj.ndim != 1
            or dt.kind != "V"
            or dt.names is not None
            or dt.itemsize not in _ACC_ROW
        ):
            raise BufferMismatchError(
                f"reduce_into: {REPRO_SUM} needs 1-D arrays of accumulator elements "
                f"(void of 24, 32, 48 or 64 bytes); {name} is no array of accumulator "
                f"elements"
            )
        if not obj.flags.c_contiguous or (writable and not obj.flags.writeable):
            raise _buffer_fault("reduce_into", name, obj, writable)
    if src.dtype != dst.dtype:
        raise _status_error(_S_MISMATCH, "reduce_into", ("src", "dst"), src, dst)
    if src.size != dst.size:
        raise _status_error(_S_LENGTH, "reduce_into", ("src", "dst"), src, dst)
    if not dst.size:
        return
    if np.may_share_memory(src, dst):  # the kernel reads src while writing dst
        src = src.copy()
    width = _ACC_ROW[dst.dtype.itemsize]
    _repro_module().combine(
        src.view(np.int64).reshape(-1, width), dst.view(np.int64).reshape(-1, width)
    )


def _reduce_user(op, src, dst, left):
    """Apply a user-defined mpi4py operator through ``Reduce_local``."""
    for name, obj, writable in (("src", src, False), ("dst", dst, True)):
        if (
            not isinstance(obj, np.ndarray)
            or not obj.flags.c_contiguous
            or (writable and not obj.flags.writeable)
        ):
            raise _buffer_fault("reduce_into", name, obj, writable)
    if src.dtype != dst.dtype:
        raise _status_error(_S_MISMATCH, "reduce_into", ("src", "dst"), src, dst)
    if src.size != dst.size:
        raise _status_error(_S_LENGTH, "reduce_into", ("src", "dst"), src, dst)
    if src.size == 0:
        return
    if left:
        # MPI forbids aliasing inbuf and inoutbuf.
        incoming = src.copy() if np.may_share_memory(src, dst) else src
        op.Reduce_local(incoming, dst)  # dst = src (op) dst
    else:
        result = src.copy()
        op.Reduce_local(dst, result)  # result = dst (op) src
        dst[...] = result.reshape(dst.shape)


def _is_pair(dtype):
    """A (value, index) pair dtype of MPI's MINLOC/MAXLOC types."""
    names = dtype.names
    return (
        names is not None
        and len(names) == 2
        and dtype.fields[names[1]][0] == np.dtype(np.intc)
        and dtype.fields[names[0]][0].kind in "iuf"
    )


def _validate_numpy(code, dtype):
    if code in (_MINLOC, _MAXLOC):
        if not _is_pair(dtype):
            raise OperatorError(
                f"MPI.{'MINLOC' if code == _MINLOC else 'MAXLOC'} "
                f"needs (value, index) pairs such as MPI.DOUBLE_INT, "
                f"not {dtype}"
            )
        return
    name = OPERATORS[code]
    if name not in _NUMPY_UFUNCS or (dtype.kind == "c" and name in ("min", "max")):
        raise _op_dtype_error(code, dtype)


def _reduce_numpy(code, src, dst, left):
    """MINLOC/MAXLOC on pairs and the long double types, with numpy."""
    for name, obj, writable in (("src", src, False), ("dst", dst, True)):
        if not isinstance(obj, np.ndarray) or (writable and not obj.flags.writeable):
            raise _buffer_fault("reduce_into", name, obj, writable)
    if src.dtype != dst.dtype:
        raise _status_error(_S_MISMATCH, "reduce_into", ("src", "dst"), src, dst)
    if src.size != dst.size:
        raise _status_error(_S_LENGTH, "reduce_into", ("src", "dst"), src, dst)
    _validate_numpy(code, dst.dtype)
    if src.size == 0:
        return
    src = src.reshape(-1)
    out = dst.reshape(-1)
    if code in (_MINLOC, _MAXLOC):
        value, index = dst.dtype.names
        sv, si, dv, di = src[value], src[index], out[value], out[index]
        better = sv < dv if code == _MINLOC else sv > dv
        take = better | ((sv == dv) & (si < di))  # ties: the lower index (MPI)
        out[take] = src[take]
    else:
        ufunc = _NUMPY_UFUNCS[OPERATORS[code]]
        if left:
            ufunc(src, out, out=out)
        else:
            ufunc(out, src, out=out)
    if out.base is not dst and not np.shares_memory(out, dst):
        dst[...] = out.reshape(dst.shape)


def validate_op(op, dtype):
    """Raise unless ``op`` can reduce elements of ``dtype``.

    Lets a caller (an executor on every rank, before any message) reject a reduction
    with the same exception :func:`reduce_into` would raise later. User-defined
    operators pass for any dtype.

    Parameters
    ----------
    op : str or mpi4py.MPI.Op
    dtype : numpy.dtype or anything ``np.dtype`` accepts

    Raises
    ------
    OperatorError
        Unknown or unsupported operator.
    wacoll.errors.BufferMismatchError
        A dtype the kernels do not handle, or one MPI does not define ``op`` for.

    Examples
    --------
    >>> validate_op("band", "int32")
    >>> validate_op("band", "float64")
    Traceback (most recent call last):
    ...
    wacoll.errors.BufferMismatchError: MPI.BAND is not defined for float64 (MPI defines it for integer types)
    """
    code = _op_code(op)
    if code == _USER:
        return
    dtype = np.dtype(dtype)
    if code in (_MINLOC, _MAXLOC) or dtype in _NUMPY_TYPES:
        _validate_numpy(code, dtype)
        return
    t = _TYPE_CODES.get(dtype)
    if t is None:
        raise BufferMismatchError(
            f"dtype {dtype} is not handled by the reduction kernels; expected one of "
            + ", ".join(_reducer.TYPE_NAMES)
            + " in native byte order"
        )
    if (code, t) not in _reducer.SUPPORTED:
        raise _op_dtype_error(code, dtype)


def is_commutative(op):
    """Whether ``op`` commutes: True for every predefined operator.

    Parameters
    ----------
    op : str or mpi4py.MPI.Op

    Examples
    --------
    >>> is_commutative("prod")
    True
    """
    if _op_code(op) == _USER:
        return bool(op.Is_commutative())
    return True


def copy_into(src, dst):
    """Copy the bytes of contiguous array ``src`` into the start of ``dst``.

    Parameters
    ----------
    src, dst : numpy.ndarray
        C-contiguous arrays (or other buffers); ``dst`` must be writable and at least
        as large as ``src`` in bytes. They may overlap.

    Raises
    ------
    wacoll.errors.BufferMismatchError
        A non-contiguous or read-only buffer, ``dst`` too small, or elements holding
        Python objects.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.arange(4, dtype=np.int32); b = np.zeros(4, dtype=np.int32)
    >>> copy_into(a, b); b.tolist()
    [0, 1, 2, 3]
    """
    status = _copy_buffers(src, dst)
    if status:
        if status == _S_LENGTH:
            raise BufferMismatchError(
                f"copy_into: dst has {memoryview(dst).nbytes} "
                f"bytes, src {memoryview(src).nbytes}"
            )
        raise _status_error(status, "copy_into", ("src", "dst"), src, dst)


def _index_array(values, where, name):
    """``values`` as a contiguous 1-D intp array, refusing non-integers."""
    if (
        values.__class__ is np.ndarray
        and values.dtype == np.intp
        and values.ndim == 1
        and values.flags.c_contiguous
    ):
        return values
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise BufferMismatchError(
            f"{where}: {name} must be one-dimensional, not of shape {arr.shape}"
        )
    if arr.size and arr.dtype.kind not in "iu":
        raise BufferMismatchError(f"{where}: {name} must hold integers, not {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.intp)


def _layout_error(status, where, displs, counts, full_name, full, packed_name, packed):
    if status == _S_BLOCKS:
        return BufferMismatchError(
            f"{where}: {len(displs)} displacements but {len(counts)} counts"
        )
    if status == _S_NEGATIVE:
        i = int(np.flatnonzero((displs < 0) | (counts < 0))[0])
        return BufferMismatchError(
            f"{where}: block {i} has displacement {displs[i]} and count {counts[i]}; "
            "both must be non-negative"
        )
    if status == _S_BOUNDS:
        n = _size(full)
        i = int(np.flatnonzero(displs > n - counts)[0])
        return BufferMismatchError(
            f"{where}: block {i} (displacement {displs[i]}, count {counts[i]}) runs "
            f"past the end of {full_name} ({n} elements)"
        )
    if status == _S_TOTAL:
        return BufferMismatchError(
            f"{where}: counts add up to {int(counts.sum())} elements, {packed_name} "
            f"has {_size(packed)}"
        )
    return None


def pack(src, displs, counts, out):
    """Gather blocks of ``src`` into ``out``, back to back in block order.

    Block ``i`` is ``src.flat[displs[i] : displs[i] + counts[i]]``.

    Parameters
    ----------
    src : numpy.ndarray
        C-contiguous array, read as a flat sequence of elements.
    displs, counts : sequence of int
        Element displacements and counts of the blocks, non-negative; blocks may
        overlap or repeat.
    out : numpy.ndarray
        C-contiguous, writable, same dtype as ``src``, exactly ``sum(counts)``
        elements.

    Raises
    ------
    wacoll.errors.BufferMismatchError
        Before anything is written: mismatched dtypes, non-contiguous or read-only
        buffers, negative values, a block past the end of ``src``, or counts that do
        not add up to the length of ``out``.

    Examples
    --------
    >>> import numpy as np
    >>> out = np.empty(3, dtype=np.int64)
    >>> pack(np.arange(10), [7, 2], [1, 2], out); out.tolist()
    [7, 2, 3]
    """
    d = _index_array(displs, "pack", "displs")
    c = _index_array(counts, "pack", "counts")
    status = _pack_buffers(src, d, c, out)
    if status == _S_OVERLAP:
        status = _pack_buffers(np.array(src, copy=True), d, c, out)
    if status:
        raise (
            _layout_error(status, "pack", d, c, "src", src, "out", out)
            or _status_error(status, "pack", ("src", "out"), src, out)
        )


def unpack(packed, displs, counts, dst):
    """Scatter the back-to-back blocks of ``packed`` into ``dst``; inverse of :func:`pack`.

    Block ``i`` goes to ``dst.flat[displs[i] : displs[i] + counts[i]]``; elements of
    ``dst`` outside every block keep their values.

    Parameters
    ----------
    packed : numpy.ndarray
        C-contiguous, exactly ``sum(counts)`` elements.
    displs, counts : sequence of int
        Element displacements and counts, non-negative; the blocks must not overlap
        in ``dst`` (their order is free).
    dst : numpy.ndarray
        C-contiguous, writable, same dtype as ``packed``.

    Raises
    ------
    wacoll.errors.BufferMismatchError
        Before anything is written: as :func:`pack`, and when two blocks overlap.

    Examples
    --------
    >>> import numpy as np
    >>> dst = np.zeros(6, dtype=np.int64)
    >>> unpack(np.array([7, 8, 9]), [4, 0], [2, 1], dst); dst.tolist()
    [9, 0, 0, 0, 7, 8]
    """
    d = _index_array(displs, "unpack", "displs")
    c = _index_array(counts, "unpack", "counts")
    status = _unpack_buffers(packed, d, c, dst)
    if status == _S_UNSORTED:
        _validate_disjoint(d, c)
        status = _unpack_buffers(packed, d, c, dst, False)
    if status == _S_OVERLAP:
        packed = np.array(packed, copy=True)
        status = _unpack_buffers(packed, d, c, dst, False)
    if status:
        raise (
            _layout_error(status, "unpack", d, c, "dst", dst, "packed", packed)
            or _status_error(status, "unpack", ("packed", "dst"), packed, dst)
        )


def _validate_disjoint(displs, counts):
    """Raise if two non-empty blocks overlap."""
    blocks = np.flatnonzero(counts > 0)
    order = blocks[np.argsort(displs[blocks], kind="stable")]
    ends = displs[order] + counts[order]
    clash = np.flatnonzero(displs[order[1:]] < ends[:-1])
    if clash.size:
        i, j = sorted((int(order[clash[0]]), int(order[clash[0] + 1])))
        raise BufferMismatchError(f"unpack: blocks {i} and {j} overlap in dst")
