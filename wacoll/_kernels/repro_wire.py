"""Accumulators on the wire: messages of a plan on reproducible arithmetic, made small.

An accumulator element is 32 bytes for a float64 value (:mod:`wacoll._kernels.repro`),
4 times the value; on a wide-area link of 1 MB/s the 4 KiB of a 1 KiB vector take 3 ms
longer than the values would. Most of those bytes are slack: a bin holds the sum of
32-bit pieces in an int64, so a partial sum of ``n`` values needs ``33 + log2(n)`` bits
per bin, and the heads of one message usually share their count and flags. So a
message is encoded, losslessly, in the smaller of two forms:

*values*
    When every accumulator of the message holds exactly one value (a rank's own
    contribution, the first hop of a tree), the values themselves: the rounding of a
    single value is exact and converting it back gives the same accumulator bits. 8
    bytes per float64 element, 4 per float32.
*packed* (:mod:`wacoll._kernels._wire`)
    One byte per row for the top bin's index when the heads share their count and
    flags (else 8), then each bin in the fewest bytes that hold every bin of the
    message. For a sum of 2 to 128 float64 values that is 1 + 3 x 5 = 16 bytes per
    element; a sum of up to 2**15 values takes 1 + 3 x 6 = 19.

Either form starts with a 24-byte header that names the form, the element type and
the number of rows, so a message of the wrong size or type is refused when unpacked,
not misread. The
receiver knows its element type and count; a receive buffer of
:func:`max_message_bytes` holds any message of that many elements.

Examples
--------
>>> import numpy as np
>>> from wacoll._kernels import repro
>>> e = repro.element_dtype("float64")
>>> one = repro.to_accumulator(np.arange(128.0) / 3).view(e).reshape(-1)
>>> len(pack(one)), 128 * e.itemsize                  # values: 8 bytes each
(1048, 4096)
>>> two = one.copy(); _ = repro.combine_elements(one, two)
>>> len(pack(two))                                     # packed: 16 bytes each
2072
>>> back = np.empty(128, e)
>>> _ = unpack(pack(two), back); bool((back == two).all())
True
"""

from __future__ import annotations

import numpy as np

from wacoll._kernels import _wire, repro  # type: ignore[attr-defined]  # compiled (Cython) module
from wacoll.errors import BufferMismatchError

__all__ = ["pack", "unpack", "max_message_bytes", "wire_bytes"]

_HEADER = _wire.HEADER_BYTES
_VALUES = 2
#: Head bits: the count of values deposited starts at bit 16; infinities and NaN flags.
_COUNT_SHIFT, _SPECIAL = 16, 0xE00
#: Value dtype by bytes of one accumulator element.
#: Header words are little-endian, as in a packed message.
_WORD = np.dtype("<i8")
_VALUE_DTYPE = {repro.accumulator_bytes(dt): dt for dt in repro.DTYPES}


def _element_layout(elements, where):
    """``(value dtype, rows as a 2-D int64 array)`` of accumulator elements."""
    dt = getattr(elements, "dtype", None)
    if (
        not isinstance(elements, np.ndarray)
        or elements.ndim != 1
        or dt.kind != "V"
        or dt.names is not None
        or dt.itemsize not in _VALUE_DTYPE
        or not elements.flags.c_contiguous
    ):
        raise BufferMismatchError(
            f"{where}: expected a 1-D C-contiguous array of "
            "accumulator elements (void of 24, 32, 48 or 64 bytes)"
        )
    acc = repro.as_accumulators(elements)
    return _VALUE_DTYPE[dt.itemsize], acc, acc.reshape(-1, acc.shape[-1])


def _tag(elements):
    """Header byte 3: the element type, as its accumulator's number of int64 words."""
    return elements.dtype.itemsize // 8


def max_message_bytes(n, element):
    """Bytes that hold any message of ``n`` accumulator elements of dtype ``element``
    (what a receive needs; :func:`pack` needs 8 more to write one).

    Examples
    --------
    >>> max_message_bytes(128, repro.element_dtype("float64"))
    4120
    """
    return _HEADER + n * np.dtype(element).itemsize


def wire_bytes(dtype, values):
    """Bytes per element of a packed message of sums of up to ``values`` values of
    ``dtype`` (the header left out): what the cost model counts a message as.

    Examples
    --------
    >>> wire_bytes("float64", 8), wire_bytes("float64", 1), wire_bytes("complex64", 8)
    (16, 8, 22)
    """
    dt = np.dtype(dtype)
    if values <= 1:
        return dt.itemsize
    rows = 2 if dt.kind == "c" else 1
    bits = 1 + repro.BIN_BITS + int(values - 1).bit_length()  # sign, piece, carries
    return rows * (1 + repro.FOLD[dt] * -(-bits // 8))


def pack(elements, out=None):
    """The message that carries ``elements``, in the smaller form.

    Parameters
    ----------
    elements : numpy.ndarray
        1-D C-contiguous accumulator elements (:func:`~wacoll._kernels.repro.element_dtype`).
    out : numpy.ndarray, optional
        uint8 array of at least :func:`max_message_bytes` plus 8 bytes; if omitted,
        a new one of the message's size (plus 8).

    Returns
    -------
    numpy.ndarray
        The message: a uint8 view of the start of ``out``.
    """
    dt, acc, rows = _element_layout(elements, "pack")
    heads = rows[:, 0]
    if len(heads) and (heads >> _COUNT_SHIFT == 1).all() and not (heads & _SPECIAL).any():
        nbytes = _HEADER + len(elements) * dt.itemsize
        if out is None:
            out = np.empty(nbytes, np.uint8)
        elif out.dtype != np.uint8 or out.ndim != 1 or len(out) < nbytes:
            raise BufferMismatchError(
                f"pack: out must be 1-D uint8 of at least {nbytes} "
                f"bytes for these {len(elements)} elements"
            )
        header = out[:_HEADER].view(_WORD)
        header[:] = (_VALUES | _tag(elements) << 24, len(rows), 0)
        repro.from_accumulator(acc, out=out[_HEADER:nbytes].view(dt))
        return out[:nbytes]
    try:
        out, nbytes = _wire.pack(rows, out, _tag(elements))
    except (ValueError, TypeError) as exc:
        raise BufferMismatchError(f"pack: {exc}") from None
    return out[:nbytes]


def unpack(message, out):
    """Write the elements a message carries into ``out``; return ``out``.

    Parameters
    ----------
    message : numpy.ndarray
        1-D uint8 (or any contiguous array, read as bytes): what :func:`pack` made,
        possibly followed by unused bytes.
    out : numpy.ndarray
        The accumulator elements to fill; their number and dtype must be the message's.

    Raises
    ------
    wacoll.errors.BufferMismatchError
        The message is not one of ``len(out)`` elements of ``out``'s dtype.
    """
    dt, acc, rows = _element_layout(out, "unpack")
    raw = message.reshape(-1).view(np.uint8)
    if len(raw) < _HEADER:
        raise BufferMismatchError(
            f"unpack: {len(raw)} bytes are no message (a header "
            f"has {_HEADER}; {len(out)} {dt} elements were expected)"
        )
    form, tag = int(raw[0]), int(raw[3])
    if tag != _tag(out) or form not in (_VALUES, _wire.PACKED):
        sender = _VALUE_DTYPE.get(tag * 8)
        raise BufferMismatchError(
            f"unpack: the message carries {sender or 'no'} accumulators; {len(out)} {dt} "
            "elements were expected"
        )
    if form == _VALUES:
        got = int(raw[8:16].view(_WORD)[0])
        need = _HEADER + len(out) * dt.itemsize
        if got != len(rows) or len(raw) < need:
            raise BufferMismatchError(
                f"unpack: the message carries {got} accumulator rows in {len(raw)} "
                f"bytes; {len(out)} {dt} elements were expected"
            )
        values = raw[_HEADER:need].view(dt)
        if not values.flags.aligned:  # (a receive slot is aligned: this is rare)
            values = values.copy()
        repro.to_accumulator(values, out=acc)
        return out
    try:
        _wire.unpack(raw, rows)
    except ValueError as exc:
        raise BufferMismatchError(
            f"unpack: {exc} ({len(out)} {dt} elements were expected)"
        ) from None
    return out
