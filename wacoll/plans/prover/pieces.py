"""Entries cut into pieces that each access of their rank takes whole.

A rank's steps name runs of blocks that overlap in every way: an allgather's rank
receives its children's subtrees, then sends them up with its own block, then
receives everything else from its parent. :func:`split` cuts every entry of a rank
at every place where one of that rank's entries begins or ends (and where the
operation's layout changes what the rank holds or may write), so that each access
of the rank covers a piece wholly or not at all. The checker then tracks one value
per piece instead of one per block: a rank's pieces are few when its steps move
whole ranges, and a plan whose steps move single blocks is left as it is.

Pieces are per rank: a message's pieces at the sender and at the receiver can
differ; :meth:`wacoll.plans.prover.run.Run.sources` pairs them up.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> from wacoll.plans.prover.encode import encode
>>> from wacoll.plans.prover.layout import Layout
>>> plan = build("allgather", Topology.from_sizes([2, 2]), "magpie")
>>> [str(s) for s in plan.programs[0]]
['copy [0] in -> out', 'recv 1 [1]', 'send 2 [0,1]', 'recv 2 [2,3]', 'send 1 [0,2,3]']
>>> steps = encode(plan)
>>> cut = split(steps, Layout("allgather", 4, None, 4))
>>> at = slice(cut.first[2], cut.first[3])   # rank 0's send to 2: blocks 0 and 1
>>> cut.block[at].tolist(), cut.length[at].tolist()
([0, 1], [1, 1])
"""

from __future__ import annotations

import dataclasses

import numpy as np

from wacoll.plans.prover.encode import distinct, index_dtype, ranges

try:
    from wacoll.plans.prover import _pieces as _compiled
except ImportError:  # not built: numpy does the same
    _compiled = None

__all__ = ["split"]


def _layout_edges(layout, size):
    """Per rank, the block ids where what it holds at the start or may write to
    ``"out"`` changes (as (ranks, ids))."""
    s = layout.spec
    ranks = np.arange(size, dtype=np.int64)
    edges = []
    if s.layout == "per_rank" and s.kind == "movement":  # "in" holds block r
        edges += [ranks, ranks + 1]
    if s.layout == "pairs":  # "in" holds r * size .. r * size + size - 1
        edges += [ranks * size, ranks * size + size]
    if layout._out == "own":  # "out" has a place for block r
        edges += [ranks, ranks + 1]
    if not edges:
        return ranks[:0], ranks[:0]
    return np.tile(ranks, len(edges)), np.concatenate(edges)


def split(steps, layout, *, blocks=False):
    """``steps`` with every entry cut into the pieces of its rank (see the module
    docstring), or into single blocks when ``blocks``.

    Parameters
    ----------
    steps : wacoll.plans.prover.encode.Steps
    layout : wacoll.plans.prover.layout.Layout
    blocks : bool
        Cut every entry into single blocks.

    Returns
    -------
    wacoll.plans.prover.encode.Steps
        The same steps; ``first``, ``block``, ``length`` and ``single`` describe the
        pieces.
    """
    length = steps.length
    if steps.single or not len(length) or int(length.max()) <= 1:
        return steps
    pieces = None
    if blocks:
        count = length.astype(np.int64)
        block = ranges(steps.block, count)
        piece_length = np.ones(len(block), dtype=length.dtype)
    elif _compiled is not None:
        pieces, block, piece_length = _cut_compiled(steps, layout)
        if pieces is None:
            return steps
    else:
        count, block, piece_length = _cut(steps, layout)
        if count is None:
            return steps
    if pieces is None:
        pieces = np.zeros(len(count) + 1, dtype=np.int64)
        np.cumsum(count, out=pieces[1:])
    first = pieces[steps.first].astype(index_dtype(len(block) + 1))
    single = len(block) == steps.nsteps and int(piece_length.max(initial=1)) == 1 and \
        bool(((first[1:] - first[:-1]) == 1).all())
    return dataclasses.replace(
        steps, first=first,
        block=block.astype(index_dtype(steps.nblocks + 1), copy=False),
        length=piece_length.astype(length.dtype, copy=False), single=single)


def _cut_compiled(steps, layout):
    """:func:`_cut` by :func:`wacoll.plans.prover._pieces.cut`, a rank at a time,
    with the first piece of every entry (and one past the last) for the counts."""
    edge_ranks, edge_ids = _layout_edges(layout, steps.size)
    order = np.argsort(edge_ranks, kind="stable")
    edge_bounds = np.searchsorted(edge_ranks[order], np.arange(steps.size + 1))
    bounds = steps.first[steps.start].astype(np.int64)
    length = steps.length.astype(steps.block.dtype, copy=False)
    return _compiled.cut(steps.block, length, bounds,
                         np.ascontiguousarray(edge_ids[order], dtype=np.int64),
                         edge_bounds.astype(np.int64), steps.nblocks)


def _cut(steps, layout):
    """The pieces of every entry: their number per entry, first blocks and lengths
    (None when no entry is cut). Only entries of several blocks can be cut, and
    only at edges inside them: those are found among all edges of their ranks by a
    search in the (merged) ranges of such entries."""
    nb, length = steps.nblocks, steps.length
    wide = np.int64(nb + 2)
    rank = steps.per_entry(steps.rank).astype(np.int64)
    begin = rank * wide + steps.block
    end = begin + length
    several = np.flatnonzero(length > 1)
    cb, ce = begin[several], end[several]
    # the union of the ranges of entries of several blocks, as disjoint ranges
    order = np.argsort(cb, kind="stable")
    cb_sorted, ce_sorted = cb[order], np.maximum.accumulate(ce[order])
    fresh = np.ones(len(order), dtype=bool)
    fresh[1:] = cb_sorted[1:] >= ce_sorted[:-1]
    starts = np.flatnonzero(fresh)
    union_begin = cb_sorted[starts]
    union_end = ce_sorted[np.append(starts[1:], len(order)) - 1]
    # the edges of the ranks that have such entries, inside such an entry
    cutting = np.zeros(steps.size, dtype=bool)
    cutting[rank[several]] = True
    mine = cutting[rank]
    edge_ranks, edge_ids = _layout_edges(layout, steps.size)
    inside = (edge_ids >= 0) & (edge_ids <= nb) & cutting[edge_ranks]
    every = np.concatenate((begin[mine], end[mine],
                            edge_ranks[inside] * wide + edge_ids[inside]))
    at = np.searchsorted(union_begin, every, side="right") - 1
    some = np.maximum(at, 0)
    held = (at >= 0) & (every < union_end[some]) & (every > union_begin[some])
    edges = distinct(every[held])
    del every, at, held, some, mine
    lo = np.searchsorted(edges, cb, side="right")
    hi = np.searchsorted(edges, ce, side="left")
    cuts = hi - lo
    if not cuts.any():
        return None, None, None
    count = np.ones(len(length), dtype=np.int64)
    count[several] += cuts
    block = np.repeat(steps.block.astype(np.int64), count)
    piece_length = np.repeat(length, count)
    split = cuts > 0
    entry, lo, cuts = several[split], lo[split], cuts[split]
    n = cuts + 1
    where = ranges((np.cumsum(count) - count)[entry], n)
    k = where - np.repeat(where[np.cumsum(n) - n], n)
    owner = np.repeat(np.arange(len(entry)), n)
    base = rank[entry][owner] * wide
    inner = edges[np.minimum(lo[owner] + k - 1, len(edges) - 1)]
    piece_begin = np.where(k == 0, begin[entry][owner], inner)
    piece_end = np.where(k == n[owner] - 1, end[entry][owner],
                         edges[np.minimum(lo[owner] + k, len(edges) - 1)])
    block[where] = piece_begin - base
    piece_length[where] = piece_end - piece_begin
    return count, block, piece_length
