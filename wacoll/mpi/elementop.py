"""A user-defined operator on a derived datatype, applied to whole packed elements.

MPI lets an application's own operator (``MPI.Op.Create``) reduce a derived
datatype: the operator's function is called with buffers laid out as the datatype
says and the datatype itself, and it combines whole elements. wacoll's plans move a
derived datatype's data *packed* (:mod:`wacoll.mpi.datatypes`); for such a reduction
the plan's unit is one whole packed element (``size`` bytes, never split by a
segment or a block boundary), and its combines go through :class:`ElementOp`: the
two packed runs are unpacked into temporaries shaped as the datatype lays out
``n`` elements (the bytes outside the type map are zero), the operator is applied
to them with the derived datatype (``MPI.Op.Reduce_local``, as the MPI library
applies it), and the result is packed back.

:class:`ElementOp` is an ``MPI.Op`` (a view of the application's operator: the same
handle, never freed by wacoll), so the kernels' path for user-defined operators
(:func:`wacoll._kernels.reduce_into`, operand order included: ``inoutbuf = inbuf
(op) inoutbuf``, the lower ranks' operand on the left) and the compiled runner's
refusal of them (the Python executor runs them) hold for it unchanged.

Examples
--------
>>> import numpy as np
>>> from mpi4py import MPI
>>> from wacoll.mpi.datatypes import type_info
>>> vec = MPI.INT.Create_vector(2, 1, 2).Commit()      # ints 0 and 2 of 3
>>> def twice_plus(a, b, t):                             # b = a + 2 b, on the type map
...     x = np.frombuffer(a, "i")[::2]; y = np.frombuffer(b, "i")[::2]
...     y[...] = x + 2 * y
>>> user = MPI.Op.Create(twice_plus, commute=False)
>>> op = ElementOp(user, type_info(vec))
>>> left = np.array([1, 2], "i").view("V8"); right = np.array([10, 20], "i").view("V8")
>>> op.Reduce_local(left, right); right.view("i").tolist()
[21, 42]
>>> user.Free(); vec.Free()
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from wacoll.errors import BufferMismatchError

__all__ = ["ElementOp", "element_dtype"]


def element_dtype(info) -> np.dtype:
    """The dtype of one packed element of derived datatype ``info`` (``size`` bytes).

    Examples
    --------
    >>> from mpi4py import MPI
    >>> from wacoll.mpi.datatypes import type_info
    >>> dt = MPI.DOUBLE.Create_contiguous(3).Commit()
    >>> element_dtype(type_info(dt))
    dtype('V24')
    >>> dt.Free()
    """
    return np.dtype((np.void, info.size))


class ElementOp(MPI.Op):
    """An application's ``MPI.Op`` applied to packed elements of a derived datatype.

    Parameters
    ----------
    op : mpi4py.MPI.Op
        A user-defined operator (``MPI.Op.Create``); it stays the application's: this
        object shares its handle and never frees it.
    info : wacoll.mpi.datatypes.TypeInfo
        The derived datatype the reduction names (size > 0).

    Attributes
    ----------
    info : wacoll.mpi.datatypes.TypeInfo
    dtype : numpy.dtype
        One packed element (:func:`element_dtype`).
    """

    def __new__(cls, op, info):
        self = super().__new__(cls, op)
        self.info = info
        self.dtype = element_dtype(info)
        return self

    def __repr__(self):
        return f"ElementOp({self.info.name})"

    def _shaped(self, packed, n):
        """``n`` packed elements unpacked where the datatype lays them out."""
        info = self.info
        raw = np.zeros(max(info.span(n), n * info.extent), np.uint8)
        info.unpack(packed, raw, n)
        return raw

    def Reduce_local(self, inbuf, inoutbuf):
        """``inoutbuf = inbuf (op) inoutbuf`` on packed elements.

        Parameters
        ----------
        inbuf : numpy.ndarray
            Packed elements (``info.size`` bytes each), C-contiguous; read only.
        inoutbuf : numpy.ndarray
            As many packed elements, C-contiguous and writable: the result.
        """
        info = self.info
        src = np.ascontiguousarray(inbuf).reshape(-1).view(np.uint8)
        dst = inoutbuf.reshape(-1).view(np.uint8)
        if src.size != dst.size or src.size % info.size:
            raise BufferMismatchError(
                f"{self!r}: {src.size} and {dst.size} bytes are not the same whole "
                f"number of {info.size}-byte elements"
            )
        n = src.size // info.size
        if not n:
            return
        a, b = self._shaped(src, n), self._shaped(dst, n)
        MPI.Op.Reduce_local(self, [a, n, info.datatype], [b, n, info.datatype])
        dst[...] = info.pack(b, n)
