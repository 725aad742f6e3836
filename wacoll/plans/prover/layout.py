"""What each operation holds before and promises after, over arrays of ranks and blocks.

The same facts as :func:`wacoll.plans.operations.in_blocks`,
:func:`~wacoll.plans.operations.out_blocks`, :func:`~wacoll.plans.operations.initial`
and :func:`~wacoll.plans.operations.expected`, as functions of (rank, block) arrays,
so that the prover asks them for millions of blocks at once without a dictionary
per rank (a test keeps the two in agreement for every operation). Blocks are assumed
to exist (``0 <= block < nblocks``).

Examples
--------
>>> import numpy as np
>>> ranks, blocks = np.array([0, 1, 1]), np.array([1, 3, 2])
>>> Layout("alltoall", 2, None, 4).in_held(ranks, blocks).tolist()
[True, True, True]
>>> Layout("alltoall", 2, None, 4).out_allowed(ranks, blocks).tolist()
[False, True, False]
"""

from __future__ import annotations

import numpy as np

from wacoll.plans.operations import spec

__all__ = ["Layout"]


class Layout:
    """The blocks of operation ``op`` on ``size`` ranks with ``nblocks`` blocks.

    Parameters
    ----------
    op : str
    size : int
    root : int or None
    nblocks : int

    Attributes
    ----------
    out_kind : str
        Where ``"out"`` has a place for a block: ``"none"`` (a barrier), ``"all"``
        (every block on every rank), ``"own"`` (block ``r`` on rank ``r``),
        ``"root"`` (every block on the root) or ``"column"`` (block ``b`` on rank
        ``b % size``).
    """

    def __init__(self, op, size, root, nblocks):
        self.spec = s = spec(op)
        self.op, self.size, self.root, self.nblocks = s.name, size, root, nblocks
        name = s.name
        if s.kind == "barrier":
            self.out_kind = "none"
        elif name in ("bcast", "allreduce", "scan", "exscan") or name.startswith(
            "allgather"
        ):
            self.out_kind = "all"
        elif name in ("scatter", "scatterv", "reduce_scatter", "reduce_scatter_block"):
            self.out_kind = "own"
        elif name in ("gather", "gatherv", "reduce"):
            self.out_kind = "root"
        else:
            self.out_kind = "column"

    def in_held(self, ranks, blocks):
        """Whether ``ranks[i]``'s ``"in"`` buffer holds ``blocks[i]`` at the start."""
        s, name = self.spec, self.spec.name
        if name == "bcast" or s.kind == "barrier":
            return np.zeros(len(ranks), dtype=bool)
        if name in ("scatter", "scatterv"):
            return ranks == self.root
        if s.layout == "per_rank" and s.kind == "movement":
            return blocks == ranks
        if s.layout == "pairs":
            return blocks // self.size == ranks
        return np.ones(len(ranks), dtype=bool)

    def out_held(self, ranks):
        """Whether ``ranks[i]``'s ``"out"`` buffer holds every block at the start
        (the root of a broadcast)."""
        if self.op == "bcast":
            return ranks == self.root
        return np.zeros(len(ranks), dtype=bool)

    def source(self, blocks):
        """The rank whose contribution a moved block is (movement only)."""
        s = self.spec
        if s.name == "bcast" or s.name.startswith("scatter"):
            return np.full(len(blocks), self.root)
        if s.layout == "pairs":
            return blocks // self.size
        return np.asarray(blocks)

    def out_allowed(self, ranks, blocks):
        """Whether ``ranks[i]``'s ``"out"`` buffer has a place for ``blocks[i]``."""
        kind = self.out_kind
        if kind == "none":
            return np.zeros(len(ranks), dtype=bool)
        if kind == "all":
            return np.ones(len(ranks), dtype=bool)
        if kind == "own":
            return blocks == ranks
        if kind == "root":
            return ranks == self.root
        return blocks % self.size == ranks

    def first_disallowed(self, ranks, blocks, lengths):
        """For runs of ``lengths[i]`` blocks from ``blocks[i]`` written to
        ``ranks[i]``'s ``"out"``: the index in the run of the first block ``"out"`` has
        no place for, or ``lengths[i]`` (runs are assumed not to cross the edges of
        :meth:`out_allowed` other than an all-to-all's)."""
        allowed = self.out_allowed(ranks, blocks)
        first = np.where(allowed, lengths, 0)
        if self.out_kind == "column" and self.size > 1:  # (allowed blocks are apart)
            first = np.where(allowed & (lengths > 1), 1, first)
        return first

    def expecting(self, ranks):
        """Whether ``ranks[i]`` must end with every allowed ``"out"`` block (the
        expected blocks are the allowed ones, except none on rank 0 of an exscan)."""
        if self.op == "exscan":
            return ranks != 0
        return np.ones(len(ranks), dtype=bool)

    def expected_count(self):
        """The number of blocks each rank must end with, as an array over ranks."""
        size, nb = self.size, self.nblocks
        ranks = np.arange(size)
        kind = self.out_kind
        if kind == "none":
            count = np.zeros(size, dtype=np.int64)
        elif kind == "all":
            count = np.full(size, nb, dtype=np.int64)
        elif kind == "own":
            count = (ranks < nb).astype(np.int64)
        elif kind == "root":
            count = np.where(ranks == self.root, nb, 0).astype(np.int64)
        else:
            count = np.full(size, nb // size, dtype=np.int64) + (ranks < nb % size)
        return np.where(self.expecting(ranks), count, 0)

    def form(self, rank):
        """The expected reduction of ``rank``'s blocks: ``("tree", n)`` or
        ``("fold", n)`` (reductions only)."""
        if self.op == "scan":
            return ("fold", rank + 1)
        if self.op == "exscan":
            return ("fold", rank)
        return ("tree", self.size)
