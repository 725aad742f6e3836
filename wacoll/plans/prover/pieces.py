"""Entries cut into pieces that each access of their rank takes whole.

A rank's steps name runs of blocks that overlap in every way: an allgather's rank
receives its children's subtrees, then sends them up with its own block, then
receives everything else from its parent. :func:`split` cuts every entry of a rank
at every place where one of that rank's entries begins or ends (and where the
operation's layout changes what the rank holds or may write), so that each access
of the rank covers a piece wholly or not at all. The prover then tracks one value
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

from wacoll.plans.prover import _pieces as _compiled
from wacoll.plans.prover.encode import index_dtype, ranges

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
    if layout.out_kind == "own":  # "out" has a place for block r
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
    if blocks:
        count = length.astype(np.int64)
        block = ranges(steps.block, count)
        piece_length = np.ones(len(block), dtype=length.dtype)
        pieces = np.zeros(len(count) + 1, dtype=np.int64)
        np.cumsum(count, out=pieces[1:])
    else:
        pieces, block, piece_length = _cut(steps, layout)
        if pieces is None:
            return steps
    first = pieces[steps.first].astype(index_dtype(len(block) + 1))
    single = (
        len(block) == steps.nsteps
        and int(piece_length.max(initial=1)) == 1
        and bool(((first[1:] - first[:-1]) == 1).all())
    )
    return dataclasses.replace(
        steps,
        first=first,
        block=block.astype(index_dtype(steps.nblocks + 1), copy=False),
        length=piece_length.astype(length.dtype, copy=False),
        single=single,
    )


def _cut(steps, layout):
    """The pieces of every entry, by :func:`wacoll.plans.prover._pieces.cut` a rank at
    a time: the first piece of every entry (and one past the last), their first
    blocks and lengths (None, None, None when no entry is cut)."""
    edge_ranks, edge_ids = _layout_edges(layout, steps.size)
    order = np.argsort(edge_ranks, kind="stable")
    edge_bounds = np.searchsorted(edge_ranks[order], np.arange(steps.size + 1))
    bounds = steps.first[steps.start].astype(np.int64)
    length = steps.length.astype(steps.block.dtype, copy=False)
    return _compiled.cut(
        steps.block,
        length,
        bounds,
        np.ascontiguousarray(edge_ids[order], dtype=np.int64),
        edge_bounds.astype(np.int64),
        steps.nblocks,
    )
