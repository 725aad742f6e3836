"""Swing's and Bine's communication patterns, for the recent family.

Swing (De Sensi, Bonato, Saam & Hoefler, "Swing: Short-cutting Rings for Higher
Bandwidth Allreduce", NSDI 2024) pairs rank ``r`` at step ``s`` with

    pi(r, s) = r + rho(s) (r even) or r - rho(s) (r odd), modulo P,
    rho(s) = sum_{i <= s} (-2)**i = (1 - (-2)**(s + 1)) / 3 = 1, -1, 3, -5, 11, ...

so that the distance ``|rho(s)|`` grows as ``2**s / 1.5`` where recursive doubling's
grows as ``2**s``: partners stay nearer on a ring or torus. Bine trees (De Sensi,
Pasqualoni, Piarulli, Bonato, Ba, Turisini, Domke & Hoefler, "Bine Trees: Enhancing
Collective Operations by Optimizing Communication Locality", SC 2025) use the same
pairs (a rank's distance to its partners, written in negabinary, base -2) for
binomial trees and butterflies: a broadcast tree whose root sends first to its
farthest partner and then ever nearer ones (*distance-halving*), and butterflies
in either order of the steps.

The patterns here:

- :func:`butterfly_rounds`: the exchanges of a butterfly allgather over ``m``
  positions (``m`` even), steps in a given order: in each step a position sends its
  partner what it holds and the partner lacks. On a power of two this is the
  butterfly of the papers; on any other even ``m`` the ``ceil(log2 m)`` steps reach
  every position from every other, some along two paths, and sending only what the
  partner lacks keeps every block received once (as Swing's code does: each block
  leaves a rank at one step only). :func:`butterfly_allgather` and
  :func:`butterfly_reduce_scatter` (the same exchanges in reverse, partial results
  combined) write them.
- :func:`swing_latency_allreduce`: whole vectors exchanged with ``pi(r, s)``,
  ``log2 p`` steps; a ``P`` that is not a power of two ``p`` first folds its last
  ``P - p`` ranks into ranks ``p - (P - p) .. p - 1`` and gives them the result at
  the end (Swing's code, ``shrink``/``enlarge``; MPICH's fold does the same with
  other pairs).
- :func:`bine_tree`: the distance-halving Bine broadcast tree over relative ranks.

On an odd ``P``, ``r + rho(s)`` wraps onto a rank of ``r``'s own parity and the
pairs are no matching; the butterflies then fold rank ``P - 1`` into rank ``P - 2``
(:func:`odd_fold`), and the tree, built greedily (a rank that holds the data sends
it to its partner if the partner has it not and no other rank sends it there in that
step), gives the ranks it did not reach in ``ceil(log2 P)`` steps the data from
their nearest holder in one more step.

Examples
--------
>>> [rho(s) for s in range(6)]
[1, -1, 3, -5, 11, -21]
>>> swing_peers(8, 1).tolist()  # even ranks at +rho(1) = -1, odd ones at +1
[7, 2, 1, 4, 3, 6, 5, 0]
>>> tree = bine_tree(8, 0)
>>> {v: sorted(tree.successors(v)) for v in (0, 3, 4, 7)}  # no edge longer than 3
{0: [1, 3, 7], 3: [2, 4], 4: [5], 7: [6]}
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from wacoll.errors import PlanError
from wacoll.plans.halving import largest_power_of_two

__all__ = [
    "rho",
    "swing_peers",
    "steps_of",
    "bit_reversal",
    "butterfly_rounds",
    "butterfly_allgather",
    "butterfly_reduce_scatter",
    "odd_fold",
    "swing_latency_allreduce",
    "bine_tree",
]


def rho(s: int) -> int:
    """Swing's signed distance at step ``s``: ``(1 - (-2)**(s + 1)) / 3``."""
    return (1 - (-2) ** (s + 1)) // 3


def swing_peers(m: int, s: int) -> np.ndarray:
    """Every position's partner at step ``s`` among ``m`` positions (``pi(r, s)``)."""
    r = np.arange(m, dtype=np.int64)
    d = rho(s)
    return np.where(r % 2 == 0, (r + d) % m, (r - d) % m)


def steps_of(m: int, order: str) -> list:
    """The steps ``0 .. ceil(log2 m) - 1`` in ``order``: ``"doubling"`` (nearest
    partner first) or ``"halving"`` (farthest first)."""
    steps = list(range((m - 1).bit_length()))
    return steps if order == "doubling" else steps[::-1]


def bit_reversal(m: int) -> list:
    """Each position's place when positions ``0 .. m - 1`` are sorted by their
    ``ceil(log2 m)`` bits read backwards: the bit-reversal permutation on a power of
    two.

    Swing's allreduce gives position ``i`` chunk ``bit_reversal(m)[i]`` instead of
    chunk ``i``: the same messages (peers, steps, sizes), but on a power of two each
    message's chunks are then one or two runs of consecutive blocks, where they are
    scattered over the vector otherwise (Swing's code remaps its blocks for the same
    reason), so that the prover holds the plan in few pieces.

    Examples
    --------
    >>> bit_reversal(8)
    [0, 4, 2, 6, 1, 5, 3, 7]
    >>> bit_reversal(6)  # keys 0, 4, 2, 6, 1, 5 sorted
    [0, 3, 2, 5, 1, 4]
    """
    bits = (m - 1).bit_length()
    keys = [int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(m)]
    place = [0] * m
    for at, i in enumerate(sorted(range(m), key=keys.__getitem__)):
        place[i] = at
    return place


def butterfly_rounds(m: int, order):
    """The exchanges of a butterfly allgather over ``m`` positions (``m`` even or 1).

    Parameters
    ----------
    m : int
    order : list of int
        The steps, in the order the allgather takes them.

    Returns
    -------
    list of (numpy.ndarray, list of numpy.ndarray)
        Per step, every position's partner and the positions whose data it sends
        that partner (what it holds and the partner lacks).
    """
    held = np.eye(m, dtype=bool)
    rounds = []
    for s in order:
        peer = swing_peers(m, s)
        if not np.array_equal(peer[peer], np.arange(m)):
            raise PlanError(f"Swing's pairs at step {s} are no matching on {m} ranks")
        gives = held & ~held[peer]
        rounds.append((peer, [np.flatnonzero(row) for row in gives]))
        held |= held[peer]
    if not held.all():  # (cannot happen on an even m: every distance is reached)
        raise PlanError(f"the butterfly does not reach every rank on {m} ranks")
    return rounds


def _blocks_of(groups):
    """A function from an array of group indices to their blocks, as a sorted tuple
    (a message's blocks in the vector's order, however the groups are placed)."""
    if all(len(g) == 1 for g in groups):
        flat = np.array([g[0] for g in groups], dtype=np.int64)
        return lambda idx: tuple(np.sort(flat[idx]).tolist())
    return lambda idx: tuple(sorted(x for i in idx.tolist() for x in groups[i]))


def butterfly_allgather(b, ranks, groups, rounds, buf="out"):
    """Append the allgather of ``rounds`` (:func:`butterfly_rounds`) over ``ranks``:
    position ``i`` holds the blocks ``groups[i]`` in ``buf`` and ends with all."""
    blocks_of = _blocks_of(groups)
    for peer, gives in rounds:
        for i, r in enumerate(ranks):
            if not b.keeps(r):
                continue
            j = int(peer[i])
            if len(gives[i]):
                b.send(r, ranks[j], blocks_of(gives[i]), buf)
            if len(gives[j]):
                b.recv(r, ranks[j], blocks_of(gives[j]), buf)


def butterfly_reduce_scatter(b, ranks, groups, rounds, acc="acc"):
    """Append the reduce-scatter that is the allgather of ``rounds`` in reverse: in
    each step a position sends its partner the partial results of the blocks it
    would have received from it, and combines those the partner would have
    received. Every position's contribution must be in ``acc``; position ``i`` ends
    with the reduction of ``groups[i]`` there. Commutative: a block's operands are
    combined in the order its tree brings them."""
    blocks_of = _blocks_of(groups)
    for peer, gives in reversed(rounds):
        for i, r in enumerate(ranks):
            if not b.keeps(r):
                continue
            j = int(peer[i])
            if len(gives[j]):
                b.send(r, ranks[j], blocks_of(gives[j]), acc)
            if len(gives[i]):
                b.recv_combine(r, ranks[j], blocks_of(gives[i]), acc, side="left")


def odd_fold(size: int):
    """``(ranks, host, extra)``: the ranks a butterfly runs over, and on an odd
    ``size > 1`` the rank folded in (``extra = size - 1``) and the one it is folded
    into (``host = size - 2``, its nearest); ``None`` for both otherwise."""
    if size % 2 == 1 and size > 1:
        return tuple(range(size - 1)), size - 2, size - 1
    return tuple(range(size)), None, None


def swing_latency_allreduce(b, blocks):
    """Swing's latency-optimal allreduce: whole vectors, ``log2 p`` steps of
    exchange with ``pi(r, s)`` (``p`` the largest power of two ``<= P``), the last
    ``P - p`` ranks folded into ranks ``p - (P - p) .. p - 1`` first and given the
    result at the end. Incoming vectors are combined on the left: commutative."""
    size = b.size
    if size == 1:
        b.copy(0, blocks, "in", "out")
        return
    p = largest_power_of_two(size)
    extra = size - p
    for r in range(p):
        b.copy(r, blocks, "in", "out")
    for i in range(extra):
        b.send(p + i, p - extra + i, blocks, "in")
        b.recv_combine(p - extra + i, p + i, blocks, "out", side="left")
    for s in range(p.bit_length() - 1):
        peer = swing_peers(p, s)
        for r in range(p):
            if b.keeps(r):
                b.send(r, int(peer[r]), blocks, "out")
                b.recv_combine(r, int(peer[r]), blocks, "out", side="left")
    for i in range(extra):
        b.transfer(p - extra + i, p + i, blocks, "out", "out")


def bine_tree(size: int, root: int) -> nx.DiGraph:
    """The distance-halving Bine broadcast tree of ``size`` ranks rooted at ``root``
    (a tree by wacoll's convention: edges parent -> child, ``order`` the child's
    place in its parent's sends).

    Over relative ranks ``v = r - root``: at step ``k`` (Swing's step
    ``L - 1 - k``, ``L = ceil(log2 size)``) every holder ``v`` sends to
    ``pi(v, L - 1 - k)`` if that rank has nothing yet and no holder of lower
    relative rank sends to it in the same step; ranks still without data after
    ``L`` steps (odd sizes only) get it from their nearest holder.
    """
    steps = steps_of(size, "halving")
    has = {0}
    tree = nx.DiGraph()
    tree.add_node(root)
    sends = {0: 0}

    def add(parent, child):
        tree.add_edge(
            (parent + root) % size, (child + root) % size, order=sends.get(parent, 0)
        )
        sends[parent] = sends.get(parent, 0) + 1
        sends.setdefault(child, 0)

    for s in steps:
        d = rho(s)
        new = set()
        for v in sorted(has):
            q = (v + d) % size if v % 2 == 0 else (v - d) % size
            if q not in has and q not in new:
                new.add(q)
                add(v, q)
        has |= new
    holders = sorted(has)
    for v in range(size):
        if v not in has:
            near = min(holders, key=lambda h: (min((h - v) % size, (v - h) % size), h))
            add(near, v)
    return tree
