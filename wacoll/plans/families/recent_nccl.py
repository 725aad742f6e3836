"""NCCL's double binary tree and PAT, for the recent family.

**Double binary tree** (NCCL 2.4, 2019: Jeaugey, "Massively Scale Your Deep
Learning Training with NCCL 2.4", NVIDIA technical blog; Sanders, Speck & Träff,
"Two-tree algorithms for full bandwidth broadcast, reduction and scan", Parallel
Computing 35(12), 2009, whose idea it takes). :func:`btree` is NCCL's
``ncclGetBtree``: an in-order binary tree over the ranks (rank ``x`` with lowest set
bit ``2**k`` has children ``x - 2**(k-1)`` and ``x + 2**(k-1)``, the latter pulled
in to the largest in-range ``x + 2**j``), rooted at rank 0, whose only child is the
highest power of two below ``P``. :func:`dtree` is ``ncclGetDtree``: the second tree
is the first mirrored (``P - 1 - r``) on an even ``P``, shifted by one rank on an
odd one, so that a rank that is a leaf in one tree is an inner node in the other.
Each tree reduces and broadcasts half of the vector, pipelined in segments
(:func:`double_tree_allreduce`).

**PAT** (Jeaugey, "PAT: a new algorithm for all-gather and reduce-scatter operations
at scale", arXiv:2506.20252, 2025; NCCL 2.23's "Parallel Aggregated Trees"): the
allgather broadcasts each rank's block down a binomial tree shifted to that rank,
all ``P`` trees at once and aggregated per message, with the dimensions of Bruck's
algorithm reversed: the first step sends one block to the farthest rank
(``r + 2**(L-1)``), the last ``P/2`` blocks to the next rank, so that the long
distances carry the least data. The reduce-scatter is the allgather in reverse.
``aggregation`` bounds the blocks (ranks' data) of one message; NCCL bounds them by
its intermediate buffers, and orders the trees' steps so that those stay of
logarithmic size, which a plan (whose blocks keep their places in ``"out"`` and a
scratch buffer) does not need to model.

Examples
--------
>>> btree(14)[8], btree(14)[12]  # (parent, children) as in NCCL's picture
((0, (4, 12)), (8, (10, 13)))
>>> dtree(12)[1][11]  # the mirror: rank 11 (0 of the first tree) roots it
(None, (3,))
"""

from __future__ import annotations

from wacoll.errors import PlanError

__all__ = [
    "btree",
    "dtree",
    "tree_depth",
    "double_tree_allreduce",
    "pat_steps",
    "pat_allgather",
    "pat_reduce_scatter",
]


def btree(size: int) -> dict:
    """NCCL's binary tree: rank -> ``(parent or None, children)``, children in
    NCCL's order (``down0``, then ``down1``)."""
    out: dict[int, tuple[int | None, tuple[int, ...]]] = {}
    for rank in range(size):
        bit = 1
        while bit < size and not bit & rank:
            bit <<= 1
        if rank == 0:
            out[0] = (None, (bit >> 1,) if size > 1 else ())
            continue
        up = (rank ^ bit) | (bit << 1)
        if up >= size:
            up = rank ^ bit
        low = bit >> 1
        kids = []
        if low:
            kids.append(rank - low)
            while low and rank + low >= size:
                low >>= 1
            if low:
                kids.append(rank + low)
        out[rank] = (up, tuple(kids))
    return out


def dtree(size: int):
    """NCCL's double binary tree: the two trees, as :func:`btree` gives them."""
    first = btree(size)
    if size % 2 == 1:
        move = lambda r: (r + 1) % size  # noqa: E731  (shift by one rank)
    else:
        move = lambda r: size - 1 - r  # noqa: E731  (mirror)
    second = {}
    for r, (up, kids) in first.items():
        second[move(r)] = (None if up is None else move(up), tuple(map(move, kids)))
    return first, second


def tree_depth(tree: dict) -> int:
    """The most edges from the root to a leaf."""
    depth: dict[int, int] = {}
    best = 0
    for r in tree:
        chain, x = [], r
        while x is not None and x not in depth:
            chain.append(x)
            x = tree[x][0]
        d = -1 if x is None else depth[x]
        for y in reversed(chain):
            d += 1
            depth[y] = d
        best = max(best, depth[r])
    return best


def double_tree_allreduce(b, halves, ordered):
    """Append NCCL's double-binary-tree allreduce: tree ``t`` reduces the segments
    ``halves[t]`` to its root and broadcasts them back down, one segment per message.

    Every rank interleaves the two trees segment by segment, and a segment's
    broadcast ``depth`` segments after its reduction (``depth``: the deeper tree's),
    so that reductions and broadcasts of both trees pipeline as NCCL's channels run
    them. With ``ordered`` (level ``"associative"``) a rank combines the child of
    lower rank on the left of its own contribution and the other on the right; the
    trees' subtrees must then be rank ranges (the first tree and its mirror are).
    """
    trees = dtree(b.size)
    lag = max(tree_depth(t) for t in trees)
    n = max(len(h) for h in halves)
    for r in range(b.size):
        if not b.keeps(r):
            continue
        for t, half in zip(trees, halves):
            b.copy(r, half, "in", "acc" if t[r][0] is not None else "out")
        for k in range(n + lag):
            if k < n:
                for t, half in zip(trees, halves):
                    if k < len(half):
                        _reduce_step(b, r, t, half[k], ordered)
            if k >= lag:
                for t, half in zip(trees, halves):
                    if k - lag < len(half):
                        up, kids = t[r]
                        if up is not None:
                            b.recv(r, up, (half[k - lag],), "out")
                        for c in kids:
                            b.send(r, c, (half[k - lag],), "out")


def _reduce_step(b, r, tree, blk, ordered):
    up, kids = tree[r]
    acc = "out" if up is None else "acc"
    for c in sorted(kids) if ordered else kids:
        side = ("left" if c < r else "right") if ordered else "right"
        b.recv_combine(r, c, (blk,), acc, side=side)
    if up is not None:
        b.send(r, up, (blk,), acc)


def pat_steps(size: int, aggregation=None):
    """PAT's allgather steps: ``(distance, offsets)`` in send order, where at a step
    every rank ``h`` sends to ``h + distance`` the blocks of ranks ``h - o`` for the
    offsets ``o``. Distances ``2**(L-1), ..., 2, 1`` (``L = ceil(log2 size)``); at
    distance ``2**d`` the offsets are the multiples of ``2**(d+1)`` with
    ``o + 2**d < size``; ``aggregation`` (an integer >= 1, or None: unbounded)
    splits a step into messages of at most that many offsets.

    >>> pat_steps(5)
    [(4, (0,)), (2, (0,)), (1, (0, 2))]
    >>> pat_steps(8, aggregation=2)[-2:]
    [(1, (0, 2)), (1, (4, 6))]
    """
    if aggregation is not None and (
        isinstance(aggregation, bool)
        or not isinstance(aggregation, int)
        or aggregation < 1
    ):
        raise PlanError(
            f"aggregation must be an integer >= 1 or None, got {aggregation!r}"
        )
    out: list[tuple[int, tuple[int, ...]]] = []
    for d in reversed(range((size - 1).bit_length())):
        dist = 1 << d
        offs = tuple(range(0, size - dist, 2 * dist))
        k = aggregation or len(offs)
        out.extend((dist, offs[i : i + k]) for i in range(0, len(offs), k))
    return out


def pat_allgather(b, aggregation=None, buf="out"):
    """Append PAT's allgather: every rank holds its block in ``buf``; each step of
    :func:`pat_steps` forwards the blocks that reached a rank along the higher
    dimensions."""
    size = b.size
    for dist, offs in pat_steps(size, aggregation):
        for h in range(size):
            if b.keeps(h):
                b.send(h, (h + dist) % size, tuple((h - o) % size for o in offs), buf)
                b.recv(
                    h, (h - dist) % size, tuple((h - dist - o) % size for o in offs), buf
                )


def pat_reduce_scatter(b, aggregation=None, acc="acc"):
    """Append PAT's reduce-scatter, the allgather in reverse: at a step every rank
    ``x`` sends to ``x - distance`` its partial results of the blocks ``x - distance
    - o`` and combines those of ``x + distance``. Every rank's contribution must be
    in ``acc``; rank ``r`` ends with block ``r`` reduced there. Commutative."""
    size = b.size
    for dist, offs in reversed(pat_steps(size, aggregation)):
        for x in range(size):
            if b.keeps(x):
                b.send(
                    x, (x - dist) % size, tuple((x - dist - o) % size for o in offs), acc
                )
                b.recv_combine(
                    x,
                    (x + dist) % size,
                    tuple((x - o) % size for o in offs),
                    acc,
                    side="left",
                )
