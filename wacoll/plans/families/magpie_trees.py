"""The magpie family's trees: MagPIe's shapes inside clusters and across the wide area.

MagPIe joins the clusters by a one-level flat tree between coordinators and uses a
binary tree inside each cluster (Kielmann et al., PPoPP 1999, Section 2).
:func:`coordinator_tree` is that broadcast tree (:func:`wacoll.trees.two_level`,
wide area first) and :func:`cluster_trees` its local parts; :func:`ordered_tree` is
the tree for data flowing to a coordinator whose subtrees are contiguous runs of
ranks, so that partial results keep rank order. ``intra`` (one of :data:`INTRA`)
chooses the shape inside clusters.

Both :mod:`wacoll.plans.families.magpie` and
:mod:`wacoll.plans.families.magpie_reduce` build on these trees; the magpie module
re-exports them.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.trees import children
>>> children(coordinator_tree(Topology.from_sizes([3, 3]), root=1), 1)
[3, 0, 2]
>>> children(ordered_tree(range(4), 0), 0)
[1, 3]
"""

from __future__ import annotations

import networkx as nx

from wacoll.errors import PlanError
from wacoll.trees.basic import children
from wacoll.trees.hierarchical import two_level

__all__ = ["INTRA", "validate_intra", "ordered_tree", "coordinator_tree", "cluster_trees"]

#: The intra-cluster tree shapes the family offers (MagPIe used binary trees).
INTRA = ("binary", "binomial")


def validate_intra(intra):
    """Raise :class:`PlanError` unless ``intra`` names one of :data:`INTRA`."""
    if intra not in INTRA:
        raise PlanError(
            f"intra must be one of {', '.join(map(repr, INTRA))}, got {intra!r}"
        )


def _graph(kids, nodes, root, name):
    tree = nx.DiGraph(root=root, name=name)
    tree.add_nodes_from(nodes)
    for p, cs in kids.items():
        for i, c in enumerate(cs):
            tree.add_edge(p, c, order=i)
    return tree


def _run_children(run, intra):
    """Children lists of a tree over ``run``, rooted at ``run[0]``, whose every subtree
    is a contiguous stretch of ``run`` following its root, children in run order."""
    kids = {}
    if intra == "binary":
        stack = [run]
        while stack:
            part = stack.pop()
            rest = part[1:]
            half = (len(rest) + 1) // 2
            subs = [s for s in (rest[:half], rest[half:]) if s]
            kids[part[0]] = [s[0] for s in subs]
            stack.extend(subs)
    else:  # binomial, smallest subtree first: i takes i+1, i+2, i+4, ... below
        n = len(run)  # its lowest set bit (all of them for i = 0)
        for i in range(n):
            low = i & -i or n
            kids[run[i]] = []
            m = 1
            while m < low and i + m < n:
                kids[run[i]].append(run[i + m])
                m *= 2
    return kids


def ordered_tree(members, coordinator, intra="binary"):
    """A tree over one cluster for data flowing to ``coordinator``, keeping rank order.

    Every subtree covers a contiguous run of the cluster's ranks (in rank order), so
    a node that combines its own contribution with its children's partial results
    in child order keeps the operands in rank order. A coordinator inside the run
    has two children: the tree over the ranks before it (combined on its left) and
    the tree over the ranks after it.

    Examples
    --------
    >>> from wacoll.trees import children
    >>> t = ordered_tree(range(8), 0)
    >>> children(t, 0), children(t, 1), children(t, 5)
    ([1, 5], [2, 4], [6, 7])
    >>> children(ordered_tree(range(8), 0, "binomial"), 0)
    [1, 2, 4]
    >>> children(ordered_tree([2, 5, 7, 9], 7), 7)
    [2, 9]
    """
    validate_intra(intra)
    members = sorted(members)
    k = members.index(coordinator)
    if k == 0:
        kids = _run_children(members, intra)
    else:
        runs = [run for run in (members[:k], members[k + 1 :]) if run]
        kids = {}
        for run in runs:
            kids.update(_run_children(run, intra))
        kids[coordinator] = [run[0] for run in runs]
    return _graph(kids, members, coordinator, f"ordered-{intra}")


def _restrict(tree, members, coordinator):
    """The part of ``tree`` inside one cluster, child orders renumbered from 0."""
    inside = set(members)
    kids = {v: [c for c in children(tree, v) if c in inside] for v in members}
    return _graph(kids, members, coordinator, tree.graph.get("name", "local"))


def coordinator_tree(topology, root=None, intra="binary"):
    """MagPIe's broadcast tree: :func:`wacoll.trees.two_level`, wide area first.

    ``root`` defaults to the lowest rank of cluster 0 (symmetrical operations).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.trees import children
    >>> children(coordinator_tree(Topology.from_sizes([2, 1])), 0)
    [2, 1]
    """
    validate_intra(intra)
    if root is None:
        root = topology.coordinators()[0]
    return two_level(topology, root, intra, wan_first=True)


def cluster_trees(topology, root=None, intra="binary"):
    """The local trees of :func:`coordinator_tree`, one per cluster, in cluster order.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.trees import children
    >>> trees = cluster_trees(Topology.from_sizes([3, 3]), root=1)
    >>> [children(t, t.graph["root"]) for t in trees]
    [[0, 2], [4, 5]]
    """
    full = coordinator_tree(topology, root, intra)
    coords = topology.coordinators(root)
    return [
        _restrict(full, members, coords[c]) for c, members in enumerate(topology.clusters)
    ]
