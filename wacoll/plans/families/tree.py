"""The **tree** family: broadcast, reduce and allreduce over any tree (PATHS/LAM).

A tree is given as a :class:`networkx.DiGraph` by the tree convention, or by name
(see :func:`wacoll.trees.make_tree`; ``group_size`` sizes PATHS's grouped scheme). Children are combined in script order, or in
arrival order where the level is commutative and ``arrival=True`` (PATHS).
Allreduce is a reduce to the root followed by a broadcast, each over its own tree
(LAM uses different reduce and broadcast trees).

Examples
--------
>>> from wacoll import Topology, trees
>>> from wacoll.plans.families import tree as tree_family
>>> plan = tree_family.reduce(Topology.single(32), tree=trees.lam(32))
>>> [str(s) for s in plan.programs[12]]
['copy [0] in -> acc', 'recv-combine 13 [0] into acc', 'recv-combine 14 [0] into acc', 'send 8 [0] from acc']
"""

from __future__ import annotations

from wacoll.plans.builder import PlanBuilder
from wacoll.plans.patterns import EACH, tree_bcast, tree_reduce
from wacoll.trees import make_tree
from wacoll.trees.basic import validate_tree
from wacoll.trees.frozen import FrozenTree, thaw_tree

__all__ = ["bcast", "reduce", "allreduce", "BUILDERS", "OPTIONS"]


def _tree(tree, topology, root, operation, group_size=4):
    if tree is None:
        tree = "binomial"
    if isinstance(tree, FrozenTree):  # a tree given as a graph, as plain data
        tree = thaw_tree(tree)
    if isinstance(tree, str):
        return tree, make_tree(
            tree, topology, root=root, operation=operation, group_size=group_size
        )
    validate_tree(tree, n=topology.size, root=root)
    return tree.graph.get("name", "custom"), tree


def bcast(topology, *, tree=None, root=0, count=1, segments=1, itemsize=1, group_size=4):
    """Broadcast from ``root`` down ``tree`` (default: binomial), pipelined by segment.

    Examples
    --------
    >>> from wacoll import Topology
    >>> bcast(Topology.single(4), tree="chain", count=8, segments=2).prove().messages
    6
    """
    b = PlanBuilder(
        "bcast", topology, root=root, count=count, segments=segments, itemsize=itemsize
    )
    name, t = _tree(tree, topology, b.root, "bcast", group_size)
    tree_bcast(b, t, b.all_blocks, segments=EACH)
    return b.build(family="tree", algorithm=name, tree=name, segments=segments)


def reduce(
    topology,
    *,
    tree=None,
    root=0,
    count=1,
    segments=1,
    level=None,
    itemsize=1,
    arrival=False,
    group_size=4,
):
    """Reduce to ``root`` up ``tree`` (default: binomial), pipelined by segment.

    Examples
    --------
    >>> from wacoll import Topology
    >>> reduce(Topology.single(5), tree="binomial").prove().max_sends
    1
    """
    b = PlanBuilder(
        "reduce",
        topology,
        root=root,
        count=count,
        segments=segments,
        level=level,
        itemsize=itemsize,
    )
    name, t = _tree(tree, topology, b.root, "reduce", group_size)
    tree_reduce(b, t, b.all_blocks, segments=EACH, arrival=arrival)
    return b.build(
        family="tree", algorithm=name, tree=name, segments=segments, arrival=arrival
    )


def allreduce(
    topology,
    *,
    tree=None,
    bcast_tree=None,
    root=0,
    count=1,
    segments=1,
    level=None,
    itemsize=1,
    arrival=False,
    group_size=4,
):
    """Reduce to ``root`` up ``tree``, then broadcast down ``bcast_tree``.

    ``bcast_tree`` defaults to the reduce tree's broadcast counterpart: the same name
    built for broadcast (for ``"lam"`` that is LAM's other tree), or the same graph.

    Examples
    --------
    >>> from wacoll import Topology
    >>> allreduce(Topology.single(8), tree="lam", level="associative").prove().messages
    14
    """
    b = PlanBuilder(
        "allreduce",
        topology,
        count=count,
        segments=segments,
        level=level,
        itemsize=itemsize,
    )
    name, t = _tree(tree, topology, root, "reduce", group_size)
    if bcast_tree is None:
        bcast_tree = tree if isinstance(tree, str) or tree is None else t
    bname, bt = _tree(bcast_tree, topology, root, "bcast", group_size)
    tree_reduce(b, t, b.all_blocks, segments=EACH, arrival=arrival)
    tree_bcast(b, bt, b.all_blocks, segments=EACH)
    return b.build(
        family="tree",
        algorithm=name if bname == name else f"{name}+{bname}",
        tree=name,
        bcast_tree=bname,
        root=root,
        segments=segments,
        arrival=arrival,
    )


BUILDERS = {"bcast": bcast, "reduce": reduce, "allreduce": allreduce}

#: The keyword options each builder takes, in its signature's order: what
#: :func:`wacoll.plans.families.options` reports and :func:`wacoll.plans.build` accepts.
OPTIONS = {
    "bcast": ("tree", "root", "count", "segments", "itemsize", "group_size"),
    "reduce": (
        "tree",
        "root",
        "count",
        "segments",
        "level",
        "itemsize",
        "arrival",
        "group_size",
    ),
    "allreduce": (
        "tree",
        "bcast_tree",
        "root",
        "count",
        "segments",
        "level",
        "itemsize",
        "arrival",
        "group_size",
    ),
}
