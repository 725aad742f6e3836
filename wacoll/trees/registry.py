"""Trees by name, so that plans, the command line and scripts can name a tree.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.trees import make_tree, children
>>> children(make_tree("lam", Topology.single(32), operation="reduce"), 12)
[13, 14]
>>> sorted(TREE_NAMES)[:3]
['binary', 'binomial', 'chain']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import networkx as nx

if TYPE_CHECKING:
    from wacoll.topology import Topology

import re

from wacoll.errors import PlanError, TopologyError
from wacoll.trees import basic, hierarchical
from wacoll.trees.hetero import fnf, spoc
from wacoll.trees.optimal import optimal

__all__ = ["make_tree", "TREE_NAMES"]

#: Names :func:`make_tree` knows; ``knomial<k>`` (e.g. ``knomial4``) is accepted too.
TREE_NAMES = (
    "flat",
    "chain",
    "binary",
    "binomial",
    "lam",
    "fnf",
    "spoc",
    "optimal",
    "two-level",
    "two-level-binomial",
    "paths-hierarchical",
    "paths-grouped",
)

_HETERO = {"fnf": fnf, "spoc": spoc, "optimal": optimal}


def _costs(topology, name):
    if topology.t_ini is None:
        raise TopologyError(
            f"the {name!r} tree needs per-rank initiation costs: give "
            f"the topology t_ini (Topology.from_sizes(..., t_ini=[...]), "
            f"or a t_ini entry in a topology file)"
        )
    return list(topology.t_ini)


def make_tree(
    name: str,
    topology: Topology,
    root: int = 0,
    operation: str = "bcast",
    group_size: int = 4,
) -> nx.DiGraph:
    """Build the tree called ``name`` for ``topology`` rooted at ``root``.

    Parameters
    ----------
    name : str
        One of :data:`TREE_NAMES` or ``knomial<k>``.
    topology : Topology
        Supplies the size, the clusters (two-level and PATHS trees) and ``t_ini``
        (heterogeneous trees).
    root : int
    operation : {"bcast", "reduce"}
        Selects LAM's broadcast or reduce tree, and whether two-level trees serve the
        wide area first (broadcast) or their own cluster first (reduce).
    group_size : int
        Group size of ``paths-grouped``.
    """
    n = topology.size
    if operation not in ("bcast", "reduce"):
        raise PlanError(f"operation must be 'bcast' or 'reduce', got {operation!r}")
    simple = {
        "flat": basic.flat,
        "chain": basic.chain,
        "binary": basic.binary,
        "binomial": basic.binomial,
    }
    if name in simple:
        tree = simple[name](n, root)
        if name == "binomial" and operation == "reduce":
            tree = basic.reduce_order(tree)  # MPICH receives the smallest subtree first
        return tree
    if name == "lam":
        return basic.lam(n, root, operation)
    m = re.fullmatch(r"knomial(\d+)", name or "")
    if m:
        tree = basic.knomial(n, int(m.group(1)), root)
        return basic.reduce_order(tree) if operation == "reduce" else tree
    if name in _HETERO:
        return _HETERO[name](_costs(topology, name), root=root)
    wan_first = operation == "bcast"
    if name == "two-level":
        return hierarchical.two_level(topology, root, "binary", wan_first)
    if name == "two-level-binomial":
        return hierarchical.two_level(topology, root, "binomial", wan_first)
    if name == "paths-hierarchical":
        return hierarchical.paths_hierarchical(topology, root, remote_first=wan_first)
    if name == "paths-grouped":
        return hierarchical.paths_grouped(topology, group_size, root)
    raise PlanError(f"unknown tree {name!r}; known: {', '.join(TREE_NAMES)}, knomial<k>")
