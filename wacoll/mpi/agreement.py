"""Agreement across ranks: every rank raises the same error, or none does.

A collective whose arguments are wrong on one rank must not leave the others waiting.
Before a call runs, each rank contributes whether its own arguments are valid and a
signature of the call (operation, root, count, datatype, level, operator, family,
options); one small collective compares them, and on any fault every rank raises the
same error naming the rank at fault. Vector variants also exchange their counts, and
every rank runs the same check on them.

Examples
--------
>>> from mpi4py import MPI
>>> agree(MPI.COMM_SELF, None, ("bcast", 0, 4, "<f8", None, None, None, ()))
>>> describe(("bcast", 0, 4, "<f8", None, None, None, ()))
'bcast(root=0, count=4, dtype=<f8)'
"""

from __future__ import annotations

import zlib

import numpy as np

from wacoll.errors import BufferMismatchError, PlanError, TopologyError, WacollError

__all__ = ["agree", "describe", "CONSTRUCTOR_FIELDS", "VECTOR_CHECKS"]

_ERRORS = {cls.__name__: cls for cls in (WacollError, PlanError, BufferMismatchError,
                                         TopologyError)}
#: The fields of wacoll.Comm's constructor signature, in order.
CONSTRUCTOR_FIELDS = ("topology", "family", "level", "threshold", "segment_size",
                      "large_message", "options", "validate")


def agree(comm, error, sig, info=None, *, exchange=False, validate=True):
    """Raise on every rank if any rank has ``error`` or the ranks' ``sig`` differ.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
    error : WacollError or None
        This rank's own fault with its arguments.
    sig : tuple
        What this rank believes the call is.
    info : object, optional
        Exchanged (``exchange=True``) and returned as a list, one entry per rank.
    validate : bool
        Without it (and without ``exchange``) a local error is raised locally only.
    """
    from mpi4py import MPI

    if not validate and not exchange:
        if error is not None:
            raise error
        return None
    crc = zlib.crc32(repr(sig).encode())
    if not exchange:
        flags = np.array([0 if error is None else 1, crc, -crc], dtype=np.int64)
        comm.Allreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
        if flags[0] == 0 and flags[1] == -flags[2]:
            return None
    mine = (None if error is None else (type(error).__name__, str(error)), sig, info)
    everyone = comm.allgather(mine)
    for r, (err, _sig, _info) in enumerate(everyone):
        if err is not None:
            cls = _ERRORS.get(err[0], WacollError)
            raise cls(f"rank {r}: {err[1]}")
    sigs = [s for _, s, _ in everyone]
    if any(s != sigs[0] for s in sigs):
        r = next(i for i, s in enumerate(sigs) if s != sigs[0])
        if sigs[0][0] == "constructor" and sigs[r][0] == "constructor":
            fields = [n for n, a, b in zip(CONSTRUCTOR_FIELDS, sigs[0][1:], sigs[r][1:])
                      if a != b]
            raise WacollError(f"the ranks disagree on wacoll.Comm's "
                              f"{', '.join(fields)}: rank 0 and rank {r} differ")
        raise WacollError(f"the ranks disagree on the call: rank 0 has "
                          f"{describe(sigs[0])}, rank {r} has {describe(sigs[r])}")
    return [i for _, _, i in everyone]


def describe(sig):
    if sig == ("error",):
        return "invalid arguments"
    """A readable form of a call signature."""
    if len(sig) != 8:
        return repr(sig)
    op, root, count, dtype, level, rop, family, _ = sig
    parts = [f"{op}("]
    fields = [f"root={root}" if root is not None else "", f"count={count}"
              if count is not None else "", f"dtype={dtype}" if dtype else "",
              f"op={rop}" if rop else "", f"level={level}" if level else "",
              f"family={family}" if family else ""]
    return parts[0] + ", ".join(f for f in fields if f) + ")"


# v-variant count agreement: every rank runs the same check on the same exchanged
# counts, so a mismatch raises the same error everywhere.
def _fail(message):
    raise BufferMismatchError(message)


def _scatterv_counts(prepared, infos):
    counts = infos[prepared.root][1]
    for r, (own, _) in enumerate(infos):
        if own != counts[r]:
            _fail(f"rank {r}'s recvbuf has {own} elements; the root sends "
                        f"{counts[r]}")
    prepared.counts = counts


def _gatherv_counts(prepared, infos):
    counts = infos[prepared.root][1]
    for r, (own, _) in enumerate(infos):
        if own != counts[r]:
            _fail(f"rank {r} sends {own} elements; the root expects {counts[r]}")
    prepared.counts = counts


def _same_counts(prepared, infos):
    for r, counts in enumerate(infos):
        if counts != infos[0]:
            _fail(f"rank {r}'s recvcounts differ from rank 0's")
    prepared.counts = infos[0]


def _alltoallv_counts(prepared, infos):
    P = len(infos)
    matrix = [infos[i][0] for i in range(P)]
    for j in range(P):
        for i in range(P):
            if infos[j][1][i] != matrix[i][j]:
                _fail(f"rank {j} expects {infos[j][1][i]} elements from rank {i}, "
                            f"which sends {matrix[i][j]}")
    prepared.counts = tuple(tuple(row) for row in matrix)


def _reduce_scatter_counts(prepared, infos):
    given = [c for _, c, _ in infos if c is not None]
    counts = given[0] if given else tuple(own for own, _, _ in infos)
    for r, (own, c, nin) in enumerate(infos):
        if c is not None and c != counts:
            _fail(f"rank {r}'s recvcounts differ from the others'")
        if own != counts[r]:
            _fail(f"rank {r}'s recvbuf has {own} elements; recvcounts gives "
                        f"{counts[r]}")
        if nin != sum(counts):
            _fail(f"rank {r}'s sendbuf has {nin} elements; the recvcounts add up "
                        f"to {sum(counts)}")
    prepared.counts = counts


#: The count check of each vector operation, run on the exchanged counts.
VECTOR_CHECKS = {
    "scatterv": _scatterv_counts,
    "gatherv": _gatherv_counts,
    "allgatherv": _same_counts,
    "alltoallv": _alltoallv_counts,
    "reduce_scatter": _reduce_scatter_counts,
}
