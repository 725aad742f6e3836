"""What each collective operation promises, in terms of blocks and buffers.

An operation's data is cut into *blocks* with global ids: segments of the vector
(bcast, reduce, allreduce, scan, exscan), one block per rank (scatter, gather,
allgather, reduce-scatter and their v-variants), or one per (source, destination)
pair (alltoall: block ``i * size + j`` goes from rank ``i`` to rank ``j``). Data never
changes block id as it moves, so a block id names the same piece of the vector
everywhere.

Each rank has two user buffers: ``"in"`` (the send buffer, read-only) and ``"out"``
(the receive buffer; for bcast the one buffer, whose content at the root is the
source). Plans may use scratch buffers of any other name.

A value is either a *leaf* (the contribution of one rank to that block) or a
combination of two values. This module states, per rank, the initial leaves and the
expected final values; :mod:`wacoll.plans.prove` proves a plan reaches them.

Examples
--------
>>> from wacoll.plans.operations import block_counts, expected, initial
>>> block_counts("alltoall", 2, count=3)
(3, 3, 3, 3)
>>> initial("gather", 3, 0, 3, rank=2)
{('in', 2): 2}
>>> expected("scan", 3, None, 1, rank=2)
{('out', 0): ('fold', 3)}
"""

from __future__ import annotations

from dataclasses import dataclass

from wacoll.errors import PlanError

__all__ = [
    "OPERATIONS",
    "OpSpec",
    "LEVELS",
    "ARITHMETICS",
    "spec",
    "block_counts",
    "round_segments",
    "in_blocks",
    "out_blocks",
    "initial",
    "expected",
]

#: Reduction levels, weakest guarantee last (see DESIGN: strict, associative, commutative).
LEVELS = ("strict", "associative", "commutative")

#: How a reduction plan's combinations are computed. ``"plain"``: the operator on the
#: values themselves (a float sum then depends on the order). ``"reproducible"``: a
#: float SUM on exact accumulators (:mod:`wacoll._kernels.repro`), whose combination
#: is exactly associative and commutative, so a plan that keeps only the
#: commutative level still gives the bits of level ``"strict"``.
ARITHMETICS = ("plain", "reproducible")


@dataclass(frozen=True)
class OpSpec:
    """The shape of one collective operation.

    Attributes
    ----------
    name : str
        Lower-case operation name, e.g. ``"allreduce"``.
    kind : {"barrier", "movement", "reduction"}
        Whether it synchronises, moves data, or combines it.
    rooted : bool
        Whether it has a root.
    layout : {"none", "segments", "per_rank", "pairs"}
        How the vector is cut into blocks.
    """

    name: str
    kind: str
    rooted: bool
    layout: str


OPERATIONS = {
    s.name: s
    for s in (
        OpSpec("barrier", "barrier", False, "none"),
        OpSpec("bcast", "movement", True, "segments"),
        OpSpec("scatter", "movement", True, "per_rank"),
        OpSpec("scatterv", "movement", True, "per_rank"),
        OpSpec("gather", "movement", True, "per_rank"),
        OpSpec("gatherv", "movement", True, "per_rank"),
        OpSpec("allgather", "movement", False, "per_rank"),
        OpSpec("allgatherv", "movement", False, "per_rank"),
        OpSpec("alltoall", "movement", False, "pairs"),
        OpSpec("alltoallv", "movement", False, "pairs"),
        OpSpec("reduce", "reduction", True, "segments"),
        OpSpec("allreduce", "reduction", False, "segments"),
        OpSpec("reduce_scatter", "reduction", False, "per_rank"),
        OpSpec("reduce_scatter_block", "reduction", False, "per_rank"),
        OpSpec("scan", "reduction", False, "segments"),
        OpSpec("exscan", "reduction", False, "segments"),
    )
}


def spec(op: str) -> OpSpec:
    """The :class:`OpSpec` of ``op``; a clear error for an unknown name."""
    try:
        return OPERATIONS[op]
    except (KeyError, TypeError):
        raise PlanError(
            f"unknown operation {op!r}; known: {', '.join(OPERATIONS)}"
        ) from None


def _split(count, parts):
    base, extra = divmod(count, parts)
    return tuple(base + (1 if i < extra else 0) for i in range(parts))


def _validate_count(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PlanError(f"{name} must be an integer >= 0, got {value!r}")


def round_segments(segments, k):
    """``segments`` rounded up to a multiple of ``k``, for a plan whose ``k`` parts
    each take whole segments.

    Parameters
    ----------
    segments : object
        The segments asked for; anything but a positive integer is returned as it
        is, for :func:`block_counts` to refuse.
    k : int
        The parts.

    Returns
    -------
    int or object

    Examples
    --------
    >>> round_segments(5, 4), round_segments(8, 4), round_segments(0, 4)
    (8, 8, 0)
    """
    if isinstance(segments, int) and not isinstance(segments, bool) and segments > 0:
        return k * -(-segments // k)
    return segments


def block_counts(
    op: str, size: int, *, count: int = 1, counts=None, segments: int = 1
) -> tuple:
    """The element count of every block of ``op`` on ``size`` ranks.

    Parameters
    ----------
    op : str
        Operation name.
    size : int
        Number of ranks.
    count : int
        Elements of the whole vector (segmented ops) or per block (the others).
    counts : sequence of int, optional
        Per-rank counts for v-variants and reduce-scatter; a ``size`` x ``size``
        nested sequence (sender, receiver) for alltoallv.
    segments : int
        Number of segments a segmented vector is cut into (pipelining).

    Examples
    --------
    >>> block_counts("bcast", 4, count=10, segments=3)
    (4, 3, 3)
    >>> block_counts("gatherv", 3, counts=[1, 0, 2])
    (1, 0, 2)
    """
    s = spec(op)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise PlanError(f"size must be a positive integer, got {size!r}")
    _validate_count("count", count)
    if s.layout == "none":
        return ()
    if s.layout == "segments":
        if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
            raise PlanError(f"segments must be a positive integer, got {segments!r}")
        return _split(count, segments)
    if s.layout == "per_rank":
        if counts is None:
            return (count,) * size
        counts = tuple(counts)
        if len(counts) != size:
            raise PlanError(f"{op} needs {size} counts, one per rank; got {len(counts)}")
        for i, c in enumerate(counts):
            _validate_count(f"counts[{i}]", c)
        return counts
    # pairs
    if counts is None:
        return (count,) * (size * size)
    rows = [tuple(row) for row in counts]
    if len(rows) != size or any(len(row) != size for row in rows):
        raise PlanError(
            f"{op} needs a {size} x {size} matrix of counts (sender, receiver)"
        )
    flat = tuple(c for row in rows for c in row)
    for i, c in enumerate(flat):
        _validate_count(f"counts[{i // size}][{i % size}]", c)
    return flat


def in_blocks(op: str, size: int, root, nblocks: int, rank: int) -> tuple:
    """The blocks the user's ``"in"`` buffer of ``rank`` holds, in memory order."""
    s = spec(op)
    if s.name == "bcast" or s.kind == "barrier":
        return ()
    if s.name in ("scatter", "scatterv"):
        return tuple(range(nblocks)) if rank == root else ()
    if s.layout == "per_rank" and s.kind == "movement":
        return (rank,)
    if s.layout == "pairs":
        return tuple(range(rank * size, (rank + 1) * size))
    return tuple(range(nblocks))


def out_blocks(op: str, size: int, root, nblocks: int, rank: int) -> tuple:
    """The blocks the user's ``"out"`` buffer of ``rank`` holds, in memory order."""
    s = spec(op)
    name = s.name
    if s.kind == "barrier":
        return ()
    if name in ("bcast", "allreduce", "scan", "exscan") or name.startswith("allgather"):
        return tuple(range(nblocks))
    if name in ("scatter", "scatterv", "reduce_scatter", "reduce_scatter_block"):
        return (rank,)
    if name in ("gather", "gatherv", "reduce"):
        return tuple(range(nblocks)) if rank == root else ()
    # alltoall: block j*size + rank comes from j
    return tuple(j * size + rank for j in range(size))


def initial(op: str, size: int, root, nblocks: int, rank: int) -> dict:
    """The leaves ``rank`` holds before the operation: ``{(buffer, block): source}``."""
    s = spec(op)
    if s.name == "bcast":
        return {("out", b): root for b in range(nblocks)} if rank == root else {}
    return {("in", b): rank for b in in_blocks(op, size, root, nblocks, rank)}


def expected(op: str, size: int, root, nblocks: int, rank: int) -> dict:
    """The values ``rank`` must hold afterwards in ``"out"``.

    A value is the source rank of a moved block, ``("tree", n)`` for the reduction
    of the contributions of ranks ``0..n-1`` (canonical form: the binomial tree at
    rank 0, operands in rank order) or ``("fold", n)`` for the same set whose
    canonical form is the left fold (scan and exscan prefixes).
    """
    s = spec(op)
    name = s.name
    if s.kind == "barrier":
        return {}
    if s.kind == "movement":
        if name == "bcast":
            return {("out", b): root for b in range(nblocks)}
        if name.startswith("scatter"):
            return {("out", rank): root}
        if name.startswith("gather"):
            return {("out", b): b for b in range(nblocks)} if rank == root else {}
        if name.startswith("allgather"):
            return {("out", b): b for b in range(nblocks)}
        return {("out", j * size + rank): j for j in range(size)}
    if name == "reduce":
        return (
            {("out", b): ("tree", size) for b in range(nblocks)} if rank == root else {}
        )
    if name == "allreduce":
        return {("out", b): ("tree", size) for b in range(nblocks)}
    if name.startswith("reduce_scatter"):
        return {("out", rank): ("tree", size)}
    if name == "scan":
        return {("out", b): ("fold", rank + 1) for b in range(nblocks)}
    # exscan: rank 0's result is undefined
    if rank == 0:
        return {}
    return {("out", b): ("fold", rank) for b in range(nblocks)}
