"""Private Cython kernels for reduction and copy work, with checking wrappers.

The compiled modules (``_copy`` and friends) are private; call the wrappers here,
which validate dtype, contiguity and length before entering Cython.
"""

import numpy as np

from wacoll._kernels._copy import copy_bytes as _copy_bytes

__all__ = ["copy_into"]


def copy_into(src, dst):
    """Copy the bytes of contiguous array ``src`` into the start of ``dst``.

    Parameters
    ----------
    src, dst : numpy.ndarray
        C-contiguous arrays; ``dst`` must be writable and at least as large as ``src``.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.arange(4, dtype=np.int32); b = np.zeros(4, dtype=np.int32)
    >>> copy_into(a, b); b.tolist()
    [0, 1, 2, 3]
    """
    from wacoll.errors import BufferMismatchError

    if not (src.flags.c_contiguous and dst.flags.c_contiguous):
        raise BufferMismatchError("copy_into needs C-contiguous arrays")
    if dst.nbytes < src.nbytes:
        raise BufferMismatchError(
            f"copy_into: destination has {dst.nbytes} bytes, source {src.nbytes}")
    _copy_bytes(src.reshape(-1).view(np.uint8), dst.reshape(-1).view(np.uint8))
