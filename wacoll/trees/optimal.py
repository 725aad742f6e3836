"""Optimal broadcast trees under the message-initiation-cost model, by dynamic programming.

Banikazemi, Moorthy and Panda (ICPP 1998, Section 5) define ``L(i, A)``, the least
time for rank ``i`` (holding the message at time 0) to get it to every rank of the
set ``A``::

    L(i, {}) = 0
    L(i, A)  = min over j in A and B + C = A - {j} of  t_i + max(L(i, B), L(j, C))

``i`` first sends to ``j``; from time ``t_i`` on, ``i`` serves ``B`` and ``j``
serves ``C``. Writing ``S = C + {j}`` (everything ``j``'s subtree covers) gives an
exact reformulation that this module evaluates::

    L(i, A) = t_i + min over nonempty S subset of A of max(L(i, A - S), G(S))
    G(S)    = min over j in S of L(j, S - {j})

``G`` does not depend on ``i``, and ``L(i, A)`` depends on ``i`` only through
``t_i``, so the table is ``F[A, c]`` over subsets ``A`` of the non-root participants
and the distinct cost values ``c``: about ``N * 3**(N-1)`` operations, vectorised
with numpy one popcount layer of ``A`` at a time. No structural lemma (such as the
paper's Lemma 2) is assumed, so the result is exact. The cost is exponential:
:func:`optimal` refuses more than :data:`MAX_PARTICIPANTS` participants.

Examples
--------
>>> from wacoll.trees import bcast_time
>>> costs = [100, 300, 300, 300, 300, 100, 300, 300]  # Banikazemi Figure 1(c)
>>> t = optimal(costs)
>>> bcast_time(t, costs), sorted(t.nodes) == list(range(8)), t.graph["root"]
(400, True, 0)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import networkx as nx
import numpy as np

from wacoll.errors import PlanError
from wacoll.trees.hetero import builder_doc, tree_from_edges, validate_arguments

__all__ = ["optimal", "MAX_PARTICIPANTS"]

#: The most participants :func:`optimal` accepts (its work grows as ``N * 3**(N-1)``).
MAX_PARTICIPANTS = 20

_BUDGET = 1 << 22  # elements per vectorised chunk (32 MiB of float64)


def _bits(masks, p):
    """Each mask's ``p`` set bits, low to high: values and bit indices, shape (len, p)."""
    rem = masks.copy()
    values = np.empty((len(masks), p), dtype=np.int64)
    for q in range(p):
        low = rem & -rem
        values[:, q] = low
        rem ^= low
    return values, np.log2(values).astype(np.int64)  # exact for powers of two


def _submasks(values, p):
    """All nonempty submasks of each mask given its bit values, shape (len, 2**p - 1)."""
    x = np.arange(1, 1 << p, dtype=np.int64)
    subs = np.zeros((len(values), len(x)), dtype=np.int64)
    for q in range(p):
        subs |= ((x >> q) & 1)[None, :] * values[:, q : q + 1]
    return subs


def _solve(t, bitcol, m):
    """Tables F[A, c] (least time, cost column c, set A) and G[S] over all masks."""
    size = 1 << m
    k = len(t)
    F = np.zeros((size, k))
    G = np.full(size, np.inf)
    all_masks = np.arange(size, dtype=np.int64)
    popcount = np.zeros(size, dtype=np.int64)
    for b in range(m):
        popcount += (all_masks >> b) & 1
    for p in range(1, m + 1):
        layer = np.flatnonzero(popcount == p)
        chunk = max(1, _BUDGET // (((1 << p) - 1) * k))
        for lo in range(0, len(layer), chunk):
            A = layer[lo : lo + chunk]
            values, index = _bits(A, p)
            # G(A): the best first receiver j of A, serving A - {j}.
            G[A] = F[A[:, None] ^ values, bitcol[index]].min(axis=1)
            S = _submasks(values, p)
            best = np.maximum(F[A[:, None] ^ S], G[S][:, :, None]).min(axis=1)
            F[A] = t[None, :] + best
    return F, G


def _first_send(F, G, A, c, m, bitcol):
    """For a sender of cost column ``c`` serving ``A``: the set ``S`` its first child's
    subtree covers (the child included) and that child's bit index."""
    values = np.array([[1 << b for b in range(m) if A >> b & 1]], dtype=np.int64)
    S = _submasks(values, values.shape[1])[0]
    s = int(S[np.argmin(np.maximum(F[A ^ S, c], G[S]))])
    for b in range(m):
        if s >> b & 1 and F[s ^ (1 << b), bitcol[b]] == G[s]:
            return s, b
    raise AssertionError("inconsistent optimal-tree tables")  # pragma: no cover


@builder_doc(", or more than ``MAX_PARTICIPANTS`` participants")
def optimal(
    costs: Sequence[float], root: int = 0, members: Iterable[int] | None = None
) -> nx.DiGraph:
    """A broadcast tree of least completion time under the ``t_ini`` model.

    Exact minimiser of Banikazemi et al.'s Section 5 recurrence (see the module
    docstring), i.e. of :func:`wacoll.trees.cost.bcast_time` over all ordered trees
    on the participants rooted at ``root``. Among equally fast trees one is returned
    deterministically. At most :data:`MAX_PARTICIPANTS` ranks may participate.

    {arguments}

    Notes
    -----
    Time and memory grow as ``N * 3**(N-1)`` and ``N * 2**(N-1)``. Measured with
    ``benchmarks/bench_trees.py`` (distinct costs): 12 participants take about
    0.01 s, 14 about 0.25 s, 16 about 1.4 s, 18 about 11 s and 19 about 36 s; 20
    would take a few minutes. With non-integer costs the tables are float64, so the
    result is optimal up to rounding.

    Examples
    --------
    The fast rank 2 relays to the slow ranks; a binomial tree would take 20.

    >>> from wacoll.trees import bcast_time, children
    >>> costs = [5, 10, 1, 10, 10]
    >>> t = optimal(costs)
    >>> children(t, 0), children(t, 2), bcast_time(t, costs)
    ([2], [1, 3, 4], 8)
    >>> bcast_time(optimal(costs, root=1, members=[1, 3, 4]), costs)
    20
    """
    costs, members = validate_arguments(costs, root, members)
    if len(members) > MAX_PARTICIPANTS:
        raise PlanError(
            f"optimal() accepts at most {MAX_PARTICIPANTS} participants "
            f"(its cost grows as N * 3**(N-1)), got {len(members)}"
        )
    others = [r for r in members if r != root]
    m = len(others)
    levels = sorted({costs[r] for r in members})
    col = {v: i for i, v in enumerate(levels)}
    bitcol = np.array([col[costs[r]] for r in others], dtype=np.int64)
    F, G = _solve(np.array(levels, dtype=float), bitcol, m)
    edges = []
    stack = [(root, col[costs[root]], (1 << m) - 1)]
    while stack:
        rank, c, A = stack.pop()
        order = 0
        while A:
            S, b = _first_send(F, G, A, c, m, bitcol)
            child = others[b]
            edges.append((rank, child, order))
            stack.append((child, int(bitcol[b]), S ^ (1 << b)))
            order += 1
            A ^= S
    return tree_from_edges(members, edges, root, "optimal")
