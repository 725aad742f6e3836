"""Recursive halving and doubling that keep every block's canonical expression.

Rabenseifner's allreduce (a reduce-scatter by recursive halving, then an allgather
by recursive doubling) moves ``2 (P-1)/P`` of the vector per rank, where a reduce to
one rank and a broadcast move ``2 log2 P`` vectors through the root. As MPICH runs it
(largest distance first) it combines ``x0 + x4`` first: not the canonical expression
of level ``"strict"``. Run with the distances *doubling* (1, 2, 4, ...), each block's
value after the exchange at distance ``d`` covers the aligned rank range of length
``2d`` and is the combination of its two aligned halves, lower ranks on the left:
exactly the binomial reduce tree's expression at rank 0
(``((x0+x1)+(x2+x3))+((x4+x5)+(x6+x7))``), block by block.

For a number of ranks ``n`` that is not a power of two, the canonical expression of
the range splits at the largest power of two ``p < n``:
``E(0, n) = E(0, p) (+) E(p, n)``. :func:`halving_reduce_scatter` reduce-scatters the
first ``p`` ranks by halving, the other ``n - p`` recursively the same way, and each
of the ``p`` owners then combines on the right the remainder's partial of its own
blocks. :func:`doubling_allgather` gives every rank the result: the owners exchange
by doubling in reverse, and owner ``t`` sends the whole vector to rank ``p + t``.

The prover proves the result at level ``"strict"`` (:mod:`wacoll.plans.prove`).

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans.builder import PlanBuilder
>>> b = PlanBuilder("allreduce", Topology.single(3), count=4, segments=2)
>>> owned = halving_reduce_scatter(b, range(3), b.all_blocks)
>>> owned
{0: (0,), 1: (1,)}
>>> doubling_allgather(b, range(3), owned, b.all_blocks)
>>> for rank, program in enumerate(b.programs):
...     print(rank, "; ".join(map(str, program)))
0 send 1 [1] from in; recv 1 [0]; combine [0] in -> out left; recv-combine 2 [0] into out; send 1 [0]; recv 1 [1]; send 2 [0,1]
1 send 0 [0] from in; recv 0 [1]; combine [1] in -> out; recv-combine 2 [1] into out; send 0 [1]; recv 0 [0]
2 send 0 [0] from in; send 1 [1] from in; recv 0 [0,1]
>>> b.build().prove().level
'strict'
"""

from __future__ import annotations

__all__ = ["halving_reduce_scatter", "doubling_allgather", "largest_power_of_two"]


def largest_power_of_two(n: int) -> int:
    """The largest power of two ``<= n`` (``n >= 1``).

    >>> [largest_power_of_two(n) for n in (1, 2, 3, 5, 8, 12)]
    [1, 2, 2, 4, 8, 8]
    """
    return 1 << (n.bit_length() - 1)


def _split(blocks, lower):
    """The half of ``blocks`` the lower (or upper) member of a pair keeps."""
    half = (len(blocks) + 1) // 2
    return blocks[:half] if lower else blocks[half:]


def _halving(b, ranks, blocks, src, acc, result):
    """Reduce-scatter ``blocks`` over ``ranks`` (a power of two of them) by halving
    with doubling distances; the partials end in ``result``. Returns each rank's
    blocks and the buffer that holds their partial.

    At each distance a rank receives its partner's partial straight into the buffer
    of that distance (``acc1``, ``acc2``, ... named after ``acc``; ``result`` at the
    last) and combines its own into it on the side that keeps rank order: no copy,
    no staging, and scratch of ``1/2 + 1/4 + ... + 2/p`` of the vector (none on two
    ranks).
    """
    p = len(ranks)
    if p == 1:  # one rank: its contribution is the range's partial
        return {ranks[0]: blocks}, src[ranks[0]] if isinstance(src, dict) else src
    held = dict.fromkeys(ranks, blocks)
    where = src if isinstance(src, dict) else dict.fromkeys(ranks, src)
    d, level = 1, 1
    while d < p:
        target = result if 2 * d == p else f"{acc}{level}"
        for i, r in enumerate(ranks):
            lower = not i & d
            partner = ranks[i ^ d]
            keep, give = _split(held[r], lower), _split(held[r], not lower)
            if give:
                b.send(r, partner, give, where[r])
            if keep:
                b.recv(r, partner, keep, target)
                b.combine(r, keep, where[r], target, "left" if lower else "right")
            held[r] = keep
        where, d, level = dict.fromkeys(ranks, target), 2 * d, level + 1
    return held, target


def halving_reduce_scatter(b, ranks, blocks, *, src="in", acc="acc", result="out"):
    """Append a reduce-scatter of ``blocks`` over ``ranks`` whose every block is the
    canonical (binomial, rank-ordered) combination of the ranks' contributions.

    Parameters
    ----------
    b : PlanBuilder
    ranks : sequence of int
        The ranks in the order of their operands (ascending ranks for level
        ``"strict"``).
    blocks : tuple of int
        The blocks to reduce; each owner ends with a contiguous share of them (the
        vector's first blocks at the first owner when there are fewer blocks than
        owners; a multiple of the largest power of two below ``len(ranks)`` balances
        them).
    src : str
        The buffer that holds each rank's contribution.
    acc : str
        A scratch buffer for the partials of the first halvings.
    result : str
        The buffer the owners' results end in.

    Returns
    -------
    dict
        The owners (the first ``largest_power_of_two(len(ranks))`` ranks) and the
        blocks of ``result`` each holds the reduction of, in block order.
    """
    owned, where = _reduce_scatter(b, tuple(ranks), tuple(blocks), src, acc, result)
    if where != result:  # a single rank: its contribution is the result
        for r, mine in owned.items():
            b.copy(r, mine, where, result)
    return owned


def _reduce_scatter(b, ranks, blocks, src, acc, result):
    """:func:`halving_reduce_scatter`, also returning the buffer the partials are in
    (``src`` when ``ranks`` is one rank)."""
    p = largest_power_of_two(len(ranks))
    owned, where = _halving(b, ranks[:p], blocks, src, acc, result)
    if len(ranks) > p:
        if where != result:
            for r, mine in owned.items():
                b.copy(r, mine, where, result)
            where = result
        rest, rest_where = _reduce_scatter(b, ranks[p:], blocks, src, acc, acc)
        for owner, mine in owned.items():
            for member, theirs in rest.items():
                common = tuple(blk for blk in mine if blk in set(theirs))
                if common:
                    b.transfer_combine(member, owner, common, rest_where, result, "right")
    return owned, where


def doubling_allgather(b, ranks, owned, blocks, *, buf="out"):
    """Append the allgather that follows :func:`halving_reduce_scatter` over the same
    ``ranks``: the owners exchange their shares by recursive doubling (the halving's
    distances in reverse), then owner ``t`` sends all ``blocks`` to rank ``p + t``.

    Parameters
    ----------
    b : PlanBuilder
    ranks : sequence of int
    owned : dict
        What :func:`halving_reduce_scatter` returned.
    blocks : tuple of int
        Every block, in buffer order.
    buf : str
        The buffer the shares are in, and every rank's result goes to.
    """
    ranks, blocks = tuple(ranks), tuple(blocks)
    p = len(owned)
    held = {r: tuple(owned[r]) for r in ranks[:p]}
    d = p // 2
    while d:
        for i, r in enumerate(ranks[:p]):
            partner = ranks[i ^ d]
            if held[r]:
                b.send(r, partner, held[r], buf)
            if held[partner]:
                b.recv(r, partner, held[partner], buf)
        held = {
            r: tuple(sorted(held[r] + held[ranks[i ^ d]]))
            for i, r in enumerate(ranks[:p])
        }
        d //= 2
    for t, r in enumerate(ranks[p:]):
        b.transfer(ranks[t], r, blocks, buf, buf)
