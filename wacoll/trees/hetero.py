"""Broadcast trees for ranks of unequal speed: SPOC and Fastest-Node-First.

Both follow Banikazemi, Moorthy and Panda, "Efficient Collective Communication on
Heterogeneous Networks of Workstations" (ICPP 1998). Each rank ``r`` has a message
initiation cost ``costs[r]`` (``t_ini``): the time a send occupies it (see
:func:`wacoll.trees.cost.bcast_time`). ``members`` restricts the tree to a multicast
group that contains the root; the returned tree's nodes are exactly the members.

* :func:`spoc` (Section 4, Figure 2) keeps the binomial shape but puts the fastest
  ranks at the tree positions with the most descendants.
* :func:`fnf` (Section 6, Figure 3) grows the tree greedily: the next receiver is
  the fastest rank without the message, and its sender is the rank that can deliver
  it earliest.

Examples
--------
>>> from wacoll.trees import children
>>> costs = [100, 300, 300, 300, 300, 100, 300, 300]  # Banikazemi Figure 1
>>> children(spoc(costs), 0), children(fnf(costs), 0)
([5, 1, 3], [5, 1, 3, 6])
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

import networkx as nx

from wacoll.trees.basic import binomial
from wacoll.trees.cost import validate_costs, validate_members

__all__ = ["spoc", "fnf", "validate_arguments", "builder_doc", "tree_from_edges"]


def tree_from_edges(
    nodes: Iterable[int], edges: Iterable[tuple[int, int, int]], root: int, name: str
) -> nx.DiGraph:
    """A tree over ``nodes`` from ``(parent, child, order)`` triples, built in bulk.

    The same graph :func:`wacoll.trees.basic.from_parents` makes, but over an
    arbitrary node set (a multicast group) rather than ``range(n)``. The tree builders
    here and in :mod:`wacoll.trees.optimal` return their trees through it.
    """
    tree = nx.DiGraph(root=root, name=name)
    tree.add_nodes_from(nodes)
    tree.add_edges_from((p, c, {"order": k}) for p, c, k in edges)
    return tree


def validate_arguments(
    costs: Sequence[float], root: int, members: Iterable[int] | None
) -> tuple[list, list]:
    """The ``costs, root, members`` arguments every tree builder here and in
    :mod:`wacoll.trees.optimal` takes, checked (:func:`wacoll.trees.cost.validate_costs`,
    :func:`~wacoll.trees.cost.validate_members`): the costs as a list and the sorted
    member ranks."""
    costs = validate_costs(costs)
    return costs, validate_members(members, len(costs), root)


_ARGUMENTS_DOC = """\
    Parameters
    ----------
    costs : sequence of float
        ``costs[r]`` is rank ``r``'s message initiation cost (finite, >= 0).
    root : int
        The source of the broadcast.
    members : iterable of int, optional
        The participating ranks (must contain ``root``); default all ranks.

    Returns
    -------
    networkx.DiGraph
        A tree in the wacoll convention over the members, named ``"{name}"``.

    Raises
    ------
    TopologyError
        On invalid costs (see :func:`wacoll.costs.validate_t_ini`).
    PlanError
        On an invalid root or members{more_errors}.
"""


def builder_doc(more_errors=""):
    """Fill the ``{arguments}`` line of a tree builder's docstring.

    The builders of this module and :mod:`wacoll.trees.optimal` take the same
    arguments (checked by :func:`validate_arguments`); the decorator writes their
    Parameters, Returns and Raises sections once. The tree is named after the function;
    ``more_errors`` continues the Raises sentence.
    """

    def fill(fn):
        if fn.__doc__:  # None under python -OO
            fn.__doc__ = fn.__doc__.replace(
                "    {arguments}\n",
                _ARGUMENTS_DOC.format(name=fn.__name__, more_errors=more_errors),
            )
        return fn

    return fill


@builder_doc()
def spoc(
    costs: Sequence[float], root: int = 0, members: Iterable[int] | None = None
) -> nx.DiGraph:
    """Speed-Partitioned Ordered Chain tree: a binomial tree, fastest ranks highest.

    Builds the binomial tree (:func:`wacoll.trees.binomial`) over the ``N``
    participants as virtual ranks ``0..N-1``, sorts its positions by number of
    descendants (most first; ties by virtual rank) and the non-root participants by
    cost (cheapest first; ties by rank), and assigns them in that order. The root
    keeps position 0; each node sends to its largest subtree first, as in the
    binomial tree.

    {arguments}

    Examples
    --------
    Banikazemi's Figure 1(b): ranks 0 and 5 are fast, the others three times slower.

    >>> from wacoll.trees import children, bcast_time
    >>> costs = [100, 300, 300, 300, 300, 100, 300, 300]
    >>> t = spoc(costs)
    >>> children(t, 0), children(t, 5), bcast_time(t, costs)
    ([5, 1, 3], [2, 6], 500)
    >>> sorted(spoc(costs, root=3, members=[1, 3, 5]).edges)
    [(3, 1), (3, 5)]
    """
    costs, members = validate_arguments(costs, root, members)
    n = len(members)
    shape = binomial(n)
    # Parents have smaller virtual ranks, so one backward sweep counts descendants.
    desc = [0] * n
    for v in range(n - 1, 0, -1):
        (p,) = shape.pred[v]
        desc[p] += desc[v] + 1
    positions = sorted(range(1, n), key=lambda v: (-desc[v], v))
    ranks = sorted((r for r in members if r != root), key=lambda r: (costs[r], r))
    rank_of = [root] * n
    for v, r in zip(positions, ranks):
        rank_of[v] = r
    edges = [(rank_of[p], rank_of[c], k) for p, c, k in shape.edges(data="order")]
    return tree_from_edges(members, edges, root, "spoc")


@builder_doc()
def fnf(
    costs: Sequence[float], root: int = 0, members: Iterable[int] | None = None
) -> nx.DiGraph:
    """Fastest-Node-First tree (Banikazemi et al., Figure 3).

    Repeatedly picks as receiver the cheapest rank without the message (ties: lower
    rank) and as sender the rank with the message that can deliver it earliest,
    i.e. minimising ``R_k + costs[k]`` where ``R_k`` is when ``k`` is next free
    (ties: lower cost, then lower rank). The sender's clock advances by its cost and
    the receiver's starts there. A child's ``order`` is the position of that send
    among its parent's sends. ``O(N log N)`` with a heap.

    {arguments}

    Examples
    --------
    Banikazemi's Figure 1(c): the fast rank 5 is served first and relays.

    >>> from wacoll.trees import children, bcast_time
    >>> costs = [100, 300, 300, 300, 300, 100, 300, 300]
    >>> t = fnf(costs)
    >>> children(t, 0), children(t, 5), bcast_time(t, costs)
    ([5, 1, 3, 6], [2, 4, 7], 400)
    >>> sorted(fnf([5, 1, 9], root=2).edges(data="order"))
    [(1, 0, 0), (2, 1, 0)]
    """
    costs, members = validate_arguments(costs, root, members)
    receivers = sorted((r for r in members if r != root), key=lambda r: (costs[r], r))
    sent = {root: 0}
    # Heap entries: (time the rank's next send would arrive, its cost, rank).
    heap = [(costs[root], costs[root], root)]
    edges = []
    heappush, heapreplace = heapq.heappush, heapq.heapreplace
    for r in receivers:
        arrive, c, s = heap[0]
        k = sent[s]
        sent[s] = k + 1
        sent[r] = 0
        edges.append((s, r, k))
        heapreplace(heap, (arrive + c, c, s))
        cr = costs[r]
        heappush(heap, (arrive + cr, cr, r))
    return tree_from_edges(members, edges, root, "fnf")
