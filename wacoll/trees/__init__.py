"""Communication trees as networkx DiGraphs (edges parent -> child, ``order`` attribute).

One convention for every builder, so that any tree feeds any plan builder and any
cost model: nodes are ranks, each edge carries ``order``, the child's position in its
parent's send sequence (0 first), and ``graph["root"]`` names the root.
"""

from wacoll.trees.basic import (
    binary,
    binomial,
    chain,
    children,
    flat,
    from_parents,
    knomial,
    lam,
    parent,
    reduce_order,
    tree_root,
    validate_tree,
)
from wacoll.trees.cost import bcast_time, bcast_time_ts_tr, receive_times
from wacoll.trees.hetero import fnf, spoc
from wacoll.trees.hierarchical import paths_grouped, paths_hierarchical, two_level
from wacoll.trees.optimal import optimal
from wacoll.trees.registry import TREE_NAMES, make_tree

__all__ = [
    "flat",
    "chain",
    "binary",
    "binomial",
    "knomial",
    "lam",
    "children",
    "parent",
    "reduce_order",
    "tree_root",
    "validate_tree",
    "from_parents",
    "two_level",
    "paths_hierarchical",
    "paths_grouped",
    "make_tree",
    "TREE_NAMES",
    "spoc",
    "fnf",
    "optimal",
    "bcast_time",
    "bcast_time_ts_tr",
    "receive_times",
]
