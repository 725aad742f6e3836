"""Reproducible arithmetic in the MPI world: a call's values to accumulators and back.

When the selection policy runs a strict float SUM on reproducible arithmetic (a plan
whose ``arithmetic`` is ``"reproducible"``), the executor does not combine the
user's values: :func:`stage` turns this rank's contribution into exact accumulators
(:func:`wacoll._kernels.repro.to_accumulator`), one accumulator element per value,
and gives the run an accumulator receive buffer; the plan moves and combines those
(:data:`wacoll._kernels.REPRO_SUM`); the returned ``unstage`` rounds the result
once into the user's receive buffer (:func:`~wacoll._kernels.repro.from_accumulator`)
on the ranks that receive one. The bits do not depend on the plan, the topology,
the root or the rank order.

Each element costs :func:`~wacoll._kernels.repro.accumulator_bytes` bytes in memory
(32 for float64, 4x the value); the executor packs the messages
(:mod:`wacoll._kernels.repro_wire`: 8 bytes per float64 element for a rank's own
values, 16 for a partial sum). A blocking call passes its
communicator's scratch dictionary, so the accumulator arrays are allocated once and
reused by the calls that follow.

Examples
--------
>>> import numpy as np
>>> contribution, result = np.array([0.1, 1e300]), np.empty(2)
>>> acc_in, acc_out, unstage = stage(contribution, result)
>>> acc_in.dtype, acc_out.shape
(dtype('V32'), (2,))
>>> acc_out[:] = acc_in          # what a one-rank plan does
>>> unstage(); result.tolist()
[0.1, 1e+300]
"""

from __future__ import annotations

import numpy as np

from wacoll._kernels import repro
from wacoll.mpi.scratch import scratch_array

__all__ = ["stage"]


def stage(inbuf, outbuf, scratch=None):
    """The accumulator buffers of one rank's part in a reproducible reduction.

    Parameters
    ----------
    inbuf : numpy.ndarray or None
        This rank's contribution: 1-D float32, float64, complex64 or complex128.
    outbuf : numpy.ndarray or None
        Where this rank receives its result (None where it receives none).
    scratch : dict, optional
        Reusable arrays (``"repro:in"``, ``"repro:out"``), filled on first use.

    Returns
    -------
    acc_in, acc_out : numpy.ndarray or None
        1-D arrays of accumulator elements (:func:`~wacoll._kernels.repro.element_dtype`):
        the contribution converted, and an uninitialised receive buffer of
        ``outbuf``'s length (None when ``outbuf`` is None).
    unstage : callable
        Call once the plan has run: writes the rounded sums into ``outbuf``.

    Raises
    ------
    wacoll.errors.BufferMismatchError
        A dtype without a reproducible sum.
    """
    values = inbuf if inbuf is not None else outbuf
    if values is None:
        raise ValueError("stage: a reduction needs a send or a receive buffer")
    element = repro.element_dtype(values.dtype)
    acc_in = None
    if inbuf is not None:
        acc_in = scratch_array(scratch, "repro:in", inbuf.size, element)
        repro.to_accumulator(
            np.ascontiguousarray(inbuf).reshape(-1), out=repro.as_accumulators(acc_in)
        )
    if outbuf is None:
        return acc_in, None, _nothing
    acc_out = scratch_array(scratch, "repro:out", outbuf.size, element)

    def unstage():
        acc = repro.as_accumulators(acc_out)
        if outbuf.flags.c_contiguous and outbuf.ndim == 1:
            repro.from_accumulator(acc, out=outbuf)
        else:
            outbuf[...] = repro.from_accumulator(acc).reshape(outbuf.shape)

    return acc_in, acc_out, unstage


def _nothing():
    """A rank without a receive buffer has nothing to unstage."""
