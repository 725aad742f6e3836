"""A tree as plain data: the same value, digest and text on every rank.

A :class:`networkx.DiGraph` compares by identity and prints its address, so two ranks
that pass the same tree would seem to disagree, and a proof could not be keyed by it.
:func:`freeze_tree` turns a tree into a :class:`FrozenTree` (its name and its edges
``(parent, child, order)`` in sorted order), which compares, hashes, pickles and
prints by value; :func:`thaw_tree` gives the graph back.

Examples
--------
>>> from wacoll.trees import binomial
>>> frozen = freeze_tree(binomial(4))
>>> frozen.edges
((0, 1, 1), (0, 2, 0), (2, 3, 0))
>>> frozen == freeze_tree(binomial(4)), hash(frozen) == hash(freeze_tree(binomial(4)))
(True, True)
>>> sorted(thaw_tree(frozen).edges(data="order")) == sorted(binomial(4).edges(data="order"))
True
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import networkx as nx

from wacoll.errors import PlanError

__all__ = ["FrozenTree", "freeze_tree", "thaw_tree"]


class FrozenTree(NamedTuple):
    """A tree by value: ``name``, ``nodes`` (sorted ranks) and ``edges``, sorted
    ``(parent, child, order)`` triples (``order`` None where the edge has none: the
    tree's check then says so)."""

    name: str
    nodes: tuple
    edges: tuple


def _rank(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise PlanError(f"a tree's {what} must be an integer rank, got {value!r}")
    return int(value)


def freeze_tree(tree: nx.DiGraph) -> FrozenTree:
    """``tree`` (a :class:`networkx.DiGraph`, or already a :class:`FrozenTree`) as a
    :class:`FrozenTree`.

    Raises
    ------
    PlanError
        A node that is not an integer rank, or an ``order`` that is not an integer.
    """
    if isinstance(tree, FrozenTree):
        return tree
    if not isinstance(tree, nx.DiGraph):
        raise PlanError(f"a tree must be a networkx.DiGraph, got {type(tree).__name__}")
    nodes = tuple(sorted(_rank(v, "node") for v in tree.nodes))
    edges = []
    for p, c, order in tree.edges(data="order"):
        if order is not None:
            order = _rank(order, f"edge {p} -> {c} 'order'")
        edges.append((_rank(p, "node"), _rank(c, "node"), order))
    name = tree.graph.get("name", "custom")
    return FrozenTree(
        name if isinstance(name, str) else "custom",
        nodes,
        tuple(sorted(edges, key=lambda e: (e[0], e[1]))),
    )


def thaw_tree(frozen: FrozenTree) -> nx.DiGraph:
    """The :class:`networkx.DiGraph` a :class:`FrozenTree` describes."""
    tree = nx.DiGraph(name=frozen.name)
    tree.add_nodes_from(frozen.nodes)
    for p, c, order in frozen.edges:
        if order is None:
            tree.add_edge(p, c)
        else:
            tree.add_edge(p, c, order=order)
    return tree
