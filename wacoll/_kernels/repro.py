"""Reproducible floating-point SUM: accumulators whose combination is exact.

A float sum depends on the order of its operands; an MPI reduction combines the ranks'
contributions in whatever order and grouping its tree gives. The functions here make
an element-wise SUM give the same bits for any order and grouping: each rank turns
its vector into *accumulators* (:func:`to_accumulator`), accumulators are combined
(:func:`combine`, or :func:`add_values` straight from plain values) by exact integer
arithmetic, and the final accumulator is rounded once (:func:`from_accumulator`).

The algorithm
-------------
It follows the binned (indexed) summation of Demmel and Nguyen ("Parallel
reproducible summation", IEEE TC 2015) and Ahrens, Demmel and Nguyen ("Algorithms for
efficient reproducible floating point summation", ACM TOMS 2020, the basis of
ReproBLAS), with integer bins instead of floating-point ones.

The binary exponent range of the type is cut into *bins* of W = 32 bit positions at
fixed places, from just below the smallest subnormal up past the largest finite
value (68 bins for float64, 10 for float32). A value's significand covers at most
three (float64) or two (float32) consecutive bins, so a value splits exactly into
32-bit integer pieces, one per bin, each carrying the value's sign. An accumulator
holds the index of a *top* bin and the integer sums of the pieces that fall into the
top bin and the K - 1 bins below it (the fold K is 3 for float64, as in ReproBLAS,
and 2 for float32); pieces in lower bins are dropped. Adding a value whose top bin is
higher moves the window up and drops the bins that fall out of it.

Because bins sit at fixed places, the piece a value puts into a bin does not depend
on anything else, and because the window's top is the highest top bin of all values
(a maximum: order-independent), the final accumulator holds, for each bin in the
window, the exact integer sum of all values' pieces in that bin. Integer sums do not
depend on order or grouping, so any combination tree gives the same bits. Carries are
never moved between bins (a carry out of a bin that is later dropped would make the
result depend on when the drop happened); instead each int64 bin has 31 bits of
headroom above its 32-bit pieces: up to :data:`MAX_DEPOSITS` = 2**31 - 1 values per
accumulator are summed exactly, and the accumulator counts its values, so
:func:`from_accumulator` refuses (:class:`~wacoll.errors.AccumulatorOverflowError`)
an accumulator beyond that bound instead of returning a wrong answer.
:func:`from_accumulator` adds the bins into one 128-bit integer and rounds it once,
to nearest with ties to even, to the output type (subnormals included).

Layout and size on the wire
---------------------------
An accumulator is a row of int64 words in native byte order: ``[head, top bin,
next bin, ...]``. The head packs the top bin's index (bits 0-7), flags for the special
values (bits 8-11) and the number of values deposited (bits 16-63). A row of zeros is
the empty sum, so ``numpy.zeros`` makes a neutral accumulator. A complex element has
two rows, real part then imaginary part. The accumulators of ``n`` elements form one
C-contiguous int64 array of shape ``(n, 4)``, ``(n, 3)``, ``(n, 2, 4)`` or
``(n, 2, 3)``; :func:`accumulator_dtype` gives it as a numpy sub-array dtype:

============  =====  ==================  ==================  =======================
value dtype   fold   accumulator shape   bytes per element   on the wire (packed)
============  =====  ==================  ==================  =======================
float64       3      (n, 4)              32 (4x the data)    8 / 16 (1x / 2x)
float32       2      (n, 3)              24 (6x)             4 / 11 (1x / 2.75x)
complex128    3      (n, 2, 4)           64 (4x)             16 / 32 (1x / 2x)
complex64     2      (n, 2, 3)           48 (6x)             8 / 22 (1x / 2.75x)
============  =====  ==================  ==================  =======================

On the wire a plan's messages are packed (:mod:`wacoll._kernels.repro_wire`): an
accumulator that holds one value travels as that value, a partial sum of up to 128
values in the second figure of the last column (narrower bins and a shared head;
a sum of up to 2**15 values takes one byte more per bin).
(For comparison, ReproBLAS's float64 indexed type with fold 3 takes 48 bytes.) The
words are integers: an accumulator can be sent as raw bytes or as int64 and combined
on any machine of the same byte order.

Accuracy
--------
Let ``S`` be the exact sum of the ``n`` values of one element and ``M`` the largest
magnitude among them. A value is deposited exactly when it is at least 2**-44 M
(float32: 2**-41 M); a smaller one loses less than 2**-64 M (float32: 2**-32 M) by
truncation of its pieces below the window. So the result is the correctly rounded
sum (``math.fsum``) whenever no nonzero value is below 2**-44 M, and in general

    ``|result - S| <= n 2**-64 M + |S| 2**-53``        (float64)
    ``|result - S| <= n 2**-32 M + |S| 2**-24``        (float32)

The literature's bound for ReproBLAS's binned sum with fold K and bin width W has
the same form, ``n 2**(W (1 - K)) M`` plus a few units of rounding of ``|S|`` (with
W = 40, K = 3 for float64 its first term is ``n 2**-80 M``). A plain recursive sum
errs by up to about ``(n - 1) 2**-53 sum |x|``, which swamps a small ``|S|`` under
cancellation: for ``[1e16, 1.0, -1e16]`` ``numpy.sum`` gives 0.0, these functions 1.0.

The sum never overflows inside an accumulator: ``[1e308, 1e308, -1e308]`` gives
1e308 in any order, where a plain sum gives ``inf`` or 1e308 depending on the
order. Only a final result of magnitude ``>= (2 - 2**-53) 2**1023`` (the IEEE
rounding threshold; float32: ``(2 - 2**-24) 2**127``) becomes ``±inf``.

Special values
--------------
Independent of order, and as IEEE addition gives them where that is itself
order-independent:

* any NaN, or both ``+inf`` and ``-inf``: NaN (a quiet NaN with the sign bit clear;
  a plain sum returns one of the operand NaN's payloads, which one depending on the
  order, or the processor's default NaN for ``inf - inf``);
* ``+inf`` (and no ``-inf`` or NaN): ``+inf``; likewise ``-inf``;
* an exact zero sum: ``-0.0`` if every value was ``-0.0``, else ``+0.0`` (as in IEEE
  round-to-nearest); the empty sum gives ``+0.0``;
* subnormal values and results are exact and correctly rounded (no flush to zero).

Examples
--------
>>> import numpy as np
>>> x = np.array([1e16, 1e308, 3.0]); y = np.array([1.0, 1e308, -1e-300])
>>> z = np.array([-1e16, -1e308, 0.5])
>>> acc = to_accumulator(x)
>>> combine(to_accumulator(z), acc) is acc
True
>>> add_values(y, acc) is acc
True
>>> from_accumulator(acc).tolist()
[1.0, 1e+308, 3.5]
>>> with np.errstate(over="ignore"):
...     (x + y + z).tolist()
[0.0, inf, 3.5]
>>> accumulator_bytes("float64"), accumulator_bytes(np.complex64)
(32, 48)
"""

import numpy as np

from wacoll.errors import AccumulatorOverflowError, BufferMismatchError

__all__ = [
    "KERNEL_VARIANT",
    "compiled",
    "DTYPES",
    "FOLD",
    "BIN_BITS",
    "MAX_DEPOSITS",
    "accumulator_dtype",
    "accumulator_bytes",
    "new_accumulator",
    "to_accumulator",
    "add_values",
    "combine",
    "from_accumulator",
    "reproducible_sum",
    "element_dtype",
    "as_accumulators",
    "combine_elements",
]


def _load_variant():
    """The AVX2 build where the reduction kernels use theirs, else the portable one."""
    from wacoll._kernels import KERNEL_VARIANT as variant

    if variant == "avx2":
        try:
            from wacoll._kernels import _repro_avx2
        except ImportError:  # built without it
            pass
        else:
            return _repro_avx2, "avx2"
    from wacoll._kernels import _repro

    return _repro, "baseline"


#: The compiled module in use, ``_repro_avx2`` or ``_repro`` (:data:`KERNEL_VARIANT`
#: says which). Its constants describe an accumulator's head word: the flags
#: ``F_NOT_NEG_ZERO``, ``F_POS_INF``, ``F_NEG_INF`` and ``F_NAN``, and ``COUNT_SHIFT``,
#: where the number of values deposited starts.
compiled, KERNEL_VARIANT = _load_variant()

#: The value dtypes handled, in native byte order.
DTYPES = tuple(np.dtype(n) for n in ("float32", "float64", "complex64", "complex128"))
#: The number of bins an accumulator keeps, by value dtype.
FOLD = {
    np.dtype("float32"): 2,
    np.dtype("float64"): 3,
    np.dtype("complex64"): 2,
    np.dtype("complex128"): 3,
}
#: The width of a bin in bits (each value's piece in a bin is below 2**BIN_BITS).
BIN_BITS = 32
#: The most values one accumulator sums exactly (the count in its head).
MAX_DEPOSITS = compiled.MAX_DEPOSITS

_REAL = {
    np.dtype("float32"): np.dtype("float32"),
    np.dtype("float64"): np.dtype("float64"),
    np.dtype("complex64"): np.dtype("float32"),
    np.dtype("complex128"): np.dtype("float64"),
}
_DOUBLE = frozenset(dt for dt in DTYPES if _REAL[dt] == np.float64)
_TAIL = {dt: ((2,) if dt.kind == "c" else ()) + (FOLD[dt] + 1,) for dt in DTYPES}
_BY_TAIL = {tail: dt for dt, tail in _TAIL.items()}
_INT64 = np.dtype(np.int64)
_EXPECTED = "float32, float64, complex64 or complex128 in native byte order"


def _value_dtype(dtype, where="accumulator_dtype"):
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise BufferMismatchError(
            f"{where}: {dtype!r} is not a dtype; expected " + _EXPECTED
        ) from None
    if dt not in _TAIL:
        raise BufferMismatchError(
            f"{where}: dtype {dt} has no reproducible sum; expected " + _EXPECTED
        )
    return dt


def accumulator_dtype(dtype):
    """The numpy dtype of one element's accumulator, for values of ``dtype``.

    It is a sub-array dtype of int64 words, so ``numpy.zeros(n, accumulator_dtype(dt))``
    is an int64 array of shape ``(n,) + tail``: the empty accumulators of ``n`` values.

    Parameters
    ----------
    dtype : dtype-like
        float32, float64, complex64 or complex128.

    Returns
    -------
    numpy.dtype
        ``itemsize`` is the size in memory per element, in bytes (on the wire a
        plan's messages are packed: :mod:`wacoll._kernels.repro_wire`).

    Raises
    ------
    wacoll.errors.BufferMismatchError
        Any other dtype.

    Examples
    --------
    >>> accumulator_dtype("float64")
    dtype(('<i8', (4,)))
    >>> accumulator_dtype("complex64").itemsize
    48
    """
    dt = _value_dtype(dtype)
    return np.dtype((_INT64, _TAIL[dt]))


def accumulator_bytes(dtype):
    """Bytes of accumulator per element of ``dtype``: 32 (float64), 24 (float32),
    64 (complex128), 48 (complex64).

    Examples
    --------
    >>> [accumulator_bytes(t) for t in ("float32", "float64", "complex64", "complex128")]
    [24, 32, 48, 64]
    """
    return accumulator_dtype(dtype).itemsize


def new_accumulator(n, dtype):
    """Empty accumulators (the neutral element) for ``n`` values of ``dtype``.

    Examples
    --------
    >>> new_accumulator(2, "float32").shape
    (2, 3)
    >>> from_accumulator(new_accumulator(2, "float32")).tolist()
    [0.0, 0.0]
    """
    return np.zeros(n, accumulator_dtype(dtype))


def _validate_values(where, x):
    """``x``'s dtype, after checking it is a 1-D C-contiguous aligned array."""
    if not isinstance(x, np.ndarray):
        raise BufferMismatchError(
            f"{where}: x is a {type(x).__name__}, not a numpy array"
        )
    dt = x.dtype
    if dt not in _TAIL:
        raise BufferMismatchError(f"{where}: x has dtype {dt}; expected " + _EXPECTED)
    if x.ndim != 1:
        raise BufferMismatchError(f"{where}: x has {x.ndim} dimensions, expected 1")
    flags = x.flags
    if not flags.c_contiguous:
        raise BufferMismatchError(f"{where}: x is not C-contiguous")
    if not flags.aligned:
        raise BufferMismatchError(f"{where}: x is not aligned for its dtype")
    return dt


def _validate_acc(where, name, acc, writable, dtype=None, n=None):
    """The value dtype ``acc`` is laid out for, after checking the array: int64,
    C-contiguous, aligned, (writable), and of shape ``(n,) + tail`` for ``dtype``."""
    if not isinstance(acc, np.ndarray):
        raise BufferMismatchError(
            f"{where}: {name} is a {type(acc).__name__}, not a numpy array"
        )
    if acc.dtype != _INT64:
        raise BufferMismatchError(
            f"{where}: {name} has dtype {acc.dtype}; an "
            "accumulator is int64 in native byte order"
        )
    flags = acc.flags
    if not flags.c_contiguous:
        raise BufferMismatchError(f"{where}: {name} is not C-contiguous")
    if not flags.aligned:
        raise BufferMismatchError(f"{where}: {name} is not aligned for int64")
    if writable and not flags.writeable:
        raise BufferMismatchError(f"{where}: {name} is read-only")
    if dtype is None:
        dtype = _BY_TAIL.get(acc.shape[1:]) if acc.ndim >= 2 else None
        if dtype is None:
            raise BufferMismatchError(
                f"{where}: {name} has shape {acc.shape}, which is no accumulator layout; "
                "expected (n, 4), (n, 3), (n, 2, 4) or (n, 2, 3)"
            )
    want = (acc.shape[0] if n is None else n,) + _TAIL[dtype]
    if acc.shape != want:
        raise BufferMismatchError(
            f"{where}: {name} has shape {acc.shape}; {want[0]} {dtype} values need "
            f"accumulators of shape {want}"
        )
    return dtype


def _rows(acc):
    """``acc`` as a 2-D array of rows (a complex element's two rows in turn)."""
    return acc if acc.ndim == 2 else acc.reshape(-1, acc.shape[-1])


def _reals(x):
    return x.view(_REAL[x.dtype]) if x.dtype.kind == "c" else x


def to_accumulator(x, out=None):
    """The accumulators of one contribution: ``out[i]`` holds ``x[i]`` alone.

    Parameters
    ----------
    x : numpy.ndarray
        1-D, C-contiguous, float32, float64, complex64 or complex128.
    out : numpy.ndarray, optional
        Writable int64 array of shape ``(len(x),) + tail`` (see
        :func:`accumulator_dtype`); overwritten. New if omitted.

    Returns
    -------
    numpy.ndarray
        ``out``.

    Raises
    ------
    wacoll.errors.BufferMismatchError
        A wrong dtype, dimension, shape or length, a non-contiguous or read-only
        array. Nothing is written.

    Examples
    --------
    >>> import numpy as np
    >>> acc = to_accumulator(np.array([1.5, -0.0]))
    >>> acc.shape, from_accumulator(acc).tolist()
    ((2, 4), [1.5, -0.0])
    >>> to_accumulator(np.arange(3))
    Traceback (most recent call last):
    ...
    wacoll.errors.BufferMismatchError: to_accumulator: x has dtype int64; expected float32, float64, complex64 or complex128 in native byte order
    """
    dt = _validate_values("to_accumulator", x)
    if out is None:
        out = np.empty(x.shape[0], accumulator_dtype(dt))
    else:
        _validate_acc("to_accumulator", "out", out, True, dt, x.shape[0])
    if dt in _DOUBLE:
        compiled.to_acc_f64(_reals(x), _rows(out))
    else:
        compiled.to_acc_f32(_reals(x), _rows(out))
    return out


def add_values(x, acc):
    """Deposit plain values into accumulators: ``acc[i] (+)= x[i]``.

    The same as ``combine(to_accumulator(x), acc)`` in one pass, without the
    temporary: for a receive-and-combine of raw (not yet converted) data.

    Parameters
    ----------
    x : numpy.ndarray
        1-D, C-contiguous, float32, float64, complex64 or complex128.
    acc : numpy.ndarray
        Writable accumulators for ``len(x)`` values of ``x.dtype``.

    Returns
    -------
    numpy.ndarray
        ``acc``.

    Raises
    ------
    wacoll.errors.BufferMismatchError
        As :func:`to_accumulator`. Nothing is written.

    Examples
    --------
    >>> import numpy as np
    >>> acc = new_accumulator(2, np.float32)
    >>> for v in ([3e7, 1.0], [1.0, 2.0], [-3e7, 3.0]):
    ...     _ = add_values(np.array(v, np.float32), acc)
    >>> from_accumulator(acc).tolist()
    [1.0, 6.0]
    """
    dt = _validate_values("add_values", x)
    _validate_acc("add_values", "acc", acc, True, dt, x.shape[0])
    if dt in _DOUBLE:
        compiled.add_f64(_reals(x), _rows(acc))
    else:
        compiled.add_f32(_reals(x), _rows(acc))
    return acc


def combine(src, dst):
    """Add accumulators: ``dst[i] (+)= src[i]``, exactly.

    Exactly associative and commutative: any order and grouping of combinations of
    the same accumulators gives identical bits. ``src`` may be ``dst`` itself.

    Parameters
    ----------
    src : numpy.ndarray
        Accumulators (int64, C-contiguous), e.g. received from another rank.
    dst : numpy.ndarray
        Writable accumulators of the same shape.

    Returns
    -------
    numpy.ndarray
        ``dst``.

    Raises
    ------
    wacoll.errors.BufferMismatchError
        Arrays that are not accumulators, or of different shapes. Nothing is written.

    Examples
    --------
    >>> import numpy as np
    >>> a, b, c = (to_accumulator(np.array([v])) for v in (0.1, 0.2, 0.3))
    >>> left = combine(c, combine(b, a.copy()))       # (a + b) + c
    >>> right = combine(combine(c, b.copy()), a.copy())  # a + (b + c)
    >>> bool((left == right).all()), from_accumulator(left).tolist()
    (True, [0.6])
    >>> (0.1 + 0.2) + 0.3, 0.1 + (0.2 + 0.3)
    (0.6000000000000001, 0.6)
    """
    dt = _validate_acc("combine", "dst", dst, True)
    _validate_acc("combine", "src", src, False, dt, dst.shape[0])
    if np.may_share_memory(src, dst):  # the kernel reads src while writing dst
        src = src.copy()
    if dst.shape[0]:
        compiled.combine(_rows(src), _rows(dst))
    return dst


def from_accumulator(acc, out=None):
    """The sums held by accumulators, rounded once to the value type.

    Parameters
    ----------
    acc : numpy.ndarray
        Accumulators; their shape says the value type (``(n, 4)``: float64,
        ``(n, 3)``: float32, ``(n, 2, 4)``: complex128, ``(n, 2, 3)``: complex64).
    out : numpy.ndarray, optional
        Writable 1-D C-contiguous array of ``n`` values of that type. New if omitted.

    Returns
    -------
    numpy.ndarray
        ``out``: each element the sum, correctly rounded from the accumulator's
        exact content; its bits do not depend on how the accumulator was formed.

    Raises
    ------
    wacoll.errors.BufferMismatchError
        ``acc`` is no accumulator, or ``out`` does not fit it.
    wacoll.errors.AccumulatorOverflowError
        An element's accumulator holds more than :data:`MAX_DEPOSITS` values
        (its sum could be wrong); ``index`` names the first. Nothing is written.

    Examples
    --------
    >>> import numpy as np
    >>> acc = to_accumulator(np.array([1 + 2j], np.complex64))
    >>> combine(acc.copy(), acc).shape
    (1, 2, 3)
    >>> from_accumulator(acc)
    array([2.+4.j], dtype=complex64)
    """
    dt = _validate_acc("from_accumulator", "acc", acc, False)
    n = acc.shape[0]
    if out is None:
        out = np.empty(n, dt)
    else:
        if not isinstance(out, np.ndarray) or out.dtype != dt:
            have = out.dtype if isinstance(out, np.ndarray) else type(out).__name__
            raise BufferMismatchError(
                f"from_accumulator: out has dtype {have}; the "
                f"accumulators of shape {acc.shape} hold {dt}"
            )
        if out.shape != (n,):
            raise BufferMismatchError(
                f"from_accumulator: out has shape {out.shape}, expected ({n},)"
            )
        if not out.flags.c_contiguous:
            raise BufferMismatchError("from_accumulator: out is not C-contiguous")
        if not out.flags.writeable:
            raise BufferMismatchError("from_accumulator: out is read-only")
        if not out.flags.aligned:
            raise BufferMismatchError("from_accumulator: out is not aligned")
    fn = compiled.from_acc_f64 if dt in _DOUBLE else compiled.from_acc_f32
    bad = fn(_rows(acc), _reals(out)) if n else -1
    if bad >= 0:
        index = bad // 2 if dt.kind == "c" else bad
        raise AccumulatorOverflowError(
            f"from_accumulator: element {index} sums more than {MAX_DEPOSITS} values, "
            "beyond what its bins hold exactly",
            index=index,
        )
    return out


def reproducible_sum(arrays):
    """The element-wise sum of equal-length vectors, independent of their order.

    Parameters
    ----------
    arrays : sequence of numpy.ndarray
        At least one; all 1-D, C-contiguous, of one dtype and length.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> import numpy as np
    >>> parts = [np.array([0.1]), np.array([0.2]), np.array([0.3])]
    >>> reproducible_sum(parts).tolist(), reproducible_sum(parts[::-1]).tolist()
    ([0.6], [0.6])
    """
    arrays = list(arrays)
    if not arrays:
        raise BufferMismatchError("reproducible_sum: no arrays to sum")
    first = arrays[0]
    _validate_values("reproducible_sum", first)
    acc = to_accumulator(first)
    for x in arrays[1:]:
        if isinstance(x, np.ndarray) and x.dtype != first.dtype:
            raise BufferMismatchError(
                f"reproducible_sum: dtype mismatch: {first.dtype} and {x.dtype}"
            )
        add_values(x, acc)
    return from_accumulator(acc)


# ---------------------------------------------------------------- accumulator elements
_TAIL_BY_BYTES = {int(np.prod(tail)) * 8: tail for tail in _TAIL.values()}


def element_dtype(dtype):
    """The opaque dtype of one element's accumulator, for values of ``dtype``.

    A plan that runs on accumulators moves and combines them as whole elements: a
    1-D array of this ``numpy.void`` dtype holds one accumulator per element, so
    slicing, packing and messages work on it as on any 1-D buffer.
    :func:`as_accumulators` views it as the int64 accumulators again.

    Examples
    --------
    >>> element_dtype("float64"), element_dtype("complex64")
    (dtype('V32'), dtype('V48'))
    """
    return np.dtype((np.void, accumulator_bytes(dtype)))


def as_accumulators(elements):
    """View a 1-D array of :func:`element_dtype` elements as int64 accumulators.

    Also accepts an accumulator array itself (returned as it is).

    Raises
    ------
    wacoll.errors.BufferMismatchError
        Not a C-contiguous array of accumulator elements.

    Examples
    --------
    >>> import numpy as np
    >>> acc = to_accumulator(np.array([1.0, 2.0]))
    >>> elements = acc.view(element_dtype("float64")).reshape(-1)
    >>> elements.shape, as_accumulators(elements).shape
    ((2,), (2, 4))
    >>> from_accumulator(as_accumulators(elements)).tolist()
    [1.0, 2.0]
    """
    if not isinstance(elements, np.ndarray):
        raise BufferMismatchError(
            f"as_accumulators: a {type(elements).__name__} is not a numpy array"
        )
    if elements.dtype == _INT64:
        return elements
    tail = _TAIL_BY_BYTES.get(elements.dtype.itemsize)
    if (
        elements.dtype.kind != "V"
        or elements.dtype.names is not None
        or tail is None
        or elements.ndim != 1
    ):
        raise BufferMismatchError(
            f"as_accumulators: {elements.dtype} {elements.ndim}-D array is no array of "
            "accumulator elements (1-D V24, V32, V48 or V64)"
        )
    if not elements.flags.c_contiguous:
        raise BufferMismatchError("as_accumulators: the elements are not C-contiguous")
    return elements.view(_INT64).reshape((elements.shape[0],) + tail)


def combine_elements(src, dst):
    """:func:`combine` on arrays of accumulator elements: ``dst[i] (+)= src[i]``.

    The reduction the executor runs for reproducible arithmetic (the kernels'
    operator ``"repro_sum"``).

    Examples
    --------
    >>> import numpy as np
    >>> e = element_dtype("float64")
    >>> a = to_accumulator(np.array([0.1])).view(e).reshape(-1)
    >>> b = to_accumulator(np.array([0.2])).view(e).reshape(-1)
    >>> combine_elements(b, a) is a
    True
    >>> from_accumulator(as_accumulators(a)).tolist()
    [0.30000000000000004]
    """
    dst_acc = as_accumulators(dst)
    src_acc = as_accumulators(src)
    combine(src_acc, dst_acc)
    return dst
