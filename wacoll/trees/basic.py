"""Homogeneous tree shapes: flat, chain, binary, binomial, k-nomial and LAM-MPI's.

Every builder returns a :class:`networkx.DiGraph` whose nodes are the ranks
``0..n-1`` and whose edges run parent -> child with an integer attribute ``order``:
the child's position in its parent's send sequence (0 first). The graph attribute
``root`` names the root.

Examples
--------
>>> from wacoll.trees import binomial, children
>>> t = binomial(8)
>>> children(t, 0)
[4, 2, 1]
>>> children(t, 4)
[6, 5]
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence

import networkx as nx

from wacoll.errors import PlanError

__all__ = [
    "flat",
    "chain",
    "binary",
    "binomial",
    "knomial",
    "lam",
    "children",
    "parent",
    "tree_root",
    "validate_tree",
    "from_parents",
    "reduce_order",
]


def validate_tree_args(n: int, root: int) -> tuple[int, int]:
    """Validate ``n`` and ``root``; return them as Python ints (numpy ints welcome)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise PlanError(f"a tree needs at least one rank, got n={n!r}")
    if (
        isinstance(root, bool)
        or not isinstance(root, numbers.Integral)
        or not (0 <= root < n)
    ):
        raise PlanError(f"root {root!r} is not a rank of 0..{n - 1}")
    return int(n), int(root)


def from_parents(
    children_of: Mapping[int, Sequence[int]], n: int, root: int, name: str
) -> nx.DiGraph:
    """A tree from a mapping rank -> ordered list of children.

    Examples
    --------
    >>> t = from_parents({0: [2, 1]}, 3, 0, "custom")
    >>> children(t, 0), t.graph["name"]
    ([2, 1], 'custom')
    """
    tree = nx.DiGraph(root=root, name=name)
    tree.add_nodes_from(range(n))
    for p, kids in children_of.items():
        for i, c in enumerate(kids):
            tree.add_edge(p, c, order=i)
    return tree


def _relabel(vchildren, n, root, name):
    """Build from children lists over virtual ranks (root at 0), rotated by ``root``."""
    real = {
        (v + root) % n: [(c + root) % n for c in kids] for v, kids in vchildren.items()
    }
    return from_parents(real, n, root, name)


def flat(n: int, root: int = 0) -> nx.DiGraph:
    """The root sends to every other rank, in rank order after the root.

    Examples
    --------
    >>> children(flat(4, root=2), 2)
    [3, 0, 1]
    """
    n, root = validate_tree_args(n, root)
    return _relabel({0: list(range(1, n))}, n, root, "flat")


def chain(n: int, root: int = 0) -> nx.DiGraph:
    """Each rank sends to its successor (rank order, rotated to start at the root).

    Examples
    --------
    >>> sorted(chain(3, root=1).edges)
    [(1, 2), (2, 0)]
    """
    n, root = validate_tree_args(n, root)
    return _relabel({v: [v + 1] for v in range(n - 1)}, n, root, "chain")


def binary(n: int, root: int = 0) -> nx.DiGraph:
    """A complete binary tree in heap order over ranks rotated to start at the root.

    Examples
    --------
    >>> children(binary(6), 1)
    [3, 4]
    """
    n, root = validate_tree_args(n, root)
    return _relabel(
        {v: [c for c in (2 * v + 1, 2 * v + 2) if c < n] for v in range(n)},
        n,
        root,
        "binary",
    )


def knomial(n: int, k: int, root: int = 0) -> nx.DiGraph:
    """A k-nomial tree; each parent sends to its largest subtree first.

    Virtual rank ``v`` (relative to the root) receives from ``v`` with its lowest
    nonzero base-``k`` digit cleared, as in MPICH's k-nomial broadcast.

    Examples
    --------
    >>> children(knomial(9, 3), 0)
    [3, 6, 1, 2]
    """
    n, root = validate_tree_args(n, root)
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise PlanError(f"a k-nomial tree needs k >= 2, got k={k!r}")
    vchildren = {}
    for v in range(n):
        kids = []
        mask = 1
        # v's children sit at digit positions below v's lowest nonzero digit.
        while mask < n and (v // mask) % k == 0:
            mask *= k
        mask //= k
        while mask >= 1:
            for j in range(1, k):
                c = v + j * mask
                if c < n:
                    kids.append(c)
            mask //= k
        vchildren[v] = kids
    return _relabel(vchildren, n, root, f"knomial{k}")


def binomial(n: int, root: int = 0) -> nx.DiGraph:
    """A binomial tree (MPICH's broadcast tree): largest subtree first.

    Examples
    --------
    >>> children(binomial(5), 0), children(binomial(5), 2)
    ([4, 2, 1], [3])
    """
    tree = knomial(n, 2, root)
    tree.graph["name"] = "binomial"
    return tree


def lam(n: int, root: int = 0, operation: str = "reduce") -> nx.DiGraph:
    """LAM-MPI 6.5's trees: linear up to 4 processes, logarithmic beyond.

    LAM's reduce and broadcast use different logarithmic trees. In the reduce tree
    a virtual rank receives, for increasing bit ``i``, from ``v | 2**i`` while bit ``i``
    of ``v`` is clear, then sends to ``v`` with its lowest set bit cleared; the
    broadcast tree sends from ``v`` to ``v | 2**i`` for bits above ``v``'s highest bit.

    Parameters
    ----------
    n : int
        Number of ranks.
    root : int
        The root (rank 0 in LAM's Allreduce).
    operation : {"reduce", "bcast"}
        Which of LAM's two trees.

    Examples
    --------
    >>> t = lam(32)
    >>> children(t, 12), parent(t, 12)
    ([13, 14], 8)
    >>> children(lam(32, operation="bcast"), 1)
    [3, 5, 9, 17]
    >>> children(lam(4), 0)
    [1, 2, 3]
    """
    n, root = validate_tree_args(n, root)
    if operation not in ("reduce", "bcast"):
        raise PlanError(f"lam() operation must be 'reduce' or 'bcast', got {operation!r}")
    if n <= 4:
        tree = flat(n, root)
        tree.graph["name"] = f"lam-{operation}"
        return tree
    vchildren: dict[int, list[int]] = {v: [] for v in range(n)}
    for v in range(1, n):
        if operation == "reduce":
            p = v & (v - 1)  # clear the lowest set bit
        else:
            p = v & ~(1 << (v.bit_length() - 1))  # clear the highest set bit
        vchildren[p].append(v)
    for kids in vchildren.values():
        kids.sort()
    return _relabel(vchildren, n, root, f"lam-{operation}")


def reduce_order(tree: nx.DiGraph) -> nx.DiGraph:
    """The same tree with each parent's children in ascending order after the root.

    A reduce over a binomial or k-nomial tree receives from its smallest subtree
    first, so that operands stay in rank order: the reverse of the broadcast order.

    Examples
    --------
    >>> children(reduce_order(binomial(8)), 0)
    [1, 2, 4]
    >>> children(reduce_order(knomial(9, 3)), 0)
    [1, 2, 3, 6]
    """
    root = tree_root(tree)
    n = tree.number_of_nodes()
    kids = {p: sorted(tree.succ[p], key=lambda c: (c - root) % n) for p in tree.nodes}
    out = from_parents(kids, 0, root, tree.graph.get("name", "tree"))
    out.add_nodes_from(tree.nodes)
    return out


def children(tree: nx.DiGraph, node: int) -> list:
    """The children of ``node`` in send order."""
    return [
        c
        for c, _ in sorted(
            ((c, d["order"]) for c, d in tree.succ[node].items()),
            key=lambda item: item[1],
        )
    ]


def parent(tree: nx.DiGraph, node: int) -> int | None:
    """The parent of ``node``, or ``None`` for the root."""
    preds = list(tree.pred[node])
    return preds[0] if preds else None


def tree_root(tree: nx.DiGraph) -> int:
    """The one node without a parent."""
    roots = [v for v in tree.nodes if tree.in_degree(v) == 0]
    if len(roots) != 1:
        raise PlanError(f"a tree has exactly one root; this graph has {len(roots)}")
    return roots[0]


def _is_arborescence(tree: nx.DiGraph) -> bool:
    """Whether ``tree`` is an arborescence: one node without a parent, every other
    with one, all reached from the first. (What ``networkx.is_arborescence`` says,
    without its first call's dispatch set-up: tens of milliseconds in a process's
    first call of a shape.)

    Examples
    --------
    >>> _is_arborescence(binomial(5)), _is_arborescence(nx.DiGraph([(0, 1), (1, 0)]))
    (True, False)
    """
    pred = tree.pred
    roots = [v for v in tree if not pred[v]]
    if len(roots) != 1 or any(len(pred[v]) > 1 for v in tree):
        return False
    seen, todo = {roots[0]}, [roots[0]]
    while todo:
        for child in tree.succ[todo.pop()]:
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return len(seen) == len(tree)


def validate_tree(
    tree: nx.DiGraph,
    n: int | None = None,
    root: int | None = None,
    members: Iterable[int] | None = None,
) -> int:
    """Check the tree convention and return the root.

    A valid tree is an arborescence over the expected ranks whose edges each carry a
    distinct integer ``order`` per parent, from 0 up.

    Examples
    --------
    >>> validate_tree(binomial(4), n=4, root=0)
    0
    >>> import networkx as nx
    >>> validate_tree(nx.DiGraph([(0, 1)]), n=2)
    Traceback (most recent call last):
    ...
    wacoll.errors.PlanError: edge 0 -> 1 has no integer 'order' attribute
    """
    if not isinstance(tree, nx.DiGraph):
        raise PlanError("a tree must be a networkx.DiGraph")
    nodes = set(tree.nodes)
    expected = (
        set(range(n))
        if members is None and n is not None
        else (set(members) if members is not None else None)
    )
    if expected is not None and nodes != expected:
        extra, lacking = sorted(nodes - expected), sorted(expected - nodes)
        what = (
            f"rank {lacking[0]} is missing"
            if lacking
            else f"node {extra[0]} is not a rank"
        )
        raise PlanError(f"the tree does not span the ranks: {what}")
    if not _is_arborescence(tree):
        raise PlanError(
            "the graph is not a tree (arborescence) with edges parent -> child"
        )
    for p in tree.nodes:
        orders = []
        for c, data in tree.succ[p].items():
            o = data.get("order")
            if isinstance(o, bool) or not isinstance(o, int):
                raise PlanError(f"edge {p} -> {c} has no integer 'order' attribute")
            orders.append(o)
        if sorted(orders) != list(range(len(orders))):
            raise PlanError(
                f"the children of {p} have orders {sorted(orders)}; "
                f"expected 0..{len(orders) - 1}"
            )
    r = tree_root(tree)
    if root is not None and r != root:
        raise PlanError(f"the tree is rooted at {r}, but the operation's root is {root}")
    return r
