"""Scratch memory that the calls of a communicator reuse.

A blocking call passes its communicator's scratch dictionary to the executor and to
the accumulator staging, so arrays are allocated once and later calls reuse them
(fresh pages cost a fault each, and a large call would pay them every time).
"""

from __future__ import annotations

import numpy as np

__all__ = ["scratch_array"]


def scratch_array(scratch, name, n, dtype):
    """``n`` elements of ``dtype`` for scratch buffer ``name``: a fresh array, or a
    view of ``scratch[name]`` (grown when too small) that later calls reuse.

    Examples
    --------
    >>> held = {}
    >>> a = scratch_array(held, "acc", 4, np.float64)
    >>> b = scratch_array(held, "acc", 3, np.float64)
    >>> np.shares_memory(a, b), b.shape
    (True, (3,))
    """
    if scratch is None:
        return np.empty(n, dtype)
    held = scratch.get(name)
    if held is None or held.dtype != dtype or held.size < n:
        held = scratch[name] = np.empty(n, dtype)
    return held[:n]
